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
    pub fn parse(text: &str) -> Result<Arrivals, ArrivalsError> {
        let t = text.trim();
        let shape = || ArrivalsError::Shape(text.to_string());
        let (name, args) = t
            .strip_suffix(')')
            .and_then(|r| r.split_once('('))
            .ok_or_else(shape)?;
        let rate = |s: &str| {
            super::units::parse_rate(s).map_err(|rate| ArrivalsError::Rate {
                text: text.to_string(),
                rate,
            })
        };
        let args: Vec<&str> = args.split(',').map(str::trim).collect();
        match (name.trim(), args.as_slice()) {
            ("constant", [r]) => Ok(Arrivals::Constant { rate: rate(r)? }),
            ("poisson", [r]) => Ok(Arrivals::Poisson { rate: rate(r)? }),
            ("ramp", [a, b]) => Ok(Arrivals::Ramp {
                from: rate(a)?,
                to: rate(b)?,
            }),
            _ => Err(shape()),
        }
    }
}

/// Why an arrival model was refused: the text, and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArrivalsError {
    /// Not one of the three shapes.
    #[error("`{0}`: write constant(RATE), poisson(RATE) or ramp(FROM, TO), e.g. poisson(1000/s)")]
    Shape(String),
    /// A rate that is not one (`units::parse_rate`'s words).
    #[error("`{text}`: {rate}")]
    Rate {
        /// The whole text.
        text: String,
        /// Why the rate was refused.
        rate: String,
    },
}

crate::exit::classify!(ArrivalsError => BadInput);
