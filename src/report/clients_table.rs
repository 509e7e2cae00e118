//! The book's table of lock libraries under faults (`docs/src/measurements/clients.md`):
//! drawn from the results `scripts/clients.sh` writes (`docs/src/measurements/clients.json`),
//! each cell led by its [`word`](super::word) with the figures beneath. The docs drift test
//! (`tests/it/docs.rs`) checks the page against this, and rewrites it under `LOCKBENCH_BLESS=1`.

use super::escape::esc;
use super::word::{Outcome, legend_html, word};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What `scripts/clients.sh` measured: per library (and built-in method) × scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsResults {
    /// When it was measured (`YYYY-MM-DD`).
    pub date: String,
    /// The scenarios, in column order.
    pub scenarios: Vec<String>,
    /// One per variant, in row order.
    pub rows: Vec<ClientsRow>,
}

/// One variant's row.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsRow {
    /// The variant (`del`, `token`, a library's name).
    pub variant: String,
    /// The library and its version, or `built-in`.
    pub library: String,
    /// By scenario; a scenario missing here was not measured (`—`).
    pub cells: BTreeMap<String, ClientsCell>,
}

/// One cell: what was measured, or why nothing was.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ClientsCell {
    /// Not run, and why (`no cluster support`).
    Absent {
        /// Why.
        absent: String,
    },
    /// Measured.
    Ran(Box<CellFigures>),
}

/// A measured cell: the counts the word comes from, and what the library said.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellFigures {
    /// The counts of [`word`].
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Releases the library reported as not owned.
    pub refused: u64,
    /// The library's lost-lock signals.
    pub lost: u64,
    /// Holder crashes.
    pub crashes: u64,
    /// Of a failover: the locks the promoted replica had lost, of those held.
    pub failover_lost: Option<[u64; 2]>,
}

impl CellFigures {
    /// What the library and the faults said, as the old table's tail did.
    fn noticed(&self) -> String {
        let o = &self.outcome;
        let mut n = Vec::new();
        if self.refused > 0 {
            n.push(format!("{} refused", self.refused));
        }
        if self.lost > 0 {
            n.push(format!("{} lost", self.lost));
        }
        if o.errors > 0 {
            n.push(format!("{} errors", o.errors));
        }
        if self.crashes > 0 {
            n.push(format!(
                "{} crashes, key blocked {:.0} ms avg",
                self.crashes, o.crash_blocked_mean_ms
            ));
        }
        if let Some([lost, held]) = self.failover_lost {
            n.push(format!("failover lost {lost} of {held} locks"));
        }
        if o.fault_failed {
            n.push("the fault failed".to_string());
        }
        n.join(", ")
    }
}

/// A cell of the table: the word, then the figures in small type.
fn cell(c: Option<&ClientsCell>) -> String {
    match c {
        None => "—".to_string(),
        Some(ClientsCell::Absent { absent }) => {
            format!("<small>{}</small>", esc(absent))
        }
        Some(ClientsCell::Ran(f)) => {
            let o = &f.outcome;
            let mut s = format!(
                "{}<br><small>{:.0} ms · {} / {} / {}",
                word(o).html(),
                o.overlap_ms,
                o.lost_updates,
                o.wrongful_deletes,
                o.stuck_locks
            );
            let noticed = f.noticed();
            if !noticed.is_empty() {
                let _ = write!(s, "<br>{}", esc(&noticed));
            }
            s.push_str("</small>");
            s
        }
    }
}

/// The page's generated block: the table and its legend.
pub fn markdown(r: &ClientsResults) -> String {
    let mut m = format!(
        "Measured by `scripts/clients.sh` on {} (its results: [clients.json](clients.json)).\n\n",
        r.date
    );
    let _ = writeln!(m, "| variant | {} |", r.scenarios.join(" | "));
    let _ = writeln!(m, "|---|{}", "---|".repeat(r.scenarios.len()));
    for row in &r.rows {
        let _ = write!(
            m,
            "| `{}`<br><small>{}</small> |",
            row.variant,
            esc(&row.library)
        );
        for s in &r.scenarios {
            let _ = write!(m, " {} |", cell(row.cells.get(s)));
        }
        m.push('\n');
    }
    m.push_str(
        "\nEach cell leads with one word, decided from what lockbench measured (the \
         server and the protected resource), never from what the library said:\n\n",
    );
    m.push_str(&legend_html());
    m.push_str(
        "\nBeneath the word: *overlap · lost updates / wrongful deletes / stuck locks*, then \
         what the library itself said (releases it refused as not owned, its lost-lock \
         signals, errors) and what the fault did (crashes and how long the dead holder's lock \
         blocked its key, locks a failover lost).\n",
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(cell: &str) -> ClientsResults {
        serde_json::from_str(&format!(
            r#"{{"date": "2026-12-06", "scenarios": ["long", "failover"], "rows": [
                {{"variant": "del", "library": "built-in", "cells": {{
                    "long": {cell},
                    "failover": {{"absent": "no cluster support"}}}}}}]}}"#
        ))
        .expect("parses")
    }

    const FIGURES: &str = r#"{"overlap_ms": 6375, "lost_updates": 9, "wrongful_deletes": 9,
        "stuck_locks": 0, "errors": 0, "crash_blocked_mean_ms": 0, "ttl_ms": 1000,
        "fault_failed": false, "refused": 2, "lost": 0, "crashes": 0, "failover_lost": null}"#;

    #[test]
    fn a_cell_leads_with_its_word_and_the_figures_follow() {
        let m = markdown(&results(FIGURES));
        let row = m.lines().find(|l| l.starts_with("| `del`")).expect("row");
        let word = row.find("wrongful delete</span>").expect("the word");
        let figures = row
            .find("6375 ms · 9 / 9 / 0<br>2 refused")
            .expect("figures");
        assert!(word < figures, "{row}");
        assert!(row.contains("<small>no cluster support</small>"), "{row}");
    }

    #[test]
    fn a_misspelt_field_is_refused() {
        let bad = FIGURES.replace("lost_updates", "lost_update");
        assert!(serde_json::from_str::<CellFigures>(&bad).is_err());
    }
}
