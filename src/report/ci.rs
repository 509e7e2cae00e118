//! The verdict table for CI systems: Markdown for a job summary page (`--summary-md`) and JUnit
//! XML (`--junit`), one test case per variant × threshold.

use crate::analysis::verdict_table::{State, VerdictTable};
use std::fmt::Write as _;

/// Escapes a Markdown table cell: pipes would end the cell, newlines the row.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The verdict table as Markdown (GitHub-flavoured: a table; green and red by zero / non-zero).
pub(crate) fn markdown(t: &VerdictTable) -> String {
    let mut m = String::new();
    let run = match t.run_id.as_str() {
        "" => "lockbench".to_string(),
        id => format!("lockbench run `{}`", id.replace('`', "'")),
    };
    let _ = writeln!(m, "### {run}: {}\n", t.outcome());
    let header: Vec<String> = t
        .header()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            if i > crate::analysis::verdict_table::FIGURES.len() {
                format!("`{}`", h.replace('`', "'"))
            } else {
                h.clone()
            }
        })
        .collect();
    if t.rows.is_empty() {
        // A run that failed before any variant finished: only why.
        for r in &t.verdict.reasons {
            let _ = writeln!(m, "- {}", r.replace('\n', " "));
        }
        return m;
    }
    let _ = writeln!(m, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| if i == 0 { ":--" } else { "--:" })
        .collect();
    let _ = writeln!(m, "|{}|", align.join("|"));
    for r in &t.rows {
        let mut cells = vec![md_cell(&r.variant)];
        for f in &r.figures {
            cells.push(match f.state {
                State::Zero => format!("🟢 {}", f.text),
                State::NonZero => format!("🔴 {}", f.text),
                State::NotMeasured => f.text.clone(),
            });
        }
        for mark in &r.thresholds {
            cells.push(match mark {
                Some(k) if k.crossed => format!("❌ {}", k.text()),
                Some(k) => format!("✅ {}", k.text()),
                None => "-".to_string(),
            });
        }
        let _ = writeln!(m, "| {} |", cells.join(" | "));
    }
    let reasons: Vec<&String> = t.verdict.reasons.iter().collect();
    if !reasons.is_empty() {
        m.push('\n');
        for r in reasons {
            let _ = writeln!(m, "- {}", r.replace('\n', " "));
        }
    }
    if t.thresholds.is_empty() {
        m.push_str("\nNo thresholds (`--fail-if`) were set.\n");
    }
    m
}

/// Escapes text for XML attribute values and content; drops characters XML 1.0 cannot hold.
pub(crate) fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// One test case.
struct Case {
    classname: String,
    name: String,
    time_s: f64,
    /// `(element, type, message, text)`: a `failure` or an `error`.
    outcome: Option<(&'static str, &'static str, String, String)>,
}

/// The verdict table as JUnit XML: one `<testsuite>` for the run, one `<testcase>` per
/// variant × threshold (a crossed threshold is a `<failure>`), or one case `run` per variant
/// when no threshold was set; a failed variant's `run` case and the run's own failure are
/// `<error>`s. `timestamp` is the run's start (ISO 8601), when known.
pub(crate) fn junit(t: &VerdictTable, timestamp: Option<&str>) -> String {
    let mut cases = Vec::new();
    for r in &t.rows {
        for mark in r.thresholds.iter().flatten() {
            cases.push(Case {
                classname: r.variant.clone(),
                name: mark.expr.clone(),
                time_s: r.elapsed_s,
                outcome: mark.crossed.then(|| {
                    (
                        "failure",
                        "threshold",
                        mark.message.clone(),
                        format!(
                            "variant {}: {} (threshold `{}` crossed)",
                            r.variant, mark.message, mark.expr
                        ),
                    )
                }),
            });
        }
        // The variant itself: a case of its own when there is no threshold to carry it, or
        // when it failed.
        if t.thresholds.is_empty() || !r.failures.is_empty() {
            cases.push(Case {
                classname: r.variant.clone(),
                name: "run".to_string(),
                time_s: r.elapsed_s,
                outcome: (!r.failures.is_empty()).then(|| {
                    (
                        "error",
                        "failed",
                        r.failures.join("; "),
                        r.failures.join("\n"),
                    )
                }),
            });
        }
    }
    if let Some(f) = &t.run_failure {
        cases.push(Case {
            classname: "lockbench".to_string(),
            name: "run".to_string(),
            time_s: 0.0,
            outcome: Some(("error", "failed", f.clone(), f.clone())),
        });
    }
    let count = |kind: &str| {
        cases
            .iter()
            .filter(|c| c.outcome.as_ref().is_some_and(|o| o.0 == kind))
            .count()
    };
    let (tests, failures, errors) = (cases.len(), count("failure"), count("error"));
    let time = t.rows.iter().fold(0.0, |sum, r| sum + r.elapsed_s);
    let suite = match t.run_id.as_str() {
        "" => "lockbench (no run)".to_string(),
        id => format!("lockbench {id}"),
    };
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"lockbench\" tests=\"{tests}\" failures=\"{failures}\" \
         errors=\"{errors}\" time=\"{time:.3}\">"
    );
    let _ = write!(
        x,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" \
         errors=\"{errors}\" skipped=\"0\" time=\"{time:.3}\"",
        xml(&suite)
    );
    if let Some(ts) = timestamp {
        let _ = write!(x, " timestamp=\"{}\"", xml(ts));
    }
    x.push_str(">\n");
    for c in &cases {
        let _ = write!(
            x,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml(&c.classname),
            xml(&c.name),
            c.time_s
        );
        match &c.outcome {
            None => x.push_str("/>\n"),
            Some((element, kind, message, text)) => {
                let _ = write!(
                    x,
                    ">\n      <{element} type=\"{kind}\" message=\"{}\">{}</{element}>\n    \
                     </testcase>\n",
                    xml(message),
                    xml(text)
                );
            }
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Markup in names and messages is escaped; characters XML cannot hold are dropped.
    #[test]
    fn escapes_xml() {
        assert_eq!(xml("a<b>&\"c'\n\u{1}"), "a&lt;b&gt;&amp;&quot;c&apos;&#10;");
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
    }

    fn summary(variant: &str, sections: u64, overlap_ms: f64) -> crate::analysis::summary::Summary {
        let mut s = crate::analysis::summary::Summary::empty();
        s.meta.variant = variant.to_string();
        s.counts.sections = sections;
        s.overlap_ms = overlap_ms;
        s.thresholds = vec![crate::analysis::summary::Crossing {
            expr: "overlap_ms > 0".into(),
            value: overlap_ms,
            crossed: overlap_ms > 0.0,
        }];
        s
    }

    /// A crossed threshold is a failure, a held one passes, a failed variant adds an error case
    /// `run` beside its thresholds, and the run's own failure one of class `lockbench`; the
    /// counts on the suite are the cases'.
    #[test]
    fn junit_cases_and_counts() {
        let t = VerdictTable::new(
            "r1",
            &[summary("del", 10, 2.5), summary("token", 0, 0.0)],
            false,
            Some("variant `delex` failed: unknown command"),
        );
        let x = junit(&t, None);
        assert!(
            x.contains("<testsuite name=\"lockbench r1\" tests=\"4\" failures=\"1\" errors=\"2\""),
            "{x}"
        );
        assert!(
            x.contains("<failure type=\"threshold\" message=\"overlap_ms = 2.5 &gt; 0\">"),
            "{x}"
        );
        assert!(
            x.contains("<testcase classname=\"token\" name=\"overlap_ms &gt; 0\" time=\"0.000\"/>"),
            "{x}"
        );
        assert!(
            x.contains("<testcase classname=\"token\" name=\"run\""),
            "{x}"
        );
        assert!(x.contains("completed no section"), "{x}");
        assert!(
            x.contains("<testcase classname=\"lockbench\" name=\"run\""),
            "{x}"
        );
        let md = markdown(&t);
        assert!(md.contains("| del | 🔴 2.5 / 0 |"), "{md}");
        assert!(
            md.contains("- variant `delex` failed: unknown command"),
            "{md}"
        );
    }

    /// The terminal's table is coloured only when asked (stdout a terminal), the text the same.
    #[test]
    fn terminal_colour_only_when_asked() {
        let t = VerdictTable::new("r1", &[summary("del", 10, 2.5)], false, None);
        let (mut plain, mut colour) = (Vec::new(), Vec::new());
        crate::report::terminal::print_verdict(&mut plain, &t, false).unwrap();
        crate::report::terminal::print_verdict(&mut colour, &t, true).unwrap();
        let (plain, colour) = (
            String::from_utf8(plain).unwrap(),
            String::from_utf8(colour).unwrap(),
        );
        assert!(
            !plain.contains('\x1b') && colour.contains("\x1b[31m"),
            "{colour}"
        );
        let stripped = colour
            .replace("\x1b[31m", "")
            .replace("\x1b[32m", "")
            .replace("\x1b[0m", "");
        assert_eq!(stripped, plain);
    }
}
