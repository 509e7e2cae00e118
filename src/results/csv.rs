//! `summary.csv`: one row per variant — the run's facts, every figure of the one table
//! ([`figures()`]), then percentiles.

use super::write_file;
use crate::analysis::figures::{figures, num};
use crate::analysis::summary::Summary;
use std::io::Write;
use std::path::Path;

/// The run's facts that lead every `summary.csv` row.
/// A column and how to fill it.
type Column<T> = (&'static str, fn(&Summary) -> T);

const META_COLUMNS: &[Column<String>] = &[
    ("variant", |s| s.meta.variant.clone()),
    ("release", |s| s.meta.release.clone()),
    ("connection_mode", |s| s.meta.connection_mode.clone()),
    ("backend", |s| s.meta.backend.clone()),
    ("server_version", |s| s.meta.server_version.clone()),
    ("workers", |s| s.meta.workers.to_string()),
    ("keys", |s| s.meta.keys.to_string()),
    ("ttl_ms", |s| s.meta.ttl_ms.to_string()),
    ("time_scale", |s| num(s.meta.time_scale)),
    ("unscaled_ttl_ms", |s| num(s.meta.unscaled_ttl_ms)),
    ("seed", |s| s.meta.seed.to_string()),
    ("elapsed_s", |s| num(s.meta.elapsed_s)),
];

/// Percentiles that follow the figures in `summary.csv`.
const QUANTILE_COLUMNS: &[Column<f64>] = &[
    ("duration_p50_ms", |s| s.duration_ms.p50),
    ("duration_p99_ms", |s| s.duration_ms.p99),
    ("duration_max_ms", |s| s.duration_ms.max),
    ("timer_error_p50_ms", |s| s.timer_error_ms.p50),
    ("timer_error_p99_ms", |s| s.timer_error_ms.p99),
    ("timer_error_max_ms", |s| s.timer_error_ms.max),
    ("excess_p99_ms", |s| s.excess_ms.p99),
    ("acquire_latency_p50_ms", |s| s.acquire_latency_ms.p50),
    ("acquire_latency_p99_ms", |s| s.acquire_latency_ms.p99),
    ("set_latency_p50_ms", |s| s.set_latency_ms.p50),
    ("set_latency_p99_ms", |s| s.set_latency_ms.p99),
    ("release_latency_p50_ms", |s| s.release_latency_ms.p50),
    ("release_latency_p99_ms", |s| s.release_latency_ms.p99),
    ("crash_blocked_mean_ms", |s| s.crash_blocked_ms.mean),
    ("request_latency_p50_ms", |s| s.request_latency_ms.p50),
    ("request_latency_p99_ms", |s| s.request_latency_ms.p99),
    ("crash_blocked_max_ms", |s| s.crash_blocked_ms.max),
];

/// The `redlock` block of summary.json, last: empty cells for a variant on one server. The
/// per-instance counts are joined with `;` (instance 0 first).
const REDLOCK_COLUMNS: &[Column<String>] = &[
    ("redlock_instances", |s| red(s, |r| r.instances.to_string())),
    ("redlock_quorum", |s| red(s, |r| r.quorum.to_string())),
    ("redlock_instance_timeout_ms", |s| {
        red(s, |r| num(r.instance_timeout_ms))
    }),
    ("redlock_drift_ms", |s| red(s, |r| num(r.drift_ms))),
    ("redlock_acquisitions_attempted", |s| {
        red(s, |r| r.acquisitions_attempted.to_string())
    }),
    ("redlock_acquired", |s| red(s, |r| r.acquired.to_string())),
    ("redlock_failed_quorums", |s| {
        red(s, |r| r.failed_quorums.to_string())
    }),
    ("redlock_validity_expired", |s| {
        red(s, |r| r.validity_expired.to_string())
    }),
    ("redlock_instance_errors", |s| {
        red(s, |r| joined(&r.instance_errors))
    }),
    ("redlock_instance_timeouts", |s| {
        red(s, |r| joined(&r.instance_timeouts))
    }),
];

fn red(s: &Summary, f: impl Fn(&crate::quorum::RedlockFigures) -> String) -> String {
    s.redlock.as_ref().map(f).unwrap_or_default()
}

fn joined(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(";")
}

/// Columns of `summary.csv` (one row per variant): the run's facts, every figure of
/// [`figures()`], percentiles, then Redlock's block.
pub(crate) fn csv_columns() -> Vec<&'static str> {
    let meta = META_COLUMNS.iter().map(|(n, _)| *n);
    let figs = figures().into_iter().map(|f| f.name);
    let quant = QUANTILE_COLUMNS.iter().map(|(n, _)| *n);
    let redlock = REDLOCK_COLUMNS.iter().map(|(n, _)| *n);
    meta.chain(figs).chain(quant).chain(redlock).collect()
}

/// The `summary.csv` cells of one summary, in [`csv_columns`] order.
pub(crate) fn csv_row(s: &Summary) -> Vec<String> {
    let meta = META_COLUMNS.iter().map(|(_, f)| f(s));
    let figs = figures().into_iter().map(|f| f.value(s));
    let quant = QUANTILE_COLUMNS.iter().map(|(_, f)| num(f(s)));
    let redlock = REDLOCK_COLUMNS.iter().map(|(_, f)| f(s));
    meta.chain(figs).chain(quant).chain(redlock).collect()
}

/// Writes `<dir>/summary.csv` (errors name the file).
pub fn write_summary_csv_file(dir: &Path, summaries: &[Summary]) -> anyhow::Result<()> {
    write_file(&dir.join("summary.csv"), |w| {
        write_summary_csv(w, summaries)
    })
}

/// Writes `summary.csv` with one row per variant.
pub(crate) fn write_summary_csv<W: Write>(w: W, summaries: &[Summary]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(w);
    w.write_record(csv_columns())?;
    for s in summaries {
        w.write_record(csv_row(s))?;
    }
    w.flush()?;
    Ok(())
}
