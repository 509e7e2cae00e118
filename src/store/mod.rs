//! The handful of commands lockbench sends, behind one small trait, so the same worker loop and
//! the same demo drive a real Redis ([`redis`]) and the in-process model ([`memory`]).

pub mod backend;
pub mod memory;
pub mod redis;
pub mod spawn;

use std::future::Future;

/// What kind of failure a command met. Every failure is counted by kind, never panicked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No reply within the configured response timeout.
    Timeout,
    /// The connection was refused, dropped or could not be (re)established.
    Connection,
    /// The server answered with an error (e.g. `BUSY`, `LOADING`, a script error).
    Server,
    /// Anything else (unexpected reply type, protocol error).
    Other,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 4] = [Self::Timeout, Self::Connection, Self::Server, Self::Other];

    /// Stable snake_case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::Server => "server",
            Self::Other => "other",
        }
    }
}

/// A failed command: its kind (what is counted) and the detail (kept for the first of each kind).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} error: {detail}", kind.name())]
pub struct CmdError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The client's or server's message. Never contains a password: redis-rs does not echo
    /// credentials in errors, and lockbench never puts the URL into one.
    pub detail: String,
}

impl CmdError {
    /// The server's error code (`NOPERM`, `ERR`, `NOAUTH`, …) when the server answered with an
    /// error; its message starts with it.
    pub fn server_code(&self) -> Option<&str> {
        (self.kind == ErrorKind::Server)
            .then(|| self.detail.split_whitespace().next())
            .flatten()
    }

    /// The ACL refused the command or key (`NOPERM`).
    pub fn is_no_permission(&self) -> bool {
        self.server_code() == Some("NOPERM")
    }

    /// The server does not know the command (older version, or renamed away).
    pub fn is_unknown_command(&self) -> bool {
        self.server_code() == Some("ERR") && self.detail.contains("unknown command")
    }
}

/// Result of one command.
pub type CmdResult<T> = Result<T, CmdError>;

/// One client's view of the lock store. Cheap to clone: a clone of a multiplexed Redis
/// connection shares the socket (the "shared" connection mode).
pub trait LockConn: Clone + Send + Sync + 'static {
    /// `SET key value NX PX ttl_ms`: `true` when the key was set (lock acquired).
    fn set_nx_px(
        &mut self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = CmdResult<bool>> + Send;
    /// `GETDEL key`: the value that was removed, if any (same server-side effect as `DEL`).
    fn getdel(&mut self, key: &str) -> impl Future<Output = CmdResult<Option<String>>> + Send;
    /// `DEL key`: number of keys removed.
    fn del(&mut self, key: &str) -> impl Future<Output = CmdResult<i64>> + Send;
    /// `DEL key [key ...]` in one command: number of keys removed.
    fn del_many(&mut self, keys: &[String]) -> impl Future<Output = CmdResult<i64>> + Send;
    /// The release script (compare-and-delete in one atomic step, `EVALSHA`; on `NOSCRIPT`
    /// redis-rs sends `SCRIPT LOAD` and `EVALSHA` again) returning `1` deleted, `0` key
    /// absent, `-1` held by another token.
    fn release_script(
        &mut self,
        key: &str,
        token: &str,
    ) -> impl Future<Output = CmdResult<i64>> + Send;
    /// The article's compare-and-delete script verbatim (`1` deleted, `0` otherwise).
    fn canonical_cad(
        &mut self,
        key: &str,
        token: &str,
    ) -> impl Future<Output = CmdResult<i64>> + Send;
    /// `DELEX key IFEQ token` (Redis ≥ 8.4): `1` deleted, `0` otherwise.
    fn delex(&mut self, key: &str, token: &str) -> impl Future<Output = CmdResult<i64>> + Send;
    /// `GET key`.
    fn get(&mut self, key: &str) -> impl Future<Output = CmdResult<Option<String>>> + Send;
    /// `EXISTS key`.
    fn exists(&mut self, key: &str) -> impl Future<Output = CmdResult<i64>> + Send;
    /// `PTTL key` (`-2` absent, `-1` no expiry).
    fn pttl(&mut self, key: &str) -> impl Future<Output = CmdResult<i64>> + Send;
    /// Whether the server knows a command (`COMMAND INFO name`), e.g. `GETDEL` (Redis ≥ 6.2)
    /// or `DELEX` (Redis ≥ 8.4).
    fn supports_command(&mut self, name: &str) -> impl Future<Output = CmdResult<bool>> + Send;
    /// Server name and version, e.g. `redis 7.0.15` (from `INFO server`).
    fn server_version(&mut self) -> impl Future<Output = CmdResult<String>> + Send;
}

/// Opens connections: one per worker, or one shared by all.
pub trait Connector: Send + Sync + 'static {
    /// The connection type it opens.
    type Conn: LockConn;
    /// Opens a new connection (a new socket for Redis).
    fn connect(&self) -> impl Future<Output = anyhow::Result<Self::Conn>> + Send;
    /// A description safe to print and store (no password).
    fn describe(&self) -> String;
}

/// The compare-and-delete used for `token` releases: the article's script, extended to say
/// *why* it refused (absent key vs another holder's token) — same server-side effect.
pub const RELEASE_LUA: &str = "local v = redis.call('get', KEYS[1]) \
if v == ARGV[1] then return redis.call('del', KEYS[1]) end \
if v then return -1 end \
return 0";

/// The article's compare-and-delete, verbatim; the demo shows it with its real replies.
pub const CANONICAL_CAD_LUA: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
