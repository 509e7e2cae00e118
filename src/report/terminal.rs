//! What a run prints at its end: the verdict table (one row per variant: the key figures and
//! the thresholds), then the summary table, one column per variant, its rows from the one table
//! of figures.

use crate::analysis::figures::{cell, figures};
use crate::analysis::summary::{Quantiles, Summary};
use crate::analysis::verdict_table::{State, VerdictTable};
use std::io::{self, Write};

/// Prints the verdict table, one row per variant, and a blank line. With `colour` (stdout is a
/// terminal), key figures are green where zero and red where not, thresholds green where held
/// and red where crossed; without it the text is the same, uncoloured.
pub(crate) fn print_verdict<W: Write>(mut w: W, t: &VerdictTable, colour: bool) -> io::Result<()> {
    const GREEN: &str = "\x1b[32m";
    const RED: &str = "\x1b[31m";
    const RESET: &str = "\x1b[0m";
    let header = t.header();
    // (text, colour) per cell.
    let rows: Vec<Vec<(String, Option<&str>)>> = t
        .rows
        .iter()
        .map(|r| {
            let mut cells = vec![(r.variant.clone(), None)];
            for f in &r.figures {
                let c = match f.state {
                    State::Zero => Some(GREEN),
                    State::NonZero => Some(RED),
                    State::NotMeasured => None,
                };
                cells.push((f.text.clone(), c));
            }
            for m in &r.thresholds {
                cells.push(match m {
                    Some(m) => (m.text(), Some(if m.crossed { RED } else { GREEN })),
                    None => ("-".to_string(), None),
                });
            }
            cells
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].0.chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    writeln!(w, "verdict: {}", t.outcome())?;
    for (i, (h, cw)) in header.iter().zip(&widths).enumerate() {
        let sep = if i == 0 { "" } else { "  " };
        if i == 0 {
            write!(w, "{h:<cw$}")?;
        } else {
            write!(w, "{sep}{h:>cw$}")?;
        }
    }
    writeln!(w)?;
    for r in &rows {
        for (i, ((text, c), cw)) in r.iter().zip(&widths).enumerate() {
            let cell = if i == 0 {
                format!("{text:<cw$}")
            } else {
                format!("  {text:>cw$}")
            };
            match c {
                Some(c) if colour => write!(w, "{c}{cell}{RESET}")?,
                _ => write!(w, "{cell}")?,
            }
        }
        writeln!(w)?;
    }
    writeln!(w)
}

/// Prints the summary table, one column per variant.
pub(crate) fn print_table<W: Write>(mut w: W, summaries: &[Summary]) -> io::Result<()> {
    let pct = |x: f64| format!("{:.4} %", x * 100.0);
    type Cell = Box<dyn Fn(&Summary) -> String>;
    let mut rows: Vec<(String, Cell)> = vec![
        ("release".into(), Box::new(|s| s.meta.release.clone())),
        (
            "connection".into(),
            Box::new(|s| s.meta.connection_mode.clone()),
        ),
    ];
    // Every figure of the one table that the terminal shows.
    for f in figures()
        .into_iter()
        .filter(|f| f.terminal && summaries.iter().any(|s| f.group.present(s)))
    {
        rows.push((f.label.clone(), Box::new(move |s| cell(&f, s))));
    }
    rows.push((
        "P(d > TTL) theory".into(),
        Box::new(move |s| match &s.analytic {
            Some(a) => format!(
                "{} in [{}, {}]{}",
                pct(a.p_expected),
                pct(a.ci99_low),
                pct(a.ci99_high),
                if a.agrees { "" } else { " MISMATCH" }
            ),
            None => "n/a".to_string(),
        }),
    ));
    rows.push((
        "duration p50/p99/max".into(),
        Box::new(|s| q3(&s.duration_ms)),
    ));
    rows.push((
        "timer error p50/p99/max".into(),
        Box::new(|s| q3(&s.timer_error_ms)),
    ));
    rows.push((
        "acquire lat. p50/p99/max".into(),
        Box::new(|s| q3(&s.acquire_latency_ms)),
    ));
    if summaries.iter().any(|s| s.redlock.is_some()) {
        rows.push((
            "redlock quorum".into(),
            Box::new(|s| match &s.redlock {
                Some(r) => format!("{} of {}", r.quorum, r.instances),
                None => "single".to_string(),
            }),
        ));
        rows.push((
            "failed quorums / validity".into(),
            Box::new(|s| match &s.redlock {
                Some(r) => format!("{} / {}", r.failed_quorums, r.validity_expired),
                None => "-".to_string(),
            }),
        ));
        rows.push((
            "instance errors".into(),
            Box::new(|s| match &s.redlock {
                Some(r) => r
                    .instance_errors
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                None => "-".to_string(),
            }),
        ));
    }
    if summaries.iter().any(|s| s.request_latency_ms.count > 0) {
        rows.push((
            "request lat. p50/p99/max".into(),
            Box::new(|s| q3(&s.request_latency_ms)),
        ));
    }
    // The fault schedule: windows applied / failed / not reached, so a failed or missed
    // fault is never read as "the fault did no harm".
    if summaries.iter().any(|s| !s.faults.is_empty()) {
        rows.push((
            "faults applied/failed/not reached".into(),
            Box::new(|s| {
                let failed = s.faults.iter().filter(|f| !f.error.is_empty()).count();
                let missed = s.faults.iter().filter(|f| !f.reached).count();
                let applied = s.faults.len() - failed - missed;
                format!("{applied}/{failed}/{missed}")
            }),
        ));
    }
    // A cluster: one row per shard (keys used, overlap incidents, locks lost in failovers).
    let shards = summaries.iter().map(|s| s.shards.len()).max().unwrap_or(0);
    for i in 0..shards {
        rows.push((
            format!("shard {i} keys/overlaps/lost"),
            Box::new(move |s| match s.shards.get(i) {
                Some(f) => format!("{}/{}/{}", f.keys_used, f.overlap_incidents, f.locks_lost),
                None => "n/a".to_string(),
            }),
        ));
    }
    let label_w = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(_, f)| summaries.iter().map(f).collect())
        .collect();
    let col_w: Vec<usize> = (0..summaries.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(summaries[i].meta.variant.len())
        })
        .collect();
    write!(w, "{:label_w$}", "")?;
    for (s, cw) in summaries.iter().zip(&col_w) {
        write!(w, "  {:>cw$}", s.meta.variant)?;
    }
    writeln!(w)?;
    for ((label, _), row) in rows.iter().zip(&cells) {
        write!(w, "{label:label_w$}")?;
        for (cell, cw) in row.iter().zip(&col_w) {
            write!(w, "  {cell:>cw$}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}

fn q3(q: &Quantiles) -> String {
    format!("{:.2}/{:.2}/{:.2} ms", q.p50, q.p99, q.max)
}
