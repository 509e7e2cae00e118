//! Reading measured durations: a run's `events.csv`, a CSV with a duration column (both through
//! the shared reader in [`crate::inputs`]), an `.hgrm` percentile distribution or an `.hlog`
//! interval log. Histogram inputs keep their counts ([`Samples::Histogram`]).

use crate::inputs::Unit;
use crate::inputs::{self, DurationCsv, FileKind, Problem};
use crate::record::new_hist;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeSet;
use std::io::{self, Read};
use std::path::Path;

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
    /// Not a regular file, or larger than a file of durations may be.
    #[error(transparent)]
    Refused(#[from] inputs::FileError),
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
    #[error("`{file}`{}: {message}", inputs::location(*line, column.as_deref()))]
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
crate::exit::classify!(LoadError => BadInput);

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
    // A path that is not there is named as such, whatever its extension.
    std::fs::metadata(path).map_err(io_err)?;
    match ext.as_deref() {
        Some("csv") => {
            let f = inputs::open(path, FileKind::Samples)?;
            read_csv(io::BufReader::with_capacity(1 << 16, f), &file, opts)
        }
        Some("hgrm") => {
            let text = inputs::read_to_string(path, FileKind::Histogram)?;
            parse_hgrm(&text, &file, opts)
        }
        Some("hlog") => {
            let bytes = inputs::read(path, FileKind::Histogram)?;
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
pub(crate) fn read_csv<R: Read>(
    reader: R,
    file: &str,
    opts: &LoadOptions,
) -> Result<Loaded, LoadError> {
    let fail = |p: Problem| data_err(file, p.line, p.column, p.message);
    let csv = DurationCsv::new(reader).map_err(fail)?;
    let events = csv.find("duration_us").is_some() && csv.find("acquired_us").is_some();
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
    let col = csv.column(&column, "--column").map_err(fail)?;
    // events.csv: skip sections cut short by Ctrl-C, and other variants when --tag is given.
    let variant_idx = if kind == InputKind::EventsCsv {
        csv.find("variant")
    } else {
        None
    };
    let interrupted_idx = if kind == InputKind::EventsCsv {
        csv.find("interrupted")
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
    let mut tags = BTreeSet::new();
    let (mut interrupted, mut other_variant) = (0u64, 0u64);
    let values = csv
        .read(&col, unit.ms(), |record| {
            if let Some(v) = variant_idx.and_then(|i| record.get(i)) {
                if !tags.contains(v) {
                    tags.insert(v.to_string());
                }
                if opts.tag.as_deref().is_some_and(|t| t != v) {
                    other_variant += 1;
                    return true;
                }
            }
            if interrupted_idx.and_then(|i| record.get(i)) == Some("true") {
                interrupted += 1;
                return true;
            }
            false
        })
        .map_err(fail)?;
    if values.is_empty() {
        // Only when every row was skipped; a file without rows is refused by the reader.
        return Err(data_err(
            file,
            None,
            None,
            format!(
                "no usable rows ({interrupted} interrupted, {other_variant} of other variants; \
                 variants present: {})",
                tags.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
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
        samples: Samples::Exact(values),
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

/// Parses an HdrHistogram percentile distribution (`Value Percentile TotalCount 1/(1-Percentile)`
/// rows, `#` footer lines). Values are in `opts.unit` (default ms, as lockbench writes them).
///
/// The counts are rebuilt from the `TotalCount` column: the values between two listed rows are
/// counted at the upper one, so quantiles are exact at listed percentiles and rounded up between.
pub(crate) fn parse_hgrm(text: &str, file: &str, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    const COLUMNS: [&str; 3] = ["Value", "Percentile", "TotalCount"];
    let unit = opts.unit.unwrap_or(Unit::Ms);
    let to_us = unit.ms() * 1000.0;
    let mut hist = new_hist();
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
        if crate::model::units::check_ms(us / 1000.0).is_err() {
            return Err(data_err(
                file,
                Some(line_no),
                Some(col(0)),
                inputs::out_of_range(fields[0]),
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
pub(crate) fn parse_hlog(
    bytes: &[u8],
    file: &str,
    opts: &LoadOptions,
) -> Result<Loaded, LoadError> {
    let unit = opts.unit.unwrap_or(Unit::Us);
    let mut merged: Option<Histogram<u64>> = None;
    let mut tags = BTreeSet::new();
    let mut intervals = 0u64;
    let mut skipped = 0u64;
    // Merged as they are read (a day's log decoded all at once would take gigabytes); a line
    // that cannot be read is still reported before an interval that cannot be merged.
    let mut cannot_merge = None;
    crate::results::hlog::for_each_interval(bytes, |iv| {
        if cannot_merge.is_some() {
            return;
        }
        tags.insert(iv.tag.clone().unwrap_or_else(|| "(untagged)".to_string()));
        if let Some(want) = &opts.tag
            && iv.tag.as_deref() != Some(want.as_str())
        {
            skipped += 1;
            return;
        }
        // The first interval is the sum, so the merged histogram keeps the file's precision;
        // it must grow to take the later intervals' values.
        match &mut merged {
            None => {
                let mut first = iv.histogram;
                first.auto(true);
                merged = Some(first);
            }
            Some(m) => {
                if m.add(&iv.histogram).is_err() {
                    cannot_merge = Some(data_err(
                        file,
                        Some(iv.line),
                        None,
                        "this interval cannot be merged with the others".to_string(),
                    ));
                    return;
                }
            }
        }
        intervals += 1;
    })
    .map_err(|e| data_err(file, Some(e.line), None, e.what))?;
    if let Some(e) = cannot_merge {
        return Err(e);
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
    if crate::model::units::check_ms(max_ms).is_err() {
        return Err(data_err(
            file,
            None,
            None,
            format!(
                "the largest value ({} {}) is out of range: a duration must be at most {}",
                hist.max(),
                unit.name(),
                crate::model::units::MAX_TEXT
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing file says it does not exist, with or without an extension (issue 32: without
    /// one it said "unknown kind of file"); an existing file of an unknown kind still says so.
    #[test]
    fn a_missing_file_is_named_missing() {
        for p in [
            "/nonexistent-lockbench-input",
            "/nonexistent-lockbench-input.csv",
        ] {
            let e = load_durations(Path::new(p), &LoadOptions::default()).unwrap_err();
            let text = format!("{:#}", anyhow::Error::new(e));
            assert!(
                text.contains(p) && text.contains("No such file") && !text.contains("unknown kind"),
                "{text}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let txt = dir.path().join("d.txt");
        std::fs::write(&txt, "1\n").unwrap();
        let e = load_durations(&txt, &LoadOptions::default()).unwrap_err();
        assert!(e.to_string().contains("unknown kind of file"), "{e}");
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
}
