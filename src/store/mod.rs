//! The handful of commands lockbench sends, behind small traits by role — the lock commands
//! ([`LockCommands`]), the protected resource ([`ResourceCommands`]), the runner's probes
//! ([`ServerProbes`]), the user's scripts ([`UserScripts`]), the sweep of keys ([`KeySweep`]),
//! together [`LockConn`] — so the same worker loop and the same demo drive a real Redis
//! ([`redis`]) and the in-process model ([`memory`]).

pub(crate) mod apart;
pub(crate) mod cluster;
pub(crate) mod frame;
pub(crate) mod memory;
pub(crate) mod pipe;
pub(crate) mod redis;
pub(crate) mod redlock;
pub(crate) mod spawn;
pub(crate) mod spawn_cluster;

use crate::model::error::{CmdError, CmdResult, ErrorKind};
use crate::model::release::{self, ExtendCommand};
use crate::model::script::{self, ScriptReply, UserScript};
use crate::model::shards::Shard;
use std::future::Future;
use std::time::Duration;

/// Timeouts applied to every connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Time allowed to open a connection.
    pub connect: Duration,
    /// Time allowed for one reply; a slower reply is counted as a `timeout` error.
    pub response: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            response: Duration::from_secs(10),
        }
    }
}

/// Sends a command (an expression of a future), and once more if the first try met a
/// connection error: an idle connection (the cleanup's, a read-back's) finds out only then that
/// the server restarted, and the second try goes through the reconnection the first one
/// started. Any other error is final. A macro: the command borrows the connection, which a
/// closure called twice could not hand out in a `Send` future.
macro_rules! again_after_reconnect {
    ($command:expr) => {
        match $command.await {
            Err(e) if e.kind == $crate::model::error::ErrorKind::Connection => $command.await,
            other => other,
        }
    };
}
pub(crate) use again_after_reconnect;

/// One client's view of the lock store: every role below, which is what the worker loop and
/// the runner are generic over. Cheap to clone: a clone of a multiplexed Redis
/// connection shares the socket (the "shared" connection mode).
pub trait LockConn:
    LockCommands + ResourceCommands + ServerProbes + UserScripts + KeySweep + Clone + Sync + 'static
{
}

impl<C> LockConn for C where
    C: LockCommands
        + ResourceCommands
        + ServerProbes
        + UserScripts
        + KeySweep
        + Clone
        + Sync
        + 'static
{
}

/// The lock commands: what a worker sends to take, re-arm and release a lock, and what the
/// demo sends to show them (with [`KeySweep::del`], the naive release).
pub trait LockCommands: Send {
    /// Closes this connection's own socket and opens another, as a process that dies loses its
    /// socket and connects again when it restarts: the server sees a new client. `false` where
    /// there is no socket of its own (the memory and simulated stores, redis-rs's TLS/RESP3
    /// connection, a cluster's), and the same socket goes on. A failed connect is left to the
    /// next command. Only a connection no other worker shares may be renewed.
    fn renew_own_socket(&mut self) -> impl Future<Output = bool> + Send {
        async { false }
    }
    /// `SET key value NX PX ttl_ms`: `true` when the key was set (lock acquired).
    fn set_nx_px(
        &mut self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = CmdResult<bool>> + Send;
    /// `SETNX key value`: `true` when the key was set. The key gets no expiry: a holder that
    /// dies before its `EXPIRE` leaves it forever (only the demo sends it, to show that).
    fn setnx(&mut self, key: &str, value: &str) -> impl Future<Output = CmdResult<bool>> + Send;
    /// `PEXPIRE key ms`: `true` when the key exists and now expires in `ms` milliseconds
    /// (`PEXPIRE key 0` deletes it, as on Redis); `false` when the key is absent.
    fn pexpire(&mut self, key: &str, ms: u64) -> impl Future<Output = CmdResult<bool>> + Send;
    /// `GETDEL key`: the value that was removed, if any (same server-side effect as `DEL`).
    fn getdel(&mut self, key: &str) -> impl Future<Output = CmdResult<Option<String>>> + Send;
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
    /// Re-arms a held lock to `ttl_ms` only if it still holds `token`, atomically, with the
    /// command `how` names. `true` = re-armed; `false` = the key was absent or held another
    /// token (an extension failure: too late). [`ExtendCommand::SetIfeq`] on a server without
    /// `SET … IFEQ` (Redis < 8.4, Valkey < 8.1) is a server error (`ERR syntax error`), never
    /// `false`: so `extend` of an absent key with `SetIfeq` doubles as a support probe
    /// (`Ok(false)` = supported). `ttl_ms` must be at least 1 (`PX 0` is an error, `PEXPIRE 0`
    /// deletes the key).
    fn extend(
        &mut self,
        key: &str,
        token: &str,
        ttl_ms: u64,
        how: ExtendCommand,
    ) -> impl Future<Output = CmdResult<bool>> + Send;
}

/// The protected resource and its fences: the fenced acquisition, the resource's reads and
/// writes, and its read-back at the end.
pub trait ResourceCommands: Send {
    /// Fenced acquisition, one script ([`FENCED_ACQUIRE_LUA`]): `SET key token NX PX ttl_ms`
    /// and, only if that set the key, `INCR fence_key`. `Some(fence)` = acquired, with a fence
    /// that strictly increases per `fence_key` (1 for the first acquisition: an absent counter
    /// counts as 0); `None` = the key was held, nothing changed. The fence counter has no TTL:
    /// it must outlive every lock on its key. On a cluster, give `fence_key` the same hash tag
    /// as `key`. With `register_at: Some(res_key)` the new fence is also registered at that
    /// resource in the same script (read-write fencing: the holder's first contact with the
    /// resource happens as it acquires, so no stale write can land between a newer holder's
    /// acquisition and its read).
    fn set_nx_px_fenced(
        &mut self,
        key: &str,
        fence_key: &str,
        register_at: Option<&str>,
        token: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = CmdResult<Option<u64>>> + Send;
    /// Reads the protected resource, a hash `{value, fence}` (absent key or field = 0), in one
    /// script ([`RESOURCE_READ_LUA`]). `register_fence: None` (no fencing, or write-only
    /// fencing) is a plain read. `Some(f)` (read-write fencing) registers the reader's fence:
    /// if `f` is below the highest fence the resource has seen the read is refused
    /// ([`ReadOutcome::Fenced`]: no value, nothing changed); otherwise the resource's fence
    /// becomes `max(fence, f)` and the value is returned. A fence equal to the highest is
    /// accepted (the holder that registered it reads or writes again).
    fn resource_read(
        &mut self,
        res_key: &str,
        register_fence: Option<u64>,
    ) -> impl Future<Output = CmdResult<ReadOutcome>> + Send;
    /// Writes `value` into the protected resource in one script ([`RESOURCE_WRITE_LUA`]).
    /// With `fence: Some(f)` and `f` below the highest fence seen, the write is refused
    /// ([`WriteOutcome::Fenced`]: nothing written). Otherwise the value is set, the resource's
    /// fence becomes `max(fence, f)`, and the reply says whether the writer held the lock at
    /// that instant (`GET lock_key == token`, in the same script): `Accepted { holder: false }`
    /// is an unsafe write, decided by the server. On a cluster, give `res_key` the same hash
    /// tag as `lock_key`.
    fn resource_write(
        &mut self,
        res_key: &str,
        lock_key: &str,
        token: &str,
        fence: Option<u64>,
        value: u64,
    ) -> impl Future<Output = CmdResult<WriteOutcome>> + Send;
    /// Writes `value` into a protected resource that lives apart from the lock (its own
    /// server): the fence check of [`resource_write`](Self::resource_write) without the look at
    /// the lock, which is not on this server. `Accepted` is then [`WriteOutcome::Written`]:
    /// whether the writer still held the lock is for the caller to tell.
    fn resource_write_apart(
        &mut self,
        res_key: &str,
        fence: Option<u64>,
        value: u64,
    ) -> impl Future<Output = CmdResult<WriteOutcome>> + Send;
    /// The resource's value (`HGET res_key value`; absent = 0), for the final read-back.
    fn resource_value(&mut self, res_key: &str) -> impl Future<Output = CmdResult<u64>> + Send;
}

/// What the runner asks a store before a run: the commands it knows and permits, its version,
/// the release script loaded in advance.
pub trait ServerProbes: Send {
    /// Whether the server knows a command (`COMMAND INFO name`), e.g. `GETDEL` (Redis ≥ 6.2)
    /// or `DELEX` (Redis ≥ 8.4).
    fn supports_command(&mut self, name: &str) -> impl Future<Output = CmdResult<bool>> + Send;
    /// Whether `SET` takes the `IFEQ` option (Valkey ≥ 8.1, Redis ≥ 8.4), read from the command
    /// table (`COMMAND DOCS SET`) without sending a `SET`, so the server's SET count stays
    /// the run's own.
    fn knows_set_ifeq(&mut self) -> impl Future<Output = CmdResult<bool>> + Send;
    /// Server name and version, e.g. `redis 7.0.15` (from `INFO server`).
    fn server_version(&mut self) -> impl Future<Output = CmdResult<String>> + Send;
    /// Whether this connection's user may run `args`, asked without running them (`ACL
    /// DRYRUN <user> …`, Redis ≥ 7.0 and Valkey): `Ok(Ok(()))` permitted, `Ok(Err(why))`
    /// refused or unknown (the server's words: `Command 'getdel' not found`), `Err` when it
    /// cannot be asked (an older server, or `ACL` not permitted to this user).
    fn dry_run(
        &mut self,
        args: &[&str],
    ) -> impl Future<Output = CmdResult<Result<(), Refusal>>> + Send;
    /// [`ServerProbes::dry_run`] on the protected resource's store (the lock's, unless apart).
    fn resource_dry_run(
        &mut self,
        args: &[&str],
    ) -> impl Future<Output = CmdResult<Result<(), Refusal>>> + Send {
        self.dry_run(args)
    }
    /// `SCRIPT LOAD` of the release script, so that an `EVALSHA` of it finds it cached.
    fn load_release_script(&mut self) -> impl Future<Output = CmdResult<()>> + Send;
}

/// A server's refusal of a command it was asked about without running it (`ACL DRYRUN`,
/// `COMMAND GETKEYS`), in its words (`Command 'getdel' not found`): an answer, not a failure
/// to ask.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

crate::exit::classify!(Refusal => BadInput);

impl Refusal {
    /// Whether the server does not know the command at all (rather than not permitting it).
    pub fn unknown_command(&self) -> bool {
        self.0.contains("not found")
    }
}

/// Why no lock library's driver can reach a store (the in-process model, a unix socket), and
/// what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

crate::exit::classify!(Unreachable => BadInput);

/// The user's own scripts and commands. Only a Redis server runs them: the defaults are the
/// error that says so (the in-process model, a Redlock's N servers).
pub trait UserScripts: Send {
    /// `SCRIPT LOAD` of one of the user's scripts (compiled, not run): the SHA1 the server
    /// names it by. A script the server cannot compile is a server error with the server's
    /// message. Only a Redis server runs Lua: elsewhere (the in-process model, a Redlock's N
    /// servers) an error that says so.
    fn load_user_script(&mut self, text: &str) -> impl Future<Output = CmdResult<String>> + Send {
        let _ = text;
        async { Err(no_lua()) }
    }
    /// One command of the user's step given as commands (`GET key`), sent as written, its
    /// reply read as a script's. Only a Redis server runs them.
    fn user_command(
        &mut self,
        args: &[String],
    ) -> impl Future<Output = CmdResult<ScriptReply>> + Send {
        let _ = args;
        async { Err(no_lua()) }
    }
    /// `COMMAND GETKEYS args…`: the keys the server says the command would touch, without
    /// running it; `Ok(Err(why))` when the server refuses to say (an unknown command, a wrong
    /// number of arguments, a command that takes no key). Only a Redis server answers.
    fn command_keys(
        &mut self,
        args: &[String],
    ) -> impl Future<Output = CmdResult<Result<Vec<String>, Refusal>>> + Send {
        let _ = args;
        async { Err(no_lua()) }
    }
    /// `EVALSHA` of one of the user's scripts with `KEYS[1]` = `key`, `ARGV[1]` = `token`,
    /// `ARGV[2]` = `ttl_ms` (on `NOSCRIPT`: `SCRIPT LOAD` of its text and `EVALSHA` again): its
    /// reply as the convention reads it.
    fn eval_user_script(
        &mut self,
        script: &UserScript,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = CmdResult<ScriptReply>> + Send {
        let _ = (script, key, token, ttl_ms);
        async { Err(no_lua()) }
    }
}

/// Removing keys: the end of a run's sweep of its keys, wherever they are, and the demo's `DEL`.
pub trait KeySweep: Send {
    /// `DEL key`: number of keys removed.
    fn del(&mut self, key: &str) -> impl Future<Output = CmdResult<i64>> + Send;
    /// `DEL key [key ...]` in one command: number of keys removed.
    fn del_many(&mut self, keys: &[String]) -> impl Future<Output = CmdResult<i64>> + Send;
    /// Every key whose name holds `needle` (`SCAN MATCH *needle*`): the end of a run sweeps
    /// the keys holding its unique prefix, whoever wrote them (a library's companion keys, a
    /// script's own). A store that cannot list its keys finds none.
    fn keys_containing(
        &mut self,
        needle: &str,
    ) -> impl Future<Output = CmdResult<Vec<String>>> + Send {
        let _ = needle;
        async { Ok(Vec::new()) }
    }
}

/// `text` with the glob characters of `SCAN MATCH` escaped.
pub(crate) fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What a read of the protected resource gave ([`ResourceCommands::resource_read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The resource's value (0 when it was never written).
    Value(u64),
    /// Refused under read-write fencing: the reader's fence is below `highest`, the highest
    /// fence the resource has seen (a newer holder has registered). Nothing was read or changed.
    Fenced {
        /// The highest fence the resource had seen.
        highest: u64,
    },
}

/// What a write to the protected resource gave ([`ResourceCommands::resource_write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The value was written. `holder` = the lock key held the writer's token at the instant
    /// of the write; `false` is an *unsafe write* (the writer had lost the lock).
    Accepted {
        /// Whether the writer held the lock when the write was applied.
        holder: bool,
        /// Whether *another* holder's token was in the lock at that instant (the writer's
        /// lock had expired and been taken): the case fencing exists to refuse. `false` with
        /// `holder: false` means the lock was gone and nobody held it.
        other_holder: bool,
    },
    /// The value was written to a resource apart from the lock ([`ResourceCommands::resource_write_apart`]):
    /// the server could not look at the lock.
    Written,
    /// Refused: the writer's fence is below `highest`, the highest fence the resource has
    /// seen. Nothing was written.
    Fenced {
        /// The highest fence the resource had seen.
        highest: u64,
    },
}

/// The fence argument of the resource scripts: the fence in decimal, or `-` for none.
pub(crate) fn fence_arg(fence: Option<u64>) -> String {
    fence.map_or_else(|| "-".to_string(), |f| f.to_string())
}

/// Opens connections: one per worker, or one shared by all.
pub trait Connector: Send + Sync + 'static {
    /// The connection type it opens.
    type Conn: LockConn;
    /// Opens a new connection (a new socket for Redis).
    fn connect(&self) -> impl Future<Output = anyhow::Result<Self::Conn>> + Send;
    /// A description safe to print and store (no password).
    fn describe(&self) -> String;
    /// The simulator's virtual clock (µs), when this is a simulated store: its runs go through
    /// the simulator, not real time.
    fn virtual_clock(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicU64>> {
        None
    }
    /// Another store like this one, empty, with a clock of its own: a simulated run's other
    /// parts (`sim_parallel`). `None`: not a model.
    fn fork(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Whether lock keys need hash tags (`…:{17}`): a Redis Cluster, where a lock's companion
    /// keys must share its slot for the scripts to run.
    fn hash_tags(&self) -> bool {
        false
    }
    /// A cluster's shards as it described them before the run (empty for one server).
    fn shards(&self) -> Vec<Shard> {
        Vec::new()
    }
    /// A redlock's figures (quorum failures, per-instance errors) since the last call, which
    /// resets them; `None` for a single store.
    fn take_redlock_figures(&self) -> Option<crate::quorum::RedlockFigures> {
        None
    }
    /// The URLs a lock library's driver connects to (with credentials: never printed), one
    /// per server (N for a Redlock; a cluster's seed nodes, where [`Connector::hash_tags`]);
    /// or why no library can reach it (the in-process model, a unix socket).
    fn driver_urls(&self) -> Result<Vec<String>, Unreachable> {
        Err(Unreachable(format!(
            "a lock library needs a Redis server it can connect to (backend spawn, or --redis \
             redis://HOST:PORT); this run's store is {}",
            self.describe()
        )))
    }
    /// Where the protected resource lives when it is apart from the locks
    /// ([`apart::Apart`]); `None`: on the lock's store.
    fn resource_store(&self) -> Option<String> {
        None
    }
}

/// What runs with a connector of whichever type a backend opened
/// ([`crate::backend::Backend::with_connector`]): a trait, not a closure, because its body is
/// generic over the connector (a closure cannot be).
pub trait UseConnector {
    /// What the body gives back.
    type Output;
    /// Runs the body with `connector`.
    fn with<K: Connector>(self, connector: &K) -> impl Future<Output = Self::Output> + Send;
}

/// The compare-and-delete used for `token` releases: the article's script, extended to say
/// *why* it refused (absent key vs another holder's token) — same server-side effect.
pub const RELEASE_LUA: &str = "local v = redis.call('get', KEYS[1]) \
if v == ARGV[1] then return redis.call('del', KEYS[1]) end \
if v then return -1 end \
return 0";

/// The article's compare-and-delete, verbatim; the demo shows it with its real replies.
pub(crate) const CANONICAL_CAD_LUA: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// Fenced acquisition: `SET NX PX` and, only if it set the key, `INCR` of the key's fence
/// counter, and with a third key the new fence registered at that resource. KEYS: lock, fence
/// counter[, resource]. ARGV: token, ttl in ms. Reply: the new fence, or nil.
pub(crate) const FENCED_ACQUIRE_LUA: &str = "\
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local f = redis.call('incr', KEYS[2])
  if KEYS[3] then
    local hi = tonumber(redis.call('hget', KEYS[3], 'fence') or '0')
    if f > hi then redis.call('hset', KEYS[3], 'fence', f) end
  end
  return f
end
return false";

/// Read of the resource hash, registering the reader's fence unless ARGV[1] is `-`.
/// KEYS: resource. ARGV: fence or `-`. Reply: `{1, value}` read, `{0, highest}` refused.
/// Fences and values are compared as Lua numbers: exact below 2^53.
pub(crate) const RESOURCE_READ_LUA: &str = "\
local r = redis.call('hmget', KEYS[1], 'value', 'fence')
local v, f = tonumber(r[1] or '0'), tonumber(r[2] or '0')
if ARGV[1] ~= '-' then
  local g = tonumber(ARGV[1])
  if g < f then return {0, f} end
  if g > f then redis.call('hset', KEYS[1], 'fence', ARGV[1]) end
end
return {1, v}";

/// Write of the resource hash, refused below the highest fence seen unless ARGV[2] is `-`,
/// reporting whether the writer held the lock at that instant.
/// KEYS: resource, lock. ARGV: token, fence or `-`, value.
/// Reply: `{1, 1}` accepted from the holder, `{1, 2}` accepted while another holder had the
/// lock, `{1, 0}` accepted while nobody had it (both unsafe), `{0, highest}` refused.
pub(crate) const RESOURCE_WRITE_LUA: &str = "\
local f = tonumber(redis.call('hget', KEYS[1], 'fence') or '0')
if ARGV[2] ~= '-' then
  local g = tonumber(ARGV[2])
  if g < f then return {0, f} end
  if g > f then redis.call('hset', KEYS[1], 'fence', ARGV[2]) end
end
redis.call('hset', KEYS[1], 'value', ARGV[3])
local v = redis.call('get', KEYS[2])
if v == ARGV[1] then return {1, 1} end
if v then return {1, 2} end
return {1, 0}";

/// The resource write of [`RESOURCE_WRITE_LUA`] for a resource apart from the lock: the same
/// fence check, no look at the lock. KEYS: resource. ARGV: fence or `-`, value. Reply: `{1, 3}`
/// written, `{0, highest}` refused.
pub(crate) const RESOURCE_WRITE_APART_LUA: &str = "\
local f = tonumber(redis.call('hget', KEYS[1], 'fence') or '0')
if ARGV[1] ~= '-' then
  local g = tonumber(ARGV[1])
  if g < f then return {0, f} end
  if g > f then redis.call('hset', KEYS[1], 'fence', ARGV[1]) end
end
redis.call('hset', KEYS[1], 'value', ARGV[2])
return {1, 3}";

/// Compare-and-`PEXPIRE`: re-arms the lock only if it holds the token.
/// KEYS: lock. ARGV: token, ttl in ms. Reply: 1 re-armed, 0 absent or another's.
pub(crate) const EXTEND_LUA: &str = "\
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0";

/// A store that cannot run the user's Lua.
fn no_lua() -> CmdError {
    CmdError {
        kind: ErrorKind::Other,
        detail: "this store cannot run Lua scripts, only a Redis server can".to_string(),
    }
}

/// A user's script answered outside the convention (`why` names it and the reply).
fn off_convention(why: String) -> CmdError {
    CmdError {
        kind: ErrorKind::Other,
        detail: why,
    }
}

/// Runs the user's `script` on the lock `key` held (or wanted) with `token`; a server error
/// (a Lua runtime error) names the script. `before_last` runs just before the command that
/// acts goes out: the script's one `EVALSHA`, or the last of its commands.
async fn eval_user<C: LockCommands + UserScripts>(
    conn: &mut C,
    script: &UserScript,
    key: &str,
    token: &str,
    ttl_ms: u64,
    mut before_last: impl FnMut() + Send,
) -> CmdResult<ScriptReply> {
    let reply = match &script.commands {
        Some(steps) => run_commands(conn, steps, key, token, ttl_ms, before_last).await,
        None => {
            before_last();
            conn.eval_user_script(script, key, token, ttl_ms).await
        }
    };
    reply.map_err(|mut e| {
        e.detail = format!("{} (from {})", e.detail, script.label());
        e
    })
}

/// A step given as commands: each sent on its own, in order; one whose reply is not what its
/// `== VALUE` asks for stops the steps with `0` (busy, nothing deleted, lost). The last
/// command's reply is read as a script's; `before_last` runs just before the last is sent.
async fn run_commands<C: LockCommands + UserScripts>(
    conn: &mut C,
    steps: &[script::CommandStep],
    key: &str,
    token: &str,
    ttl_ms: u64,
    mut before_last: impl FnMut() + Send,
) -> CmdResult<ScriptReply> {
    let mut last = ScriptReply::Nil;
    for (i, step) in steps.iter().enumerate() {
        if i + 1 == steps.len() {
            before_last();
        }
        last = conn.user_command(&step.args(key, token, ttl_ms)).await?;
        if let Some(want) = step.expected(key, token, ttl_ms)
            && !last.reads_as(&want)
        {
            return Ok(ScriptReply::Int(0));
        }
    }
    Ok(last)
}

/// Takes the lock with the user's acquire script: `true` acquired, `false` busy.
pub(crate) async fn acquire_by_script<C: LockCommands + UserScripts>(
    conn: &mut C,
    script: &UserScript,
    key: &str,
    token: &str,
    ttl_ms: u64,
) -> CmdResult<bool> {
    let reply = eval_user(conn, script, key, token, ttl_ms, || {}).await?;
    script::classify_acquire(script, &reply).map_err(off_convention)
}

/// Re-arms a held lock with `how`, or with the user's extend script when there is one.
pub(crate) async fn extend_by<C: LockCommands + UserScripts>(
    conn: &mut C,
    how: ExtendCommand,
    script: Option<&UserScript>,
    key: &str,
    token: &str,
    ttl_ms: u64,
) -> CmdResult<bool> {
    match script {
        Some(s) => {
            let reply = eval_user(conn, s, key, token, ttl_ms, || {}).await?;
            script::classify_extend(s, &reply).map_err(off_convention)
        }
        None => conn.extend(key, token, ttl_ms, how).await,
    }
}

/// Sends the release for `method` and classifies the server's reply. The `script` method runs
/// the user's release script (`user`), whose `1` is judged by `newer_holder` (see
/// [`script::classify_release`]): lockbench's timeline, not the script's word.
pub(crate) async fn release<C: LockCommands + UserScripts>(
    conn: &mut C,
    method: release::ReleaseMethod,
    user: Option<&UserScript>,
    key: &str,
    token: &str,
    ttl_ms: u64,
    newer_holder: impl Fn() -> bool + Send + Sync,
) -> CmdResult<release::ReleaseOutcome> {
    Ok(match method {
        release::ReleaseMethod::Script => {
            let Some(s) = user else {
                return Err(off_convention(
                    "the `script` release method has no release_script".to_string(),
                ));
            };
            // Whether a newer holder was in as the command that deletes went out: for a
            // script, as it is sent; for commands, as the last one is (a `GET` that matched
            // one round trip earlier proves nothing by then).
            let mut newer = false;
            let reply = eval_user(conn, s, key, token, ttl_ms, || newer = newer_holder()).await?;
            script::classify_release(s, &reply, newer).map_err(off_convention)?
        }
        release::ReleaseMethod::Del => {
            release::classify_getdel(conn.getdel(key).await?.as_deref(), token)
        }
        release::ReleaseMethod::Token => {
            release::classify_script(conn.release_script(key, token).await?)
        }
        release::ReleaseMethod::Delex => release::classify_delex(conn.delex(key, token).await?),
    })
}
