//! `events.csv`: one row per section, streamed while the run goes ([`EventsWriter`]) and read
//! back one row at a time ([`for_each_event`]), so neither side keeps the rows in memory.

use crate::record::EventRow;
use anyhow::Context;
use std::fs::OpenOptions;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::error::TryRecvError;

/// How long the writer naps when it has drained the queue.
const DRAIN_NAP: Duration = Duration::from_millis(2);

/// A row of `events.csv` cannot be read: the file was truncated (a run killed mid-write) or
/// edited. The line number is the file's, header included.
#[derive(Debug, thiserror::Error)]
#[error("{path} line {line}: {detail}")]
pub struct BadRow {
    /// The file.
    pub path: PathBuf,
    /// 1-based line.
    pub line: u64,
    /// What is wrong with it.
    pub detail: String,
}

/// Streams section rows into `events.csv` from a dedicated thread, so memory stays flat and
/// workers never block on disk (the channel is bounded: back-pressure instead of growth).
pub struct EventsWriter {
    /// Where workers send rows.
    pub tx: tokio::sync::mpsc::Sender<EventRow>,
    handle: std::thread::JoinHandle<anyhow::Result<u64>>,
}

impl EventsWriter {
    /// Opens `path` for appending (a header is written only to a new file).
    /// With `write: false` nothing is written and no file is made: rows sent are dropped.
    pub fn start(path: &Path, write: bool) -> anyhow::Result<Self> {
        if !write {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<EventRow>(1);
            let handle = std::thread::spawn(move || -> anyhow::Result<u64> {
                while rx.blocking_recv().is_some() {}
                Ok(0)
            });
            return Ok(Self { tx, handle });
        }
        let new = !path.exists();
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<EventRow>(8192);
        let path = path.to_path_buf();
        let handle = std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut w = csv::WriterBuilder::new()
                .has_headers(new)
                .from_writer(BufWriter::with_capacity(1 << 16, f));
            let ctx = || format!("cannot write {}", path.display());
            let mut n = 0u64;
            // Drain whatever is queued, then nap: waiting in `blocking_recv` would park the
            // thread whenever the queue empties, so nearly every row would pay a futex wake and
            // a context switch on the sending worker's core (measured: a fifth of the process's
            // CPU at 35k sections/s). The nap is shorter than the channel takes to fill at
            // 1M rows/s, and senders wait on a full channel rather than lose rows.
            loop {
                match rx.try_recv() {
                    Ok(row) => {
                        w.serialize(&row).with_context(ctx)?;
                        n += 1;
                    }
                    Err(TryRecvError::Empty) => std::thread::sleep(DRAIN_NAP),
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            // csv's flush also flushes the BufWriter underneath: a full disk surfaces here.
            w.flush().with_context(ctx)?;
            Ok(n)
        });
        Ok(Self { tx, handle })
    }

    /// Waits for every row to be written (all senders must be dropped first).
    pub fn finish(self) -> anyhow::Result<u64> {
        drop(self.tx);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the events.csv writer thread panicked"))?
    }
}

fn csv_error(path: &Path, e: csv::Error) -> anyhow::Error {
    let line = e.position().map(|p| p.line());
    let detail = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => {
            format!("{len} fields where the header has {expected_len} (truncated or edited file?)")
        }
        csv::ErrorKind::Deserialize { err, .. } => format!("cannot read the row: {err}"),
        _ => e.to_string(),
    };
    match line {
        Some(line) => BadRow {
            path: path.to_path_buf(),
            line,
            detail,
        }
        .into(),
        None => anyhow::anyhow!("{}: {detail}", path.display()),
    }
}

/// Calls `f` with every row of an `events.csv`, in file order. Errors name the file and line.
pub fn for_each_event(path: &Path, mut f: impl FnMut(&EventRow)) -> anyhow::Result<()> {
    let mut rdr =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut row = csv::StringRecord::new();
    let headers = rdr.headers().map_err(|e| csv_error(path, e))?.clone();
    loop {
        match rdr.read_record(&mut row) {
            Ok(false) => break,
            Ok(true) => {
                let r: EventRow = row
                    .deserialize(Some(&headers))
                    .map_err(|e| csv_error(path, e))?;
                f(&r);
            }
            Err(e) => return Err(csv_error(path, e)),
        }
    }
    Ok(())
}
