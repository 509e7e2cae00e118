//! The other side of the TTL: a holder that crashes without releasing blocks its key until the
//! TTL expires, so a long TTL that protects against overruns costs blocked time after crashes.
//!
//! Model: the holder dies at `X = U·D` into its section, `D` a measured duration and
//! `U ~ Uniform(0, 1)`; the key stays blocked until it expires, `max(0, T − X)` after the crash
//! (the next acquirer is assumed to be waiting). Per sample `d` the expectation is exact:
//! `T − d/2` for `d ≤ T`, and `∫₀^{T/d} (T − u·d) du = T²/(2d)` for `d > T`. The worst case is
//! `T`, a crash right after acquiring.

use super::Samples;
use super::stats::View;
use serde::Serialize;

/// The model behind the figures, in words (printed and in the JSON).
pub(crate) const CRASH_MODEL: &str = "a crash falls uniformly within a measured section; the key \
                               stays blocked until its TTL expires, assuming the next acquirer \
                               is waiting";

/// Blocked time per crash at one TTL.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BlockedPerCrash {
    /// Expected blocked time per crash under the model (ms).
    pub mean: f64,
    /// Worst case: the TTL, a crash right after acquiring (ms).
    pub max: f64,
}

/// What crashed holders cost at one TTL.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CrashCost {
    /// Holder crashes per day (`--crash-rate`).
    pub rate_per_day: f64,
    /// The TTL these figures are for (ms).
    pub ttl_ms: f64,
    /// Blocked time per crash.
    pub blocked_per_crash_ms: BlockedPerCrash,
    /// `rate_per_day × blocked_per_crash_ms.mean`: expected blocked time per day (ms).
    pub blocked_per_day_ms: f64,
    /// The model behind the figures ([`CRASH_MODEL`]).
    pub model: &'static str,
}

/// `E[max(0, T − U·d)]` for one duration `d` (ms) and TTL `T` (ms).
fn blocked_for(d: f64, ttl: f64) -> f64 {
    if d <= ttl {
        ttl - d / 2.0
    } else {
        ttl * ttl / (2.0 * d)
    }
}

/// Mean blocked time per crash over the samples (weighted by counts); `None` without samples.
pub(super) fn mean_blocked(view: &View, ttl_ms: f64) -> Option<f64> {
    let n = view.n();
    if n == 0 {
        return None;
    }
    let sum: f64 = view
        .runs()
        .map(|(d, c)| c as f64 * blocked_for(d, ttl_ms))
        .sum();
    Some(sum / n as f64)
}

/// Expected blocked time per crash (ms) at TTL `ttl_ms` for these measured durations, under the
/// model of [`CRASH_MODEL`]; `None` without samples. Histogram values are bucket upper edges, so
/// their figure may read up to the histogram's precision low.
pub fn expected_blocked_ms(samples: &Samples, ttl_ms: f64) -> Option<f64> {
    mean_blocked(&View::new(samples), ttl_ms)
}

/// The crash figures at `ttl_ms` for `rate_per_day` crashes; `None` without samples.
pub(super) fn crash_cost(view: &View, ttl_ms: f64, rate_per_day: f64) -> Option<CrashCost> {
    let mean = mean_blocked(view, ttl_ms)?;
    Some(CrashCost {
        rate_per_day,
        ttl_ms,
        blocked_per_crash_ms: BlockedPerCrash { mean, max: ttl_ms },
        blocked_per_day_ms: rate_per_day * mean,
        model: CRASH_MODEL,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::new_hist;

    /// The closed forms on single durations: 100 ms at T = 300 gives 250, 600 ms gives 75,
    /// 0 gives T, and both branches meet at d = T (T/2).
    #[test]
    fn closed_form_per_duration() {
        let one = |d: f64, t: f64| expected_blocked_ms(&Samples::from_ms(vec![d]), t).unwrap();
        assert_eq!(one(100.0, 300.0), 250.0);
        assert_eq!(one(600.0, 300.0), 75.0);
        assert_eq!(one(0.0, 300.0), 300.0);
        assert_eq!(blocked_for(300.0, 300.0), 150.0);
        assert!((blocked_for(300.0 + 1e-9, 300.0) - 150.0).abs() < 1e-6);
        assert_eq!(expected_blocked_ms(&Samples::from_ms(vec![]), 300.0), None);
    }

    /// Histogram inputs are weighted by their counts: three sections of 100 ms and one of 600 ms
    /// (values exact in the histogram) give (3·250 + 75)/4, as the same values given exactly do.
    #[test]
    fn histogram_counts_weight_the_mean() {
        let mut hist = new_hist();
        hist.record_n(100, 3).unwrap();
        hist.record_n(600, 1).unwrap();
        let h = Samples::Histogram { hist, unit_ms: 1.0 };
        let want = (3.0 * 250.0 + 75.0) / 4.0;
        assert_eq!(expected_blocked_ms(&h, 300.0), Some(want));
        let e = Samples::from_ms(vec![100.0, 600.0, 100.0, 100.0]);
        assert_eq!(expected_blocked_ms(&e, 300.0), Some(want));
    }

    /// The cost per day is the rate times the mean; the worst case is the TTL.
    #[test]
    fn cost_per_day() {
        let s = Samples::from_ms(vec![100.0; 10]);
        let c = crash_cost(&View::new(&s), 300.0, 4.0).unwrap();
        assert_eq!(
            c.blocked_per_crash_ms,
            BlockedPerCrash {
                mean: 250.0,
                max: 300.0
            }
        );
        assert_eq!(c.blocked_per_day_ms, 1000.0);
    }
}
