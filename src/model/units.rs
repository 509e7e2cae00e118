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
    #[error("`{0}` is out of range: a duration must be ≥ 0 and at most {MAX_TEXT}")]
    OutOfRange(String),
}
crate::exit::classify!(UnitError => BadInput);

/// Parses `250ms`, `1.5s`, `30us` (or `µs`), `2m`, `1h` into milliseconds (f64).
pub(crate) fn parse_ms(text: &str) -> Result<f64, UnitError> {
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
    check_ms(value * factor).map_err(|_| UnitError::OutOfRange(t.to_string()))
}

/// Accepts a duration in ms that lies in `0 ..= MAX_MS` (finite); the one bound every source
/// of durations (flags, profiles, distributions, empirical files, `recommend` inputs) uses.
pub(crate) fn check_ms(ms: f64) -> Result<f64, OutOfRange> {
    if ms.is_finite() && (0.0..=MAX_MS).contains(&ms) {
        Ok(ms)
    } else {
        Err(OutOfRange(ms))
    }
}

/// A duration (ms) outside `0 ..= MAX_MS`; its message states the valid range.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{} ms is out of range: a duration must be ≥ 0 and at most {MAX_TEXT}", fmt_num(*.0))]
pub(crate) struct OutOfRange(pub f64);
crate::exit::classify!(OutOfRange => BadInput);

/// Parses a duration text into a [`Duration`] (microsecond precision).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    Ok(Duration::from_micros(ms_to_us(parse_ms(text)?)))
}

/// A duration as a profile or a flag writes it (`250ms`, `1.5s`): its value in µs, read once
/// at the door, and its text, kept so that what lockbench writes back (the profile in
/// `manifest.json`) is what the user wrote. Clap reads it through `FromStr`, a profile through
/// `Deserialize` (the same `FromStr`: one grammar, one message); it serializes as its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationText {
    us: u64,
    text: String,
}

impl DurationText {
    /// The value, whole µs.
    pub fn us(&self) -> u64 {
        self.us
    }

    /// A duration lockbench chose rather than read (a sweep's cell's TTL), written as
    /// messages write it (`150ms`).
    pub fn from_us(us: u64) -> DurationText {
        DurationText {
            us,
            text: fmt_us(us, Style::Compact),
        }
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::str::FromStr for DurationText {
    type Err = UnitError;
    fn from_str(text: &str) -> Result<Self, UnitError> {
        Ok(DurationText {
            us: ms_to_us(parse_ms(text)?),
            text: text.to_string(),
        })
    }
}

impl std::fmt::Display for DurationText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for DurationText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <String as serde::Deserialize>::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The longest time lockbench handles: 1000 hours, in µs. Sampled durations are capped here so
/// heavy-tailed distributions cannot overflow the clock arithmetic.
pub(crate) const MAX_US: u64 = 3_600_000_000_000;
/// [`MAX_US`] in milliseconds.
pub(crate) const MAX_MS: f64 = MAX_US as f64 / 1000.0;
/// [`MAX_US`] as written in messages.
pub(crate) const MAX_TEXT: &str = "1000h";

/// Rounds milliseconds to whole microseconds (negative and NaN values become 0; values are
/// capped at [`MAX_US`]).
pub(crate) fn ms_to_us(ms: f64) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        0
    } else {
        ((ms * 1000.0).round()).min(MAX_US as f64) as u64
    }
}

/// How [`fmt_us`] writes a duration below a minute (from a minute on both write `2m30s`,
/// `1h5m`, `41d16h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Messages and terminal tables: as short as possible, the unit attached, in ASCII:
    /// `850us`, `12.5ms`, `1.25s`.
    Compact,
    /// Charts and `report.html`: a space before the unit, `µs`, and fixed decimals so that
    /// neighbouring labels line up: `850 µs`, `2.50 ms`, `20.0 ms`, `1.25 s`.
    Spaced,
}

/// Formats microseconds with a unit in the given [`Style`]. From a minute on, whole seconds in
/// the largest units (trailing zero parts left out), the same in both styles.
pub(crate) fn fmt_us(us: u64, style: Style) -> String {
    let v = us as f64;
    match style {
        _ if us >= 60_000_000 => fmt_long(us),
        Style::Compact if us < 1_000 => format!("{us}us"),
        Style::Compact if us < 1_000_000 => trim(format!("{:.3}", v / 1e3)) + "ms",
        Style::Compact => trim(format!("{:.3}", v / 1e6)) + "s",
        Style::Spaced if us < 1_000 => format!("{us} µs"),
        Style::Spaced if us < 10_000 => format!("{:.2} ms", v / 1e3),
        Style::Spaced if us < 1_000_000 => format!("{:.1} ms", v / 1e3),
        Style::Spaced => format!("{:.2} s", v / 1e6),
    }
}

/// A minute or more in days, hours, minutes and seconds: `2m30s`, `1h0m5s`, `41d16h`.
fn fmt_long(us: u64) -> String {
    let s = us / 1_000_000;
    let parts = [
        (s / 86_400, "d"),
        (s % 86_400 / 3600, "h"),
        (s % 3600 / 60, "m"),
        (s % 60, "s"),
    ];
    // From the first non-zero part to the last non-zero one: `1h0m5s`, `2d`, `3m`.
    let first = parts.iter().position(|p| p.0 > 0).unwrap_or(3);
    let last = parts.iter().rposition(|p| p.0 > 0).unwrap_or(3);
    parts[first..=last]
        .iter()
        .map(|(n, u)| format!("{n}{u}"))
        .collect()
}

/// Formats a number exactly (the shortest text that parses back to the same `f64`), in
/// scientific notation when plain digits would be long: `0.5`, `250`, `1e300`, `1e-300`.
/// For canonical texts that must round-trip, e.g. a distribution's `Display`.
pub(crate) fn fmt_exact(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e9).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// Formats a plain number for messages: ordinary values as Rust prints them (`0.01`, `250`),
/// very large or very small ones in scientific notation (`1e300`, `2.5e-9`), never hundreds of
/// digits.
pub(crate) fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 || !x.is_finite() || (1e-4..1e9).contains(&a) {
        let s = format!("{x}");
        // Long fractions (0.0033333333333333335) are cut to 6 significant digits.
        if s.len() > 12 && x.is_finite() {
            format!("{x:.5e}")
                .parse::<f64>()
                .map_or(s, |v| v.to_string())
        } else {
            s
        }
    } else {
        // Six significant digits, trailing zeros of the mantissa dropped: `1e300`, `1.79769e308`.
        let t = format!("{x:.5e}");
        match t.split_once('e') {
            Some((m, e)) => format!("{}e{e}", trim(m.to_string())),
            None => t,
        }
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Parses a rate as events per second: `100`, `100/s`, `6000/min`, `360000/h`, `2/ms`, `3/day`.
pub(crate) fn parse_rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, per_s) = match t.split_once('/') {
        None => (t, 1.0),
        Some((n, u)) => {
            let f = match u.trim() {
                "s" | "sec" => 1.0,
                "ms" => 1000.0,
                "min" | "m" => 1.0 / 60.0,
                "h" => 1.0 / 3600.0,
                "d" | "day" => 1.0 / 86400.0,
                other => {
                    return Err(format!(
                        "unknown unit `/{other}` in `{text}`: use /ms, /s, /min, /h or /day"
                    ));
                }
            };
            (n.trim(), f)
        }
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * per_s),
        _ => Err(format!(
            "`{text}` is not a positive rate such as 100/s, 6000/min or 3/day"
        )),
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

    /// A duration text keeps what was written beside its value, and writes back the text.
    #[test]
    fn a_duration_text_keeps_its_text() {
        let d: DurationText = "1.5s".parse().unwrap();
        assert_eq!((d.us(), d.as_str()), (1_500_000, "1.5s"));
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"1.5s\"");
        assert_eq!(
            "250".parse::<DurationText>(),
            Err(UnitError::MissingUnit("250".into()))
        );
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
        assert_eq!(fmt_us(850, Style::Compact), "850us");
        assert_eq!(fmt_us(12_500, Style::Compact), "12.5ms");
        assert_eq!(fmt_us(1_250_000, Style::Compact), "1.25s");
        assert_eq!(fmt_us(150_000_000, Style::Compact), "2m30s");
    }

    /// The spaced style (charts, report.html) has fixed decimals so labels line up.
    #[test]
    fn formats_spaced_for_charts() {
        assert_eq!(fmt_us(850, Style::Spaced), "850 µs");
        assert_eq!(fmt_us(2500, Style::Spaced), "2.50 ms");
        assert_eq!(fmt_us(20_000, Style::Spaced), "20.0 ms");
        assert_eq!(fmt_us(1_250_000, Style::Spaced), "1.25 s");
        // Long durations in hours and days, as in the compact style (was `3600000.00 s`).
        assert_eq!(fmt_us(MAX_US, Style::Spaced), "41d16h");
        assert_eq!(fmt_us(90 * 60_000_000, Style::Spaced), "1h30m");
    }

    /// Long durations use hours and days (1000h used to print as `60000m0s`).
    #[test]
    fn formats_hours_and_days() {
        let f = |us| fmt_us(us, Style::Compact);
        assert_eq!(f(MAX_US), "41d16h");
        assert_eq!(f(120_000_000), "2m");
        assert_eq!(f(3_600_000_000), "1h");
        assert_eq!(f(3_605_000_000), "1h0m5s");
        assert_eq!(f(5_400_000_000), "1h30m");
        assert_eq!(f(86_400_000_000), "1d");
        assert_eq!(f(u64::MAX), "213503982d8h1m49s");
    }

    /// The one duration bound: 1000h is accepted, anything above, negative or not finite is not,
    /// and the message states the range without printing hundreds of digits.
    #[test]
    fn one_bound_for_every_duration() {
        assert_eq!(check_ms(MAX_MS), Ok(MAX_MS));
        assert_eq!(parse_ms("1000h"), Ok(MAX_MS));
        assert!(matches!(parse_ms("1001h"), Err(UnitError::OutOfRange(_))));
        for bad in [MAX_MS * 1.0001, f64::MAX, f64::INFINITY, f64::NAN, -1.0] {
            let e = check_ms(bad).unwrap_err().to_string();
            assert!(e.contains("at most 1000h") && e.len() < 80, "{e}");
        }
    }

    /// Exact numbers round-trip and stay short.
    #[test]
    fn exact_numbers_round_trip_briefly() {
        for x in [
            1e300,
            1e-300,
            0.5,
            250.0,
            1.0 / 3.0,
            123_456_789_012.5,
            f64::MAX,
        ] {
            let t = fmt_exact(x);
            assert_eq!(t.parse::<f64>().unwrap(), x, "{t}");
            assert!(t.len() < 25, "{t}");
        }
        assert_eq!(fmt_exact(1e300), "1e300");
        assert_eq!(fmt_exact(0.5), "0.5");
    }

    /// Numbers in messages stay short whatever their size.
    #[test]
    fn numbers_print_sanely() {
        assert_eq!(fmt_num(1e300), "1e300");
        assert_eq!(fmt_num(0.01), "0.01");
        assert_eq!(fmt_num(250.0), "250");
        assert_eq!(fmt_num(2.5e-9), "2.5e-9");
        assert_eq!(fmt_num(1.0 / 300.0), "0.00333333");
        assert_eq!(fmt_num(f64::INFINITY), "inf");
        assert_eq!(fmt_num(f64::MAX), "1.79769e308");
    }

    /// Rates parse with their unit; what is not a positive rate says what would be.
    #[test]
    fn rates() {
        assert_eq!(parse_rate("100").unwrap(), 100.0);
        assert_eq!(parse_rate("100/s").unwrap(), 100.0);
        assert_eq!(parse_rate("6000/min").unwrap(), 100.0);
        assert_eq!(parse_rate("2/ms").unwrap(), 2000.0);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-3/s").is_err());
        assert!(parse_rate("3/week").unwrap_err().contains("/min"));
        assert_eq!(parse_rate("3/day").unwrap() * 86_400.0, 3.0);
        assert_eq!(parse_rate("0.5/h").unwrap() * 86_400.0, 12.0);
    }
}
