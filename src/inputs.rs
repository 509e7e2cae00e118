//! Duration columns read from CSV files with a header line: the one reader behind
//! `empirical(file=…)` distributions ([`crate::dist`]) and the CSV inputs of `lockbench recommend`
//! ([`crate::recommend`]), so both accept the same files and refuse bad ones with the same
//! messages (line, column, what is wrong).
//!
//! The reader knows nothing of files or of its callers' error types: it reads from any
//! [`Read`], reports a [`Problem`] (where and what), and each caller adds the file name.

use std::io::Read;

use serde::Serialize;

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

    /// The unit as printed in messages (`µs`, `ms`, `s`).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Us => "µs",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }
}

/// What is wrong in an input file and where; the caller names the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// 1-based line, when the problem is on one line.
    pub line: Option<u64>,
    /// The column, e.g. ``column 2 (`durationMs`)``, when the problem is in one cell.
    pub column: Option<String>,
    /// What is wrong, and what would be valid.
    pub message: String,
}

impl Problem {
    fn at(line: Option<u64>, column: Option<String>, message: String) -> Problem {
        Problem {
            line,
            column,
            message,
        }
    }
}

/// The location part of a message: `, line 3, column 2 (`durationMs`)`, `, line 1`, or nothing.
pub fn location(line: Option<u64>, column: Option<&str>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(", line {l}, {c}"),
        (Some(l), None) => format!(", line {l}"),
        (None, Some(c)) => format!(", {c}"),
        (None, None) => String::new(),
    }
}

/// The message for a value above the duration bound every source of durations obeys.
pub fn out_of_range(cell: &str) -> String {
    format!(
        "`{cell}` is out of range: a duration must be ≥ 0 and at most {} ({} ms)",
        crate::model::units::MAX_TEXT,
        crate::model::units::MAX_MS
    )
}

fn csv_problem(e: csv::Error) -> Problem {
    let line = e.position().map(|p| p.line());
    let message = match e.kind() {
        csv::ErrorKind::Io(io) => format!("cannot read the file: {io}"),
        _ => format!("not valid CSV: {e}"),
    };
    Problem::at(line, None, message)
}

/// A CSV column chosen by its header.
#[derive(Debug, Clone)]
pub struct Column {
    index: usize,
    name: String,
}

impl Column {
    /// ``column 2 (`durationMs`)``, as messages name it.
    fn describe(&self) -> String {
        format!("column {} (`{}`)", self.index + 1, self.name)
    }
}

/// A CSV file with a header line, its header read; fields are trimmed and rows may have
/// different lengths (a short row is refused only if it lacks the value read).
pub struct DurationCsv<R> {
    reader: csv::Reader<R>,
    headers: csv::StringRecord,
}

impl<R: Read> DurationCsv<R> {
    /// Reads the header line.
    pub fn new(reader: R) -> Result<DurationCsv<R>, Problem> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(reader);
        let headers = reader.headers().map_err(csv_problem)?.clone();
        Ok(DurationCsv { reader, headers })
    }

    /// The index of the column named `name`, if the header has it.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h == name)
    }

    /// The column named `name`; refused for an empty file and for a header without it, naming
    /// the columns present and `choose_with` (how the user picks another, e.g. `--column`).
    pub fn column(&self, name: &str, choose_with: &str) -> Result<Column, Problem> {
        if self.headers.iter().all(str::is_empty) {
            return Err(Problem::at(
                Some(1),
                None,
                format!("the file is empty: expected a header line naming the column `{name}`"),
            ));
        }
        let Some(index) = self.find(name) else {
            let names: Vec<String> = self.headers.iter().map(|h| format!("`{h}`")).collect();
            return Err(Problem::at(
                Some(1),
                None,
                format!(
                    "the header has no column `{name}`; its columns are {} (choose one with \
                     {choose_with})",
                    names.join(", ")
                ),
            ));
        };
        Ok(Column {
            index,
            name: name.to_string(),
        })
    }

    /// Reads `column` as durations, `ms_per_value` milliseconds each, sorted ascending.
    ///
    /// Blank rows are passed over; rows for which `skip` returns `true` are left out (the
    /// caller counts them). Every value must be a finite number within the one duration bound
    /// ([`crate::model::units::check_ms`]). A file with a header but no rows is refused; an empty
    /// result is returned only when `skip` left every row out.
    pub fn read(
        self,
        column: &Column,
        ms_per_value: f64,
        mut skip: impl FnMut(&csv::StringRecord) -> bool,
    ) -> Result<Vec<f64>, Problem> {
        let mut values = Vec::new();
        let mut skipped = 0u64;
        for record in self.reader.into_records() {
            let record = record.map_err(csv_problem)?;
            if record.iter().all(str::is_empty) {
                continue;
            }
            if skip(&record) {
                skipped += 1;
                continue;
            }
            let line = record.position().map(|p| p.line());
            let cell_problem =
                |message: String| Problem::at(line, Some(column.describe()), message);
            let Some(cell) = record.get(column.index) else {
                return Err(cell_problem(format!(
                    "the row has only {} field(s), so there is no value",
                    record.len()
                )));
            };
            if cell.is_empty() {
                return Err(cell_problem(
                    "the cell is empty: expected a number".to_string(),
                ));
            }
            let v: f64 = match cell.parse() {
                Ok(v) if f64::is_finite(v) => v,
                _ => return Err(cell_problem(format!("`{cell}` is not a finite number"))),
            };
            if v < 0.0 {
                return Err(cell_problem(format!(
                    "`{cell}` is negative: durations must be ≥ 0"
                )));
            }
            let Ok(ms) = crate::model::units::check_ms(v * ms_per_value) else {
                return Err(cell_problem(out_of_range(cell)));
            };
            values.push(ms);
        }
        if values.is_empty() && skipped == 0 {
            return Err(Problem::at(
                None,
                None,
                format!(
                    "the file has a header but no rows: expected values in column `{}`",
                    column.name
                ),
            ));
        }
        values.sort_by(f64::total_cmp);
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(
        text: &str,
        column: &str,
        skip: fn(&csv::StringRecord) -> bool,
    ) -> Result<Vec<f64>, Problem> {
        let csv = DurationCsv::new(text.as_bytes())?;
        let col = csv.column(column, "column=…")?;
        csv.read(&col, 1.0, skip)
    }

    fn keep(_: &csv::StringRecord) -> bool {
        false
    }

    /// Values come back sorted, blank rows passed over, skipped rows left out.
    #[test]
    fn reads_sorted_values_and_skips_what_it_is_told() {
        assert_eq!(read("a,d\nx,3\n,\ny,1\n", "d", keep), Ok(vec![1.0, 3.0]));
        let skip_x = |r: &csv::StringRecord| r.get(0) == Some("x");
        assert_eq!(read("a,d\nx,3\ny,1\n", "d", skip_x), Ok(vec![1.0]));
        // Every row skipped: empty, for the caller to explain.
        assert_eq!(read("a,d\nx,3\n", "d", skip_x), Ok(vec![]));
    }

    /// Each refusal says where and what: the line, the column, the reason.
    #[test]
    fn problems_name_line_column_and_reason() {
        let p = read("id,d\n1,2\n2,abc\n", "d", keep).unwrap_err();
        assert_eq!(
            (p.line, p.column.as_deref()),
            (Some(3), Some("column 2 (`d`)"))
        );
        assert_eq!(p.message, "`abc` is not a finite number");
        let p = read("id,latency\n1,2\n", "d", keep).unwrap_err();
        assert_eq!(p.line, Some(1));
        assert!(
            p.message
                .contains("its columns are `id`, `latency` (choose one with column=…)")
        );
        let p = read("", "d", keep).unwrap_err();
        assert!(p.message.contains("the file is empty") && p.message.contains("`d`"));
        let p = read("d\n", "d", keep).unwrap_err();
        assert!(p.message.contains("no rows"), "{}", p.message);
        let p = read("a,d\n1,2\n3\n", "d", keep).unwrap_err();
        assert_eq!(p.line, Some(3));
        let p = read("d\n-4\n", "d", keep).unwrap_err();
        assert!(p.message.contains("negative"));
        let p = read("d\n3600000001\n", "d", keep).unwrap_err();
        assert!(p.message.contains("at most 1000h"), "{}", p.message);
        assert_eq!(location(Some(3), Some("column 2")), ", line 3, column 2");
    }
}
