//! Does a simulated run say what the real one measured? The figures the simulation exists to
//! extrapolate — overruns, stale releases, wrongful deletes and overlap incidents per section,
//! and the share of held time that two holders overlapped — compared variant by variant, each
//! with the 99 % interval of its difference. The intervals hold together: with m figures
//! compared, each is a 1 − 0.01/m interval (Bonferroni), so a correct model fails the whole
//! comparison at most 1 time in 100.
//!
//! - A per-section rate k/n: its variance comes from [`BATCHES`] equal slices of each run's time
//!   (batch means, from `events.csv`), because these events cluster — one stale `DEL` sets off
//!   a cascade of wrongful deletes and overlaps — and a binomial variance would be two to three
//!   times too small (measured: same-profile real runs scatter 2.7× wider than binomial). The
//!   two runs agree when |p₁ − p₂| ≤ z·√(v₁ + v₂). Without `events.csv` the binomial variance
//!   p̃(1−p̃)/n is used, with p̃ = (k + ½)/(n + 1) so that zero counts still have a spread.
//! - The overlap-time fraction is the sum of the overlap stretches over the time held
//!   (sections × mean duration). Its spread is that of a sum of n stretches whose lengths vary
//!   about as much as their mean (coefficient of variation 1): relative error √(2/n), n the
//!   stretches (n + 1 when none, so a zero still has a spread).

use crate::analysis::summary::Summary;

/// Family-wise confidence of the comparison.
pub(crate) const CONFIDENCE: f64 = 0.99;

/// One figure of one variant in both runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Agreement {
    /// The variant.
    pub variant: String,
    /// The figure's name.
    pub figure: &'static str,
    /// In the real run.
    pub real: f64,
    /// In the simulated run.
    pub sim: f64,
    /// Half-width of the interval of the difference (simultaneous 99 % with the others).
    pub margin: f64,
}

impl Agreement {
    /// The difference lies within its 99 % interval.
    pub(crate) fn agrees(&self) -> bool {
        (self.real - self.sim).abs() <= self.margin
    }
}

/// A count of a summary.
type Count = fn(&Summary) -> u64;

/// Time slices of a run for the batch-means variance.
pub(crate) const BATCHES: usize = 30;

/// Per variant, per batch: sections and each rate's count, read from `events.csv`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batches {
    /// `[batch] = (sections, [overruns, stale releases, wrongful deletes, overlap incidents])`.
    pub by_variant: std::collections::BTreeMap<String, Vec<(u64, [u64; 4])>>,
}

impl Batches {
    /// Reads `dir/events.csv` (`None` when it has none).
    pub(crate) fn read(
        dir: &std::path::Path,
        summaries: &[Summary],
    ) -> anyhow::Result<Option<Self>> {
        let path = dir.join("events.csv");
        if !path.is_file() {
            return Ok(None);
        }
        let mut b = Batches::default();
        crate::results::events::for_each_event(&path, |r| {
            let Some(s) = summaries.iter().find(|s| *s.meta.variant == *r.variant) else {
                return;
            };
            let length = (s.meta.elapsed_s * 1e6).max(1.0);
            let i = ((r.acquired_us as f64 / length * BATCHES as f64) as usize).min(BATCHES - 1);
            let c = crate::analysis::counts::Counts::of_section(r, s.stale_rule);
            let v = b
                .by_variant
                .entry(s.meta.variant.clone())
                .or_insert_with(|| vec![(0, [0; 4]); BATCHES]);
            v[i].0 += 1;
            let k = [
                c.overruns,
                c.stale_releases,
                c.wrongful_deletes,
                u64::from(r.holders_at_start > 0),
            ];
            for (a, x) in v[i].1.iter_mut().zip(k) {
                *a += x;
            }
        })?;
        Ok(Some(b))
    }

    /// The batch-means variance of rate `which` of `variant` (`None`: no rows).
    fn variance(&self, variant: &str, which: usize) -> Option<f64> {
        let v = self.by_variant.get(variant)?;
        let n: u64 = v.iter().map(|b| b.0).sum();
        if n == 0 {
            return None;
        }
        let k: u64 = v.iter().map(|b| b.1[which]).sum();
        let p = k as f64 / n as f64;
        let used = v.iter().filter(|b| b.0 > 0).count().max(2) as f64;
        let ss: f64 = v
            .iter()
            .map(|b| (b.1[which] as f64 - p * b.0 as f64).powi(2))
            .sum();
        // The ratio estimator's variance, with a binomial floor so zero counts keep a spread.
        let batch = used / (used - 1.0) * ss / (n as f64).powi(2);
        let q = (k as f64 + 0.5) / (n as f64 + 1.0);
        Some(batch.max(q * (1.0 - q) / n as f64 / 4.0))
    }
}

fn rate(k: u64, n: u64) -> (f64, f64) {
    let p = if n == 0 { 0.0 } else { k as f64 / n as f64 };
    let q = (k as f64 + 0.5) / (n as f64 + 1.0);
    (p, q * (1.0 - q) / (n.max(1) as f64))
}

/// The figures of `real` and `sim`, variant by variant (matched by name; a variant missing
/// from either is left out), with the batch-means variances of each run's rows when given.
pub(crate) fn compare_with(
    real: &[Summary],
    sim: &[Summary],
    real_rows: Option<&Batches>,
    sim_rows: Option<&Batches>,
) -> Vec<Agreement> {
    let mut out = Vec::new();
    for r in real {
        let Some(s) = sim.iter().find(|s| s.meta.variant == r.meta.variant) else {
            continue;
        };
        let rates: [(&'static str, Count); 4] = [
            ("overruns per section", |x| x.counts.overruns),
            ("stale releases per section", |x| x.counts.stale_releases),
            ("wrongful deletes per section", |x| {
                x.counts.wrongful_deletes
            }),
            ("overlap incidents per section", |x| x.overlap_incidents),
        ];
        for (which, (figure, k)) in rates.into_iter().enumerate() {
            let (p1, v1) = rate(k(r), r.counts.sections);
            let (p2, v2) = rate(k(s), s.counts.sections);
            let v1 = real_rows
                .and_then(|b| b.variance(&r.meta.variant, which))
                .unwrap_or(v1);
            let v2 = sim_rows
                .and_then(|b| b.variance(&s.meta.variant, which))
                .unwrap_or(v2);
            out.push(Agreement {
                variant: r.meta.variant.clone(),
                figure,
                real: p1,
                sim: p2,
                margin: (v1 + v2).sqrt(),
            });
        }
        let fraction = |x: &Summary| -> (f64, f64) {
            let held = x.counts.sections as f64 * x.duration_ms.mean;
            let f = if held > 0.0 { x.overlap_ms / held } else { 0.0 };
            let n = x.overlap_stretch_ms.count;
            // The spread of a zero: as if one stretch of the mean's size had been seen.
            let spread = if n == 0 {
                x.duration_ms.mean.min(1.0) / held.max(1.0)
            } else {
                f * (2.0 / n as f64).sqrt()
            };
            (f, spread)
        };
        let ((f1, e1), (f2, e2)) = (fraction(r), fraction(s));
        out.push(Agreement {
            variant: r.meta.variant.clone(),
            figure: "overlap-time fraction",
            real: f1,
            sim: f2,
            margin: (e1 * e1 + e2 * e2).sqrt(),
        });
    }
    // Standard errors so far; now the simultaneous interval's z.
    let m = out.len().max(1) as f64;
    let z = crate::math::normal_quantile(1.0 - (1.0 - CONFIDENCE) / (2.0 * m));
    for a in &mut out {
        a.margin *= z;
    }
    out
}

/// The comparison as a table: figure, real, simulated, difference, 99 % margin, verdict.
pub(crate) fn table(rows: &[Agreement]) -> String {
    let mut t = format!(
        "{:<16} {:<30} {:>12} {:>12} {:>12} {:>12}  {}\n",
        "variant", "figure", "real", "simulated", "difference", "margin", "agree"
    );
    for a in rows {
        t.push_str(&format!(
            "{:<16} {:<30} {:>12.6} {:>12.6} {:>12.6} {:>12.6}  {}\n",
            a.variant,
            a.figure,
            a.real,
            a.sim,
            a.sim - a.real,
            a.margin,
            if a.agrees() { "yes" } else { "NO" }
        ));
    }
    t
}
