//! CI gates: `fail_if` conditions on any figure of the summary (k6's thresholds are the
//! model), e.g. `overlap_ms > 0`, `lost_updates > 0`, `duration_ms.p99 >= 250`. A run whose
//! variants cross one exits with 99, distinct from errors (1), bad input (2) and Ctrl-C (130).

use crate::analysis::summary::{Crossing, Summary};
use serde::{Deserialize, Serialize};

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
    /// `>`
    #[serde(rename = ">")]
    Gt,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
    /// `==`
    #[serde(rename = "==")]
    Eq,
    /// `!=`
    #[serde(rename = "!=")]
    Ne,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// One `fail_if` condition: the run fails the gate when it holds for a variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    /// As written.
    pub expr: String,
    /// A numeric field of summary.json (`overlap_ms`) or of one of its percentile sets
    /// (`duration_ms.p99`).
    pub figure: String,
    /// The comparison.
    pub op: Op,
    /// The number compared with.
    pub value: f64,
}

impl Threshold {
    /// Parses `FIGURE OP NUMBER`; the figure must be a number in every summary.
    pub fn parse(expr: &str) -> Result<Threshold, String> {
        let ops = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        // The operator is the first run of `< > = !`, whole: `=>` or `=` is no comparison,
        // not a figure `overlap_ms =` before a `>`.
        let is_op = |c: char| "<>=!".contains(c);
        let Some(at) = expr.find(is_op) else {
            return Err(format!(
                "`{expr}`: write FIGURE OP NUMBER, e.g. `overlap_ms > 0` (OP one of < <= > >= == !=)"
            ));
        };
        let run = expr[at..]
            .find(|c: char| !is_op(c))
            .map_or(&expr[at..], |n| &expr[at..at + n]);
        let Some(&(sym, op)) = ops.iter().find(|(sym, _)| *sym == run) else {
            return Err(format!(
                "`{expr}`: `{run}` is not a comparison; use one of < <= > >= == != (e.g. \
                 `overlap_ms > 0`)"
            ));
        };
        let figure = expr[..at].trim().to_string();
        let number = expr[at + sym.len()..].trim();
        let value: f64 = number
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| format!("`{expr}`: `{number}` is not a number"))?;
        if !known_figure(&figure) {
            return Err(format!(
                "`{expr}`: `{figure}` is not a figure of the summary; use a field of summary.json \
                 such as overlap_ms, overlap_incidents, wrongful_deletes, lost_updates, \
                 unsafe_writes_over_holder, errors, or a percentile such as duration_ms.p99"
            ));
        }
        Ok(Threshold {
            expr: expr.trim().to_string(),
            figure,
            op,
            value,
        })
    }

    /// Its verdict on `s`.
    pub fn check(&self, s: &Summary) -> Crossing {
        // A figure the run did not measure (not recorded, or a block this run has not) crosses
        // nothing: NaN, which a verdict of its own reports where it matters.
        let value = figure_value(s, &self.figure)
            .filter(|_| crate::analysis::figures::measured(s, &self.figure))
            .unwrap_or(f64::NAN);
        Crossing {
            expr: self.expr.clone(),
            value,
            crossed: !value.is_nan() && self.op.holds(value, self.value),
        }
    }
}

/// Refuses gates on a figure no variant of the run will measure (`lost_updates > 0` without a
/// protected resource read "held (0)" and passed): `measures` says whether the run has what a
/// figure needs. The error names the gate, the figure and the setting that measures it.
pub(crate) fn check_measured(
    gates: &[Threshold],
    measures: impl Fn(crate::analysis::figures::Needs) -> bool,
) -> Result<(), String> {
    for t in gates {
        let needs = crate::analysis::figures::Needs::of(&t.figure);
        if !measures(needs) {
            return Err(format!(
                "`{}`: this run does not measure {} (it would read 0 whatever happened); \
                 {} is measured only with {}. Add that setting, or drop the gate",
                t.expr,
                t.figure,
                t.figure,
                needs.setting()
            ));
        }
    }
    Ok(())
}

/// The numeric field `path` (`a` or `a.b`) of a summary, as summary.json has it.
fn figure_value(s: &Summary, path: &str) -> Option<f64> {
    let v = serde_json::to_value(s).ok()?;
    let mut at = &v;
    for part in path.split('.') {
        at = at.get(part)?;
    }
    if at.as_u64() == Some(crate::analysis::counts::NOT_RECORDED) {
        return None;
    }
    at.as_f64()
}

fn known_figure(path: &str) -> bool {
    // An empty summary has every field: enough to know the names. The blocks only some runs
    // have (Redlock's) are added, so their figures are known too.
    let mut probe = crate::analysis::summary::summarize(
        crate::analysis::summary::Meta::default(),
        Default::default(),
        Default::default(),
        &Default::default(),
        &Default::default(),
    );
    probe.redlock.get_or_insert_with(Default::default);
    figure_value(&probe, path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Conditions parse with every operator; unknown figures and bad numbers say what is valid.
    #[test]
    fn parses_conditions() {
        let t = Threshold::parse("overlap_ms > 0").unwrap();
        assert_eq!(
            (t.figure.as_str(), t.op, t.value),
            ("overlap_ms", Op::Gt, 0.0)
        );
        assert_eq!(Threshold::parse("duration_ms.p99>=250").unwrap().op, Op::Ge);
        assert_eq!(Threshold::parse("errors != 0").unwrap().op, Op::Ne);
        assert!(
            Threshold::parse("overlap > 0")
                .unwrap_err()
                .contains("not a figure")
        );
        assert!(
            Threshold::parse("overlap_ms > x")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            Threshold::parse("overlap_ms")
                .unwrap_err()
                .contains("FIGURE OP NUMBER")
        );
        // A wrong operator is named as such, whole, with the valid ones (issue 32: it said
        // "`overlap_ms =` is not a figure").
        for (expr, run) in [
            ("overlap_ms => 0", "=>"),
            ("overlap_ms = 0", "="),
            ("errors <> 0", "<>"),
        ] {
            let e = Threshold::parse(expr).unwrap_err();
            assert!(
                e.contains(&format!("`{run}` is not a comparison"))
                    && e.contains("< <= > >= == !=")
                    && !e.contains("not a figure"),
                "{e}"
            );
        }
        // Redlock's figures are fields of summary.json too (issue 32: refused).
        let t = Threshold::parse("redlock.failed_quorums > 0").unwrap();
        assert_eq!(t.figure, "redlock.failed_quorums");
        assert!(Threshold::parse("redlock.acquired >= 1").is_ok());
        assert!(Threshold::parse("redlock.nonsense > 0").is_err());
    }

    /// A condition crosses exactly when it holds for the variant.
    #[test]
    fn checks_a_summary() {
        let mut s = crate::analysis::summary::summarize(
            crate::analysis::summary::Meta::default(),
            Default::default(),
            Default::default(),
            &Default::default(),
            &Default::default(),
        );
        s.overlap_ms = 12.5;
        let t = Threshold::parse("overlap_ms > 0").unwrap();
        assert!(t.check(&s).crossed);
        s.overlap_ms = 0.0;
        assert!(!t.check(&s).crossed);
        assert!(
            Threshold::parse("duration_ms.p99 >= 0")
                .unwrap()
                .check(&s)
                .crossed
        );
        let q = Threshold::parse("redlock.failed_quorums > 0").unwrap();
        s.redlock = Some(crate::redlock::RedlockFigures {
            failed_quorums: 3,
            ..Default::default()
        });
        assert!(q.check(&s).crossed);
        s.redlock.as_mut().unwrap().failed_quorums = 0;
        assert!(!q.check(&s).crossed);
        // A figure not measured crosses nothing (it read as 18446744073709551615 > 0), not even
        // `!=`; a measured one still does (the control).
        let lost = Threshold::parse("lost_updates > 0").unwrap();
        s.protect.resource = true;
        s.lost_updates = crate::analysis::counts::NOT_RECORDED;
        let c = lost.check(&s);
        assert!(!c.crossed && c.value.is_nan(), "{c:?}");
        s.lost_updates = 2;
        assert!(lost.check(&s).crossed);
        // Nor does a figure the variant had no setting for (`figures::measured`), whatever
        // number stands in its field.
        s.protect.resource = false;
        let c = lost.check(&s);
        assert!(!c.crossed && c.value.is_nan(), "{c:?}");
        s.redlock = None;
        let absent = Threshold::parse("redlock.failed_quorums != 0").unwrap();
        assert!(!absent.check(&s).crossed);
    }
}
