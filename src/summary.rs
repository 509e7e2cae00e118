//! The reported figures of one variant, computed from what the recorder collected. Field names
//! are the design notes' terms in snake_case; `schema/summary.schema.json` describes them.

use crate::engine::recorder::{HistSet, Metric, Recorder};
use crate::overlap::OverlapStats;
use crate::store::ErrorKind;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

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
    /// Keys.
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
    /// Acquisition commands sent.
    pub attempts: u64,
    /// Successful acquisitions.
    pub sections: u64,
    /// Sections per second.
    pub throughput_per_s: f64,
    /// Sections with d > TTL.
    pub overruns: u64,
    /// overruns / sections.
    pub overrun_fraction: f64,
    /// Sum of the excesses d − TTL over all overruns, ms.
    pub excess_total_ms: f64,
    /// Releases sent after the holder's key expired at the server (its TTL had run out since
    /// the `SET` was sent, and the key no longer held the holder's token).
    pub stale_releases: u64,
    /// Stale releases of sections with d ≤ TTL.
    pub stale_without_overrun: u64,
    /// Releases that found the key gone before it could have expired: deleted by another
    /// holder's naive `DEL` (only possible with `del`).
    pub deleted_by_other: u64,
    /// Token-checked releases that deleted nothing.
    pub refused_releases: u64,
    /// … because the key had expired.
    pub refused_expired: u64,
    /// … because another holder's token was there.
    pub refused_held_by_other: u64,
    /// … class unknown (`delex`).
    pub refused_unclassified: u64,
    /// `del` releases that removed another holder's lock.
    pub wrongful_deletes: u64,
    /// `del` releases that found no key.
    pub nothing_deleted: u64,
    /// Releases that deleted the holder's own lock.
    pub released: u64,
    /// Time with ≥ 2 holders, summed over keys, ms.
    pub overlap_ms: f64,
    /// Sections that began while another of the same key was open.
    pub overlap_incidents: u64,
    /// Most simultaneous holders of one key.
    pub peak_holders: u32,
    /// Attempts refused because the lock was busy (fail-fast).
    pub rejections: u64,
    /// Busy replies followed by a retry.
    pub retries: u64,
    /// Acquisitions abandoned after the max wait (retry policy).
    pub acquire_giveups: u64,
    /// Sections cut short by Ctrl-C or the end-of-run grace period.
    pub interrupted: u64,
    /// Failed commands.
    pub errors: u64,
    /// Failed commands by kind.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// First message of each error kind.
    pub first_errors: BTreeMap<String, String>,
    /// Why the variant stopped.
    #[serde(default)]
    pub stop_reason: StopReason,
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
    /// Overlap per key (keys where two sections overlapped).
    pub per_key: Vec<KeyOverlap>,
    /// Theoretical overrun probability next to the measured fraction (parametric
    /// distributions only).
    pub analytic: Option<crate::analytic::AnalyticCheck>,
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

/// Facts about a variant that the recorder does not know.
#[derive(Debug, Clone)]
pub struct Meta {
    /// Variant name.
    pub variant: String,
    /// Release method.
    pub release: String,
    /// Connection mode.
    pub connection_mode: String,
    /// Backend description.
    pub backend: String,
    /// Server version.
    pub server_version: String,
    /// Workers.
    pub workers: usize,
    /// TTL, ms.
    pub ttl_ms: u64,
    /// Time scale.
    pub time_scale: f64,
    /// Unscaled TTL, ms.
    pub unscaled_ttl_ms: f64,
    /// Seed.
    pub seed: u64,
    /// Wall time, s.
    pub elapsed_s: f64,
    /// Why it stopped.
    pub stop_reason: StopReason,
}

/// Builds the summary from a finished recorder and its drained histograms.
pub fn summarize(meta: Meta, rec: &Recorder, hists: &HistSet) -> Summary {
    let c = &rec.counters;
    let g = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
    let (per_key, all): (Vec<OverlapStats>, OverlapStats) = rec.overlap();
    let sections = g(&c.sections);
    let overruns = g(&c.overruns);
    let refused = g(&c.refused_expired) + g(&c.refused_held_by_other) + g(&c.refused_unclassified);
    let q = |m: Metric| Quantiles::of(hists.get(m));
    Summary {
        variant: meta.variant,
        release: meta.release,
        connection_mode: meta.connection_mode,
        backend: meta.backend,
        server_version: meta.server_version,
        workers: meta.workers,
        keys: per_key.len(),
        ttl_ms: meta.ttl_ms,
        time_scale: meta.time_scale,
        unscaled_ttl_ms: meta.unscaled_ttl_ms,
        seed: meta.seed,
        elapsed_s: meta.elapsed_s,
        attempts: g(&c.attempts),
        sections,
        throughput_per_s: if meta.elapsed_s > 0.0 {
            sections as f64 / meta.elapsed_s
        } else {
            0.0
        },
        overruns,
        excess_total_ms: g(&c.excess_total_us) as f64 / 1000.0,
        overrun_fraction: if sections > 0 {
            overruns as f64 / sections as f64
        } else {
            0.0
        },
        stale_releases: g(&c.stale_releases),
        stale_without_overrun: g(&c.stale_without_overrun),
        deleted_by_other: g(&c.deleted_by_other),
        refused_releases: refused,
        refused_expired: g(&c.refused_expired),
        refused_held_by_other: g(&c.refused_held_by_other),
        refused_unclassified: g(&c.refused_unclassified),
        wrongful_deletes: g(&c.wrongful_deletes),
        nothing_deleted: g(&c.nothing_deleted),
        released: g(&c.released),
        overlap_ms: all.overlap_us as f64 / 1000.0,
        overlap_incidents: all.incidents,
        peak_holders: all.peak_holders,
        rejections: g(&c.rejections),
        retries: g(&c.retries),
        acquire_giveups: g(&c.acquire_giveups),
        interrupted: g(&c.interrupted),
        errors: c.total_errors(),
        errors_by_kind: ErrorKind::ALL
            .iter()
            .map(|k| (k.name().to_string(), c.errors(*k)))
            .collect(),
        first_errors: rec
            .first_errors()
            .into_iter()
            .map(|(k, m)| (k.name().to_string(), m))
            .collect(),
        stop_reason: meta.stop_reason,
        outages: {
            let o = rec.outages();
            o.ended + u64::from(o.open_at_end)
        },
        outage_ms: rec.outages().total_us as f64 / 1000.0,
        duration_ms: q(Metric::Duration),
        intended_ms: q(Metric::Intended),
        timer_error_ms: q(Metric::TimerError),
        excess_ms: q(Metric::Excess),
        acquire_latency_ms: q(Metric::AcquireLatency),
        set_latency_ms: q(Metric::SetLatency),
        release_latency_ms: q(Metric::ReleaseLatency),
        overlap_stretch_ms: q(Metric::OverlapStretch),
        per_key: per_key
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
    }
}
