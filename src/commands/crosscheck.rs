//! `lockbench crosscheck REAL SIM`: a simulated run against the real run it models — the
//! command line and its entry; the statistics are `crate::sim::crosscheck`'s.

use crate::analysis::summary::Summary;
use crate::sim::crosscheck::{BATCHES, Batches, compare_with, table};

/// `lockbench crosscheck REAL SIM`.
#[derive(Debug, Clone, clap::Args)]
pub struct CrosscheckArgs {
    /// The real run's directory (results/<run-id>/).
    pub real: std::path::PathBuf,
    /// The simulated run's directory, same profile and seed.
    pub sim: std::path::PathBuf,
}

fn summaries(dir: &std::path::Path) -> anyhow::Result<Vec<Summary>> {
    let path = dir.join("summary.json");
    let text =
        crate::inputs::read_to_string(&path, crate::inputs::FileKind::RunJson).map_err(|e| {
            crate::exit::BadInput(format!("{e} (give two run directories, results/<run-id>/)"))
        })?;
    let file: crate::results::SummaryFile = serde_json::from_str(&text)
        .map_err(|e| crate::exit::BadInput(format!("{} is not a summary: {e}", path.display())))?;
    Ok(file.variants)
}

/// Prints the comparison; exit 0 when every figure agrees, 1 when one does not, 2 on bad
/// input (a directory without a summary, or no variant in common).
pub(crate) fn run(args: &CrosscheckArgs) -> anyhow::Result<i32> {
    let (real, sim) = (summaries(&args.real)?, summaries(&args.sim)?);
    let real_rows = Batches::read(&args.real, &real)?;
    let sim_rows = Batches::read(&args.sim, &sim)?;
    let rows = compare_with(&real, &sim, real_rows.as_ref(), sim_rows.as_ref());
    if rows.is_empty() {
        return Err(crate::exit::BadInput(format!(
            "{} and {} have no variant in common",
            args.real.display(),
            args.sim.display()
        ))
        .into());
    }
    print!("{}", table(&rows));
    let how = |b: &Option<Batches>| match b {
        Some(_) => format!("batch means over {BATCHES} slices of events.csv"),
        None => "binomial (no events.csv)".to_string(),
    };
    println!(
        "rate intervals: real {}, simulated {}",
        how(&real_rows),
        how(&sim_rows)
    );
    let bad = rows.iter().filter(|a| !a.agrees()).count();
    if bad == 0 {
        println!(
            "every figure agrees (intervals simultaneous at 99 % over {} figures)",
            rows.len()
        );
        Ok(crate::exit::OK)
    } else {
        println!(
            "{bad} figure(s) disagree (intervals simultaneous at 99 % over {} figures)",
            rows.len()
        );
        Ok(crate::exit::FAILED)
    }
}
