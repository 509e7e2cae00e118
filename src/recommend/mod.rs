//! `lockbench recommend`: which TTL do my measured critical sections need?
//! (Past 800 lines only through its tests: about 130 lines of them.)
//!
//! Given measured section durations it answers three ways, from most to least certain:
//!
//! 1. **Observed**: the worst case (max), high quantiles, and `max × margin`.
//! 2. **Distribution-free bound**: the smallest order statistic `x_(k)` such that, with the given
//!    confidence, the true overrun probability `P(X > x_(k))` is at most the target. For any
//!    continuous distribution `F(x_(k))` is the `k`-th smallest of `n` uniforms, so
//!    `P(F(x_(k)) ≥ 1 − target) = P(Binomial(n, 1 − target) ≤ k − 1)`; the smallest `k` for which
//!    that is ≥ confidence is taken. When even the max does not qualify
//!    (`n < ln(1 − confidence) / ln(1 − target)`) the target cannot be supported by the data, and
//!    the answer says how many samples would be needed instead of giving a number.
//! 3. **Models** (extrapolation beyond the data, assumptions rather than measurements): a
//!    log-normal fitted by maximum likelihood on `ln` values, and a generalised Pareto
//!    distribution (GPD) fitted by probability-weighted moments to the exceedances over a high
//!    threshold (top 10 % by default). Each comes with its fit quality in the tail
//!    (Kolmogorov–Smirnov distance and Anderson–Darling statistic) and a verdict in plain words.
//!
//! With `--crash-rate` it also prices the other side of the TTL ([`CrashCost`]): a holder that
//! crashes without releasing blocks its key until the TTL expires, so each candidate TTL gets
//! its expected blocked time per crash and per day next to its overrun risk.
//!
//! Inputs ([`load_durations`]): a run's `events.csv` (`duration_us`), a plain CSV with a duration
//! column, an `.hgrm` percentile distribution or an `.hlog` interval log. Histogram inputs give
//! order statistics from their counts: each value is its bucket's upper edge (HdrHistogram
//! precision), which keeps the distribution-free bound conservative.
//!
//! File reading ([`load_durations`], [`read_csv`], [`parse_hgrm`], [`parse_hlog`]) is separate
//! from the computation ([`recommend`]) and the printer ([`print_recommendation`]).
//!
//! Files: the command line and its entry are `crate::commands::recommend`'s; this one holds
//! the parameters and the computation ([`recommend`]); `measured.rs` the inputs, `stats.rs`
//! the order statistics, `models.rs` the fitted models, `crash.rs` the blocked time after
//! crashes, `print.rs` the printer.

use serde::Serialize;

mod crash;
mod measured;
mod models;
mod print;
mod stats;

pub(crate) use crash::CRASH_MODEL;
pub(crate) use crash::CrashCost;
pub use crash::expected_blocked_ms;
pub(crate) use measured::InputInfo;
pub use measured::InputKind;
pub(crate) use measured::LoadError;
pub use measured::LoadOptions;
pub use measured::Samples;
pub use measured::load_durations;
pub(crate) use models::Model;
pub(crate) use models::ModelFit;
pub use print::print_recommendation;
pub(crate) use stats::binom_cdf;
pub(crate) use stats::max_exceedances;
pub(crate) use stats::samples_needed;
pub(crate) use stats::upper_bound;

use models::{
    AD_CRITICAL_GPD, AD_CRITICAL_LOGNORMAL, Candidate, MIN_TAIL, Tail, fit_gpd, fit_lognormal,
    judge,
};
use print::{fmt_ms, ordinal};
use stats::View;

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/// The shortest TTL Redis can set (`PX` takes whole milliseconds ≥ 1).
pub(crate) const MIN_TTL_MS: f64 = 1.0;

/// Rate assumed when none is given (sections per second).
pub(crate) const DEFAULT_RATE_PER_S: f64 = 10.0;

/// Validated parameters of a recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    target: f64,
    confidence: f64,
    margin: f64,
    rate_per_s: f64,
    rate_assumed: bool,
    tail_fraction: f64,
    /// Holder crashes per second; `None` without `--crash-rate`.
    crash_rate_per_s: Option<f64>,
}

/// A parameter out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--{flag}: {message}")]
pub struct ParamError {
    /// The flag.
    pub flag: &'static str,
    /// What is wrong and what would be valid.
    pub message: String,
}
crate::exit::classify!(ParamError => BadInput);

impl Default for Params {
    fn default() -> Self {
        Self {
            target: 1e-4,
            confidence: 0.95,
            margin: 1.5,
            rate_per_s: DEFAULT_RATE_PER_S,
            rate_assumed: true,
            tail_fraction: 0.1,
            crash_rate_per_s: None,
        }
    }
}

impl Params {
    /// Checks every parameter; `rate` `None` assumes [`DEFAULT_RATE_PER_S`].
    pub fn new(
        target: f64,
        confidence: f64,
        margin: f64,
        rate: Option<f64>,
        tail_fraction: f64,
    ) -> Result<Params, ParamError> {
        let err = |flag, message: &str| {
            Err(ParamError {
                flag,
                message: message.to_string(),
            })
        };
        if !(target > 1e-12 && target < 0.5) {
            return err(
                "target",
                "use a probability between 1e-12 and 0.5, e.g. 1e-4",
            );
        }
        if !(0.5..1.0 - 1e-12).contains(&confidence) {
            return err("confidence", "use a value in [0.5, 1), e.g. 0.95");
        }
        if !(margin.is_finite() && (1.0..=1000.0).contains(&margin)) {
            return err("margin", "use a factor between 1 and 1000, e.g. 1.5");
        }
        if let Some(r) = rate
            && !(r.is_finite() && r > 0.0)
        {
            return err("rate", "use a positive rate, e.g. 100/s");
        }
        if !(tail_fraction > 0.0 && tail_fraction <= 0.5) {
            return err("tail-fraction", "use a fraction in (0, 0.5], e.g. 0.1");
        }
        Ok(Params {
            target,
            confidence,
            margin,
            rate_per_s: rate.unwrap_or(DEFAULT_RATE_PER_S),
            rate_assumed: rate.is_none(),
            tail_fraction,
            crash_rate_per_s: None,
        })
    }

    /// Adds the expected holder crash rate (crashes per second); `None` leaves the crash
    /// figures out.
    pub fn with_crash_rate(self, crash_rate_per_s: Option<f64>) -> Result<Params, ParamError> {
        if let Some(r) = crash_rate_per_s
            && !(r.is_finite() && r > 0.0)
        {
            return Err(ParamError {
                flag: "crash-rate",
                message: "use a positive rate, e.g. 3/day or 0.5/h".to_string(),
            });
        }
        Ok(Params {
            crash_rate_per_s,
            ..self
        })
    }

    /// Acceptable overrun probability per section.
    pub fn target(&self) -> f64 {
        self.target
    }
    /// Confidence of the distribution-free bound.
    pub fn confidence(&self) -> f64 {
        self.confidence
    }
    /// Factor on the observed worst case.
    pub fn margin(&self) -> f64 {
        self.margin
    }
    /// Sections per second.
    pub fn rate_per_s(&self) -> f64 {
        self.rate_per_s
    }
    /// Holder crashes per second, when given.
    pub fn crash_rate_per_s(&self) -> Option<f64> {
        self.crash_rate_per_s
    }
}

// ---------------------------------------------------------------------------------------------
// Recommendation
// ---------------------------------------------------------------------------------------------

/// An observed quantile.
#[derive(Debug, Clone, Serialize)]
pub struct QuantileValue {
    /// `p50`, `p90`, … .
    pub label: &'static str,
    /// The probability.
    pub p: f64,
    /// The value; `None` when the sample is too small to tell it from the max.
    pub value_ms: Option<f64>,
    /// Samples needed to estimate it (at least one value above it).
    pub needs_samples: u64,
}

/// What was observed.
#[derive(Debug, Clone, Serialize)]
pub struct Observed {
    /// Smallest value (ms).
    pub min_ms: f64,
    /// Mean (ms).
    pub mean_ms: f64,
    /// Largest value: the worst case (ms).
    pub max_ms: f64,
    /// High quantiles.
    pub quantiles: Vec<QuantileValue>,
}

/// The observed worst case and its margin.
#[derive(Debug, Clone, Serialize)]
pub struct WorstCase {
    /// The max (ms).
    pub max_ms: f64,
    /// The margin.
    pub margin: f64,
    /// `max × margin` (ms).
    pub ttl_ms: f64,
    /// Distribution-free: with the given confidence, `P(X > max) ≤ this`.
    pub max_exceedance_bound: f64,
}

/// The distribution-free answer.
#[derive(Debug, Clone, Serialize)]
pub struct DistributionFree {
    /// Whether the data supports the target at the confidence.
    pub supported: bool,
    /// The order statistic `x_(k)` (ms); `None` when not supported.
    pub ttl_ms: Option<f64>,
    /// `k` (1-based rank from the smallest).
    pub rank: Option<u64>,
    /// Samples above `x_(k)` (`n − k`).
    pub samples_above: Option<u64>,
    /// `P(Binomial(n, 1 − target) ≤ k − 1)`, at least the requested confidence.
    pub achieved_confidence: Option<f64>,
    /// Smallest `n` for which the max alone supports the target.
    pub samples_needed: u64,
    /// The smallest target this sample supports at this confidence (the max's bound).
    pub smallest_supported_target: f64,
    /// The answer in plain words.
    pub explanation: String,
}

/// What a TTL means in practice.
#[derive(Debug, Clone, Serialize)]
pub struct PracticeRow {
    /// The TTL (ms, whole: `PX` takes whole milliseconds).
    pub ttl_ms: f64,
    /// Where it comes from.
    pub basis: String,
    /// Samples above it.
    pub samples_above: u64,
    /// Distribution-free upper bound on the overrun probability per section (Clopper–Pearson,
    /// at the confidence).
    pub overrun_bound: f64,
    /// `overrun_bound × 10⁶`.
    pub per_million_bound: f64,
    /// `overrun_bound × rate × 86400`.
    pub per_day_bound: f64,
    /// The log-normal model's overrun probability per section.
    pub lognormal_overrun: Option<f64>,
    /// The GPD model's overrun probability per section.
    pub gpd_overrun: Option<f64>,
    /// Blocked time after holder crashes at this TTL; `None` without `--crash-rate`.
    pub crash: Option<CrashCost>,
}

/// The full answer; serialised as the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    /// Where the samples came from (set by the caller).
    pub input: Option<InputInfo>,
    /// Number of samples.
    pub n: u64,
    /// `false` for histogram inputs (values at HdrHistogram precision).
    pub exact: bool,
    /// The parameters.
    pub params: Params,
    /// What was observed; `None` without samples.
    pub observed: Option<Observed>,
    /// Worst case × margin; `None` without samples.
    pub worst_case: Option<WorstCase>,
    /// The distribution-free answer.
    pub distribution_free: DistributionFree,
    /// Models (extrapolation beyond the data).
    pub models: Vec<ModelFit>,
    /// The recommended TTL: the distribution-free answer rounded up to whole ms; `None` when the
    /// data cannot support the target.
    pub recommended_ttl_ms: Option<f64>,
    /// Candidate TTLs and what they mean per section, per million sections and per day.
    pub in_practice: Vec<PracticeRow>,
    /// Blocked time after holder crashes at the recommended TTL; `None` without
    /// `--crash-rate` or without a recommended TTL.
    pub crash: Option<CrashCost>,
    /// Remarks.
    pub notes: Vec<String>,
}

const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
];

/// Computes the recommendation for `samples` (pure; never panics, also on empty samples).
pub fn recommend(samples: &Samples, params: &Params) -> Recommendation {
    let view = View::new(samples);
    let n = view.n();
    let (target, conf) = (params.target, params.confidence);
    let needed = samples_needed(target, conf);
    let max_bound = upper_bound(0, n, conf);
    let mut notes = Vec::new();
    if let Some(note) = histogram_note(samples) {
        notes.push(note);
    }
    if n == 0 {
        return empty(samples, params, needed, notes);
    }
    let max = view.at_rank(n);
    let observed = observed(&view);
    let worst = WorstCase {
        max_ms: max,
        margin: params.margin,
        ttl_ms: max * params.margin,
        max_exceedance_bound: max_bound,
    };

    // Distribution-free bound.
    let distribution_free = distribution_free(&view, params, needed, max_bound);

    // Models.
    let models = fit_models(&view, params, &mut notes);

    // In practice.
    // Redis expiry is whole milliseconds ≥ 1: a bound of 0 (all samples 0 ms) becomes 1 ms.
    let recommended = distribution_free.ttl_ms.map(|t| t.ceil().max(MIN_TTL_MS));
    if distribution_free.ttl_ms.is_some_and(|t| t < MIN_TTL_MS) {
        notes.push(format!(
            "the bound from the data is {}: the recommendation is raised to {MIN_TTL_MS:.0} ms, \
             the shortest TTL Redis can set (PX is whole milliseconds ≥ 1)",
            fmt_ms(distribution_free.ttl_ms.unwrap_or(0.0))
        ));
    }
    let in_practice = in_practice(&view, params, recommended, &models);
    // The first row is the recommended TTL whenever there is one.
    let crash = recommended
        .and_then(|_| in_practice.first())
        .and_then(|row| row.crash);
    if let Some(c) = crash
        && c.blocked_per_day_ms > 86_400_000.0
    {
        notes.push(format!(
            "the expected blocked time per day at the recommended TTL is {} — more than a day: \
             it is summed over crashes, so on one key crashes this frequent would overlap and \
             keep it blocked nearly all the time",
            fmt_ms(c.blocked_per_day_ms)
        ));
    }
    Recommendation {
        input: None,
        n,
        exact: matches!(samples, Samples::Exact(_)),
        params: *params,
        observed: Some(observed),
        worst_case: Some(worst),
        distribution_free,
        models,
        recommended_ttl_ms: recommended,
        in_practice,
        crash,
        notes,
    }
}

/// With counts from a histogram, how far its order statistics may read high.
fn histogram_note(samples: &Samples) -> Option<String> {
    let Samples::Histogram { hist, .. } = samples else {
        return None;
    };
    Some(format!(
        "order statistics come from histogram counts: each value is its bucket's upper edge \
             (HdrHistogram, {} significant figures), so they may read up to ~{} high, never low",
        hist.sigfig(),
        match hist.sigfig() {
            1 => "10 %",
            2 => "1 %",
            3 => "0.1 %",
            _ => "0.01 %",
        }
    ))
}

/// The recommendation without samples: no TTL, and how many samples are needed.
fn empty(samples: &Samples, params: &Params, needed: u64, notes: Vec<String>) -> Recommendation {
    let n = 0;
    Recommendation {
        input: None,
        n,
        exact: matches!(samples, Samples::Exact(_)),
        params: *params,
        observed: None,
        worst_case: None,
        distribution_free: DistributionFree {
            supported: false,
            ttl_ms: None,
            rank: None,
            samples_above: None,
            achieved_confidence: None,
            samples_needed: needed,
            smallest_supported_target: 1.0,
            explanation: format!("no samples: at least {needed} are needed to support the target"),
        },
        models: Vec::new(),
        recommended_ttl_ms: None,
        in_practice: Vec::new(),
        crash: None,
        notes,
    }
}

/// What the samples show: extremes, mean, the quantiles they are enough for.
fn observed(view: &View) -> Observed {
    let n = view.n();
    let max = view.at_rank(n);
    Observed {
        min_ms: view.at_rank(1),
        mean_ms: view.mean(),
        max_ms: max,
        quantiles: QUANTILES
            .iter()
            .map(|&(label, p)| {
                let needs = (1.0 / (1.0 - p)).round() as u64;
                QuantileValue {
                    label,
                    p,
                    value_ms: (n >= needs).then(|| view.quantile(p)),
                    needs_samples: needs,
                }
            })
            .collect(),
    }
}

/// The distribution-free bound: the order statistic that supports the target at the
/// confidence asked for, or why none does.
fn distribution_free(
    view: &View,
    params: &Params,
    needed: u64,
    max_bound: f64,
) -> DistributionFree {
    let n = view.n();
    let (target, conf) = (params.target, params.confidence);
    match max_exceedances(n, target, 1.0 - conf) {
        Some(j) => {
            let k = n - j;
            let x = view.at_rank(k);
            let achieved = 1.0 - binom_cdf(j, n, target);
            let which = if j == 0 {
                "the largest value".to_string()
            } else {
                format!("the {} largest value", ordinal(j + 1))
            };
            DistributionFree {
                supported: true,
                ttl_ms: Some(x),
                rank: Some(k),
                samples_above: Some(j),
                achieved_confidence: Some(achieved),
                samples_needed: needed,
                smallest_supported_target: max_bound,
                explanation: format!(
                    "{} = x_({k}), {which} of {n}: with {:.1} % confidence the true overrun \
                 probability at this TTL is ≤ {target:e} (distribution-free: from the ranks \
                 alone, whatever the distribution)",
                    fmt_ms(x),
                    achieved * 100.0
                ),
            }
        }
        None => DistributionFree {
            supported: false,
            ttl_ms: None,
            rank: None,
            samples_above: None,
            achieved_confidence: None,
            samples_needed: needed,
            smallest_supported_target: max_bound,
            explanation: format!(
                "the target cannot be supported by {n} samples: even the largest one only shows, \
             with {:.0} % confidence, that the overrun probability is ≤ {max_bound:.2e}. \
             A target of {target:e} needs at least {needed} samples ({} more); no TTL is \
             given from the data alone",
                conf * 100.0,
                needed.saturating_sub(n)
            ),
        },
    }
}

/// The lognormal and generalized Pareto fits, each judged on the tail; adds a note when the
/// target lies beyond the data.
fn fit_models(view: &View, params: &Params, notes: &mut Vec<String>) -> Vec<ModelFit> {
    let n = view.n();
    let target = params.target;
    let u = view.quantile(1.0 - params.tail_fraction);
    let runs: Vec<(f64, u64)> = view.runs().filter(|r| r.0 > u).collect();
    let m: u64 = runs.iter().map(|r| r.1).sum();
    let tail = Tail { runs, m, u };
    let zeros = view.count_above(0.0);
    let zeros = n - zeros;
    let ln_model = fit_lognormal(view);
    let mut models = vec![judge(
        Candidate {
            name: "lognormal",
            method: format!(
                "maximum likelihood on ln(values) ({} values{}); tail fit judged above the \
         {:.0} % quantile",
                n - zeros,
                if zeros > 0 {
                    format!(", {zeros} zero(s) left out")
                } else {
                    String::new()
                },
                (1.0 - params.tail_fraction) * 100.0
            ),
            model: ln_model,
            why_not: "fewer than 2 positive values, or all equal".to_string(),
            critical: AD_CRITICAL_LOGNORMAL,
        },
        view,
        &tail,
        target,
    )];
    let gpd = if m >= MIN_TAIL {
        fit_gpd(&tail.runs, m, u, n)
    } else {
        None
    };
    let why_not = if m < MIN_TAIL {
        format!(
            "only {m} value(s) above the {:.0} % quantile ({}); at least {MIN_TAIL} are needed",
            (1.0 - params.tail_fraction) * 100.0,
            fmt_ms(u)
        )
    } else {
        "the values above the threshold are too uniform for a Pareto tail".to_string()
    };
    models.push(judge(
        Candidate {
            name: "generalized_pareto",
            method: format!(
                "probability-weighted moments on the {m} values above the {:.0} % quantile ({})",
                (1.0 - params.tail_fraction) * 100.0,
                fmt_ms(u)
            ),
            model: gpd,
            why_not,
            critical: AD_CRITICAL_GPD,
        },
        view,
        &tail,
        target,
    ));
    if target < 1.0 / n as f64 {
        notes.push(format!(
            "the target {target:e} is {:.0}× rarer than one in the {n} samples: the models \
         extrapolate beyond the data",
            1.0 / (target * n as f64)
        ));
    }

    models
}

/// The table of TTLs to choose from (the recommended one first): each with its bound on
/// overruns and what the models and a crash rate say of it.
fn in_practice(
    view: &View,
    params: &Params,
    recommended: Option<f64>,
    models: &[ModelFit],
) -> Vec<PracticeRow> {
    let n = view.n();
    let conf = params.confidence;
    let max = view.at_rank(n);
    let ln_fit = models.first().and_then(|f| f.fitted);
    let gpd_fit = models.get(1).and_then(|f| f.fitted);
    let mut candidates: Vec<(f64, String)> = Vec::new();
    if let Some(t) = recommended {
        candidates.push((t, "distribution-free bound (recommended)".to_string()));
    }
    candidates.push((
        (max * params.margin).ceil().max(MIN_TTL_MS),
        format!("observed max × {}", params.margin),
    ));
    for f in models {
        if let Some(t) = f.ttl_ms {
            candidates.push((
                t.ceil().max(MIN_TTL_MS),
                format!("{} model", f.name.replace('_', " ")),
            ));
        }
    }
    candidates
        .into_iter()
        .map(|(ttl, basis)| {
            let above = view.count_above(ttl);
            let bound = upper_bound(above, n, conf);
            PracticeRow {
                ttl_ms: ttl,
                basis,
                samples_above: above,
                overrun_bound: bound,
                per_million_bound: bound * 1e6,
                per_day_bound: bound * params.rate_per_s * 86_400.0,
                lognormal_overrun: ln_fit.and_then(|mo| mo.survival(ttl)),
                gpd_overrun: gpd_fit.and_then(|mo| mo.survival(ttl)),
                crash: params
                    .crash_rate_per_s
                    .and_then(|r| crash::crash_cost(view, ttl, r * 86_400.0)),
            }
        })
        .collect::<Vec<_>>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::new_hist;
    use crash::BlockedPerCrash;

    pub(super) fn exact(values: &[f64]) -> Samples {
        Samples::from_ms(values.to_vec())
    }

    /// With too few samples the answer refuses to give a TTL and states the needed n.
    #[test]
    fn tiny_sample_is_not_supported() {
        let values: Vec<f64> = (1..=50).map(f64::from).collect();
        let r = recommend(&exact(&values), &Params::default());
        assert!(!r.distribution_free.supported);
        assert_eq!(r.distribution_free.ttl_ms, None);
        assert_eq!(r.recommended_ttl_ms, None);
        assert_eq!(r.distribution_free.samples_needed, 29_956);
        assert!(r.distribution_free.explanation.contains("29956"));
        assert_eq!(r.worst_case.as_ref().unwrap().ttl_ms, 75.0);
        // p99.99 and p99.9 need more data than 50 values
        let q = &r.observed.as_ref().unwrap().quantiles;
        assert!(
            q.iter()
                .find(|q| q.label == "p99")
                .unwrap()
                .value_ms
                .is_none()
        );
        assert_eq!(q[0].value_ms, Some(25.0));
    }

    /// Nothing panics on empty, constant, all-zero or single-value samples, or on a histogram.
    #[test]
    fn degenerate_samples_do_not_panic() {
        let p = Params::default();
        for s in [
            exact(&[]),
            exact(&[0.0; 100]),
            exact(&[5.0; 40_000]),
            exact(&[1.0]),
            Samples::Histogram {
                hist: new_hist(),
                unit_ms: 1e-3,
            },
        ] {
            let r = recommend(&s, &p);
            let mut out = Vec::new();
            print_recommendation(&mut out, &r).unwrap();
            serde_json::to_string(&r).unwrap();
        }
        let r = recommend(&exact(&[5.0; 40_000]), &p);
        assert_eq!(r.recommended_ttl_ms, Some(5.0));
    }

    /// Out-of-range parameters name their flag.
    #[test]
    fn params_are_checked() {
        assert_eq!(
            Params::new(0.0, 0.95, 1.5, None, 0.1).unwrap_err().flag,
            "target"
        );
        assert_eq!(
            Params::new(1e-4, 1.0, 1.5, None, 0.1).unwrap_err().flag,
            "confidence"
        );
        assert_eq!(
            Params::new(1e-4, 0.95, 0.5, None, 0.1).unwrap_err().flag,
            "margin"
        );
        assert_eq!(
            Params::new(1e-4, 0.95, 1.5, Some(f64::NAN), 0.1)
                .unwrap_err()
                .flag,
            "rate"
        );
        for bad in [0.0, -1.0, f64::INFINITY] {
            assert_eq!(
                Params::default()
                    .with_crash_rate(Some(bad))
                    .unwrap_err()
                    .flag,
                "crash-rate"
            );
        }
    }

    /// Without a crash rate no crash figure is computed; with one, every candidate TTL gets
    /// its own and the top-level figure is the recommended TTL's (constant 100 ms sections:
    /// TTL 100 ms, 50 ms blocked per crash on average, 100 ms at worst).
    #[test]
    fn crash_figures_only_with_a_rate() {
        let s = exact(&[100.0; 1000]);
        let p = Params::new(0.01, 0.95, 1.5, None, 0.1).unwrap();
        let r = recommend(&s, &p);
        assert!(r.crash.is_none() && r.in_practice.iter().all(|row| row.crash.is_none()));
        let r = recommend(&s, &p.with_crash_rate(Some(2.0 / 86_400.0)).unwrap());
        assert_eq!(r.recommended_ttl_ms, Some(100.0));
        let c = r.crash.unwrap();
        assert_eq!(c.ttl_ms, 100.0);
        assert_eq!(
            c.blocked_per_crash_ms,
            BlockedPerCrash {
                mean: 50.0,
                max: 100.0
            }
        );
        assert!((c.rate_per_day - 2.0).abs() < 1e-12);
        assert!((c.blocked_per_day_ms - 100.0).abs() < 1e-9);
        // margin 1.5 → 150 ms: 150 − 50 = 100 ms per crash.
        let worst = &r.in_practice[1];
        assert_eq!(worst.ttl_ms, 150.0);
        assert_eq!(worst.crash.unwrap().blocked_per_crash_ms.mean, 100.0);
        // Not supported: no recommended TTL, so no top-level figure, but the rows keep theirs.
        let r = recommend(
            &exact(&[100.0; 10]),
            &Params::default().with_crash_rate(Some(1.0)).unwrap(),
        );
        assert!(r.crash.is_none());
        assert!(r.in_practice.iter().all(|row| row.crash.is_some()));
        // More than a day blocked per day is called out; 2 crashes a day is not.
        let day_note = |r: &Recommendation| r.notes.iter().any(|n| n.contains("more than a day"));
        assert!(!day_note(&recommend(
            &s,
            &p.with_crash_rate(Some(2.0 / 86_400.0)).unwrap()
        )));
        assert!(day_note(&recommend(
            &s,
            &p.with_crash_rate(Some(100.0)).unwrap()
        )));
    }
}
