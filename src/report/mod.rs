//! Reports a person reads at a glance: PNG charts and a static `report.html`, rebuilt from a
//! run directory's files alone (`manifest.json`, `summary.json`, `events.csv`, `.hlog`), so an
//! old run can be re-rendered with `lockbench report results/<run-id>`.
//!
//! | file | shows |
//! |---|---|
//! | `durations.png` | histogram of section durations per variant, TTL line, p50/p99/p99.9/max, overrun fraction |
//! | `survival.png` | P(d > t) on a log axis: the fraction of sections a TTL t would let expire |
//! | `timeline.png` | the holders of the busiest key around the first overlap, with TTL expiries, overlap in red, wrongful deletes and refused releases, unsafe and fenced writes, pauses |
//! | `acquire-latency.png` | percentile plot of acquire latency per variant |
//! | `compare.png` | (several variants) overruns, stale/refused releases, wrongful deletes, overlap, throughput side by side |
//! | `damage.png` | (some variant protects a resource) lost updates, unsafe writes, fence refusals and extension failures per variant |
//! | `report.html` | all of the above with the summary table, configuration and links to every data file |
//!
//! Drawing takes memory bounded by the number of variants, keys, timeline rows and histogram
//! buckets — never by the number of sections, so a long run reports as cheaply as a short one.
//! `events.csv` is read twice, a row at a time: once for histograms, counts and a count and
//! longest section per key; once for the few rows of the timeline window, kept in a bounded
//! buffer. The timeline's key and instant come from `summary.json` (`per_key`, with each key's
//! `first_overlap_ms`), which the live tracker computed.
//!
//! [`verify`] recomputes every summary figure the rows determine and reports any difference
//! from `summary.json`. Its overlap figures are exact, so it keeps every section's interval
//! (16 bytes a section): it runs only when asked, with `lockbench report DIR` (exit code 2 on
//! a mismatch). The report drawn at the end of a run ([`render_after_run`]) skips it and its
//! page says so.
//!
//! Layout: [`charts`] (one module per chart: the numbers it plots, pure, and its drawing),
//! [`load`] (reading the directory), [`verify`] (summary vs events), [`html`] (the page),
//! [`palette`] (one colour per release method).

pub mod charts;
pub(crate) mod ci;
pub mod clients_table;
mod escape;
pub(crate) mod html;
pub(crate) mod palette;
pub mod run_dir;
pub(crate) mod terminal;
pub(crate) mod verify;
pub mod word;

pub use run_dir::ReportError;
pub(crate) use verify::Mismatch;

use crate::results::SummaryFile;
use charts::acquire_latency::PercentileCurve;
use charts::compare::ComparePanel;
use charts::damage::DamageGroup;
use charts::durations::{DurationChart, VariantDurations};
use charts::survival::SurvivalCurve;
use charts::timeline::window::WindowPicker;
use charts::timeline::{TIMELINE_ROWS, Timeline};
use charts::{acquire_latency, compare, damage, durations, survival, timeline};
use run_dir::{EventScan, RunFiles, VariantEvents};
use std::cmp::Reverse;
use std::path::{Path, PathBuf};

/// What [`render`] wrote and the numbers it plotted.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The run directory.
    pub dir: PathBuf,
    /// Files written, in order.
    pub files: Vec<PathBuf>,
    /// What `durations.png` plots.
    pub durations: DurationChart,
    /// What `survival.png` plots.
    pub survival: Vec<SurvivalCurve>,
    /// What `timeline.png` plots.
    pub timeline: Timeline,
    /// What `acquire-latency.png` plots.
    pub acquire_latency: Vec<PercentileCurve>,
    /// Where the acquire latencies came from (`acquire-latency.hlog` or `events.csv`).
    pub acquire_source: String,
    /// What `compare.png` plots (runs with several variants).
    pub compare: Option<Vec<ComparePanel>>,
    /// What `damage.png` plots (runs in which some variant protected a resource).
    pub damage: Option<Vec<DamageGroup>>,
    /// Summary figures the events do not reproduce (empty when all agree); `None` when the
    /// check was not run ([`render`] alone).
    pub mismatches: Option<Vec<Mismatch>>,
}

/// Chart file names.
pub(crate) const DURATIONS_PNG: &str = "durations.png";
/// Survival chart.
pub(crate) const SURVIVAL_PNG: &str = "survival.png";
/// Timeline chart.
pub(crate) const TIMELINE_PNG: &str = "timeline.png";
/// Acquire-latency chart.
pub(crate) const ACQUIRE_PNG: &str = "acquire-latency.png";
/// Comparison chart.
pub(crate) const COMPARE_PNG: &str = "compare.png";
/// Damage chart.
pub(crate) const DAMAGE_PNG: &str = "damage.png";
/// The page.
pub(crate) const REPORT_HTML: &str = "report.html";

/// Variants in run order: the manifest's first, then any other found in the events.
fn ordered<'a>(run: &RunFiles, scan: &'a EventScan) -> Vec<&'a VariantEvents> {
    let mut out: Vec<&VariantEvents> = run.variants().iter().filter_map(|n| scan.get(n)).collect();
    for v in &scan.variants {
        if !out.iter().any(|o| o.name == v.name) {
            out.push(v);
        }
    }
    out
}

/// The key the timeline shows, and where on it.
struct Target<'a> {
    variant: &'a VariantEvents,
    key: usize,
    centre: Centre,
}

/// Where on the key the timeline centres.
enum Centre {
    /// The summary's first overlap instant, µs.
    FirstOverlap(u64),
    /// The summary says the key overlapped but not when (a run from before
    /// `first_overlap_ms`): recompute it from this one key's intervals.
    Recompute,
    /// Nothing overlapped: the key's longest section.
    Longest,
}

/// The (variant, key) the timeline shows: from `summary.json`'s `per_key`, most overlap
/// incidents then most overlap time; without any overlap, the key with most sections. Ties go
/// to the earlier variant and lower key.
fn busiest<'a>(summary: &SummaryFile, variants: &[&'a VariantEvents]) -> Option<Target<'a>> {
    let us = |ms: f64| (ms * 1000.0).round() as u64;
    let overlapped = variants
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let s = summary.variants.iter().find(|s| s.meta.variant == v.name)?;
            Some(s.per_key.iter().map(move |k| (i, *v, k)))
        })
        .flatten()
        .max_by_key(|(i, _, k)| {
            (
                k.overlap_incidents,
                us(k.overlap_ms),
                Reverse(*i),
                Reverse(k.key),
            )
        });
    if let Some((_, variant, k)) = overlapped {
        return Some(Target {
            variant,
            key: k.key,
            centre: match k.first_overlap_ms {
                Some(ms) => Centre::FirstOverlap(us(ms)),
                None => Centre::Recompute,
            },
        });
    }
    variants
        .iter()
        .enumerate()
        .flat_map(|(i, v)| {
            v.keys
                .iter()
                .map(move |(&key, ks)| (i, *v, key, ks.sections))
        })
        .max_by_key(|&(i, _, key, n)| (n, Reverse(i), Reverse(key)))
        .map(|(_, variant, key, _)| Target {
            variant,
            key,
            centre: Centre::Longest,
        })
}

/// The timeline of `target`, from a second pass over `events`.
fn timeline_of(
    target: Option<Target>,
    events: &Path,
    ttl_us: u64,
    pause_before_write: bool,
) -> anyhow::Result<Timeline> {
    let empty = |variant: &str| {
        timeline::timeline(
            variant,
            0,
            ttl_us,
            timeline::Focus::Empty,
            Vec::new(),
            &[],
            pause_before_write,
        )
    };
    let Some(Target {
        variant: v,
        key,
        centre,
    }) = target
    else {
        return Ok(empty(""));
    };
    let first_overlap = match centre {
        Centre::FirstOverlap(t) => Some(t),
        Centre::Recompute => {
            let iv = run_dir::key_intervals(events, &v.name, key)?;
            crate::analysis::overlap::compute(&iv).0.first_overlap_us
        }
        Centre::Longest => None,
    };
    let picker = match (first_overlap, v.keys.get(&key)) {
        (Some(t), _) => WindowPicker::first_overlap(t, TIMELINE_ROWS),
        (None, Some(ks)) => WindowPicker::longest(ks.longest, TIMELINE_ROWS),
        // A summary naming a key without rows: nothing to centre on.
        (None, None) => return Ok(empty(&v.name)),
    };
    let focus = picker.focus();
    let sections = run_dir::window_sections(events, &v.name, key, picker)?;
    let shown: Vec<(u64, u64)> = sections
        .iter()
        .map(|s| (s.acquired_us, s.released_us))
        .collect();
    let stretches = timeline::overlap_stretches(&shown);
    Ok(timeline::timeline(
        &v.name,
        key,
        ttl_us,
        focus,
        sections,
        &stretches,
        pause_before_write,
    ))
}

/// Rebuilds every chart and `report.html` from the files of `dir`, in memory that does not
/// grow with the run's length. Does not check `summary.json` against `events.csv` (see
/// [`render_and_verify`]).
pub fn render_report(dir: &Path) -> anyhow::Result<Rendered> {
    draw(dir, None)
}

/// [`verify`], then [`render`] with the result on the page: what `lockbench report` does.
/// The check's memory (every section's interval) is freed before drawing begins.
pub fn render_and_verify(dir: &Path) -> anyhow::Result<Rendered> {
    let mismatches = verify_report(dir)?;
    draw(dir, Some(mismatches))
}

fn draw(dir: &Path, mismatches: Option<Vec<Mismatch>>) -> anyhow::Result<Rendered> {
    let run = RunFiles::open(dir)?;
    // A file the report writes that is a link is replaced, never written through: the link
    // could point anywhere (a run directory copied or tampered with).
    for name in [
        DURATIONS_PNG,
        SURVIVAL_PNG,
        TIMELINE_PNG,
        ACQUIRE_PNG,
        COMPARE_PNG,
        DAMAGE_PNG,
        REPORT_HTML,
    ] {
        let p = dir.join(name);
        if p.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            std::fs::remove_file(&p)
                .map_err(|e| anyhow::anyhow!("cannot replace the link {}: {e}", p.display()))?;
        }
    }
    let events_path = dir.join("events.csv");
    // A run without rows (`events = "none"`, a long simulated run) is drawn from its interval
    // logs and summary: every chart but the timeline, which needs the sections themselves.
    let with_events = events_path.exists();
    let scan = if with_events {
        run_dir::scan_events(&events_path)?
    } else {
        run_dir::scan_histograms(dir, &run)?
    };
    let variants = ordered(&run, &scan);
    let ttl_us = variants
        .iter()
        .map(|v| v.ttl_us)
        .find(|&t| t > 0)
        .unwrap_or_else(|| run.ttl_us());
    let mut files = Vec::new();

    let durations = durations::duration_chart(
        &variants
            .iter()
            .map(|v| VariantDurations {
                variant: &v.name,
                hist: &v.durations,
                overruns: v.counts.overruns,
            })
            .collect::<Vec<_>>(),
        ttl_us,
    );
    let p = dir.join(DURATIONS_PNG);
    durations::draw(&p, &durations)?;
    files.push(p);

    let survival: Vec<SurvivalCurve> = variants
        .iter()
        .map(|v| survival::survival(&v.name, &v.durations, v.counts.overruns))
        .collect();
    let p = dir.join(SURVIVAL_PNG);
    survival::draw(&p, &survival, ttl_us, durations.log_x, durations.range_us)?;
    files.push(p);

    let target = busiest(&run.summary, &variants).filter(|_| with_events);
    let mut timeline = timeline_of(target, &events_path, ttl_us, run.pause_before_write())?;
    // The variant's fault windows, on the same clock (µs from the variant's start).
    timeline.faults = run
        .summary
        .variants
        .iter()
        .find(|s| s.meta.variant == timeline.variant)
        .map(|s| {
            s.faults
                .iter()
                .filter(|f| f.reached)
                .map(|f| {
                    (
                        f.kind.clone(),
                        (f.start_ms * 1000.0) as u64,
                        (f.end_ms * 1000.0) as u64,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    // A restart erased every lock: a holder open across its start lost its lock then.
    for (kind, start, _) in &timeline.faults {
        if kind != "server-restart" {
            continue;
        }
        for r in &mut timeline.rows {
            if r.acquired_us < *start && *start < r.released_us.min(r.expiry_us) {
                r.lost_at_us = Some(r.lost_at_us.map_or(*start, |l| l.min(*start)));
            }
        }
    }
    if with_events {
        let p = dir.join(TIMELINE_PNG);
        timeline::draw(&p, &timeline)?;
        files.push(p);
    }

    let (acquire_latency, acquire_source) = acquire_curves(dir, &variants);
    let p = dir.join(ACQUIRE_PNG);
    acquire_latency::draw(&p, &acquire_latency)?;
    files.push(p);

    let summaries = &run.summary.variants;
    let compare = (summaries.len() > 1).then(|| compare::compare_panels(summaries));
    if let Some(panels) = &compare {
        let p = dir.join(COMPARE_PNG);
        compare::draw(&p, panels)?;
        files.push(p);
    }

    let damage = damage::damage_chart(summaries);
    if let Some(groups) = &damage {
        let p = dir.join(DAMAGE_PNG);
        damage::draw(&p, groups)?;
        files.push(p);
    }

    let page = html::page(&html::Page {
        run_id: &run.summary.run_id,
        summaries,
        manifest: &run.manifest,
        charts: chart_list(&files, ttl_us, &acquire_source),
        files: data_files(dir)?,
        mismatches: mismatches.as_deref(),
        clients: std::fs::read_to_string(dir.join("clients.csv")).ok(),
    });
    let p = dir.join(REPORT_HTML);
    std::fs::write(&p, page).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
    files.push(p);

    Ok(Rendered {
        dir: dir.to_path_buf(),
        files,
        durations,
        survival,
        timeline,
        acquire_latency,
        acquire_source,
        compare,
        damage,
        mismatches,
    })
}

/// Acquire latency per variant from `acquire-latency.hlog` (merged by tag), or from the events
/// when the log is missing, unreadable or lacks a variant.
fn acquire_curves(dir: &Path, variants: &[&VariantEvents]) -> (Vec<PercentileCurve>, String) {
    let log = dir.join("acquire-latency.hlog");
    if let Ok(tags) = run_dir::read_hlog(&log) {
        let curves: Option<Vec<PercentileCurve>> = variants
            .iter()
            .map(|v| {
                tags.iter()
                    .find(|(t, _)| *t == v.name)
                    .map(|(_, h)| acquire_latency::percentile_curve(&v.name, h))
            })
            .collect();
        if let Some(c) = curves {
            return (c, "acquire-latency.hlog".to_string());
        }
    }
    (
        variants
            .iter()
            .map(|v| acquire_latency::percentile_curve(&v.name, &v.acquire))
            .collect(),
        "events.csv".to_string(),
    )
}

fn chart_list(written: &[PathBuf], ttl_us: u64, acquire_source: &str) -> Vec<html::Chart> {
    let ttl = crate::model::units::fmt_us(ttl_us, crate::model::units::Style::Spaced);
    written
        .iter()
        .filter_map(|p| p.file_name().and_then(|n| n.to_str()))
        .filter_map(|name| {
            let (title, note) = match name {
                DURATIONS_PNG => (
                    "Section durations".to_string(),
                    format!(
                        "How long holders kept the lock (acquire reply → release sent). Bars right \
                         of the TTL line ({ttl}) are overruns: their lock expired while they worked."
                    ),
                ),
                SURVIVAL_PNG => (
                    "Choosing a TTL".to_string(),
                    format!(
                        "P(d > t): the fraction of sections that would outlive a TTL of t. The dot \
                         on the TTL line ({ttl}) is this run's overrun fraction; dashed lines give \
                         the TTL for 1 in 10, 100, 1000… sections."
                    ),
                ),
                TIMELINE_PNG => (
                    "Holders over time".to_string(),
                    "One bar per section of the busiest key. Orange: still working after the TTL \
                     expired (black tick); red: two or more holders at once; marks at the release \
                     show wrongful deletes and refused releases, marks just before it unsafe and \
                     fenced resource writes; grey: the holder's pause."
                        .to_string(),
                ),
                ACQUIRE_PNG => (
                    "Acquire latency".to_string(),
                    format!(
                        "From the first attempt to the acquiring reply, by percentile (from \
                         {acquire_source})."
                    ),
                ),
                DAMAGE_PNG => (
                    "What the overlap did to the resource".to_string(),
                    "Per variant, counted by the server: accepted writes lost from the final \
                     value, unsafe writes (over another holder, or with the lock gone), \
                     writes and reads the fence refused, and lease extensions that came too late."
                        .to_string(),
                ),
                COMPARE_PNG => (
                    "Release methods compared".to_string(),
                    "Same seed and workload under each release method: only the release differs."
                        .to_string(),
                ),
                _ => return None,
            };
            Some(html::Chart {
                file: name.to_string(),
                title,
                note,
            })
        })
        .collect()
}

/// Data files of the directory the page links to (CSV, JSON, `.hgrm`, `.hlog`), by name.
fn data_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| {
            [".csv", ".json", ".hgrm", ".hlog"]
                .iter()
                .any(|ext| n.ends_with(ext))
        })
        .collect();
    let rank = |n: &str| match n.rsplit('.').next() {
        Some("json") => 0,
        Some("csv") => 1,
        Some("hgrm") => 2,
        _ => 3,
    };
    names.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    Ok(names)
}

/// Recomputes from `events.csv` the summary figures the rows determine and lists those that
/// differ from `summary.json`. Exact, so its memory grows with the run (every section's
/// interval): only `lockbench report` runs it. A run without `events.csv` cannot be checked:
/// that is an error saying so.
pub fn verify_report(dir: &Path) -> anyhow::Result<Vec<Mismatch>> {
    let run = RunFiles::open(dir)?;
    let events = dir.join("events.csv");
    if !events.exists() {
        return Err(crate::exit::BadInput(format!(
            "{} has no events.csv (the run had events = \"none\"): its summary cannot be \
             recounted from the sections",
            dir.display()
        ))
        .into());
    }
    let failed = run.manifest["failed_variant"].as_str();
    verify::check(&run.summary, &events, failed)
}

/// Renders at the end of a run, once every other file is written, without the check against
/// `events.csv` (whose memory would grow with the run: `lockbench report DIR` runs it). The
/// run's data is already on disk when this fails; the caller must still say so and fail (a
/// report missing without a word is how a full disk went unnoticed).
pub fn render_after_run(dir: &Path) -> anyhow::Result<Rendered> {
    render_report(dir)
}
