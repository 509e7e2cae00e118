//! One word for a variant's outcome — safe, overlap, wrongful delete, blocked, error — that a
//! reader can trust at a glance: decided here, once, from the counts lockbench measured, for
//! the book's table of lock libraries (`docs/src/measurements/clients.md`, see
//! [`super::clients_table`]) and for `report.html` of a compare with libraries alike.
//!
//! The word names the worst thing that happened; the legend ([`LEGEND`]) says exactly how. What
//! a library said about itself (refused releases, lost-lock signals) never changes it: those
//! are its own reports, shown beneath the word, while the word follows what the server and the
//! protected resource saw.

use crate::analysis::summary::Summary;
use serde::{Deserialize, Serialize};

/// The counts a word is decided from (one variant under one scenario).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Time two or more holders held one key at once (ms).
    pub overlap_ms: f64,
    /// Updates of the protected resource lost to a concurrent holder.
    pub lost_updates: u64,
    /// Releases that removed another holder's lock.
    pub wrongful_deletes: u64,
    /// Locks still held when the run ended that no live holder owned.
    pub stuck_locks: u64,
    /// Commands that failed (no reply or an error reply).
    pub errors: u64,
    /// After a holder crashed, how long its key stayed blocked, on average (ms; 0 without
    /// crashes).
    pub crash_blocked_mean_ms: f64,
    /// The lock's TTL (ms), against which a block is judged.
    pub ttl_ms: u64,
    /// The scenario's fault could not be applied (e.g. a failover that failed).
    pub fault_failed: bool,
}

impl Outcome {
    /// The counts of a finished variant.
    pub fn of(s: &Summary) -> Self {
        // A count an older lockbench did not record reads as not seen.
        let recorded = |n: u64| {
            if n == crate::analysis::counts::NOT_RECORDED {
                0
            } else {
                n
            }
        };
        Self {
            overlap_ms: s.overlap_ms,
            lost_updates: s.lost_updates,
            wrongful_deletes: recorded(s.counts.wrongful_deletes),
            stuck_locks: s.stuck_locks,
            errors: s.errors,
            crash_blocked_mean_ms: if s.crash_blocked_ms.count > 0 {
                s.crash_blocked_ms.mean
            } else {
                0.0
            },
            ttl_ms: s.meta.ttl_ms,
            fault_failed: s.faults.iter().any(|f| !f.error.is_empty()),
        }
    }
}

/// The word, worst first: when several apply, the first in this order is the one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Word {
    /// A release removed another holder's lock.
    WrongfulDelete,
    /// Two holders held the key at once.
    Overlap,
    /// A lock kept its key from every waiter well beyond its TTL.
    Blocked,
    /// Nothing unsafe was seen, but commands failed or the fault could not be applied.
    Error,
    /// None of the above.
    Safe,
}

/// How many TTLs a crashed holder's key may stay blocked, on average, before the word is
/// `blocked`: a dead holder's lock is expected to block its key for about one TTL (until it
/// expires), plus a waiter's retry delay.
pub const BLOCKED_TTLS: f64 = 2.0;

/// The word for `o` (see [`LEGEND`]).
pub fn word(o: &Outcome) -> Word {
    if o.wrongful_deletes > 0 {
        Word::WrongfulDelete
    } else if o.overlap_ms > 0.0 || o.lost_updates > 0 {
        Word::Overlap
    } else if o.stuck_locks > 0 || o.crash_blocked_mean_ms > BLOCKED_TTLS * o.ttl_ms as f64 {
        Word::Blocked
    } else if o.errors > 0 || o.fault_failed {
        Word::Error
    } else {
        Word::Safe
    }
}

impl Word {
    /// Every word, in precedence order.
    pub const ALL: [Word; 5] = [
        Word::WrongfulDelete,
        Word::Overlap,
        Word::Blocked,
        Word::Error,
        Word::Safe,
    ];

    /// As shown.
    pub fn text(self) -> &'static str {
        match self {
            Word::WrongfulDelete => "wrongful delete",
            Word::Overlap => "overlap",
            Word::Blocked => "blocked",
            Word::Error => "error",
            Word::Safe => "safe",
        }
    }

    /// Its colour (the report's green and red for safe and the worst).
    pub fn colour(self) -> &'static str {
        match self {
            Word::WrongfulDelete => "#b00",
            Word::Overlap => "#c2410c",
            Word::Blocked => "#9a6700",
            Word::Error => "#6e40c9",
            Word::Safe => "#1a7f37",
        }
    }

    /// How it is decided, for the legend.
    pub fn rule(self) -> String {
        match self {
            Word::WrongfulDelete => {
                "a release removed another holder's lock: wrongful deletes above 0".to_string()
            }
            Word::Overlap => {
                "two holders held the key at once: overlap above 0 ms, or lost updates above 0"
                    .to_string()
            }
            Word::Blocked => format!(
                "a lock kept its key from every waiter: stuck locks above 0, or, after a holder \
                 crashed, its key blocked for more than {BLOCKED_TTLS} × the TTL on average"
            ),
            Word::Error => "none of those, but errors above 0 (commands that failed) or a fault \
                            that could not be applied"
                .to_string(),
            Word::Safe => "none of the above: no wrongful delete, no overlap, no lost update, no \
                           stuck lock, no long block, no error"
                .to_string(),
        }
    }

    /// The word as an HTML span, coloured inline (the book's mdbook and `report.html` both
    /// show it without a stylesheet of their own).
    pub fn html(self) -> String {
        format!(
            "<span style=\"color:{};font-weight:bold\">{}</span>",
            self.colour(),
            self.text()
        )
    }
}

/// The legend, one HTML list item per word in precedence order, and the rule for several.
pub fn legend_html() -> String {
    let mut h = String::from("<ul>\n");
    for w in Word::ALL {
        h.push_str(&format!(
            "<li>{} — {}.</li>\n",
            w.html(),
            super::escape::esc(&w.rule())
        ));
    }
    h.push_str(
        "</ul>\n<p>When several apply, the first in this list is the word. What a library said \
         about itself (refused releases, lost-lock signals) does not change it.</p>\n",
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> Outcome {
        Outcome {
            ttl_ms: 1000,
            ..Outcome::default()
        }
    }

    #[test]
    fn each_word_from_its_counts() {
        assert_eq!(word(&clean()), Word::Safe);
        type Case = (fn(&mut Outcome), Word);
        let cases: [Case; 8] = [
            (|o| o.wrongful_deletes = 1, Word::WrongfulDelete),
            (|o| o.overlap_ms = 0.5, Word::Overlap),
            (|o| o.lost_updates = 1, Word::Overlap),
            (|o| o.stuck_locks = 1, Word::Blocked),
            (|o| o.crash_blocked_mean_ms = 2001.0, Word::Blocked),
            (|o| o.errors = 3, Word::Error),
            (|o| o.fault_failed = true, Word::Error),
            // A dead holder's key blocked for about its TTL is what a TTL lock does.
            (|o| o.crash_blocked_mean_ms = 903.0, Word::Safe),
        ];
        for (set, want) in cases {
            let mut o = clean();
            set(&mut o);
            assert_eq!(word(&o), want, "{o:?}");
        }
    }

    /// The negative control: a run with wrongful deletes is never safe, whatever else it has
    /// or lacks; and the precedence holds when several apply.
    #[test]
    fn wrongful_deletes_are_never_safe_and_the_worst_word_wins() {
        for overlap_ms in [0.0, 10.0] {
            for errors in [0, 5] {
                for stuck_locks in [0, 1] {
                    let o = Outcome {
                        wrongful_deletes: 1,
                        overlap_ms,
                        errors,
                        stuck_locks,
                        ..clean()
                    };
                    assert_eq!(word(&o), Word::WrongfulDelete, "{o:?}");
                }
            }
        }
        let o = Outcome {
            overlap_ms: 1.0,
            stuck_locks: 1,
            errors: 1,
            ..clean()
        };
        assert_eq!(word(&o), Word::Overlap);
        let o = Outcome {
            stuck_locks: 1,
            errors: 1,
            ..clean()
        };
        assert_eq!(word(&o), Word::Blocked);
    }

    #[test]
    fn the_legend_names_every_word_in_precedence_order() {
        let legend = legend_html();
        let at: Vec<usize> = Word::ALL
            .iter()
            .map(|w| legend.find(&w.html()).expect("every word"))
            .collect();
        assert!(at.windows(2).all(|p| p[0] < p[1]), "{legend}");
        let mut sorted = Word::ALL;
        sorted.sort();
        assert_eq!(sorted, Word::ALL, "the order is the precedence");
    }
}
