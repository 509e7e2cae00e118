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

/// Runs a backend's start-up (`open`: servers spawned, a cluster created, Redlock's instances
/// started), counting Ctrl-C, SIGTERM and SIGHUP from its first moment: the first signal gives the
/// start-up up at once — the servers started so far are stopped as their handles drop — and
/// ends the command as an interrupted run (exit 130). Nothing ran, so nothing is written.
/// Without this a signal during a start-up of seconds met its default action (SIGTERM ended
/// the process with 143) or, inherited as ignored (SIGINT of a background job), was lost.
pub(crate) async fn opening<T>(
    open: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let mut signals = crate::signals::subscribe();
    tokio::select! {
        r = open => r,
        _ = signals.wait_for(|n| *n > 0) => Err(anyhow::Error::new(crate::exit::Interrupted)
            .context("the servers' start-up given up: nothing ran, no file was written")),
    }
}

/// The exit code of a command that failed with `e`: 130 when it was interrupted, 2 for bad
/// input (a profile or flag, a distribution or data file, an output directory that would mix
/// runs), else 1 — as the error types in its chain declare ([`crate::exit::code_of`]).
pub fn code_of_error(e: &anyhow::Error) -> i32 {
    crate::exit::code_of(e)
}
