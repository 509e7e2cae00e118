//! The counted figures of a variant, defined once.
//!
//! [`counts!`] lists every counter with its definition. From that one list come the plain
//! [`Counts`] (what the summary holds and `lockbench report` recounts), the atomic
//! [`LiveCounts`] the workers add to, and [`Counts::FIELDS`] (name, definition, whether
//! events.csv determines it). A section's counts come from its row alone
//! ([`Counts::of_section`]), the same function live and in the recount, so the two cannot
//! drift. Adding a counter is one line here plus the code that counts it.

use crate::model::release::{ReleaseOutcome, StaleRule, tally};
use crate::record::{EventRow, SectionOutcome};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A count that the summary.json being read does not have (an older lockbench wrote it).
pub(crate) const NOT_RECORDED: u64 = u64::MAX;

fn not_recorded() -> u64 {
    NOT_RECORDED
}

/// Whether a counter can be recounted from `events.csv` (one row per section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recount {
    /// Every row carries it: `lockbench report` recounts it exactly.
    FromRows,
    /// Counted per attempt (busy replies, failed acquisitions): no row records it.
    Live,
}

macro_rules! counts {
    ($( $(#[doc = $doc:literal])+ $field:ident: $recount:ident, )*) => {
        /// Counted figures of one variant, as plain numbers. A count missing from a
        /// summary.json written by an older lockbench reads as [`NOT_RECORDED`].
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Counts {
            $( $(#[doc = $doc])+ #[serde(default = "not_recorded")] pub $field: u64, )*
        }

        /// The same counters, added to by many workers at once.
        #[derive(Debug, Default)]
        pub struct LiveCounts {
            $( $(#[doc = $doc])+ pub $field: AtomicU64, )*
        }

        impl LiveCounts {
            /// The counts so far.
            pub fn snapshot(&self) -> Counts {
                Counts { $( $field: self.$field.load(Relaxed), )* }
            }
            /// Adds `d` (only its non-zero fields touch an atomic).
            pub fn add(&self, d: &Counts) {
                $( if d.$field != 0 { self.$field.fetch_add(d.$field, Relaxed); } )*
            }
        }

        impl Counts {
            /// Every counter: its name (in summary.json), definition and recount.
            pub const FIELDS: &[(&str, &str, Recount)] = &[
                $( (stringify!($field), concat!($($doc),+), Recount::$recount), )*
            ];
            /// Adds `d`.
            pub fn add(&mut self, d: &Counts) {
                $( self.$field += d.$field; )*
            }
            /// A counter by name.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $( stringify!($field) => Some(self.$field), )*
                    _ => None,
                }
            }
        }
    };
}

counts! {
    /// Acquisition commands sent.
    attempts: Live,
    /// Every command the workers sent (acquisitions, releases, resource reads and writes,
    /// extensions).
    commands: Live,
    /// Successful acquisitions (sections begun).
    sections: FromRows,
    /// Sections with d > TTL.
    overruns: FromRows,
    /// Sum of the excesses d − TTL of overruns, µs.
    excess_total_us: FromRows,
    /// Releases sent after the holder's key expired at the server.
    stale_releases: FromRows,
    /// Stale releases of sections with d ≤ TTL.
    stale_without_overrun: FromRows,
    /// Releases that found the key gone before it could have expired (another holder's naive DEL).
    deleted_by_other: FromRows,
    /// Token-checked releases refused: key absent.
    refused_expired: FromRows,
    /// Token-checked releases refused: another token present.
    refused_held_by_other: FromRows,
    /// Token-checked releases refused, class unknown (delex).
    refused_unclassified: FromRows,
    /// del releases that removed another holder's lock.
    wrongful_deletes: FromRows,
    /// del releases that found no key.
    nothing_deleted: FromRows,
    /// Releases that deleted the holder's own lock.
    released: FromRows,
    /// Releases that failed (no reply, or an error reply).
    release_errors: FromRows,
    /// Sections cut short by Ctrl-C or the end-of-run grace period.
    interrupted: FromRows,
    /// Resource writes sent.
    resource_writes: FromRows,
    /// Resource writes the resource applied.
    writes_accepted: FromRows,
    /// Accepted writes whose writer no longer held the lock (decided by the server).
    unsafe_writes_accepted: FromRows,
    /// … of which another holder held the lock at that instant (the rest found it gone).
    unsafe_writes_over_holder: FromRows,
    /// Writes the resource refused: a higher fence had been seen.
    writes_rejected_fenced: FromRows,
    /// Reads the resource refused under read-write fencing (the write is then skipped).
    reads_rejected_fenced: FromRows,
    /// Lease extensions that re-armed a held lock.
    extensions: FromRows,
    /// Extensions that found the lock already gone (too late).
    extension_failures: FromRows,
    /// Sections given up after losing the lock (on_lost = abort): no write.
    sections_aborted: FromRows,
    /// Stop-the-world pauses of holders.
    pauses: FromRows,
    /// Their total length, µs.
    pause_total_us: FromRows,
    /// Sections run without a lock because Redis did not answer (fail-open).
    unlocked_sections: FromRows,
    /// Holders that died mid-section without releasing (holder-crash faults, crash_between).
    crashes: FromRows,
    /// Requests refused because Redis did not answer (fail-closed).
    refused_unavailable: Live,
    /// Attempts refused because the lock was busy (fail-fast).
    rejections: Live,
    /// Busy replies followed by a retry.
    retries: Live,
    /// Acquisitions abandoned after the retry policy's max wait.
    acquire_giveups: Live,
    /// Requests that arrived (open arrival model), served or not.
    requests: Live,
    /// Arrivals that found every request slot busy and waited for one (open arrival model).
    late_arrivals: Live,
    /// Arrivals dropped because every slot was busy and the backlog was full (open arrival
    /// model).
    dropped_arrivals: Live,
}

impl Counts {
    /// What one section adds, from its row alone: used by the worker as the section ends and
    /// by `lockbench report` for every row.
    pub fn of_section(r: &EventRow, rule: StaleRule) -> Counts {
        let overrun = r.duration_us > r.ttl_us;
        let mut c = Counts {
            sections: 1,
            overruns: u64::from(overrun),
            excess_total_us: r.duration_us.saturating_sub(r.ttl_us),
            interrupted: u64::from(r.interrupted),
            ..Counts::default()
        };
        let w = &*r.write;
        c.resource_writes = u64::from(matches!(
            w,
            "accepted" | "unsafe" | "unsafe_over_holder" | "fenced" | "error"
        ));
        c.writes_accepted = u64::from(matches!(w, "accepted" | "unsafe" | "unsafe_over_holder"));
        c.unsafe_writes_accepted = u64::from(matches!(w, "unsafe" | "unsafe_over_holder"));
        c.unsafe_writes_over_holder = u64::from(w == "unsafe_over_holder");
        c.writes_rejected_fenced = u64::from(r.write == "fenced");
        c.reads_rejected_fenced = u64::from(r.read == "fenced");
        c.extensions = u64::from(r.extensions);
        c.extension_failures = u64::from(r.extension_failed);
        c.sections_aborted = u64::from(r.aborted);
        c.pauses = u64::from(r.pause_us > 0);
        c.pause_total_us = r.pause_us;
        let o = match r.outcome {
            SectionOutcome::Release(o) => o,
            // No lock was taken, so none is released.
            SectionOutcome::Unlocked => {
                c.unlocked_sections = 1;
                return c;
            }
            // The holder died: no release was sent.
            SectionOutcome::Crashed => {
                c.crashes = 1;
                return c;
            }
            SectionOutcome::ReleaseFailed(_) => {
                c.release_errors = 1;
                return c;
            }
        };
        *match o {
            ReleaseOutcome::Released => &mut c.released,
            ReleaseOutcome::WrongfulDelete => &mut c.wrongful_deletes,
            ReleaseOutcome::NothingDeleted => &mut c.nothing_deleted,
            ReleaseOutcome::RefusedExpired => &mut c.refused_expired,
            ReleaseOutcome::RefusedHeldByOther => &mut c.refused_held_by_other,
            ReleaseOutcome::RefusedUnclassified => &mut c.refused_unclassified,
        } += 1;
        // The release ran at the server before its reply came back.
        let decided_us = match rule {
            StaleRule::Reply => r.released_us.saturating_add(r.release_latency_us),
            StaleRule::Send => r.released_us,
        };
        let t = tally(o, overrun, r.set_sent_us, decided_us, r.ttl_us);
        c.stale_releases = u64::from(t.stale);
        c.stale_without_overrun = u64::from(t.stale_without_overrun);
        c.deleted_by_other = u64::from(t.deleted_by_other);
        c
    }

    /// Token-checked releases that deleted nothing, of any class.
    pub fn refused_releases(&self) -> u64 {
        self.refused_expired + self.refused_held_by_other + self.refused_unclassified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(duration_us: u64, outcome: &str, released_us: u64) -> EventRow {
        EventRow {
            variant: "del".into(),
            worker: 0,
            key: 0,
            seq: 0,
            attempt_start_us: 0,
            set_sent_us: 0,
            acquired_us: 100,
            released_us,
            intended_us: duration_us,
            duration_us,
            ttl_us: 1_000,
            overrun: duration_us > 1_000,
            excess_us: duration_us.saturating_sub(1_000),
            holders_at_start: 0,
            attempts: 1,
            acquire_latency_us: 100,
            release_latency_us: 50,
            release: "del".into(),
            outcome: SectionOutcome::from_name(outcome).unwrap(),
            interrupted: false,
            ..EventRow::default()
        }
    }

    /// A section counts once, in exactly one outcome; an overrun's excess is summed; a key
    /// gone after its TTL is a stale release, gone before it another holder's delete.
    #[test]
    fn a_section_counts_from_its_row() {
        let ok = Counts::of_section(&row(500, "released", 600), StaleRule::Reply);
        assert_eq!((ok.sections, ok.released, ok.overruns), (1, 1, 0));
        assert_eq!(ok.stale_releases + ok.deleted_by_other, 0);

        let late = Counts::of_section(&row(1_500, "nothing_deleted", 1_600), StaleRule::Reply);
        assert_eq!((late.overruns, late.excess_total_us), (1, 500));
        assert_eq!((late.nothing_deleted, late.stale_releases), (1, 1));

        let robbed = Counts::of_section(&row(300, "nothing_deleted", 400), StaleRule::Reply);
        assert_eq!((robbed.deleted_by_other, robbed.stale_releases), (1, 0));

        // Sent 50 µs before the TTL ran out, answered 50 µs after: the key may have expired
        // on the way, so the release is stale, not proof of another holder's delete.
        let in_flight = Counts::of_section(&row(850, "refused_expired", 950), StaleRule::Reply);
        assert_eq!(
            (in_flight.stale_releases, in_flight.deleted_by_other),
            (1, 0)
        );

        let failed = Counts::of_section(&row(300, "error_timeout", 400), StaleRule::Reply);
        assert_eq!((failed.release_errors, failed.released), (1, 0));
    }

    /// Live and plain counts add the same way; every field has a name and a definition.
    #[test]
    fn live_counts_add_like_plain_ones() {
        let live = LiveCounts::default();
        let mut plain = Counts::default();
        for r in [
            row(500, "released", 600),
            row(1_500, "wrongful_delete", 1_600),
        ] {
            let c = Counts::of_section(&r, StaleRule::Reply);
            live.add(&c);
            plain.add(&c);
        }
        assert_eq!(live.snapshot(), plain);
        for (name, doc, _) in Counts::FIELDS {
            assert!(plain.get(name).is_some(), "{name}");
            assert!(!doc.is_empty(), "{name}");
        }
    }
}
