//! A real Redis through redis-rs. Timeouts are set deliberately: redis-rs 1.x would otherwise
//! give up on a reply after 500 ms, turning a slow server into errors instead of samples.

use super::{CANONICAL_CAD_LUA, CmdError, CmdResult, Connector, ErrorKind, LockConn, RELEASE_LUA};
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
    /// user/password). Refuses a non-loopback host unless `allow_remote`.
    pub fn new(url: &str, timeouts: Timeouts, allow_remote: bool) -> anyhow::Result<Self> {
        let info = url
            .into_connection_info()
            .map_err(|e| anyhow::anyhow!("invalid Redis URL {}: {e}", redact_url(url)))?;
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
            }),
        })
    }
}

fn check_loopback(host: &str, allow_remote: bool) -> anyhow::Result<()> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = h == "localhost"
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback || allow_remote {
        Ok(())
    } else {
        anyhow::bail!(
            "refusing to load-test {host}: it is not a loopback address. lockbench only targets \
             127.0.0.0/8, ::1 or localhost unless you pass --allow-remote"
        )
    }
}

/// Replaces the credentials of a Redis URL with `***`, for anything printed or stored: the
/// `user:password@` part and the `user` / `pass` / `password` / `username` query parameters
/// (`unix:///tmp/redis.sock?pass=…`).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (head, fragment) = match url.find('#') {
        Some(i) => (&url[..i], &url[i..]),
        None => (url, ""),
    };
    let (head, query) = match head.find('?') {
        Some(i) => (&head[..i], Some(&head[i + 1..])),
        None => (head, None),
    };
    let rest = &head[scheme_end + 3..];
    let auth_end = rest.find('/').unwrap_or(rest.len());
    let mut out = match rest[..auth_end].rfind('@') {
        Some(at) => format!("{}://***@{}", &head[..scheme_end], &rest[at + 1..]),
        None => head.to_string(),
    };
    if let Some(q) = query {
        let params: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _))
                    if ["pass", "password", "user", "username"]
                        .contains(&k.to_ascii_lowercase().as_str()) =>
                {
                    format!("{k}=***")
                }
                _ => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out.push_str(fragment);
    out
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
    CmdError {
        kind,
        detail: e.to_string(),
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
            "redis://***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("rediss://user:pw@localhost/"),
            "rediss://***@localhost/"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
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

    /// Versions are read from INFO server.
    #[test]
    fn parses_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(parse_server_version(info), "redis 7.0.15");
        assert_eq!(version_tuple("redis 7.0.15"), Some((7, 0)));
        assert_eq!(version_tuple("redis 8.4.0"), Some((8, 4)));
    }
}
