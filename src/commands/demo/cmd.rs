//! One command of a demo, declared once. A [`Cmd`] names what is sent; its [`Cmd::argv`]
//! spells the command's name and arguments, and the rest is derived from that one list: the
//! redis-cli line the transcript prints ([`Cmd::cli`], quoted as redis-cli would need it to
//! send the same bytes) and the `redis::Cmd` ([`Cmd::to_redis`]). [`Cmd::send`] sends it on a
//! lock connection (a real server or the model) through the `LockConn` call of that command,
//! and [`Reply::cli`] prints the answer as redis-cli does.
//!
//! The scripts are shown as the demo always showed them: the canonical compare-and-delete as
//! `EVAL "<its text>" 1 key token` (one short line, readable in place), lockbench's fencing
//! scripts as `EVALSHA <sha1> …`, their text listed once at the top of the fencing story.

use crate::model::error::{CmdResult, ErrorKind};
use crate::store::{
    CANONICAL_CAD_LUA, FENCED_ACQUIRE_LUA, LockConn, RESOURCE_READ_LUA, RESOURCE_WRITE_LUA,
    ReadOutcome, WriteOutcome, fence_arg,
};

/// One command a demo sends (or, for [`Cmd::Pexpire`] in the crash story, names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cmd<'a> {
    /// `SET key value NX PX ttl`.
    SetNxPx {
        /// The lock.
        key: &'a str,
        /// The token.
        value: &'a str,
        /// The TTL in ms.
        ttl_ms: u64,
    },
    /// `SETNX key value`.
    SetNx {
        /// The lock.
        key: &'a str,
        /// The token.
        value: &'a str,
    },
    /// `PEXPIRE key ms`.
    Pexpire {
        /// The lock.
        key: &'a str,
        /// The TTL in ms.
        ms: u64,
    },
    /// `DEL key [key ...]`.
    Del(Vec<&'a str>),
    /// `GET key`.
    Get(&'a str),
    /// `GETDEL key`.
    GetDel(&'a str),
    /// `EXISTS key`.
    Exists(&'a str),
    /// `PTTL key`.
    Pttl(&'a str),
    /// `DELEX key IFEQ token` (Redis 8.4).
    Delex {
        /// The lock.
        key: &'a str,
        /// The token it must hold.
        token: &'a str,
    },
    /// The canonical compare-and-delete script on `key` with `token`, shown as `EVAL`.
    CompareAndDelete {
        /// The lock.
        key: &'a str,
        /// The token it must hold.
        token: &'a str,
    },
    /// The fenced acquire script: `SET NX PX` on `lock`, then `INCR` of `fence`.
    FencedAcquire {
        /// The lock.
        lock: &'a str,
        /// Its fence counter.
        fence: &'a str,
        /// The token.
        token: &'a str,
        /// The TTL in ms.
        ttl_ms: u64,
    },
    /// The resource read script on `res`, registering `fence` (none: `-`).
    ResourceRead {
        /// The resource.
        res: &'a str,
        /// The reader's fence.
        fence: Option<u64>,
    },
    /// The resource write script: `value` into `res` by the holder of `token` on `lock`.
    ResourceWrite {
        /// The resource.
        res: &'a str,
        /// The lock the writer believes it holds.
        lock: &'a str,
        /// The writer's token.
        token: &'a str,
        /// The writer's fence.
        fence: Option<u64>,
        /// The value written.
        value: u64,
    },
    /// `HGET res value`: the resource's value.
    ResourceValue(&'a str),
    /// `CLIENT PAUSE ms ALL` (sent on a connection of its own, not through a lock connection).
    ClientPause {
        /// How long, in ms.
        ms: u64,
    },
}

/// A script's SHA1, the name `EVALSHA` sends.
pub fn sha(lua: &str) -> String {
    redis::Script::new(lua).get_hash().to_string()
}

impl Cmd<'_> {
    /// The command's name and arguments, as sent: the one place each command is spelled.
    pub fn argv(&self) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        match self {
            Cmd::SetNxPx { key, value, ttl_ms } => {
                s(&["SET", key, value, "NX", "PX", &ttl_ms.to_string()])
            }
            Cmd::SetNx { key, value } => s(&["SETNX", key, value]),
            Cmd::Pexpire { key, ms } => s(&["PEXPIRE", key, &ms.to_string()]),
            Cmd::Del(keys) => std::iter::once("DEL")
                .chain(keys.iter().copied())
                .map(str::to_string)
                .collect(),
            Cmd::Get(key) => s(&["GET", key]),
            Cmd::GetDel(key) => s(&["GETDEL", key]),
            Cmd::Exists(key) => s(&["EXISTS", key]),
            Cmd::Pttl(key) => s(&["PTTL", key]),
            Cmd::Delex { key, token } => s(&["DELEX", key, "IFEQ", token]),
            Cmd::CompareAndDelete { key, token } => {
                s(&["EVAL", CANONICAL_CAD_LUA, "1", key, token])
            }
            Cmd::FencedAcquire {
                lock,
                fence,
                token,
                ttl_ms,
            } => s(&[
                "EVALSHA",
                &sha(FENCED_ACQUIRE_LUA),
                "2",
                lock,
                fence,
                token,
                &ttl_ms.to_string(),
            ]),
            Cmd::ResourceRead { res, fence } => s(&[
                "EVALSHA",
                &sha(RESOURCE_READ_LUA),
                "1",
                res,
                &fence_arg(*fence),
            ]),
            Cmd::ResourceWrite {
                res,
                lock,
                token,
                fence,
                value,
            } => s(&[
                "EVALSHA",
                &sha(RESOURCE_WRITE_LUA),
                "2",
                res,
                lock,
                token,
                &fence_arg(*fence),
                &value.to_string(),
            ]),
            Cmd::ResourceValue(res) => s(&["HGET", res, "value"]),
            Cmd::ClientPause { ms } => s(&["CLIENT", "PAUSE", &ms.to_string(), "ALL"]),
        }
    }

    /// The redis-cli line: the arguments separated by spaces, each quoted where redis-cli
    /// would otherwise split or unquote it.
    pub fn cli(&self) -> String {
        self.argv()
            .iter()
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The same command for redis-rs.
    pub fn to_redis(&self) -> redis::Cmd {
        let argv = self.argv();
        let mut c = redis::cmd(&argv[0]);
        for a in &argv[1..] {
            c.arg(a);
        }
        c
    }

    /// Sends the command on `conn` through its `LockConn` call (the scripts by `EVALSHA`,
    /// loaded when the server lacks them), and returns the reply. [`Cmd::ClientPause`] is not
    /// a lock connection's command: it is sent with [`Cmd::to_redis`] on a connection of its
    /// own; here it is an error of kind `Other`.
    pub async fn send<C: LockConn>(&self, conn: &mut C) -> CmdResult<Reply> {
        Ok(match self.clone() {
            Cmd::SetNxPx { key, value, ttl_ms } => {
                Reply::Set(conn.set_nx_px(key, value, ttl_ms).await?)
            }
            Cmd::SetNx { key, value } => Reply::Int(i64::from(conn.setnx(key, value).await?)),
            Cmd::Pexpire { key, ms } => Reply::Int(i64::from(conn.pexpire(key, ms).await?)),
            Cmd::Del(keys) if keys.len() == 1 => Reply::Int(conn.del(keys[0]).await?),
            Cmd::Del(keys) => {
                let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
                Reply::Int(conn.del_many(&keys).await?)
            }
            Cmd::Get(key) => Reply::Bulk(conn.get(key).await?),
            Cmd::GetDel(key) => Reply::Bulk(conn.getdel(key).await?),
            Cmd::Exists(key) => Reply::Int(conn.exists(key).await?),
            Cmd::Pttl(key) => Reply::Int(conn.pttl(key).await?),
            Cmd::Delex { key, token } => Reply::Int(conn.delex(key, token).await?),
            Cmd::CompareAndDelete { key, token } => {
                Reply::Int(conn.canonical_cad(key, token).await?)
            }
            Cmd::FencedAcquire {
                lock,
                fence,
                token,
                ttl_ms,
            } => Reply::Fence(
                conn.set_nx_px_fenced(lock, fence, None, token, ttl_ms)
                    .await?,
            ),
            Cmd::ResourceRead { res, fence } => Reply::Read(conn.resource_read(res, fence).await?),
            Cmd::ResourceWrite {
                res,
                lock,
                token,
                fence,
                value,
            } => Reply::Write(conn.resource_write(res, lock, token, fence, value).await?),
            Cmd::ResourceValue(res) => Reply::Value(conn.resource_value(res).await?),
            // Not a lock connection's command: a mistake of the story, not the server's.
            Cmd::ClientPause { .. } => {
                return Err(crate::model::error::CmdError {
                    kind: ErrorKind::Other,
                    detail: "CLIENT PAUSE is sent on a connection of its own".into(),
                });
            }
        })
    }
}

/// A reply, typed by the command that got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `SET … NX`: `OK` (set) or `(nil)`.
    Set(bool),
    /// A simple string such as `OK`.
    Status(String),
    /// An integer.
    Int(i64),
    /// A bulk string or nil.
    Bulk(Option<String>),
    /// The fenced acquire: the new fence, or nil when the lock was held.
    Fence(Option<u64>),
    /// The resource read script's pair.
    Read(ReadOutcome),
    /// The resource write script's pair.
    Write(WriteOutcome),
    /// The resource's value, as `HGET` gives it (never written: 0).
    Value(u64),
}

impl Reply {
    /// The reply as redis-cli prints it: `OK`, `(nil)`, `(integer) 1`, `"tokB"`, or an array's
    /// numbered lines.
    pub fn cli(&self) -> String {
        match self {
            Reply::Set(true) => "OK".into(),
            Reply::Set(false) | Reply::Bulk(None) | Reply::Fence(None) => "(nil)".into(),
            Reply::Status(s) => s.clone(),
            Reply::Int(i) => format!("(integer) {i}"),
            Reply::Bulk(Some(v)) => format!("\"{v}\""),
            Reply::Fence(Some(f)) => format!("(integer) {f}"),
            Reply::Value(v) => format!("\"{v}\""),
            Reply::Read(ReadOutcome::Value(v)) => pair(1, *v),
            Reply::Read(ReadOutcome::Fenced { highest }) => pair(0, *highest),
            Reply::Write(WriteOutcome::Accepted {
                holder,
                other_holder,
            }) => pair(
                1,
                if *holder {
                    1
                } else if *other_holder {
                    2
                } else {
                    0
                },
            ),
            // Written to a resource apart from the lock: no look at the lock, shown as 3.
            Reply::Write(WriteOutcome::Written) => pair(1, 3),
            Reply::Write(WriteOutcome::Fenced { highest }) => pair(0, *highest),
        }
    }

    /// `true` for a `SET` that set the key.
    pub fn is_set(&self) -> bool {
        matches!(self, Reply::Set(true))
    }
}

/// A two-element integer array as redis-cli prints it.
fn pair(a: u64, b: u64) -> String {
    format!("1) (integer) {a}\n2) (integer) {b}")
}

/// `arg` as typed at redis-cli's prompt: bare when redis-cli would read it back unchanged,
/// else in double quotes with `\\`, `\"`, `\n`, `\r`, `\t` and `\xHH` escapes (redis-cli
/// splits at whitespace and opens a quoted part at any `"` or `'`).
pub fn quote(arg: &str) -> String {
    let bare = !arg.is_empty()
        && !arg
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\'');
    if bare {
        return arg.to_string();
    }
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('"');
    for c in arg.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let mut b = [0; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_redis_cli_would_split_or_unquote() {
        assert_eq!(
            quote("lockbench:x:{fencing}:lock"),
            "lockbench:x:{fencing}:lock"
        );
        assert_eq!(quote("a\\b"), "a\\b");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("it's"), "\"it's\"");
        assert_eq!(quote("say \"hi\"\n"), "\"say \\\"hi\\\"\\n\"");
        assert_eq!(quote("a\\ b"), "\"a\\\\ b\"");
        assert_eq!(quote("\u{1}"), "\"\\x01\"");
    }

    #[test]
    fn the_line_and_the_redis_command_come_from_one_argv() {
        let cases = [
            (
                Cmd::SetNxPx {
                    key: "k",
                    value: "tokA",
                    ttl_ms: 300,
                },
                "SET k tokA NX PX 300".to_string(),
            ),
            (Cmd::Del(vec!["k1", "k 2"]), "DEL k1 \"k 2\"".to_string()),
            (
                Cmd::Delex {
                    key: "k",
                    token: "tokA",
                },
                "DELEX k IFEQ tokA".to_string(),
            ),
            (
                Cmd::CompareAndDelete {
                    key: "k",
                    token: "tokB",
                },
                format!("EVAL \"{CANONICAL_CAD_LUA}\" 1 k tokB"),
            ),
            (
                Cmd::ResourceRead {
                    res: "r",
                    fence: None,
                },
                format!("EVALSHA {} 1 r -", sha(RESOURCE_READ_LUA)),
            ),
            (
                Cmd::ClientPause { ms: 1000 },
                "CLIENT PAUSE 1000 ALL".to_string(),
            ),
        ];
        for (c, line) in cases {
            assert_eq!(c.cli(), line);
            let sent: Vec<Vec<u8>> = c
                .to_redis()
                .args_iter()
                .map(|a| match a {
                    redis::Arg::Simple(b) => b.to_vec(),
                    _ => Vec::new(),
                })
                .collect();
            let argv: Vec<Vec<u8>> = c.argv().into_iter().map(String::into_bytes).collect();
            assert_eq!(sent, argv, "{line}");
        }
    }
}
