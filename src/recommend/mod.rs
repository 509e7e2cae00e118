//! `lockbench recommend`: which TTL do my measured critical sections need?
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
//! Inputs ([`load_durations`]): a run's `events.csv` (`duration_us`), a plain CSV with a duration
//! column, an `.hgrm` percentile distribution or an `.hlog` interval log. Histogram inputs give
//! order statistics from their counts: each value is its bucket's upper edge (HdrHistogram
//! precision), which keeps the distribution-free bound conservative.
//!
//! File reading ([`load_durations`], [`read_csv`], [`parse_hgrm`], [`parse_hlog`]) is separate
//! from the computation ([`recommend`]) and the printer ([`print_recommendation`]).

use crate::math::{normal_quantile, normal_sf};
use anyhow::Context;
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde::Serialize;
use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

/// `recommend`: a TTL for measured section durations.
#[derive(Debug, clap::Args, Clone)]
pub struct RecommendArgs {
    /// Measured durations: a run's events.csv (uses duration_us), a CSV with a duration column
    /// (see --column, --unit), an .hgrm percentile distribution or an .hlog interval log.
    #[arg(long)]
    pub durations: PathBuf,
    /// CSV column holding the durations [default: durationMs; events.csv: duration_us].
    #[arg(long)]
    pub column: Option<String>,
    /// Unit of the values in the file [default: ms for CSV and .hgrm, us for events.csv and
    /// .hlog].
    #[arg(long, value_enum)]
    pub unit: Option<Unit>,
    /// Only this variant: the `variant` column of events.csv, the interval tag of an .hlog
    /// [default: all, merged].
    #[arg(long)]
    pub tag: Option<String>,
    /// Acceptable overrun probability per section.
    #[arg(long, default_value_t = 1e-4, allow_negative_numbers = true)]
    pub target: f64,
    /// Factor applied to the observed worst case.
    #[arg(long, default_value_t = 1.5, allow_negative_numbers = true)]
    pub margin: f64,
    /// Confidence of the distribution-free bound.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub confidence: f64,
    /// Sections per second, to turn probabilities into overruns per day: `100`, `100/s`,
    /// `6000/min`, `2/ms` [default: 10/s, assumed].
    #[arg(long)]
    pub rate: Option<String>,
    /// Fraction of the largest values the generalised Pareto tail is fitted to.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    pub tail_fraction: f64,
    /// Also write the answer as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `lockbench recommend`: loads, computes, prints to stdout, writes the JSON file.
pub fn run_recommend(args: &RecommendArgs) -> anyhow::Result<i32> {
    let rate = match &args.rate {
        Some(r) => Some(parse_rate(r).map_err(|e| anyhow::anyhow!("--rate: {e}"))?),
        None => None,
    };
    let params = Params::new(
        args.target,
        args.confidence,
        args.margin,
        rate,
        args.tail_fraction,
    )?;
    let opts = LoadOptions {
        column: args.column.clone(),
        unit: args.unit,
        tag: args.tag.clone(),
    };
    let loaded = load_durations(&args.durations, &opts)?;
    let mut rec = recommend(&loaded.samples, &params);
    rec.input = Some(loaded.input);
    let stdout = io::stdout();
    print_recommendation(stdout.lock(), &rec)?;
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rec)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(0)
}

/// Parses a rate in sections per second: `100`, `100/s`, `6000/min`, `360000/h`, `2/ms`.
pub fn parse_rate(text: &str) -> Result<f64, String> {
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
            "`{text}` is not a positive rate such as 100/s or 6000/min"
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// Unit of the values in an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl Unit {
    /// Milliseconds per unit.
    pub fn ms(self) -> f64 {
        match self {
            Unit::Us => 1e-3,
            Unit::Ms => 1.0,
            Unit::S => 1e3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Us => "µs",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }
}

/// How to read an input file.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// CSV column (default `durationMs`; `duration_us` for events.csv).
    pub column: Option<String>,
    /// Unit of the values (default per kind: ms for CSV and .hgrm, µs for events.csv and .hlog).
    pub unit: Option<Unit>,
    /// Only this variant (events.csv `variant` column, .hlog interval tag).
    pub tag: Option<String>,
}

/// Measured durations.
#[derive(Debug, Clone)]
pub enum Samples {
    /// Every measured value in ms, sorted ascending (from CSV inputs).
    Exact(Vec<f64>),
    /// Counts of an HdrHistogram (from .hgrm/.hlog inputs); a recorded value `v` stands for
    /// `v × unit_ms` milliseconds.
    Histogram {
        /// The counts.
        hist: Histogram<u64>,
        /// Milliseconds per recorded unit (0.001 for a histogram in µs).
        unit_ms: f64,
    },
}

impl Samples {
    /// Exact samples from values in ms in any order (NaN and negative values are dropped).
    pub fn from_ms(mut ms: Vec<f64>) -> Samples {
        ms.retain(|v| v.is_finite() && *v >= 0.0);
        ms.sort_by(f64::total_cmp);
        Samples::Exact(ms)
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        match self {
            Samples::Exact(v) => v.len() as u64,
            Samples::Histogram { hist, .. } => hist.len(),
        }
    }

    /// `true` without any sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What kind of file the samples came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A lockbench `events.csv`.
    EventsCsv,
    /// A CSV with a duration column.
    Csv,
    /// An HdrHistogram percentile distribution.
    Hgrm,
    /// An HdrHistogram interval log.
    Hlog,
}

/// Where the samples came from and how they were read.
#[derive(Debug, Clone, Serialize)]
pub struct InputInfo {
    /// The file as given.
    pub file: String,
    /// Its kind.
    pub kind: InputKind,
    /// The CSV column read.
    pub column: Option<String>,
    /// Unit of the values in the file.
    pub unit: Unit,
    /// Variants/tags present in the file (events.csv `variant`, .hlog tags).
    pub tags: Vec<String>,
    /// The tag selected with `--tag`.
    pub selected_tag: Option<String>,
    /// Rows skipped (interrupted sections of events.csv, other variants).
    pub skipped_rows: u64,
    /// Remarks about the reading.
    pub notes: Vec<String>,
}

/// Samples and their provenance.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The durations.
    pub samples: Samples,
    /// Where they came from.
    pub input: InputInfo,
}

/// Why an input file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be opened or read; check the path and permissions.
    #[error("cannot read `{file}`")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        source: io::Error,
    },
    /// The extension is not one of the accepted kinds; rename the file or convert it.
    #[error(
        "`{file}`: unknown kind of file ({found}); accepted: .csv (a lockbench events.csv or a \
         CSV with a duration column), .hgrm (HdrHistogram percentile distribution), .hlog \
         (HdrHistogram interval log)"
    )]
    UnknownKind {
        /// The file.
        file: String,
        /// What was found instead, e.g. "extension `.txt`".
        found: String,
    },
    /// The content is malformed; the message names the line and column and says what is valid.
    #[error("`{file}`{}: {message}", location(*line, column.as_deref()))]
    Data {
        /// The file.
        file: String,
        /// 1-based line, when the problem is on one line.
        line: Option<u64>,
        /// The column, e.g. ``column 2 (`durationMs`)``.
        column: Option<String>,
        /// What is wrong.
        message: String,
    },
}

fn location(line: Option<u64>, column: Option<&str>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(", line {l}, {c}"),
        (Some(l), None) => format!(", line {l}"),
        (None, Some(c)) => format!(", {c}"),
        (None, None) => String::new(),
    }
}

/// The message for a value above the duration bound (or not representable).
fn out_of_range(cell: &str) -> String {
    format!(
        "`{cell}` is out of range: a duration must be ≥ 0 and at most {} ({} ms)",
        crate::units::MAX_TEXT,
        crate::units::MAX_MS
    )
}

fn data_err(file: &str, line: Option<u64>, column: Option<String>, message: String) -> LoadError {
    LoadError::Data {
        file: file.to_string(),
        line,
        column,
        message,
    }
}

/// Reads durations from `path`; the kind follows the extension (`.csv`, `.hgrm`, `.hlog`), and a
/// CSV whose header has `duration_us` and `acquired_us` is read as a lockbench events.csv.
pub fn load_durations(path: &Path, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let file = path.display().to_string();
    let io_err = |source| LoadError::Io {
        file: file.clone(),
        source,
    };
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("csv") => {
            let f = std::fs::File::open(path).map_err(io_err)?;
            read_csv(io::BufReader::with_capacity(1 << 16, f), &file, opts)
        }
        Some("hgrm") => {
            let text = std::fs::read_to_string(path).map_err(io_err)?;
            parse_hgrm(&text, &file, opts)
        }
        Some("hlog") => {
            let bytes = std::fs::read(path).map_err(io_err)?;
            parse_hlog(&bytes, &file, opts)
        }
        Some(e) => Err(LoadError::UnknownKind {
            file,
            found: format!("extension `.{e}`"),
        }),
        None => Err(LoadError::UnknownKind {
            file,
            found: "no extension".to_string(),
        }),
    }
}

/// Reads a CSV (events.csv or a plain one with a header line) from `reader`; `file` names it in
/// errors.
pub fn read_csv<R: Read>(reader: R, file: &str, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(reader);
    let csv_err = |e: csv::Error| {
        let line = e.position().map(|p| p.line());
        data_err(file, line, None, format!("not valid CSV: {e}"))
    };
    let headers = rdr.headers().map_err(csv_err)?.clone();
    if headers.iter().all(str::is_empty) {
        return Err(data_err(
            file,
            Some(1),
            None,
            "the file is empty: expected a header line naming the duration column".to_string(),
        ));
    }
    let find = |name: &str| headers.iter().position(|h| h == name);
    let events = find("duration_us").is_some() && find("acquired_us").is_some();
    let (kind, column, default_unit) = match (&opts.column, events) {
        (None, true) => (InputKind::EventsCsv, "duration_us".to_string(), Unit::Us),
        (Some(c), true) => (InputKind::EventsCsv, c.clone(), Unit::Us),
        (c, false) => (
            InputKind::Csv,
            c.clone().unwrap_or_else(|| "durationMs".to_string()),
            Unit::Ms,
        ),
    };
    let unit = match (kind, opts.unit) {
        (InputKind::EventsCsv, Some(u)) if u != Unit::Us => {
            return Err(data_err(
                file,
                None,
                None,
                format!(
                    "this is a lockbench events.csv, whose times are always in µs; drop --unit {}",
                    u.name()
                ),
            ));
        }
        (_, u) => u.unwrap_or(default_unit),
    };
    let Some(index) = find(&column) else {
        let names: Vec<String> = headers.iter().map(|h| format!("`{h}`")).collect();
        return Err(data_err(
            file,
            Some(1),
            None,
            format!(
                "the header has no column `{column}`; its columns are {} (choose one with --column)",
                names.join(", ")
            ),
        ));
    };
    let column_desc = format!("column {} (`{column}`)", index + 1);
    // events.csv: skip sections cut short by Ctrl-C, and other variants when --tag is given.
    let variant_idx = if kind == InputKind::EventsCsv {
        find("variant")
    } else {
        None
    };
    let interrupted_idx = if kind == InputKind::EventsCsv {
        find("interrupted")
    } else {
        None
    };
    if opts.tag.is_some() && variant_idx.is_none() {
        return Err(data_err(
            file,
            Some(1),
            None,
            "--tag selects a variant, but the file has no `variant` column".to_string(),
        ));
    }
    let factor = unit.ms();
    let mut values = Vec::new();
    let mut tags = BTreeSet::new();
    let (mut interrupted, mut other_variant) = (0u64, 0u64);
    for record in rdr.records() {
        let record = record.map_err(csv_err)?;
        let line = record.position().map(|p| p.line());
        if record.iter().all(str::is_empty) {
            continue;
        }
        if let Some(v) = variant_idx.and_then(|i| record.get(i)) {
            if !tags.contains(v) {
                tags.insert(v.to_string());
            }
            if opts.tag.as_deref().is_some_and(|t| t != v) {
                other_variant += 1;
                continue;
            }
        }
        if interrupted_idx.and_then(|i| record.get(i)) == Some("true") {
            interrupted += 1;
            continue;
        }
        let cell_err = |message: String| data_err(file, line, Some(column_desc.clone()), message);
        let Some(cell) = record.get(index) else {
            return Err(cell_err(format!(
                "the row has only {} field(s), so there is no value",
                record.len()
            )));
        };
        if cell.is_empty() {
            return Err(cell_err("the cell is empty: expected a number".to_string()));
        }
        let v: f64 = match cell.parse() {
            Ok(v) if f64::is_finite(v) => v,
            _ => return Err(cell_err(format!("`{cell}` is not a finite number"))),
        };
        if v < 0.0 {
            return Err(cell_err(format!(
                "`{cell}` is negative: durations must be ≥ 0"
            )));
        }
        // The bound every duration in lockbench obeys (profiles, distributions): 1000h.
        let Ok(ms) = crate::units::check_ms(v * factor) else {
            return Err(cell_err(out_of_range(cell)));
        };
        values.push(ms);
    }
    if values.is_empty() {
        let why = if interrupted + other_variant > 0 {
            format!(
                "no usable rows ({interrupted} interrupted, {other_variant} of other variants; \
                 variants present: {})",
                tags.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        } else {
            format!("the file has a header but no rows: expected values in column `{column}`")
        };
        return Err(data_err(file, None, None, why));
    }
    let mut notes = Vec::new();
    if interrupted > 0 {
        notes.push(format!(
            "{interrupted} interrupted section(s) skipped (cut short, not real durations)"
        ));
    }
    if tags.len() > 1 && opts.tag.is_none() {
        notes.push(format!(
            "variants {} merged; choose one with --tag",
            tags.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(Loaded {
        samples: Samples::from_ms(values),
        input: InputInfo {
            file: file.to_string(),
            kind,
            column: Some(column),
            unit,
            tags: tags.into_iter().collect(),
            selected_tag: opts.tag.clone(),
            skipped_rows: interrupted + other_variant,
            notes,
        },
    })
}

fn new_hist(sigfig: u8) -> Histogram<u64> {
    Histogram::new(sigfig.clamp(1, 5))
        .unwrap_or_else(|_| unreachable!("1 to 5 significant figures is valid"))
}

/// Parses an HdrHistogram percentile distribution (`Value Percentile TotalCount 1/(1-Percentile)`
/// rows, `#` footer lines). Values are in `opts.unit` (default ms, as lockbench writes them).
///
/// The counts are rebuilt from the `TotalCount` column: the values between two listed rows are
/// counted at the upper one, so quantiles are exact at listed percentiles and rounded up between.
pub fn parse_hgrm(text: &str, file: &str, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    const COLUMNS: [&str; 3] = ["Value", "Percentile", "TotalCount"];
    let unit = opts.unit.unwrap_or(Unit::Ms);
    let to_us = unit.ms() * 1000.0;
    let mut hist = new_hist(3);
    let mut prev_total = 0u64;
    let mut footer_total: Option<(u64, u64)> = None;
    let mut rows = 0u64;
    let mut seen_header = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            // `#[Max = …, Total count = …]`: cross-checked against the rows below.
            if let Some(rest) = line.split("Total count").nth(1) {
                let digits: String = rest
                    .chars()
                    .skip_while(|c| !c.is_ascii_digit())
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(t) = digits.parse() {
                    footer_total = Some((t, line_no));
                }
            }
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !seen_header && rows == 0 && fields.first() == Some(&"Value") {
            seen_header = true;
            continue;
        }
        let col = |j: usize| format!("column {} (`{}`)", j + 1, COLUMNS[j]);
        if fields.len() < 3 {
            return Err(data_err(
                file,
                Some(line_no),
                None,
                format!(
                    "expected `Value Percentile TotalCount [1/(1-Percentile)]`, found `{line}`"
                ),
            ));
        }
        let value: f64 = match fields[0].parse() {
            Ok(v) if f64::is_finite(v) && v >= 0.0 => v,
            _ => {
                return Err(data_err(
                    file,
                    Some(line_no),
                    Some(col(0)),
                    format!("`{}` is not a duration ≥ 0", fields[0]),
                ));
            }
        };
        match fields[1].parse::<f64>() {
            Ok(p) if (0.0..=1.0).contains(&p) => {}
            _ => {
                return Err(data_err(
                    file,
                    Some(line_no),
                    Some(col(1)),
                    format!("`{}` is not a percentile between 0 and 1", fields[1]),
                ));
            }
        }
        let total: u64 = fields[2].parse().map_err(|_| {
            data_err(
                file,
                Some(line_no),
                Some(col(2)),
                format!("`{}` is not a whole count", fields[2]),
            )
        })?;
        if total < prev_total {
            return Err(data_err(
                file,
                Some(line_no),
                Some(col(2)),
                format!(
                    "the total count goes down ({prev_total} → {total}); rows must be cumulative"
                ),
            ));
        }
        let us = (value * to_us).round();
        if crate::units::check_ms(us / 1000.0).is_err() {
            return Err(data_err(
                file,
                Some(line_no),
                Some(col(0)),
                out_of_range(fields[0]),
            ));
        }
        if total > prev_total && hist.record_n(us as u64, total - prev_total).is_err() {
            return Err(data_err(
                file,
                Some(line_no),
                Some(col(0)),
                format!("`{}` cannot be recorded", fields[0]),
            ));
        }
        prev_total = total;
        rows += 1;
    }
    if let Some((t, line)) = footer_total
        && t != prev_total
    {
        return Err(data_err(
            file,
            Some(line),
            None,
            format!("the footer says Total count = {t}, but the rows add up to {prev_total}"),
        ));
    }
    if prev_total == 0 {
        return Err(data_err(
            file,
            None,
            None,
            if rows == 0 {
                "the file is empty: expected HdrHistogram percentile rows \
                 (`Value Percentile TotalCount`)"
                    .to_string()
            } else {
                "the histogram has no samples (total count 0)".to_string()
            },
        ));
    }
    Ok(Loaded {
        samples: Samples::Histogram {
            hist,
            unit_ms: 1e-3,
        },
        input: InputInfo {
            file: file.to_string(),
            kind: InputKind::Hgrm,
            column: None,
            unit,
            tags: Vec::new(),
            selected_tag: None,
            skipped_rows: 0,
            notes: vec![
                "an .hgrm lists selected percentiles only: values between two listed rows are \
                 counted at the upper one (quantiles rounded up, bounds conservative)"
                    .to_string(),
            ],
        },
    })
}

/// Parses an HdrHistogram interval log and merges its intervals (only those tagged `opts.tag`
/// when set). Values are in `opts.unit` (default µs, as lockbench writes them).
pub fn parse_hlog(bytes: &[u8], file: &str, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let unit = opts.unit.unwrap_or(Unit::Us);
    let line_of = |offset: usize| {
        let end = offset.min(bytes.len());
        bytes[..end].iter().filter(|b| **b == b'\n').count() as u64 + 1
    };
    let base = bytes.as_ptr() as usize;
    let mut merged: Option<Histogram<u64>> = None;
    let mut tags = BTreeSet::new();
    let mut intervals = 0u64;
    let mut skipped = 0u64;
    let mut deser = Deserializer::new();
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| {
            let hdrhistogram::serialization::interval_log::LogIteratorError::ParseError { offset } =
                e;
            data_err(
                file,
                Some(line_of(offset)),
                None,
                "not an HdrHistogram interval log line (expected `Tag=…,start,length,max,base64` \
                 or a `#` comment)"
                    .to_string(),
            )
        })?;
        let LogEntry::Interval(ilh) = entry else {
            continue;
        };
        let tag = ilh.tag().map(|t| t.as_str().to_string());
        tags.insert(tag.clone().unwrap_or_else(|| "(untagged)".to_string()));
        if let Some(want) = &opts.tag
            && tag.as_deref() != Some(want.as_str())
        {
            skipped += 1;
            continue;
        }
        // The encoded text is a slice of `bytes`: its address gives its line.
        let encoded = ilh.encoded_histogram();
        let line = line_of((encoded.as_ptr() as usize).saturating_sub(base));
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| {
                data_err(
                    file,
                    Some(line),
                    Some("the histogram field".to_string()),
                    format!("not base64: {e}"),
                )
            })?;
        let h: Histogram<u64> = deser.deserialize(&mut &decoded[..]).map_err(|e| {
            data_err(
                file,
                Some(line),
                Some("the histogram field".to_string()),
                format!("not an HdrHistogram V2 encoding: {e:?}"),
            )
        })?;
        let m = merged.get_or_insert_with(|| new_hist(h.sigfig()));
        if m.add(&h).is_err() {
            return Err(data_err(
                file,
                Some(line),
                None,
                "this interval cannot be merged with the others".to_string(),
            ));
        }
        intervals += 1;
    }
    let tags: Vec<String> = tags.into_iter().collect();
    let hist = match merged {
        Some(h) if !h.is_empty() => h,
        _ => {
            let message = match &opts.tag {
                Some(t) if !tags.is_empty() => format!(
                    "no interval is tagged `{t}`; tags present: {}",
                    tags.join(", ")
                ),
                _ if intervals > 0 => "the intervals hold no samples".to_string(),
                _ => "the file has no intervals: expected an HdrHistogram interval log".to_string(),
            };
            return Err(data_err(file, None, None, message));
        }
    };
    // Intervals carry no line of their own once merged: the largest value is what can be out of
    // range, and the message says so.
    let max_ms = hist.max() as f64 * unit.ms();
    if crate::units::check_ms(max_ms).is_err() {
        return Err(data_err(
            file,
            None,
            None,
            format!(
                "the largest value ({} {}) is out of range: a duration must be at most {}",
                hist.max(),
                unit.name(),
                crate::units::MAX_TEXT
            ),
        ));
    }
    let mut notes = vec![format!(
        "{intervals} interval(s) merged; values are bucket upper edges \
         ({} significant figures)",
        hist.sigfig()
    )];
    if tags.len() > 1 && opts.tag.is_none() {
        notes.push(format!(
            "tags {} merged; choose one with --tag",
            tags.join(", ")
        ));
    }
    Ok(Loaded {
        samples: Samples::Histogram {
            hist,
            unit_ms: unit.ms(),
        },
        input: InputInfo {
            file: file.to_string(),
            kind: InputKind::Hlog,
            column: None,
            unit,
            tags,
            selected_tag: opts.tag.clone(),
            skipped_rows: skipped,
            notes,
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/// The shortest TTL Redis can set (`PX` takes whole milliseconds ≥ 1).
pub const MIN_TTL_MS: f64 = 1.0;

/// Rate assumed when none is given (sections per second).
pub const DEFAULT_RATE_PER_S: f64 = 10.0;

/// Validated parameters of a recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    target: f64,
    confidence: f64,
    margin: f64,
    rate_per_s: f64,
    rate_assumed: bool,
    tail_fraction: f64,
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

impl Default for Params {
    fn default() -> Self {
        Self {
            target: 1e-4,
            confidence: 0.95,
            margin: 1.5,
            rate_per_s: DEFAULT_RATE_PER_S,
            rate_assumed: true,
            tail_fraction: 0.1,
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
}

// ---------------------------------------------------------------------------------------------
// Order statistics and binomial tails
// ---------------------------------------------------------------------------------------------

/// Beyond this many terms the binomial CDF uses the normal approximation (then `np` ≫ 1000 and
/// the approximation error is far below anything printed).
const EXACT_TERMS: u64 = 20_000;

fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// `P(Binomial(n, p) ≤ j)`.
pub fn binom_cdf(j: u64, n: u64, p: f64) -> f64 {
    if j >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    if j > EXACT_TERMS {
        let (nf, jf) = (n as f64, j as f64);
        let sd = (nf * p * (1.0 - p)).sqrt();
        return 1.0 - normal_sf((jf + 0.5 - nf * p) / sd);
    }
    // Sum the pmf in log space: pmf(0) = (1-p)^n underflows for large n·p.
    let step = p.ln() - (-p).ln_1p();
    let mut log_pmf = n as f64 * (-p).ln_1p();
    let mut log_cdf = log_pmf;
    for i in 0..j {
        log_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + step;
        log_cdf = log_add(log_cdf, log_pmf);
    }
    log_cdf.exp().min(1.0)
}

/// The largest `j` with `P(Binomial(n, q) ≤ j) ≤ alpha`, or `None` when even `j = 0` exceeds it.
///
/// With `j` values allowed above it, the order statistic `x_(n−j)` has `P(X > x_(n−j)) ≤ q` with
/// confidence `1 − alpha`.
pub fn max_exceedances(n: u64, q: f64, alpha: f64) -> Option<u64> {
    if n == 0 || !(q > 0.0 && q < 1.0) || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let log_alpha = alpha.ln();
    let step = q.ln() - (-q).ln_1p();
    let mut log_pmf = n as f64 * (-q).ln_1p();
    if log_pmf > log_alpha {
        return None;
    }
    let mut log_cdf = log_pmf;
    let mut j = 0u64;
    while j + 1 < n && j < EXACT_TERMS {
        log_pmf += ((n - j) as f64).ln() - ((j + 1) as f64).ln() + step;
        let next = log_add(log_cdf, log_pmf);
        if next > log_alpha {
            return Some(j);
        }
        log_cdf = next;
        j += 1;
    }
    if j + 1 >= n {
        return Some(j);
    }
    // Large n·q: normal approximation, then step to the exact boundary of binom_cdf.
    let (nf, sd) = (n as f64, (n as f64 * q * (1.0 - q)).sqrt());
    let guess = (nf * q + normal_quantile(alpha) * sd - 0.5).floor();
    let mut j = if guess.is_finite() {
        (guess.max(0.0) as u64).min(n - 1)
    } else {
        0
    };
    for _ in 0..64 {
        if binom_cdf(j + 1, n, q) <= alpha && j + 2 < n {
            j += 1;
        } else if binom_cdf(j, n, q) > alpha && j > 0 {
            j -= 1;
        } else {
            break;
        }
    }
    Some(j)
}

/// Samples needed for the max alone to support `target` with `confidence`:
/// the smallest `n` with `(1 − target)^n ≤ 1 − confidence`.
pub fn samples_needed(target: f64, confidence: f64) -> u64 {
    let r = (1.0 - confidence).ln() / (-target).ln_1p();
    if r.is_finite() && r > 0.0 {
        // Guard against r landing a hair above an integer through rounding.
        let n = r.ceil();
        let below = n - 1.0;
        if below >= 1.0 && below * (-target).ln_1p() <= (1.0 - confidence).ln() {
            below as u64
        } else {
            n as u64
        }
    } else {
        1
    }
}

/// One-sided upper confidence bound (Clopper–Pearson) on a probability after `j` events in `n`
/// trials.
pub fn upper_bound(j: u64, n: u64, confidence: f64) -> f64 {
    if n == 0 || j >= n {
        return 1.0;
    }
    let alpha = 1.0 - confidence;
    if j == 0 {
        return -(alpha.ln() / n as f64).exp_m1();
    }
    let (mut lo, mut hi) = (j as f64 / n as f64, 1.0);
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if binom_cdf(j, n, mid) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// A sorted view of the samples as runs `(value ms, count)`, ascending.
enum View<'a> {
    Exact(&'a [f64]),
    Runs {
        runs: Vec<(f64, u64)>,
        cum: Vec<u64>,
    },
}

impl<'a> View<'a> {
    fn new(s: &'a Samples) -> View<'a> {
        match s {
            Samples::Exact(v) => View::Exact(v),
            Samples::Histogram { hist, unit_ms } => {
                let mut runs = Vec::new();
                let mut cum = Vec::new();
                let mut total = 0u64;
                for it in hist.iter_recorded() {
                    let c = it.count_at_value();
                    if c == 0 {
                        continue;
                    }
                    // Upper edge of the bucket: the true value is at most this.
                    let v = hist.highest_equivalent(it.value_iterated_to()) as f64 * unit_ms;
                    total += c;
                    runs.push((v, c));
                    cum.push(total);
                }
                View::Runs { runs, cum }
            }
        }
    }

    fn n(&self) -> u64 {
        match self {
            View::Exact(v) => v.len() as u64,
            View::Runs { cum, .. } => cum.last().copied().unwrap_or(0),
        }
    }

    /// The `k`-th smallest value (1-based, clamped into `1..=n`); NaN when empty.
    fn at_rank(&self, k: u64) -> f64 {
        let n = self.n();
        if n == 0 {
            return f64::NAN;
        }
        let k = k.clamp(1, n);
        match self {
            View::Exact(v) => v.get(k as usize - 1).copied().unwrap_or(f64::NAN),
            View::Runs { runs, cum } => {
                let i = cum.partition_point(|c| *c < k);
                runs.get(i).map_or(f64::NAN, |r| r.0)
            }
        }
    }

    /// The empirical `p`-quantile: the value at rank `ceil(p·n)`.
    fn quantile(&self, p: f64) -> f64 {
        let k = (p * self.n() as f64 - 1e-9).ceil().max(1.0) as u64;
        self.at_rank(k)
    }

    fn runs(&self) -> Box<dyn Iterator<Item = (f64, u64)> + '_> {
        match self {
            View::Exact(v) => Box::new(v.chunk_by(|a, b| a == b).map(|c| (c[0], c.len() as u64))),
            View::Runs { runs, .. } => Box::new(runs.iter().copied()),
        }
    }

    /// Samples strictly above `t`.
    fn count_above(&self, t: f64) -> u64 {
        match self {
            View::Exact(v) => (v.len() - v.partition_point(|x| *x <= t)) as u64,
            View::Runs { runs, cum } => {
                let i = runs.partition_point(|r| r.0 <= t);
                self.n() - if i == 0 { 0 } else { cum[i - 1] }
            }
        }
    }

    fn mean(&self) -> f64 {
        let n = self.n() as f64;
        self.runs().map(|(v, c)| v * c as f64).sum::<f64>() / n
    }
}

// ---------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------

/// Anderson–Darling values above which a model is called a poor fit of the tail. The log-normal
/// is fitted to all the data, so its tail is close to a fully specified test (5 % point ≈ 2.5);
/// the GPD is fitted to the tail itself, which lowers the statistic (5 % point ≈ 0.8 near ξ = 0,
/// Choulakian & Stephens 2001).
const AD_CRITICAL_LOGNORMAL: f64 = 2.5;
const AD_CRITICAL_GPD: f64 = 0.8;
/// Fewest exceedances the GPD is fitted to.
const MIN_TAIL: u64 = 20;

/// A fitted model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Model {
    /// `ln(X in ms) ~ N(mu, sigma²)`.
    Lognormal {
        /// Mean of `ln(ms)`.
        mu: f64,
        /// Standard deviation of `ln(ms)`.
        sigma: f64,
    },
    /// Above `threshold_ms`: `P(X > x) = exceed_fraction · (1 + xi·(x − u)/scale_ms)^(−1/xi)`.
    GeneralizedPareto {
        /// Threshold `u` (ms).
        threshold_ms: f64,
        /// Fraction of the samples above `u`.
        exceed_fraction: f64,
        /// Shape ξ (> 0 heavy tail, 0 exponential, < 0 bounded).
        xi: f64,
        /// Scale σ (ms).
        scale_ms: f64,
    },
}

impl Model {
    /// `P(X > x)` under the model; `None` where the model says nothing (GPD below its threshold).
    pub fn survival(&self, x: f64) -> Option<f64> {
        match *self {
            Model::Lognormal { mu, sigma } => Some(if x <= 0.0 {
                1.0
            } else {
                normal_sf((x.ln() - mu) / sigma)
            }),
            Model::GeneralizedPareto {
                threshold_ms,
                exceed_fraction,
                xi,
                scale_ms,
            } => (x >= threshold_ms)
                .then(|| exceed_fraction * gpd_sf(x - threshold_ms, xi, scale_ms)),
        }
    }

    /// The `x` with `P(X > x) = q`; `None` when the model cannot say (GPD: `q` not in its tail).
    pub fn ttl_for(&self, q: f64) -> Option<f64> {
        let x = match *self {
            Model::Lognormal { mu, sigma } => (mu - sigma * normal_quantile(q)).exp(),
            Model::GeneralizedPareto {
                threshold_ms,
                exceed_fraction,
                xi,
                scale_ms,
            } => {
                if q >= exceed_fraction {
                    return None;
                }
                let r = q / exceed_fraction;
                let y = if xi.abs() < 1e-9 {
                    -scale_ms * r.ln()
                } else {
                    scale_ms / xi * (r.powf(-xi) - 1.0)
                };
                threshold_ms + y
            }
        };
        x.is_finite().then_some(x)
    }
}

fn gpd_sf(y: f64, xi: f64, scale: f64) -> f64 {
    if y <= 0.0 {
        return 1.0;
    }
    if xi.abs() < 1e-9 {
        return (-y / scale).exp();
    }
    let t = 1.0 + xi * y / scale;
    if t <= 0.0 { 0.0 } else { t.powf(-1.0 / xi) }
}

/// A model fitted to the samples.
#[derive(Debug, Clone, Serialize)]
pub struct ModelFit {
    /// `lognormal` or `generalized_pareto`.
    pub name: &'static str,
    /// How it was fitted.
    pub method: String,
    /// The fitted model; `None` when it could not be fitted (see `verdict`).
    pub fitted: Option<Model>,
    /// The model's TTL for the target (`P(X > ttl) = target`).
    pub ttl_ms: Option<f64>,
    /// Threshold above which the tail fit is judged (ms).
    pub tail_threshold_ms: Option<f64>,
    /// Samples above that threshold.
    pub tail_samples: u64,
    /// Kolmogorov–Smirnov distance between the model and the data above the threshold.
    pub tail_ks: Option<f64>,
    /// Anderson–Darling statistic of the data above the threshold.
    pub tail_ad: Option<f64>,
    /// Anderson–Darling value above which the fit is called poor (≈ 5 % level).
    pub tail_ad_critical: f64,
    /// The observed value with ~10 samples above it, and the model's value at the same
    /// exceedance probability.
    pub check: Option<TailCheck>,
    /// The verdict in plain words.
    pub verdict: String,
}

/// Model against data at one high quantile.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TailCheck {
    /// The quantile (`1 − 10/n`).
    pub p: f64,
    /// The observed value.
    pub observed_ms: f64,
    /// The model's value.
    pub model_ms: f64,
}

/// Goodness of fit of `cdf` (conditional on exceeding the threshold) to `runs` (`m` samples):
/// `(KS distance, Anderson–Darling A²)`. A² is integrated exactly piece by piece between
/// data points, so ties and counts need no special case.
fn tail_gof(runs: &[(f64, u64)], m: u64, cdf: impl Fn(f64) -> f64) -> (f64, f64) {
    const EPS: f64 = 1e-15;
    // ∫_a^b (c − z)² / (z(1 − z)) dz = c²·ln(b/a) + (1−c)²·ln((1−a)/(1−b)) − (b − a).
    let piece = |c: f64, a: f64, b: f64| {
        if b <= a {
            return 0.0;
        }
        let mut s = -(b - a);
        if c > 0.0 {
            s += c * c * (b / a).ln();
        }
        if c < 1.0 {
            s += (1.0 - c) * (1.0 - c) * ((-a).ln_1p() - (-b).ln_1p());
        }
        s
    };
    let mf = m as f64;
    let (mut z_prev, mut c, mut ad, mut ks) = (EPS, 0.0f64, 0.0, 0.0f64);
    let mut seen = 0u64;
    for &(v, count) in runs {
        let z = cdf(v).clamp(EPS, 1.0 - EPS).max(z_prev);
        ad += piece(c, z_prev, z);
        seen += count;
        let c_next = seen as f64 / mf;
        ks = ks.max((c - z).abs()).max((c_next - z).abs());
        z_prev = z;
        c = c_next;
    }
    ad += piece(1.0, z_prev, 1.0 - EPS);
    (ks, (mf * ad).max(0.0))
}

fn fit_lognormal(view: &View) -> Option<Model> {
    let (mut n, mut s) = (0u64, 0.0);
    for (v, c) in view.runs().filter(|r| r.0 > 0.0) {
        n += c;
        s += c as f64 * v.ln();
    }
    if n < 2 {
        return None;
    }
    let mu = s / n as f64;
    let ss: f64 = view
        .runs()
        .filter(|r| r.0 > 0.0)
        .map(|(v, c)| c as f64 * (v.ln() - mu).powi(2))
        .sum();
    let sigma = (ss / n as f64).sqrt();
    (sigma > 0.0 && sigma.is_finite() && mu.is_finite()).then_some(Model::Lognormal { mu, sigma })
}

/// GPD by probability-weighted moments (Hosking & Wallis 1987) on the exceedances `y = x − u`:
/// with `a0 = E[y]` and `a1 = E[y·(1 − F(y))]` (unbiased estimators from ranks),
/// `k = a0/(a0 − 2a1) − 2`, `σ = 2·a0·a1/(a0 − 2a1)`, `ξ = −k`.
fn fit_gpd(tail: &[(f64, u64)], m: u64, u: f64, n: u64) -> Option<Model> {
    if m < 2 {
        return None;
    }
    let mf = m as f64;
    let (mut a0, mut a1) = (0.0, 0.0);
    let mut rank = 1u64; // 1-based rank of the run's first sample
    for &(v, c) in tail {
        let y = v - u;
        let cf = c as f64;
        a0 += cf * y;
        // Σ_{r = rank}^{rank+c−1} (m − r)
        let w = cf * mf - cf * (2.0 * rank as f64 + cf - 1.0) / 2.0;
        a1 += y * w / (mf - 1.0);
        rank += c;
    }
    a0 /= mf;
    a1 /= mf;
    let d = a0 - 2.0 * a1;
    if !(d > 0.0 && a0 > 0.0) {
        return None;
    }
    let xi = -(a0 / d - 2.0);
    let scale = 2.0 * a0 * a1 / d;
    (xi.is_finite() && scale > 0.0 && scale.is_finite()).then_some(Model::GeneralizedPareto {
        threshold_ms: u,
        exceed_fraction: mf / n as f64,
        xi,
        scale_ms: scale,
    })
}

fn fmt_ms(x: f64) -> String {
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
fn fmt_ttl(x: f64) -> String {
    if x.is_finite() && x < 60_000.0 {
        format!("{x:.0} ms")
    } else {
        fmt_long_ms(x)
    }
}

/// From a minute on: `5400000 ms (1h30m)`, `1e30 ms (beyond 1000h)`.
fn fmt_long_ms(x: f64) -> String {
    if !x.is_finite() || x > crate::units::MAX_MS {
        format!(
            "{} ms (beyond {})",
            crate::units::fmt_num(x),
            crate::units::MAX_TEXT
        )
    } else {
        format!(
            "{x:.0} ms ({})",
            crate::units::fmt_us(crate::units::ms_to_us(x))
        )
    }
}

/// A model to judge: its name, how it was fitted, the fit (or why there is none), and the
/// Anderson–Darling value above which it is called poor.
struct Candidate {
    name: &'static str,
    method: String,
    model: Option<Model>,
    why_not: String,
    critical: f64,
}

/// The samples above the tail threshold `u`, as runs; `m` of them.
struct Tail {
    runs: Vec<(f64, u64)>,
    m: u64,
    u: f64,
}

fn judge(c: Candidate, view: &View, tail: &Tail, target: f64) -> ModelFit {
    let Candidate {
        name,
        method,
        model,
        why_not,
        critical,
    } = c;
    let Tail { runs: tail, m, u } = tail;
    let (m, u) = (*m, *u);
    let Some(model) = model else {
        return ModelFit {
            name,
            method,
            fitted: None,
            ttl_ms: None,
            tail_threshold_ms: None,
            tail_samples: m,
            tail_ks: None,
            tail_ad: None,
            tail_ad_critical: critical,
            check: None,
            verdict: format!("not fitted: {why_not}"),
        };
    };
    let n = view.n();
    let ttl = model.ttl_for(target);
    // Conditional model CDF above u: 1 − S(x)/S(u).
    let s_u = model.survival(u).unwrap_or(0.0);
    let (ks, ad) = if m >= 2 && s_u > 0.0 {
        let (ks, ad) = tail_gof(tail, m, |x| 1.0 - model.survival(x).unwrap_or(s_u) / s_u);
        (Some(ks), Some(ad))
    } else {
        (None, None)
    };
    let check = (n >= 100).then(|| {
        let p = 1.0 - 10.0 / n as f64;
        let observed = view.quantile(p);
        let model_ms = model.ttl_for(1.0 - p).unwrap_or(f64::NAN);
        TailCheck {
            p,
            observed_ms: observed,
            model_ms,
        }
    });
    let direction = check.and_then(|c| {
        let r = c.model_ms / c.observed_ms;
        if r < 0.85 {
            Some(format!(
                "it puts the {:.4}-quantile at {} where the data has {}: it underestimates the \
                 tail, so its TTL is probably too short",
                c.p,
                fmt_ms(c.model_ms),
                fmt_ms(c.observed_ms)
            ))
        } else if r > 1.15 {
            Some(format!(
                "it puts the {:.4}-quantile at {} where the data has {}: it overestimates the \
                 tail, so its TTL is probably conservative",
                c.p,
                fmt_ms(c.model_ms),
                fmt_ms(c.observed_ms)
            ))
        } else {
            None
        }
    });
    let verdict = match (ad, ttl) {
        (_, None) => "fitted, but it gives no TTL for this target (the target lies inside the \
                      data above its threshold; use the distribution-free answer)"
            .to_string(),
        (None, Some(_)) => {
            "fit quality unknown (too few samples in the tail); treat its TTL as a guess"
                .to_string()
        }
        (Some(a), Some(_)) if a <= critical => format!(
            "consistent with the observed tail (AD {a:.2} ≤ {critical}); its TTL is a \
             reasonable extrapolation{}",
            direction
                .as_deref()
                .map(|d| format!(", although {d}"))
                .unwrap_or_default()
        ),
        (Some(a), Some(_)) => format!(
            "poor fit in the tail (AD {a:.2} > {critical}){}; do not rely on its TTL",
            direction
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
    };
    ModelFit {
        name,
        method,
        fitted: Some(model),
        ttl_ms: ttl,
        tail_threshold_ms: Some(u),
        tail_samples: m,
        tail_ks: ks,
        tail_ad: ad,
        tail_ad_critical: critical,
        check,
        verdict,
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
    if let Samples::Histogram { hist, .. } = samples {
        notes.push(format!(
            "order statistics come from histogram counts: each value is its bucket's upper edge \
             (HdrHistogram, {} significant figures), so they may read up to ~{} high, never low",
            hist.sigfig(),
            match hist.sigfig() {
                1 => "10 %",
                2 => "1 %",
                3 => "0.1 %",
                _ => "0.01 %",
            }
        ));
    }
    if n == 0 {
        return Recommendation {
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
                explanation: format!(
                    "no samples: at least {needed} are needed to support the target"
                ),
            },
            models: Vec::new(),
            recommended_ttl_ms: None,
            in_practice: Vec::new(),
            notes,
        };
    }
    let max = view.at_rank(n);
    let observed = Observed {
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
    };
    let worst = WorstCase {
        max_ms: max,
        margin: params.margin,
        ttl_ms: max * params.margin,
        max_exceedance_bound: max_bound,
    };

    // Distribution-free bound.
    let distribution_free = match max_exceedances(n, target, 1.0 - conf) {
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
    };

    // Models.
    let u = view.quantile(1.0 - params.tail_fraction);
    let runs: Vec<(f64, u64)> = view.runs().filter(|r| r.0 > u).collect();
    let m: u64 = runs.iter().map(|r| r.1).sum();
    let tail = Tail { runs, m, u };
    let zeros = view.count_above(0.0);
    let zeros = n - zeros;
    let ln_model = fit_lognormal(&view);
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
        &view,
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
        &view,
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
    for f in &models {
        if let Some(t) = f.ttl_ms {
            candidates.push((
                t.ceil().max(MIN_TTL_MS),
                format!("{} model", f.name.replace('_', " ")),
            ));
        }
    }
    let in_practice = candidates
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
            }
        })
        .collect();
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
        notes,
    }
}

fn ordinal(k: u64) -> String {
    let suffix = match (k % 10, k % 100) {
        (1, r) if r != 11 => "st",
        (2, r) if r != 12 => "nd",
        (3, r) if r != 13 => "rd",
        _ => "th",
    };
    format!("{k}{suffix}")
}

fn fmt_prob(p: f64) -> String {
    if p == 0.0 {
        "0".to_string()
    } else if p >= 0.01 {
        format!("{:.2} %", p * 100.0)
    } else {
        format!("{p:.2e}")
    }
}

fn fmt_count(x: f64) -> String {
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
    let p = &r.params;
    if let Some(i) = &r.input {
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

    writeln!(
        w,
        "\nmodels   extrapolation beyond the data — assumptions, not measurements"
    )?;
    for f in &r.models {
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

    writeln!(
        w,
        "\nin practice   at {} sections/s{}",
        fmt_count(p.rate_per_s),
        if p.rate_assumed {
            " (assumed; set --rate)"
        } else {
            ""
        }
    )?;
    writeln!(
        w,
        "  {:>10}  {:<40} {:>7}  {:>10} {:>10} {:>10}  {:>10} {:>10}",
        "TTL", "basis", "above", "P(overrun)", "/million", "/day", "lognormal", "GPD"
    )?;
    writeln!(
        w,
        "  {:>10}  {:<40} {:>7}  {:>10} {:>10} {:>10}  {:>10} {:>10}",
        "",
        "",
        "in data",
        format!("≤ ({:.0} %)", p.confidence * 100.0),
        "≤",
        "≤",
        "model",
        "model"
    )?;
    for row in &r.in_practice {
        let model = |x: Option<f64>| x.map_or("—".to_string(), fmt_prob);
        writeln!(
            w,
            "  {:>10}  {:<40} {:>7}  {:>10} {:>10} {:>10}  {:>10} {:>10}",
            fmt_ttl(row.ttl_ms),
            row.basis,
            row.samples_above,
            fmt_prob(row.overrun_bound),
            fmt_count(row.per_million_bound),
            fmt_count(row.per_day_bound),
            model(row.lognormal_overrun),
            model(row.gpd_overrun)
        )?;
    }
    writeln!(
        w,
        "  (data bounds: distribution-free upper bounds from the samples above each TTL; model \
         columns: each model's own estimate)"
    )?;

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
    for note in &r.notes {
        writeln!(w, "note: {note}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(values: &[f64]) -> Samples {
        Samples::from_ms(values.to_vec())
    }

    /// The sample size needed for the max alone matches ln(1−conf)/ln(1−target), e.g. 29956
    /// for target 1e-4 at 95 %, and 59 for the classic 5 %/95 % case.
    #[test]
    fn samples_needed_matches_closed_form() {
        assert_eq!(samples_needed(1e-4, 0.95), 29_956);
        assert_eq!(samples_needed(0.05, 0.95), 59);
        assert_eq!(samples_needed(0.01, 0.99), 459);
    }

    /// The binomial CDF agrees with hand-computed values and with its normal approximation
    /// where they meet.
    #[test]
    fn binomial_cdf_values() {
        // P(Bin(10, 0.5) ≤ 3) = 176/1024.
        assert!((binom_cdf(3, 10, 0.5) - 176.0 / 1024.0).abs() < 1e-12);
        assert!((binom_cdf(0, 100, 0.01) - 0.99f64.powi(100)).abs() < 1e-12);
        assert_eq!(binom_cdf(10, 10, 0.3), 1.0);
        let (n, p) = (10_000_000u64, 0.01);
        let exact = binom_cdf(EXACT_TERMS, n, p);
        let approx = binom_cdf(EXACT_TERMS + 1, n, p);
        assert!(exact < 1e-100 && approx < 1e-100, "{exact} {approx}");
    }

    /// The order statistic chosen is the boundary: j exceedances satisfy the confidence,
    /// j + 1 do not.
    #[test]
    fn max_exceedances_is_the_boundary() {
        for (n, q, alpha) in [
            (100_000u64, 1e-3, 0.05),
            (29_956, 1e-4, 0.05),
            (5_000, 1e-2, 0.01),
            (50_000_000, 1e-3, 0.05),
        ] {
            let j = max_exceedances(n, q, alpha).unwrap();
            assert!(binom_cdf(j, n, q) <= alpha, "{n} {q}: {j}");
            assert!(binom_cdf(j + 1, n, q) > alpha, "{n} {q}: {j}");
        }
        assert_eq!(max_exceedances(29_955, 1e-4, 0.05), None);
        assert_eq!(max_exceedances(29_956, 1e-4, 0.05), Some(0));
    }

    /// The Clopper–Pearson upper bound solves P(Bin(n, p) ≤ j) = α, and with j = 0 it is
    /// 1 − α^(1/n) (≈ 3/n, the "rule of three").
    #[test]
    fn upper_bound_solves_the_binomial() {
        let b = upper_bound(0, 1000, 0.95);
        assert!((b - 0.002_991).abs() < 1e-5, "{b}");
        let b = upper_bound(5, 1000, 0.95);
        assert!((binom_cdf(5, 1000, b) - 0.05).abs() < 1e-6);
        assert_eq!(upper_bound(3, 3, 0.95), 1.0);
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
                hist: new_hist(3),
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

    /// PWM recovers an exponential tail (ξ ≈ 0, σ ≈ mean) from its exact quantiles.
    #[test]
    fn gpd_pwm_recovers_exponential() {
        let m = 10_000u64;
        let tail: Vec<(f64, u64)> = (1..=m)
            .map(|i| (-30.0 * (1.0 - (i as f64 - 0.5) / m as f64).ln(), 1))
            .collect();
        let Some(Model::GeneralizedPareto { xi, scale_ms, .. }) = fit_gpd(&tail, m, 0.0, m * 10)
        else {
            panic!("not fitted");
        };
        assert!(xi.abs() < 0.02, "{xi}");
        assert!((scale_ms - 30.0).abs() < 1.0, "{scale_ms}");
    }

    /// The Anderson–Darling integral equals the textbook sum formula on distinct points.
    #[test]
    fn anderson_darling_matches_sum_formula() {
        let z: [f64; 6] = [0.05, 0.2, 0.33, 0.5, 0.61, 0.9];
        let m = z.len();
        let sum: f64 = (1..=m)
            .map(|i| (2 * i - 1) as f64 * (z[i - 1].ln() + (1.0 - z[m - i]).ln()))
            .sum();
        let expected = -(m as f64) - sum / m as f64;
        let runs: Vec<(f64, u64)> = z.iter().map(|v| (*v, 1)).collect();
        let (_, ad) = tail_gof(&runs, m as u64, |x| x);
        assert!((ad - expected).abs() < 1e-9, "{ad} vs {expected}");
    }

    /// Rates parse with their units; nonsense is refused with a hint.
    #[test]
    fn rates() {
        assert_eq!(parse_rate("100").unwrap(), 100.0);
        assert_eq!(parse_rate("100/s").unwrap(), 100.0);
        assert_eq!(parse_rate("6000/min").unwrap(), 100.0);
        assert_eq!(parse_rate("2/ms").unwrap(), 2000.0);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-3/s").is_err());
        assert!(parse_rate("3/week").unwrap_err().contains("/min"));
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
    }

    /// A garbage line in an .hgrm is refused with its line and column.
    #[test]
    fn hgrm_garbage_line() {
        let text = "       Value     Percentile TotalCount 1/(1-Percentile)\n\n\
                    1.000 0.5 10 2.00\n\
                    2.000 abc 20 inf\n";
        let e = parse_hgrm(text, "x.hgrm", &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.hgrm") && e.contains("line 4") && e.contains("Percentile"),
            "{e}"
        );
        let e = parse_hgrm("hello world\n", "y.hgrm", &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
    }

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
