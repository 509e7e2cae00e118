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
            Dist::Empirical { values, .. } => SamplerKind::Empirical(Arc::clone(values)),
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
