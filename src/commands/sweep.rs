//! `sweep`: one workload over several TTLs × release methods, every cell with the same seed
//! (so every cell sees the same intended durations). One failing cell (e.g. `delex` on an old
//! server) is reported in its row; the others still run.

use crate::analysis::summary::Summary;
use crate::backend::Backend;
use crate::commands::args::{SweepArgs, TtlList};
use crate::model::units;
use crate::model::variant::Variant;
use crate::profile::Profile;
use crate::report::charts::sweep as sweep_chart;
use crate::runner::{RunOptions, RunWith};
use anyhow::{Context, bail};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One cell of the sweep.
#[derive(Debug, Clone)]
pub(crate) struct SweepRow {
    /// TTL as written (profile units, before any time scale), µs.
    pub ttl_us: u64,
    /// Release method.
    pub release: Variant,
    /// The cell's summary, when it ran.
    pub summary: Option<Summary>,
    /// Why it did not run.
    pub error: Option<String>,
    /// The cell's run directory.
    pub dir: PathBuf,
}

impl SweepRow {
    /// Seconds of overlap per hour of operation (real, unscaled time: the scale cancels).
    pub(crate) fn overlap_s_per_hour(&self) -> Option<f64> {
        sweep_chart::overlap_s_per_hour(self.summary.as_ref()?)
    }
    /// Seconds keys stayed blocked after holder crashes, per hour of operation (the scale
    /// cancels, as for overlap).
    pub(crate) fn blocked_s_per_hour(&self) -> Option<f64> {
        sweep_chart::blocked_s_per_hour(self.summary.as_ref()?)
    }
    /// Mean time a key stayed blocked per crash, in real (unscaled) ms.
    pub(crate) fn blocked_per_crash_ms(&self) -> Option<f64> {
        let s = self.summary.as_ref()?;
        (s.crash_blocked_ms.count > 0).then(|| s.crash_blocked_ms.mean / s.meta.time_scale)
    }
    /// Wrongful deletes per hour of real (unscaled) operation.
    pub(crate) fn wrongful_deletes_per_hour(&self) -> Option<f64> {
        sweep_chart::wrongful_deletes_per_hour(self.summary.as_ref()?)
    }
}

/// A TTL for a file name or a table: `100ms`, `1.5s`, `1234us`.
pub(crate) fn ttl_label(us: u64) -> String {
    units::fmt_us(us, units::Style::Compact)
}

/// Runs every TTL × method. `plan_for(ttl_us)` builds the validated plan of one TTL (the profile
/// with that TTL, time scale applied).
pub(crate) async fn sweep(
    backend: &Backend,
    ttls_us: &[u64],
    methods: &[Variant],
    plan_for: impl Fn(u64) -> anyhow::Result<crate::profile::Plan>,
    dir: &Path,
    opts: &RunOptions,
) -> anyhow::Result<Vec<SweepRow>> {
    crate::results::prepare_dir(dir, opts.force)?;
    let mut rows = Vec::new();
    let signals = crate::signals::subscribe();
    for &ttl in ttls_us {
        let plan = plan_for(ttl)?;
        for &method in methods {
            // A Ctrl-C between cells ends the sweep here, with the rows it has.
            if crate::signals::request_of(*signals.borrow()) != crate::signals::Request::Continue {
                return Ok(rows);
            }
            let cell_dir = dir.join(format!("ttl-{}-{}", ttl_label(ttl), method));
            let cell_opts = RunOptions {
                out_dir: Some(cell_dir.clone()),
                command: "sweep".into(),
                faults: backend.control.clone(),
                ..opts.clone()
            };
            let r = backend
                .with_connector(RunWith {
                    kind: backend.kind(),
                    plan: &plan,
                    variants: &[method],
                    opts: &cell_opts,
                })
                .await;
            // The cell's charts and report.html; a failure keeps its data files (exit 1).
            let report_error = match &r {
                Ok(o) => crate::report::render_after_run(&o.dir).err(),
                Err(_) => None,
            };
            let interrupted = r.as_ref().is_ok_and(|o| o.manifest.interrupted);
            rows.push(match r {
                Ok(mut o) => SweepRow {
                    ttl_us: ttl,
                    release: method,
                    summary: o.summaries.pop(),
                    // The cell measured, but its report is missing: say so in its row.
                    error: report_error.map(|e| format!("report not written: {e:#}")),
                    dir: cell_dir,
                },
                Err(e) => SweepRow {
                    ttl_us: ttl,
                    release: method,
                    summary: None,
                    error: Some(format!("{e:#}")),
                    dir: cell_dir,
                },
            });
            if !opts.quiet {
                print_row(
                    std::io::stderr(),
                    rows.last().context("row")?,
                    plan.has_crashes(),
                )?;
            }
            if interrupted {
                return Ok(rows);
            }
        }
    }
    Ok(rows)
}

/// Header of the terminal table; `crashes` adds the crash columns.
pub(crate) fn print_header<W: Write>(mut w: W, crashes: bool) -> std::io::Result<()> {
    let extra = if crashes {
        format!(
            " {:>7} {:>13} {:>11}",
            "crashes", "blocked/crash", "blocked s/h"
        )
    } else {
        String::new()
    };
    writeln!(
        w,
        "{:>10} {:>10} {:>6} {:>9} {:>10} {:>7} {:>8} {:>9} {:>11} {:>5}{extra}  note",
        "ttl",
        "real ttl",
        "method",
        "sections",
        "overrun %",
        "stale",
        "refused",
        "wrongful",
        "overlap s/h",
        "peak"
    )
}

/// One line of the terminal table; `crashes` adds the crash columns.
pub(crate) fn print_row<W: Write>(mut w: W, r: &SweepRow, crashes: bool) -> std::io::Result<()> {
    let extra = match &r.summary {
        Some(s) if crashes => format!(
            " {:>7} {:>13} {:>11.2}",
            s.counts.crashes,
            r.blocked_per_crash_ms()
                .map(|m| units::fmt_us(units::ms_to_us(m), units::Style::Compact))
                .unwrap_or_else(|| "-".into()),
            r.blocked_s_per_hour().unwrap_or(0.0)
        ),
        _ => String::new(),
    };
    match (&r.summary, &r.error) {
        (Some(s), _) => writeln!(
            w,
            "{:>10} {:>10} {:>6} {:>9} {:>10.4} {:>7} {:>8} {:>9} {:>11.2} {:>5}{extra}  {}",
            units::fmt_us(s.meta.ttl_ms * 1000, units::Style::Compact),
            units::fmt_us(
                units::ms_to_us(s.meta.unscaled_ttl_ms),
                units::Style::Compact
            ),
            r.release.name(),
            s.counts.sections,
            s.overrun_fraction * 100.0,
            s.counts.stale_releases,
            s.refused_releases,
            s.counts.wrongful_deletes,
            r.overlap_s_per_hour().unwrap_or(0.0),
            s.peak_holders,
            match (&s.analytic, &r.error) {
                (_, Some(_)) => "report not written",
                (Some(a), _) if !a.agrees => "theory MISMATCH",
                _ => "",
            }
        ),
        (None, e) => writeln!(
            w,
            "{:>10} {:>10} {:>6}  failed: {}",
            ttl_label(r.ttl_us),
            "",
            r.release.name(),
            e.as_deref().unwrap_or("unknown error")
        ),
    }
}

/// Writes `sweep.csv`: one row per TTL × method with every summary figure.
pub(crate) fn write_csv<W: Write>(w: W, rows: &[SweepRow]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(w);
    let mut header = vec![
        "ttl_as_written_us",
        "error",
        "overlap_s_per_hour",
        "wrongful_deletes_per_hour",
        "crash_blocked_s_per_hour",
    ];
    header.extend(crate::results::csv_columns());
    w.write_record(&header)?;
    for r in rows {
        let mut rec = vec![
            r.ttl_us.to_string(),
            r.error.clone().unwrap_or_default(),
            r.overlap_s_per_hour()
                .map(|x| format!("{x:.6}"))
                .unwrap_or_default(),
            r.wrongful_deletes_per_hour()
                .map(|x| format!("{x:.6}"))
                .unwrap_or_default(),
            r.blocked_s_per_hour()
                .map(|x| format!("{x:.6}"))
                .unwrap_or_default(),
        ];
        match &r.summary {
            Some(s) => rec.extend(crate::results::csv_row(s)),
            None => {
                let mut blank = vec![String::new(); crate::results::csv_columns().len()];
                blank[0] = r.release.name();
                blank[1] = r.release.name();
                rec.extend(blank);
            }
        }
        w.write_record(&rec)?;
    }
    w.flush()?;
    Ok(())
}

/// Checks that the sweep has something to run.
pub(crate) fn validate(ttls: &[u64], methods: &[Variant]) -> anyhow::Result<()> {
    if ttls.is_empty() || methods.is_empty() {
        bail!("a sweep needs at least one TTL and one release method");
    }
    Ok(())
}

/// `lockbench sweep`.
pub(crate) async fn run(a: SweepArgs) -> anyhow::Result<i32> {
    let extra = Profile {
        releases: a.release.clone(),
        ..Profile::default()
    };
    // The profile is read once; the TTL list comes from --ttl, or from its ttl field.
    let loaded = a.workload.load()?;
    let ttls = match (&a.ttls, &loaded.profile.ttl) {
        (Some(TtlList(list)), _) => list.clone(),
        (None, Some(t)) => vec![t.us()],
        (None, None) => {
            return Err(crate::exit::BadInput(
                "sweep needs TTLs: --ttl 100ms,200ms,1s or --ttl 100ms..2s:10".into(),
            )
            .into());
        }
    };
    // The base plan is the first cell; the others are the same plan with another TTL
    // (`Plan::with_ttl`). The list is no TTL of one cell: the first cell's stands in for it.
    let first = {
        let mut w = a.workload.clone();
        // The list's first TTL, set as the flag it came from, so an error about it names
        // `--ttl` (from the profile, the list is its `ttl` alone).
        if a.ttls.is_some() {
            w.settings.ttl = Some(crate::model::units::DurationText::from_us(ttls[0]));
        }
        w.plan_of(loaded, extra)?
    };
    if first.metrics.is_some() {
        return Err(crate::exit::BadInput(
            "--metrics: sweep does not serve live metrics; run or compare do (one cell at a time: \
             lockbench run --ttl T --metrics ADDR)"
                .into(),
        )
        .into());
    }
    if first.backend.redis_servers.len() > 1 {
        return Err(crate::exit::BadInput(
            "sweep runs on one server: give --redis-server once (compare takes several and runs them side by side)".into(),
        )
        .into());
    }
    // Validate every cell before any I/O; print each cell's own TTL warnings once.
    for &t in &ttls[1..] {
        let cell = first.with_ttl(t)?;
        if !a.workload.quiet {
            for w in &cell.warnings[..cell.ttl_warnings] {
                eprintln!("warning: {w}");
            }
        }
    }
    let methods = first.protection.releases.clone();
    validate(&ttls, &methods)?;
    let backend = super::opening(Backend::open(&first, a.workload.quiet)).await?;
    let dir = a.workload.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "{}-sweep",
            crate::results::run_id(std::time::SystemTime::now())
        ))
    });
    let opts = RunOptions {
        quiet: a.workload.quiet,
        progress: !a.workload.quiet,
        profile_file: a.workload.profile.as_ref().map(|p| p.display().to_string()),
        force: a.workload.force,
        ..RunOptions::default()
    };
    if !a.workload.quiet {
        print_header(std::io::stderr(), first.has_crashes())?;
    }
    let rows = sweep(
        &backend,
        &ttls,
        &methods,
        |t| Ok(first.with_ttl(t)?),
        &dir,
        &opts,
    )
    .await;
    backend.close().await;
    let rows = rows?;
    crate::results::write_file(&dir.join("sweep.csv"), |w| write_csv(w, &rows))?;
    let cells = rows
        .iter()
        .filter_map(|r| Some((&r.release, r.summary.as_ref()?)));
    sweep_chart::draw(
        &dir.join("sweep.png"),
        &sweep_chart::series(cells),
        "real units",
    )?;
    if !a.workload.quiet {
        println!();
        print_header(std::io::stdout(), first.has_crashes())?;
        for r in &rows {
            print_row(std::io::stdout(), r, first.has_crashes())?;
        }
        println!("\nresults: {}", dir.display());
    }
    // One verdict for the whole sweep, as for a run: a cell that gave up or whose errors
    // dominated fails it, and so does a cell whose report is missing or every cell failing.
    // A cell that could not run (a method the server lacks) is reported in its row and the
    // others stand.
    let summaries: Vec<crate::analysis::summary::Summary> =
        rows.iter().filter_map(|r| r.summary.clone()).collect();
    let interrupted = crate::signals::request_of(*crate::signals::subscribe().borrow())
        != crate::signals::Request::Continue
        || summaries
            .iter()
            .any(|s| s.stop_reason == crate::analysis::summary::StopReason::Interrupted);
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| format!("{}: {e}", r.dir.display()))
        })
        .collect();
    let unreported = rows
        .iter()
        .any(|r| r.summary.is_some() && r.error.is_some());
    let failure = (unreported || failures.len() == rows.len()).then(|| failures.join("\n"));
    let verdict = crate::analysis::verdict::verdict(&summaries, interrupted, failure.as_deref());
    if verdict.code == crate::exit::FAILED || verdict.code == crate::exit::THRESHOLD {
        for r in &verdict.reasons {
            eprintln!("error: {r}");
        }
    }
    Ok(verdict.code)
}
