//! Reports a person reads at a glance: PNG charts and a static `report.html`, rebuilt from a
//! run directory's files alone (`manifest.json`, `summary.json`, `events.csv`, `.hlog`), so an
//! old run can be re-rendered with `lockbench report results/<run-id>`.
//!
//! | file | shows |
//! |---|---|
//! | `durations.png` | histogram of section durations per variant, TTL line, p50/p99/p99.9/max, overrun fraction |
//! | `survival.png` | P(d > t) on a log axis: the fraction of sections a TTL t would let expire |
//! | `timeline.png` | the holders of the busiest key around the first overlap, with TTL expiries, overlap in red, wrongful deletes and refused releases |
//! | `acquire-latency.png` | percentile plot of acquire latency per variant |
//! | `compare.png` | (several variants) overruns, stale/refused releases, wrongful deletes, overlap, throughput side by side |
//! | `report.html` | all of the above with the summary table, configuration and links to every data file |
//!
//! `events.csv` is read twice, a row at a time: once for histograms, counts and each key's
//! intervals, once for the few rows of the timeline window. Alongside, [`verify`] recomputes
//! every summary figure the rows determine and reports any difference from `summary.json`.
//!
//! Layout: [`data`] (the numbers each chart plots, pure), [`load`] (reading the directory),
//! [`verify`] (summary vs events), [`charts`] (drawing), [`html`] (the page), [`palette`] (one
//! colour per release method).

pub mod charts;
pub mod data;
pub mod html;
pub mod load;
pub mod palette;
pub mod verify;

pub use load::ReportError;
pub use palette::method_colour;
pub use verify::Mismatch;

use data::{
    ComparePanel, DurationChart, PercentileCurve, SurvivalCurve, TIMELINE_ROWS, Timeline,
    VariantDurations,
};
use load::{EventScan, RunFiles, VariantEvents};
use std::path::{Path, PathBuf};

/// `lockbench report DIR`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// A run directory (results/<run-id>/) with manifest.json, summary.json and events.csv.
    pub dir: PathBuf,
}

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
    /// Summary figures the events do not reproduce (empty when all agree).
    pub mismatches: Vec<Mismatch>,
}

/// Chart file names.
pub const DURATIONS_PNG: &str = "durations.png";
/// Survival chart.
pub const SURVIVAL_PNG: &str = "survival.png";
/// Timeline chart.
pub const TIMELINE_PNG: &str = "timeline.png";
/// Acquire-latency chart.
pub const ACQUIRE_PNG: &str = "acquire-latency.png";
/// Comparison chart.
pub const COMPARE_PNG: &str = "compare.png";
/// The page.
pub const REPORT_HTML: &str = "report.html";

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

/// The (variant, key) the timeline shows: most overlap incidents, then most overlap time,
/// then most sections; ties go to the earlier variant and lower key.
fn busiest<'a>(variants: &[&'a VariantEvents]) -> Option<(&'a VariantEvents, usize)> {
    let mut best: Option<((u64, u64, usize), &'a VariantEvents, usize)> = None;
    for &v in variants {
        for (&k, iv) in &v.keys {
            let s = crate::overlap::compute(iv).0;
            let score = (s.incidents, s.overlap_us, iv.len());
            if best.as_ref().is_none_or(|(b, _, _)| score > *b) {
                best = Some((score, v, k));
            }
        }
    }
    best.map(|(_, v, k)| (v, k))
}

/// Rebuilds every chart and `report.html` from the files of `dir`, and checks `summary.json`
/// against `events.csv`.
pub fn render(dir: &Path) -> anyhow::Result<Rendered> {
    let run = RunFiles::open(dir)?;
    let events_path = dir.join("events.csv");
    let scan = load::scan_events(&events_path)?;
    let variants = ordered(&run, &scan);
    let ttl_us = variants
        .iter()
        .map(|v| v.ttl_us)
        .find(|&t| t > 0)
        .unwrap_or_else(|| run.ttl_us());
    let mut files = Vec::new();

    let durations = data::duration_chart(
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
    charts::durations(&p, &durations)?;
    files.push(p);

    let survival: Vec<SurvivalCurve> = variants
        .iter()
        .map(|v| data::survival(&v.name, &v.durations, v.counts.overruns))
        .collect();
    let p = dir.join(SURVIVAL_PNG);
    charts::survival(&p, &survival, ttl_us, durations.log_x, durations.range_us)?;
    files.push(p);

    let timeline = match busiest(&variants) {
        Some((v, key)) => {
            let iv = &v.keys[&key];
            let window = data::choose_window(iv, TIMELINE_ROWS);
            let stretches = data::overlap_stretches(iv);
            let sections = load::window_sections(&events_path, &v.name, key, &window)?;
            data::timeline(&v.name, key, ttl_us, window.focus, sections, &stretches)
        }
        None => data::timeline(
            variants.first().map_or("", |v| v.name.as_str()),
            0,
            ttl_us,
            data::Focus::Empty,
            Vec::new(),
            &[],
        ),
    };
    let p = dir.join(TIMELINE_PNG);
    charts::timeline(&p, &timeline)?;
    files.push(p);

    let (acquire_latency, acquire_source) = acquire_curves(dir, &variants);
    let p = dir.join(ACQUIRE_PNG);
    charts::acquire_latency(&p, &acquire_latency)?;
    files.push(p);

    let summaries = &run.summary.variants;
    let compare = (summaries.len() > 1).then(|| data::compare_panels(summaries));
    if let Some(panels) = &compare {
        let p = dir.join(COMPARE_PNG);
        charts::compare(&p, panels)?;
        files.push(p);
    }

    let mismatches = verify::compare(&run.summary, &scan);
    let page = html::page(&html::Page {
        run_id: &run.summary.run_id,
        summaries,
        manifest: &run.manifest,
        charts: chart_list(&files, ttl_us, &acquire_source),
        files: data_files(dir)?,
        mismatches: &mismatches,
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
        mismatches,
    })
}

/// Acquire latency per variant from `acquire-latency.hlog` (merged by tag), or from the events
/// when the log is missing, unreadable or lacks a variant.
fn acquire_curves(dir: &Path, variants: &[&VariantEvents]) -> (Vec<PercentileCurve>, String) {
    let log = dir.join("acquire-latency.hlog");
    if let Ok(tags) = load::read_hlog(&log) {
        let curves: Option<Vec<PercentileCurve>> = variants
            .iter()
            .map(|v| {
                tags.iter()
                    .find(|(t, _)| *t == v.name)
                    .map(|(_, h)| data::percentile_curve(&v.name, h))
            })
            .collect();
        if let Some(c) = curves {
            return (c, "acquire-latency.hlog".to_string());
        }
    }
    (
        variants
            .iter()
            .map(|v| data::percentile_curve(&v.name, &v.acquire))
            .collect(),
        "events.csv".to_string(),
    )
}

fn chart_list(written: &[PathBuf], ttl_us: u64, acquire_source: &str) -> Vec<html::Chart> {
    let ttl = data::fmt_us(ttl_us);
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
                     show wrongful deletes and refused releases."
                        .to_string(),
                ),
                ACQUIRE_PNG => (
                    "Acquire latency".to_string(),
                    format!(
                        "From the first attempt to the acquiring reply, by percentile (from \
                         {acquire_source})."
                    ),
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
/// differ from `summary.json`.
pub fn verify(dir: &Path) -> anyhow::Result<Vec<Mismatch>> {
    let run = RunFiles::open(dir)?;
    let scan = load::scan_events(&dir.join("events.csv"))?;
    Ok(verify::compare(&run.summary, &scan))
}

/// Renders at the end of a run, once every other file is written. The run's data is already
/// safe on disk, so a failure here is a warning (re-render later with `lockbench report`), and
/// a disagreement between the run's own files is shouted even when `quiet`.
pub fn render_after_run(dir: &Path, quiet: bool) -> Option<Rendered> {
    match render(dir) {
        Ok(r) => {
            if !r.mismatches.is_empty() {
                print_mismatches(&r.mismatches);
            }
            Some(r)
        }
        Err(e) => {
            if !quiet {
                eprintln!("warning: could not draw the report: {e:#}");
            }
            None
        }
    }
}

/// `lockbench report DIR`: renders, verifies, prints what it wrote. Exit code 0, or 2 when
/// `summary.json` disagrees with `events.csv`.
pub fn run_report(args: &ReportArgs) -> anyhow::Result<i32> {
    let r = render(&args.dir)?;
    for f in &r.files {
        println!("wrote {}", f.display());
    }
    Ok(print_mismatches(&r.mismatches))
}

/// Prints the check's result; returns the exit code (0 agree, 2 mismatches).
fn print_mismatches(m: &[Mismatch]) -> i32 {
    if m.is_empty() {
        println!("summary.json agrees with events.csv");
        0
    } else {
        eprintln!("summary.json disagrees with events.csv:");
        for x in m {
            eprintln!("  {x}");
        }
        2
    }
}
