//! `observe --fault latency@AT+LENGTH,delay=…` and `partition@AT+LENGTH`: the run schedule's
//! network kinds, carried out by the doors themselves (they are a proxy already), between the
//! program and the proxy's clock. So the figures are the server's side of a slow or cut
//! network, which is what decides whether a lock expired under its holder:
//!
//! - `latency`: each reply reaches the program `delay ± jitter` after the proxy read it from
//!   the server (and noted it). A hold, from the acquisition's reply at the proxy to the
//!   release's request at the proxy, grows by the delay: holds outlast the TTL as they would
//!   behind a slow link. A connection's next replies are read once the earlier ones are
//!   delivered, so replies pipelined behind a delayed one can wait up to one delay more.
//! - `partition`: nothing gets through in either direction. A request waits at the door (not
//!   yet seen by the proxy's clock) and a reply already read is held; both go out, in order,
//!   when the window ends, as TCP delivers them after a short partition. A new connection is
//!   accepted but connects upstream only then. A program with a socket timeout shorter than
//!   the window gives up its commands, as it would behind a real partition.
//!
//! Without a network fault in the schedule the doors have no [`Network`], and forwarding does
//! not look at it.

use crate::faults::proxy::delivery_delay;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The faults in force.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    delay: Duration,
    jitter: Duration,
    partitioned: bool,
}

/// The doors' network faults, set by the fault driver ([`crate::faults::drive`]).
#[derive(Debug)]
pub(crate) struct Network {
    state: watch::Sender<State>,
    /// Each connection's jitter draws from its own stream.
    streams: AtomicU64,
}

impl Network {
    pub(crate) fn new() -> Network {
        Network {
            state: watch::Sender::new(State::default()),
            streams: AtomicU64::new(0),
        }
    }

    /// What one connection waits on.
    pub(crate) fn hooks(&self) -> Hooks {
        let n = self.streams.fetch_add(1, Ordering::Relaxed);
        Hooks {
            state: self.state.subscribe(),
            rng: SmallRng::seed_from_u64(n),
        }
    }
}

impl crate::faults::Network for Network {
    fn set_latency(&self, delay: Duration, jitter: Duration) {
        self.state.send_modify(|s| {
            s.delay = delay;
            s.jitter = jitter;
        });
    }

    fn set_partition(&self, on: bool) {
        self.state.send_modify(|s| s.partitioned = on);
    }
}

/// One connection's side of the [`Network`].
#[derive(Debug)]
pub(crate) struct Hooks {
    state: watch::Receiver<State>,
    rng: SmallRng,
}

impl Hooks {
    /// Waits out a partition (returns at once when none is on).
    pub(crate) async fn pass(&mut self) {
        // An error means the run is ending: nothing holds the bytes any more.
        let _ = self.state.wait_for(|s| !s.partitioned).await;
    }

    /// Holds a reply read at `read` for the latency in force, then waits out a partition.
    pub(crate) async fn reply(&mut self, read: Instant) {
        let s = *self.state.borrow();
        if !s.delay.is_zero() || !s.jitter.is_zero() {
            let wait = delivery_delay(s.delay, s.jitter, &mut self.rng);
            if let Some(due) = read.checked_add(wait) {
                tokio::time::sleep_until(due).await;
            }
        }
        self.pass().await;
    }
}
