//! The run directory's files at a run's start and end: the manifest (written first, completed
//! last), `summary.json`, `summary.csv` and `faults.csv`.

use super::RunOptions;
use crate::analysis::summary::Summary;
use crate::model::server::{ServerInfo, SkippedCell};
use crate::profile::Plan;
use crate::results::{self, Manifest, SummaryFile};
use std::path::Path;
use std::time::SystemTime;

/// The manifest of a run about to start (its end, outcome and cleanup are filled in last).
/// `run`: what names the run (its id and key prefix) and when it started.
pub(crate) fn new_manifest(
    (run_id, prefix, started): (&str, &str, SystemTime),
    opts: &RunOptions,
    plan: &Plan,
    kind: &str,
    servers: &[ServerInfo],
    skipped: &[SkippedCell],
    variants: Vec<String>,
) -> Manifest {
    let threads = crate::engine::RUNTIME_THREADS
        .get()
        .copied()
        .unwrap_or_else(|| crate::engine::RuntimeThreads {
            threads: tokio::runtime::Handle::current().metrics().num_workers(),
            why: "the caller's runtime",
        });
    Manifest {
        lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
        run_id: run_id.to_string(),
        command: opts.command.clone(),
        profile_file: opts.profile_file.clone(),
        profile: plan.clone(),
        seed: plan.seed,
        backend: kind.to_string(),
        backend_detail: servers
            .iter()
            .map(|s| s.backend_detail.clone())
            .collect::<Vec<_>>()
            .join("; "),
        connection_mode: plan.backend.connection.name().to_string(),
        runtime_threads: threads.threads,
        runtime_threads_why: threads.why.to_string(),
        server_version: servers
            .iter()
            .map(|s| s.version.clone())
            .collect::<Vec<_>>()
            .join(", "),
        servers: servers.to_vec(),
        skipped: skipped.to_vec(),
        key_prefix: prefix.to_string(),
        variants,
        started_at: results::utc_stamp(started, false),
        ended_at: None,
        interrupted: false,
        failure: None,
        failed_variant: None,
        resource_store: None,
        metrics_url: None,
        leftover_keys: None,
        cleanup_removed_locks: 0,
        agent: opts.agent.as_ref().map(|a| a.record()),
    }
}

/// Writes the summaries (`summary.json`, `summary.csv`, `faults.csv` when the plan has
/// faults) and completes the manifest: its end, whether it was interrupted, what failed.
pub(crate) fn write_results(
    dir: &Path,
    run_id: &str,
    summaries: &[Summary],
    manifest: &mut Manifest,
    plan: &Plan,
    interrupted: bool,
    failure: Option<anyhow::Error>,
) -> anyhow::Result<()> {
    let summary_file = SummaryFile {
        run_id: run_id.to_string(),
        variants: summaries.to_vec(),
        agent: manifest.agent.clone(),
        merged: None,
    };
    results::write_json(&dir.join("summary.json"), &summary_file)?;
    results::write_summary_csv_file(dir, summaries)?;
    if !plan.faults.schedule.is_empty() {
        let rows: Vec<(String, crate::model::fault::FaultWindow)> = summaries
            .iter()
            .flat_map(|s| s.faults.iter().map(|f| (s.meta.variant.clone(), f.clone())))
            .collect();
        crate::faults::write_csv(&dir.join("faults.csv"), &rows)?;
    }
    manifest.ended_at = Some(results::utc_stamp(SystemTime::now(), false));
    manifest.interrupted = interrupted;
    manifest.failure = failure.as_ref().map(|e| format!("{e:#}"));
    results::write_json(&dir.join("manifest.json"), &manifest)?;
    Ok(())
}
