//! The harness checks itself: the theoretical overrun probability of a parametric duration
//! distribution, next to the measured overrun fraction and its 99 % confidence interval.
//!
//! A section overruns when its *measured* duration exceeds the TTL, and the measured duration
//! is the intended one plus the timer's error (tokio sleeps have millisecond resolution). So
//! the expected fraction is `Σₑ P(E = e) · P(X > TTL − e)` over the recorded timer-error
//! histogram `E`; the plain `P(X > TTL)` is reported beside it. A mismatch (the expected value
//! outside the interval) means the sampler, the clock or the accounting is wrong — or, by
//! chance, one run in a hundred.

use crate::dist::Dist;
use crate::math::wilson;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// z for a two-sided 99 % interval.
pub const Z99: f64 = 2.575_829_303_548_901;

/// Theory next to measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AnalyticCheck {
    /// P(X > TTL) for the intended durations X.
    pub p_intended: f64,
    /// P(X + E > TTL), with E the measured timer error: what the run should show.
    pub p_expected: f64,
    /// Measured overrun fraction.
    pub measured: f64,
    /// Lower end of its 99 % (Wilson) confidence interval.
    pub ci99_low: f64,
    /// Upper end.
    pub ci99_high: f64,
    /// `p_expected` lies inside the interval.
    pub agrees: bool,
}

/// Slack allowed when asking whether a probability lies inside an interval: both come out of
/// floating-point sums, so a value on the boundary may land a few ulps outside it.
pub const PROB_TOLERANCE: f64 = 1e-12;

/// `p` lies in `[lo, hi]`, allowing [`PROB_TOLERANCE`] of rounding at either end.
pub fn within(p: f64, lo: f64, hi: f64) -> bool {
    p >= lo - PROB_TOLERANCE && p <= hi + PROB_TOLERANCE
}

/// P(X + E > ttl) where E follows `timer_error_us` (µs). An empty histogram means E = 0.
pub fn expected_overrun(dist: &Dist, ttl_ms: f64, timer_error_us: &Histogram<u64>) -> Option<f64> {
    if timer_error_us.is_empty() {
        return dist.survival(ttl_ms);
    }
    let total = timer_error_us.len() as f64;
    let mut p = 0.0;
    for v in timer_error_us.iter_recorded() {
        let e_ms = timer_error_us.median_equivalent(v.value_iterated_to()) as f64 / 1000.0;
        p += v.count_at_value() as f64 / total * dist.survival(ttl_ms - e_ms)?;
    }
    Some(p.clamp(0.0, 1.0))
}

/// Compares theory with the measured `overruns` of `sections`; `None` for non-parametric
/// distributions (empirical data has no theory to check against) or an empty run.
pub fn check(
    dist: &Dist,
    ttl_ms: f64,
    timer_error_us: &Histogram<u64>,
    overruns: u64,
    sections: u64,
) -> Option<AnalyticCheck> {
    if !dist.is_parametric() || sections == 0 {
        return None;
    }
    let p_expected = expected_overrun(dist, ttl_ms, timer_error_us)?;
    let (lo, hi) = wilson(overruns, sections, Z99);
    Some(AnalyticCheck {
        p_intended: dist.survival(ttl_ms)?,
        p_expected,
        measured: overruns as f64 / sections as f64,
        ci99_low: lo,
        ci99_high: hi,
        agrees: within(p_expected, lo, hi),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With nothing expected and nothing seen, the interval starts at exactly 0 and the check
    /// agrees, for every run length (the old formula gave 1.4e-17 at n = 28: a false MISMATCH);
    /// symmetrically, all seen gives an upper end of exactly 1.
    #[test]
    fn zero_of_n_is_exactly_zero_and_agrees() {
        let d = Dist::parse("constant(10ms)").unwrap();
        let e = crate::record::new_hist();
        for n in (1..=2000).chain([28, 251, 420, 10_000, 1_000_000, u64::from(u32::MAX)]) {
            let (lo, hi) = wilson(0, n, Z99);
            assert_eq!(lo, 0.0, "n = {n}");
            assert!(hi > 0.0 && hi <= 1.0, "n = {n}: {hi}");
            let (lo, hi) = wilson(n, n, Z99);
            assert_eq!(hi, 1.0, "n = {n}");
            assert!((0.0..1.0).contains(&lo), "n = {n}: {lo}");
        }
        for n in [28, 251, 420, 5_000] {
            let c = check(&d, 100.0, &e, 0, n).unwrap();
            assert_eq!(c.p_expected, 0.0);
            assert!(c.agrees, "n = {n}: {c:?}");
            // Everything expected and everything seen agrees too.
            let c = check(&d, 5.0, &e, n, n).unwrap();
            assert!(c.agrees, "n = {n}: {c:?}");
        }
    }

    /// The tolerance absorbs rounding only: a value a hair outside passes, a real miss fails.
    #[test]
    fn within_tolerates_rounding_only() {
        assert!(within(0.5 + 1e-15, 0.1, 0.5));
        assert!(within(-1e-17, 0.0, 0.2));
        assert!(!within(0.5 + 1e-6, 0.1, 0.5));
        assert!(!within(0.05, 0.1, 0.5));
    }

    /// A constant timer error shifts the threshold exactly; zero error gives P(X > TTL).
    #[test]
    fn timer_error_shifts_the_threshold() {
        let d = Dist::parse("exponential(mean=10ms)").unwrap();
        let mut e = crate::record::new_hist();
        assert_eq!(expected_overrun(&d, 20.0, &e), d.survival(20.0));
        e.record(1000).unwrap();
        let p = expected_overrun(&d, 20.0, &e).unwrap();
        assert!((p - (-1.9f64).exp()).abs() < 1e-9, "{p}");
    }

    /// The check agrees with matching numbers and flags numbers that do not match.
    #[test]
    fn flags_a_mismatch() {
        let d = Dist::parse("uniform(0ms,100ms)").unwrap();
        let e = crate::record::new_hist();
        let ok = check(&d, 80.0, &e, 2000, 10_000).unwrap();
        assert!(ok.agrees, "{ok:?}");
        let bad = check(&d, 70.0, &e, 2000, 10_000).unwrap();
        assert!(!bad.agrees, "{bad:?}");
        assert!(check(&Dist::parse("constant(1ms)").unwrap(), 5.0, &e, 0, 0).is_none());
    }
}
