//! The measuring engine: workers contend for lock keys against a backend and record what
//! happens. It returns what it measured; commands decide what to print and draw.
//!
//! - [`runner`]: runs a plan's variants against a connector, removes the run's keys, writes
//!   the run directory's data files.
//! - [`worker`]: the one worker loop, in named steps (acquire, hold, release, think).
//! - [`recorder`]: live counters, striped histograms, per-key overlap trackers.

pub mod recorder;
pub mod runner;
pub mod worker;
