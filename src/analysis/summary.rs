//! The reported figures of one variant, computed from plain values ([`Measured`]) — what
//! the recorder collected, or hand-built data in tests. Field names are the design notes'
//! terms in snake_case; `schema/summary.schema.json` describes them.

use crate::analysis::counts::{Counts, NOT_RECORDED};
use crate::analysis::overlap::OverlapStats;
use crate::model::error::ErrorKind;
use crate::model::release::StaleRule;
use crate::model::variant::Fencing;
use crate::record::{HistSet, Metric, Outages};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Percentiles of a recorded distribution, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Number of values.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest value.
    pub max: f64,
}

impl Quantiles {
    /// From a µs histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// Overlap figures of one key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KeyOverlap {
    /// Key index.
    pub key: usize,
    /// Time with two or more holders, ms.
    pub overlap_ms: f64,
    /// Sections that began while another was open.
    pub overlap_incidents: u64,
    /// Most simultaneous holders.
    pub peak_holders: u32,
    /// When two holders first overlapped on this key, ms since the variant started.
    #[serde(default)]
    pub first_overlap_ms: Option<f64>,
}

/// Summary of one variant (one release method) of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// What ran, on what, with which settings (flattened: the head of summary.json).
    #[serde(flatten)]
    pub meta: Meta,
    /// Which instant of a release decided stale vs deleted by another (older summaries: the
    /// send time).
    #[serde(default = "send_rule")]
    pub stale_rule: StaleRule,
    /// The counted figures (flattened: each is a field of summary.json).
    #[serde(flatten)]
    pub counts: Counts,
    /// Sections per second.
    pub throughput_per_s: f64,
    /// overruns / sections.
    pub overrun_fraction: f64,
    /// Sum of the excesses d − TTL over all overruns, ms.
    pub excess_total_ms: f64,
    /// Token-checked releases that deleted nothing.
    pub refused_releases: u64,
    /// Time with ≥ 2 holders, summed over keys, ms.
    pub overlap_ms: f64,
    /// Sections that began while another of the same key was open.
    pub overlap_incidents: u64,
    /// Most simultaneous holders of one key.
    pub peak_holders: u32,
    /// Failed commands.
    pub errors: u64,
    /// Failed commands by kind.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// First message of each error kind.
    pub first_errors: BTreeMap<String, String>,
    /// Why the variant stopped.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// The `fail_if` conditions and their verdicts on this variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Crossing>,
    /// What protected the resource (flattened into summary.json).
    #[serde(flatten)]
    pub protect: Protection,
    /// Total length of the holders' pauses, ms.
    #[serde(default)]
    pub pause_total_ms: f64,
    /// Accepted writes whose effect is not in the final value: writes_accepted −
    /// (final − initial), the initial value being 0.
    #[serde(default)]
    pub lost_updates: u64,
    /// Stretches in which the server could not be reached (connection or timeout errors),
    /// each from its first failure to the next successful command.
    #[serde(default)]
    pub outages: u64,
    /// Their total length, ms (one still open at the end counts up to the end).
    #[serde(default)]
    pub outage_ms: f64,
    /// Measured section durations.
    pub duration_ms: Quantiles,
    /// Intended durations drawn from the distribution.
    pub intended_ms: Quantiles,
    /// Measured minus intended duration.
    pub timer_error_ms: Quantiles,
    /// Excess over the TTL of overruns.
    pub excess_ms: Quantiles,
    /// First attempt → acquisition.
    pub acquire_latency_ms: Quantiles,
    /// `SET NX PX` round trip.
    pub set_latency_ms: Quantiles,
    /// Release command round trip.
    pub release_latency_ms: Quantiles,
    /// Length of stretches with ≥ 2 holders.
    pub overlap_stretch_ms: Quantiles,
    /// Per crashed holder, how long its key stayed blocked: crash → expiry → next
    /// acquisition (0 when its lock had already expired; up to the variant's end for keys
    /// nobody acquired again, see `crash_blocked_censored`).
    #[serde(default)]
    pub crash_blocked_ms: Quantiles,
    /// Open arrival model: from each request's intended arrival to its end (served, refused
    /// or failed), so time spent waiting behind a stalled server counts.
    #[serde(default)]
    pub request_latency_ms: Quantiles,
    /// Crashed holders whose key nobody acquired again before the variant ended (their
    /// blocked time is a lower bound).
    #[serde(default)]
    pub crash_blocked_censored: u64,
    /// Keys without an expiry at the variant's end, read at the server (`PTTL` −1): locks a
    /// holder left between `SETNX` and `EXPIRE`. The run's cleanup still removes them.
    #[serde(default)]
    pub stuck_locks: u64,
    /// The binary of the server this variant ran on, when lockbench started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_binary: Option<String>,
    /// A simulated run: `elapsed_s` is simulated time; this says how long it took and what
    /// the model was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<SimFigures>,
    /// Redlock runs: what the quorum did (failed quorums, per-instance errors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redlock: Option<crate::quorum::RedlockFigures>,
    /// A lock library's variant: its package and version (`redis 8.2.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// A lock library's variant: where its wrongful deletes (and its releases' outcomes) come
    /// from — the server, through each holder's driver's tap (`server (GETDEL through the
    /// driver's tap)`) or lockbench's watch of each holder on the wire (`server (GETDEL through
    /// lockbench's watch)`), or the timeline (`timeline (why)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrongful_deletes_source: Option<String>,
    /// A watched library's variant: what the holders' watches saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchFigures>,
    /// The fault windows as they happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::model::fault::FaultWindow>,
    /// Overlap per key (keys where two sections overlapped).
    pub per_key: Vec<KeyOverlap>,
    /// Theoretical overrun probability next to the measured fraction (parametric
    /// distributions only).
    pub analytic: Option<crate::analytic::AnalyticCheck>,
    /// On a Redis Cluster: the figures of each shard (empty for one server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardFigures>,
}

/// What the watches between a library's holders and the server saw (`crate::faults::watch`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchFigures {
    /// `DEL`s of a run's key sent as `GETDEL`.
    pub getdels: u64,
    /// Of them, removals no release of lockbench's asked for (an acquisition the library
    /// made after lockbench gave up on it, released by the library at once).
    pub removals_outside_releases: u64,
    /// Wrongful deletes, whose lock was deleted by whom (the first 1000).
    pub attributed: Vec<AttributedDelete>,
    /// How the library's holders were watched: `driver tap` (inside each driver process, the
    /// default for driver processes), or on the wire through `unix socket` (a driver
    /// process's with `LOCKBENCH_WATCH=wire`, unless `LOCKBENCH_WATCH_SOCKET=tcp` or the
    /// temporary directory's path is too long for one) or `loopback tcp` (rslock); absent for
    /// `lockbench observe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached_by: Option<String>,
}

/// A wrongful delete attributed at the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributedDelete {
    /// The holder (worker) whose `DEL` removed the lock.
    pub deleter: usize,
    /// The holder that had set the value removed (`null`: a value no holder of this process
    /// set).
    pub victim: Option<usize>,
    /// The lock's key.
    pub key: String,
    /// When the server's reply reached the watch, ms on lockbench's clock.
    pub at_ms: f64,
}

/// A threshold's verdict on one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crossing {
    /// The condition as written.
    pub expr: String,
    /// The figure's value in this variant.
    pub value: f64,
    /// Whether the condition held (the gate failed).
    pub crossed: bool,
}

/// One shard of a Redis Cluster as a variant saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardFigures {
    /// By the order of its first slot (the `shard` of a `failover` fault).
    pub shard: usize,
    /// Its master when the run began, `host:port`.
    pub master: String,
    /// Hash slots it serves.
    pub slots: u32,
    /// The variant's lock keys whose slot it serves.
    pub keys: usize,
    /// Of those, keys acquired at least once.
    pub keys_used: usize,
    /// Overlap time on its keys, ms.
    pub overlap_ms: f64,
    /// Sections on its keys that began while another was open.
    pub overlap_incidents: u64,
    /// Locks lost in its failovers (acknowledged, absent on the promoted replica).
    pub locks_lost: u64,
}

/// Per-shard figures: `key_slot(k)` gives each key's slot; overlap comes from `per_key`, lost
/// locks from the `failover` windows.
pub(crate) fn shard_figures(
    shards: &[crate::model::shards::Shard],
    keys: usize,
    mut key_slot: impl FnMut(usize) -> u16,
    used: &[usize],
    per_key: &[KeyOverlap],
    faults: &[crate::model::fault::FaultWindow],
) -> Vec<ShardFigures> {
    let mut owner = vec![usize::MAX; keys];
    for (k, o) in owner.iter_mut().enumerate() {
        let slot = key_slot(k);
        if let Some(i) = shards.iter().position(|s| s.owns(slot)) {
            *o = i;
        }
    }
    let mut out: Vec<ShardFigures> = shards
        .iter()
        .enumerate()
        .map(|(i, s)| ShardFigures {
            shard: i,
            master: s.master.clone(),
            slots: s.slots(),
            keys: owner.iter().filter(|&&o| o == i).count(),
            keys_used: used.iter().filter(|&&k| owner.get(k) == Some(&i)).count(),
            overlap_ms: 0.0,
            overlap_incidents: 0,
            locks_lost: 0,
        })
        .collect();
    for k in per_key {
        if let Some(f) = owner.get(k.key).and_then(|&o| out.get_mut(o)) {
            f.overlap_ms += k.overlap_ms;
            f.overlap_incidents += k.overlap_incidents;
        }
    }
    for l in faults.iter().filter_map(|w| w.failover.as_ref()) {
        if let Some(f) = out.get_mut(l.shard) {
            f.locks_lost += l.locks_lost;
        }
    }
    out
}

fn send_rule() -> StaleRule {
    StaleRule::Send
}

/// Why a variant stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It reached its length or its section count.
    #[default]
    Limit,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// Commands kept failing, none succeeding, for the profile's `give_up_after`.
    GaveUp,
}

impl StopReason {
    /// The name used in every output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Limit => "limit",
            Self::Interrupted => "interrupted",
            Self::GaveUp => "gave_up",
        }
    }
}

/// Facts about a variant that the recorder does not know: what ran, on what, with which
/// settings. The head of its summary (flattened into [`Summary`], field for field).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Variant name (the release method).
    pub variant: String,
    /// Release method.
    pub release: String,
    /// `per-worker` or `shared`.
    pub connection_mode: String,
    /// Backend description (no password).
    pub backend: String,
    /// Server name and version.
    pub server_version: String,
    /// Workers.
    pub workers: usize,
    /// Keys ([`summarize`] sets it: the keys measured).
    pub keys: usize,
    /// TTL, ms.
    pub ttl_ms: u64,
    /// Factor applied to every duration of the workload (1 = unscaled).
    pub time_scale: f64,
    /// The TTL in real (unscaled) units, ms.
    pub unscaled_ttl_ms: f64,
    /// Seed.
    pub seed: u64,
    /// Wall time of the variant, s.
    pub elapsed_s: f64,
}

/// What a variant did for the resource its lock protects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Protection {
    /// Sections read-modify-write a resource.
    #[serde(default)]
    pub resource: bool,
    /// What the resource checked.
    #[serde(default)]
    pub fencing: Fencing,
    /// Interval of lease extension, ms (0: no extension).
    #[serde(default)]
    pub extend_every_ms: f64,
    /// The extension command that ran: `script` or `set-ifeq` (`null`: no extension).
    #[serde(default)]
    pub extend_with: Option<crate::model::release::ExtendCommand>,
    /// Sum over keys of the resource's final value, read back from the server
    /// ([`NOT_RECORDED`] when the read-back failed or was abandoned: lost updates unknown).
    #[serde(default)]
    pub resource_final: u64,
}

/// What a variant measured, as plain values: the recorder's snapshot, or hand-built in tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// The counted figures.
    pub counts: Counts,
    /// Failed commands by kind, and the first message of each kind.
    pub errors: Vec<(ErrorKind, u64, Option<String>)>,
    /// Overlap per key, index = key number.
    pub per_key: Vec<OverlapStats>,
    /// The outages seen.
    pub outages: Outages,
}

impl Measured {
    /// Adds what `other` measured: another part of the same run (`sim_parallel`), on keys of
    /// the same numbers.
    pub fn merge(&mut self, other: &Measured) {
        self.counts.add(&other.counts);
        for (mine, theirs) in self.errors.iter_mut().zip(&other.errors) {
            mine.1 += theirs.1;
            if mine.2.is_none() {
                mine.2.clone_from(&theirs.2);
            }
        }
        for (mine, theirs) in self.per_key.iter_mut().zip(&other.per_key) {
            mine.merge(theirs);
        }
        self.outages.ended += other.outages.ended;
        self.outages.total_us += other.outages.total_us;
        self.outages.open_at_end |= other.outages.open_at_end;
    }
}

impl Summary {
    /// The summary of a variant that measured nothing: every field there, each at its empty
    /// value (the names a gate may read; the tests' starting point).
    pub fn empty() -> Summary {
        summarize(
            Meta::default(),
            StopReason::default(),
            Protection::default(),
            &Measured::default(),
            &HistSet::default(),
        )
    }
}

/// Builds the summary of one variant from what it measured and its histograms.
pub(crate) fn summarize(
    meta: Meta,
    stop_reason: StopReason,
    protect: Protection,
    m: &Measured,
    hists: &HistSet,
) -> Summary {
    let c = m.counts;
    let mut all = OverlapStats::default();
    for k in &m.per_key {
        all.merge(k);
    }
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let q = |metric: Metric| Quantiles::of(hists.get(metric));
    let elapsed_s = meta.elapsed_s;
    Summary {
        meta: Meta {
            keys: m.per_key.len(),
            ..meta
        },
        stale_rule: StaleRule::Reply,
        counts: c,
        throughput_per_s: ratio(c.sections as f64, elapsed_s),
        overrun_fraction: ratio(c.overruns as f64, c.sections as f64),
        excess_total_ms: c.excess_total_us as f64 / 1000.0,
        refused_releases: c.refused_releases(),
        overlap_ms: all.overlap_us as f64 / 1000.0,
        overlap_incidents: all.incidents,
        peak_holders: all.peak_holders,
        errors: m.errors.iter().map(|(_, n, _)| n).sum(),
        errors_by_kind: m
            .errors
            .iter()
            .map(|(k, n, _)| (k.name().to_string(), *n))
            .collect(),
        first_errors: m
            .errors
            .iter()
            .filter_map(|(k, _, first)| Some((k.name().to_string(), first.clone()?)))
            .collect(),
        stop_reason,
        thresholds: Vec::new(),
        protect,
        lost_updates: match protect.resource_final {
            NOT_RECORDED => NOT_RECORDED,
            f => c.writes_accepted.saturating_sub(f),
        },
        pause_total_ms: c.pause_total_us as f64 / 1000.0,
        outages: m.outages.ended + u64::from(m.outages.open_at_end),
        outage_ms: m.outages.total_us as f64 / 1000.0,
        duration_ms: q(Metric::Duration),
        intended_ms: q(Metric::Intended),
        timer_error_ms: q(Metric::TimerError),
        excess_ms: q(Metric::Excess),
        acquire_latency_ms: q(Metric::AcquireLatency),
        set_latency_ms: q(Metric::SetLatency),
        release_latency_ms: q(Metric::ReleaseLatency),
        overlap_stretch_ms: q(Metric::OverlapStretch),
        crash_blocked_ms: q(Metric::CrashBlocked),
        request_latency_ms: q(Metric::RequestLatency),
        crash_blocked_censored: 0,
        stuck_locks: 0,
        faults: Vec::new(),
        server_binary: None,
        simulated: None,
        redlock: None,
        library: None,
        wrongful_deletes_source: None,
        watch: None,
        per_key: m
            .per_key
            .iter()
            .enumerate()
            // Only keys that saw an overlap: with many keys the rest would drown the file.
            .filter(|(_, s)| s.incidents > 0)
            .map(|(key, s)| KeyOverlap {
                key,
                overlap_ms: s.overlap_us as f64 / 1000.0,
                overlap_incidents: s.incidents,
                peak_holders: s.peak_holders,
                first_overlap_ms: s.first_overlap_us.map(|t| t as f64 / 1000.0),
            })
            .collect(),
        analytic: None,
        shards: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            variant: "token".into(),
            release: "token".into(),
            connection_mode: "per-worker".into(),
            backend: "memory".into(),
            server_version: "memory".into(),
            workers: 2,
            ttl_ms: 10,
            time_scale: 1.0,
            unscaled_ttl_ms: 10.0,
            seed: 1,
            elapsed_s: 2.0,
            keys: 0,
        }
    }

    /// Every derived figure follows from hand-built counts: fractions, sums, the merged
    /// overlap of two keys, errors by kind with their first messages, outages.
    #[test]
    fn derived_figures_from_hand_built_data() {
        let key = |overlap_us, incidents, peak_holders| OverlapStats {
            overlap_us,
            incidents,
            peak_holders,
            ..OverlapStats::default()
        };
        let m = Measured {
            counts: Counts {
                sections: 200,
                overruns: 50,
                excess_total_us: 12_500,
                refused_expired: 3,
                refused_held_by_other: 4,
                ..Counts::default()
            },
            errors: vec![
                (ErrorKind::Timeout, 5, Some("timed out".into())),
                (ErrorKind::Server, 0, None),
            ],
            per_key: vec![key(1_500, 2, 2), key(0, 0, 1), key(2_500, 3, 3)],
            outages: Outages {
                ended: 1,
                total_us: 4_000,
                open_at_end: true,
            },
        };
        let s = summarize(
            meta(),
            StopReason::Limit,
            Protection::default(),
            &m,
            &HistSet::default(),
        );
        assert_eq!(s.throughput_per_s, 100.0);
        assert_eq!(s.overrun_fraction, 0.25);
        assert_eq!(s.excess_total_ms, 12.5);
        assert_eq!(s.refused_releases, 7);
        assert_eq!(
            (s.overlap_ms, s.overlap_incidents, s.peak_holders),
            (4.0, 5, 3)
        );
        assert_eq!(s.meta.keys, 3);
        assert_eq!(s.per_key.len(), 2, "only keys that overlapped");
        assert_eq!(s.errors, 5);
        assert_eq!(s.errors_by_kind["timeout"], 5);
        assert_eq!(s.first_errors.len(), 1);
        assert_eq!((s.outages, s.outage_ms), (2, 4.0));
    }

    /// No section: fractions are 0, not NaN.
    #[test]
    fn empty_run_has_zero_fractions() {
        let s = summarize(
            meta(),
            StopReason::Limit,
            Protection::default(),
            &Measured::default(),
            &HistSet::default(),
        );
        assert_eq!((s.overrun_fraction, s.counts.sections), (0.0, 0));
        let s = summarize(
            Meta {
                elapsed_s: 0.0,
                ..meta()
            },
            StopReason::Limit,
            Protection::default(),
            &Measured::default(),
            &HistSet::default(),
        );
        assert_eq!(s.throughput_per_s, 0.0);
    }
}

fn one_part() -> usize {
    1
}

/// How a simulated variant ran ([`Summary::simulated`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SimFigures {
    /// Wall time the simulation took, s.
    pub wall_s: f64,
    /// Simulated seconds per wall second.
    pub simulated_s_per_wall_s: f64,
    /// Events the executor processed (task wake-ups).
    pub events: u64,
    /// Events per wall second.
    pub events_per_wall_s: f64,
    /// Parts the run was cut into and simulated at once (`sim_parallel`; 1: one piece).
    #[serde(default = "one_part")]
    pub parts: usize,
    /// The round-trip distribution of a command, as given.
    pub round_trip: String,
    /// The simulated server's time per command, µs.
    pub service_us: u64,
    /// How late a simulated timer fires, as given.
    pub timer: String,
}
