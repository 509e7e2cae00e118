//! The verdict table: per variant, the few figures that say whether the lock kept its promise
//! (overlap, lost updates, wrongful deletes, stuck locks, unsafe writes, errors) and each
//! threshold held or crossed. It heads the terminal output and `report.html`, and is what
//! `--summary-md` and `--junit` write; built here once, from the summaries alone.

use crate::analysis::counts::NOT_RECORDED;
use crate::analysis::figures::{measured, num};
use crate::analysis::summary::{Crossing, Summary};
use crate::analysis::threshold::Threshold;
use crate::analysis::verdict::{Verdict, variant_failures, verdict};

/// The key figures' column headings, in the order of [`VerdictRow::figures`].
pub(crate) const FIGURES: [&str; 6] = [
    "overlap (ms / incidents)",
    "lost updates",
    "wrongful deletes",
    "stuck locks",
    "unsafe writes",
    "errors",
];

/// Whether a key figure is zero (green), not (red), or was not measured in this variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Zero: nothing went wrong.
    Zero,
    /// Above zero.
    NonZero,
    /// Not measured (no protected resource, no crash, an older summary): shown as `-`.
    NotMeasured,
}

/// One key figure of one variant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyFigure {
    /// As shown, e.g. `12.3 / 4` or `0`.
    pub text: String,
    /// Zero or not.
    pub state: State,
}

/// One threshold's verdict on one variant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mark {
    /// The condition as written, `overlap_ms > 0`.
    pub expr: String,
    /// The figure's value in this variant.
    pub value: f64,
    /// Whether the condition held for the variant (the gate failed).
    pub crossed: bool,
    /// `overlap_ms = 12.3 > 0`: the figure, its value and the comparison.
    pub message: String,
}

impl Mark {
    /// `crossed` or `held`.
    pub(crate) fn word(&self) -> &'static str {
        if self.crossed { "crossed" } else { "held" }
    }

    /// `crossed (12.3)`, `held (0)`.
    pub(crate) fn text(&self) -> String {
        format!("{} ({})", self.word(), num(self.value))
    }
}

/// One variant's row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VerdictRow {
    /// Its name.
    pub variant: String,
    /// The key figures, in the order of [`FIGURES`].
    pub figures: Vec<KeyFigure>,
    /// One per column of [`VerdictTable::thresholds`]; `None` where the variant has no verdict
    /// on it.
    pub thresholds: Vec<Option<Mark>>,
    /// Why this variant failed the run (gave up, no section, errors dominated, a fault not
    /// applied); empty when it did not.
    pub failures: Vec<String>,
    /// Its length, s.
    pub elapsed_s: f64,
}

/// The verdict table of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VerdictTable {
    /// The run's id.
    pub run_id: String,
    /// The thresholds' columns: every condition, in the order the variants have them.
    pub thresholds: Vec<String>,
    /// One per variant, in run order.
    pub rows: Vec<VerdictRow>,
    /// A failure of the run itself, not of one finished variant (a variant that stopped with
    /// an error, Ctrl-C).
    pub run_failure: Option<String>,
    /// The run's verdict: its exit code and why.
    pub verdict: Verdict,
}

impl VerdictTable {
    /// The table of a finished run: its summaries (with their threshold verdicts), whether it
    /// was interrupted, and its own failure.
    pub(crate) fn new(
        run_id: &str,
        summaries: &[Summary],
        interrupted: bool,
        failure: Option<&str>,
    ) -> VerdictTable {
        let mut thresholds: Vec<String> = Vec::new();
        for c in summaries.iter().flat_map(|s| &s.thresholds) {
            if !thresholds.contains(&c.expr) {
                thresholds.push(c.expr.clone());
            }
        }
        let rows = summaries
            .iter()
            .map(|s| VerdictRow {
                variant: s.meta.variant.clone(),
                figures: key_figures(s),
                thresholds: thresholds
                    .iter()
                    .map(|e| s.thresholds.iter().find(|c| &c.expr == e).map(mark))
                    .collect(),
                failures: variant_failures(s),
                elapsed_s: s.meta.elapsed_s,
            })
            .collect();
        let run_failure = match (failure, interrupted) {
            (Some(f), _) => Some(f.to_string()),
            (None, true) => Some("the run was interrupted (Ctrl-C)".to_string()),
            (None, false) => None,
        };
        VerdictTable {
            run_id: run_id.to_string(),
            thresholds,
            rows,
            run_failure,
            verdict: verdict(summaries, interrupted, failure),
        }
    }

    /// The column headings: `variant`, the key figures, the thresholds.
    pub(crate) fn header(&self) -> Vec<String> {
        std::iter::once("variant".to_string())
            .chain(FIGURES.iter().map(|f| f.to_string()))
            .chain(self.thresholds.iter().cloned())
            .collect()
    }

    /// One line on the whole run: `passed`, `thresholds crossed (exit 99)`, …
    pub(crate) fn outcome(&self) -> String {
        match self.verdict.code {
            crate::exit::OK => "passed".to_string(),
            crate::exit::THRESHOLD => "thresholds crossed (exit 99)".to_string(),
            crate::exit::INTERRUPTED => "interrupted (exit 130)".to_string(),
            code => format!("failed (exit {code})"),
        }
    }
}

fn key_figures(s: &Summary) -> Vec<KeyFigure> {
    let count = |n: u64, measured: bool| {
        if !measured || n == NOT_RECORDED {
            KeyFigure {
                text: "-".to_string(),
                state: State::NotMeasured,
            }
        } else {
            KeyFigure {
                text: n.to_string(),
                state: if n == 0 { State::Zero } else { State::NonZero },
            }
        }
    };
    let measured = |name: &str| measured(s, name);
    vec![
        KeyFigure {
            text: format!("{} / {}", num(s.overlap_ms), s.overlap_incidents),
            state: if s.overlap_ms == 0.0 && s.overlap_incidents == 0 {
                State::Zero
            } else {
                State::NonZero
            },
        },
        count(s.lost_updates, measured("lost_updates")),
        count(s.counts.wrongful_deletes, true),
        count(s.stuck_locks, measured("stuck_locks")),
        count(
            s.counts.unsafe_writes_accepted,
            measured("unsafe_writes_accepted"),
        ),
        count(s.errors, true),
    ]
}

/// A crossing with its message: `overlap_ms = 12.3 > 0`.
fn mark(c: &Crossing) -> Mark {
    let message = match c.expr.parse::<Threshold>() {
        Ok(t) => {
            let rest = c.expr.trim()[t.figure.len()..].trim();
            format!("{} = {} {rest}", t.figure, num(c.value))
        }
        Err(_) => format!("{} (it is {})", c.expr, num(c.value)),
    };
    Mark {
        expr: c.expr.clone(),
        value: c.value,
        crossed: c.crossed,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(variant: &str, overlap_ms: f64, crossed: bool) -> Summary {
        let mut s = Summary::empty();
        s.meta.variant = variant.to_string();
        s.counts.sections = 10;
        s.overlap_ms = overlap_ms;
        s.overlap_incidents = u64::from(overlap_ms > 0.0);
        s.thresholds = vec![Crossing {
            expr: "overlap_ms > 0".into(),
            value: overlap_ms,
            crossed,
        }];
        s
    }

    /// One row per variant; overlap red where it is not zero, the resource's figures not
    /// measured without one; the threshold's message names the figure, value and comparison.
    #[test]
    fn rows_figures_and_marks() {
        let t = VerdictTable::new(
            "r1",
            &[summary("del", 12.3, true), summary("token", 0.0, false)],
            false,
            None,
        );
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.thresholds, vec!["overlap_ms > 0".to_string()]);
        assert_eq!(t.header().len(), 1 + FIGURES.len() + 1);
        let del = &t.rows[0];
        assert_eq!(del.figures[0].text, "12.3 / 1");
        assert_eq!(del.figures[0].state, State::NonZero);
        assert_eq!(del.figures[1].state, State::NotMeasured);
        let m = del.thresholds[0].as_ref().unwrap();
        assert_eq!(m.message, "overlap_ms = 12.3 > 0");
        assert_eq!(m.text(), "crossed (12.3)");
        assert_eq!(t.rows[1].figures[0].state, State::Zero);
        assert_eq!(t.rows[1].thresholds[0].as_ref().unwrap().word(), "held");
        assert_eq!(t.verdict.code, crate::exit::THRESHOLD);
        assert_eq!(t.outcome(), "thresholds crossed (exit 99)");
    }

    /// A run's own failure and a failed variant are both kept.
    #[test]
    fn failures_are_kept() {
        let mut empty = summary("token", 0.0, false);
        empty.counts.sections = 0;
        let t = VerdictTable::new("r1", &[empty], false, Some("variant `del` failed: boom"));
        assert_eq!(t.run_failure.as_deref(), Some("variant `del` failed: boom"));
        assert!(t.rows[0].failures[0].contains("completed no section"));
        assert_eq!(t.verdict.code, crate::exit::FAILED);
    }
}
