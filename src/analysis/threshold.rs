//! CI gates: `fail_if` conditions on any figure of the summary (k6's thresholds are the
//! model), e.g. `overlap_ms > 0`, `lost_updates > 0`, `duration_ms.p99 >= 250`. A run whose
//! variants cross one exits with 99, distinct from errors (1), bad input (2) and Ctrl-C (130).

use crate::analysis::summary::{Crossing, Summary};
use serde::{Deserialize, Deserializer, Serialize};
use std::str::FromStr;

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

/// One `fail_if` condition: the run fails the gate when it holds for a variant. Written as
/// `FIGURE OP NUMBER` ([`FromStr`]) wherever it is written, `--fail-if` or `[thresholds]
/// fail_if`; `manifest.json` records it parsed, and reads back either form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
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

/// Why a `--fail-if` / `fail_if` condition was refused: the condition, and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ThresholdError(String);

crate::exit::classify!(ThresholdError => BadInput);

impl FromStr for Threshold {
    type Err = ThresholdError;

    /// Parses `FIGURE OP NUMBER`; the figure must be a number in every summary.
    fn from_str(expr: &str) -> Result<Threshold, ThresholdError> {
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
            return Err(ThresholdError(format!(
                "`{expr}`: write FIGURE OP NUMBER, e.g. `overlap_ms > 0` (OP one of < <= > >= == !=)"
            )));
        };
        let run = expr[at..]
            .find(|c: char| !is_op(c))
            .map_or(&expr[at..], |n| &expr[at..at + n]);
        let Some(&(sym, op)) = ops.iter().find(|(sym, _)| *sym == run) else {
            return Err(ThresholdError(format!(
                "`{expr}`: `{run}` is not a comparison; use one of < <= > >= == != (e.g. \
                 `overlap_ms > 0`)"
            )));
        };
        let figure = expr[..at].trim().to_string();
        let number = expr[at + sym.len()..].trim();
        let value: f64 = number
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| ThresholdError(format!("`{expr}`: `{number}` is not a number")))?;
        if !known_figure(&figure) {
            return Err(ThresholdError(format!(
                "`{expr}`: `{figure}` is not a figure of the summary; use a field of summary.json \
                 such as overlap_ms, overlap_incidents, wrongful_deletes, lost_updates, \
                 unsafe_writes_over_holder, errors, or a percentile such as duration_ms.p99"
            )));
        }
        Ok(Threshold {
            expr: expr.trim().to_string(),
            figure,
            op,
            value,
        })
    }
}

/// Serialized as recorded (`manifest.json`'s plan): the fields, parsed.
impl Serialize for Threshold {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Threshold::serialize(self, s)
    }
}

/// A condition as written (a string, by [`FromStr`]: a profile's `fail_if`) or as recorded (the
/// fields: `manifest.json`, read back by `merge`).
impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = Threshold;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a condition FIGURE OP NUMBER, e.g. \"overlap_ms > 0\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Threshold, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<Threshold, A::Error> {
                Threshold::deserialize(serde::de::value::MapAccessDeserializer::new(m))
            }
        }
        d.deserialize_any(Either)
    }
}

impl Threshold {
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
    let mut probe = crate::analysis::summary::Summary::empty();
    probe.redlock.get_or_insert_with(Default::default);
    figure_value(&probe, path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Conditions parse with every operator; unknown figures and bad numbers say what is valid.
    #[test]
    fn parses_conditions() {
        let t = "overlap_ms > 0".parse::<Threshold>().unwrap();
        assert_eq!(
            (t.figure.as_str(), t.op, t.value),
            ("overlap_ms", Op::Gt, 0.0)
        );
        assert_eq!(
            "duration_ms.p99>=250".parse::<Threshold>().unwrap().op,
            Op::Ge
        );
        assert_eq!("errors != 0".parse::<Threshold>().unwrap().op, Op::Ne);
        assert!(
            "overlap > 0"
                .parse::<Threshold>()
                .unwrap_err()
                .to_string()
                .contains("not a figure")
        );
        assert!(
            "overlap_ms > x"
                .parse::<Threshold>()
                .unwrap_err()
                .to_string()
                .contains("not a number")
        );
        assert!(
            "overlap_ms"
                .parse::<Threshold>()
                .unwrap_err()
                .to_string()
                .contains("FIGURE OP NUMBER")
        );
        // A wrong operator is named as such, whole, with the valid ones (issue 32: it said
        // "`overlap_ms =` is not a figure").
        for (expr, run) in [
            ("overlap_ms => 0", "=>"),
            ("overlap_ms = 0", "="),
            ("errors <> 0", "<>"),
        ] {
            let e = expr.parse::<Threshold>().unwrap_err().to_string();
            assert!(
                e.contains(&format!("`{run}` is not a comparison"))
                    && e.contains("< <= > >= == !=")
                    && !e.contains("not a figure"),
                "{e}"
            );
        }
        // Redlock's figures are fields of summary.json too (issue 32: refused).
        let t = "redlock.failed_quorums > 0".parse::<Threshold>().unwrap();
        assert_eq!(t.figure, "redlock.failed_quorums");
        assert!("redlock.acquired >= 1".parse::<Threshold>().is_ok());
        assert!("redlock.nonsense > 0".parse::<Threshold>().is_err());
    }

    /// A condition crosses exactly when it holds for the variant.
    #[test]
    fn checks_a_summary() {
        let mut s = crate::analysis::summary::Summary::empty();
        s.overlap_ms = 12.5;
        let t = "overlap_ms > 0".parse::<Threshold>().unwrap();
        assert!(t.check(&s).crossed);
        s.overlap_ms = 0.0;
        assert!(!t.check(&s).crossed);
        assert!(
            "duration_ms.p99 >= 0"
                .parse::<Threshold>()
                .unwrap()
                .check(&s)
                .crossed
        );
        let q = "redlock.failed_quorums > 0".parse::<Threshold>().unwrap();
        s.redlock = Some(crate::quorum::RedlockFigures {
            failed_quorums: 3,
            ..Default::default()
        });
        assert!(q.check(&s).crossed);
        s.redlock.as_mut().unwrap().failed_quorums = 0;
        assert!(!q.check(&s).crossed);
        // A figure not measured crosses nothing (it read as 18446744073709551615 > 0), not even
        // `!=`; a measured one still does (the control).
        let lost = "lost_updates > 0".parse::<Threshold>().unwrap();
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
        let absent = "redlock.failed_quorums != 0".parse::<Threshold>().unwrap();
        assert!(!absent.check(&s).crossed);
    }

    /// One grammar: a profile's `fail_if` entry reads as the flag's text parses, with the same
    /// refusal; `manifest.json`'s recorded form reads back as it was.
    #[test]
    fn reads_the_same_from_text_toml_and_manifest() {
        #[derive(Deserialize)]
        struct Gates {
            fail_if: Vec<Threshold>,
        }
        let flag = "duration_ms.p99 >= 250".parse::<Threshold>().unwrap();
        let toml: Gates = toml::from_str("fail_if = [\"duration_ms.p99 >= 250\"]").unwrap();
        assert_eq!(toml.fail_if, std::slice::from_ref(&flag));
        let bad = "overlap > 0".parse::<Threshold>().unwrap_err().to_string();
        let e = toml::from_str::<Gates>("fail_if = [\"overlap > 0\"]")
            .err()
            .unwrap();
        assert!(e.message().contains(&bad), "{e}");
        let recorded = serde_json::to_value(&flag).unwrap();
        assert_eq!(recorded["figure"], "duration_ms.p99", "{recorded}");
        assert_eq!(serde_json::from_value::<Threshold>(recorded).unwrap(), flag);
    }
}
