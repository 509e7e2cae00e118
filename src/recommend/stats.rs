//! Order statistics and binomial tails: the distribution-free bound (which rank of the sorted
//! samples is a safe TTL at a confidence), Clopper–Pearson bounds, and a sorted view of exact or
//! histogram samples.

use super::Samples;
use crate::math::{normal_quantile, normal_sf};

/// Beyond this many terms the binomial CDF uses the normal approximation (then `np` ≫ 1000 and
/// the approximation error is far below anything printed).
const EXACT_TERMS: u64 = 20_000;

fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// `P(Binomial(n, p) ≤ j)`.
pub(crate) fn binom_cdf(j: u64, n: u64, p: f64) -> f64 {
    if j >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    if j > EXACT_TERMS {
        let (nf, jf) = (n as f64, j as f64);
        let sd = (nf * p * (1.0 - p)).sqrt();
        return 1.0 - normal_sf((jf + 0.5 - nf * p) / sd);
    }
    // Sum the pmf in log space: pmf(0) = (1-p)^n underflows for large n·p.
    let step = p.ln() - (-p).ln_1p();
    let mut log_pmf = n as f64 * (-p).ln_1p();
    let mut log_cdf = log_pmf;
    for i in 0..j {
        log_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + step;
        log_cdf = log_add(log_cdf, log_pmf);
    }
    log_cdf.exp().min(1.0)
}

/// The largest `j` with `P(Binomial(n, q) ≤ j) ≤ alpha`, or `None` when even `j = 0` exceeds it.
///
/// With `j` values allowed above it, the order statistic `x_(n−j)` has `P(X > x_(n−j)) ≤ q` with
/// confidence `1 − alpha`.
pub(crate) fn max_exceedances(n: u64, q: f64, alpha: f64) -> Option<u64> {
    if n == 0 || !(q > 0.0 && q < 1.0) || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let log_alpha = alpha.ln();
    let step = q.ln() - (-q).ln_1p();
    let mut log_pmf = n as f64 * (-q).ln_1p();
    if log_pmf > log_alpha {
        return None;
    }
    let mut log_cdf = log_pmf;
    let mut j = 0u64;
    while j + 1 < n && j < EXACT_TERMS {
        log_pmf += ((n - j) as f64).ln() - ((j + 1) as f64).ln() + step;
        let next = log_add(log_cdf, log_pmf);
        if next > log_alpha {
            return Some(j);
        }
        log_cdf = next;
        j += 1;
    }
    if j + 1 >= n {
        return Some(j);
    }
    // Large n·q: normal approximation, then step to the exact boundary of binom_cdf.
    let (nf, sd) = (n as f64, (n as f64 * q * (1.0 - q)).sqrt());
    let guess = (nf * q + normal_quantile(alpha) * sd - 0.5).floor();
    let mut j = if guess.is_finite() {
        (guess.max(0.0) as u64).min(n - 1)
    } else {
        0
    };
    for _ in 0..64 {
        if binom_cdf(j + 1, n, q) <= alpha && j + 2 < n {
            j += 1;
        } else if binom_cdf(j, n, q) > alpha && j > 0 {
            j -= 1;
        } else {
            break;
        }
    }
    Some(j)
}

/// Samples needed for the max alone to support `target` with `confidence`:
/// the smallest `n` with `(1 − target)^n ≤ 1 − confidence`.
pub(crate) fn samples_needed(target: f64, confidence: f64) -> u64 {
    let r = (1.0 - confidence).ln() / (-target).ln_1p();
    if r.is_finite() && r > 0.0 {
        // Guard against r landing a hair above an integer through rounding.
        let n = r.ceil();
        let below = n - 1.0;
        if below >= 1.0 && below * (-target).ln_1p() <= (1.0 - confidence).ln() {
            below as u64
        } else {
            n as u64
        }
    } else {
        1
    }
}

/// One-sided upper confidence bound (Clopper–Pearson) on a probability after `j` events in `n`
/// trials.
pub(crate) fn upper_bound(j: u64, n: u64, confidence: f64) -> f64 {
    if n == 0 || j >= n {
        return 1.0;
    }
    let alpha = 1.0 - confidence;
    if j == 0 {
        return -(alpha.ln() / n as f64).exp_m1();
    }
    let (mut lo, mut hi) = (j as f64 / n as f64, 1.0);
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if binom_cdf(j, n, mid) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// A sorted view of the samples as runs `(value ms, count)`, ascending.
pub(super) enum View<'a> {
    Exact(&'a [f64]),
    Runs {
        runs: Vec<(f64, u64)>,
        cum: Vec<u64>,
    },
}

impl<'a> View<'a> {
    pub(super) fn new(s: &'a Samples) -> View<'a> {
        match s {
            Samples::Exact(v) => View::Exact(v),
            Samples::Histogram { hist, unit_ms } => {
                let mut runs = Vec::new();
                let mut cum = Vec::new();
                let mut total = 0u64;
                for it in hist.iter_recorded() {
                    let c = it.count_at_value();
                    if c == 0 {
                        continue;
                    }
                    // Upper edge of the bucket: the true value is at most this.
                    let v = hist.highest_equivalent(it.value_iterated_to()) as f64 * unit_ms;
                    total += c;
                    runs.push((v, c));
                    cum.push(total);
                }
                View::Runs { runs, cum }
            }
        }
    }

    pub(super) fn n(&self) -> u64 {
        match self {
            View::Exact(v) => v.len() as u64,
            View::Runs { cum, .. } => cum.last().copied().unwrap_or(0),
        }
    }

    /// The `k`-th smallest value (1-based, clamped into `1..=n`); NaN when empty.
    pub(super) fn at_rank(&self, k: u64) -> f64 {
        let n = self.n();
        if n == 0 {
            return f64::NAN;
        }
        let k = k.clamp(1, n);
        match self {
            View::Exact(v) => v.get(k as usize - 1).copied().unwrap_or(f64::NAN),
            View::Runs { runs, cum } => {
                let i = cum.partition_point(|c| *c < k);
                runs.get(i).map_or(f64::NAN, |r| r.0)
            }
        }
    }

    /// The empirical `p`-quantile: the value at rank `ceil(p·n)`.
    pub(super) fn quantile(&self, p: f64) -> f64 {
        let k = (p * self.n() as f64 - 1e-9).ceil().max(1.0) as u64;
        self.at_rank(k)
    }

    pub(super) fn runs(&self) -> Box<dyn Iterator<Item = (f64, u64)> + '_> {
        match self {
            View::Exact(v) => Box::new(v.chunk_by(|a, b| a == b).map(|c| (c[0], c.len() as u64))),
            View::Runs { runs, .. } => Box::new(runs.iter().copied()),
        }
    }

    /// Samples strictly above `t`.
    pub(super) fn count_above(&self, t: f64) -> u64 {
        match self {
            View::Exact(v) => (v.len() - v.partition_point(|x| *x <= t)) as u64,
            View::Runs { runs, cum } => {
                let i = runs.partition_point(|r| r.0 <= t);
                self.n() - if i == 0 { 0 } else { cum[i - 1] }
            }
        }
    }

    pub(super) fn mean(&self) -> f64 {
        let n = self.n() as f64;
        self.runs().map(|(v, c)| v * c as f64).sum::<f64>() / n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample size needed for the max alone matches ln(1−conf)/ln(1−target), e.g. 29956
    /// for target 1e-4 at 95 %, and 59 for the classic 5 %/95 % case.
    #[test]
    fn samples_needed_matches_closed_form() {
        assert_eq!(samples_needed(1e-4, 0.95), 29_956);
        assert_eq!(samples_needed(0.05, 0.95), 59);
        assert_eq!(samples_needed(0.01, 0.99), 459);
    }

    /// The binomial CDF agrees with hand-computed values and with its normal approximation
    /// where they meet.
    #[test]
    fn binomial_cdf_values() {
        // P(Bin(10, 0.5) ≤ 3) = 176/1024.
        assert!((binom_cdf(3, 10, 0.5) - 176.0 / 1024.0).abs() < 1e-12);
        assert!((binom_cdf(0, 100, 0.01) - 0.99f64.powi(100)).abs() < 1e-12);
        assert_eq!(binom_cdf(10, 10, 0.3), 1.0);
        let (n, p) = (10_000_000u64, 0.01);
        let exact = binom_cdf(EXACT_TERMS, n, p);
        let approx = binom_cdf(EXACT_TERMS + 1, n, p);
        assert!(exact < 1e-100 && approx < 1e-100, "{exact} {approx}");
    }

    /// The order statistic chosen is the boundary: j exceedances satisfy the confidence,
    /// j + 1 do not.
    #[test]
    fn max_exceedances_is_the_boundary() {
        for (n, q, alpha) in [
            (100_000u64, 1e-3, 0.05),
            (29_956, 1e-4, 0.05),
            (5_000, 1e-2, 0.01),
            (50_000_000, 1e-3, 0.05),
        ] {
            let j = max_exceedances(n, q, alpha).unwrap();
            assert!(binom_cdf(j, n, q) <= alpha, "{n} {q}: {j}");
            assert!(binom_cdf(j + 1, n, q) > alpha, "{n} {q}: {j}");
        }
        assert_eq!(max_exceedances(29_955, 1e-4, 0.05), None);
        assert_eq!(max_exceedances(29_956, 1e-4, 0.05), Some(0));
    }

    /// The Clopper–Pearson upper bound solves P(Bin(n, p) ≤ j) = α, and with j = 0 it is
    /// 1 − α^(1/n) (≈ 3/n, the "rule of three").
    #[test]
    fn upper_bound_solves_the_binomial() {
        let b = upper_bound(0, 1000, 0.95);
        assert!((b - 0.002_991).abs() < 1e-5, "{b}");
        let b = upper_bound(5, 1000, 0.95);
        assert!((binom_cdf(5, 1000, b) - 0.05).abs() < 1e-6);
        assert_eq!(upper_bound(3, 3, 0.95), 1.0);
    }
}
