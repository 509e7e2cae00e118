//! The measuring engine: workers contend for lock keys against a backend and record what
//! happens. It returns what it measured; commands decide what to print and draw.
//!
//! - [`arrivals`]: the open arrival model (requests at a rate, latency from their intended
//!   arrival).
//! - [`busy`]: the busy policy and the pause after a failed command.
//! - [`runner`]: runs a plan's variants against a connector, removes the run's keys, writes
//!   the run directory's data files.
//! - [`worker`]: the one worker loop, in named steps (acquire, hold, release, think).
//! - [`driver`]: what drives a worker through time: the real clock or the simulator's.
//! - [`collector`]: drains the histograms into `.hlog` interval logs once per interval.
//! - [`recorder`]: live counters, striped histograms, per-key overlap trackers.

pub mod arrivals;
pub mod busy;
pub mod collector;
pub mod driver;
pub mod precise;
pub mod recorder;
pub mod runner;
pub mod worker;
