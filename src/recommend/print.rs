//! The recommendation as readable text; generic over the writer, tested in-module.

use super::{
    CRASH_MODEL, CrashCost, InputInfo, InputKind, Model, ModelFit, Observed, Recommendation,
    WorstCase,
};
use std::io::{self, Write};

pub(super) fn fmt_ms(x: f64) -> String {
    if !x.is_finite() {
        "—".to_string()
    } else if x >= 60_000.0 {
        fmt_long_ms(x)
    } else if x >= 100.0 {
        format!("{x:.1} ms")
    } else if x >= 10.0 {
        format!("{x:.2} ms")
    } else {
        format!("{x:.3} ms")
    }
}

/// A TTL in whole ms, with hours or days beside it from a minute on; a value beyond the
/// 1000h bound (a model's extrapolation) in scientific notation instead of hundreds of digits.
pub(super) fn fmt_ttl(x: f64) -> String {
    if x.is_finite() && x < 60_000.0 {
        format!("{x:.0} ms")
    } else {
        fmt_long_ms(x)
    }
}

/// From a minute on: `5400000 ms (1h30m)`, `1e30 ms (beyond 1000h)`.
pub(super) fn fmt_long_ms(x: f64) -> String {
    if !x.is_finite() || x > crate::model::units::MAX_MS {
        format!(
            "{} ms (beyond {})",
            crate::model::units::fmt_num(x),
            crate::model::units::MAX_TEXT
        )
    } else {
        format!(
            "{x:.0} ms ({})",
            crate::model::units::fmt_us(
                crate::model::units::ms_to_us(x),
                crate::model::units::Style::Compact
            )
        )
    }
}

pub(super) fn ordinal(k: u64) -> String {
    let suffix = match (k % 10, k % 100) {
        (1, r) if r != 11 => "st",
        (2, r) if r != 12 => "nd",
        (3, r) if r != 13 => "rd",
        _ => "th",
    };
    format!("{k}{suffix}")
}

pub(super) fn fmt_prob(p: f64) -> String {
    if p == 0.0 {
        "0".to_string()
    } else if p >= 0.01 {
        format!("{:.2} %", p * 100.0)
    } else {
        format!("{p:.2e}")
    }
}

pub(super) fn fmt_count(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Prints the recommendation as readable text.
pub fn print_recommendation<W: Write>(mut w: W, r: &Recommendation) -> io::Result<()> {
    if let Some(i) = &r.input {
        print_input(&mut w, i)?;
    }
    writeln!(
        w,
        "samples  {}{}",
        r.n,
        if r.exact { "" } else { " (histogram counts)" }
    )?;
    let (Some(obs), Some(worst)) = (&r.observed, &r.worst_case) else {
        writeln!(w, "\n{}", r.distribution_free.explanation)?;
        return Ok(());
    };

    print_observed(&mut w, obs, worst)?;
    print_target(&mut w, r)?;
    print_models(&mut w, &r.models)?;
    print_in_practice(&mut w, r)?;
    print_recommended(&mut w, r)?;
    for note in &r.notes {
        writeln!(w, "note: {note}")?;
    }
    Ok(())
}

/// Where the samples came from: the file, its kind, column or tag, and unit.
fn print_input<W: Write>(w: &mut W, i: &InputInfo) -> io::Result<()> {
    let what = match i.kind {
        InputKind::EventsCsv => "lockbench events.csv",
        InputKind::Csv => "CSV",
        InputKind::Hgrm => "HdrHistogram percentile distribution",
        InputKind::Hlog => "HdrHistogram interval log",
    };
    let column = i
        .column
        .as_deref()
        .map(|c| format!(", column `{c}`"))
        .unwrap_or_default();
    let tag = i
        .selected_tag
        .as_deref()
        .map(|t| format!(", tag `{t}`"))
        .unwrap_or_default();
    writeln!(
        w,
        "input    {} ({what}{column}{tag}, values in {})",
        i.file,
        i.unit.name()
    )?;
    for note in &i.notes {
        writeln!(w, "         {note}")?;
    }
    Ok(())
}

/// What the samples show: the quantiles they are enough for, the worst case and its TTL.
fn print_observed<W: Write>(w: &mut W, obs: &Observed, worst: &WorstCase) -> io::Result<()> {
    writeln!(w, "\nobserved")?;
    for q in &obs.quantiles {
        match q.value_ms {
            Some(v) => writeln!(w, "  {:<7} {}", q.label, fmt_ms(v))?,
            None => writeln!(
                w,
                "  {:<7} —  (needs ≥ {} samples)",
                q.label, q.needs_samples
            )?,
        }
    }
    writeln!(w, "  {:<7} {}   (worst case)", "max", fmt_ms(obs.max_ms))?;
    writeln!(
        w,
        "  worst case × margin {} = {}",
        worst.margin,
        fmt_ms(worst.ttl_ms)
    )?;

    Ok(())
}

/// The target and the distribution-free TTL for it, or why the data cannot support it.
fn print_target<W: Write>(w: &mut W, r: &Recommendation) -> io::Result<()> {
    let p = &r.params;
    writeln!(
        w,
        "\ntarget   overrun probability ≤ {:e} per section, confidence {} %",
        p.target,
        p.confidence * 100.0
    )?;
    let df = &r.distribution_free;
    if df.supported {
        writeln!(w, "  distribution-free TTL: {}", df.explanation)?;
    } else {
        writeln!(w, "  NOT SUPPORTED: {}", df.explanation)?;
    }

    Ok(())
}

/// Each model: how it was fitted, its TTL, its fit on the tail and the verdict on it.
fn print_models<W: Write>(w: &mut W, models: &[ModelFit]) -> io::Result<()> {
    writeln!(
        w,
        "\nmodels   extrapolation beyond the data — assumptions, not measurements"
    )?;
    for f in models {
        let params = match f.fitted {
            Some(Model::Lognormal { mu, sigma }) => {
                format!(
                    "mu = {mu:.4}, sigma = {sigma:.4} (median {})",
                    fmt_ms(mu.exp())
                )
            }
            Some(Model::GeneralizedPareto {
                threshold_ms,
                xi,
                scale_ms,
                ..
            }) => format!(
                "u = {}, xi = {xi:.4}, sigma = {}",
                fmt_ms(threshold_ms),
                fmt_ms(scale_ms)
            ),
            None => String::new(),
        };
        writeln!(w, "  {} — {}", f.name.replace('_', " "), f.method)?;
        if !params.is_empty() {
            writeln!(w, "    fitted     {params}")?;
        }
        if let Some(t) = f.ttl_ms {
            writeln!(w, "    TTL        {}   (MODEL)", fmt_ms(t))?;
        }
        if let (Some(ks), Some(ad)) = (f.tail_ks, f.tail_ad) {
            writeln!(
                w,
                "    tail fit   KS {ks:.4}, AD {ad:.2} over {} values above {}",
                f.tail_samples,
                fmt_ms(f.tail_threshold_ms.unwrap_or(f64::NAN))
            )?;
        }
        writeln!(w, "    verdict    {}", f.verdict)?;
    }

    Ok(())
}

/// The table of TTLs to choose from, with their bounds and what the models say.
fn print_in_practice<W: Write>(w: &mut W, r: &Recommendation) -> io::Result<()> {
    let p = &r.params;
    let crashes = p.crash_rate_per_s.map(|r| r * 86_400.0);
    writeln!(
        w,
        "\nin practice   at {} sections/s{}{}",
        fmt_count(p.rate_per_s),
        if p.rate_assumed {
            " (assumed; set --rate)"
        } else {
            ""
        },
        crashes
            .map(|c| format!(", {} holder crashes/day", fmt_count(c)))
            .unwrap_or_default()
    )?;
    // The crash columns only with --crash-rate: `mean` and `day` are the texts of those cells.
    let crash_cols = |mean: &str, day: &str| {
        if crashes.is_some() {
            format!("  {mean:>13} {day:>13}")
        } else {
            String::new()
        }
    };
    writeln!(
        w,
        "  {:>10}  {:<40} {:>7}  {:>10} {:>10} {:>10}  {:>10} {:>10}{}",
        "TTL",
        "basis",
        "above",
        "P(overrun)",
        "/million",
        "/day",
        "lognormal",
        "GPD",
        crash_cols("blocked/crash", "blocked/day")
    )?;
    writeln!(
        w,
        "  {:>10}  {:<40} {:>7}  {:>10} {:>10} {:>10}  {:>10} {:>10}{}",
        "",
        "",
        "in data",
        format!("≤ ({:.0} %)", p.confidence * 100.0),
        "≤",
        "≤",
        "model",
        "model",
        crash_cols("mean", "mean")
    )?;
    for row in &r.in_practice {
        let model = |x: Option<f64>| x.map_or("—".to_string(), fmt_prob);
        let (mean, day) = row.crash.map_or(("—".to_string(), "—".to_string()), |c| {
            (
                fmt_ms(c.blocked_per_crash_ms.mean),
                fmt_ms(c.blocked_per_day_ms),
            )
        });
        writeln!(
            w,
            "  {:>10}  {:<40} {:>7}  {:>10} {:>10} {:>10}  {:>10} {:>10}{}",
            fmt_ttl(row.ttl_ms),
            row.basis,
            row.samples_above,
            fmt_prob(row.overrun_bound),
            fmt_count(row.per_million_bound),
            fmt_count(row.per_day_bound),
            model(row.lognormal_overrun),
            model(row.gpd_overrun),
            crash_cols(&mean, &day)
        )?;
    }
    writeln!(
        w,
        "  (data bounds: distribution-free upper bounds from the samples above each TTL; model \
         columns: each model's own estimate)"
    )?;
    if crashes.is_some() {
        writeln!(
            w,
            "  (blocked: time a crashed holder's key stays locked — model: {CRASH_MODEL}; mean \
             over the samples; worst case per crash = the TTL, a crash right after acquiring)"
        )?;
    }

    Ok(())
}

/// The recommended TTL (or why there is none) and, with a crash rate, what crashes cost at it.
fn print_recommended<W: Write>(w: &mut W, r: &Recommendation) -> io::Result<()> {
    let p = &r.params;
    let crashes = p.crash_rate_per_s.map(|r| r * 86_400.0);
    match (r.recommended_ttl_ms, r.in_practice.first()) {
        (Some(t), Some(row)) => writeln!(
            w,
            "\nrecommended TTL  {}  — meets the target {:e}: with {:.0} % confidence at most \
             {} overruns per million sections, {} per day at {} sections/s (from the data alone)",
            fmt_ttl(t),
            p.target,
            p.confidence * 100.0,
            fmt_count(row.per_million_bound),
            fmt_count(row.per_day_bound),
            fmt_count(p.rate_per_s),
        )?,
        _ => writeln!(
            w,
            "\nrecommended TTL  none from the data alone: collect at least {} samples, or accept \
             a model's TTL as an assumption",
            r.distribution_free.samples_needed
        )?,
    }
    match (r.crash, crashes) {
        (Some(c), _) => print_crash_line(w, &c)?,
        (None, Some(_)) => writeln!(
            w,
            "                 crashed holders: no recommended TTL to price; the table gives the \
             blocked time per crash and per day for each candidate"
        )?,
        (None, None) => {}
    }
    Ok(())
}

/// The crash figures beside the recommended TTL's overrun risk.
fn print_crash_line<W: Write>(w: &mut W, c: &CrashCost) -> io::Result<()> {
    writeln!(
        w,
        "                 — a crashed holder blocks its key {} per crash on average, {} at worst \
         (a crash right after acquiring): {} blocked per day at {} holder crashes/day (model: \
         crash uniform within a section, blocked until the key expires)",
        fmt_ms(c.blocked_per_crash_ms.mean),
        fmt_ttl(c.blocked_per_crash_ms.max),
        fmt_ms(c.blocked_per_day_ms),
        fmt_count(c.rate_per_day)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recommend::tests::exact;
    use crate::recommend::{Params, recommend};

    /// The printer shows the worst case, the refusal and the models on a small sample.
    #[test]
    fn printer_shows_the_sections() {
        let values: Vec<f64> = (1..=500).map(|i| f64::from(i) * 0.1).collect();
        let r = recommend(&exact(&values), &Params::default());
        let mut out = Vec::new();
        print_recommendation(&mut out, &r).unwrap();
        let text = String::from_utf8(out).unwrap();
        for needle in [
            "observed",
            "worst case × margin 1.5 = 75.00 ms",
            "NOT SUPPORTED",
            "29956",
            "MODEL",
            "assumed; set --rate",
            "recommended TTL  none",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
