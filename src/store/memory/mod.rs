//! An in-process model of exactly the commands lockbench uses, with the same semantics as Redis
//! (millisecond `PX`, lazy expiry, atomic compare-and-delete, the fenced acquisition, resource
//! and extension scripts, `SET … IFEQ` as Valkey answers it) and a configurable simulated round
//! trip. Time comes from the store's [`Net`]: tokio's clock ([`RealNet`], so paused-time tests
//! run it deterministically) or the simulator's virtual clock ([`crate::sim::SimNet`]); the
//! keyspace itself counts µs and never reads a clock.
//!
//! [`MemoryStore`] here is the connector and, by cloning, the connection; the keyspace is in
//! [`keyspace`], the network model in [`net`], and the commands themselves in `commands`.

mod commands;
pub(crate) mod keyspace;
pub(crate) mod net;

use super::Connector;
use keyspace::{Keyspace, expired, lock};
use net::{Net, RealNet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The model store: a connector and, by cloning, a connection.
#[derive(Debug, Clone)]
pub struct MemoryStore<N = RealNet> {
    keys: Arc<Mutex<Keyspace>>,
    net: N,
    delex: bool,
}

impl MemoryStore<RealNet> {
    /// A fresh empty model whose every command takes `rtt` (the request reaches the model at
    /// half of it). `delex` says whether the model offers `DELEX` (as Redis ≥ 8.4 does).
    pub fn new(rtt: Duration, delex: bool) -> Self {
        Self::with_net(
            RealNet {
                rtt,
                base: Instant::now(),
            },
            delex,
        )
    }
}

impl<N: Net> MemoryStore<N> {
    /// A fresh empty model behind `net`.
    pub fn with_net(net: N, delex: bool) -> Self {
        Self {
            keys: Arc::default(),
            net,
            delex,
        }
    }

    /// Its keyspace (the simulator restarts it).
    pub fn keyspace(&self) -> &Arc<Mutex<Keyspace>> {
        &self.keys
    }

    /// Number of live keys (for tests).
    pub fn len(&self) -> usize {
        let now = self.net.now_us();
        let ks = self.lock();
        ks.map
            .values()
            .filter(|e| !e.expires_at.is_some_and(|t| expired(t, now)))
            .count()
    }

    /// Whether the model holds no live key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Keyspace> {
        lock(&self.keys)
    }

    /// Runs `f` on the keyspace at the server's time, then completes the round trip. (The
    /// network's future itself, not an `async fn` around it holding a second copy of `f`.)
    fn call<'a, T: Send + 'a>(
        &'a self,
        f: impl FnOnce(&mut Keyspace, u64) -> T + Send + 'a,
    ) -> impl Future<Output = T> + Send + 'a {
        self.net.call(&self.keys, f)
    }
}

impl<N: Net> Connector for MemoryStore<N> {
    type Conn = MemoryStore<N>;
    async fn connect(&self) -> anyhow::Result<MemoryStore<N>> {
        Ok(self.clone())
    }
    fn describe(&self) -> String {
        format!("memory model ({})", self.net.describe())
    }
    fn virtual_clock(&self) -> Option<Arc<std::sync::atomic::AtomicU64>> {
        self.net.virtual_clock()
    }
    fn fork(&self) -> Option<Self> {
        Some(Self::with_net(self.net.fork(), self.delex))
    }
}
