//! How requests arrive in the open model: its type and text form.

use serde::Serialize;

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Arrivals {
    /// Evenly spaced, `rate` per second.
    Constant {
        /// Requests per second.
        rate: f64,
    },
    /// A Poisson process: exponential gaps with mean 1/`rate`.
    Poisson {
        /// Requests per second.
        rate: f64,
    },
    /// The rate moves linearly from `from` to `to` over the run's length.
    Ramp {
        /// Requests per second at the start.
        from: f64,
        /// Requests per second at the end.
        to: f64,
    },
}

impl Arrivals {
    /// Parses `constant(1000/s)`, `poisson(1000/s)`, `ramp(100/s, 1000/s)` (rates as
    /// `recommend --rate` writes them: `500`, `500/s`, `30000/min`).
    pub fn parse(text: &str) -> Result<Arrivals, String> {
        let t = text.trim();
        let usage = "write constant(RATE), poisson(RATE) or ramp(FROM, TO), e.g. poisson(1000/s)";
        let (name, args) = t
            .strip_suffix(')')
            .and_then(|r| r.split_once('('))
            .ok_or_else(|| format!("`{text}`: {usage}"))?;
        let rate = |s: &str| super::units::parse_rate(s).map_err(|e| format!("`{text}`: {e}"));
        let args: Vec<&str> = args.split(',').map(str::trim).collect();
        match (name.trim(), args.as_slice()) {
            ("constant", [r]) => Ok(Arrivals::Constant { rate: rate(r)? }),
            ("poisson", [r]) => Ok(Arrivals::Poisson { rate: rate(r)? }),
            ("ramp", [a, b]) => Ok(Arrivals::Ramp {
                from: rate(a)?,
                to: rate(b)?,
            }),
            _ => Err(format!("`{text}`: {usage}")),
        }
    }
}
