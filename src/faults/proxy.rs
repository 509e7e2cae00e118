//! Placeholder until the proxy lands.
use std::net::SocketAddr;
use std::time::Duration;

/// The loopback fault proxy.
pub struct Proxy {
    addr: SocketAddr,
}

impl Proxy {
    /// Starts it.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        Ok(Proxy { addr: upstream })
    }
    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// Latency.
    pub fn set_latency(&self, _delay: Duration, _jitter: Duration) {}
    /// Partition.
    pub fn set_partition(&self, _on: bool) {}
}
