//! The `metrics` address: what the profile key and `--metrics` accept.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// What `metrics` accepts, for error messages.
pub(crate) const VALID: &str = "a port (9464, :9464: 127.0.0.1), HOST:PORT with an IP address \
                         (127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464 with --allow-remote) or \
                         localhost:PORT; port 0 picks a free port";

/// Parses a `metrics` address. A port alone binds loopback (127.0.0.1).
pub(crate) fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    let bad = || format!("`{text}` is not a metrics address: use {VALID}");
    let port_only = t.strip_prefix(':').unwrap_or(t);
    if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
        let port = port_only.parse::<u16>().map_err(|_| bad())?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Some(port) = t.strip_prefix("localhost:") {
        let port = port.parse::<u16>().map_err(|_| bad())?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    t.parse::<SocketAddr>().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port alone is loopback; IPs of both families parse; names and garbage do not.
    #[test]
    fn addresses() {
        let lo = |p| SocketAddr::from(([127, 0, 0, 1], p));
        assert_eq!(parse_addr("9464"), Ok(lo(9464)));
        assert_eq!(parse_addr(":0"), Ok(lo(0)));
        assert_eq!(parse_addr("localhost:9"), Ok(lo(9)));
        assert_eq!(
            parse_addr("0.0.0.0:9464"),
            Ok(SocketAddr::from(([0, 0, 0, 0], 9464)))
        );
        assert!(parse_addr("[::1]:1").unwrap().ip().is_loopback());
        for bad in ["", "x", "99999", "host:1", "1.2.3.4", ":", "1.2.3.4:70000"] {
            let e = parse_addr(bad).unwrap_err();
            assert!(e.contains("port 0 picks"), "{bad}: {e}");
        }
    }
}
