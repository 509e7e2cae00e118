//! Latency distributions for simulated critical sections.
//!
//! A distribution is written as text, the same in TOML profiles and on the command line. All
//! values are in **milliseconds** (`f64`); every duration in the text carries a unit (see
//! [`crate::units::parse_ms`]). Whitespace is allowed around tokens.
//!
//! | text | meaning |
//! |------|---------|
//! | `constant(2ms)`, `constant(value=2ms)` | always the same value |
//! | `uniform(70ms,110ms)`, `uniform(min=70ms,max=110ms)` | uniform on `[min, max]` |
//! | `normal(mean=50ms,sd=10ms)` | normal truncated at 0 (exact: negatives are resampled) |
//! | `lognormal(median=20ms,p99=120ms)` | log-normal fitted to a median and a 99th percentile |
//! | `lognormal(mu=3.0,sigma=0.5)` | log-normal with `ln(ms) ~ N(mu, sigma²)` |
//! | `lognormal(mean=25ms,sd=10ms)` | log-normal with the given mean and standard deviation |
//! | `exponential(30ms)`, `exponential(mean=30ms)`, `exponential(rate=0.1/ms)` | exponential |
//! | `pareto(scale=10ms,shape=2.5)` | Pareto type I (`x ≥ scale`) |
//! | `weibull(scale=20ms,shape=1.5)` | Weibull |
//! | `mixture(0.99*constant(5ms),0.01*uniform(1s,3s))` | weighted mixture (weights sum to 1, may nest) |
//! | `empirical(runs.csv)`, `empirical(file=runs.csv,column=durationMs,unit=ms)` | resampling of recorded values |
//!
//! `empirical` reads a CSV file with a header line when the text is parsed; the column defaults
//! to `durationMs` and the unit (`us`, `ms` or `s`) to `ms`. A path containing `,`, `(`, `)`
//! or `=` can be written in double quotes: `empirical(file="a,b.csv")`.
//!
//! ```
//! use lockbench::dist::Dist;
//! let d = Dist::parse("mixture(0.9*constant(5ms), 0.1*lognormal(median=20ms,p99=120ms))").unwrap();
//! assert!(d.mean_ms().unwrap() > 5.0);
//! assert_eq!(Dist::parse(&d.to_string()).unwrap(), d);
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::math::{ln_gamma, normal_pdf, normal_quantile, normal_sf};

mod parse;
mod sample;

pub use sample::Sampler;

/// The standard normal quantile at 0.99 (used to fit `lognormal(median=…,p99=…)`).
pub const Z_P99: f64 = 2.326_347_874_040_840_8;

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
    Empirical {
        /// The canonical argument text (`file=…,column=…[,unit=…][,scale=…]`), printed by
        /// `Display` as `empirical(<source>)`. The file is kept as written (relative paths are
        /// resolved against the base given to [`Dist::parse_with_base`]).
        source: String,
        /// The values in ms, sorted ascending when produced by the parser.
        values: Arc<Vec<f64>>,
    },
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
    #[error("in `{spec}`: file `{file}`{location}: {message}", location = data_location(*line, column.as_deref()))]
    Data {
        /// The full text that was parsed.
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

fn caret_line(column: usize) -> String {
    format!("{}^", " ".repeat(column.saturating_sub(1)))
}

fn data_location(line: Option<u64>, column: Option<&str>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(", line {l}, {c}"),
        (Some(l), None) => format!(", line {l}"),
        (None, Some(c)) => format!(", {c}"),
        (None, None) => String::new(),
    }
}

impl Dist {
    /// Parses a distribution text (see the [module documentation](self) for the grammar).
    ///
    /// `empirical(…)` files are read now; relative paths are resolved against the current
    /// directory.
    pub fn parse(text: &str) -> Result<Dist, DistError> {
        Dist::parse_with_base(text, None)
    }

    /// Parses a distribution text, resolving relative `empirical(…)` paths against `base`
    /// (e.g. the directory of the profile that contains the text).
    pub fn parse_with_base(text: &str, base: Option<&Path>) -> Result<Dist, DistError> {
        parse::parse(text, base)
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
            Dist::Empirical { values, .. } => {
                if values.is_empty() {
                    return None;
                }
                values.iter().sum::<f64>() / values.len() as f64
            }
        };
        m.is_finite().then_some(m)
    }

    /// The analytic survival function `P(X > t_ms)`; `None` only if `t_ms` is NaN.
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
            Dist::Empirical { values, .. } => {
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
    /// quantile is infinite (e.g. `p = 1` for unbounded distributions).
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
            Dist::Empirical { values, .. } => {
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
    /// an unchanged copy. For `empirical`, the values are multiplied and the source text gets a
    /// `scale=` argument, so the text still describes the result (up to rounding).
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
            Dist::Empirical { source, values } => {
                let source = match EmpiricalSpec::from_source(source) {
                    Some(mut spec) => {
                        spec.scale *= factor;
                        spec.to_string()
                    }
                    None => format!("{source},scale={}", crate::units::fmt_exact(factor)),
                };
                Dist::Empirical {
                    source,
                    values: Arc::new(values.iter().map(|v| v * factor).collect()),
                }
            }
        }
    }

    /// `false` for `empirical` and for mixtures that contain one.
    pub fn is_parametric(&self) -> bool {
        match self {
            Dist::Empirical { .. } => false,
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
        let x = |v: &f64| crate::units::fmt_exact(*v);
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
            Dist::Empirical { source, .. } => write!(f, "empirical({source})"),
        }
    }
}

impl serde::Serialize for Dist {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Dist {
    /// Parses the string form (relative `empirical` paths resolve against the current
    /// directory; re-parse with [`Dist::parse_with_base`] to resolve them elsewhere).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Dist::parse(&text).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------------------------
// Empirical data
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EmpiricalUnit {
    Us,
    Ms,
    S,
}

impl EmpiricalUnit {
    fn factor(self) -> f64 {
        match self {
            EmpiricalUnit::Us => 1e-3,
            EmpiricalUnit::Ms => 1.0,
            EmpiricalUnit::S => 1e3,
        }
    }
}

/// The arguments of `empirical(…)`; its `Display` is the canonical `source` text.
#[derive(Debug, Clone, PartialEq)]
struct EmpiricalSpec {
    file: String,
    column: String,
    unit: EmpiricalUnit,
    scale: f64,
}

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

impl fmt::Display for EmpiricalSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "file={},column={}",
            quote_if_needed(&self.file),
            quote_if_needed(&self.column)
        )?;
        match self.unit {
            EmpiricalUnit::Us => f.write_str(",unit=us")?,
            EmpiricalUnit::Ms => {}
            EmpiricalUnit::S => f.write_str(",unit=s")?,
        }
        if self.scale != 1.0 {
            write!(f, ",scale={}", crate::units::fmt_exact(self.scale))?;
        }
        Ok(())
    }
}

impl EmpiricalSpec {
    /// Re-reads a canonical `source` text (without touching the file).
    fn from_source(source: &str) -> Option<EmpiricalSpec> {
        parse::empirical_from_source(source)
    }

    /// Reads the column from the CSV file; values are sorted ascending.
    fn load(&self, spec: &str, base: Option<&Path>) -> Result<Vec<f64>, DistError> {
        let path = match base {
            Some(b) if Path::new(&self.file).is_relative() => b.join(&self.file),
            _ => PathBuf::from(&self.file),
        };
        let shown = path.display().to_string();
        let fail = |line: Option<u64>, column: Option<String>, message: String| DistError::Data {
            spec: spec.to_string(),
            file: shown.clone(),
            line,
            column,
            message,
        };
        let csv_fail = |e: csv::Error| {
            let line = e.position().map(|p| p.line());
            fail(line, None, e.to_string())
        };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_path(&path)
            .map_err(|e| fail(None, None, format!("cannot read the file: {e}")))?;
        let headers = reader.headers().map_err(csv_fail)?.clone();
        if headers.iter().all(str::is_empty) {
            return Err(fail(
                Some(1),
                None,
                format!(
                    "the file is empty: expected a header line naming the column `{}`",
                    self.column
                ),
            ));
        }
        let Some(index) = headers.iter().position(|h| h == self.column) else {
            let names: Vec<String> = headers.iter().map(|h| format!("`{h}`")).collect();
            return Err(fail(
                Some(1),
                None,
                format!(
                    "the header has no column `{}`; its columns are {} (choose one with column=…)",
                    self.column,
                    names.join(", ")
                ),
            ));
        };
        let column_desc = format!("column {} (`{}`)", index + 1, self.column);
        let factor = self.unit.factor() * self.scale;
        let mut values = Vec::new();
        for record in reader.records() {
            let record = record.map_err(csv_fail)?;
            let line = record.position().map(|p| p.line());
            let cell_fail = |message: String| fail(line, Some(column_desc.clone()), message);
            let Some(cell) = record.get(index) else {
                return Err(cell_fail(format!(
                    "the row has only {} field(s), so there is no value",
                    record.len()
                )));
            };
            if cell.is_empty() {
                return Err(cell_fail(
                    "the cell is empty: expected a number".to_string(),
                ));
            }
            let v: f64 = match cell.parse() {
                Ok(v) if f64::is_finite(v) => v,
                _ => return Err(cell_fail(format!("`{cell}` is not a finite number"))),
            };
            if v < 0.0 {
                return Err(cell_fail(format!(
                    "`{cell}` is negative: durations must be ≥ 0"
                )));
            }
            // The same bound as every other duration (`constant(…)`, flags): 1000h.
            let Ok(ms) = crate::units::check_ms(v * factor) else {
                return Err(cell_fail(format!(
                    "`{cell}` is out of range: a duration must be at most {} ({} ms)",
                    crate::units::MAX_TEXT,
                    crate::units::MAX_MS
                )));
            };
            values.push(ms);
        }
        if values.is_empty() {
            return Err(fail(
                None,
                None,
                format!(
                    "the file has a header but no rows: expected values in column `{}`",
                    self.column
                ),
            ));
        }
        values.sort_by(f64::total_cmp);
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const N: usize = 200_000;

    fn draws(d: &Dist, seed: u64, n: usize) -> Vec<f64> {
        let s = d.sampler();
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n).map(|_| s.sample_ms(&mut rng)).collect()
    }

    fn mean_sd(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
        (m, v.sqrt())
    }

    /// A file in the temp directory, removed when dropped.
    struct TempFile(PathBuf);

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
    fn temp_csv(tag: &str, content: &str) -> TempFile {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "lockbench-dist-{}-{tag}-{n}.csv",
            std::process::id()
        ));
        std::fs::write(&path, content).expect("write temp csv");
        TempFile(path)
    }

    fn empirical_fixture() -> (TempFile, Dist) {
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
        let d = Dist::parse(&format!("empirical(file={})", path.display())).unwrap();
        (path, d)
    }

    /// One or more of each variant; the file keeps the empirical source readable.
    fn all_dists() -> (Vec<Dist>, TempFile) {
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
        let d = Dist::parse(&format!("empirical({})", path.display())).unwrap();
        assert_eq!(d.mean_ms(), Some(4.0));
        assert_eq!(d.survival(2.0), Some(0.5));
        assert_eq!(d.quantile(0.0), Some(1.0));
        assert_eq!(d.quantile(0.5), Some(2.0));
        assert_eq!(d.quantile(0.51), Some(3.0));
        assert_eq!(d.quantile(1.0), Some(10.0));
        assert!(!d.is_parametric());
        let us = Dist::parse(&format!("empirical(file={},unit=us)", path.display())).unwrap();
        assert_eq!(us.mean_ms(), Some(0.004));
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

    /// `Display` prints text that parses back to an equal `Dist`, for every variant.
    #[test]
    fn display_round_trips() {
        let (mut ds, _file) = all_dists();
        ds.push(Dist::parse("exponential(rate=0.1/ms)").unwrap());
        ds.push(Dist::parse("constant(0.3us)").unwrap());
        ds.push(Dist::parse("uniform(5ms,5ms)").unwrap());
        ds.push(Dist::parse("weibull(scale=1.7s,shape=0.123456789)").unwrap());
        // Extreme numbers round-trip in scientific notation, not hundreds of digits.
        let extreme = [
            Dist::parse("weibull(scale=1.7s,shape=1e300)").unwrap(),
            Dist::parse("constant(1e-300ms)").unwrap(),
        ];
        for d in &extreme {
            assert!(d.to_string().len() < 60, "{d}");
        }
        ds.extend(extreme);
        let (path, _) = empirical_fixture();
        ds.push(Dist::parse(&format!("empirical(file={},unit=s)", path.display())).unwrap());
        for d in &ds {
            let text = d.to_string();
            let back = Dist::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(&back, d, "{text}");
        }
        assert_eq!(
            Dist::parse(" uniform( min = 70ms , max = 110ms ) ")
                .unwrap()
                .to_string(),
            "uniform(min=70ms,max=110ms)"
        );
        assert_eq!(
            Dist::parse("constant(value=2ms)").unwrap().to_string(),
            "constant(2ms)"
        );
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
            let back = Dist::parse(&s.to_string()).unwrap();
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

    fn parse_err(text: &str) -> String {
        match Dist::parse(text) {
            Ok(d) => panic!("`{text}` parsed as {d:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn syntax_column(text: &str) -> usize {
        match Dist::parse(text) {
            Err(DistError::Syntax { column, .. }) => column,
            other => panic!("`{text}`: expected a syntax error, got {other:?}"),
        }
    }

    /// An unknown name is refused with the list of valid names, pointing at the name.
    #[test]
    fn unknown_name_lists_valid_names() {
        let e = parse_err("mixture(0.5*constant(1ms),0.5*gamma(2ms))");
        assert!(e.contains("unknown distribution `gamma`"), "{e}");
        assert!(e.contains("constant, uniform, normal, lognormal"), "{e}");
        assert!(e.contains("column 31"), "{e}");
        assert!(
            e.contains("\n    mixture(0.5*constant(1ms),0.5*gamma(2ms))\n"),
            "{e}"
        );
        assert!(e.ends_with(&format!("{}^", " ".repeat(30))), "{e}");
    }

    /// A malformed number or duration is reported at its column with what was expected.
    #[test]
    fn malformed_values_point_at_the_column() {
        let e = parse_err("uniform(70ms,x)");
        assert!(e.contains("at column 14"), "{e}");
        assert!(
            e.contains("expected a duration like `250ms`, found `x`"),
            "{e}"
        );
        assert_eq!(syntax_column("uniform(70ms, 110)"), 15);
        assert_eq!(syntax_column("pareto(scale=10ms,shape=2.x)"), 25);
        assert_eq!(syntax_column("weibull(scale=20ms,shape=-1)"), 26);
        assert_eq!(
            syntax_column("mixture(0.5*constant(1ms),0.5x*constant(2ms))"),
            30
        );
        assert_eq!(syntax_column("constant(2ms"), 13);
        assert_eq!(syntax_column("constant(2ms) extra"), 15);
        let e = parse_err("uniform(110ms,70ms)");
        assert!(e.contains("uniform needs min ≤ max"), "{e}");
        let e = parse_err("lognormal(median=20ms,p99=10ms)");
        assert!(e.contains("p99 > median"), "{e}");
        let e = parse_err("normal(mean=-100ms,sd=10ms)");
        assert!(e.contains("almost no mass above 0"), "{e}");
        let e = parse_err("uniform(min=1ms,maximum=2ms)");
        assert!(
            e.contains("unknown parameter `maximum`") && e.contains("accepted: min, max"),
            "{e}"
        );
        let e = parse_err("lognormal(20ms,120ms)");
        assert!(e.contains("must be named"), "{e}");
    }

    /// Mixture weights that do not sum to 1 are refused with their sum.
    #[test]
    fn mixture_weights_must_sum_to_one() {
        let e = parse_err("mixture(0.9*constant(5ms),0.08*uniform(1s,3s))");
        assert!(e.contains("sum to 0.98"), "{e}");
        assert!(e.contains("0.9 + 0.08"), "{e}");
        assert!(e.contains("column 1"), "{e}");
        let e = parse_err("mixture(1.5*constant(5ms))");
        assert!(e.contains("(0, 1]"), "{e}");
        assert!(Dist::parse("mixture(0.3333333*constant(1ms),0.6666667*constant(2ms))").is_ok());
    }

    /// Missing parameters are refused with the required ones and an example.
    #[test]
    fn missing_parameters_are_named() {
        let e = parse_err("uniform(min=70ms)");
        assert!(e.contains("uniform needs min= and max="), "{e}");
        let e = parse_err("normal(sd=3ms)");
        assert!(e.contains("normal needs mean= and sd="), "{e}");
        let e = parse_err("lognormal(median=20ms)");
        assert!(
            e.contains("median= and p99=") && e.contains("got: median"),
            "{e}"
        );
        let e = parse_err("exponential()");
        assert!(e.contains("exactly one of mean="), "{e}");
        let e = parse_err("pareto(shape=2)");
        assert!(e.contains("scale="), "{e}");
        let e = parse_err("empirical(column=x)");
        assert!(e.contains("file="), "{e}");
    }

    fn data_err(content: &str, tag: &str, extra: &str) -> (DistError, TempFile) {
        let path = temp_csv(tag, content);
        let e = Dist::parse(&format!("empirical(file={}{extra})", path.display())).unwrap_err();
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

        let e = Dist::parse("empirical(/nonexistent/lockbench/nope.csv)").unwrap_err();
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
        assert!(Dist::parse(&format!("empirical(file={})", path.display())).is_ok());
        assert!(Dist::parse("constant(1001h)").is_err());
    }

    /// Relative empirical paths resolve against the base directory.
    #[test]
    fn empirical_paths_resolve_against_base() {
        let path = temp_csv("base", "durationMs\n4\n");
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let d = Dist::parse_with_base(&format!("empirical({name})"), Some(&std::env::temp_dir()))
            .unwrap();
        assert_eq!(d.mean_ms(), Some(4.0));
        assert_eq!(
            d.to_string(),
            format!("empirical(file={name},column=durationMs)")
        );
    }

    /// No text makes the parser panic: every prefix of valid and odd texts parses or errors.
    #[test]
    fn parser_never_panics() {
        let texts = [
            "mixture(0.5*normal(mean=-5ms,sd=10ms),0.5*mixture(0.2*constant(1µs),0.8*exponential(rate=2/s)))",
            "empirical(file=\"a,b.csv\",column=\"x\")",
            "lognormal(mean=1e308ms,sd=1e-308ms)",
            "µµµ(((((",
            "constant(NaNms)",
            "exponential(rate=0/ms)",
        ];
        for t in texts {
            for (i, _) in t.char_indices() {
                let _ = Dist::parse(&t[..i]);
            }
        }
        let deep = format!("{}constant(1ms){}", "mixture(1*".repeat(40), ")".repeat(40));
        assert!(parse_err(&deep).contains("nested"));
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
            Dist::Empirical {
                source: "x".into(),
                values: Arc::new(vec![]),
            },
        ];
        for d in &bad {
            for x in draws(d, 1, 100) {
                assert!(x.is_finite() && x >= 0.0, "{d:?}: {x}");
            }
        }
    }
}
