//! Durations written with units (`250ms`, `1.5s`, `30us`, `2m`), as used in profiles and flags.
//!
//! Everything inside lockbench counts time in whole microseconds (`u64`); the only place a
//! fractional millisecond appears is a sampled duration before it is rounded.

use std::time::Duration;

/// Why a duration text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text has no number in front of the unit.
    #[error(
        "`{0}` is not a duration: expected a number followed by a unit, e.g. `250ms`, `1.5s`, `30us`, `2m`"
    )]
    NotADuration(String),
    /// A number was given without a unit (a bare `250` would be ambiguous).
    #[error("`{0}` has no unit: write e.g. `{0}ms` or `{0}s` (units: us, ms, s, m, h)")]
    MissingUnit(String),
    /// The unit is not one of the known ones.
    #[error("`{text}` has an unknown unit `{unit}`: use one of us, ms, s, m, h")]
    UnknownUnit {
        /// The full text.
        text: String,
        /// The unit that was not recognised.
        unit: String,
    },
    /// Negative, NaN or too large.
    #[error("`{0}` is out of range: a duration must be ≥ 0 and at most 1000h")]
    OutOfRange(String),
}

/// Parses `250ms`, `1.5s`, `30us` (or `µs`), `2m`, `1h` into milliseconds (f64).
pub fn parse_ms(text: &str) -> Result<f64, UnitError> {
    let t = text.trim();
    let split = t
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
        })
        .unwrap_or(t.len());
    // `e` is also the first letter of no unit we accept, but guard against "1e3ms" vs "5e" weirdness
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(UnitError::NotADuration(t.to_string()));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError::NotADuration(t.to_string()))?;
    let factor = match unit.trim() {
        "" => return Err(UnitError::MissingUnit(t.to_string())),
        "us" | "µs" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3600e3,
        other => {
            return Err(UnitError::UnknownUnit {
                text: t.to_string(),
                unit: other.to_string(),
            });
        }
    };
    let ms = value * factor;
    if !ms.is_finite() || !(0.0..=3.6e9).contains(&ms) {
        return Err(UnitError::OutOfRange(t.to_string()));
    }
    Ok(ms)
}

/// Parses a duration text into a [`Duration`] (microsecond precision).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    Ok(Duration::from_micros(ms_to_us(parse_ms(text)?)))
}

/// The longest time lockbench handles: 1000 hours, in µs. Sampled durations are capped here so
/// heavy-tailed distributions cannot overflow the clock arithmetic.
pub const MAX_US: u64 = 3_600_000_000_000;

/// Rounds milliseconds to whole microseconds (negative and NaN values become 0; values are
/// capped at [`MAX_US`]).
pub fn ms_to_us(ms: f64) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        0
    } else {
        ((ms * 1000.0).round()).min(MAX_US as f64) as u64
    }
}

/// Formats microseconds compactly with a unit: `850us`, `12.5ms`, `1.25s`, `2m30s`.
pub fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        trim(format!("{:.3}", us as f64 / 1e3)) + "ms"
    } else if us < 60_000_000 {
        trim(format!("{:.3}", us as f64 / 1e6)) + "s"
    } else {
        let s = us / 1_000_000;
        format!("{}m{}s", s / 60, s % 60)
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_ms("250ms").unwrap(), 250.0);
        assert_eq!(parse_ms("1.5s").unwrap(), 1500.0);
        assert_eq!(parse_ms("30us").unwrap(), 0.03);
        assert_eq!(parse_ms("2m").unwrap(), 120_000.0);
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
    }

    #[test]
    fn refuses_bad_text_with_the_reason() {
        assert_eq!(parse_ms("250"), Err(UnitError::MissingUnit("250".into())));
        assert!(matches!(
            parse_ms("5 parsecs"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(parse_ms("ms"), Err(UnitError::NotADuration(_))));
        assert!(matches!(parse_ms("-5ms"), Err(UnitError::OutOfRange(_))));
    }

    /// Huge and invalid values are clamped, never overflow.
    #[test]
    fn ms_to_us_is_bounded() {
        assert_eq!(ms_to_us(f64::INFINITY), MAX_US);
        assert_eq!(ms_to_us(1e300), MAX_US);
        assert_eq!(ms_to_us(f64::NAN), 0);
        assert_eq!(ms_to_us(-3.0), 0);
        assert_eq!(ms_to_us(1.5), 1500);
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(fmt_us(850), "850us");
        assert_eq!(fmt_us(12_500), "12.5ms");
        assert_eq!(fmt_us(1_250_000), "1.25s");
        assert_eq!(fmt_us(150_000_000), "2m30s");
    }
}
