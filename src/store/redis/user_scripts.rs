//! The user's own Lua scripts on a real Redis (the `script` release method): `SCRIPT LOAD`,
//! and `EVALSHA` with the convention's arguments, its reply read into a [`ScriptReply`].

use super::{Link, RedisConn, classify, unexpected_reply};
use crate::model::error::CmdResult;
use crate::model::script::{ScriptReply, UserScript};

impl<K: Link> RedisConn<K> {
    /// `SCRIPT LOAD text`: the SHA1 the server names it by (a cluster loads it on every
    /// primary). A script that does not compile is the server's error.
    pub(super) async fn load_user(&mut self, text: &str) -> CmdResult<String> {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(text)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    /// `EVALSHA sha 1 key token ttl_ms`. As the built-in release: built in place; a server
    /// that lost its script cache (restarted, failed over) answers `NOSCRIPT`, and the script
    /// is loaded and sent again.
    pub(super) async fn eval_user(
        &mut self,
        script: &UserScript,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> CmdResult<ScriptReply> {
        let build = |cmd: &mut redis::Cmd| {
            cmd.clear();
            cmd.arg("EVALSHA")
                .arg(&script.sha1)
                .arg(1)
                .arg(key)
                .arg(token)
                .arg(ttl_ms);
        };
        build(&mut self.cmd);
        let reply = match self.send_cmd().await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.load_user(&script.text).await?;
                build(&mut self.cmd);
                self.send_cmd().await
            }
            other => other,
        };
        Ok(script_reply(reply.map_err(classify)?))
    }
}

impl<K: Link> RedisConn<K> {
    /// `COMMAND GETKEYS args…` (see [`crate::store::LockConn::command_keys`]).
    pub(super) async fn keys_of(
        &mut self,
        args: &[String],
    ) -> CmdResult<Result<Vec<String>, String>> {
        let mut cmd = redis::cmd("COMMAND");
        cmd.arg("GETKEYS").arg(args);
        match self.conn.query_node::<redis::Value>(&cmd).await {
            Ok(redis::Value::Array(keys)) => Ok(Ok(keys
                .iter()
                .map(|k| match k {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect())),
            Ok(other) => Err(unexpected_reply(
                "COMMAND GETKEYS",
                &other,
                "a list of keys",
            )),
            // The server's refusal is its answer; a broken connection is not.
            Err(e) => {
                let e = classify(e);
                match e.kind {
                    crate::model::error::ErrorKind::Server => Ok(Err(e.detail)),
                    _ => Err(e),
                }
            }
        }
    }

    /// One command of a step given as commands, its reply read as a script's.
    pub(super) async fn user_command(&mut self, args: &[String]) -> CmdResult<ScriptReply> {
        self.cmd.clear();
        for a in args {
            self.cmd.arg(a);
        }
        Ok(script_reply(self.send_cmd().await.map_err(classify)?))
    }
}

/// A script's reply in the shapes the convention reads (a Lua `true` is `1`, `false` nil, as
/// RESP2 gives them).
fn script_reply(v: redis::Value) -> ScriptReply {
    match v {
        redis::Value::Int(n) => ScriptReply::Int(n),
        redis::Value::Boolean(true) => ScriptReply::Int(1),
        redis::Value::Nil | redis::Value::Boolean(false) => ScriptReply::Nil,
        redis::Value::Okay => ScriptReply::Ok,
        redis::Value::SimpleString(s) if s == "OK" => ScriptReply::Ok,
        redis::Value::BulkString(b) => ScriptReply::Text(String::from_utf8_lossy(&b).into_owned()),
        redis::Value::SimpleString(s) => ScriptReply::Text(s),
        other => ScriptReply::Other(format!("{other:?}")),
    }
}
