//! Pure analysis: plain values in, figures out — no I/O, no clocks, so every function here is
//! tested on hand-built data.
//!
//! - [`counts`]: the counted figures, defined once, and a section's counts from its row.
//! - [`figures`]: the one table of reported figures that every output and the recount follow.
//! - [`overlap`]: exact overlap accounting (time with ≥ 2 holders, incidents, peak holders).
//! - [`summary`]: a variant's summary from its counts, overlap and histograms.
//! - [`threshold`]: `fail_if` conditions on any figure, the CI gate (exit 99).
//! - [`verdict`]: the exit code a finished run's summaries call for, and why.
//! - [`verdict_table`]: per variant, the key figures and each threshold held or crossed: what
//!   heads the terminal output and `report.html`, and what `--summary-md` and `--junit` write.

pub(crate) mod counts;
pub mod figures;
pub mod overlap;
pub(crate) mod summary;
pub(crate) mod threshold;
pub(crate) mod verdict;
pub(crate) mod verdict_table;
