//! Drawing values from a [`Dist`]: prebuilt `rand_distr` samplers, exact truncation of the
//! normal, and safe fallbacks for hand-built distributions the parser would refuse.

use std::sync::Arc;

use rand::distr::weighted::WeightedIndex;
use rand_distr::{Distribution, Exp, LogNormal, Normal, OpenClosed01, Pareto, Uniform, Weibull};

use super::Dist;
use crate::math::{normal_quantile, normal_sf};

/// Draws values (ms) from a [`Dist`]; built by [`Dist::sampler`], cheap to clone.
#[derive(Debug, Clone)]
pub struct Sampler {
    kind: SamplerKind,
}

impl Sampler {
    pub(super) fn new(d: &Dist) -> Sampler {
        Sampler {
            kind: SamplerKind::new(d),
        }
    }
}

#[derive(Debug, Clone)]
enum SamplerKind {
    Constant(f64),
    Uniform(Uniform<f64>),
    /// Truncated normal: rejection from `normal` when `tail = P(X > 0)` is not small,
    /// otherwise inverse transform restricted to the positive part.
    Normal {
        normal: Normal<f64>,
        mean: f64,
        sd: f64,
        tail: f64,
    },
    LogNormal(LogNormal<f64>),
    Exponential(Exp<f64>),
    Pareto(Pareto<f64>),
    Weibull(Weibull<f64>),
    Mixture {
        index: WeightedIndex<f64>,
        parts: Arc<[Sampler]>,
    },
    Empirical(Arc<Vec<f64>>),
}

/// Below this acceptance rate, the truncated normal uses inverse transform instead of rejection.
const REJECTION_MIN_ACCEPTANCE: f64 = 0.05;
/// Rejection attempts before falling back to inverse transform (keeps each draw bounded; both
/// methods are exact, so the fallback does not bias the result).
const REJECTION_MAX_TRIES: usize = 1000;

fn nonneg(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        0.0
    } else {
        x.min(f64::MAX)
    }
}

impl SamplerKind {
    fn new(d: &Dist) -> SamplerKind {
        match d {
            Dist::Constant { ms } => SamplerKind::Constant(nonneg(*ms)),
            Dist::Uniform { lo, hi } => {
                if lo == hi {
                    return SamplerKind::Constant(nonneg(*lo));
                }
                match Uniform::new_inclusive(lo.min(*hi), lo.max(*hi)) {
                    Ok(u) => SamplerKind::Uniform(u),
                    Err(_) => SamplerKind::Constant(nonneg(*lo)),
                }
            }
            Dist::Normal { mean, sd } => {
                let tail = normal_sf(-mean / sd);
                match Normal::new(*mean, *sd) {
                    Ok(normal) if *sd > 0.0 && tail > 0.0 => SamplerKind::Normal {
                        normal,
                        mean: *mean,
                        sd: *sd,
                        tail,
                    },
                    _ => SamplerKind::Constant(nonneg(*mean)),
                }
            }
            Dist::LogNormal { mu, sigma } => match LogNormal::new(*mu, *sigma) {
                Ok(l) if *sigma > 0.0 => SamplerKind::LogNormal(l),
                _ => SamplerKind::Constant(nonneg(mu.exp())),
            },
            Dist::Exponential { mean } => match Exp::new(1.0 / mean) {
                Ok(e) if *mean > 0.0 && mean.is_finite() => SamplerKind::Exponential(e),
                _ => SamplerKind::Constant(nonneg(*mean)),
            },
            Dist::Pareto { scale, shape } => match Pareto::new(*scale, *shape) {
                Ok(p) => SamplerKind::Pareto(p),
                Err(_) => SamplerKind::Constant(nonneg(*scale)),
            },
            Dist::Weibull { scale, shape } => match Weibull::new(*scale, *shape) {
                Ok(w) => SamplerKind::Weibull(w),
                Err(_) => SamplerKind::Constant(nonneg(*scale)),
            },
            Dist::Mixture(parts) => {
                let weights = parts
                    .iter()
                    .map(|(w, _)| if w.is_finite() && *w > 0.0 { *w } else { 0.0 });
                match WeightedIndex::new(weights) {
                    Ok(index) => SamplerKind::Mixture {
                        index,
                        parts: parts.iter().map(|(_, d)| d.sampler()).collect(),
                    },
                    Err(_) => SamplerKind::Constant(0.0),
                }
            }
            // Not loaded: no values, so draws are 0 (a `Plan` always holds loaded ones).
            Dist::Empirical(e) => SamplerKind::Empirical(e.values.clone().unwrap_or_default()),
        }
    }
}

impl Sampler {
    /// Draws one value in ms; never negative, never NaN.
    pub fn sample_ms<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let x = match &self.kind {
            SamplerKind::Constant(ms) => *ms,
            SamplerKind::Uniform(u) => u.sample(rng),
            SamplerKind::Normal {
                normal,
                mean,
                sd,
                tail,
            } => {
                if *tail >= REJECTION_MIN_ACCEPTANCE {
                    for _ in 0..REJECTION_MAX_TRIES {
                        let x = normal.sample(rng);
                        if x > 0.0 {
                            return x;
                        }
                    }
                }
                // Inverse transform on the positive part: P(Z > z) = v·tail, v ∈ (0, 1].
                let v: f64 = OpenClosed01.sample(rng);
                let z = -normal_quantile(v * tail);
                mean + sd * z
            }
            SamplerKind::LogNormal(l) => l.sample(rng),
            SamplerKind::Exponential(e) => e.sample(rng),
            SamplerKind::Pareto(p) => p.sample(rng),
            SamplerKind::Weibull(w) => w.sample(rng),
            SamplerKind::Mixture { index, parts } => {
                let i = index.sample(rng);
                parts.get(i).map_or(0.0, |s| s.sample_ms(rng))
            }
            SamplerKind::Empirical(values) => {
                use rand::seq::IndexedRandom;
                values.choose(rng).copied().unwrap_or(0.0)
            }
        };
        nonneg(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::tests::{all_dists, draws, mean_sd};
    use crate::dist::{Empirical, Z_P99};
    use crate::inputs::Unit;

    const N: usize = 200_000;

    /// Every sampler's sample mean is within 5 standard errors of the analytic mean.
    #[test]
    fn sample_means_match_analytic_means() {
        let (ds, _file) = all_dists();
        for (i, d) in ds.iter().enumerate() {
            let xs = draws(d, 42 + i as u64, N);
            assert!(xs.iter().all(|x| x.is_finite() && *x >= 0.0), "{d}");
            let (m, sd) = mean_sd(&xs);
            let want = d.mean_ms().unwrap();
            let tol = 5.0 * sd / (N as f64).sqrt() + 1e-9 * want.abs();
            assert!(
                (m - want).abs() <= tol,
                "{d}: sample mean {m}, analytic {want}, tol {tol}"
            );
        }
    }

    /// `lognormal(median=20ms,p99=120ms)` has the right mu/sigma, and its samples have that
    /// median and p99 (within 2%); `lognormal(mean=…,sd=…)` reproduces its mean and sd.
    #[test]
    fn lognormal_fits_median_and_p99() {
        let d = Dist::parse("lognormal(median=20ms, p99=120ms)").unwrap();
        let Dist::LogNormal { mu, sigma } = d else {
            panic!("not a lognormal: {d:?}")
        };
        assert!((mu - 20f64.ln()).abs() < 1e-12);
        assert!((sigma - 6f64.ln() / Z_P99).abs() < 1e-12);
        assert!((d.quantile(0.5).unwrap() - 20.0).abs() < 1e-9);
        assert!((d.quantile(0.99).unwrap() - 120.0).abs() < 1e-9);
        let mut xs = draws(&d, 7, N);
        xs.sort_by(f64::total_cmp);
        let median = xs[N / 2];
        let p99 = xs[N * 99 / 100];
        assert!((median / 20.0 - 1.0).abs() < 0.02, "median {median}");
        assert!((p99 / 120.0 - 1.0).abs() < 0.02, "p99 {p99}");

        let d = Dist::parse("lognormal(mean=25ms,sd=10ms)").unwrap();
        let (m, sd) = mean_sd(&draws(&d, 8, N));
        assert!((d.mean_ms().unwrap() - 25.0).abs() < 1e-9);
        assert!(
            (m - 25.0).abs() < 5.0 * 10.0 / (N as f64).sqrt(),
            "mean {m}"
        );
        assert!((sd / 10.0 - 1.0).abs() < 0.02, "sd {sd}");
    }

    /// The fraction of samples above t matches `survival(t)` within 5 standard errors, for every
    /// variant (so the sampler and the analytic tail agree).
    #[test]
    fn sample_tail_fractions_match_survival() {
        let (ds, _file) = all_dists();
        for (i, d) in ds.iter().enumerate() {
            let xs = draws(d, 1000 + i as u64, N);
            let mut ts = vec![d.mean_ms().unwrap()];
            ts.extend([0.5, 0.9, 0.99].iter().filter_map(|p| d.quantile(*p)));
            for t in ts {
                let s = d.survival(t).unwrap();
                let frac = xs.iter().filter(|x| **x > t).count() as f64 / N as f64;
                let se = (s * (1.0 - s) / N as f64).sqrt();
                assert!(
                    (frac - s).abs() <= 5.0 * se + 1e-12,
                    "{d} at t={t}: sample {frac}, survival {s}, se {se}"
                );
            }
        }
    }

    /// Same seed gives the same sequence; a different seed gives a different one.
    #[test]
    fn seeds_are_reproducible() {
        let (ds, _file) = all_dists();
        for d in ds.iter().filter(|d| !matches!(d, Dist::Constant { .. })) {
            let a = draws(d, 99, 100);
            assert_eq!(a, draws(d, 99, 100), "{d}");
            assert_ne!(a, draws(d, 100, 100), "{d}");
        }
    }

    /// Hand-built invalid distributions still sample finite non-negative values.
    #[test]
    fn invalid_hand_built_dists_sample_safely() {
        let bad = [
            Dist::Uniform { lo: 5.0, hi: 1.0 },
            Dist::Normal {
                mean: -1e9,
                sd: 1.0,
            },
            Dist::Normal { mean: 1.0, sd: 0.0 },
            Dist::LogNormal {
                mu: f64::NAN,
                sigma: -1.0,
            },
            Dist::Exponential { mean: -3.0 },
            Dist::Pareto {
                scale: 0.0,
                shape: 1.0,
            },
            Dist::Weibull {
                scale: 1.0,
                shape: f64::NAN,
            },
            Dist::Mixture(vec![]),
            Dist::Empirical(Empirical {
                file: "x".into(),
                column: "durationMs".into(),
                unit: Unit::Ms,
                scale: 1.0,
                values: Some(Arc::new(vec![])),
            }),
        ];
        for d in &bad {
            for x in draws(d, 1, 100) {
                assert!(x.is_finite() && x >= 0.0, "{d:?}: {x}");
            }
        }
    }
}
