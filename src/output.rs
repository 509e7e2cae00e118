//! Files of a run and the terminal table.
//!
//! `results/<run-id>/`: `manifest.json`, `summary.json`, `summary.csv`, `events.csv` (streamed),
//! `<metric>.hgrm` (percentile distribution, values in ms) and `<metric>.hlog` (HdrHistogram
//! interval log, V2 deflate-compressed, one tagged interval per second and variant).

use crate::analysis::figures::{cell, figures, num};
use crate::analysis::summary::{Quantiles, Summary};
use crate::profile::Plan;
use crate::record::{EventRow, HistSet, Metric};
use anyhow::Context;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A run id sortable by time, with 32 random bits so runs started in the same second against
/// one server never share a key prefix: `20261202T153012Z-3f9a07c2`.
pub fn run_id(now: SystemTime) -> String {
    format!("{}-{:08x}", utc_stamp(now, true), rand::random::<u32>())
}

/// UTC time to the second as RFC 3339, `2026-12-02T15:30:12Z`, or compact,
/// `20261202T153012Z` (run ids, file names).
pub fn utc_stamp(t: SystemTime, compact: bool) -> String {
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
    /// Server version from `INFO server`.
    pub server_version: String,
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
    /// Keys that may remain on the server (cleanup failed or was abandoned), listed in
    /// `leftover-keys.txt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leftover_keys: Option<usize>,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SummaryFile {
    /// Run id.
    pub run_id: String,
    /// One entry per variant.
    pub variants: Vec<Summary>,
}

/// Creates the output directory (and parents).
pub fn create_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))
}

/// Files a run, `lockbench report` or a sweep writes at the top of its directory (besides the
/// per-metric `.hgrm`/`.hlog` files, see [`is_run_file`]).
pub const RUN_FILES: &[&str] = &[
    "manifest.json",
    "summary.json",
    "summary.csv",
    "events.csv",
    "report.html",
    "durations.png",
    "survival.png",
    "timeline.png",
    "acquire-latency.png",
    "compare.png",
    "sweep.csv",
    "sweep.png",
];

/// An output directory lockbench will not write into; bad input (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
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

/// `name` is a file lockbench writes into a run directory: one of [`RUN_FILES`], or
/// `<metric>.hlog`, `<metric>.hgrm`, `<metric>-<variant>.hgrm`.
pub fn is_run_file(name: &str) -> bool {
    if RUN_FILES.contains(&name) {
        return true;
    }
    let variant_ok = |v: &str| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
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
pub fn prepare_dir(dir: &Path, force: bool) -> anyhow::Result<()> {
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
pub fn write_file(
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

/// Streams section rows into `events.csv` from a dedicated thread, so memory stays flat and
/// workers never block on disk (the channel is bounded: back-pressure instead of growth).
pub struct EventsWriter {
    /// Where workers send rows.
    pub tx: tokio::sync::mpsc::Sender<EventRow>,
    handle: std::thread::JoinHandle<anyhow::Result<u64>>,
}

impl EventsWriter {
    /// Opens `path` for appending (a header is written only to a new file).
    pub fn start(path: &Path) -> anyhow::Result<Self> {
        let new = !path.exists();
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<EventRow>(8192);
        let path = path.to_path_buf();
        let handle = std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut w = csv::WriterBuilder::new()
                .has_headers(new)
                .from_writer(BufWriter::with_capacity(1 << 16, f));
            let ctx = || format!("cannot write {}", path.display());
            let mut n = 0u64;
            while let Some(row) = rx.blocking_recv() {
                w.serialize(&row).with_context(ctx)?;
                n += 1;
            }
            // csv's flush also flushes the BufWriter underneath: a full disk surfaces here.
            w.flush().with_context(ctx)?;
            Ok(n)
        });
        Ok(Self { tx, handle })
    }

    /// Waits for every row to be written (all senders must be dropped first).
    pub fn finish(self) -> anyhow::Result<u64> {
        drop(self.tx);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the events.csv writer thread panicked"))?
    }
}

/// Writes a histogram (µs) as an HdrHistogram percentile distribution with values in ms.
pub fn write_hgrm<W: Write>(mut w: W, h: &Histogram<u64>) -> io::Result<()> {
    writeln!(
        w,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    if h.is_empty() {
        writeln!(
            w,
            "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
            0.0, 0.0
        )?;
        writeln!(w, "#[Max     = {:>12.3}, Total count    = {:>12}]", 0.0, 0)?;
        return Ok(());
    }
    let mut count = 0;
    for v in h.iter_quantiles(5) {
        count += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = v.value_iterated_to() as f64 / 1000.0;
        if q < 1.0 {
            writeln!(
                w,
                "{value:>12.3} {q:>14.12} {count:>10} {:>14.2}",
                1.0 / (1.0 - q)
            )?;
        } else {
            writeln!(w, "{value:>12.3} {q:>14.12} {count:>10}")?;
        }
    }
    writeln!(
        w,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    )?;
    writeln!(
        w,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / 1000.0,
        h.len()
    )?;
    Ok(())
}

/// Writes every metric's `.hgrm` for `hists`, suffixed by variant when `suffix` is set.
pub fn write_hgrms(
    dir: &Path,
    hists: &HistSet,
    suffix: Option<&str>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for m in Metric::ALL {
        let name = match suffix {
            Some(s) => format!("{}-{s}.hgrm", m.file_stem()),
            None => format!("{}.hgrm", m.file_stem()),
        };
        let path = dir.join(name);
        write_file(&path, |w| Ok(write_hgrm(w, hists.get(m))?))?;
        out.push(path);
    }
    Ok(out)
}

/// The run's facts that lead every `summary.csv` row.
/// A column and how to fill it.
type Column<T> = (&'static str, fn(&Summary) -> T);

const META_COLUMNS: &[Column<String>] = &[
    ("variant", |s| s.variant.clone()),
    ("release", |s| s.release.clone()),
    ("connection_mode", |s| s.connection_mode.clone()),
    ("backend", |s| s.backend.clone()),
    ("server_version", |s| s.server_version.clone()),
    ("workers", |s| s.workers.to_string()),
    ("keys", |s| s.keys.to_string()),
    ("ttl_ms", |s| s.ttl_ms.to_string()),
    ("time_scale", |s| num(s.time_scale)),
    ("unscaled_ttl_ms", |s| num(s.unscaled_ttl_ms)),
    ("seed", |s| s.seed.to_string()),
    ("elapsed_s", |s| num(s.elapsed_s)),
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
];

/// Columns of `summary.csv` (one row per variant): the run's facts, every figure of
/// [`figures()`], then percentiles.
pub fn csv_columns() -> Vec<&'static str> {
    let meta = META_COLUMNS.iter().map(|(n, _)| *n);
    let figs = figures().into_iter().map(|f| f.name);
    let quant = QUANTILE_COLUMNS.iter().map(|(n, _)| *n);
    meta.chain(figs).chain(quant).collect()
}

/// The `summary.csv` cells of one summary, in [`csv_columns`] order.
pub fn csv_row(s: &Summary) -> Vec<String> {
    let meta = META_COLUMNS.iter().map(|(_, f)| f(s));
    let figs = figures().into_iter().map(|f| f.value(s));
    let quant = QUANTILE_COLUMNS.iter().map(|(_, f)| num(f(s)));
    meta.chain(figs).chain(quant).collect()
}

/// Writes `<dir>/summary.csv` (errors name the file).
pub fn write_summary_csv_file(dir: &Path, summaries: &[Summary]) -> anyhow::Result<()> {
    write_file(&dir.join("summary.csv"), |w| {
        write_summary_csv(w, summaries)
    })
}

/// Writes `summary.csv` with one row per variant.
pub fn write_summary_csv<W: Write>(w: W, summaries: &[Summary]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(w);
    w.write_record(csv_columns())?;
    for s in summaries {
        w.write_record(csv_row(s))?;
    }
    w.flush()?;
    Ok(())
}

/// Prints the summary table, one column per variant.
pub fn print_table<W: Write>(mut w: W, summaries: &[Summary]) -> io::Result<()> {
    let pct = |x: f64| format!("{:.4} %", x * 100.0);
    type Cell = Box<dyn Fn(&Summary) -> String>;
    let mut rows: Vec<(String, Cell)> = vec![
        ("release".into(), Box::new(|s| s.release.clone())),
        ("connection".into(), Box::new(|s| s.connection_mode.clone())),
    ];
    // Every figure of the one table that the terminal shows.
    for f in figures().into_iter().filter(|f| f.terminal) {
        rows.push((f.label.clone(), Box::new(move |s| cell(&f, s))));
    }
    rows.push((
        "P(d > TTL) theory".into(),
        Box::new(move |s| match &s.analytic {
            Some(a) => format!(
                "{} in [{}, {}]{}",
                pct(a.p_expected),
                pct(a.ci99_low),
                pct(a.ci99_high),
                if a.agrees { "" } else { " MISMATCH" }
            ),
            None => "n/a".to_string(),
        }),
    ));
    rows.push((
        "duration p50/p99/max".into(),
        Box::new(|s| q3(&s.duration_ms)),
    ));
    rows.push((
        "timer error p50/p99/max".into(),
        Box::new(|s| q3(&s.timer_error_ms)),
    ));
    rows.push((
        "acquire lat. p50/p99/max".into(),
        Box::new(|s| q3(&s.acquire_latency_ms)),
    ));
    let label_w = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(_, f)| summaries.iter().map(f).collect())
        .collect();
    let col_w: Vec<usize> = (0..summaries.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(summaries[i].variant.len())
        })
        .collect();
    write!(w, "{:label_w$}", "")?;
    for (s, cw) in summaries.iter().zip(&col_w) {
        write!(w, "  {:>cw$}", s.variant)?;
    }
    writeln!(w)?;
    for ((label, _), row) in rows.iter().zip(&cells) {
        write!(w, "{label:label_w$}")?;
        for (cell, cw) in row.iter().zip(&col_w) {
            write!(w, "  {cell:>cw$}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}

fn q3(q: &Quantiles) -> String {
    format!("{:.2}/{:.2}/{:.2} ms", q.p50, q.p99, q.max)
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
            ACQUIRE_PNG, COMPARE_PNG, DURATIONS_PNG, REPORT_HTML, SURVIVAL_PNG, TIMELINE_PNG,
        };
        for f in [
            ACQUIRE_PNG,
            COMPARE_PNG,
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

    /// The hgrm text is the standard percentile layout with values in ms and the right totals.
    #[test]
    fn hgrm_has_standard_layout() {
        let mut h = crate::record::new_hist();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let mut out = Vec::new();
        write_hgrm(&mut out, &h).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().next().unwrap().contains("Percentile"));
        assert!(text.contains("Total count    =         1000"), "{text}");
        let last_value_line = text
            .lines()
            .rfind(|l| !l.starts_with('#') && !l.trim().is_empty())
            .unwrap();
        let v: f64 = last_value_line
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((v - 1000.0).abs() / 1000.0 < 0.001, "{v}");
    }
}
