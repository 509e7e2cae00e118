//! Recomputes from `events.csv` every summary figure the rows determine and compares it with
//! `summary.json`. The live run counted with atomics and tracked overlap under per-key mutexes;
//! the rows were streamed separately. Agreement shows nothing was lost or miscounted on either
//! side; a mismatch names the figure and both values.
//!
//! Recomputing the overlap figures exactly needs every section's interval (16 bytes a
//! section, [`KeyIntervals`]), so memory grows with the run's length. That is why only
//! `lockbench report DIR` runs this check; the charts drawn at the end of a run do not.

use super::run_dir::{EventScan, VariantEvents};
use crate::analysis::counts::{Counts, NOT_RECORDED, Recount};
use crate::analysis::overlap::{self, OverlapStats};
use crate::analysis::summary::{KeyOverlap, Quantiles, Summary};
use crate::record::EventRow;
use crate::results::SummaryFile;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// A summary figure that the events do not reproduce.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Variant.
    pub variant: String,
    /// Figure (summary field name).
    pub figure: String,
    /// Recomputed from `events.csv`.
    pub from_events: String,
    /// As `summary.json` has it.
    pub in_summary: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} is {} in summary.json but {} from events.csv",
            self.variant, self.figure, self.in_summary, self.from_events
        )
    }
}

/// Every key's `(acquired, released)` intervals, per variant: what the exact overlap
/// recomputation needs.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyIntervals {
    variants: Vec<(String, PerKey)>,
}

/// `(acquired, released)` of every section, by key.
type PerKey = BTreeMap<usize, Vec<(u64, u64)>>;

impl KeyIntervals {
    /// Adds one row's interval.
    pub(crate) fn add(&mut self, r: &EventRow) {
        let i = match self.variants.iter().position(|(n, _)| **n == *r.variant) {
            Some(i) => i,
            None => {
                self.variants.push((r.variant.to_string(), BTreeMap::new()));
                self.variants.len() - 1
            }
        };
        self.variants[i]
            .1
            .entry(r.key)
            .or_default()
            .push((r.acquired_us, r.released_us));
    }

    /// Overlap figures of `variant` per key (keys with a section) and merged, by
    /// [`overlap::compute`] — the same state machine the live tracker runs.
    pub(crate) fn overlap(&self, variant: &str) -> (Vec<(usize, OverlapStats)>, OverlapStats) {
        let mut all = OverlapStats::default();
        let per_key = self
            .variants
            .iter()
            .filter(|(n, _)| n == variant)
            .flat_map(|(_, keys)| keys)
            .map(|(&k, iv)| {
                let s = overlap::compute(iv).0;
                all.merge(&s);
                (k, s)
            })
            .collect();
        (per_key, all)
    }
}

/// Reads `events` once and compares every variant of `summary` with its rows; the rows of
/// `failed` (the variant the run failed in, which has no summary) are not compared.
pub(crate) fn check(
    summary: &SummaryFile,
    events: &Path,
    failed: Option<&str>,
) -> anyhow::Result<Vec<Mismatch>> {
    // Recount each variant with the rule its summary was counted with.
    let mut scan = EventScan {
        rules: summary
            .variants
            .iter()
            .map(|s| (s.meta.variant.clone(), s.stale_rule))
            .collect(),
        ..EventScan::default()
    };
    let mut intervals = KeyIntervals::default();
    crate::results::for_each_event(events, |r| {
        scan.add(r);
        intervals.add(r);
    })?;
    Ok(compare(summary, &scan, &intervals, failed))
}

/// Compares every variant of the summary with its rows (but `failed`'s, which has none).
pub(crate) fn compare(
    summary: &SummaryFile,
    scan: &EventScan,
    intervals: &KeyIntervals,
    failed: Option<&str>,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for s in &summary.variants {
        match scan.get(&s.meta.variant) {
            Some(v) => compare_variant(s, v, intervals, &mut out),
            None if s.counts.sections == 0 => {}
            None => out.push(Mismatch {
                variant: s.meta.variant.clone(),
                figure: "sections".into(),
                from_events: "no rows".into(),
                in_summary: s.counts.sections.to_string(),
            }),
        }
    }
    for v in &scan.variants {
        if !summary.variants.iter().any(|s| s.meta.variant == v.name) && failed != Some(&v.name) {
            out.push(Mismatch {
                variant: v.name.clone(),
                figure: "variant".into(),
                from_events: format!("{} rows", v.counts.sections),
                in_summary: "absent".into(),
            });
        }
    }
    out
}

/// Milliseconds (as the summary writes them) back to whole µs, so the comparison is exact on
/// integers rather than on decimal round trips of floats.
fn us(ms: f64) -> u64 {
    (ms * 1000.0).round() as u64
}

/// Compares one variant's summary with what its rows give, adding each disagreement to `out`.
fn compare_variant(
    s: &Summary,
    v: &VariantEvents,
    intervals: &KeyIntervals,
    out: &mut Vec<Mismatch>,
) {
    let mut check = Check {
        variant: &s.meta.variant,
        out,
    };
    compare_counts(s, v, &mut check);
    check.check(
        "excess_total_ms",
        format!("{} µs", v.counts.excess_total_us),
        format!("{} µs", us(s.excess_total_ms)),
    );
    let (per_key, all) = intervals.overlap(&v.name);
    compare_overlap(s, &per_key, &all, &mut check);
    compare_quantiles(s, v, &mut check);
}

/// Where a variant's disagreements go.
struct Check<'a> {
    variant: &'a str,
    out: &'a mut Vec<Mismatch>,
}

impl Check<'_> {
    /// Records `figure` when the rows' value and the summary's differ.
    fn check(&mut self, figure: &str, events: String, summary: String) {
        if events != summary {
            self.out.push(Mismatch {
                variant: self.variant.to_string(),
                figure: figure.to_string(),
                from_events: events,
                in_summary: summary,
            });
        }
    }
}

/// The counts the rows carry, the lost updates, the refused releases, Redlock's rounds, the TTL.
fn compare_counts(s: &Summary, v: &VariantEvents, check: &mut Check<'_>) {
    // Every counted figure that the rows carry, from the one list of counts.
    for (name, _, recount) in Counts::FIELDS {
        // A count an older summary.json lacks cannot disagree.
        if *recount == Recount::FromRows && s.counts.get(name) != Some(NOT_RECORDED) {
            let (e, x) = (v.counts.get(name), s.counts.get(name));
            check.check(name, e.unwrap_or(0).to_string(), x.unwrap_or(0).to_string());
        }
    }
    if s.protect.resource && s.protect.resource_final != NOT_RECORDED {
        check.check(
            "lost_updates",
            v.counts
                .writes_accepted
                .saturating_sub(s.protect.resource_final)
                .to_string(),
            s.lost_updates.to_string(),
        );
    }
    check.check(
        "refused_releases",
        v.counts.refused_releases().to_string(),
        s.refused_releases.to_string(),
    );
    // Every section is a round that held Redlock's quorum.
    if let Some(r) = &s.redlock {
        check.check(
            "redlock.acquired",
            v.counts.sections.to_string(),
            r.acquired.to_string(),
        );
    }
    if v.ttl_us != 0 && v.ttl_us != s.meta.ttl_ms * 1000 {
        check.check(
            "ttl_ms",
            format!("{}", v.ttl_us as f64 / 1000.0),
            s.meta.ttl_ms.to_string(),
        );
    }
}

/// The overlap, in all and per key, and the first overlap of each key.
fn compare_overlap(
    s: &Summary,
    per_key: &[(usize, OverlapStats)],
    all: &OverlapStats,
    check: &mut Check<'_>,
) {
    check.check(
        "overlap_ms",
        format!("{} µs", all.overlap_us),
        format!("{} µs", us(s.overlap_ms)),
    );
    check.check(
        "overlap_incidents",
        all.incidents.to_string(),
        s.overlap_incidents.to_string(),
    );
    check.check(
        "peak_holders",
        all.peak_holders.to_string(),
        s.peak_holders.to_string(),
    );
    let key_line = |k: &KeyOverlap| {
        format!(
            "key {}: {} µs, {} incidents, peak {}",
            k.key,
            us(k.overlap_ms),
            k.overlap_incidents,
            k.peak_holders
        )
    };
    let from_events: Vec<String> = per_key
        .iter()
        .filter(|(_, st)| st.incidents > 0)
        .map(|(k, st)| {
            key_line(&KeyOverlap {
                key: *k,
                overlap_ms: st.overlap_us as f64 / 1000.0,
                overlap_incidents: st.incidents,
                peak_holders: st.peak_holders,
                first_overlap_ms: st.first_overlap_us.map(|t| t as f64 / 1000.0),
            })
        })
        .collect();
    let in_summary: Vec<String> = s.per_key.iter().map(key_line).collect();
    if from_events != in_summary {
        check.check("per_key", from_events.join("; "), in_summary.join("; "));
    }
    // The timeline centres on these instants; summaries from before they were recorded lack
    // them, and then there is nothing to check.
    let first_line = |key: usize, us: Option<u64>| match us {
        Some(t) => format!("key {key}: {t} µs"),
        None => format!("key {key}: none"),
    };
    let (from_events, in_summary): (Vec<String>, Vec<String>) = s
        .per_key
        .iter()
        .filter_map(|k| {
            let recorded = k.first_overlap_ms?;
            let recomputed = per_key
                .iter()
                .find(|(key, _)| *key == k.key)
                .and_then(|(_, st)| st.first_overlap_us);
            Some((
                first_line(k.key, recomputed),
                first_line(k.key, Some(us(recorded))),
            ))
        })
        .unzip();
    if from_events != in_summary {
        check.check(
            "per_key.first_overlap_ms",
            from_events.join("; "),
            in_summary.join("; "),
        );
    }
}

/// The percentiles of the durations and the acquire latencies.
fn compare_quantiles(s: &Summary, v: &VariantEvents, check: &mut Check<'_>) {
    let quantiles = |q: &Quantiles| {
        format!(
            "n={} p50={} p90={} p99={} p99.9={} max={} µs",
            q.count,
            us(q.p50),
            us(q.p90),
            us(q.p99),
            us(q.p999),
            us(q.max)
        )
    };
    check.check(
        "duration_ms",
        quantiles(&Quantiles::of(&v.durations)),
        quantiles(&s.duration_ms),
    );
    check.check(
        "acquire_latency_ms",
        quantiles(&Quantiles::of(&v.acquire)),
        quantiles(&s.acquire_latency_ms),
    );
}
