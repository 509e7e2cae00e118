//! `lockbench recommend`: a TTL for measured section durations — the command line and its
//! entry; the computation is `crate::recommend`'s.

use crate::inputs::Unit;
use crate::recommend::{
    LoadOptions, ParamError, Params, load_durations, print_recommendation, recommend,
};
use anyhow::Context;
use std::io;
use std::path::PathBuf;

/// `recommend`: a TTL for measured section durations.
#[derive(Debug, clap::Args, Clone)]
pub struct RecommendArgs {
    /// Measured durations: a run's events.csv (uses duration_us), a CSV with a duration column
    /// (see --column, --unit), an .hgrm percentile distribution or an .hlog interval log.
    #[arg(long, required_unless_present = "run", conflicts_with = "run")]
    pub durations: Option<PathBuf>,
    /// A run directory instead of --durations: its events.csv (for a `lockbench observe` run,
    /// the observed holds of the program: a TTL for this service).
    #[arg(value_name = "RUN_DIR")]
    pub run: Option<PathBuf>,
    /// CSV column holding the durations [default: durationMs; events.csv: duration_us].
    #[arg(long)]
    pub column: Option<String>,
    /// Unit of the values in the file [default: ms for CSV and .hgrm, us for events.csv and
    /// .hlog].
    #[arg(long, value_enum)]
    pub unit: Option<Unit>,
    /// Only this variant: the `variant` column of events.csv, the interval tag of an .hlog
    /// [default: all, merged].
    #[arg(long)]
    pub tag: Option<String>,
    /// Acceptable overrun probability per section.
    #[arg(long, default_value_t = 1e-4, allow_negative_numbers = true)]
    pub target: f64,
    /// Factor applied to the observed worst case.
    #[arg(long, default_value_t = 1.5, allow_negative_numbers = true)]
    pub margin: f64,
    /// Confidence of the distribution-free bound.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub confidence: f64,
    /// Sections per second, to turn probabilities into overruns per day: `100`, `100/s`,
    /// `6000/min`, `2/ms` [default: 10/s, assumed].
    #[arg(long)]
    pub rate: Option<String>,
    /// Expected holder crashes (a holder dying mid-section without releasing), to price the
    /// blocked time a TTL costs after crashes: `3/day`, `0.5/h`, same units as --rate
    /// [default: none, crash figures not shown].
    #[arg(long)]
    pub crash_rate: Option<String>,
    /// Fraction of the largest values the generalised Pareto tail is fitted to.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    pub tail_fraction: f64,
    /// Also write the answer as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `lockbench recommend`: loads, computes, prints to stdout, writes the JSON file.
pub(crate) fn run(args: &RecommendArgs) -> anyhow::Result<i32> {
    // A ParamError, not a bare message: bad input exits 2.
    let rate_flag = |flag: &'static str, text: &Option<String>| {
        text.as_deref()
            .map(|r| {
                crate::model::units::parse_rate(r).map_err(|message| ParamError { flag, message })
            })
            .transpose()
    };
    let rate = rate_flag("rate", &args.rate)?;
    let crash_rate = rate_flag("crash-rate", &args.crash_rate)?;
    let params = Params::new(
        args.target,
        args.confidence,
        args.margin,
        rate,
        args.tail_fraction,
    )?
    .with_crash_rate(crash_rate)?;
    let opts = LoadOptions {
        column: args.column.clone(),
        unit: args.unit,
        tag: args.tag.clone(),
    };
    let path = match (&args.durations, &args.run) {
        (Some(p), _) => p.clone(),
        (None, Some(dir)) => dir.join("events.csv"),
        (None, None) => {
            return Err(
                crate::exit::BadInput("give a run directory or --durations FILE".into()).into(),
            );
        }
    };
    let loaded = load_durations(&path, &opts)?;
    if let Some(dir) = &args.run {
        say_observed(dir, loaded.samples.len());
    }
    let mut rec = recommend(&loaded.samples, &params);
    rec.input = Some(loaded.input);
    let stdout = io::stdout();
    print_recommendation(stdout.lock(), &rec)?;
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rec)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(0)
}

/// For a `lockbench observe` run, what the recommendation rests on: the holds of the program
/// that was observed (the ones the run's end cut short are not among them).
fn say_observed(dir: &std::path::Path, holds: u64) {
    let Ok(text) = std::fs::read_to_string(dir.join("observe.json")) else {
        return;
    };
    let Ok(record) = serde_json::from_str::<serde_json::Value>(&text) else {
        return;
    };
    let program = match record["program"].as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(|w| w.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => "the services that connected".to_string(),
    };
    println!(
        "a TTL for this service: {holds} observed holds of `{program}` (run {}; holds cut short by the run's end left out)\n",
        record["run_id"].as_str().unwrap_or("?")
    );
}
