//! A real Redis through redis-rs. Timeouts are set deliberately: redis-rs 1.x would otherwise
//! give up on a reply after 500 ms, turning a slow server into errors instead of samples.
//!
//! What a connection runs on (a server's or a cluster's link) is [`link`]; the user's own
//! scripts, [`user_scripts`]. Past 800 lines only through its tests.

use super::pipe::PipeLink;
use super::{
    CANONICAL_CAD_LUA, Connector, EXTEND_LUA, FENCED_ACQUIRE_LUA, KeySweep, LockCommands,
    RELEASE_LUA, RESOURCE_READ_LUA, RESOURCE_WRITE_APART_LUA, RESOURCE_WRITE_LUA, ReadOutcome,
    ResourceCommands, ServerProbes, Timeouts, UserScripts, WriteOutcome, fence_arg,
};
use crate::model::error::{CmdError, CmdResult, ErrorKind};
use crate::model::release::ExtendCommand;
use crate::model::script::{ScriptReply, UserScript};

mod link;
mod user_scripts;
use crate::target::redact_url;
use crate::target::{check_loopback, check_url};
use anyhow::Context;
pub(crate) use link::Link;
pub(crate) use link::ServerLink;
pub(crate) use link::scan_keys;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionAddr, Script};
use std::sync::Arc;

/// Where and how to connect.
#[derive(Clone)]
pub struct RedisConnector {
    client: Client,
    config: ConnectionManagerConfig,
    timeouts: Timeouts,
    describe: String,
    scripts: Arc<Scripts>,
}

/// The scripts every connection runs, hashed once per connector.
pub(super) struct Scripts {
    release: Script,
    canonical: Script,
    acquire_fenced: Script,
    read: Script,
    write: Script,
    write_apart: Script,
    extend: Script,
}

impl RedisConnector {
    /// Builds a connector for `url` (`redis://`, `rediss://`, `unix://`, with optional
    /// user/password). Refuses a URL redis-rs would misread (see [`check_url`]) and a
    /// non-loopback host unless `allow_remote`.
    pub fn new(url: &str, timeouts: Timeouts, allow_remote: bool) -> anyhow::Result<Self> {
        let info = check_url(url)?;
        let where_ = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                check_loopback(host, allow_remote)?;
                format!("{host}:{port}")
            }
            ConnectionAddr::TcpTls { host, port, .. } => {
                check_loopback(host, allow_remote)?;
                format!("{host}:{port} (TLS)")
            }
            ConnectionAddr::Unix(path) => format!("unix:{}", path.display()),
            _ => anyhow::bail!("unsupported Redis address in {}", redact_url(url)),
        };
        let client = Client::open(info)
            .with_context(|| format!("cannot use Redis URL {}", redact_url(url)))?;
        // A connection manager reconnects after the connection is lost (a restarted server):
        // one connect attempt per command, no retries inside the client, so every failed
        // command is counted and the worker's own backoff paces the attempts.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeouts.connect))
            .set_response_timeout(Some(timeouts.response))
            .set_number_of_retries(0);
        Ok(Self {
            client,
            config,
            timeouts,
            describe: format!("redis at {where_}"),
            scripts: Arc::new(Scripts::new()),
        })
    }
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            release: Script::new(RELEASE_LUA),
            canonical: Script::new(CANONICAL_CAD_LUA),
            acquire_fenced: Script::new(FENCED_ACQUIRE_LUA),
            read: Script::new(RESOURCE_READ_LUA),
            write: Script::new(RESOURCE_WRITE_LUA),
            write_apart: Script::new(RESOURCE_WRITE_APART_LUA),
            extend: Script::new(EXTEND_LUA),
        }
    }
}

impl RedisConnector {
    /// The server's TCP address (`None` for a unix socket), resolved: what a proxy in front
    /// of it connects to.
    pub async fn tcp_addr(&self) -> anyhow::Result<Option<std::net::SocketAddr>> {
        let (host, port) = match self.client.get_connection_info().addr() {
            ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
            ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
            _ => return Ok(None),
        };
        let mut addrs = tokio::net::lookup_host((host.as_str(), port))
            .await
            .with_context(|| format!("cannot resolve {host}:{port}"))?;
        Ok(addrs.next())
    }

    /// The same connector, described as `describe` (in the manifest and messages).
    pub fn described(mut self, describe: String) -> Self {
        self.describe = describe;
        self
    }

    /// The same connector (user, password, TLS, timeouts) aimed at `addr` instead: the fault
    /// proxy in front of the server. Its description still names the server, and the proxy.
    pub fn via(&self, addr: std::net::SocketAddr) -> anyhow::Result<Self> {
        let info = self.client.get_connection_info().clone();
        let (host, port) = (addr.ip().to_string(), addr.port());
        let new = match info.addr().clone() {
            ConnectionAddr::Tcp(..) => ConnectionAddr::Tcp(host, port),
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            },
            _ => anyhow::bail!("a unix-socket server cannot be reached through a TCP proxy"),
        };
        Ok(Self {
            client: Client::open(info.set_addr(new))?,
            config: self.config.clone(),
            timeouts: self.timeouts,
            describe: format!("{} through the fault proxy at {addr}", self.describe),
            scripts: self.scripts.clone(),
        })
    }

    /// A connection of its own for administrative commands (`CLIENT PAUSE 500 ALL`), opened
    /// ahead of time so that sending one costs a round trip, not a connect.
    pub async fn admin(&self) -> anyhow::Result<Admin> {
        let conn = self
            .client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| anyhow::anyhow!("cannot connect to {}: {}", self.describe, classify(e)))?;
        Ok(Admin { conn })
    }
}

/// An administrative connection (see [`RedisConnector::admin`]).
pub struct Admin {
    conn: redis::aio::MultiplexedConnection,
}

impl Admin {
    /// Sends one command, expecting a reply of type `T`.
    pub async fn query<T: redis::FromRedisValue>(&mut self, args: &[&str]) -> anyhow::Result<T> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query_async::<T>(&mut self.conn)
            .await
            .map_err(|e| anyhow::anyhow!("{} failed: {}", args.join(" "), classify(e)))
    }
}

impl Connector for RedisConnector {
    type Conn = RedisConn;

    fn driver_urls(&self) -> Result<Vec<String>, crate::store::Unreachable> {
        let info = self.client.get_connection_info();
        let (scheme, host, port) = match info.addr() {
            ConnectionAddr::Tcp(h, p) => ("redis", h.clone(), *p),
            ConnectionAddr::TcpTls { host, port, .. } => ("rediss", host.clone(), *port),
            ConnectionAddr::Unix(path) => {
                // The drivers' form (lockbench's own is redis-rs's `pass=`).
                let r = info.redis_settings();
                let db = r.db().to_string();
                return crate::target::drivers_unix_url(path, &db, r.username(), r.password())
                    .map(|url| vec![url])
                    .ok_or_else(|| {
                        crate::store::Unreachable(format!(
                            "a lock library's driver takes a socket path in UTF-8, not {}",
                            path.display()
                        ))
                    });
            }
            _ => {
                return Err(crate::store::Unreachable(format!(
                    "a lock library cannot reach {}",
                    self.describe()
                )));
            }
        };
        // An IPv6 address is bracketed in a URL (`redis://[::1]:6379`): redis-rs gives the bare
        // address, which a library's URL parser splits at its first colon.
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        let r = info.redis_settings();
        let enc = |s: &str| {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        };
        let auth = match (r.username(), r.password()) {
            (Some(u), Some(p)) => format!("{}:{}@", enc(u), enc(p)),
            (None, Some(p)) => format!(":{}@", enc(p)),
            _ => String::new(),
        };
        Ok(vec![format!("{scheme}://{auth}{host}:{port}/{}", r.db())])
    }

    async fn connect(&self) -> anyhow::Result<RedisConn> {
        let failed = |e: redis::RedisError| {
            let detail = classify(e).detail;
            let hint = connect_hint(&detail);
            anyhow::anyhow!("cannot connect to {}: {detail}{hint}", self.describe)
        };
        let info = self.client.get_connection_info();
        let conn = match PipeLink::open(info, self.timeouts).await.map_err(failed)? {
            Some(pipe) => ServerLink::Pipe(pipe),
            None => ServerLink::Managed(
                ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
                    .await
                    .map_err(failed)?,
            ),
        };
        Ok(RedisConn::from_parts(conn, self.scripts.clone()))
    }
    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// What a failed connect most likely means, from the client's message.
pub(crate) fn connect_hint(detail: &str) -> &'static str {
    let d = detail.to_ascii_lowercase();
    if d.contains("max number of clients") {
        " (the server's maxclients is reached; --connection shared uses one connection)"
    } else if d.contains("too many open files") {
        " (this process's open-file limit is reached: raise `ulimit -n`, or use --connection shared)"
    } else if d.contains("refused") {
        " (nothing listens there: the server is not running, or stopped)"
    } else {
        ""
    }
}

/// One server's connection that reconnects when lost ([`ServerLink`]; a cluster's: one per
/// node); its clones share the socket.
#[derive(Clone)]
pub struct RedisConn<K: Link = ServerLink> {
    pub(super) conn: K,
    scripts: Arc<Scripts>,
    /// The lock cycle's command, rebuilt in place for every `SET` and release: its buffers
    /// are allocated once per connection, not once per command.
    cmd: redis::Cmd,
}

impl<K: Link> RedisConn<K> {
    pub(super) fn from_parts(conn: K, scripts: Arc<Scripts>) -> Self {
        Self {
            conn,
            scripts,
            cmd: redis::Cmd::new(),
        }
    }

    /// Sends `self.cmd` and returns its raw reply.
    async fn send_cmd(&mut self) -> redis::RedisResult<redis::Value> {
        let reply = self.conn.req_packed_command(&self.cmd).await?;
        // An error reply (`-ERR …`, `-NOSCRIPT …`) is an error, as query_async makes it.
        reply.extract_error()
    }
}

/// A reply of a shape the command cannot give (a proxy or a module in the way).
fn unexpected_reply(command: &str, reply: &redis::Value, expected: &str) -> CmdError {
    CmdError {
        kind: ErrorKind::Other,
        detail: format!("{command} answered {reply:?}, not {expected}"),
    }
}

pub(super) fn classify(e: redis::RedisError) -> CmdError {
    let kind = if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        ErrorKind::Connection
    } else if e.code().is_some() {
        ErrorKind::Server
    } else {
        ErrorKind::Other
    };
    // A server error reads as Redis wrote it (`NOPERM this user …`), so callers can tell
    // codes apart with `CmdError::server_code`.
    let mut detail = match (e.code(), e.detail()) {
        (Some(code), Some(d)) => format!("{code} {d}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    };
    if let Some(hint) = auth_hint(&e) {
        detail.push_str(hint);
    }
    CmdError { kind, detail }
}

/// What to do about a refused authentication: redis-rs says only "NOAUTH" or "Password
/// authentication failed".
fn auth_hint(e: &redis::RedisError) -> Option<&'static str> {
    match e.code() {
        Some("NOAUTH") => Some(
            " (the server requires a password: give it in the URL as \
             redis://[USER:]PASSWORD@HOST:PORT, percent-encoding / ? # @ %; ?password= is not read)",
        ),
        Some("WRONGPASS") => Some(" (check the user name and password in the Redis URL)"),
        _ if e.kind() == redis::ErrorKind::AuthenticationFailed => Some(
            " (the server refused the user name or password in the Redis URL; check them, and \
             percent-encode / ? # @ % in them)",
        ),
        _ => None,
    }
}

impl<K: Link> LockCommands for RedisConn<K> {
    async fn renew_own_socket(&mut self) -> bool {
        self.conn.renew().await
    }

    async fn set_nx_px(&mut self, key: &str, value: &str, ttl_ms: u64) -> CmdResult<bool> {
        self.cmd.clear();
        self.cmd
            .arg("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms);
        // `OK` or nil: read as a value, no string allocated for the `OK`.
        match self.send_cmd().await.map_err(classify)? {
            redis::Value::Nil => Ok(false),
            redis::Value::Okay | redis::Value::SimpleString(_) => Ok(true),
            other => Err(unexpected_reply("SET NX PX", &other, "OK or nil")),
        }
    }

    async fn setnx(&mut self, key: &str, value: &str) -> CmdResult<bool> {
        redis::cmd("SETNX")
            .arg(key)
            .arg(value)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn pexpire(&mut self, key: &str, ms: u64) -> CmdResult<bool> {
        redis::cmd("PEXPIRE")
            .arg(key)
            .arg(ms)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn getdel(&mut self, key: &str) -> CmdResult<Option<String>> {
        redis::cmd("GETDEL")
            .arg(key)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn release_script(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        // EVALSHA built in place; a server that lost its script cache (restarted) answers
        // NOSCRIPT, and then invoke_async loads the script and sends it again.
        self.cmd.clear();
        self.cmd
            .arg("EVALSHA")
            .arg(self.scripts.release.get_hash())
            .arg(1)
            .arg(key)
            .arg(token);
        match self.send_cmd().await {
            Ok(redis::Value::Int(n)) => Ok(n),
            Ok(other) => Err(unexpected_reply("the release script", &other, "an integer")),
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.scripts
                    .release
                    .key(key)
                    .arg(token)
                    .invoke_async(&mut self.conn)
                    .await
                    .map_err(classify)
            }
            Err(e) => Err(classify(e)),
        }
    }

    async fn canonical_cad(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        self.scripts
            .canonical
            .key(key)
            .arg(token)
            .invoke_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn delex(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        redis::cmd("DELEX")
            .arg(key)
            .arg("IFEQ")
            .arg(token)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn get(&mut self, key: &str) -> CmdResult<Option<String>> {
        redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn exists(&mut self, key: &str) -> CmdResult<i64> {
        redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn pttl(&mut self, key: &str) -> CmdResult<i64> {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn extend(
        &mut self,
        key: &str,
        token: &str,
        ttl_ms: u64,
        how: ExtendCommand,
    ) -> CmdResult<bool> {
        match how {
            ExtendCommand::Script => {
                let r: i64 = self
                    .scripts
                    .extend
                    .key(key)
                    .arg(token)
                    .arg(ttl_ms)
                    .invoke_async(&mut self.conn)
                    .await
                    .map_err(classify)?;
                Ok(r == 1)
            }
            ExtendCommand::SetIfeq => {
                // OK when re-armed, nil when absent or another's; a server without IFEQ
                // answers `ERR syntax error`, which stays an error.
                let r: Option<String> = redis::cmd("SET")
                    .arg(key)
                    .arg(token)
                    .arg("IFEQ")
                    .arg(token)
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut self.conn)
                    .await
                    .map_err(classify)?;
                Ok(r.is_some())
            }
        }
    }
}

impl<K: Link> ResourceCommands for RedisConn<K> {
    async fn set_nx_px_fenced(
        &mut self,
        key: &str,
        fence_key: &str,
        register_at: Option<&str>,
        token: &str,
        ttl_ms: u64,
    ) -> CmdResult<Option<u64>> {
        let mut inv = self.scripts.acquire_fenced.key(key);
        inv.key(fence_key);
        if let Some(res) = register_at {
            inv.key(res);
        }
        inv.arg(token)
            .arg(ttl_ms)
            .invoke_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn resource_read(
        &mut self,
        res_key: &str,
        register_fence: Option<u64>,
    ) -> CmdResult<ReadOutcome> {
        let (read, n): (i64, u64) = self
            .scripts
            .read
            .key(res_key)
            .arg(fence_arg(register_fence))
            .invoke_async(&mut self.conn)
            .await
            .map_err(classify)?;
        Ok(if read == 1 {
            ReadOutcome::Value(n)
        } else {
            ReadOutcome::Fenced { highest: n }
        })
    }

    async fn resource_write(
        &mut self,
        res_key: &str,
        lock_key: &str,
        token: &str,
        fence: Option<u64>,
        value: u64,
    ) -> CmdResult<WriteOutcome> {
        let (accepted, n): (i64, u64) = self
            .scripts
            .write
            .key(res_key)
            .key(lock_key)
            .arg(token)
            .arg(fence_arg(fence))
            .arg(value)
            .invoke_async(&mut self.conn)
            .await
            .map_err(classify)?;
        Ok(if accepted == 1 {
            WriteOutcome::Accepted {
                holder: n == 1,
                other_holder: n == 2,
            }
        } else {
            WriteOutcome::Fenced { highest: n }
        })
    }

    async fn resource_write_apart(
        &mut self,
        res_key: &str,
        fence: Option<u64>,
        value: u64,
    ) -> CmdResult<WriteOutcome> {
        let (accepted, n): (i64, u64) = self
            .scripts
            .write_apart
            .key(res_key)
            .arg(fence_arg(fence))
            .arg(value)
            .invoke_async(&mut self.conn)
            .await
            .map_err(classify)?;
        Ok(match accepted {
            1 => WriteOutcome::Written,
            _ => WriteOutcome::Fenced { highest: n },
        })
    }

    async fn resource_value(&mut self, res_key: &str) -> CmdResult<u64> {
        let v: Option<u64> = redis::cmd("HGET")
            .arg(res_key)
            .arg("value")
            .query_async(&mut self.conn)
            .await
            .map_err(classify)?;
        Ok(v.unwrap_or(0))
    }
}

impl<K: Link> ServerProbes for RedisConn<K> {
    async fn supports_command(&mut self, name: &str) -> CmdResult<bool> {
        // Unknown commands come back as a nil entry.
        let v: redis::Value = self
            .conn
            .query_node(redis::cmd("COMMAND").arg("INFO").arg(name))
            .await
            .map_err(classify)?;
        Ok(match v {
            redis::Value::Array(items) => items
                .first()
                .is_some_and(|i| !matches!(i, redis::Value::Nil)),
            _ => false,
        })
    }

    async fn knows_set_ifeq(&mut self) -> CmdResult<bool> {
        let v: redis::Value = self
            .conn
            .query_node(redis::cmd("COMMAND").arg("DOCS").arg("SET"))
            .await
            .map_err(classify)?;
        // The option appears as an argument token ("IFEQ") in SET's documented arguments.
        fn mentions(v: &redis::Value) -> bool {
            match v {
                redis::Value::BulkString(b) => b.eq_ignore_ascii_case(b"ifeq"),
                redis::Value::SimpleString(s) => s.eq_ignore_ascii_case("ifeq"),
                redis::Value::Array(items) | redis::Value::Set(items) => items.iter().any(mentions),
                redis::Value::Map(pairs) => pairs.iter().any(|(k, v)| mentions(k) || mentions(v)),
                _ => false,
            }
        }
        Ok(mentions(&v))
    }

    async fn server_version(&mut self) -> CmdResult<String> {
        let info: String = self
            .conn
            .query_node(redis::cmd("INFO").arg("server"))
            .await
            .map_err(classify)?;
        Ok(parse_server_version(&info))
    }

    async fn dry_run(&mut self, args: &[&str]) -> CmdResult<Result<(), crate::store::Refusal>> {
        let user: String = self
            .conn
            .query_node(redis::cmd("ACL").arg("WHOAMI"))
            .await
            .map_err(classify)?;
        let mut cmd = redis::cmd("ACL");
        cmd.arg("DRYRUN").arg(&user).arg(args);
        match self.conn.query_node::<redis::Value>(&cmd).await {
            Ok(redis::Value::Okay) => Ok(Ok(())),
            Ok(redis::Value::SimpleString(s)) if s == "OK" => Ok(Ok(())),
            Ok(redis::Value::BulkString(why)) => Ok(Err(crate::store::Refusal(
                String::from_utf8_lossy(&why).into(),
            ))),
            Ok(redis::Value::VerbatimString { text, .. }) => Ok(Err(crate::store::Refusal(text))),
            Ok(other) => Err(unexpected_reply("ACL DRYRUN", &other, "OK or a reason")),
            // An unknown command is an answer; an unknown DRYRUN (Redis < 7.0) is not.
            Err(e) => {
                let e = classify(e);
                match e.detail.contains("Command '") && e.detail.contains("not found") {
                    true => Ok(Err(crate::store::Refusal(e.detail))),
                    false => Err(e),
                }
            }
        }
    }

    async fn load_release_script(&mut self) -> CmdResult<()> {
        self.scripts
            .release
            .prepare_invoke()
            .load_async(&mut self.conn)
            .await
            .map(drop)
            .map_err(classify)
    }
}

impl<K: Link> UserScripts for RedisConn<K> {
    async fn load_user_script(&mut self, text: &str) -> CmdResult<String> {
        self.load_user(text).await
    }

    async fn user_command(&mut self, args: &[String]) -> CmdResult<ScriptReply> {
        RedisConn::user_command(self, args).await
    }

    async fn command_keys(
        &mut self,
        args: &[String],
    ) -> CmdResult<Result<Vec<String>, crate::store::Refusal>> {
        self.keys_of(args).await
    }

    async fn eval_user_script(
        &mut self,
        script: &UserScript,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> CmdResult<ScriptReply> {
        self.eval_user(script, key, token, ttl_ms).await
    }
}

impl<K: Link> KeySweep for RedisConn<K> {
    async fn del(&mut self, key: &str) -> CmdResult<i64> {
        redis::cmd("DEL")
            .arg(key)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn del_many(&mut self, keys: &[String]) -> CmdResult<i64> {
        if keys.is_empty() {
            return Ok(0);
        }
        redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

    async fn keys_containing(&mut self, needle: &str) -> CmdResult<Vec<String>> {
        let pattern = format!("*{}*", super::glob_escape(needle));
        self.conn.scan_match(&pattern).await.map_err(classify)
    }
}

impl<K: Link> RedisConn<K> {
    /// Sends any command and converts its reply, failures classified as for the lock
    /// commands: the agents' barrier (`INCRBY`, `TIME`, `SET … NX`) uses it, the worker loop
    /// never does.
    pub async fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> CmdResult<T> {
        cmd.query_async(&mut self.conn).await.map_err(classify)
    }
}

/// The value of one field of an `INFO` (or `CLUSTER INFO`) reply: `name` with its colon,
/// e.g. `role:` → `master`.
pub fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(name).map(str::trim))
}

/// `redis 7.0.15` (or `valkey 8.0.1`) from the text of `INFO server`.
pub fn parse_server_version(info: &str) -> String {
    let field = |name: &str| info_field(info, name);
    match (field("valkey_version:"), field("redis_version:")) {
        (Some(v), _) => format!("valkey {v}"),
        (None, Some(v)) => format!("redis {v}"),
        (None, None) => "unknown".to_string(),
    }
}

/// Major and minor version numbers of a `redis X.Y.Z` string.
pub fn version_tuple(version: &str) -> Option<(u32, u32)> {
    let v = version.split_whitespace().last()?;
    let mut it = v.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::inet_aton;

    /// A library's driver gets the server's address as a URL its parser reads: an IPv6 host in
    /// brackets (issue 40: `redis://[::1]:P` reached redis-py as `redis://::1:P`, "Port could
    /// not be cast to integer"); an IPv4 one and a name as they are; a unix socket as a
    /// `unix://` URL with its database and credentials in the query, as the drivers read it.
    #[test]
    fn driver_urls_bracket_an_ipv6_host() {
        let t = Timeouts::default();
        let url = |u: &str| RedisConnector::new(u, t, false).unwrap().driver_urls();
        assert_eq!(
            url("redis://u:p@[::1]:6391").unwrap(),
            vec!["redis://u:p@[::1]:6391/0".to_string()]
        );
        assert_eq!(
            url("redis://127.0.0.1:6391/2").unwrap(),
            vec!["redis://127.0.0.1:6391/2".to_string()]
        );
        assert_eq!(
            url("redis://localhost:6391").unwrap(),
            vec!["redis://localhost:6391/0".to_string()]
        );
        // A unix socket in the drivers' form: redis-rs's `pass=` becomes redis-py's `password=`.
        assert_eq!(
            url("unix:///tmp/redis.sock?db=3&pass=p%26w").unwrap(),
            vec!["unix:///tmp/redis.sock?db=3&password=p%26w".to_string()]
        );
        assert_eq!(
            url("unix:///tmp/redis.sock").unwrap(),
            vec!["unix:///tmp/redis.sock?db=0".to_string()]
        );
    }

    /// Remote hosts are refused without --allow-remote; loopback is accepted.
    #[test]
    fn loopback_only_by_default() {
        let t = Timeouts::default();
        assert!(RedisConnector::new("redis://127.0.0.1:1", t, false).is_ok());
        assert!(RedisConnector::new("redis://[::1]:1", t, false).is_ok());
        assert!(RedisConnector::new("redis://localhost:1", t, false).is_ok());
        let err = RedisConnector::new("redis://:pw@10.1.2.3:6379", t, false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("--allow-remote"), "{err}");
        assert!(!err.to_string().contains("pw"));
        assert!(RedisConnector::new("redis://10.1.2.3:6379", t, true).is_ok());
    }

    /// Every spelling of loopback the resolver accepts is loopback (issue 7, defect 11:
    /// `127.1`, `LOCALHOST`, `::ffff:127.0.0.1` were refused), and look-alikes are not.
    #[test]
    fn loopback_in_every_form() {
        let t = Timeouts::default();
        for host in [
            "127.1",
            "127.0.1",
            "127.255.255.254",
            "LOCALHOST",
            "LocalHost",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "[0:0:0:0:0:0:0:1]",
            "0x7f.1",
            "0177.0.0.1",
            "2130706433",
        ] {
            let url = format!("redis://{host}:1");
            assert!(RedisConnector::new(&url, t, false).is_ok(), "{url}");
        }
        for host in [
            "0127.0.0.1",
            "128.0.0.1",
            "127.0.0.1.5",
            "localhost.example.com",
            "[::ffff:10.0.0.1]",
            "[::2]",
            "0x80.1",
            "127.256.0.0.1",
            "4294967296",
            "127.0x1000000",
        ] {
            let url = format!("redis://{host}:1");
            assert!(RedisConnector::new(&url, t, false).is_err(), "{url}");
        }
        assert_eq!(
            inet_aton("127.1"),
            Some(std::net::Ipv4Addr::new(127, 0, 0, 1))
        );
        assert_eq!(
            inet_aton("0x7f.0.1"),
            Some(std::net::Ipv4Addr::new(127, 0, 0, 1))
        );
        assert_eq!(
            inet_aton("0127.1"),
            Some(std::net::Ipv4Addr::new(87, 0, 0, 1))
        );
        assert_eq!(inet_aton("09.1"), None);
    }

    /// Versions are read from INFO server.
    #[test]
    fn parses_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(parse_server_version(info), "redis 7.0.15");
        assert_eq!(version_tuple("redis 7.0.15"), Some((7, 0)));
        assert_eq!(version_tuple("redis 8.4.0"), Some((8, 4)));
    }
}
