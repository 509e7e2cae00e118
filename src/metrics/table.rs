//! Which metric each figure becomes. The counters come from the one table of figures
//! ([`crate::analysis::figures::figures`]): every figure that counts something (or sums a
//! time) is a counter, so a new figure is exposed without touching this file, and the end of
//! a variant publishes the very values `summary.json` holds ([`Figure::value`]).

use crate::analysis::figures::{Figure, Unit, figures};
use crate::record::Metric;

/// A figure exposed as a counter.
#[derive(Debug, Clone)]
pub struct CounterDef {
    /// The figure's name in `summary.json`.
    pub figure: &'static str,
    /// The family's name without unit and `_total` (`lockbench_overlap`).
    pub base: String,
    /// In seconds (the figure is a time): `_seconds` is added to the name.
    pub seconds: bool,
    /// Multiplies the figure's value into the metric's (µs → s: 1e-6; ms → s: 1e-3).
    pub scale: f64,
    /// Its definition (in the metric's unit).
    pub help: String,
}

impl CounterDef {
    /// The name of its samples (`lockbench_overlap_seconds_total`).
    pub fn sample_name(&self) -> String {
        let unit = if self.seconds { "_seconds" } else { "" };
        format!("{}{unit}_total", self.base)
    }
}

/// The figure whose counter is split by error kind (`kind` label), summing to the figure.
pub const ERRORS: &str = "errors";

/// Figures that are gauges (a maximum, not a count).
pub const GAUGE_FIGURES: &[&str] = &["peak_holders"];

/// Times kept twice in the table (µs for the recount, ms for reading): the µs one is exposed.
const SAME_AS: &[&str] = &["excess_total_ms", "pause_total_ms"];

/// Every counter, in the table's order.
pub fn counters() -> Vec<CounterDef> {
    figures().iter().filter_map(counter_of).collect::<Vec<_>>()
}

fn counter_of(f: &Figure) -> Option<CounterDef> {
    if GAUGE_FIGURES.contains(&f.name) || SAME_AS.contains(&f.name) {
        return None;
    }
    // The table's definitions are doc lines joined; a time exposed in seconds loses its unit.
    let help = f
        .definition
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let help = help
        .strip_suffix(", µs.")
        .map_or(help.clone(), |h| format!("{h}."));
    let def = |base: &str, seconds, scale| CounterDef {
        figure: f.name,
        base: format!("lockbench_{base}"),
        seconds,
        scale,
        help: help.clone(),
    };
    match f.unit {
        Unit::Count => Some(match f.name.strip_suffix("_total_us") {
            Some(stem) => def(stem, true, 1e-6),
            None => def(f.name, false, 1.0),
        }),
        Unit::Ms => Some(def(
            f.name.strip_suffix("_ms").unwrap_or(f.name),
            true,
            1e-3,
        )),
        // Rates and fractions are PromQL's to compute (`rate()`, a division); a word is no metric.
        Unit::Fraction | Unit::PerSecond | Unit::Text => None,
    }
}

/// A distribution exposed as a histogram (seconds, buckets around the TTL).
#[derive(Debug, Clone, Copy)]
pub struct HistDef {
    /// The recorded metric.
    pub metric: Metric,
    /// The family's name without `_seconds`.
    pub base: &'static str,
    /// What it measures.
    pub help: &'static str,
}

/// The histograms, in exposition order.
pub const HISTOGRAMS: &[HistDef] = &[
    HistDef {
        metric: Metric::Duration,
        base: "lockbench_section_duration",
        help: "measured section duration d, from the acquisition's reply to the release's send",
    },
    HistDef {
        metric: Metric::AcquireLatency,
        base: "lockbench_acquire_latency",
        help: "from a section's first attempt to its successful acquisition",
    },
    HistDef {
        metric: Metric::ReleaseLatency,
        base: "lockbench_release_latency",
        help: "round trip of one release command",
    },
    HistDef {
        metric: Metric::OverlapStretch,
        base: "lockbench_overlap_stretch",
        help: "length of each stretch with two or more holders of one key",
    },
];

/// Upper bounds of the histograms' buckets, as fractions and multiples of the TTL: fine below
/// it (latencies are small fractions), dense around it (where overruns begin).
pub const TTL_FACTORS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0,
    3.0, 5.0, 10.0,
];

/// The buckets' upper bounds (seconds) for a TTL in ms.
pub fn bounds(ttl_ms: u64) -> Vec<f64> {
    let ttl_s = ttl_ms.max(1) as f64 / 1000.0;
    TTL_FACTORS.iter().map(|f| f * ttl_s).collect()
}

/// The other families: (name as sampled, help).
pub const GAUGES: &[(&str, &str)] = &[
    (
        "lockbench_holders",
        "holders whose section is open now, summed over the keys",
    ),
    (
        "lockbench_holders_max",
        "the most holders open now on one key (2 or more: an overlap is going on)",
    ),
    (
        "lockbench_peak_holders",
        "the largest number of simultaneous holders of one key so far",
    ),
    ("lockbench_ttl_seconds", "the lock TTL (PX) of the variant"),
    (
        "lockbench_fault_window",
        "1 while a fault window of this kind is open on the variant's clock, else 0",
    ),
    (
        "lockbench_running",
        "1 while the variant runs, 0 once its summary is published",
    ),
];

/// Every sample family name the exposition can hold (histograms with their `_bucket`,
/// `_sum`, `_count`): what dashboards may refer to.
pub fn exposed_names() -> Vec<String> {
    let mut names: Vec<String> = counters().iter().map(CounterDef::sample_name).collect();
    names.extend(GAUGES.iter().map(|(n, _)| n.to_string()));
    for h in HISTOGRAMS {
        for end in ["_bucket", "_sum", "_count"] {
            names.push(format!("{}_seconds{end}", h.base));
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names follow Prometheus's conventions, times are in seconds, and none is exposed twice.
    #[test]
    fn names() {
        let c = counters();
        let get = |f: &str| {
            c.iter()
                .find(|d| d.figure == f)
                .map(CounterDef::sample_name)
        };
        assert_eq!(get("sections").as_deref(), Some("lockbench_sections_total"));
        assert_eq!(
            get("overlap_ms").as_deref(),
            Some("lockbench_overlap_seconds_total")
        );
        assert_eq!(
            get("excess_total_us").as_deref(),
            Some("lockbench_excess_seconds_total")
        );
        assert_eq!(get("excess_total_ms"), None);
        assert_eq!(get("overrun_fraction"), None);
        let mut all = exposed_names();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name exposed twice");
        assert!(all.iter().all(|n| n.starts_with("lockbench_")));
    }
}
