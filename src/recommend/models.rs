//! Models that extrapolate beyond the data: a log-normal by maximum likelihood and a generalised
//! Pareto tail by probability-weighted moments, each judged on the observed tail
//! (Kolmogorov–Smirnov, Anderson–Darling) with a verdict in plain words.

use super::print::fmt_ms;
use super::stats::View;
use crate::math::{normal_quantile, normal_sf};
use serde::Serialize;

/// Anderson–Darling values above which a model is called a poor fit of the tail. The log-normal
/// is fitted to all the data, so its tail is close to a fully specified test (5 % point ≈ 2.5);
/// the GPD is fitted to the tail itself, which lowers the statistic (5 % point ≈ 0.8 near ξ = 0,
/// Choulakian & Stephens 2001).
pub(super) const AD_CRITICAL_LOGNORMAL: f64 = 2.5;
pub(super) const AD_CRITICAL_GPD: f64 = 0.8;
/// Fewest exceedances the GPD is fitted to.
pub(super) const MIN_TAIL: u64 = 20;

/// A fitted model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Model {
    /// `ln(X in ms) ~ N(mu, sigma²)`.
    Lognormal {
        /// Mean of `ln(ms)`.
        mu: f64,
        /// Standard deviation of `ln(ms)`.
        sigma: f64,
    },
    /// Above `threshold_ms`: `P(X > x) = exceed_fraction · (1 + xi·(x − u)/scale_ms)^(−1/xi)`.
    GeneralizedPareto {
        /// Threshold `u` (ms).
        threshold_ms: f64,
        /// Fraction of the samples above `u`.
        exceed_fraction: f64,
        /// Shape ξ (> 0 heavy tail, 0 exponential, < 0 bounded).
        xi: f64,
        /// Scale σ (ms).
        scale_ms: f64,
    },
}

impl Model {
    /// `P(X > x)` under the model; `None` where the model says nothing (GPD below its threshold).
    pub fn survival(&self, x: f64) -> Option<f64> {
        match *self {
            Model::Lognormal { mu, sigma } => Some(if x <= 0.0 {
                1.0
            } else {
                normal_sf((x.ln() - mu) / sigma)
            }),
            Model::GeneralizedPareto {
                threshold_ms,
                exceed_fraction,
                xi,
                scale_ms,
            } => (x >= threshold_ms)
                .then(|| exceed_fraction * gpd_sf(x - threshold_ms, xi, scale_ms)),
        }
    }

    /// The `x` with `P(X > x) = q`; `None` when the model cannot say (GPD: `q` not in its tail).
    pub fn ttl_for(&self, q: f64) -> Option<f64> {
        let x = match *self {
            Model::Lognormal { mu, sigma } => (mu - sigma * normal_quantile(q)).exp(),
            Model::GeneralizedPareto {
                threshold_ms,
                exceed_fraction,
                xi,
                scale_ms,
            } => {
                if q >= exceed_fraction {
                    return None;
                }
                let r = q / exceed_fraction;
                let y = if xi.abs() < 1e-9 {
                    -scale_ms * r.ln()
                } else {
                    scale_ms / xi * (r.powf(-xi) - 1.0)
                };
                threshold_ms + y
            }
        };
        x.is_finite().then_some(x)
    }
}

fn gpd_sf(y: f64, xi: f64, scale: f64) -> f64 {
    if y <= 0.0 {
        return 1.0;
    }
    if xi.abs() < 1e-9 {
        return (-y / scale).exp();
    }
    let t = 1.0 + xi * y / scale;
    if t <= 0.0 { 0.0 } else { t.powf(-1.0 / xi) }
}

/// A model fitted to the samples.
#[derive(Debug, Clone, Serialize)]
pub struct ModelFit {
    /// `lognormal` or `generalized_pareto`.
    pub name: &'static str,
    /// How it was fitted.
    pub method: String,
    /// The fitted model; `None` when it could not be fitted (see `verdict`).
    pub fitted: Option<Model>,
    /// The model's TTL for the target (`P(X > ttl) = target`).
    pub ttl_ms: Option<f64>,
    /// Threshold above which the tail fit is judged (ms).
    pub tail_threshold_ms: Option<f64>,
    /// Samples above that threshold.
    pub tail_samples: u64,
    /// Kolmogorov–Smirnov distance between the model and the data above the threshold.
    pub tail_ks: Option<f64>,
    /// Anderson–Darling statistic of the data above the threshold.
    pub tail_ad: Option<f64>,
    /// Anderson–Darling value above which the fit is called poor (≈ 5 % level).
    pub tail_ad_critical: f64,
    /// The observed value with ~10 samples above it, and the model's value at the same
    /// exceedance probability.
    pub check: Option<TailCheck>,
    /// The verdict in plain words.
    pub verdict: String,
}

/// Model against data at one high quantile.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TailCheck {
    /// The quantile (`1 − 10/n`).
    pub p: f64,
    /// The observed value.
    pub observed_ms: f64,
    /// The model's value.
    pub model_ms: f64,
}

/// Goodness of fit of `cdf` (conditional on exceeding the threshold) to `runs` (`m` samples):
/// `(KS distance, Anderson–Darling A²)`. A² is integrated exactly piece by piece between
/// data points, so ties and counts need no special case.
fn tail_gof(runs: &[(f64, u64)], m: u64, cdf: impl Fn(f64) -> f64) -> (f64, f64) {
    const EPS: f64 = 1e-15;
    // ∫_a^b (c − z)² / (z(1 − z)) dz = c²·ln(b/a) + (1−c)²·ln((1−a)/(1−b)) − (b − a).
    let piece = |c: f64, a: f64, b: f64| {
        if b <= a {
            return 0.0;
        }
        let mut s = -(b - a);
        if c > 0.0 {
            s += c * c * (b / a).ln();
        }
        if c < 1.0 {
            s += (1.0 - c) * (1.0 - c) * ((-a).ln_1p() - (-b).ln_1p());
        }
        s
    };
    let mf = m as f64;
    let (mut z_prev, mut c, mut ad, mut ks) = (EPS, 0.0f64, 0.0, 0.0f64);
    let mut seen = 0u64;
    for &(v, count) in runs {
        let z = cdf(v).clamp(EPS, 1.0 - EPS).max(z_prev);
        ad += piece(c, z_prev, z);
        seen += count;
        let c_next = seen as f64 / mf;
        ks = ks.max((c - z).abs()).max((c_next - z).abs());
        z_prev = z;
        c = c_next;
    }
    ad += piece(1.0, z_prev, 1.0 - EPS);
    (ks, (mf * ad).max(0.0))
}

pub(super) fn fit_lognormal(view: &View) -> Option<Model> {
    let (mut n, mut s) = (0u64, 0.0);
    for (v, c) in view.runs().filter(|r| r.0 > 0.0) {
        n += c;
        s += c as f64 * v.ln();
    }
    if n < 2 {
        return None;
    }
    let mu = s / n as f64;
    let ss: f64 = view
        .runs()
        .filter(|r| r.0 > 0.0)
        .map(|(v, c)| c as f64 * (v.ln() - mu).powi(2))
        .sum();
    let sigma = (ss / n as f64).sqrt();
    (sigma > 0.0 && sigma.is_finite() && mu.is_finite()).then_some(Model::Lognormal { mu, sigma })
}

/// GPD by probability-weighted moments (Hosking & Wallis 1987) on the exceedances `y = x − u`:
/// with `a0 = E[y]` and `a1 = E[y·(1 − F(y))]` (unbiased estimators from ranks),
/// `k = a0/(a0 − 2a1) − 2`, `σ = 2·a0·a1/(a0 − 2a1)`, `ξ = −k`.
pub(super) fn fit_gpd(tail: &[(f64, u64)], m: u64, u: f64, n: u64) -> Option<Model> {
    if m < 2 {
        return None;
    }
    let mf = m as f64;
    let (mut a0, mut a1) = (0.0, 0.0);
    let mut rank = 1u64; // 1-based rank of the run's first sample
    for &(v, c) in tail {
        let y = v - u;
        let cf = c as f64;
        a0 += cf * y;
        // Σ_{r = rank}^{rank+c−1} (m − r)
        let w = cf * mf - cf * (2.0 * rank as f64 + cf - 1.0) / 2.0;
        a1 += y * w / (mf - 1.0);
        rank += c;
    }
    a0 /= mf;
    a1 /= mf;
    let d = a0 - 2.0 * a1;
    if !(d > 0.0 && a0 > 0.0) {
        return None;
    }
    let xi = -(a0 / d - 2.0);
    let scale = 2.0 * a0 * a1 / d;
    (xi.is_finite() && scale > 0.0 && scale.is_finite()).then_some(Model::GeneralizedPareto {
        threshold_ms: u,
        exceed_fraction: mf / n as f64,
        xi,
        scale_ms: scale,
    })
}

/// A model to judge: its name, how it was fitted, the fit (or why there is none), and the
/// Anderson–Darling value above which it is called poor.
pub(super) struct Candidate {
    pub(super) name: &'static str,
    pub(super) method: String,
    pub(super) model: Option<Model>,
    pub(super) why_not: String,
    pub(super) critical: f64,
}

/// The samples above the tail threshold `u`, as runs; `m` of them.
pub(super) struct Tail {
    pub(super) runs: Vec<(f64, u64)>,
    pub(super) m: u64,
    pub(super) u: f64,
}

pub(super) fn judge(c: Candidate, view: &View, tail: &Tail, target: f64) -> ModelFit {
    let Candidate {
        name,
        method,
        model,
        why_not,
        critical,
    } = c;
    let Tail { runs: tail, m, u } = tail;
    let (m, u) = (*m, *u);
    let Some(model) = model else {
        return ModelFit {
            name,
            method,
            fitted: None,
            ttl_ms: None,
            tail_threshold_ms: None,
            tail_samples: m,
            tail_ks: None,
            tail_ad: None,
            tail_ad_critical: critical,
            check: None,
            verdict: format!("not fitted: {why_not}"),
        };
    };
    let n = view.n();
    let ttl = model.ttl_for(target);
    // Conditional model CDF above u: 1 − S(x)/S(u).
    let s_u = model.survival(u).unwrap_or(0.0);
    let (ks, ad) = if m >= 2 && s_u > 0.0 {
        let (ks, ad) = tail_gof(tail, m, |x| 1.0 - model.survival(x).unwrap_or(s_u) / s_u);
        (Some(ks), Some(ad))
    } else {
        (None, None)
    };
    let check = (n >= 100).then(|| {
        let p = 1.0 - 10.0 / n as f64;
        let observed = view.quantile(p);
        let model_ms = model.ttl_for(1.0 - p).unwrap_or(f64::NAN);
        TailCheck {
            p,
            observed_ms: observed,
            model_ms,
        }
    });
    let direction = check.and_then(|c| {
        let r = c.model_ms / c.observed_ms;
        if r < 0.85 {
            Some(format!(
                "it puts the {:.4}-quantile at {} where the data has {}: it underestimates the \
                 tail, so its TTL is probably too short",
                c.p,
                fmt_ms(c.model_ms),
                fmt_ms(c.observed_ms)
            ))
        } else if r > 1.15 {
            Some(format!(
                "it puts the {:.4}-quantile at {} where the data has {}: it overestimates the \
                 tail, so its TTL is probably conservative",
                c.p,
                fmt_ms(c.model_ms),
                fmt_ms(c.observed_ms)
            ))
        } else {
            None
        }
    });
    let verdict = match (ad, ttl) {
        (_, None) => "fitted, but it gives no TTL for this target (the target lies inside the \
                      data above its threshold; use the distribution-free answer)"
            .to_string(),
        (None, Some(_)) => {
            "fit quality unknown (too few samples in the tail); treat its TTL as a guess"
                .to_string()
        }
        (Some(a), Some(_)) if a <= critical => format!(
            "consistent with the observed tail (AD {a:.2} ≤ {critical}); its TTL is a \
             reasonable extrapolation{}",
            direction
                .as_deref()
                .map(|d| format!(", although {d}"))
                .unwrap_or_default()
        ),
        (Some(a), Some(_)) => format!(
            "poor fit in the tail (AD {a:.2} > {critical}){}; do not rely on its TTL",
            direction
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
    };
    ModelFit {
        name,
        method,
        fitted: Some(model),
        ttl_ms: ttl,
        tail_threshold_ms: Some(u),
        tail_samples: m,
        tail_ks: ks,
        tail_ad: ad,
        tail_ad_critical: critical,
        check,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PWM recovers an exponential tail (ξ ≈ 0, σ ≈ mean) from its exact quantiles.
    #[test]
    fn gpd_pwm_recovers_exponential() {
        let m = 10_000u64;
        let tail: Vec<(f64, u64)> = (1..=m)
            .map(|i| (-30.0 * (1.0 - (i as f64 - 0.5) / m as f64).ln(), 1))
            .collect();
        let Some(Model::GeneralizedPareto { xi, scale_ms, .. }) = fit_gpd(&tail, m, 0.0, m * 10)
        else {
            panic!("not fitted");
        };
        assert!(xi.abs() < 0.02, "{xi}");
        assert!((scale_ms - 30.0).abs() < 1.0, "{scale_ms}");
    }

    /// The Anderson–Darling integral equals the textbook sum formula on distinct points.
    #[test]
    fn anderson_darling_matches_sum_formula() {
        let z: [f64; 6] = [0.05, 0.2, 0.33, 0.5, 0.61, 0.9];
        let m = z.len();
        let sum: f64 = (1..=m)
            .map(|i| (2 * i - 1) as f64 * (z[i - 1].ln() + (1.0 - z[m - i]).ln()))
            .sum();
        let expected = -(m as f64) - sum / m as f64;
        let runs: Vec<(f64, u64)> = z.iter().map(|v| (*v, 1)).collect();
        let (_, ad) = tail_gof(&runs, m as u64, |x| x);
        assert!((ad - expected).abs() < 1e-9, "{ad} vs {expected}");
    }
}
