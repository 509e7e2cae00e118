//! `lockbench report DIR`: checks `summary.json` against `events.csv`, redraws the charts
//! and `report.html` (unless `--check`), and says what it wrote.

use crate::report::{Mismatch, render_and_verify};
use std::path::PathBuf;

/// `lockbench report DIR`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// A run directory (results/<run-id>/) with manifest.json, summary.json and events.csv
    /// (without events.csv, a run with events = "none", the charts come from the .hlog files
    /// and nothing is checked).
    pub dir: PathBuf,
    /// Only check that summary.json agrees with events.csv; draw and write nothing (a CI gate
    /// on a run directory, in a fraction of the time the charts take).
    #[arg(long)]
    pub check: bool,
}

/// `lockbench report DIR`: verifies, renders (not with `--check`), prints what it wrote. Exit
/// code 0, or 2 when `summary.json` disagrees with `events.csv`.
pub(crate) fn run(args: &ReportArgs) -> anyhow::Result<i32> {
    // `--check` on a run without rows is refused by `verify` (a gate that checks nothing).
    if !args.check
        && !args.dir.join("events.csv").exists()
        && args.dir.join("summary.json").exists()
    {
        // events = "none": nothing to recount the summary from; the charts come from the
        // interval logs.
        let r = crate::report::render_report(&args.dir)?;
        for f in &r.files {
            println!("wrote {}", f.display());
        }
        println!("not checked: the run wrote no events.csv (events = \"none\")");
        return Ok(crate::exit::OK);
    }
    let mismatches = if args.check {
        crate::report::verify_report(&args.dir)?
    } else {
        let r = render_and_verify(&args.dir)?;
        for f in &r.files {
            println!("wrote {}", f.display());
        }
        r.mismatches.unwrap_or_default()
    };
    let run = crate::report::run_dir::RunFiles::open(&args.dir)?;
    if let Some(name) = run.manifest["failed_variant"].as_str() {
        println!(
            "not checked: variant `{name}` failed during the run (manifest.json `failure`); its rows in events.csv are drawn, and have no summary to agree with"
        );
    }
    Ok(print_mismatches(&mismatches))
}

/// Prints the check's result; returns the exit code (0 agree, 2 mismatches).
fn print_mismatches(m: &[Mismatch]) -> i32 {
    if m.is_empty() {
        println!("summary.json agrees with events.csv");
        crate::exit::OK
    } else {
        eprintln!("summary.json disagrees with events.csv:");
        for x in m {
            eprintln!("  {x}");
        }
        crate::exit::BAD_INPUT
    }
}
