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
    /// `COMMAND GETKEYS args…` (see [`crate::store::UserScripts::command_keys`]).
    pub(super) async fn keys_of(
        &mut self,
        args: &[String],
    ) -> CmdResult<Result<Vec<String>, crate::store::Refusal>> {
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
                    crate::model::error::ErrorKind::Server => {
                        Ok(Err(crate::store::Refusal(e.detail)))
                    }
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
        other => ScriptReply::Other(cli_text(&other)),
    }
}

/// A reply as `redis-cli` prints it on a terminal — `(integer) 1`, `"text"`, `(nil)`, a
/// table's elements numbered one per line, nested ones indented under their number — so a
/// script's reply outside the convention reads as the user would see it in `redis-cli`, not as
/// redis-rs's debug text (issue 40).
pub(crate) fn cli_text(v: &redis::Value) -> String {
    let mut out = String::new();
    write_cli(v, "", &mut out);
    out.truncate(out.trim_end_matches('\n').len());
    out
}

/// Appends `v`, its lines after the first starting with `indent` (redis-cli's
/// `cliFormatReplyTTY`); every element ends with a newline.
fn write_cli(v: &redis::Value, indent: &str, out: &mut String) {
    use redis::Value as V;
    use std::fmt::Write as _;
    let quoted = |b: &[u8]| format!("{:?}", String::from_utf8_lossy(b));
    let line = match v {
        V::Nil => "(nil)".to_string(),
        V::Int(n) => format!("(integer) {n}"),
        V::Okay => "OK".to_string(),
        V::SimpleString(s) => s.clone(),
        V::BulkString(b) => quoted(b),
        V::VerbatimString { text, .. } => quoted(text.as_bytes()),
        V::Double(d) => format!("(double) {d}"),
        V::Boolean(b) => format!("({b})"),
        V::BigNumber(n) => format!("(big number) {n:?}"),
        V::ServerError(e) => format!("(error) {e}"),
        V::Attribute { data, .. } => return write_cli(data, indent, out),
        V::Array(items) | V::Set(items) | V::Push { data: items, .. } => {
            let mark = if matches!(v, V::Set(_)) { '~' } else { ')' };
            if items.is_empty() {
                out.push_str(if mark == '~' {
                    "(empty set)\n"
                } else {
                    "(empty array)\n"
                });
                return;
            }
            let width = items.len().to_string().len();
            let inner = format!("{indent}{}", " ".repeat(width + 2));
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(indent);
                }
                let _ = write!(out, "{:>width$}{mark} ", i + 1);
                write_cli(item, &inner, out);
            }
            return;
        }
        V::Map(pairs) => {
            if pairs.is_empty() {
                out.push_str("(empty hash)\n");
                return;
            }
            let width = pairs.len().to_string().len();
            let inner = format!("{indent}{}", " ".repeat(width + 2));
            for (i, (k, val)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(indent);
                }
                let _ = write!(out, "{:>width$}# ", i + 1);
                let mut key = String::new();
                write_cli(k, &inner, &mut key);
                out.push_str(key.trim_end_matches('\n'));
                out.push_str(" => ");
                write_cli(val, &inner, out);
            }
            return;
        }
        other => format!("{other:?}"),
    };
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value as V;

    /// A table reply reads as redis-cli prints it (issue 40: it was redis-rs's debug text,
    /// `Array([Int(1), BulkString(...)])`): numbered elements, nested tables indented under
    /// their number, the widths of ten elements and more aligned, empties named.
    #[test]
    fn a_table_reply_reads_as_redis_cli_prints_it() {
        let table = V::Array(vec![
            V::Int(1),
            V::BulkString(b"tok".to_vec()),
            V::Array(vec![V::Nil, V::SimpleString("OK".into())]),
        ]);
        assert_eq!(
            cli_text(&table),
            "1) (integer) 1\n2) \"tok\"\n3) 1) (nil)\n   2) OK"
        );
        let ten = V::Array((1..=10).map(V::Int).collect());
        let text = cli_text(&ten);
        assert!(text.starts_with(" 1) (integer) 1\n 2)"), "{text}");
        assert!(text.ends_with("\n10) (integer) 10"), "{text}");
        assert_eq!(cli_text(&V::Array(vec![])), "(empty array)");
        assert_eq!(
            script_reply(table),
            ScriptReply::Other("1) (integer) 1\n2) \"tok\"\n3) 1) (nil)\n   2) OK".into())
        );
    }
}
