//! One file per command, each with one entry function; `cli.rs` only parses and dispatches.
//!
//! - [`args`]: the workload flags and their fold with a profile into a plan.
//! - [`run`]: `run` and `compare` (one workload, one or several release methods).
//! - [`sweep`]: one workload over TTLs × release methods.
//! - [`demo`]: stories replayed step by step against a real server.
//! - [`report`]: `lockbench report DIR`.
//! - [`merge`]: `lockbench merge DIR...`, the agents of one run combined.
//! - [`recommend`]: a TTL for measured durations (the computation is `crate::recommend`'s).
//! - [`crosscheck`]: a simulated run against the real one it models.

pub(crate) mod args;
pub(crate) mod crosscheck;
pub mod demo;
pub(crate) mod merge;
pub(crate) mod recommend;
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
/// runs), else 1.
pub fn code_of_error(e: &anyhow::Error) -> i32 {
    if e.chain().any(|c| c.is::<crate::exit::Interrupted>()) {
        return crate::exit::INTERRUPTED;
    }
    let bad = e.chain().any(|c| {
        c.is::<crate::exit::BadInput>()
            || c.is::<crate::profile::ProfileError>()
            || c.is::<crate::results::OutDirError>()
            || c.is::<crate::dist::DistError>()
            || c.is::<crate::model::units::UnitError>()
            || c.is::<crate::recommend::LoadError>()
            || c.is::<crate::inputs::FileError>()
            || c.is::<crate::recommend::ParamError>()
            || c.is::<crate::report::run_dir::ReportError>()
            || c.is::<crate::target::RemoteRefused>()
            || c.is::<crate::metrics::MetricsError>()
    });
    if bad {
        crate::exit::BAD_INPUT
    } else {
        crate::exit::FAILED
    }
}
