//! Every file lockbench reads, and the duration columns of CSV files.
//!
//! **Files.** Whatever the user names — a profile, a Lua script, an `empirical(file=…)` sample
//! file, a run directory's JSON, histograms and `events.csv` — is opened here ([`open`],
//! [`read`], [`read_to_string`]), with a size limit per [`FileKind`] stated in the refusal, and
//! only if it is a regular file: `/dev/zero`, a FIFO or a directory would be read until memory
//! runs out (or block forever), so they are refused by name before anything is read. A file read
//! as a stream (`events.csv`) has its lines bounded too, so memory stays flat however large the
//! file. Refusals are a [`FileError`]: bad input, exit code 2.
//!
//! **Duration columns.** One CSV reader behind `empirical(file=…)` distributions
//! ([`crate::dist`]) and the CSV inputs of `lockbench recommend` ([`crate::recommend`]), so both
//! accept the same files and refuse bad ones with the same messages (line, column, what is
//! wrong). It knows nothing of files or of its callers' error types: it reads from any [`Read`],
//! reports a [`Problem`] (where and what), and each caller adds the file name.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// What a file is read as; each kind has its own size limit, generous for what a real one
/// holds, so only a file that is not one (or a device) meets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A TOML profile.
    Profile,
    /// A Lua script of the `script` release method.
    Script,
    /// Durations read into memory: an `empirical(file=…)` sample file, `recommend`'s input.
    Samples,
    /// A run directory's `manifest.json` or `summary.json`.
    RunJson,
    /// An HdrHistogram file (`.hlog`, `.hgrm`), read whole.
    Histogram,
    /// A run's `events.csv`, read as a stream, one row at a time.
    Events,
}

const MIB: u64 = 1 << 20;

impl FileKind {
    /// How messages name it.
    pub fn what(self) -> &'static str {
        match self {
            FileKind::Profile => "profile",
            FileKind::Script => "Lua file",
            FileKind::Samples => "duration file",
            FileKind::RunJson => "run's JSON file",
            FileKind::Histogram => "histogram file",
            FileKind::Events => "events.csv",
        }
    }

    /// `a profile`, `an events.csv`.
    fn a(self) -> String {
        match self {
            FileKind::Events => format!("an {}", self.what()),
            _ => format!("a {}", self.what()),
        }
    }

    /// The most bytes a file of this kind may hold. Those read whole bound lockbench's memory;
    /// `events.csv`, streamed, is bounded by its lines ([`FileKind::max_line`]) and its limit
    /// only stops a read that would never end.
    pub fn limit(self) -> u64 {
        match self {
            FileKind::Profile | FileKind::Script => 4 * MIB,
            FileKind::RunJson => 256 * MIB,
            FileKind::Samples | FileKind::Histogram => 1024 * MIB,
            FileKind::Events => 1024 * 1024 * MIB,
        }
    }

    /// The longest line of a streamed kind (a row of `events.csv` is a few hundred bytes, one
    /// of a duration file a few dozen: a hostile pass's 1000 MiB line of a duration file,
    /// under the file's limit, grew the CSV reader past 6 GB).
    pub fn max_line(self) -> Option<u64> {
        matches!(self, FileKind::Events | FileKind::Samples).then_some(MIB)
    }
}

/// `4 MiB`, `1 GiB`, `1 TiB`: a limit as messages state it.
fn bytes_text(n: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut i = 0;
    let mut v = n;
    while v >= 1024 && v.is_multiple_of(1024) && i + 1 < units.len() {
        v /= 1024;
        i += 1;
    }
    if i == 0 && n >= 1024 {
        return format!("{:.1} MiB", n as f64 / MIB as f64);
    }
    format!("{v} {}", units[i])
}

/// A file lockbench will not read, and why.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It cannot be opened or read: check the path and the permissions.
    #[error("cannot read the {} {}: {source}", kind.what(), path.display())]
    Io {
        /// The file as named.
        path: PathBuf,
        /// What it was read as.
        kind: FileKind,
        /// The OS error.
        source: std::io::Error,
    },
    /// It is a directory, a device, a FIFO or a socket: name a regular file.
    #[error(
        "{} is {found}, not a regular file: give {} that is a file",
        path.display(),
        kind.a()
    )]
    NotAFile {
        /// The file as named.
        path: PathBuf,
        /// What it was read as.
        kind: FileKind,
        /// What it is instead, e.g. "a character device".
        found: &'static str,
    },
    /// It holds more than a file of its kind ever does.
    #[error(
        "{} is larger than the {} {} may have{}",
        path.display(),
        bytes_text(kind.limit()),
        kind.a(),
        size.map(|s| format!(" ({})", bytes_text(s))).unwrap_or_default()
    )]
    TooLarge {
        /// The file as named.
        path: PathBuf,
        /// What it was read as.
        kind: FileKind,
        /// Its size, when the file system told it.
        size: Option<u64>,
    },
    /// A streamed file has a line longer than its kind's lines ever are.
    #[error(
        "{}, line {line}: longer than the {} a line of {} may have",
        path.display(),
        bytes_text(kind.max_line().unwrap_or(0)),
        kind.a()
    )]
    LongLine {
        /// The file as named.
        path: PathBuf,
        /// What it was read as.
        kind: FileKind,
        /// The 1-based line.
        line: u64,
    },
}
crate::exit::classify!(FileError => BadInput);

fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// A file of `kind` opened for reading: refused before any byte is read if it is not a regular
/// file or is already above the limit, and the reader fails (an [`std::io::Error`] wrapping a
/// [`FileError`]) if it grows past it or, for a streamed kind, meets a line too long.
pub(crate) fn open(path: &Path, kind: FileKind) -> Result<BoundedFile, FileError> {
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        kind,
        source,
    };
    // Looked at before opening: opening a FIFO blocks until a writer comes.
    let meta = std::fs::metadata(path).map_err(io)?;
    let check = |meta: &std::fs::Metadata| {
        if !meta.is_file() {
            return Err(FileError::NotAFile {
                path: path.to_path_buf(),
                kind,
                found: kind_of(meta.file_type()),
            });
        }
        if meta.len() > kind.limit() {
            return Err(FileError::TooLarge {
                path: path.to_path_buf(),
                kind,
                size: Some(meta.len()),
            });
        }
        Ok(())
    };
    check(&meta)?;
    let file = std::fs::File::open(path).map_err(io)?;
    // And again on what was opened, in case the name changed hands in between.
    check(&file.metadata().map_err(io)?)?;
    Ok(BoundedFile {
        file,
        path: path.to_path_buf(),
        kind,
        read: 0,
        line: 1,
        line_len: 0,
        refused: None,
    })
}

/// The whole file of `kind` (see [`open`]).
pub(crate) fn read(path: &Path, kind: FileKind) -> Result<Vec<u8>, FileError> {
    let mut f = open(path, kind)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|e| f.error(e))?;
    Ok(bytes)
}

/// The whole file of `kind` as text (see [`open`]); text that is not UTF-8 is refused.
pub(crate) fn read_to_string(path: &Path, kind: FileKind) -> Result<String, FileError> {
    let mut f = open(path, kind)?;
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(|e| f.error(e))?;
    Ok(text)
}

/// A file opened by [`open`]: reads fail past its kind's limit.
#[derive(Debug)]
pub(crate) struct BoundedFile {
    file: std::fs::File,
    path: PathBuf,
    kind: FileKind,
    read: u64,
    line: u64,
    line_len: u64,
    refused: Option<FileError>,
}

impl BoundedFile {
    /// The [`FileError`] an error of this reader stands for: its own refusal, or an I/O error
    /// on this file.
    pub(crate) fn error(&mut self, e: std::io::Error) -> FileError {
        self.refused.take().unwrap_or_else(|| FileError::Io {
            path: self.path.clone(),
            kind: self.kind,
            source: e,
        })
    }

    /// An I/O error carrying the refusal's message (for a reader inside another, as the CSV
    /// reader), the refusal itself kept for [`BoundedFile::error`].
    fn refuse(&mut self, e: FileError) -> std::io::Error {
        let error = std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string());
        self.refused = Some(e);
        error
    }
}

impl Read for BoundedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // One byte past the limit is asked for, to tell a file of exactly the limit from one
        // above it.
        let room = (self.kind.limit() + 1).saturating_sub(self.read);
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..want])?;
        self.read += n as u64;
        if self.read > self.kind.limit() {
            let too_large = FileError::TooLarge {
                path: self.path.clone(),
                kind: self.kind,
                size: None,
            };
            return Err(self.refuse(too_large));
        }
        if let Some(max) = self.kind.max_line() {
            for &b in &buf[..n] {
                if b == b'\n' {
                    self.line += 1;
                    self.line_len = 0;
                } else {
                    self.line_len += 1;
                    if self.line_len > max {
                        let long = FileError::LongLine {
                            path: self.path.clone(),
                            kind: self.kind,
                            line: self.line,
                        };
                        return Err(self.refuse(long));
                    }
                }
            }
        }
        Ok(n)
    }
}

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
pub(crate) struct Problem {
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
pub(crate) fn location(line: Option<u64>, column: Option<&str>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(", line {l}, {c}"),
        (Some(l), None) => format!(", line {l}"),
        (None, Some(c)) => format!(", {c}"),
        (None, None) => String::new(),
    }
}

/// The message for a value above the duration bound every source of durations obeys.
pub(crate) fn out_of_range(cell: &str) -> String {
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
pub(crate) struct Column {
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
pub(crate) struct DurationCsv<R> {
    reader: csv::Reader<R>,
    headers: csv::StringRecord,
}

impl<R: Read> DurationCsv<R> {
    /// Reads the header line.
    pub(crate) fn new(reader: R) -> Result<DurationCsv<R>, Problem> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(reader);
        let headers = reader.headers().map_err(csv_problem)?.clone();
        Ok(DurationCsv { reader, headers })
    }

    /// The index of the column named `name`, if the header has it.
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h == name)
    }

    /// The column named `name`; refused for an empty file and for a header without it, naming
    /// the columns present and `choose_with` (how the user picks another, e.g. `--column`).
    pub(crate) fn column(&self, name: &str, choose_with: &str) -> Result<Column, Problem> {
        if self.headers.iter().all(str::is_empty) {
            return Err(Problem::at(
                Some(1),
                None,
                format!("the file is empty: expected a header line naming the column `{name}`"),
            ));
        }
        let Some(index) = self.find(name) else {
            // A header is a line (up to 1 MiB): the message names at most 20 columns, each
            // cut to 60 characters.
            let mut names: Vec<String> = self
                .headers
                .iter()
                .take(20)
                .map(|h| match h.char_indices().nth(60) {
                    Some((cut, _)) => format!("`{}…`", &h[..cut]),
                    None => format!("`{h}`"),
                })
                .collect();
            if self.headers.len() > 20 {
                names.push(format!("and {} more", self.headers.len() - 20));
            }
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
    pub(crate) fn read(
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

    /// A FIFO at `dir/name` (made with mkfifo(1)).
    fn fifo(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        let made = std::process::Command::new("mkfifo").arg(&p).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", p.display());
        p
    }

    /// Issue 40, item 5: a file that never ends, a FIFO (whose opening would wait for a writer
    /// forever) and a directory are refused by name before a byte is read, whatever the kind.
    #[test]
    fn files_that_are_not_regular_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = fifo(dir.path(), "pipe.lua");
        for (path, found) in [
            (Path::new("/dev/zero"), "a character device"),
            (pipe.as_path(), "a FIFO"),
            (dir.path(), "a directory"),
        ] {
            for kind in [FileKind::Profile, FileKind::Script, FileKind::Events] {
                let e = super::read(path, kind).unwrap_err();
                assert!(matches!(e, FileError::NotAFile { .. }), "{e:?}");
                let text = e.to_string();
                assert!(
                    text.contains(&path.display().to_string()) && text.contains(found),
                    "{text}"
                );
            }
        }
    }

    /// A file of exactly its kind's limit is read; one byte more is refused, stating the limit.
    #[test]
    fn the_size_limit_is_stated_and_holds_to_the_byte() {
        let dir = tempfile::tempdir().unwrap();
        let kind = FileKind::Script;
        let path = dir.path().join("big.lua");
        let limit = usize::try_from(kind.limit()).unwrap();
        std::fs::write(&path, vec![b'-'; limit]).unwrap();
        assert_eq!(super::read(&path, kind).unwrap().len(), limit);
        std::fs::write(&path, vec![b'-'; limit + 1]).unwrap();
        let e = read_to_string(&path, kind).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { .. }), "{e:?}");
        assert!(
            e.to_string().contains(&bytes_text(kind.limit())),
            "{e}: the limit is stated"
        );
        assert_eq!(bytes_text(4 << 20), "4 MiB");
    }

    /// A streamed file's reader stops at a line longer than its kind's lines, naming the line,
    /// so memory stays bounded without a limit on the file's size.
    #[test]
    fn a_streamed_file_refuses_a_line_that_never_ends() {
        // events.csv, and a duration file (`empirical(file=…)`, recommend's `.csv`).
        for kind in [FileKind::Events, FileKind::Samples] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("file.csv");
            let max = usize::try_from(kind.max_line().unwrap()).unwrap();
            let mut text = b"a,b\n1,2\n".to_vec();
            text.extend(vec![b'9'; max + 1]);
            std::fs::write(&path, &text).unwrap();
            let mut f = open(&path, kind).unwrap();
            let mut sink = Vec::new();
            let io = f.read_to_end(&mut sink).unwrap_err();
            assert!(io.to_string().contains("line 3"), "{kind:?}: {io}");
            let e = f.error(io);
            assert!(matches!(e, FileError::LongLine { line: 3, .. }), "{e:?}");
            // The same file with its last line ended at the bound is read whole.
            text.truncate(text.len() - 1);
            text.push(b'\n');
            std::fs::write(&path, &text).unwrap();
            assert_eq!(super::read(&path, kind).unwrap().len(), text.len());
        }
    }

    /// A header of many or long columns is named in a message of bounded length (a hostile
    /// pass's 286 MiB header came back as a 300 MB message).
    #[test]
    fn a_missing_column_names_a_bounded_list() {
        let long = "x".repeat(10_000);
        let header: Vec<String> = (0..50).map(|i| format!("{long}{i}")).collect();
        let text = format!("{}\n1\n", header.join(","));
        let csv = DurationCsv::new(text.as_bytes()).unwrap();
        let e = csv.column("durationMs", "column=…").unwrap_err();
        let msg = format!("{e:?}");
        assert!(msg.len() < 3_000, "{} bytes", msg.len());
        assert!(msg.contains("and 30 more"), "{msg}");
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
