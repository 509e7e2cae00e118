//! The grammar of distribution texts (listed in [`super`]): a recursive-descent parser whose
//! errors point with a caret at the column at fault and say what would be valid. It reads no
//! file: an `empirical(…)` only names its file, read later by [`Dist::load`].
//!
//! Past 800 lines only through its tests (about 130 lines of error-message checks).

use super::forms::{DistFamily, FAMILIES, family_names};
use super::{Dist, DistError, Empirical, Z_P99};
use crate::inputs::Unit;
use crate::math::normal_sf;
use crate::model::units;

/// Deepest nesting of `mixture(…)` accepted (guards the recursive parser).
const MAX_DEPTH: usize = 16;

/// Below this probability of a positive value, a truncated normal is refused at parse time.
const MIN_NORMAL_MASS: f64 = 1e-6;

/// Parses a whole distribution text (reads no file).
pub(super) fn parse(text: &str) -> Result<Dist, DistError> {
    let mut p = Parser {
        src: text,
        pos: 0,
        depth: 0,
    };
    let d = p.dist()?;
    p.skip_ws();
    if p.pos < text.len() {
        return Err(p.err(
            p.pos,
            format!("unexpected {} after the distribution", p.found()),
        ));
    }
    Ok(d)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Constant,
    Uniform,
    Normal,
    LogNormal,
    Exponential,
    Pareto,
    Weibull,
    Mixture,
    Empirical,
}

impl Family {
    /// Every family, in the order of [`FAMILIES`] (a test checks they agree).
    const ALL: [Family; 9] = [
        Family::Constant,
        Family::Uniform,
        Family::Normal,
        Family::LogNormal,
        Family::Exponential,
        Family::Pareto,
        Family::Weibull,
        Family::Mixture,
        Family::Empirical,
    ];

    fn from_name(name: &str) -> Option<Family> {
        Family::ALL
            .into_iter()
            .find(|f| f.spec().name.eq_ignore_ascii_case(name))
    }

    /// Its entry in the table of forms: names, parameters, examples.
    fn spec(self) -> &'static DistFamily {
        &FAMILIES[self as usize]
    }

    fn name(self) -> &'static str {
        self.spec().name
    }
}

/// One `name=value` (or positional `value`) argument.
struct Arg<'a> {
    name: Option<&'a str>,
    name_at: usize,
    value: &'a str,
    value_at: usize,
}

/// The arguments of one distribution, resolved to parameter names.
struct Params<'a> {
    family: Family,
    items: Vec<(&'static str, &'a str, usize)>,
    /// Position of the closing `)` (where a missing parameter would go).
    close_at: usize,
}

impl<'a> Params<'a> {
    fn get(&self, name: &str) -> Option<(&'a str, usize)> {
        self.items
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, v, at)| (*v, *at))
    }

    fn names(&self) -> Vec<&'static str> {
        self.items.iter().map(|(n, _, _)| *n).collect()
    }
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, at: usize, message: impl Into<String>) -> DistError {
        let at = at.min(self.src.len());
        DistError::Syntax {
            spec: self.src.to_string(),
            column: self.src.get(..at).map_or(at, |s| s.chars().count()) + 1,
            message: message.into(),
        }
    }

    fn rest(&self) -> &'a str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Describes what is at the current position, for "found …" in messages.
    fn found(&self) -> String {
        match self.peek() {
            None => "the end of the text".to_string(),
            Some(c) => format!("`{c}`"),
        }
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if !c.is_whitespace() {
                break;
            }
            self.pos += c.len_utf8();
        }
    }

    fn scan_while(&mut self, keep: impl Fn(char) -> bool) -> &'a str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if !keep(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        self.src.get(start..self.pos).unwrap_or("")
    }

    fn ident(&mut self) -> &'a str {
        self.scan_while(|c| c.is_ascii_alphanumeric() || c == '_')
    }

    /// Parses a whole distribution: `name(args)`.
    fn dist(&mut self) -> Result<Dist, DistError> {
        self.skip_ws();
        let name_at = self.pos;
        if self.depth >= MAX_DEPTH {
            return Err(self.err(
                name_at,
                format!("mixtures nested more than {MAX_DEPTH} deep"),
            ));
        }
        let name = self.ident();
        if name.is_empty() {
            return Err(self.err(
                name_at,
                format!(
                    "expected a distribution name ({}), found {}",
                    family_names(),
                    self.found()
                ),
            ));
        }
        let Some(family) = Family::from_name(name) else {
            return Err(self.err(
                name_at,
                format!(
                    "unknown distribution `{name}`; valid names are: {}",
                    family_names()
                ),
            ));
        };
        self.skip_ws();
        if self.peek() != Some('(') {
            let usage = family.spec().usage();
            return Err(self.err(
                self.pos,
                format!(
                    "expected `(` after `{name}`, found {}; e.g. {usage}",
                    self.found()
                ),
            ));
        }
        self.pos += 1;
        if family == Family::Mixture {
            self.depth += 1;
            let d = self.mixture(name_at);
            self.depth -= 1;
            return d;
        }
        let (args, close_at) = self.args(family)?;
        let params = self.resolve(family, args, close_at)?;
        self.build(params)
    }

    /// Reads `arg, arg, …)` after the `(`; returns the arguments and the position of `)`.
    fn args(&mut self, family: Family) -> Result<(Vec<Arg<'a>>, usize), DistError> {
        let mut out = Vec::new();
        self.skip_ws();
        if self.peek() == Some(')') {
            let close_at = self.pos;
            self.pos += 1;
            return Ok((out, close_at));
        }
        loop {
            self.skip_ws();
            let name_at = self.pos;
            let id = self.ident();
            self.skip_ws();
            let name = if !id.is_empty() && self.peek() == Some('=') {
                self.pos += 1;
                self.skip_ws();
                Some(id)
            } else {
                self.pos = name_at;
                None
            };
            let value_at = self.pos;
            let value = if self.peek() == Some('"') {
                self.pos += 1;
                let inner = self.scan_while(|c| c != '"');
                if self.peek() != Some('"') {
                    return Err(self.err(value_at, "unterminated `\"`: expected a closing quote"));
                }
                self.pos += 1;
                inner
            } else {
                let start = self.pos;
                let mut depth = 0usize;
                while let Some(c) = self.peek() {
                    match c {
                        '(' => depth += 1,
                        ')' if depth == 0 => break,
                        ')' => depth -= 1,
                        ',' if depth == 0 => break,
                        _ => {}
                    }
                    self.pos += c.len_utf8();
                }
                let v = self.src.get(start..self.pos).unwrap_or("").trim_end();
                if v.is_empty() {
                    let usage = family.spec().usage();
                    return Err(self.err(
                        value_at,
                        format!("expected a value, found {}; e.g. {usage}", self.found()),
                    ));
                }
                v
            };
            out.push(Arg {
                name,
                name_at,
                value,
                value_at,
            });
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(')') => {
                    let close_at = self.pos;
                    self.pos += 1;
                    return Ok((out, close_at));
                }
                None => {
                    return Err(self.err(
                        self.pos,
                        format!("missing `)` to close `{}(`", family.name()),
                    ));
                }
                Some(c) => {
                    return Err(self.err(self.pos, format!("expected `,` or `)`, found `{c}`")));
                }
            }
        }
    }

    /// Maps positional and named arguments to parameter names, refusing unknown or repeated ones.
    fn resolve(
        &self,
        family: Family,
        args: Vec<Arg<'a>>,
        close_at: usize,
    ) -> Result<Params<'a>, DistError> {
        let spec = family.spec();
        let (accepted, positional, usage) = (spec.accepted, spec.positional, spec.usage());
        let fname = family.name();
        let mut items: Vec<(&'static str, &'a str, usize)> = Vec::new();
        let mut seen_named = false;
        for (i, arg) in args.into_iter().enumerate() {
            let (pname, at) = match arg.name {
                Some(n) => {
                    seen_named = true;
                    let lower = n.to_ascii_lowercase();
                    let Some(p) = accepted.iter().find(|a| **a == lower) else {
                        return Err(self.err(
                            arg.name_at,
                            format!(
                                "unknown parameter `{n}` for {fname}; accepted: {}; e.g. {usage}",
                                accepted.join(", ")
                            ),
                        ));
                    };
                    (*p, arg.name_at)
                }
                None => {
                    if seen_named {
                        return Err(self.err(
                            arg.value_at,
                            format!(
                                "a value without a name follows a named one; write `name=value` \
                                 (accepted: {}); e.g. {usage}",
                                accepted.join(", ")
                            ),
                        ));
                    }
                    let Some(p) = positional.get(i) else {
                        let msg = if positional.is_empty() {
                            format!(
                                "{fname} parameters must be named ({}); e.g. {usage}",
                                accepted.join(", ")
                            )
                        } else {
                            format!(
                                "too many values: {fname} takes {} without names; e.g. {usage}",
                                positional.join(", ")
                            )
                        };
                        return Err(self.err(arg.value_at, msg));
                    };
                    (*p, arg.value_at)
                }
            };
            if items.iter().any(|(n, _, _)| *n == pname) {
                return Err(self.err(at, format!("parameter `{pname}` is given twice")));
            }
            items.push((pname, arg.value, arg.value_at));
        }
        Ok(Params {
            family,
            items,
            close_at,
        })
    }

    fn missing(&self, params: &Params<'_>, needs: &str) -> DistError {
        let usage = params.family.spec().usage();
        self.err(
            params.close_at,
            format!("{} needs {needs}; e.g. {usage}", params.family.name()),
        )
    }

    /// A required parameter.
    fn need(
        &self,
        params: &Params<'a>,
        name: &str,
        needs: &str,
    ) -> Result<(&'a str, usize), DistError> {
        params.get(name).ok_or_else(|| self.missing(params, needs))
    }

    fn duration(&self, value: &str, at: usize) -> Result<f64, DistError> {
        units::parse_ms(value).map_err(|e| {
            let why = match e {
                units::UnitError::NotADuration(_) => {
                    "a number followed by a unit: us, ms, s, m, h".to_string()
                }
                other => other.to_string(),
            };
            self.err(
                at,
                format!("expected a duration like `250ms`, found `{value}` ({why})"),
            )
        })
    }

    /// A duration that may be negative (the mean of a truncated normal).
    fn signed_duration(&self, value: &str, at: usize) -> Result<f64, DistError> {
        match value.strip_prefix('-') {
            Some(rest) => Ok(-self.duration(rest.trim_start(), at)?),
            None => self.duration(value, at),
        }
    }

    fn positive_duration(&self, value: &str, at: usize, what: &str) -> Result<f64, DistError> {
        let v = self.duration(value, at)?;
        if v > 0.0 {
            Ok(v)
        } else {
            Err(self.err(at, format!("{what} must be > 0, found `{value}`")))
        }
    }

    fn number(&self, value: &str, at: usize) -> Result<f64, DistError> {
        match value.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.err(
                at,
                format!("expected a finite number like `2.5`, found `{value}`"),
            )),
        }
    }

    fn positive_number(&self, value: &str, at: usize, what: &str) -> Result<f64, DistError> {
        let v = self.number(value, at)?;
        if v > 0.0 {
            Ok(v)
        } else {
            Err(self.err(at, format!("{what} must be > 0, found `{value}`")))
        }
    }

    fn build(&self, params: Params<'a>) -> Result<Dist, DistError> {
        match params.family {
            Family::Constant => {
                let (v, at) = self.need(&params, "value", "a value")?;
                Ok(Dist::Constant {
                    ms: self.duration(v, at)?,
                })
            }
            Family::Uniform => {
                let needs = "min= and max= (durations, min ≤ max)";
                let (lo_s, lo_at) = self.need(&params, "min", needs)?;
                let (hi_s, hi_at) = self.need(&params, "max", needs)?;
                let lo = self.duration(lo_s, lo_at)?;
                let hi = self.duration(hi_s, hi_at)?;
                if lo > hi {
                    return Err(self.err(
                        hi_at,
                        format!("uniform needs min ≤ max, but min is `{lo_s}` and max is `{hi_s}`"),
                    ));
                }
                Ok(Dist::Uniform { lo, hi })
            }
            Family::Normal => {
                let needs = "mean= and sd= (durations, sd > 0)";
                let (m_s, m_at) = self.need(&params, "mean", needs)?;
                let (sd_s, sd_at) = self.need(&params, "sd", needs)?;
                let mean = self.signed_duration(m_s, m_at)?;
                let sd = self.positive_duration(sd_s, sd_at, "sd")?;
                let mass = normal_sf(-mean / sd);
                if mass < MIN_NORMAL_MASS {
                    return Err(self.err(
                        m_at,
                        format!(
                            "normal is truncated at 0 and this one has almost no mass above 0 \
                             (P(X > 0) = {mass:.3e}, needs ≥ {MIN_NORMAL_MASS:e}); raise the mean \
                             or the sd"
                        ),
                    ));
                }
                Ok(Dist::Normal { mean, sd })
            }
            Family::LogNormal => self.lognormal(&params),
            Family::Exponential => {
                let needs = "exactly one of mean= (a duration) or rate= (e.g. `0.1/ms`)";
                match (params.get("mean"), params.get("rate")) {
                    (Some((v, at)), None) => Ok(Dist::Exponential {
                        mean: self.positive_duration(v, at, "mean")?,
                    }),
                    (None, Some((v, at))) => {
                        let rate = self.rate(v, at)?;
                        Ok(Dist::Exponential { mean: 1.0 / rate })
                    }
                    (Some(_), Some((_, at))) => {
                        Err(self.err(at, "exponential takes either mean= or rate=, not both"))
                    }
                    (None, None) => Err(self.missing(&params, needs)),
                }
            }
            Family::Pareto | Family::Weibull => {
                let needs = "scale= (a duration > 0) and shape= (a number > 0)";
                let (sc_s, sc_at) = self.need(&params, "scale", needs)?;
                let (sh_s, sh_at) = self.need(&params, "shape", needs)?;
                let scale = self.positive_duration(sc_s, sc_at, "scale")?;
                let shape = self.positive_number(sh_s, sh_at, "shape")?;
                Ok(if params.family == Family::Pareto {
                    Dist::Pareto { scale, shape }
                } else {
                    Dist::Weibull { scale, shape }
                })
            }
            // Only named here: `Dist::load` reads the file.
            Family::Empirical => Ok(Dist::Empirical(self.empirical(&params)?)),
            // Mixtures are parsed by `mixture`, never through `build`.
            Family::Mixture => Err(self.err(params.close_at, "internal: mixture in build")),
        }
    }

    /// `rate=0.1/ms` → 0.1 per ms.
    fn rate(&self, value: &str, at: usize) -> Result<f64, DistError> {
        let bad = || {
            self.err(
                at,
                format!("expected a rate like `0.1/ms` or `20/s`, found `{value}`"),
            )
        };
        let (num, unit) = value.split_once('/').ok_or_else(bad)?;
        let num: f64 = num.trim().parse().map_err(|_| bad())?;
        let per = units::parse_ms(&format!("1{}", unit.trim())).map_err(|_| bad())?;
        let rate = num / per;
        if rate.is_finite() && rate > 0.0 && (1.0 / rate).is_finite() {
            Ok(rate)
        } else {
            Err(self.err(at, format!("rate must be > 0, found `{value}`")))
        }
    }

    fn lognormal(&self, params: &Params<'a>) -> Result<Dist, DistError> {
        let needs = "one pair of parameters: median= and p99=, mu= and sigma=, or mean= and sd=";
        let mut names = params.names();
        names.sort_unstable();
        match names.as_slice() {
            ["median", "p99"] => {
                let (m_s, m_at) = self.need(params, "median", needs)?;
                let (p_s, p_at) = self.need(params, "p99", needs)?;
                let median = self.positive_duration(m_s, m_at, "median")?;
                let p99 = self.duration(p_s, p_at)?;
                if p99 <= median {
                    return Err(self.err(
                        p_at,
                        format!(
                            "lognormal needs p99 > median, but p99 is `{p_s}` and median is `{m_s}`"
                        ),
                    ));
                }
                let mu = median.ln();
                let sigma = (p99.ln() - mu) / Z_P99;
                Ok(Dist::LogNormal { mu, sigma })
            }
            ["mu", "sigma"] => {
                let (mu_s, mu_at) = self.need(params, "mu", needs)?;
                let (s_s, s_at) = self.need(params, "sigma", needs)?;
                let mu = self.number(mu_s, mu_at)?;
                let sigma = self.positive_number(s_s, s_at, "sigma")?;
                Ok(Dist::LogNormal { mu, sigma })
            }
            ["mean", "sd"] => {
                let (m_s, m_at) = self.need(params, "mean", needs)?;
                let (sd_s, sd_at) = self.need(params, "sd", needs)?;
                let mean = self.positive_duration(m_s, m_at, "mean")?;
                let sd = self.positive_duration(sd_s, sd_at, "sd")?;
                let cv = sd / mean;
                let sigma2 = (cv * cv).ln_1p();
                let sigma = sigma2.sqrt();
                if !(sigma > 0.0 && sigma.is_finite()) {
                    return Err(self.err(sd_at, "sd is too small relative to the mean"));
                }
                Ok(Dist::LogNormal {
                    mu: mean.ln() - 0.5 * sigma2,
                    sigma,
                })
            }
            _ => {
                let got = if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                };
                Err(self.err(
                    params.close_at,
                    format!(
                        "lognormal needs {needs} (got: {got}); e.g. {}",
                        params.family.spec().usage()
                    ),
                ))
            }
        }
    }

    fn empirical(&self, params: &Params<'a>) -> Result<Empirical, DistError> {
        let (file, _) = self.need(params, "file", "file= (a CSV file with a header line)")?;
        let column = params.get("column").map_or("durationMs", |(c, _)| c);
        let unit = match params.get("unit") {
            None => Unit::Ms,
            Some((u, at)) => match u {
                "us" | "µs" => Unit::Us,
                "ms" => Unit::Ms,
                "s" => Unit::S,
                _ => {
                    return Err(self.err(
                        at,
                        format!("unknown unit `{u}` for empirical values; use us, ms or s"),
                    ));
                }
            },
        };
        let scale = match params.get("scale") {
            None => 1.0,
            Some((v, at)) => self.positive_number(v, at, "scale")?,
        };
        Ok(Empirical {
            file: file.to_string(),
            column: column.to_string(),
            unit,
            scale,
            values: None,
        })
    }

    /// Parses `w*dist, w*dist, …)` after `mixture(`.
    fn mixture(&mut self, name_at: usize) -> Result<Dist, DistError> {
        let mut parts = Vec::new();
        loop {
            self.skip_ws();
            let w_at = self.pos;
            let w_text =
                self.scan_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
            if w_text.is_empty() {
                return Err(self.err(
                    w_at,
                    format!(
                        "expected a weight like `0.25` followed by `*` and a distribution, found {}; \
                         e.g. {}",
                        self.found(),
                        Family::Mixture.spec().usage()
                    ),
                ));
            }
            let w = match w_text.parse::<f64>() {
                Ok(w) if w.is_finite() => w,
                _ => {
                    return Err(self.err(
                        w_at,
                        format!("expected a weight like `0.25`, found `{w_text}`"),
                    ));
                }
            };
            if !(w > 0.0 && w <= 1.0) {
                return Err(self.err(
                    w_at,
                    format!("a mixture weight must be in (0, 1], found `{w_text}`"),
                ));
            }
            self.skip_ws();
            if self.peek() != Some('*') {
                return Err(self.err(
                    self.pos,
                    format!(
                        "expected `*` after the weight `{w_text}`, found {}",
                        self.found()
                    ),
                ));
            }
            self.pos += 1;
            let d = self.dist()?;
            parts.push((w, d));
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(')') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.err(self.pos, "missing `)` to close `mixture(`")),
                Some(c) => {
                    return Err(self.err(self.pos, format!("expected `,` or `)`, found `{c}`")));
                }
            }
        }
        let sum: f64 = parts.iter().map(|(w, _)| w).sum();
        if (sum - 1.0).abs() > 1e-6 {
            let terms: Vec<String> = parts.iter().map(|(w, _)| w.to_string()).collect();
            return Err(self.err(
                name_at,
                format!(
                    "mixture weights must sum to 1, but they sum to {sum} ({})",
                    terms.join(" + ")
                ),
            ));
        }
        Ok(Dist::Mixture(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::tests::{all_dists, empirical_fixture, loaded};

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
        ds.push(loaded(&format!("empirical(file={},unit=s)", path.display())).unwrap());
        for d in &ds {
            let text = d.to_string();
            let back = loaded(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
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

    /// The families of the parser and of the table of forms are the same, in the same order.
    #[test]
    fn every_family_has_its_row_in_the_table() {
        assert_eq!(Family::ALL.len(), FAMILIES.len());
        for (i, f) in Family::ALL.into_iter().enumerate() {
            assert_eq!(f as usize, i);
            assert_eq!(Family::from_name(FAMILIES[i].name), Some(f));
        }
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
}
