//! `lockbench merge DIR...`: combines the agents of one run ([`crate::merge`]), draws the
//! report, prints the table with the overlap's clock error beside it, and exits as the run
//! would have.

use crate::exit::BadInput;
use crate::merge::Merged;
use std::path::{Path, PathBuf};

/// `lockbench merge`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// The result directories of every agent of one run (`run --agent I/N`), each once.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Output directory [default: `merged` next to the agents' directories, e.g.
    /// results/<run-id>/merged].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Delete an earlier run's files in the output directory before writing.
    #[arg(long)]
    pub force: bool,
    /// No table (files are still written).
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    /// CI summaries of the merged run.
    pub ci: crate::commands::args::CiArgs,
}

/// Where the merged run goes without `-o`: `merged` in the directory that holds every agent's.
fn default_out(dirs: &[PathBuf]) -> Result<PathBuf, BadInput> {
    let parent = |d: &PathBuf| d.parent().map(Path::to_path_buf).unwrap_or_default();
    let first = parent(&dirs[0]);
    if dirs.iter().all(|d| parent(d) == first) {
        Ok(first.join("merged"))
    } else {
        Err(BadInput(
            "the agents' directories are not in one directory: give the merged run's with -o DIR"
                .to_string(),
        ))
    }
}

/// `lockbench merge DIR...`: 0, 1 when an agent's run failed or gave up, 2 when refused, 99
/// when a threshold crossed.
pub(crate) fn run(a: &MergeArgs) -> anyhow::Result<i32> {
    let out = match &a.out {
        Some(o) => o.clone(),
        None => default_out(&a.dirs)?,
    };
    let dirs: Vec<&Path> = a
        .dirs
        .iter()
        .map(PathBuf::as_path)
        .chain([out.as_path()])
        .collect();
    a.ci.check(&dirs, None)?;
    let merged = crate::merge::merge(&a.dirs, &out, a.force)?;
    let report = crate::report::render_after_run(&merged.dir).err();
    let failure = (!merged.failures.is_empty()).then(|| merged.failures.join("; "));
    let table = crate::analysis::verdict_table::VerdictTable::new(
        &merged.record.run_id,
        &merged.summaries,
        false,
        failure.as_deref(),
    );
    if !a.quiet {
        print(&merged, &table)?;
    }
    for i in &merged.interrupted {
        eprintln!("warning: agent {i} was interrupted (Ctrl-C or SIGTERM): its sections end early");
    }
    let verdict = crate::analysis::verdict::verdict(&merged.summaries, false, failure.as_deref());
    if verdict.code != crate::exit::OK {
        for r in &verdict.reasons {
            eprintln!("error: {r}");
        }
    }
    // The CI files, after the merged run's own.
    let written = a.ci.write(&table, None);
    if let Some(e) = report {
        eprintln!("error: the merged data files are written, but the report is not: {e:#}");
        return Ok(crate::exit::FAILED.max(verdict.code));
    }
    if !written {
        return Ok(crate::exit::FAILED.max(verdict.code));
    }
    Ok(verdict.code)
}

fn print(m: &Merged, table: &crate::analysis::verdict_table::VerdictTable) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let stdout = std::io::stdout();
    // The verdict table first, as `run` prints it (colour only on a terminal).
    let colour = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    crate::report::terminal::print_verdict(stdout.lock(), table, colour)?;
    crate::report::terminal::print_table(stdout.lock(), &m.summaries)?;
    let r = &m.record;
    println!(
        "\nrun {}: {} agents merged, placed on the server's clock",
        r.run_id,
        r.agents.len()
    );
    for a in &r.agents {
        println!(
            "  agent {} ({}): time zero +{} µs{}, clock error ±{} µs, drift {} µs",
            a.index,
            a.dir,
            a.shift_us,
            if a.late_us > 10_000 {
                format!(" (late by {:.1} ms)", a.late_us as f64 / 1000.0)
            } else {
                String::new()
            },
            a.clock_error_us,
            a.drift_us
        );
    }
    for o in &r.overlap {
        println!(
            "overlap across agents, {}: {:.3} ms ± {:.3} ms ({} stretch{} × {} µs, the two \
             largest clock errors added)",
            o.variant,
            o.overlap_ms,
            o.overlap_error_ms,
            o.stretches,
            if o.stretches == 1 { "" } else { "es" },
            r.clock_error_us
        );
    }
    println!("results: {}", m.dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The merged run goes next to the agents' directories, or needs -o when they are apart.
    #[test]
    fn default_output_is_next_to_the_agents() {
        let d = |s: &str| PathBuf::from(s);
        assert_eq!(
            default_out(&[d("results/r/agent-0"), d("results/r/agent-1")]).unwrap(),
            d("results/r/merged")
        );
        assert!(default_out(&[d("a/agent-0"), d("b/agent-1")]).is_err());
    }
}
