//! The measuring engine: workers contend for lock keys against a backend and record what
//! happens. It returns what it measured; commands decide what to print and draw.
//!
//! - [`arrivals`]: the open arrival model (requests at a rate, latency from their intended
//!   arrival).
//! - [`busy`]: the busy policy and the pause after a failed command.
//! - [`worker`]: the one worker loop, in named steps (acquire, hold, release, think); its
//!   shared [`context`], the run's [`keys`] and each worker's random [`streams`].
//! - [`pacer`]: what paces a worker through time: the real clock or the simulator's.
//! - [`collector`]: drains the histograms into `.hlog` interval logs once per interval.
//! - [`recorder`]: live counters, striped histograms, per-key overlap trackers.
//! - [`precise`]: the precise timer (a timer thread, then a yield loop to the section's end).
//!
//! Here too: the runtime's thread count as `main` built it, the end-of-run grace and the
//! arrivals' backlog, which the runner and the simulator share.

pub(crate) mod busy;
pub(crate) mod collector;
pub(crate) mod context;
pub(crate) mod keys;
pub(crate) mod open_loop;
pub(crate) mod pacer;
pub mod precise;
pub(crate) mod recorder;
pub(crate) mod streams;
pub(crate) mod worker;

/// The async runtime's thread count for a command line, and why (recorded in the manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeThreads {
    /// Worker threads.
    pub threads: usize,
    /// Where the count came from.
    pub why: &'static str,
}

/// What `main` built the runtime with (unset when the library runs on another runtime, e.g.
/// in tests: the manifest then counts the runtime's workers itself).
pub static RUNTIME_THREADS: std::sync::OnceLock<RuntimeThreads> = std::sync::OnceLock::new();

use std::time::Duration;

/// Arrivals that may wait for a request slot; beyond this they are dropped (counted).
pub(crate) const ARRIVAL_BACKLOG: usize = 1 << 20;

/// How long sections still open at the end of a time-limited run may go on before they are
/// cut short (and counted as interrupted): three TTLs, at least 5 s, at most 60 s.
pub(crate) fn end_grace(ttl_ms: u64) -> Duration {
    Duration::from_millis(ttl_ms.saturating_mul(3).clamp(5_000, 60_000))
}
