//! A real Redis through redis-rs. Timeouts are set deliberately: redis-rs 1.x would otherwise
//! give up on a reply after 500 ms, turning a slow server into errors instead of samples.

use super::{
    CANONICAL_CAD_LUA, CmdError, CmdResult, Connector, EXTEND_LUA, ErrorKind, ExtendCommand,
    FENCED_ACQUIRE_LUA, LockConn, RELEASE_LUA, RESOURCE_READ_LUA, RESOURCE_WRITE_LUA, ReadOutcome,
    WriteOutcome, fence_arg,
};
use anyhow::Context;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionAddr, IntoConnectionInfo, Script};
use std::sync::Arc;
use std::time::Duration;

/// Where and how to connect.
#[derive(Clone)]
pub struct RedisConnector {
    client: Client,
    config: ConnectionManagerConfig,
    describe: String,
    scripts: Arc<Scripts>,
}

struct Scripts {
    release: Script,
    canonical: Script,
    acquire_fenced: Script,
    read: Script,
    write: Script,
    extend: Script,
}

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
            describe: format!("redis at {where_}"),
            scripts: Arc::new(Scripts {
                release: Script::new(RELEASE_LUA),
                canonical: Script::new(CANONICAL_CAD_LUA),
                acquire_fenced: Script::new(FENCED_ACQUIRE_LUA),
                read: Script::new(RESOURCE_READ_LUA),
                write: Script::new(RESOURCE_WRITE_LUA),
                extend: Script::new(EXTEND_LUA),
            }),
        })
    }
}

/// The URL forms lockbench accepts, for error messages.
const URL_FORMS: &str = "Use redis://[USER:]PASSWORD@HOST:PORT[/DB] (or rediss:// for TLS, \
rediss://…/#insecure to skip certificate checks), or unix:///PATH?db=N&user=U&pass=P";

/// How to write special characters of a user name or password.
const ENCODE_HINT: &str =
    "percent-encode / ? # @ % in a user name or password (as %2F %3F %23 %40 %25)";

/// Checks that `raw` is a Redis URL redis-rs reads the way it looks, and returns what it will
/// connect to. Errors show the URL redacted. Refused, because redis-rs would silently ignore
/// them: query parameters it does not read (`?password=` on a TCP URL), a fragment other than
/// TLS's `#insecure`, and an `@` outside the user-info (an unencoded `/ ? #` in a password
/// moves the password into the path, query or fragment).
pub fn check_url(raw: &str) -> anyhow::Result<redis::ConnectionInfo> {
    let shown = redact_url(raw);
    let bad = |why: String| anyhow::anyhow!("invalid Redis URL {shown}: {why}");
    let u = url::Url::parse(raw).map_err(|e| {
        let what = match e {
            url::ParseError::RelativeUrlWithoutBase => "no scheme such as redis://".to_string(),
            e => e.to_string(),
        };
        let why = if raw.contains('@') {
            format!("{what}; {ENCODE_HINT}")
        } else {
            what
        };
        bad(format!("{why}. {URL_FORMS}"))
    })?;
    if stray_at(&u) {
        return Err(bad(format!(
            "an `@` comes after the host, so part of the credentials would be read as the \
             path, query or fragment; {ENCODE_HINT}"
        )));
    }
    let unix = matches!(u.scheme(), "unix" | "redis+unix" | "valkey+unix");
    let tls = matches!(u.scheme(), "rediss" | "valkeys");
    match u.fragment() {
        None => {}
        Some("insecure") if tls => {}
        Some(_) => {
            return Err(bad(format!(
                "the text after `#` is a URL fragment, which is ignored{}; if it belongs to the \
                 password, {ENCODE_HINT}",
                if tls { " (only #insecure is read)" } else { "" }
            )));
        }
    }
    for (k, _) in u.query_pairs() {
        let why = match (unix, k.as_ref()) {
            (_, "protocol") | (true, "db" | "user" | "pass") => continue,
            (false, "password" | "pass" | "user" | "username") => format!(
                "?{k}= is not read on a TCP URL (the server would answer NOAUTH); put the \
                 credentials before the host: redis://[USER:]PASSWORD@HOST:PORT and {ENCODE_HINT}"
            ),
            (false, "db") => "?db= is not read on a TCP URL; put the database number in the path: \
                 redis://HOST:PORT/N"
                .to_string(),
            (true, "password" | "username") => format!(
                "?{k}= is not read on a unix URL; use ?{}=",
                if k == "password" { "pass" } else { "user" }
            ),
            (_, other) => format!(
                "unknown parameter ?{other}= (valid: {})",
                if unix {
                    "db, user, pass, protocol"
                } else {
                    "protocol"
                }
            ),
        };
        return Err(bad(why));
    }
    u.into_connection_info()
        .map_err(|e| bad(format!("{e}. {URL_FORMS}")))
}

/// Whether an `@` appears after the authority: the sign of unencoded credentials.
fn stray_at(u: &url::Url) -> bool {
    let has = |s: &str| s.contains('@') || s.to_ascii_lowercase().contains("%40");
    has(u.path()) || u.query().is_some_and(has) || u.fragment().is_some_and(has)
}

fn check_loopback(host: &str, allow_remote: bool) -> anyhow::Result<()> {
    if allow_remote || is_loopback_host(host) {
        Ok(())
    } else {
        anyhow::bail!(
            "refusing to load-test {host}: it is not a loopback address. lockbench only targets \
             127.0.0.0/8, ::1 or localhost unless you pass --allow-remote"
        )
    }
}

/// Whether `host`, as redis-rs hands it to the resolver, is this machine: `localhost` in any
/// case, `::1`, 127.0.0.0/8 in every numeric form the resolver accepts (`127.1`,
/// `0x7f.0.0.1`, `2130706433`), and IPv4-mapped loopback (`::ffff:127.0.0.1`).
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if h.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match h.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_canonical().is_loopback(),
        Err(_) => inet_aton(h).is_some_and(|ip| ip.is_loopback()),
    }
}

/// The classic IPv4 text forms (`inet_aton`, which getaddrinfo accepts): one to four parts,
/// each decimal, octal (leading `0`) or hex (`0x`), the last filling the remaining bytes.
/// Parsed here exactly as the resolver will, so `0127.0.0.1` (octal, 87.0.0.1) is not taken
/// for loopback.
fn inet_aton(s: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or(p.strip_prefix("0X")) {
            (h, 16)
        } else if p.len() > 1 && p.starts_with('0') {
            (&p[1..], 8)
        } else {
            (*p, 10)
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        nums.push(u32::from_str_radix(digits, radix).ok()?);
    }
    let (last, head) = nums.split_last()?;
    if head.iter().any(|&n| n > 255) || *last > (u32::MAX >> (8 * head.len())) {
        return None;
    }
    let value = head
        .iter()
        .enumerate()
        .fold(*last, |acc, (i, &n)| acc | (n << (24 - 8 * i)));
    Some(std::net::Ipv4Addr::from(value))
}

/// Query parameters that carry credentials.
const SECRET_PARAMS: [&str; 4] = ["pass", "password", "user", "username"];

/// The one redaction of a Redis URL, used for everything printed or stored (errors, terminal,
/// `manifest.json`, `summary.json`, `report.html`). Replaces with `***` the password, the user
/// name when it stands alone (it may be the secret), the credential query parameters
/// (`pass`, `password`, `user`, `username`) and any fragment but TLS's `#insecure`.
///
/// Text that does not parse as a URL, or whose `@` falls outside the user-info (an unencoded
/// `/ ? #` in a password), is redacted from the raw text instead: everything between `://`
/// (or the start) and the last `@` becomes `***`.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) if !stray_at(&u) => redact_parsed(u).unwrap_or_else(|| redact_raw(url)),
        _ => redact_raw(url),
    }
}

fn redact_parsed(mut u: url::Url) -> Option<String> {
    if u.password().is_some_and(|p| !p.is_empty()) {
        u.set_password(Some("***")).ok()?;
    } else if !u.username().is_empty() {
        u.set_username("***").ok()?;
        u.set_password(None).ok()?;
    }
    if let Some(q) = u.query() {
        let q = redact_query(q);
        u.set_query(Some(&q));
    }
    if u.fragment().is_some_and(|f| f != "insecure") {
        u.set_fragment(Some("***"));
    }
    Some(u.to_string())
}

fn redact_raw(raw: &str) -> String {
    let (head, rest) = match raw.find("://") {
        Some(i) => (&raw[..i + 3], &raw[i + 3..]),
        None => ("", raw),
    };
    let (userinfo, tail) = match rest.rfind('@') {
        Some(at) => ("***@", &rest[at + 1..]),
        None => ("", rest),
    };
    let (tail, fragment) = match tail.split_once('#') {
        Some((t, "insecure")) => (t, "#insecure"),
        Some((t, _)) => (t, "#***"),
        None => (tail, ""),
    };
    let tail = match tail.split_once('?') {
        Some((t, q)) => format!("{t}?{}", redact_query(q)),
        None => tail.to_string(),
    };
    format!("{head}{userinfo}{tail}{fragment}")
}

fn redact_query(q: &str) -> String {
    q.split('&')
        .map(|kv| {
            // Compare the decoded name: redis-rs reads `pa%73s` as `pass`.
            let name = url::form_urlencoded::parse(kv.as_bytes())
                .next()
                .map(|(k, _)| k.to_ascii_lowercase());
            match (kv.split_once('='), name) {
                (Some((k, _)), Some(n)) if SECRET_PARAMS.contains(&n.as_str()) => {
                    format!("{k}=***")
                }
                _ => kv.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

impl Connector for RedisConnector {
    type Conn = RedisConn;
    async fn connect(&self) -> anyhow::Result<RedisConn> {
        let conn = ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
            .await
            .map_err(|e| {
                let detail = classify(e).detail;
                let hint = connect_hint(&detail);
                anyhow::anyhow!("cannot connect to {}: {detail}{hint}", self.describe)
            })?;
        Ok(RedisConn {
            conn,
            scripts: self.scripts.clone(),
        })
    }
    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// What a failed connect most likely means, from the client's message.
pub fn connect_hint(detail: &str) -> &'static str {
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

/// One multiplexed connection that reconnects when lost; its clones share the socket.
#[derive(Clone)]
pub struct RedisConn {
    conn: ConnectionManager,
    scripts: Arc<Scripts>,
}

fn classify(e: redis::RedisError) -> CmdError {
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

impl LockConn for RedisConn {
    async fn set_nx_px(&mut self, key: &str, value: &str, ttl_ms: u64) -> CmdResult<bool> {
        let r: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)?;
        Ok(r.is_some())
    }

    async fn getdel(&mut self, key: &str) -> CmdResult<Option<String>> {
        redis::cmd("GETDEL")
            .arg(key)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)
    }

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

    async fn release_script(&mut self, key: &str, token: &str) -> CmdResult<i64> {
        // invoke_async sends EVALSHA and falls back to EVAL on NOSCRIPT.
        self.scripts
            .release
            .key(key)
            .arg(token)
            .invoke_async(&mut self.conn)
            .await
            .map_err(classify)
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

    async fn supports_command(&mut self, name: &str) -> CmdResult<bool> {
        // Unknown commands come back as a nil entry.
        let v: redis::Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(name)
            .query_async(&mut self.conn)
            .await
            .map_err(classify)?;
        Ok(match v {
            redis::Value::Array(items) => items
                .first()
                .is_some_and(|i| !matches!(i, redis::Value::Nil)),
            _ => false,
        })
    }

    async fn server_version(&mut self) -> CmdResult<String> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.conn)
            .await
            .map_err(classify)?;
        Ok(parse_server_version(&info))
    }

    async fn set_nx_px_fenced(
        &mut self,
        key: &str,
        fence_key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> CmdResult<Option<u64>> {
        self.scripts
            .acquire_fenced
            .key(key)
            .key(fence_key)
            .arg(token)
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
            WriteOutcome::Accepted { holder: n == 1 }
        } else {
            WriteOutcome::Fenced { highest: n }
        })
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

/// `redis 7.0.15` (or `valkey 8.0.1`) from the text of `INFO server`.
pub fn parse_server_version(info: &str) -> String {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
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

    /// Passwords never survive into anything printable.
    #[test]
    fn redacts_credentials() {
        assert_eq!(
            redact_url("redis://:s3cret@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        // The user stays visible next to a password; alone it may be the secret.
        assert_eq!(
            redact_url("rediss://user:pw@localhost/"),
            "rediss://user:***@localhost/"
        );
        assert_eq!(
            redact_url("redis://tok@localhost:1"),
            "redis://***@localhost:1"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(
            redact_url("rediss://127.0.0.1:1/#insecure"),
            "rediss://127.0.0.1:1/#insecure"
        );
        assert_eq!(
            redact_url("unix:///tmp/r.sock?db=1&pass=pw&user=u&protocol=3"),
            "unix:///tmp/r.sock?db=1&pass=***&user=***&protocol=3"
        );
    }

    /// The leaks of issue 7 (defect 6): a password with an unencoded `/ # ?`, a URL without
    /// `://`, a password in the query or the fragment. The old redaction echoed each of them.
    #[test]
    fn redacts_urls_that_do_not_parse_or_hide_the_password() {
        let pw = "Sec9ret";
        for raw in [
            "redis://:Sec/Sec9ret@127.0.0.1:6379",
            "redis://:Sec9ret/x@127.0.0.1:6379",
            "redis://:Sec#Sec9ret@127.0.0.1:6379",
            "redis://:Sec?Sec9ret@127.0.0.1:6379",
            "redis://u:12/Sec9ret@127.0.0.1:6379",
            "redis://u:12?a=Sec9ret@127.0.0.1:6379",
            "redis//:Sec9ret@127.0.0.1:6379",
            "redis:/:Sec9ret@127.0.0.1:6379",
            ":Sec9ret@127.0.0.1",
            "redis://127.0.0.1:6379/#Sec9ret",
            "redis://127.0.0.1:6379/?password=Sec9ret",
            "redis://127.0.0.1:6379/?PassWord=Sec9ret&protocol=3",
            "redis://127.0.0.1:6379/?pa%73s=Sec9ret",
            "unix:///tmp/r.sock?pass=Sec9ret#Sec9ret",
            "redis://:p%40Sec9ret@127.0.0.1:6379",
            "not a url :Sec9ret@x",
            "redis://[::1:Sec9ret@127.0.0.1",
        ] {
            let shown = redact_url(raw);
            assert!(!shown.contains(pw), "{raw} -> {shown}");
            // The same holds for the errors the connector gives.
            if let Err(e) = RedisConnector::new(raw, Timeouts::default(), false) {
                assert!(!format!("{e:#}").contains(pw), "{raw}: {e:#}");
            }
        }
        assert_eq!(
            redact_url("redis://:Sec/ret9@127.0.0.1:6379"),
            "redis://***@127.0.0.1:6379"
        );
        assert_eq!(redact_url("redis//:PW@127.0.0.1:1"), "***@127.0.0.1:1");
        assert_eq!(
            redact_url("redis://127.0.0.1:1/#pw"),
            "redis://127.0.0.1:1/#***"
        );
    }

    /// URLs redis-rs would misread are refused with the form to use instead, never run with
    /// the password silently dropped (issue 7, defect 11: `?password=` then NOAUTH).
    #[test]
    fn refuses_urls_redis_rs_would_misread() {
        let t = Timeouts::default();
        let msg = |u: &str| format!("{:#}", RedisConnector::new(u, t, false).err().unwrap());
        let m = msg("redis://127.0.0.1:1/?password=pw");
        assert!(
            m.contains("?password= is not read") && m.contains("PASSWORD@HOST"),
            "{m}"
        );
        assert!(msg("redis://127.0.0.1:1?user=u").contains("?user= is not read"));
        assert!(msg("redis://127.0.0.1:1?db=2").contains("in the path"));
        assert!(msg("unix:///tmp/r.sock?password=pw").contains("use ?pass="));
        assert!(msg("redis://127.0.0.1:1?foo=1").contains("valid: protocol"));
        let m = msg("redis://127.0.0.1:1/#pw");
        assert!(m.contains("fragment") && m.contains("%23"), "{m}");
        let m = msg("redis://:Sec/ret9@127.0.0.1:1");
        assert!(
            m.contains("%2F") && m.contains("redis://***@127.0.0.1:1"),
            "{m}"
        );
        assert!(msg("redis://u:12/x@127.0.0.1:1").contains("after the host"));
        assert!(msg("redis//:pw@127.0.0.1:1").contains("redis://"));
        // What stays accepted.
        for ok in [
            "redis://:Sec%2Fre%23t%3F9@127.0.0.1:1/0",
            "redis://127.0.0.1:1/?protocol=resp3",
            "rediss://127.0.0.1:1/#insecure",
            "unix:///tmp/r.sock?db=1&user=u&pass=p",
        ] {
            assert!(RedisConnector::new(ok, t, false).is_ok(), "{ok}");
        }
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
