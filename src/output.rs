//! Files of a run and the terminal table.
//!
//! `results/<run-id>/`: `manifest.json`, `summary.json`, `summary.csv`, `events.csv` (streamed),
//! `<metric>.hgrm` (percentile distribution, values in ms) and `<metric>.hlog` (HdrHistogram
//! interval log, V2 deflate-compressed, one tagged interval per second and variant).

use crate::recorder::{EventRow, HistSet, Metric, Recorder};
use crate::summary::{Quantiles, Summary};
use anyhow::Context;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A run id sortable by time, with 32 random bits so runs started in the same second against
/// one server never share a key prefix: `20261202T153012Z-3f9a07c2`.
pub fn run_id(now: SystemTime) -> String {
    format!("{}-{:08x}", utc_stamp(now, true), rand::random::<u32>())
}

/// UTC time as `2026-12-02T15:30:12Z` (or compact `20261202T153012Z`).
pub fn utc_stamp(t: SystemTime, compact: bool) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if compact {
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Creates the output directory (and parents).
pub fn create_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let f = File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, value)?;
    writeln!(w)?;
    w.flush()?;
    Ok(())
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
            let mut n = 0u64;
            while let Some(row) = rx.blocking_recv() {
                w.serialize(&row)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                n += 1;
            }
            w.flush()?;
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

/// Drains a recorder's histogram stripes once per interval into tagged interval logs and the
/// totals, from a dedicated thread.
pub struct Collector {
    stop: std_mpsc::Sender<()>,
    handle: std::thread::JoinHandle<anyhow::Result<HistSet>>,
}

impl Collector {
    /// Starts collecting `rec` into `<dir>/<metric>.hlog`, intervals tagged `tag`. `base` is the
    /// run's start (the logs' BaseTime); `offset` is how long after it this recorder started.
    pub fn start(
        rec: Arc<Recorder>,
        dir: &Path,
        tag: &str,
        base: SystemTime,
        offset: Duration,
        interval: Duration,
    ) -> anyhow::Result<Self> {
        let mut files = Vec::new();
        for m in Metric::ALL {
            let path = dir.join(format!("{}.hlog", m.file_stem()));
            let new = !path.exists();
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            files.push((BufWriter::new(f), new, m));
        }
        let (stop, stop_rx) = std_mpsc::channel::<()>();
        let tag = tag.to_string();
        let handle = std::thread::spawn(move || -> anyhow::Result<HistSet> {
            let base_secs = base
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            let mut sers: Vec<V2DeflateSerializer> =
                files.iter().map(|_| V2DeflateSerializer::new()).collect();
            let mut writers = Vec::new();
            for ((w, new, m), ser) in files.iter_mut().zip(sers.iter_mut()) {
                let mut b = IntervalLogWriterBuilder::new();
                if *new {
                    b.add_comment(&format!(
                        "lockbench {} {} (values in microseconds)",
                        env!("CARGO_PKG_VERSION"),
                        m.file_stem()
                    ));
                    b.with_start_time(base).with_base_time(base);
                    let _ = base_secs;
                }
                writers.push(b.begin_log_with(w, ser)?);
            }
            let tag = Tag::new(&tag);
            let mut totals = HistSet::default();
            let mut interval_set = HistSet::default();
            let mut last = offset;
            let t0 = std::time::Instant::now();
            loop {
                let stopped = !matches!(
                    stop_rx.recv_timeout(interval),
                    Err(std_mpsc::RecvTimeoutError::Timeout)
                );
                let now = offset + t0.elapsed();
                interval_set.reset();
                rec.drain_into(&mut interval_set);
                for (w, m) in writers.iter_mut().zip(Metric::ALL) {
                    let h = interval_set.get(m);
                    w.write_histogram(h, last, now.saturating_sub(last), tag)
                        .map_err(|e| anyhow::anyhow!("cannot write {}.hlog: {e}", m.file_stem()))?;
                }
                totals.add(&interval_set);
                last = now;
                if stopped {
                    break;
                }
            }
            drop(writers);
            for (w, _, _) in &mut files {
                w.flush()?;
            }
            Ok(totals)
        });
        Ok(Self { stop, handle })
    }

    /// Final drain; returns the totals of everything recorded.
    pub fn finish(self) -> anyhow::Result<HistSet> {
        let _ = self.stop.send(());
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the histogram collector thread panicked"))?
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
        let f = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
        let mut w = BufWriter::new(f);
        write_hgrm(&mut w, hists.get(m))?;
        w.flush()?;
        out.push(path);
    }
    Ok(out)
}

/// Columns of `summary.csv` (one row per variant).
pub const CSV_COLUMNS: &[&str] = &[
    "variant",
    "release",
    "connection_mode",
    "backend",
    "server_version",
    "workers",
    "keys",
    "ttl_ms",
    "time_scale",
    "unscaled_ttl_ms",
    "seed",
    "elapsed_s",
    "attempts",
    "sections",
    "throughput_per_s",
    "overruns",
    "overrun_fraction",
    "stale_releases",
    "stale_without_overrun",
    "deleted_by_other",
    "refused_releases",
    "refused_expired",
    "refused_held_by_other",
    "refused_unclassified",
    "wrongful_deletes",
    "nothing_deleted",
    "released",
    "overlap_ms",
    "overlap_incidents",
    "peak_holders",
    "rejections",
    "retries",
    "acquire_giveups",
    "interrupted",
    "errors",
    "stop_reason",
    "outages",
    "outage_ms",
    "duration_p50_ms",
    "duration_p99_ms",
    "duration_max_ms",
    "timer_error_p50_ms",
    "timer_error_p99_ms",
    "timer_error_max_ms",
    "excess_p99_ms",
    "acquire_latency_p50_ms",
    "acquire_latency_p99_ms",
    "set_latency_p50_ms",
    "set_latency_p99_ms",
    "release_latency_p50_ms",
    "release_latency_p99_ms",
];

/// The `summary.csv` cells of one summary, in [`CSV_COLUMNS`] order.
pub fn csv_row(s: &Summary) -> Vec<String> {
    let f = |x: f64| {
        format!("{x:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    };
    let q = |x: &Quantiles| [f(x.p50), f(x.p99), f(x.max)];
    let [dp50, dp99, dmax] = q(&s.duration_ms);
    let [tp50, tp99, tmax] = q(&s.timer_error_ms);
    vec![
        s.variant.clone(),
        s.release.clone(),
        s.connection_mode.clone(),
        s.backend.clone(),
        s.server_version.clone(),
        s.workers.to_string(),
        s.keys.to_string(),
        s.ttl_ms.to_string(),
        f(s.time_scale),
        f(s.unscaled_ttl_ms),
        s.seed.to_string(),
        f(s.elapsed_s),
        s.attempts.to_string(),
        s.sections.to_string(),
        f(s.throughput_per_s),
        s.overruns.to_string(),
        f(s.overrun_fraction),
        s.stale_releases.to_string(),
        s.stale_without_overrun.to_string(),
        s.deleted_by_other.to_string(),
        s.refused_releases.to_string(),
        s.refused_expired.to_string(),
        s.refused_held_by_other.to_string(),
        s.refused_unclassified.to_string(),
        s.wrongful_deletes.to_string(),
        s.nothing_deleted.to_string(),
        s.released.to_string(),
        f(s.overlap_ms),
        s.overlap_incidents.to_string(),
        s.peak_holders.to_string(),
        s.rejections.to_string(),
        s.retries.to_string(),
        s.acquire_giveups.to_string(),
        s.interrupted.to_string(),
        s.errors.to_string(),
        s.stop_reason.name().to_string(),
        s.outages.to_string(),
        f(s.outage_ms),
        dp50,
        dp99,
        dmax,
        tp50,
        tp99,
        tmax,
        f(s.excess_ms.p99),
        f(s.acquire_latency_ms.p50),
        f(s.acquire_latency_ms.p99),
        f(s.set_latency_ms.p50),
        f(s.set_latency_ms.p99),
        f(s.release_latency_ms.p50),
        f(s.release_latency_ms.p99),
    ]
}

/// Writes `summary.csv` with one row per variant.
pub fn write_summary_csv<W: Write>(w: W, summaries: &[Summary]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(w);
    w.write_record(CSV_COLUMNS)?;
    for s in summaries {
        w.write_record(csv_row(s))?;
    }
    w.flush()?;
    Ok(())
}

/// Prints the summary table, one column per variant.
pub fn print_table<W: Write>(mut w: W, summaries: &[Summary]) -> io::Result<()> {
    let ms = |x: f64| format!("{x:.3} ms");
    let pct = |x: f64| format!("{:.4} %", x * 100.0);
    type Cell = Box<dyn Fn(&Summary) -> String>;
    let rows: Vec<(&str, Cell)> = vec![
        ("release", Box::new(|s| s.release.clone())),
        ("connection", Box::new(|s| s.connection_mode.clone())),
        ("sections", Box::new(|s| s.sections.to_string())),
        (
            "throughput",
            Box::new(|s| format!("{:.0} /s", s.throughput_per_s)),
        ),
        ("attempts", Box::new(|s| s.attempts.to_string())),
        ("rejections", Box::new(|s| s.rejections.to_string())),
        (
            "retries / give-ups",
            Box::new(|s| format!("{} / {}", s.retries, s.acquire_giveups)),
        ),
        (
            "overruns",
            Box::new(move |s| format!("{} ({})", s.overruns, pct(s.overrun_fraction))),
        ),
        (
            "P(d > TTL) theory",
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
        ),
        ("stale releases", Box::new(|s| s.stale_releases.to_string())),
        (
            "lock deleted by other",
            Box::new(|s| s.deleted_by_other.to_string()),
        ),
        (
            "refused releases",
            Box::new(|s| s.refused_releases.to_string()),
        ),
        ("  expired", Box::new(|s| s.refused_expired.to_string())),
        (
            "  held by other",
            Box::new(|s| s.refused_held_by_other.to_string()),
        ),
        (
            "  unclassified",
            Box::new(|s| s.refused_unclassified.to_string()),
        ),
        (
            "wrongful deletes",
            Box::new(|s| s.wrongful_deletes.to_string()),
        ),
        ("overlap time", Box::new(move |s| ms(s.overlap_ms))),
        (
            "overlap incidents",
            Box::new(|s| s.overlap_incidents.to_string()),
        ),
        ("peak holders", Box::new(|s| s.peak_holders.to_string())),
        ("duration p50/p99/max", Box::new(|s| q3(&s.duration_ms))),
        (
            "timer error p50/p99/max",
            Box::new(|s| q3(&s.timer_error_ms)),
        ),
        (
            "acquire lat. p50/p99/max",
            Box::new(|s| q3(&s.acquire_latency_ms)),
        ),
        ("errors", Box::new(|s| s.errors.to_string())),
        (
            "outages",
            Box::new(move |s| format!("{} ({})", s.outages, ms(s.outage_ms))),
        ),
        ("stopped by", Box::new(|s| s.stop_reason.name().to_string())),
    ];
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
    }

    /// The hgrm text is the standard percentile layout with values in ms and the right totals.
    #[test]
    fn hgrm_has_standard_layout() {
        let mut h = crate::recorder::new_hist();
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
