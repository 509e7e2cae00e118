//! The progress bar of a variant: its position in time or sections, and the figures that
//! matter while it runs.

use crate::engine::recorder::Recorder;
use crate::profile::{Plan, Stop};
use crate::runner::RunOptions;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::Ordering::Relaxed;

/// A bar for the variant `name`; hidden when the run is quiet or has no progress shown.
pub(crate) fn progress_bar(plan: &Plan, opts: &RunOptions, name: &str) -> ProgressBar {
    if !opts.progress || opts.quiet {
        return ProgressBar::hidden();
    }
    let (len, unit) = match plan.workload.stop {
        Stop::Time { duration_us } => (duration_us / 1000, "ms"),
        Stop::Sections { sections } => (sections, "sections"),
    };
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(&format!(
        "{{prefix:>6}} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{msg}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(name.to_string());
    bar
}

/// Moves the bar to where the recorder stands.
pub(crate) fn update_bar(bar: &ProgressBar, plan: &Plan, rec: &Recorder) {
    let c = &rec.counters;
    let sections = c.counts.sections.load(Relaxed);
    match plan.workload.stop {
        Stop::Time { duration_us } => {
            bar.set_position((rec.now_us() / 1000).min(duration_us / 1000))
        }
        Stop::Sections { sections: n } => bar.set_position(sections.min(n)),
    }
    bar.set_message(format!(
        "sections {sections}  overruns {}  overlaps {}  wrongful deletes {}  errors {}",
        c.counts.overruns.load(Relaxed),
        c.overlap_incidents.load(Relaxed),
        c.counts.wrongful_deletes.load(Relaxed),
        c.total_errors()
    ));
}
