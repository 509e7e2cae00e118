//! The values the endpoint serves: one series per variant, written live by the runner and
//! replaced by the variant's [`Summary`] when it ends, encoded on each scrape.
//!
//! Why a board of plain values encoded by a custom collector, and not the crate's atomic
//! counters fed by the workers: the end of a variant must show exactly what `summary.json`
//! holds, so the values are *set* from the one table of figures, not incremented beside it;
//! and the workers' hot path stays as it is (the runner copies the recorder's counters once a
//! second, the histogram collector its totals once an interval).

use super::table::{self, CounterDef, ERRORS, HISTOGRAMS};

use crate::analysis::figures::figures;
use crate::analysis::summary::Summary;
use crate::model::error::ErrorKind;
use crate::record::HistSet;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Who a variant's series belong to (its labels).
#[derive(Debug, Clone)]
pub struct Labels {
    /// The variant's name.
    pub variant: String,
    /// The server's name and version (never a URL).
    pub server: String,
    /// The run's id.
    pub run_id: String,
    /// The agent's index, in a multi-agent run.
    pub agent: Option<usize>,
}

/// What a variant has counted so far, copied from its recorder.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// The counted figures.
    pub counts: crate::analysis::counts::Counts,
    /// Failed commands by kind (`timeout`, …).
    pub errors: Vec<(&'static str, u64)>,
    /// Outages ended so far.
    pub outages: u64,
    /// Total outage time, µs (one still open counted up to now).
    pub outage_us: u64,
    /// Overlap time summed over keys, µs.
    pub overlap_us: u64,
    /// Sections that began beside another.
    pub overlap_incidents: u64,
    /// Most simultaneous holders of one key so far.
    pub peak_holders: u32,
    /// Holders open now, summed over the keys.
    pub holders: u64,
    /// Most holders open now on one key.
    pub holders_max: u32,
    /// Fault kinds whose window is open now.
    pub open_faults: Vec<String>,
}

#[derive(Debug, Clone, Default)]
struct Hist {
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

#[derive(Debug)]
struct Series {
    labels: Vec<(&'static str, String)>,
    ttl_s: f64,
    bounds: Vec<f64>,
    /// Counter values by figure name, already in the metric's unit.
    values: BTreeMap<&'static str, f64>,
    errors: BTreeMap<String, f64>,
    gauges: BTreeMap<&'static str, f64>,
    faults: BTreeMap<String, f64>,
    hists: Vec<Hist>,
}

/// The served values of a run: one series per variant.
#[derive(Debug)]
pub struct Board {
    counters: Vec<CounterDef>,
    series: Mutex<Vec<Series>>,
}

impl Default for Board {
    fn default() -> Self {
        Self {
            counters: table::counters(),
            series: Mutex::new(Vec::new()),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding it; the values are still usable if something did.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Board {
    /// Starts a variant's series (every value 0) and returns its index. `fault_kinds`: the
    /// kinds of the windows its schedule has (each gets a `lockbench_fault_window` series).
    pub fn begin(&self, labels: &Labels, ttl_ms: u64, fault_kinds: &[impl AsRef<str>]) -> usize {
        let mut l = vec![
            ("variant", labels.variant.clone()),
            ("server", labels.server.clone()),
            ("run_id", labels.run_id.clone()),
        ];
        if let Some(a) = labels.agent {
            l.push(("agent", a.to_string()));
        }
        let bounds = table::bounds(ttl_ms);
        let empty = Hist {
            buckets: bounds.iter().map(|&b| (b, 0)).collect(),
            ..Hist::default()
        };
        let s = Series {
            labels: l,
            ttl_s: ttl_ms as f64 / 1000.0,
            values: self.counters.iter().map(|c| (c.figure, 0.0)).collect(),
            errors: ErrorKind::ALL
                .iter()
                .map(|k| (k.name().to_string(), 0.0))
                .collect(),
            gauges: [
                ("lockbench_holders", 0.0),
                ("lockbench_holders_max", 0.0),
                ("lockbench_peak_holders", 0.0),
                ("lockbench_running", 1.0),
            ]
            .into(),
            faults: fault_kinds
                .iter()
                .map(|k| (k.as_ref().to_string(), 0.0))
                .collect(),
            hists: HISTOGRAMS.iter().map(|_| empty.clone()).collect(),
            bounds,
        };
        let mut all = lock(&self.series);
        all.push(s);
        all.len() - 1
    }

    /// The variant's TTL became known, or grew, while it ran (`observe` learns it from the
    /// program's own commands): its `lockbench_ttl_seconds` and its histograms' bucket bounds
    /// follow it.
    pub fn set_ttl(&self, i: usize, ttl_ms: u64) {
        let mut all = lock(&self.series);
        let Some(s) = all.get_mut(i) else { return };
        let ttl_s = ttl_ms as f64 / 1000.0;
        if s.ttl_s == ttl_s {
            return;
        }
        s.ttl_s = ttl_s;
        s.bounds = table::bounds(ttl_ms);
        let empty = Hist {
            buckets: s.bounds.iter().map(|&b| (b, 0)).collect(),
            ..Hist::default()
        };
        for h in &mut s.hists {
            *h = empty.clone();
        }
    }

    /// Copies what the variant counted so far. Counters only go up: a live value below the
    /// one already served is left alone.
    pub fn live(&self, i: usize, live: &Live) {
        let mut all = lock(&self.series);
        let Some(s) = all.get_mut(i) else { return };
        let c = &live.counts;
        let mut set = |figure: &'static str, v: f64| {
            if let Some(old) = s.values.get_mut(figure) {
                *old = old.max(v);
            }
        };
        for d in &self.counters {
            if let Some(n) = c.get(d.figure) {
                set(d.figure, n as f64 * d.scale);
            }
        }
        set("refused_releases", c.refused_releases() as f64);
        set("overlap_ms", live.overlap_us as f64 * 1e-6);
        set("overlap_incidents", live.overlap_incidents as f64);
        set("outages", live.outages as f64);
        set("outage_ms", live.outage_us as f64 * 1e-6);
        let total: u64 = live.errors.iter().map(|e| e.1).sum();
        set(ERRORS, total as f64);
        for (kind, n) in &live.errors {
            let e = s.errors.entry(kind.to_string()).or_default();
            *e = e.max(*n as f64);
        }
        s.gauges.insert("lockbench_holders", live.holders as f64);
        s.gauges
            .insert("lockbench_holders_max", f64::from(live.holders_max));
        s.gauges
            .insert("lockbench_peak_holders", f64::from(live.peak_holders));
        for (kind, open) in s.faults.iter_mut() {
            *open = f64::from(u8::from(live.open_faults.contains(kind)));
        }
    }

    /// Copies a variant's histograms so far (µs) into its buckets.
    pub fn histograms(&self, i: usize, h: &HistSet) {
        let mut all = lock(&self.series);
        let Some(s) = all.get_mut(i) else { return };
        for (d, out) in HISTOGRAMS.iter().zip(s.hists.iter_mut()) {
            *out = hist_of(h.get(d.metric), &s.bounds);
        }
    }

    /// The variant ended: its series take the values of its summary (the figures
    /// `summary.json` holds, through the same table) and of its final histograms.
    pub fn publish(&self, i: usize, summary: &Summary, h: &HistSet) {
        let by_name: BTreeMap<&str, _> = figures().into_iter().map(|f| (f.name, f)).collect();
        let mut all = lock(&self.series);
        let Some(s) = all.get_mut(i) else { return };
        for c in &self.counters {
            let v = by_name
                .get(c.figure)
                .and_then(|f| f.value(summary).parse::<f64>().ok());
            match v {
                Some(v) => {
                    s.values.insert(c.figure, v * c.scale);
                }
                // Not measured (`n/a`): no sample, rather than a made-up 0.
                None => {
                    s.values.remove(c.figure);
                }
            }
        }
        for (kind, n) in &summary.errors_by_kind {
            s.errors.insert(kind.clone(), *n as f64);
        }
        s.gauges.insert("lockbench_holders", 0.0);
        s.gauges.insert("lockbench_holders_max", 0.0);
        s.gauges
            .insert("lockbench_peak_holders", f64::from(summary.peak_holders));
        s.gauges.insert("lockbench_running", 0.0);
        for open in s.faults.values_mut() {
            *open = 0.0;
        }
        for (d, out) in HISTOGRAMS.iter().zip(s.hists.iter_mut()) {
            *out = hist_of(h.get(d.metric), &s.bounds);
        }
    }

    /// Encodes every series (called by the registry on each scrape).
    pub(super) fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let all = lock(&self.series);
        for c in &self.counters {
            let unit = c.seconds.then_some(Unit::Seconds);
            let mut m =
                enc.encode_descriptor(&c.base, &c.help, unit.as_ref(), MetricType::Counter)?;
            for s in all.iter() {
                if c.figure == ERRORS {
                    for (kind, v) in &s.errors {
                        let mut l = s.labels.clone();
                        l.push(("kind", kind.clone()));
                        ConstCounter::new(*v).encode(m.encode_family(&l)?)?;
                    }
                } else if let Some(v) = s.values.get(c.figure) {
                    ConstCounter::new(*v).encode(m.encode_family(&s.labels)?)?;
                }
            }
        }
        for (name, help) in table::GAUGES {
            let (base, unit) = match name.strip_suffix("_seconds") {
                Some(b) => (b, Some(Unit::Seconds)),
                None => (*name, None),
            };
            let mut m = enc.encode_descriptor(base, help, unit.as_ref(), MetricType::Gauge)?;
            for s in all.iter() {
                match *name {
                    "lockbench_ttl_seconds" => {
                        ConstGauge::new(s.ttl_s).encode(m.encode_family(&s.labels)?)?
                    }
                    "lockbench_fault_window" => {
                        for (kind, v) in &s.faults {
                            let mut l = s.labels.clone();
                            l.push(("kind", kind.to_string()));
                            ConstGauge::new(*v).encode(m.encode_family(&l)?)?;
                        }
                    }
                    g => {
                        let v = s.gauges.get(g).copied().unwrap_or(0.0);
                        ConstGauge::new(v).encode(m.encode_family(&s.labels)?)?;
                    }
                }
            }
        }
        for (k, d) in HISTOGRAMS.iter().enumerate() {
            let mut m =
                enc.encode_descriptor(d.base, d.help, Some(&Unit::Seconds), MetricType::Histogram)?;
            for s in all.iter() {
                let h = &s.hists[k];
                m.encode_family(&s.labels)?
                    .encode_histogram::<Vec<(String, String)>>(h.sum, h.count, &h.buckets, None)?;
            }
        }
        Ok(())
    }
}

/// Cumulative buckets of a µs histogram over `bounds` (seconds); the sum from its mean (the
/// summary's mean, so `_sum / _count` is the summary's `mean`).
fn hist_of(h: &hdrhistogram::Histogram<u64>, bounds: &[f64]) -> Hist {
    if h.is_empty() {
        return Hist {
            buckets: bounds.iter().map(|&b| (b, 0)).collect(),
            ..Hist::default()
        };
    }
    let count = h.len();
    let buckets = bounds
        .iter()
        .map(|&b| {
            let us = (b * 1e6).floor() as u64;
            (b, h.count_between(0, us))
        })
        .collect();
    Hist {
        sum: h.mean() * count as f64 / 1e6,
        count,
        buckets,
    }
}
