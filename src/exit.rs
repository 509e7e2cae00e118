//! Exit codes, and the verdict on a finished run that picks one.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | all well |
//! | 1 | the run failed, gave up, completed no section, or errors dominated |
//! | 2 | bad input (profile, flag, file) or a report check mismatch |
//! | 99 | a threshold crossed (the run itself completed) |
//! | 130 | interrupted (Ctrl-C, SIGTERM or SIGHUP; files written) |

/// All well.
pub const OK: i32 = 0;
/// The run failed, gave up, completed no section, or errors dominated.
pub const FAILED: i32 = 1;
/// Bad input, or `lockbench report` found summary.json disagreeing with events.csv.
pub const BAD_INPUT: i32 = 2;
/// A `fail_if` threshold crossed; the run itself completed.
pub const THRESHOLD: i32 = 99;
/// Interrupted by Ctrl-C, SIGTERM or SIGHUP (files written).
pub const INTERRUPTED: i32 = 130;

/// The table above, for `--help` and error messages.
pub const TABLE: &str = "Exit codes: 0 all well · 1 run failed, gave up, completed no section or errors \
dominated · 2 bad input (profile, flag, file) or a report check mismatch · 99 a threshold crossed · \
130 interrupted (Ctrl-C, SIGTERM or SIGHUP; files written)";

/// An error in what the user gave (a flag, a file, a directory) that has no type of its own:
/// exit code 2, like the typed ones `cli::code_of_error` knows.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Ctrl-C, SIGTERM or SIGHUP before anything was measured: exit code 130, like any interrupted run.
#[derive(Debug, thiserror::Error)]
#[error("interrupted before any variant ran")]
pub struct Interrupted;
