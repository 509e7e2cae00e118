//! The Redis target a user names: checking its URL (what redis-rs will really connect to),
//! the loopback rule, and the one redaction every printed or stored target goes through. Plain
//! string work, below the profile and the store that both need it.

use redis::IntoConnectionInfo;

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
pub(crate) fn check_url(raw: &str) -> anyhow::Result<redis::ConnectionInfo> {
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

/// A non-loopback host without `--allow-remote`: bad input (exit 2, `cli::code_of_error`).
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to load-test {0}: it is not a loopback address. lockbench only targets \
         127.0.0.0/8, ::1 or localhost unless you pass --allow-remote"
)]
pub(crate) struct RemoteRefused(String);
crate::exit::classify!(RemoteRefused => BadInput);

pub(crate) fn check_loopback(host: &str, allow_remote: bool) -> anyhow::Result<()> {
    if allow_remote || is_loopback_host(host) {
        Ok(())
    } else {
        Err(RemoteRefused(host.to_string()).into())
    }
}

/// Whether `host`, as redis-rs hands it to the resolver, is this machine: `localhost` in any
/// case, `::1`, 127.0.0.0/8 in every numeric form the resolver accepts (`127.1`,
/// `0x7f.0.0.1`, `2130706433`), and IPv4-mapped loopback (`::ffff:127.0.0.1`).
/// The server a URL reaches, to tell two URLs of one server apart from two servers: host and
/// port (every name of this machine one host, case ignored) or the socket's path — never the
/// database, the user or the TLS settings, which do not make another server.
pub(crate) fn server_of(info: &redis::ConnectionInfo) -> String {
    use redis::ConnectionAddr::*;
    let host = |h: &str| {
        if is_loopback_host(h) {
            "this machine".to_string()
        } else {
            h.to_ascii_lowercase()
        }
    };
    match info.addr() {
        Tcp(h, port) | TcpTls { host: h, port, .. } => format!("{}, port {port}", host(h)),
        Unix(path) => format!("unix socket {}", path.display()),
        other => format!("{other:?}"),
    }
}

pub(crate) fn is_loopback_host(host: &str) -> bool {
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
pub(crate) fn inet_aton(s: &str) -> Option<std::net::Ipv4Addr> {
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

/// A server's Unix socket as the lock libraries' drivers read it (redis-py's form):
/// `unix:///path?db=N`, with `username=` and `password=` in the query (a URL without a host
/// takes no credentials), every value encoded once. Both lockbench's watches on their sockets
/// and a user's `--redis unix://…` server reach the drivers this way. `None` for a path that
/// is not UTF-8.
pub(crate) fn drivers_unix_url(
    path: &std::path::Path,
    db: &str,
    username: Option<&str>,
    password: Option<&str>,
) -> Option<String> {
    let mut url = url::Url::parse("unix:///").ok()?;
    url.set_path(path.to_str()?);
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("db", db);
        if let Some(u) = username {
            q.append_pair("username", u);
        }
        if let Some(p) = password {
            q.append_pair("password", p);
        }
    }
    Some(url.into())
}

/// The one redaction of a Redis URL, used for everything printed or stored (errors, terminal,
/// `manifest.json`, `summary.json`, `report.html`). Replaces with `***` the password, the user
/// name when it stands alone (it may be the secret), the credential query parameters
/// (`pass`, `password`, `user`, `username`) and any fragment but TLS's `#insecure`.
///
/// Text that does not parse as a URL, or whose `@` falls outside the user-info (an unencoded
/// `/ ? #` in a password), is redacted from the raw text instead: everything between `://`
/// (or the start) and the last `@` becomes `***`.
pub(crate) fn redact_url(url: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Timeouts;
    use crate::store::redis::RedisConnector;

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
}
