//! One file per command, each with one entry function; `cli.rs` only parses and dispatches.
//!
//! - [`args`]: the workload flags and their fold with a profile into a plan.
//! - [`run`]: `run` and `compare` (one workload, one or several release methods).
//! - [`sweep`]: one workload over TTLs × release methods.
//! - [`demo`]: stories replayed step by step against a real server.
//! - [`report`]: `lockbench report DIR`.
//! - [`merge`]: `lockbench merge DIR...`, the agents of one run combined.

pub(crate) mod args;
pub mod demo;
pub(crate) mod merge;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod sweep;
