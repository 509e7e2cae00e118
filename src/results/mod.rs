//! The run directory's format, in one place, below the engine that writes it and the report
//! and `recommend` that read it.
//!
//! `results/<run-id>/`: `manifest.json` and `summary.json` ([`Manifest`], [`SummaryFile`]),
//! `summary.csv` ([`csv`]), `events.csv` ([`events`], streamed and read row by row),
//! `<metric>.hgrm` ([`hgrm`], percentile distributions in ms) and `<metric>.hlog` ([`hlog`],
//! HdrHistogram interval logs, V2 deflate, one tagged interval per second and variant; written
//! by [`crate::engine::collector`]), and for the agents of a multi-agent run and their merge
//! the `agent` and `merged` blocks ([`agents`]). This file: run ids, the output directory,
//! file writing.

pub(crate) mod agents;
pub(crate) mod csv;
pub(crate) mod events;
pub(crate) mod hgrm;
pub mod hlog;

pub(crate) use csv::csv_columns;
pub(crate) use csv::csv_row;
pub use csv::write_summary_csv_file;
pub use events::EventsWriter;
pub(crate) use events::for_each_event;
pub use hgrm::write_hgrm;
pub use hgrm::write_hgrms;

use crate::analysis::summary::Summary;
use crate::profile::Plan;
use crate::record::Metric;
use anyhow::Context;

use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A run id sortable by time, with 32 random bits so runs started in the same second against
/// one server never share a key prefix: `20261202T153012Z-3f9a07c2`.
pub(crate) fn run_id(now: SystemTime) -> String {
    format!("{}-{:08x}", utc_stamp(now, true), rand::random::<u32>())
}

/// UTC time to the second as RFC 3339, `2026-12-02T15:30:12Z`, or compact,
/// `20261202T153012Z` (run ids, file names).
pub(crate) fn utc_stamp(t: SystemTime, compact: bool) -> String {
    // Out of jiff's range (years beyond ±9999) only for a clock gone mad: clamp.
    let ts = jiff::Timestamp::try_from(t).unwrap_or(if t < UNIX_EPOCH {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    });
    let format = if compact {
        "%Y%m%dT%H%M%SZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    ts.strftime(format).to_string()
}

/// What `manifest.json` records.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// lockbench version.
    pub lockbench_version: String,
    /// Run id.
    pub run_id: String,
    /// Sub-command.
    pub command: String,
    /// Profile file.
    pub profile_file: Option<String>,
    /// The resolved profile (defaults filled in, flags applied, URL redacted).
    pub profile: Plan,
    /// Seed.
    pub seed: u64,
    /// Backend kind actually used (`spawn`, `url`, `memory`).
    pub backend: String,
    /// Backend description (address, no password).
    pub backend_detail: String,
    /// Connection mode.
    pub connection_mode: String,
    /// Threads of the async runtime the workers ran on.
    pub runtime_threads: usize,
    /// Why that many (`--threads`, one per core, or one left to a server on this machine).
    pub runtime_threads_why: String,
    /// Server version from `INFO server` (several, comma-separated, when several ran).
    pub server_version: String,
    /// Every server the run measured: version, address, binary, probed capabilities.
    #[serde(default)]
    pub servers: Vec<crate::model::server::ServerInfo>,
    /// Variant × server cells that could not run (a method the server lacks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<crate::model::server::SkippedCell>,
    /// Prefix of every key the run wrote.
    pub key_prefix: String,
    /// Variants, in run order.
    pub variants: Vec<String>,
    /// UTC start.
    pub started_at: String,
    /// UTC end.
    pub ended_at: Option<String>,
    /// Stopped by Ctrl-C or SIGTERM.
    pub interrupted: bool,
    /// What ended the run early, if something failed (the variants before it are in the
    /// summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The variant that failed, whose rows `events.csv` keeps without a summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_variant: Option<String>,
    /// Where the protected resource lived: apart from the locks (a private server, the one
    /// given by `resource_redis`, a second model), or `shared: on the lock's store`; absent:
    /// the run had no resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_store: Option<String>,
    /// Where live metrics were served (`--metrics`), e.g. `http://127.0.0.1:9464/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_url: Option<String>,
    /// Keys that may remain on the server (cleanup failed or was abandoned), listed in
    /// `leftover-keys.txt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leftover_keys: Option<usize>,
    /// Locks the final cleanup removed (they had not expired or been released yet).
    pub cleanup_removed_locks: u64,
    /// This process was one agent of a multi-agent run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<agents::AgentRecord>,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SummaryFile {
    /// Run id.
    pub run_id: String,
    /// One entry per variant.
    pub variants: Vec<Summary>,
    /// Written by one agent of a multi-agent run: who it was and its clock readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<agents::AgentRecord>,
    /// Written by `lockbench merge`: how the agents were placed on the server's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<agents::MergeRecord>,
}

/// Creates the output directory (and parents).
pub(crate) fn create_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))
}

/// Files a run, `lockbench report` or a sweep writes at the top of its directory (besides the
/// per-metric `.hgrm`/`.hlog` files, see [`is_run_file`]).
pub(crate) const RUN_FILES: &[&str] = &[
    "manifest.json",
    "summary.json",
    "summary.csv",
    "events.csv",
    "faults.csv",
    "report.html",
    "durations.png",
    "survival.png",
    "timeline.png",
    "acquire-latency.png",
    "compare.png",
    "damage.png",
    "leftover-keys.txt",
    "sweep.csv",
    "sweep.png",
];

/// An output directory lockbench will not write into; bad input (exit code 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutDirError {
    /// The directory holds an earlier run: appending would mix two runs in `events.csv` and the
    /// `.hlog` files while `summary.json` is replaced.
    #[error(
        "output directory {} already holds lockbench output ({listing}): writing into it would mix \
         two runs. Choose a new --out, or add --force to delete those files first",
        dir.display()
    )]
    HoldsRun {
        /// The directory.
        dir: PathBuf,
        /// Some of the files found.
        listing: String,
    },
    /// The directory holds something lockbench did not write; never deleted, even with
    /// `--force`.
    #[error(
        "output directory {} holds files lockbench did not write ({listing}): choose a new or \
         empty --out directory (--force only deletes lockbench's own files)",
        dir.display()
    )]
    Foreign {
        /// The directory.
        dir: PathBuf,
        /// Some of the foreign entries.
        listing: String,
    },
    /// The path exists and is not a directory.
    #[error("output path {} exists and is not a directory: give --out a directory", .0.display())]
    NotADirectory(PathBuf),
}
crate::exit::classify!(OutDirError => BadInput);

/// `name` is a file lockbench writes into a run directory: one of [`RUN_FILES`], or
/// `<metric>.hlog`, `<metric>.hgrm`, `<metric>-<variant>.hgrm`.
pub(crate) fn is_run_file(name: &str) -> bool {
    if RUN_FILES.contains(&name) {
        return true;
    }
    let variant_ok = |v: &str| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '+')
    };
    Metric::ALL.iter().any(|m| {
        let stem = m.file_stem();
        let Some(rest) = name.strip_prefix(stem) else {
            return false;
        };
        rest == ".hlog"
            || rest == ".hgrm"
            || rest
                .strip_prefix('-')
                .and_then(|r| r.strip_suffix(".hgrm"))
                .is_some_and(variant_ok)
    })
}

/// Makes `dir` ready for a new run: creates it when missing; an empty directory is used as it
/// is. A directory holding an earlier lockbench run (its files, and for a sweep its `ttl-…`
/// cell directories) is refused, or with `force` those files are deleted first. Anything
/// lockbench did not write is never deleted: its presence refuses the directory, `force` or not.
pub(crate) fn prepare_dir(dir: &Path, force: bool) -> anyhow::Result<()> {
    if !dir.exists() {
        return create_dir(dir);
    }
    if !dir.is_dir() {
        return Err(OutDirError::NotADirectory(dir.to_path_buf()).into());
    }
    let (ours, foreign) = classify_dir(dir)?;
    let listing = |names: &[PathBuf]| {
        let mut shown: Vec<String> = names
            .iter()
            .take(5)
            .map(|p| p.strip_prefix(dir).unwrap_or(p).display().to_string())
            .collect();
        if names.len() > 5 {
            shown.push(format!("and {} more", names.len() - 5));
        }
        shown.join(", ")
    };
    if !foreign.is_empty() {
        return Err(OutDirError::Foreign {
            dir: dir.to_path_buf(),
            listing: listing(&foreign),
        }
        .into());
    }
    if ours.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(OutDirError::HoldsRun {
            dir: dir.to_path_buf(),
            listing: listing(&ours),
        }
        .into());
    }
    // Files first, then the (now empty) cell directories, deepest first.
    let (dirs, files): (Vec<&PathBuf>, Vec<&PathBuf>) = ours
        .iter()
        .partition(|p| p.symlink_metadata().is_ok_and(|m| m.is_dir()));
    for f in files {
        std::fs::remove_file(f)
            .with_context(|| format!("--force: cannot delete {}", f.display()))?;
    }
    for d in dirs.iter().rev() {
        std::fs::remove_dir(d)
            .with_context(|| format!("--force: cannot delete {}", d.display()))?;
    }
    Ok(())
}

/// Deletes the files of [`is_run_file`] at the top of `dir`, as far as it can: a run that
/// ended before anything ran leaves its `--out` as it found it (it refused any such file
/// there at its start, [`prepare_dir`]).
pub(crate) fn remove_run_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if is_file && e.file_name().to_str().is_some_and(is_run_file) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Entries of `dir` lockbench wrote (files, sweep cell directories and their files; cells after
/// their files) and those it did not.
fn classify_dir(dir: &Path) -> anyhow::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let read = |d: &Path| -> anyhow::Result<Vec<std::fs::DirEntry>> {
        let mut v = std::fs::read_dir(d)
            .with_context(|| format!("cannot read output directory {}", d.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("cannot read output directory {}", d.display()))?;
        v.sort_by_key(|e| e.file_name());
        Ok(v)
    };
    let (mut ours, mut foreign) = (Vec::new(), Vec::new());
    for e in read(dir)? {
        let name = e.file_name().to_string_lossy().into_owned();
        // `file_type` does not follow symlinks: a link named like a run file is ours to remove.
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if !is_dir {
            if is_run_file(&name) {
                ours.push(e.path());
            } else {
                foreign.push(e.path());
            }
            continue;
        }
        // A sweep's cell directory counts as ours only when everything in it is a run file.
        let cell = name.starts_with("ttl-")
            && read(&e.path())?.iter().all(|c| {
                c.file_type().is_ok_and(|t| !t.is_dir())
                    && is_run_file(&c.file_name().to_string_lossy())
            });
        if cell {
            ours.extend(read(&e.path())?.iter().map(|c| c.path()));
            ours.push(e.path());
        } else {
            foreign.push(e.path());
        }
    }
    Ok((ours, foreign))
}

/// Creates `path` and writes it through a buffer with `body`. Every error names the file,
/// including the final flush: with a buffer, that is where a full disk shows up.
pub(crate) fn write_file(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let ctx = || format!("cannot write {}", path.display());
    let f = File::create(path).with_context(ctx)?;
    let mut w = BufWriter::new(f);
    body(&mut w).with_context(ctx)?;
    w.into_inner()
        .map_err(|e| e.into_error())
        .with_context(ctx)?;
    Ok(())
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    write_file(path, |w| {
        serde_json::to_writer_pretty(&mut *w, value)?;
        writeln!(w)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Dates come out right across leap years and month ends.
    #[test]
    fn utc_stamps() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        assert_eq!(utc_stamp(t, false), "2026-11-18T11:06:40Z");
        assert_eq!(
            utc_stamp(UNIX_EPOCH + Duration::from_secs(951_782_400), true),
            "20000229T000000Z"
        );
        let a = run_id(t);
        assert!(a.starts_with("20261118T110640Z-"));
        assert_eq!(a.len(), "20261118T110640Z-".len() + 8, "{a}");
        // Whole seconds: a fraction is cut, never printed.
        let late = t + Duration::from_millis(999);
        assert_eq!(utc_stamp(late, false), "2026-11-18T11:06:40Z");
    }

    /// Exactly lockbench's own names count as run files: every chart and page the report draws,
    /// each metric's `.hgrm`/`.hlog` (with a variant suffix), nothing else.
    #[test]
    fn run_files_are_exactly_lockbenchs() {
        use crate::report::{
            ACQUIRE_PNG, COMPARE_PNG, DAMAGE_PNG, DURATIONS_PNG, REPORT_HTML, SURVIVAL_PNG,
            TIMELINE_PNG,
        };
        for f in [
            ACQUIRE_PNG,
            COMPARE_PNG,
            DAMAGE_PNG,
            "leftover-keys.txt",
            DURATIONS_PNG,
            REPORT_HTML,
            SURVIVAL_PNG,
            TIMELINE_PNG,
        ] {
            assert!(is_run_file(f), "{f}");
        }
        for m in Metric::ALL {
            let s = m.file_stem();
            for f in [
                format!("{s}.hgrm"),
                format!("{s}.hlog"),
                format!("{s}-del.hgrm"),
                format!("{s}-token+extend+fence-rw.hgrm"),
            ] {
                assert!(is_run_file(&f), "{f}");
            }
        }
        for f in [
            "notes.txt",
            "durations.png.bak",
            "durations-.hgrm",
            "durations-a b.hgrm",
            "events.csv~",
            "x.hgrm",
            ".events.csv.swp",
        ] {
            assert!(!is_run_file(f), "{f}");
        }
    }
}
