//! The one table of reported figures. The terminal table, `summary.csv`, `report.html` and the
//! recount in `lockbench report` follow it; `summary.json` holds every figure under its name
//! (a test checks all of these against the table, and the schema too).
//!
//! The counted figures come straight from [`Counts::FIELDS`], so a new counter is one line in
//! `counts.rs`; a derived figure is one entry in [`DERIVED`].

use crate::analysis::counts::{Counts, NOT_RECORDED, Recount};
use crate::analysis::summary::Summary;

/// How a figure's value reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A whole number of things.
    Count,
    /// Milliseconds.
    Ms,
    /// A fraction 0–1, shown as a percentage.
    Fraction,
    /// Per second.
    PerSecond,
    /// A word.
    Text,
}

/// How `lockbench report` checks a figure against `events.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Recounted from the rows (the same counting function as the live run).
    Rows,
    /// Recomputed from the rows' intervals (exact overlap).
    Overlap,
    /// Follows from recounted counts.
    FromCounts,
    /// Not in the rows; the reason.
    No(&'static str),
}

/// One reported figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Name in `summary.json` and column of `summary.csv`.
    pub name: &'static str,
    /// Label of its row in the terminal table and `report.html`.
    pub label: String,
    /// How its value reads.
    pub unit: Unit,
    /// What it means.
    pub definition: &'static str,
    /// How `lockbench report` checks it.
    pub check: Check,
    /// Shown in the terminal table (every figure is in the files and the HTML).
    pub terminal: bool,
    /// Which part of a run it is about: tables show a group only when a variant has it.
    pub group: Group,
    value: fn(&Summary, &str) -> String,
}

/// What a figure is about, so tables leave out what no variant did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Every run.
    Lock,
    /// The protected resource (writes, fencing, lost updates).
    Resource,
    /// Lease extension.
    Extension,
    /// Holder pauses.
    Pause,
    /// Requests when Redis did not answer (fail-open / fail-closed).
    Unavailable,
    /// Holders that died without releasing.
    Crash,
    /// The open arrival model.
    Arrivals,
}

impl Group {
    /// Whether `s` has any of this group.
    pub fn present(self, s: &Summary) -> bool {
        match self {
            Group::Lock => true,
            Group::Resource => s.protect.resource,
            Group::Extension => s.protect.extend_every_ms > 0.0,
            Group::Pause => s.counts.pauses > 0 && s.counts.pauses != NOT_RECORDED,
            Group::Unavailable => [s.counts.unlocked_sections, s.counts.refused_unavailable]
                .iter()
                .any(|&n| n > 0 && n != NOT_RECORDED),
            // Stuck locks are read without a crash too (a library, the user's own script).
            Group::Crash => {
                (s.counts.crashes > 0 && s.counts.crashes != NOT_RECORDED)
                    || Needs::StuckLockRead.met(s)
            }
            Group::Arrivals => s.counts.requests > 0 && s.counts.requests != NOT_RECORDED,
        }
    }

    fn of(name: &str) -> Group {
        match name {
            "resource_writes"
            | "writes_accepted"
            | "unsafe_writes_accepted"
            | "unsafe_writes_over_holder"
            | "writes_rejected_fenced"
            | "reads_rejected_fenced"
            | "lost_updates" => Group::Resource,
            "extensions" | "extension_failures" | "sections_aborted" => Group::Extension,
            "pauses" | "pause_total_us" | "pause_total_ms" => Group::Pause,
            "unlocked_sections" | "refused_unavailable" => Group::Unavailable,
            "crashes" | "stuck_locks" | "crash_blocked_censored" => Group::Crash,
            "requests" | "late_arrivals" | "dropped_arrivals" => Group::Arrivals,
            _ => Group::Lock,
        }
    }
}

impl Figure {
    /// Its value in `s`, as the files write it.
    pub fn value(&self, s: &Summary) -> String {
        (self.value)(s, self.name)
    }

    /// Whether `s` measured it ([`measured`]).
    pub fn measured(&self, s: &Summary) -> bool {
        measured(s, self.name)
    }
}

/// What a run must have done for a figure to be measured at all. Most figures are counted in
/// every run (0 when nothing happened); these are read or counted only with a setting, and
/// read 0 without it — a 0 that says nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Counted in every run.
    Nothing,
    /// A protected resource: its writes, fencing and lost updates.
    Resource,
    /// Lease extension.
    Extension,
    /// A read of the locks' expiries at the variant's end: done where a lock may be left
    /// without one ([`reads_stuck_locks`]).
    StuckLockRead,
    /// Holders that crash: how long their keys stayed blocked.
    Crashes,
    /// lockbench's own Redlock: its quorum figures.
    Redlock,
}

impl Needs {
    /// What figure `path` (`stuck_locks`, `duration_ms.p99`, `redlock.failed_quorums`) needs.
    pub fn of(path: &str) -> Needs {
        let top = path.split('.').next().unwrap_or(path);
        match top {
            "stuck_locks" => Needs::StuckLockRead,
            "crash_blocked_ms" | "crash_blocked_censored" => Needs::Crashes,
            "redlock" => Needs::Redlock,
            _ => match Group::of(top) {
                Group::Resource => Needs::Resource,
                Group::Extension => Needs::Extension,
                _ => Needs::Nothing,
            },
        }
    }

    /// Whether summary `s` had it.
    pub fn met(self, s: &Summary) -> bool {
        let counted = |n: u64| n > 0 && n != NOT_RECORDED;
        match self {
            Needs::Nothing => true,
            Needs::Resource => s.protect.resource,
            Needs::Extension => s.protect.extend_every_ms > 0.0,
            Needs::StuckLockRead => reads_stuck_locks(
                counted(s.counts.crashes),
                s.library.is_some(),
                s.library.is_none()
                    && s.meta.release == crate::model::release::ReleaseMethod::Script.name(),
            ),
            Needs::Crashes => counted(s.counts.crashes),
            Needs::Redlock => s.redlock.is_some(),
        }
    }

    /// The setting that measures it, for a message: `resource = true (--resource)`.
    pub fn setting(self) -> &'static str {
        match self {
            Needs::Nothing => "any run",
            Needs::Resource => "a protected resource: resource = true (--resource)",
            Needs::Extension => "lease extension: a variant with +extend (extend, --extend)",
            Needs::StuckLockRead => {
                "a run that can leave a lock without an expiry: holder crashes (crash_between, \
                 --crash-between, or a holder-crash fault), a lock library (--client) or your \
                 own script (--release script)"
            }
            Needs::Crashes => {
                "holder crashes: crash_between (--crash-between) or a holder-crash fault"
            }
            Needs::Redlock => "lockbench's Redlock: lock = \"redlock\" (--lock redlock)",
        }
    }
}

/// Whether the locks' expiries are read at a variant's end (what stuck locks count): after a
/// holder crashed between `SETNX` and `EXPIRE`, or for a lock library or the user's own
/// script, which may take or re-arm a lock without one. The runner decides with it whether to
/// read, and every writer through [`measured`] whether the count means anything.
pub fn reads_stuck_locks(crashed: bool, library: bool, own_script: bool) -> bool {
    crashed || library || own_script
}

/// Whether summary `s` measured figure `path` (`lost_updates`, `duration_ms.p99`): the one
/// answer the terminal tables, `--summary-md`, `--junit`, `report.html` and the gates read, so
/// none shows `-` beside a gate that read a number, or a number where nothing was measured.
pub fn measured(s: &Summary, path: &str) -> bool {
    Needs::of(path).met(s)
}

fn count(s: &Summary, name: &str) -> String {
    match s.counts.get(name) {
        Some(NOT_RECORDED) | None => "n/a".to_string(),
        Some(n) => n.to_string(),
    }
}

/// A number as the files write it: up to 6 decimals, no trailing zeros.
pub fn num(x: f64) -> String {
    let t = format!("{x:.6}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

type Derived = (
    &'static str,
    &'static str,
    Unit,
    Check,
    &'static str,
    fn(&Summary, &str) -> String,
);

/// Figures computed from others: (name, label, unit, check, definition, value).
pub const DERIVED: &[Derived] = &[
    (
        "throughput_per_s",
        "throughput",
        Unit::PerSecond,
        Check::No("wall time is not in the rows"),
        "sections per second of wall time",
        |s, _| num(s.throughput_per_s),
    ),
    (
        "overrun_fraction",
        "overrun fraction",
        Unit::Fraction,
        Check::FromCounts,
        "overruns / sections",
        |s, _| num(s.overrun_fraction),
    ),
    (
        "excess_total_ms",
        "total excess",
        Unit::Ms,
        Check::FromCounts,
        "sum of the excesses d − TTL over all overruns",
        |s, _| num(s.excess_total_ms),
    ),
    (
        "refused_releases",
        "refused releases",
        Unit::Count,
        Check::FromCounts,
        "token-checked releases that deleted nothing (expired + held by other + unclassified)",
        |s, _| s.refused_releases.to_string(),
    ),
    (
        "overlap_ms",
        "overlap time",
        Unit::Ms,
        Check::Overlap,
        "per key, the time during which two or more sections were open, summed over keys",
        |s, _| num(s.overlap_ms),
    ),
    (
        "overlap_incidents",
        "overlap incidents",
        Unit::Count,
        Check::Overlap,
        "sections that began while another section of the same key was open",
        |s, _| s.overlap_incidents.to_string(),
    ),
    (
        "peak_holders",
        "peak holders",
        Unit::Count,
        Check::Overlap,
        "the largest number of simultaneous holders of one key",
        |s, _| s.peak_holders.to_string(),
    ),
    (
        "lost_updates",
        "lost updates",
        Unit::Count,
        Check::FromCounts,
        "accepted writes − (final value − initial value), the final value read back from the server",
        |s, _| match s.lost_updates {
            NOT_RECORDED => "n/a".to_string(),
            n => n.to_string(),
        },
    ),
    (
        "pause_total_ms",
        "pause time",
        Unit::Ms,
        Check::FromCounts,
        "total length of the holders' stop-the-world pauses",
        |s, _| num(s.pause_total_ms),
    ),
    (
        "stuck_locks",
        "stuck locks",
        Unit::Count,
        Check::No("read at the server: keys without an expiry at the variant's end"),
        "locks left without an expiry (PTTL −1) at the variant's end: holders that died between SETNX and EXPIRE, or locks a library or your own script took or re-armed without one (read only in such variants: `-` in others)",
        |s, _| match s.stuck_locks {
            NOT_RECORDED => "n/a".to_string(),
            n => n.to_string(),
        },
    ),
    (
        "crash_blocked_censored",
        "crashed keys never reacquired",
        Unit::Count,
        Check::No("the blocked times are histogram values, not rows"),
        "crashed holders whose key nobody acquired again before the variant ended (their blocked time in crash_blocked_ms is a lower bound)",
        |s, _| s.crash_blocked_censored.to_string(),
    ),
    (
        "errors",
        "errors",
        Unit::Count,
        Check::No("failed acquisitions have no row"),
        "failed commands (timeout, connection, server, other, abandoned)",
        |s, _| s.errors.to_string(),
    ),
    (
        "outages",
        "outages",
        Unit::Count,
        Check::No("outages span commands, not sections"),
        "stretches in which the server could not be reached, each from its first failure to the next success",
        |s, _| s.outages.to_string(),
    ),
    (
        "outage_ms",
        "outage time",
        Unit::Ms,
        Check::No("outages span commands, not sections"),
        "total length of the outages",
        |s, _| num(s.outage_ms),
    ),
    (
        "stop_reason",
        "stopped by",
        Unit::Text,
        Check::No("how the run ended is not a row"),
        "why the variant ended: limit, interrupted or gave_up",
        |s, _| s.stop_reason.name().to_string(),
    ),
];

/// Every reported figure: the counted ones, then the derived ones.
pub fn figures() -> Vec<Figure> {
    let counted = Counts::FIELDS
        .iter()
        .map(|(name, definition, recount)| Figure {
            name,
            label: name.replace('_', " "),
            unit: Unit::Count,
            definition,
            check: match recount {
                Recount::FromRows => Check::Rows,
                Recount::Live => Check::No("counted per attempt; attempts that failed have no row"),
            },
            // Sums kept for the recount, shown through their derived figure.
            terminal: !name.ends_with("_us") && *name != "release_errors",
            group: Group::of(name),
            value: count,
        });
    let derived = DERIVED
        .iter()
        .map(|&(name, label, unit, check, definition, value)| Figure {
            name,
            label: label.to_string(),
            unit,
            definition,
            check,
            terminal: true,
            group: Group::of(name),
            value,
        });
    counted.chain(derived).collect()
}

/// A figure's cell in the terminal table and `report.html`: the value with its unit.
pub fn cell(f: &Figure, s: &Summary) -> String {
    if !f.measured(s) {
        return "-".to_string();
    }
    let v = f.value(s);
    let x = v.parse::<f64>();
    match (f.unit, x) {
        (Unit::Ms, Ok(x)) => format!("{x:.3} ms"),
        (Unit::PerSecond, Ok(x)) => format!("{x:.0} /s"),
        (Unit::Fraction, Ok(x)) => format!("{:.4} %", x * 100.0),
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are unique, and every figure has a definition.
    #[test]
    fn names_are_unique_and_defined() {
        let all = figures();
        let mut names: Vec<&str> = all.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().all(|f| !f.definition.is_empty()));
    }

    /// Whether a figure was measured has one answer, which the table's cells, the verdict
    /// table and the gates all read (issue 40: a script's stuck lock was `-` in the tables and
    /// "crossed (1)" at the gate): stuck locks are measured for the user's own script and a
    /// library without a crash, not for lockbench's own release without one.
    #[test]
    fn measured_is_one_answer_for_every_writer() {
        use crate::analysis::summary::Summary;
        use crate::analysis::verdict_table::{State, VerdictTable};
        let mut s = Summary::empty();
        s.counts.sections = 3;
        s.counts.crashes = 0;
        s.stuck_locks = 1;
        let stuck = figures()
            .into_iter()
            .find(|f| f.name == "stuck_locks")
            .unwrap();
        let gate = "stuck_locks > 0"
            .parse::<crate::analysis::threshold::Threshold>()
            .unwrap();
        for (release, library, is_measured) in [
            ("script", None, true),
            ("token", Some("redis 6.0".to_string()), true),
            ("token", None, false),
        ] {
            s.meta.release = release.to_string();
            s.library = library;
            assert_eq!(measured(&s, "stuck_locks"), is_measured, "{release}");
            assert_eq!(stuck.group.present(&s), is_measured, "{release}");
            assert_eq!(cell(&stuck, &s) != "-", is_measured, "{release}");
            let row = &VerdictTable::new("r", std::slice::from_ref(&s), false, None).rows[0];
            assert_eq!(row.figures[3].state != State::NotMeasured, is_measured);
            assert_eq!(gate.check(&s).crossed, is_measured, "{release}");
        }
    }

    /// Numbers are written without trailing zeros.
    #[test]
    fn numbers_are_short() {
        assert_eq!(num(2.5), "2.5");
        assert_eq!(num(3.0), "3");
        assert_eq!(num(0.1234567), "0.123457");
    }
}
