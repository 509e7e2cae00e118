//! Latency distributions for simulated critical sections.
//! (Past 800 lines only through its tests: about 300 lines of them.)
//!
//! A distribution is written as text, the same in TOML profiles and on the command line. All
//! values are in **milliseconds** (`f64`); every duration in the text carries a unit (see
//! [`crate::model::units::parse_ms`]). Whitespace is allowed around tokens.
//!
//! The families and their forms (`constant(2ms)`, `lognormal(median=20ms,p99=120ms)`,
//! `mixture(0.99*constant(5ms),0.01*uniform(1s,3s))`, …) are listed, each with an example and
//! its meaning, in the table [`FAMILIES`] (`forms.rs`), which the parser's messages and the
//! book's page of distributions both read.
//!
//! `empirical` names a CSV file with a header line; the column defaults to `durationMs` and the
//! unit (`us`, `ms` or `s`) to `ms`. A path containing `,`, `(`, `)` or `=` can be written in
//! double quotes: `empirical(file="a,b.csv")`. Parsing never touches the file: [`Dist::load`]
//! reads it in a separate step, so a whole profile is validated before any I/O.
//!
//! - this file: the [`Dist`] type and its analytics (mean, survival, quantile, scaling) and the
//!   loading of `empirical` files (through [`crate::inputs`]);
//! - `forms.rs`: the table of families and their forms;
//! - `parse.rs`: the grammar, with errors that point at the column at fault;
//! - `sample.rs`: the [`Sampler`] that draws values.
//!
//! Past 800 lines only through its tests, about half the file, with the fixtures the tests of
//! `parse` and `sample` share.
//!
//! ```
//! use lockbench::Dist;
//! let d = Dist::parse("mixture(0.9*constant(5ms), 0.1*lognormal(median=20ms,p99=120ms))").unwrap();
//! assert!(d.mean_ms().unwrap() > 5.0);
//! assert_eq!(Dist::parse(&d.to_string()).unwrap(), d);
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::inputs::{self, DurationCsv, Unit};
use crate::math::{ln_gamma, normal_pdf, normal_quantile, normal_sf};

mod forms;
mod parse;
mod sample;

pub use forms::FAMILIES;
pub(crate) use sample::Sampler;

/// The standard normal quantile at 0.99 (used to fit `lognormal(median=…,p99=…)`).
pub(crate) const Z_P99: f64 = 2.326_347_874_040_840_8;

/// A latency distribution, in milliseconds.
///
/// Build one with [`Dist::parse`]; draw from it through [`Dist::sampler`].
#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    /// Always `ms`.
    Constant {
        /// The value (ms).
        ms: f64,
    },
    /// Uniform on `[lo, hi]`.
    Uniform {
        /// Lower bound (ms).
        lo: f64,
        /// Upper bound (ms), `≥ lo`.
        hi: f64,
    },
    /// A normal distribution `N(mean, sd²)` truncated to `(0, ∞)` (conditioned on being positive).
    Normal {
        /// Mean of the untruncated normal (ms); may be negative.
        mean: f64,
        /// Standard deviation of the untruncated normal (ms), `> 0`.
        sd: f64,
    },
    /// Log-normal: `ln(X in ms) ~ N(mu, sigma²)`.
    LogNormal {
        /// Mean of `ln(ms)`.
        mu: f64,
        /// Standard deviation of `ln(ms)`, `> 0`.
        sigma: f64,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean (ms), `> 0`.
        mean: f64,
    },
    /// Pareto type I: `P(X > x) = (scale / x)^shape` for `x ≥ scale`.
    Pareto {
        /// Minimum value (ms), `> 0`.
        scale: f64,
        /// Tail index, `> 0` (the mean is finite only for `shape > 1`).
        shape: f64,
    },
    /// Weibull: `P(X > x) = exp(-(x / scale)^shape)`.
    Weibull {
        /// Scale (ms), `> 0`.
        scale: f64,
        /// Shape, `> 0`.
        shape: f64,
    },
    /// A weighted mixture; weights are in `(0, 1]` and sum to 1.
    Mixture(Vec<(f64, Dist)>),
    /// Uniform resampling of recorded values.
    Empirical(Empirical),
}

/// `empirical(…)`: the CSV file and column whose recorded values are resampled.
///
/// The parser only names the file; [`Dist::load`] reads it. Until then `values` is `None`, the
/// analytics answer `None` and a sampler draws 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Empirical {
    /// The file as written; a relative path is resolved against the base given to
    /// [`Dist::load`].
    pub file: String,
    /// The header of the column read.
    pub column: String,
    /// Unit of the values in the file.
    pub unit: Unit,
    /// Factor applied to every value (`scale=`, and [`Dist::scaled`]).
    pub scale: f64,
    /// The values in ms, sorted ascending; `None` until loaded.
    pub values: Option<Arc<Vec<f64>>>,
}

/// Why a distribution text was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistError {
    /// The text does not follow the grammar, or a parameter is out of range.
    #[error("in `{spec}` at column {column}: {message}\n    {spec}\n    {caret}", caret = caret_line(*column))]
    Syntax {
        /// The full text that was parsed.
        spec: String,
        /// 1-based column (in characters) of the offending part.
        column: usize,
        /// What is wrong and what would be valid.
        message: String,
    },
    /// The data file of an `empirical(…)` distribution cannot be used.
    #[error("in `{spec}`: file `{file}`{location}: {message}", location = inputs::location(*line, column.as_deref()))]
    Data {
        /// The `empirical(…)` whose file it is, in canonical form.
        spec: String,
        /// The file, as resolved.
        file: String,
        /// 1-based line of the file, when the problem is on one line.
        line: Option<u64>,
        /// The CSV column, e.g. ``column 2 (`durationMs`)``, when the problem is in one cell.
        column: Option<String>,
        /// What is wrong.
        message: String,
    },
}
crate::exit::classify!(DistError => BadInput);

fn caret_line(column: usize) -> String {
    format!("{}^", " ".repeat(column.saturating_sub(1)))
}

impl Dist {
    /// Parses a distribution text (see the [module documentation](self) for the grammar).
    ///
    /// No file is read: an `empirical(…)` comes back naming its file, to be read by
    /// [`Dist::load`].
    pub fn parse(text: &str) -> Result<Dist, DistError> {
        parse::parse(text)
    }

    /// Reads the file of every `empirical(…)` in this distribution (also inside mixtures);
    /// relative paths resolve against `base` (e.g. the directory of the profile), or the current
    /// directory. Files already read are not read again; other variants come back unchanged.
    pub fn load(&self, base: Option<&Path>) -> Result<Dist, DistError> {
        Ok(match self {
            Dist::Empirical(e) if e.values.is_none() => Dist::Empirical(Empirical {
                values: Some(Arc::new(e.read(base)?)),
                ..e.clone()
            }),
            Dist::Mixture(parts) => Dist::Mixture(
                parts
                    .iter()
                    .map(|(w, d)| Ok((*w, d.load(base)?)))
                    .collect::<Result<_, DistError>>()?,
            ),
            other => other.clone(),
        })
    }

    /// Builds a sampler (prebuilt `rand_distr` objects; cheap to clone).
    ///
    /// A hand-built `Dist` with invalid parameters (which the parser refuses) does not panic:
    /// it degrades to a nearby well-defined sampler, e.g. a constant.
    pub fn sampler(&self) -> Sampler {
        Sampler::new(self)
    }

    /// The analytic mean in ms; `None` if infinite (e.g. Pareto with `shape ≤ 1`) or undefined.
    ///
    /// For the truncated normal this is the truncated mean `μ + σ·φ(α)/Q(α)`, `α = -μ/σ`.
    pub fn mean_ms(&self) -> Option<f64> {
        let m = match self {
            Dist::Constant { ms } => *ms,
            Dist::Uniform { lo, hi } => 0.5 * (lo + hi),
            Dist::Normal { mean, sd } => {
                let alpha = -mean / sd;
                let tail = normal_sf(alpha);
                if tail <= 0.0 {
                    return None;
                }
                mean + sd * normal_pdf(alpha) / tail
            }
            Dist::LogNormal { mu, sigma } => (mu + 0.5 * sigma * sigma).exp(),
            Dist::Exponential { mean } => *mean,
            Dist::Pareto { scale, shape } => {
                if *shape <= 1.0 {
                    return None;
                }
                shape * scale / (shape - 1.0)
            }
            Dist::Weibull { scale, shape } => scale * ln_gamma(1.0 + 1.0 / shape).exp(),
            Dist::Mixture(parts) => {
                let mut sum = 0.0;
                for (w, d) in parts {
                    sum += w * d.mean_ms()?;
                }
                sum
            }
            Dist::Empirical(e) => {
                let values = e.values.as_ref()?;
                if values.is_empty() {
                    return None;
                }
                values.iter().sum::<f64>() / values.len() as f64
            }
        };
        m.is_finite().then_some(m)
    }

    /// The analytic survival function `P(X > t_ms)`; `None` only if `t_ms` is NaN or an
    /// `empirical` part is not loaded.
    ///
    /// Exact for every variant; for `empirical` it is the fraction of values above `t_ms`,
    /// for mixtures the weighted sum of the components.
    pub fn survival(&self, t: f64) -> Option<f64> {
        if t.is_nan() {
            return None;
        }
        let s = match self {
            Dist::Constant { ms } => indicator(t < *ms),
            Dist::Uniform { lo, hi } => {
                if t < *lo {
                    1.0
                } else if t >= *hi {
                    0.0
                } else {
                    (hi - t) / (hi - lo)
                }
            }
            Dist::Normal { mean, sd } => {
                if t <= 0.0 {
                    1.0
                } else {
                    let tail = normal_sf(-mean / sd);
                    if tail > 0.0 {
                        (normal_sf((t - mean) / sd) / tail).min(1.0)
                    } else {
                        0.0
                    }
                }
            }
            Dist::LogNormal { mu, sigma } => {
                if t <= 0.0 {
                    1.0
                } else {
                    normal_sf((t.ln() - mu) / sigma)
                }
            }
            Dist::Exponential { mean } => {
                if t <= 0.0 {
                    1.0
                } else {
                    (-t / mean).exp()
                }
            }
            Dist::Pareto { scale, shape } => {
                if t < *scale {
                    1.0
                } else {
                    (scale / t).powf(*shape)
                }
            }
            Dist::Weibull { scale, shape } => {
                if t <= 0.0 {
                    1.0
                } else {
                    (-(t / scale).powf(*shape)).exp()
                }
            }
            Dist::Mixture(parts) => {
                let mut sum = 0.0;
                for (w, d) in parts {
                    sum += w * d.survival(t)?;
                }
                sum.clamp(0.0, 1.0)
            }
            Dist::Empirical(e) => {
                let values = e.values.as_ref()?;
                if values.is_empty() {
                    return Some(0.0);
                }
                let above = if values.is_sorted() {
                    values.len() - values.partition_point(|v| *v <= t)
                } else {
                    values.iter().filter(|v| **v > t).count()
                };
                above as f64 / values.len() as f64
            }
        };
        Some(s)
    }

    /// The `p`-quantile in ms (the smallest `x` with `P(X ≤ x) ≥ p`).
    ///
    /// Closed forms for every parametric variant; the empirical quantile for `empirical`;
    /// bisection on [`Dist::survival`] for mixtures. `None` for `p` outside `[0, 1]` and when the
    /// quantile is infinite (e.g. `p = 1` for unbounded distributions), or an `empirical` part
    /// is not loaded.
    pub fn quantile(&self, p: f64) -> Option<f64> {
        if !(0.0..=1.0).contains(&p) {
            return None;
        }
        let q = match self {
            Dist::Constant { ms } => *ms,
            Dist::Uniform { lo, hi } => lo + p * (hi - lo),
            Dist::Normal { mean, sd } => {
                let tail = normal_sf(-mean / sd);
                let z = -normal_quantile((1.0 - p) * tail);
                (mean + sd * z).max(0.0)
            }
            Dist::LogNormal { mu, sigma } => (mu + sigma * normal_quantile(p)).exp(),
            Dist::Exponential { mean } => -mean * (-p).ln_1p(),
            Dist::Pareto { scale, shape } => scale * (1.0 - p).powf(-1.0 / shape),
            Dist::Weibull { scale, shape } => scale * (-(-p).ln_1p()).powf(1.0 / shape),
            Dist::Mixture(parts) => return mixture_quantile(self, parts, p),
            Dist::Empirical(e) => {
                let values = e.values.as_ref()?;
                if values.is_empty() {
                    return None;
                }
                let n = values.len();
                let k = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
                if values.is_sorted() {
                    values[k]
                } else {
                    let mut sorted = values.to_vec();
                    sorted.sort_by(f64::total_cmp);
                    sorted[k]
                }
            }
        };
        q.is_finite().then_some(q)
    }

    /// Multiplies every time value by `factor` (for log-normal, `mu += ln(factor)`).
    ///
    /// `factor` must be finite and `≥ 0`; `0` gives `constant(0ms)`; any other factor returns
    /// an unchanged copy. For `empirical`, the values (if loaded) are multiplied and so is its
    /// `scale=`, so the text still describes the result (up to rounding).
    pub fn scaled(&self, factor: f64) -> Dist {
        if !factor.is_finite() || factor < 0.0 {
            return self.clone();
        }
        if factor == 0.0 {
            return Dist::Constant { ms: 0.0 };
        }
        match self {
            Dist::Constant { ms } => Dist::Constant { ms: ms * factor },
            Dist::Uniform { lo, hi } => Dist::Uniform {
                lo: lo * factor,
                hi: hi * factor,
            },
            Dist::Normal { mean, sd } => Dist::Normal {
                mean: mean * factor,
                sd: sd * factor,
            },
            Dist::LogNormal { mu, sigma } => Dist::LogNormal {
                mu: mu + factor.ln(),
                sigma: *sigma,
            },
            Dist::Exponential { mean } => Dist::Exponential {
                mean: mean * factor,
            },
            Dist::Pareto { scale, shape } => Dist::Pareto {
                scale: scale * factor,
                shape: *shape,
            },
            Dist::Weibull { scale, shape } => Dist::Weibull {
                scale: scale * factor,
                shape: *shape,
            },
            Dist::Mixture(parts) => {
                Dist::Mixture(parts.iter().map(|(w, d)| (*w, d.scaled(factor))).collect())
            }
            Dist::Empirical(e) => Dist::Empirical(Empirical {
                scale: e.scale * factor,
                values: e
                    .values
                    .as_ref()
                    .map(|v| Arc::new(v.iter().map(|x| x * factor).collect())),
                ..e.clone()
            }),
        }
    }

    /// `constant(0ms)`: nothing to draw (no pause, a timer on time).
    pub fn is_zero(&self) -> bool {
        matches!(self, Dist::Constant { ms } if *ms == 0.0)
    }

    /// `false` for `empirical` and for mixtures that contain one.
    pub fn is_parametric(&self) -> bool {
        match self {
            Dist::Empirical(_) => false,
            Dist::Mixture(parts) => parts.iter().all(|(_, d)| d.is_parametric()),
            _ => true,
        }
    }
}

fn indicator(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// Bisection on the mixture's survival function, bracketed by the components' quantiles.
fn mixture_quantile(whole: &Dist, parts: &[(f64, Dist)], p: f64) -> Option<f64> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for (_, d) in parts {
        let q = d.quantile(p)?;
        lo = lo.min(q);
        hi = hi.max(q);
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    // Invariant: P(X ≤ lo) < p ≤ P(X ≤ hi), except that `lo` may already be the answer.
    if whole.survival(lo)? <= 1.0 - p {
        return Some(lo);
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if whole.survival(mid)? <= 1.0 - p {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

impl fmt::Display for Dist {
    /// Canonical text that [`Dist::parse`] turns back into an equal `Dist`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Exact but short numbers: `1e300`, not 301 digits.
        let x = |v: &f64| crate::model::units::fmt_exact(*v);
        match self {
            Dist::Constant { ms } => write!(f, "constant({}ms)", x(ms)),
            Dist::Uniform { lo, hi } => write!(f, "uniform(min={}ms,max={}ms)", x(lo), x(hi)),
            Dist::Normal { mean, sd } => write!(f, "normal(mean={}ms,sd={}ms)", x(mean), x(sd)),
            Dist::LogNormal { mu, sigma } => {
                write!(f, "lognormal(mu={},sigma={})", x(mu), x(sigma))
            }
            Dist::Exponential { mean } => write!(f, "exponential(mean={}ms)", x(mean)),
            Dist::Pareto { scale, shape } => {
                write!(f, "pareto(scale={}ms,shape={})", x(scale), x(shape))
            }
            Dist::Weibull { scale, shape } => {
                write!(f, "weibull(scale={}ms,shape={})", x(scale), x(shape))
            }
            Dist::Mixture(parts) => {
                f.write_str("mixture(")?;
                for (i, (w, d)) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}*{d}", x(w))?;
                }
                f.write_str(")")
            }
            Dist::Empirical(e) => write!(f, "empirical({e})"),
        }
    }
}

impl serde::Serialize for Dist {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Dist {
    /// Parses the string form; `empirical` files are not read (see [`Dist::load`]).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Dist::parse(&text).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------------------------
// Empirical data
// ---------------------------------------------------------------------------------------------

/// Quotes a value when it would not survive the argument grammar unquoted.
fn quote_if_needed(v: &str) -> String {
    let plain = !v.is_empty()
        && v.trim() == v
        && !v.starts_with('"')
        && !v.contains([',', '(', ')', '=', '"']);
    if plain {
        v.to_string()
    } else {
        format!("\"{v}\"")
    }
}

impl fmt::Display for Empirical {
    /// The canonical arguments: `file=…,column=…[,unit=…][,scale=…]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "file={},column={}",
            quote_if_needed(&self.file),
            quote_if_needed(&self.column)
        )?;
        match self.unit {
            Unit::Us => f.write_str(",unit=us")?,
            Unit::Ms => {}
            Unit::S => f.write_str(",unit=s")?,
        }
        if self.scale != 1.0 {
            write!(f, ",scale={}", crate::model::units::fmt_exact(self.scale))?;
        }
        Ok(())
    }
}

impl Empirical {
    /// Reads the column from the file; values in ms, sorted ascending.
    fn read(&self, base: Option<&Path>) -> Result<Vec<f64>, DistError> {
        let path = match base {
            Some(b) if Path::new(&self.file).is_relative() => b.join(&self.file),
            _ => PathBuf::from(&self.file),
        };
        let fail = |p: inputs::Problem| DistError::Data {
            spec: format!("empirical({self})"),
            file: path.display().to_string(),
            line: p.line,
            column: p.column,
            message: p.message,
        };
        let file = inputs::open(&path, inputs::FileKind::Samples).map_err(|e| {
            fail(inputs::Problem {
                line: None,
                column: None,
                message: e.to_string(),
            })
        })?;
        let csv = DurationCsv::new(file).map_err(fail)?;
        let column = csv.column(&self.column, "column=…").map_err(fail)?;
        csv.read(&column, self.unit.ms() * self.scale, |_| false)
            .map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    //! Shared fixtures (`pub(super)`, used by the tests of `parse` and `sample` too) and the
    //! tests of the analytics and of loading `empirical` files.
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Parses and loads (reads the `empirical` files, relative to the current directory).
    pub(super) fn loaded(text: &str) -> Result<Dist, DistError> {
        Dist::parse(text)?.load(None)
    }

    pub(super) fn draws(d: &Dist, seed: u64, n: usize) -> Vec<f64> {
        let s = d.sampler();
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n).map(|_| s.sample_ms(&mut rng)).collect()
    }

    pub(super) fn mean_sd(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
        (m, v.sqrt())
    }

    /// A file in the temp directory, removed when dropped.
    pub(super) struct TempFile(PathBuf);

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    impl std::ops::Deref for TempFile {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    /// Writes `content` to a uniquely named CSV file in the temp directory.
    pub(super) fn temp_csv(tag: &str, content: &str) -> TempFile {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "lockbench-dist-{}-{tag}-{n}.csv",
            std::process::id()
        ));
        std::fs::write(&path, content).expect("write temp csv");
        TempFile(path)
    }

    pub(super) fn empirical_fixture() -> (TempFile, Dist) {
        let mut csv = String::from("worker,durationMs\n");
        for i in 0..500 {
            // A skewed set: many short values, a few long ones.
            let v = if i % 50 == 0 {
                400.0 + i as f64
            } else {
                (i % 37) as f64 * 1.5
            };
            csv.push_str(&format!("{i},{v}\n"));
        }
        let path = temp_csv("fixture", &csv);
        let d = loaded(&format!("empirical(file={})", path.display())).unwrap();
        (path, d)
    }

    /// One or more of each variant; the file keeps the empirical source readable.
    pub(super) fn all_dists() -> (Vec<Dist>, TempFile) {
        let (file, emp) = empirical_fixture();
        let mut v: Vec<Dist> = [
            "constant(2ms)",
            "uniform(70ms,110ms)",
            "normal(mean=50ms,sd=10ms)",
            "normal(mean=5ms,sd=10ms)",
            "normal(mean=-20ms,sd=5ms)",
            "lognormal(median=20ms,p99=120ms)",
            "lognormal(mu=3.0,sigma=0.5)",
            "lognormal(mean=25ms,sd=10ms)",
            "exponential(mean=30ms)",
            "pareto(scale=10ms,shape=5)",
            "weibull(scale=20ms,shape=1.5)",
            "weibull(scale=20ms,shape=0.7)",
            "mixture(0.99*constant(5ms),0.01*uniform(1s,3s))",
            "mixture(0.5*exponential(10ms), 0.5*mixture(0.3*normal(mean=40ms,sd=5ms),0.7*weibull(scale=8ms,shape=2)))",
        ]
        .iter()
        .map(|t| Dist::parse(t).unwrap())
        .collect();
        v.push(emp);
        (v, file)
    }

    /// Parsing an `empirical(…)` reads no file, so a profile is validated before any I/O;
    /// `load` reads it (inside mixtures too), and only then is a missing file refused.
    #[test]
    fn empirical_files_are_read_by_load_not_by_parse() {
        let d = Dist::parse("mixture(0.5*constant(1ms),0.5*empirical(/nonexistent/lb/nope.csv))")
            .unwrap();
        assert_eq!(d.mean_ms(), None);
        let e = d.load(None).unwrap_err().to_string();
        assert!(
            e.contains("/nonexistent/lb/nope.csv") && e.contains("cannot read the duration file"),
            "{e}"
        );
        let path = temp_csv("load", "durationMs\n2\n4\n");
        let text = format!(
            "mixture(0.5*constant(1ms),0.5*empirical({}))",
            path.display()
        );
        let d = Dist::parse(&text).unwrap();
        // What the file holds when it is loaded counts.
        std::fs::write(&*path, "durationMs\n6\n").unwrap();
        assert_eq!(d.load(None).unwrap().mean_ms(), Some(3.5));
    }

    /// `survival(quantile(p)) = 1 - p` for continuous variants, including a mixture (bisection).
    #[test]
    fn quantile_inverts_survival() {
        for text in [
            "uniform(70ms,110ms)",
            "normal(mean=5ms,sd=10ms)",
            "normal(mean=-20ms,sd=5ms)",
            "lognormal(mu=3.0,sigma=0.5)",
            "exponential(30ms)",
            "pareto(scale=10ms,shape=2.5)",
            "weibull(scale=20ms,shape=1.5)",
            "mixture(0.5*exponential(10ms),0.5*lognormal(median=50ms,p99=300ms))",
        ] {
            let d = Dist::parse(text).unwrap();
            for p in [0.01, 0.25, 0.5, 0.9, 0.999] {
                let q = d.quantile(p).unwrap();
                let s = d.survival(q).unwrap();
                assert!(
                    (s - (1.0 - p)).abs() < 1e-9,
                    "{text}: p={p} q={q} survival {s}"
                );
            }
            assert_eq!(d.quantile(1.5), None);
        }
        let c = Dist::parse("constant(3ms)").unwrap();
        assert_eq!(c.quantile(0.3), Some(3.0));
        assert_eq!(c.survival(3.0), Some(0.0));
        assert_eq!(c.survival(2.999), Some(1.0));
        let m = Dist::parse("mixture(0.99*constant(5ms),0.01*uniform(1s,3s))").unwrap();
        assert_eq!(m.quantile(0.5), Some(5.0));
        assert!((m.survival(2000.0).unwrap() - 0.005).abs() < 1e-15);
        assert_eq!(Dist::parse("exponential(1ms)").unwrap().quantile(1.0), None);
        assert_eq!(
            Dist::parse("pareto(scale=1ms,shape=0.5)")
                .unwrap()
                .mean_ms(),
            None
        );
    }

    /// The empirical distribution's tail and quantiles are those of the data.
    #[test]
    fn empirical_matches_its_data() {
        let path = temp_csv("small", "durationMs,other\n3,x\n1,y\n2,z\n10,w\n");
        let d = loaded(&format!("empirical({})", path.display())).unwrap();
        assert_eq!(d.mean_ms(), Some(4.0));
        assert_eq!(d.survival(2.0), Some(0.5));
        assert_eq!(d.quantile(0.0), Some(1.0));
        assert_eq!(d.quantile(0.5), Some(2.0));
        assert_eq!(d.quantile(0.51), Some(3.0));
        assert_eq!(d.quantile(1.0), Some(10.0));
        assert!(!d.is_parametric());
        let us = loaded(&format!("empirical(file={},unit=us)", path.display())).unwrap();
        assert_eq!(us.mean_ms(), Some(0.004));
    }

    /// Serde uses the text form (e.g. `dist = "lognormal(median=20ms,p99=120ms)"` in a profile).
    #[test]
    fn serde_uses_the_text_form() {
        let d: Dist = serde_json::from_str("\"lognormal(median=20ms,p99=120ms)\"").unwrap();
        assert!(matches!(d, Dist::LogNormal { .. }));
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<Dist>(&json).unwrap(), d);
        let err = serde_json::from_str::<Dist>("\"gamma(2ms)\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown distribution `gamma`"), "{err}");
    }

    /// `scaled` multiplies every time value; log-normal shifts mu; the text follows.
    #[test]
    fn scaling_multiplies_time_values() {
        let (ds, _file) = all_dists();
        for d in ds {
            let s = d.scaled(2.5);
            let (m, ms) = (d.mean_ms().unwrap(), s.mean_ms().unwrap());
            assert!((ms / m - 2.5).abs() < 1e-9 || m == 0.0, "{d}: {m} -> {ms}");
            let q = d.quantile(0.9).unwrap();
            let qs = s.quantile(0.9).unwrap();
            assert!(
                (qs - 2.5 * q).abs() <= 1e-9 * qs.max(1.0),
                "{d}: {q} -> {qs}"
            );
            let back = loaded(&s.to_string()).unwrap();
            assert!((back.mean_ms().unwrap() / ms - 1.0).abs() < 1e-12, "{s}");
        }
        assert_eq!(
            Dist::parse("lognormal(mu=1,sigma=0.5)")
                .unwrap()
                .scaled(1.0),
            Dist::LogNormal {
                mu: 1.0,
                sigma: 0.5
            }
        );
    }

    fn data_err(content: &str, tag: &str, extra: &str) -> (DistError, TempFile) {
        let path = temp_csv(tag, content);
        let e = loaded(&format!("empirical(file={}{extra})", path.display())).unwrap_err();
        (e, path)
    }

    /// Bad CSV files are refused naming the file, the line and the column.
    #[test]
    fn empirical_csv_errors_name_file_line_and_column() {
        let (e, path) = data_err("id,durationMs\n1,2.5\n2,abc\n", "nonnum", "");
        let text = e.to_string();
        assert!(
            matches!(&e, DistError::Data { line: Some(3), column: Some(c), .. } if c.contains("column 2")),
            "{e:?}"
        );
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(
            text.contains("line 3, column 2 (`durationMs`): `abc` is not a finite number"),
            "{text}"
        );

        let (e, _) = data_err("id,durationMs\n1,2.5\n2,-4\n", "neg", "");
        assert!(matches!(&e, DistError::Data { line: Some(3), .. }), "{e:?}");
        assert!(e.to_string().contains("`-4` is negative"), "{e}");

        let (e, _) = data_err("id,latency\n1,2.5\n", "nocol", "");
        assert!(matches!(&e, DistError::Data { line: Some(1), .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("no column `durationMs`; its columns are `id`, `latency`"),
            "{e}"
        );

        let (e, _) = data_err("", "empty", "");
        assert!(e.to_string().contains("the file is empty"), "{e}");

        let (e, _) = data_err("durationMs\n", "norows", "");
        assert!(e.to_string().contains("no rows"), "{e}");

        let (e, _) = data_err("a,durationMs\n1,2\n3\n", "short", "");
        assert!(matches!(&e, DistError::Data { line: Some(3), .. }), "{e:?}");

        let e = loaded("empirical(/nonexistent/lockbench/nope.csv)").unwrap_err();
        assert!(
            e.to_string().contains("/nonexistent/lockbench/nope.csv"),
            "{e}"
        );
    }

    /// Empirical values obey the same 1000h bound as `constant(…)` (1.8e308 ms used to be
    /// accepted), in every unit and after `scale=`; exactly 1000h is accepted.
    #[test]
    fn empirical_values_share_the_duration_bound() {
        for (csv, name, args) in [
            ("durationMs\n1\n1.7e308\n", "huge", ""),
            ("durationMs\n3600000001\n", "over", ""),
            ("durationMs\n3600001\n", "over_s", ",unit=s"),
            ("durationMs\n3600000000\n", "over_scale", ",scale=2"),
        ] {
            let (e, _) = data_err(csv, name, args);
            assert!(
                matches!(&e, DistError::Data { line: Some(_), .. }),
                "{name}: {e:?}"
            );
            assert!(e.to_string().contains("at most 1000h"), "{name}: {e}");
        }
        let path = temp_csv("max", "durationMs\n3600000000\n");
        assert!(loaded(&format!("empirical(file={})", path.display())).is_ok());
        assert!(Dist::parse("constant(1001h)").is_err());
    }

    /// Relative empirical paths resolve against the base directory.
    #[test]
    fn empirical_paths_resolve_against_base() {
        let path = temp_csv("base", "durationMs\n4\n");
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let d = Dist::parse(&format!("empirical({name})"))
            .and_then(|d| d.load(Some(&std::env::temp_dir())))
            .unwrap();
        assert_eq!(d.mean_ms(), Some(4.0));
        assert_eq!(
            d.to_string(),
            format!("empirical(file={name},column=durationMs)")
        );
    }
}
