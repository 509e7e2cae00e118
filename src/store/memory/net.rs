//! The network model: how a command reaches the keyspace and its reply comes back, and the
//! server's clock. [`Net`] is the seam the simulator's [`crate::sim::SimNet`] plugs into;
//! [`RealNet`] is tokio's clock with a fixed round trip.

use super::keyspace::{Keyspace, lock};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How a command reaches the keyspace and its reply comes back: the network and the server's
/// time.
pub trait Net: Clone + Send + Sync + 'static {
    /// Now on the store's clock, µs.
    fn now_us(&self) -> u64;
    /// Runs `f` on the keyspace at the instant the server executes the command (given to `f`),
    /// and completes the round trip.
    fn call<T: Send>(
        &self,
        keys: &Mutex<Keyspace>,
        f: impl FnOnce(&mut Keyspace, u64) -> T + Send,
    ) -> impl Future<Output = T> + Send;
    /// The round trip in words, for the backend's description.
    fn describe(&self) -> String;
    /// The simulator's virtual clock, when this network is simulated.
    fn virtual_clock(&self) -> Option<Arc<std::sync::atomic::AtomicU64>> {
        None
    }
    /// The same network for another simulated part (a clock of its own).
    fn fork(&self) -> Self {
        self.clone()
    }
}

/// tokio's clock and a fixed round trip: the request reaches the model at half of it.
#[derive(Debug, Clone)]
pub struct RealNet {
    pub(crate) rtt: Duration,
    pub(crate) base: Instant,
}

impl Net for RealNet {
    fn now_us(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }

    async fn call<T: Send>(
        &self,
        keys: &Mutex<Keyspace>,
        f: impl FnOnce(&mut Keyspace, u64) -> T + Send,
    ) -> T {
        let sent = Instant::now();
        if self.rtt.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep_until(sent + self.rtt / 2).await;
        }
        let out = {
            let mut ks = lock(keys);
            f(&mut ks, self.now_us())
        };
        if !self.rtt.is_zero() {
            tokio::time::sleep_until(sent + self.rtt).await;
        }
        out
    }

    fn describe(&self) -> String {
        format!("simulated round trip {:?}", self.rtt)
    }
}
