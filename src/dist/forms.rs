//! The table of what a distribution text may say: each family's name, the parameters it
//! accepts, and its forms with an example and a meaning. The parser reads it (which names exist,
//! which parameters a family takes, the examples its error messages end with) and so does the
//! book's page of distributions (`docs/src/reference/distributions.md`, rendered by
//! `tests/it/docs.rs`), so a form the parser accepts cannot be missing from the page.

/// One distribution family, as written in a distribution text.
#[derive(Debug)]
pub struct DistFamily {
    /// The name before the `(`, lower case (matched without regard to case).
    pub name: &'static str,
    /// Every parameter name it accepts.
    pub accepted: &'static [&'static str],
    /// The parameters a value without a name stands for, in order.
    pub positional: &'static [&'static str],
    /// Its forms: which parameters go together and what they mean.
    pub forms: &'static [DistForm],
}

/// One way of writing a family: a set of parameters that goes together.
#[derive(Debug)]
pub struct DistForm {
    /// The parameters, as a reader of the book is told them (markdown).
    pub params: &'static str,
    /// Examples that parse (tested), in the order error messages show them.
    pub examples: &'static [&'static str],
    /// What a distribution of this form is (markdown).
    pub meaning: &'static str,
}

impl DistFamily {
    /// The examples of all its forms, as error messages end: "`a`, `b` or `c`".
    pub fn usage(&self) -> String {
        let all: Vec<String> = self
            .forms
            .iter()
            .flat_map(|f| f.examples)
            .map(|e| format!("`{e}`"))
            .collect();
        match all.split_last() {
            None => String::new(),
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }
}

/// The names of all families, as error messages list them: "constant, uniform, …".
pub(super) fn family_names() -> String {
    FAMILIES
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every distribution family, in the order error messages and the book list them.
pub const FAMILIES: &[DistFamily] = &[
    DistFamily {
        name: "constant",
        accepted: &["value"],
        positional: &["value"],
        forms: &[DistForm {
            params: "`value` (a duration)",
            examples: &["constant(2ms)", "constant(value=2ms)"],
            meaning: "always the same value",
        }],
    },
    DistFamily {
        name: "uniform",
        accepted: &["min", "max"],
        positional: &["min", "max"],
        forms: &[DistForm {
            params: "`min`, `max` (durations, `min ≤ max`)",
            examples: &["uniform(70ms,110ms)", "uniform(min=70ms,max=110ms)"],
            meaning: "uniform on `[min, max]`",
        }],
    },
    DistFamily {
        name: "normal",
        accepted: &["mean", "sd"],
        positional: &["mean", "sd"],
        forms: &[DistForm {
            params: "`mean`, `sd` (durations, `sd > 0`; `mean` may be negative)",
            examples: &["normal(mean=50ms,sd=10ms)"],
            meaning: "normal truncated at 0 (exact: negatives are resampled)",
        }],
    },
    DistFamily {
        name: "lognormal",
        accepted: &["median", "p99", "mu", "sigma", "mean", "sd"],
        positional: &[],
        forms: &[
            DistForm {
                params: "`median=`, `p99=` (durations, `p99 > median`)",
                examples: &["lognormal(median=20ms,p99=120ms)"],
                meaning: "log-normal fitted to a median and a 99th percentile",
            },
            DistForm {
                params: "`mu=`, `sigma=` (numbers, `sigma > 0`)",
                examples: &["lognormal(mu=3.0,sigma=0.5)"],
                meaning: "log-normal with `ln(ms) ~ N(mu, sigma²)`",
            },
            DistForm {
                params: "`mean=`, `sd=` (durations > 0)",
                examples: &["lognormal(mean=25ms,sd=10ms)"],
                meaning: "log-normal with the given mean and standard deviation",
            },
        ],
    },
    DistFamily {
        name: "exponential",
        accepted: &["mean", "rate"],
        positional: &["mean"],
        forms: &[
            DistForm {
                params: "`mean` (a duration > 0)",
                examples: &["exponential(30ms)", "exponential(mean=30ms)"],
                meaning: "exponential with the given mean",
            },
            DistForm {
                params: "`rate=` (a number > 0 per unit: `0.1/ms`, `20/s`)",
                examples: &["exponential(rate=0.1/ms)"],
                meaning: "exponential with the given rate (`mean = 1/rate`)",
            },
        ],
    },
    DistFamily {
        name: "pareto",
        accepted: &["scale", "shape"],
        positional: &["scale", "shape"],
        forms: &[DistForm {
            params: "`scale` (a duration > 0), `shape` (a number > 0)",
            examples: &["pareto(scale=10ms,shape=2.5)"],
            meaning: "Pareto type I: `P(X > x) = (scale / x)^shape` for `x ≥ scale`",
        }],
    },
    DistFamily {
        name: "weibull",
        accepted: &["scale", "shape"],
        positional: &["scale", "shape"],
        forms: &[DistForm {
            params: "`scale` (a duration > 0), `shape` (a number > 0)",
            examples: &["weibull(scale=20ms,shape=1.5)"],
            meaning: "Weibull: `P(X > x) = exp(-(x / scale)^shape)`",
        }],
    },
    DistFamily {
        name: "mixture",
        accepted: &[],
        positional: &[],
        forms: &[DistForm {
            params: "`weight*distribution`, … (weights > 0 summing to 1)",
            examples: &["mixture(0.99*constant(5ms),0.01*uniform(1s,3s))"],
            meaning: "weighted mixture: each draw comes from one part, chosen by weight; \
                      parts may be mixtures",
        }],
    },
    DistFamily {
        name: "empirical",
        accepted: &["file", "column", "unit", "scale"],
        positional: &["file"],
        forms: &[DistForm {
            params: "`file` (a CSV file with a header line), then optional `column=` \
                     (default `durationMs`), `unit=` (`us`, `ms` or `s`; default `ms`), \
                     `scale=` (a factor > 0; default 1)",
            examples: &[
                "empirical(runs.csv)",
                "empirical(file=runs.csv,column=durationMs,unit=ms)",
            ],
            meaning: "resampling of the values recorded in the column, times `scale`; a path \
                      with `,`, `(`, `)` or `=` is written in double quotes",
        }],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::Dist;

    /// Every example in the table parses, so the book and the error messages show valid text.
    #[test]
    fn every_example_parses() {
        for family in FAMILIES {
            for form in family.forms {
                for example in form.examples {
                    if let Err(e) = Dist::parse(example) {
                        panic!(
                            "the example `{example}` of {} does not parse: {e}",
                            family.name
                        );
                    }
                }
            }
        }
    }

    /// The usage text joins the examples as the error messages always said them.
    #[test]
    fn usage_joins_the_examples() {
        let usage = |name: &str| FAMILIES.iter().find(|f| f.name == name).unwrap().usage();
        assert_eq!(usage("normal"), "`normal(mean=50ms,sd=10ms)`");
        assert_eq!(
            usage("constant"),
            "`constant(2ms)` or `constant(value=2ms)`"
        );
        assert_eq!(
            usage("lognormal"),
            "`lognormal(median=20ms,p99=120ms)`, `lognormal(mu=3.0,sigma=0.5)` or \
             `lognormal(mean=25ms,sd=10ms)`"
        );
        assert_eq!(
            family_names(),
            "constant, uniform, normal, lognormal, exponential, pareto, weibull, mixture, empirical"
        );
    }
}
