//! `events.csv`: one row per section, streamed while the run goes ([`EventsWriter`]) and read
//! back one row at a time ([`for_each_event`]), so neither side keeps the rows in memory.

use crate::record::{EventRow, SectionOutcome};
use anyhow::Context;
use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::error::TryRecvError;

/// How long the writer naps when it has drained the queue.
const DRAIN_NAP: Duration = Duration::from_millis(2);

/// The writer thread's name (15 bytes at most: the kernel's limit).
pub(crate) const THREAD_NAME: &str = "lockbench-event";

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
crate::exit::classify!(BadRow => Failed);

/// Streams section rows into `events.csv` from a dedicated thread, so memory stays flat and
/// workers never block on disk (the channel is bounded: back-pressure instead of growth).
pub struct EventsWriter {
    /// Where workers send rows.
    pub tx: tokio::sync::mpsc::Sender<EventRow>,
    handle: std::thread::JoinHandle<anyhow::Result<u64>>,
    /// The writer thread's kernel id (`None`: no writer thread, or no `/proc`).
    tid: Option<u32>,
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
            return Ok(Self {
                tx,
                handle,
                tid: None,
            });
        }
        let new = !path.exists();
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<EventRow>(8192);
        let path = path.to_path_buf();
        let writer = std::thread::Builder::new().name(THREAD_NAME.into());
        // `start` returns once the thread runs in its class.
        let (ready, is_ready) = std::sync::mpsc::channel::<Option<u32>>();
        let handle = writer.spawn(move || -> anyhow::Result<u64> {
            crate::threads::background_thread();
            let _ = ready.send(crate::threads::thread_id().ok());
            let mut w = BufWriter::with_capacity(1 << 16, f);
            let ctx = || format!("cannot write {}", path.display());
            if new {
                w.write_all(header_line().as_bytes()).with_context(ctx)?;
            }
            let mut line = Vec::with_capacity(512);
            let mut n = 0u64;
            // Drain whatever is queued, then nap: waiting in `blocking_recv` would park the
            // thread whenever the queue empties, so nearly every row would pay a futex wake and
            // a context switch on the sending worker's core (measured: a fifth of the process's
            // CPU at 35k sections/s). The nap is shorter than the channel takes to fill at
            // 1M rows/s, and senders wait on a full channel rather than lose rows.
            loop {
                match rx.try_recv() {
                    Ok(row) => {
                        line.clear();
                        encode_row(&mut line, &row);
                        w.write_all(&line).with_context(ctx)?;
                        n += 1;
                    }
                    Err(TryRecvError::Empty) => std::thread::sleep(DRAIN_NAP),
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            // A full disk surfaces here.
            w.flush().with_context(ctx)?;
            Ok(n)
        })?;
        let tid = is_ready.recv().ok().flatten();
        Ok(Self { tx, handle, tid })
    }

    /// The writer thread's kernel id, where `/proc` gives it (to read its class from there).
    pub fn thread_id(&self) -> Option<u32> {
        self.tid
    }

    /// Waits for every row to be written (all senders must be dropped first).
    pub fn finish(self) -> anyhow::Result<u64> {
        drop(self.tx);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the events.csv writer thread panicked"))?
    }
}

/// The header of `events.csv`, as the csv crate writes it for [`EventRow`] (its field names).
pub(crate) fn header_line() -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Serializing one row writes the header first; keep only that line.
    let _ = w.serialize(EventRow::default());
    let bytes = w.into_inner().unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .next()
        .map(|l| format!("{l}\n"))
        .unwrap_or_default()
}

/// Appends `row` as one line of `events.csv`, byte for byte what the csv crate writes for it
/// (a test compares them), without serde: numbers through a digit buffer, words as they are.
/// A word that would need quoting (a comma, quote or line break: never one lockbench writes)
/// takes the csv crate's path instead.
pub(crate) fn encode_row(out: &mut Vec<u8>, r: &EventRow) {
    let words = [&*r.variant, &*r.release, &*r.read, &*r.write];
    if words
        .iter()
        .any(|w| w.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')))
    {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(std::mem::take(out));
        let _ = w.serialize(r);
        *out = w.into_inner().unwrap_or_default();
        return;
    }
    let num = |out: &mut Vec<u8>, n: u64| {
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        out.push(b',');
    };
    let word = |out: &mut Vec<u8>, w: &str| {
        out.extend_from_slice(w.as_bytes());
        out.push(b',');
    };
    let flag = |out: &mut Vec<u8>, b: bool| word(out, if b { "true" } else { "false" });
    word(out, &r.variant);
    num(out, r.worker as u64);
    num(out, r.key as u64);
    num(out, r.seq);
    num(out, r.attempt_start_us);
    num(out, r.set_sent_us);
    num(out, r.acquired_us);
    num(out, r.released_us);
    num(out, r.intended_us);
    num(out, r.duration_us);
    num(out, r.ttl_us);
    flag(out, r.overrun);
    num(out, r.excess_us);
    num(out, u64::from(r.holders_at_start));
    num(out, u64::from(r.attempts));
    num(out, r.acquire_latency_us);
    num(out, r.release_latency_us);
    word(out, &r.release);
    word(out, r.outcome.name());
    flag(out, r.interrupted);
    num(out, r.fence);
    word(out, &r.read);
    word(out, &r.write);
    num(out, u64::from(r.extensions));
    flag(out, r.extension_failed);
    flag(out, r.aborted);
    num(out, r.pause_us);
    match r.late_us {
        Some(n) => num(out, n),
        None => out.push(b','),
    }
    // The last field's comma becomes the line's end.
    out.pop();
    out.push(b'\n');
}

/// Columns of this version's `events.csv` (one per [`EventRow`] field; older files, with
/// fewer, take serde's path).
const COLUMNS: usize = 28;

/// Reads one row of this version's columns into `out` (its variant kept when unchanged, so a
/// file of one variant allocates it once). Errors name the column and what it held.
fn decode_row(raw: &csv::ByteRecord, out: &mut EventRow) -> Result<(), String> {
    if raw.len() != COLUMNS {
        return Err(format!(
            "{} fields where the header has {COLUMNS} (truncated or edited file?)",
            raw.len()
        ));
    }
    let field = |i: usize| &raw[i];
    let text = |i: usize| -> Result<&str, String> {
        std::str::from_utf8(field(i)).map_err(|_| format!("field {} is not UTF-8", i + 1))
    };
    let num = |i: usize| -> Result<u64, String> {
        let t = text(i)?;
        t.parse::<u64>()
            .map_err(|_| format!("cannot read the row: field {}: `{t}` is not a count", i + 1))
    };
    let small = |i: usize| -> Result<u32, String> {
        u32::try_from(num(i)?).map_err(|_| format!("field {} is out of range", i + 1))
    };
    let flag = |i: usize| -> Result<bool, String> {
        match field(i) {
            b"true" => Ok(true),
            b"false" => Ok(false),
            other => Err(format!(
                "cannot read the row: field {}: `{}` is not true or false",
                i + 1,
                String::from_utf8_lossy(other)
            )),
        }
    };
    let word = |i: usize| -> Result<std::borrow::Cow<'static, str>, String> {
        let t = text(i)?;
        Ok(if t.is_empty() {
            std::borrow::Cow::Borrowed("")
        } else {
            std::borrow::Cow::Owned(t.to_string())
        })
    };
    let variant = text(0)?;
    if &*out.variant != variant {
        out.variant = variant.into();
    }
    out.worker = num(1)? as usize;
    out.key = num(2)? as usize;
    out.seq = num(3)?;
    out.attempt_start_us = num(4)?;
    out.set_sent_us = num(5)?;
    out.acquired_us = num(6)?;
    out.released_us = num(7)?;
    out.intended_us = num(8)?;
    out.duration_us = num(9)?;
    out.ttl_us = num(10)?;
    out.overrun = flag(11)?;
    out.excess_us = num(12)?;
    out.holders_at_start = small(13)?;
    out.attempts = small(14)?;
    out.acquire_latency_us = num(15)?;
    out.release_latency_us = num(16)?;
    out.release = word(17)?;
    out.outcome = {
        let t = text(18)?;
        SectionOutcome::from_name(t).ok_or_else(|| {
            format!(
                "cannot read the row: field 19: {}",
                SectionOutcome::unknown(t)
            )
        })?
    };
    out.interrupted = flag(19)?;
    out.fence = num(20)?;
    out.read = word(21)?;
    out.write = word(22)?;
    out.extensions = small(23)?;
    out.extension_failed = flag(24)?;
    out.aborted = flag(25)?;
    out.pause_us = num(26)?;
    out.late_us = match !field(27).is_empty() {
        true => Some(num(27)?),
        false => None,
    };
    Ok(())
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
pub(crate) fn for_each_event(path: &Path, mut f: impl FnMut(&EventRow)) -> anyhow::Result<()> {
    let file = crate::inputs::open(path, crate::inputs::FileKind::Events)?;
    let mut rdr = csv::Reader::from_reader(std::io::BufReader::with_capacity(1 << 16, file));
    let mut row = csv::StringRecord::new();
    let headers = rdr.headers().map_err(|e| csv_error(path, e))?.clone();
    // This version's columns: read each row by position (serde would match every field's
    // name on every row); a file with other columns (older, edited) takes serde's path.
    if headers.iter().eq(header_line().trim_end().split(',')) {
        let mut raw = csv::ByteRecord::new();
        let mut out = EventRow::default();
        loop {
            match rdr.read_byte_record(&mut raw) {
                Ok(false) => return Ok(()),
                Ok(true) => {
                    if let Err(detail) = decode_row(&raw, &mut out) {
                        let line = raw.position().map_or(0, |p| p.line());
                        return Err(BadRow {
                            path: path.to_path_buf(),
                            line,
                            detail,
                        }
                        .into());
                    }
                    f(&out);
                }
                Err(e) => return Err(csv_error(path, e)),
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::release::ReleaseOutcome;

    /// The writer runs in the idle class (`SCHED_IDLE`, policy 5 in `/proc`'s field 41), so it
    /// never takes a core from the server or the runtime thread; a writer left in the normal
    /// class (policy 0) fails this.
    #[test]
    fn the_writer_thread_runs_in_the_idle_class() {
        let dir = tempfile::tempdir().unwrap();
        let w = EventsWriter::start(&dir.path().join("events.csv"), true).unwrap();
        w.tx.blocking_send(EventRow::default()).unwrap();
        // This writer's thread, not another test's.
        let tid = w.thread_id().expect("the writer's thread id");
        let policy = crate::threads::thread_policy(tid).unwrap();
        assert_eq!(w.finish().unwrap(), 1);
        assert_eq!(policy, 5, "the writer thread's scheduling policy");
    }

    fn by_csv(rows: &[EventRow]) -> Vec<u8> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in rows {
            w.serialize(r).unwrap();
        }
        w.into_inner().unwrap()
    }

    /// The hand-written row is the csv crate's, byte for byte, header included, for every
    /// field set and for a word that needs quoting; and it reads back as the same row.
    #[test]
    fn rows_are_written_as_the_csv_crate_writes_them() {
        let full = EventRow {
            variant: "token".into(),
            worker: 17,
            key: 123_456,
            seq: u64::MAX,
            attempt_start_us: 1,
            set_sent_us: 22,
            acquired_us: 333,
            released_us: 4_444,
            intended_us: 55_555,
            duration_us: 666_666,
            ttl_us: 7_777_777,
            overrun: true,
            excess_us: 0,
            holders_at_start: u32::MAX,
            attempts: 9,
            acquire_latency_us: 10,
            release_latency_us: 11,
            release: "token".into(),
            outcome: SectionOutcome::Release(ReleaseOutcome::RefusedExpired),
            interrupted: true,
            fence: 12,
            read: "value".into(),
            write: "unsafe_over_holder".into(),
            extensions: 13,
            extension_failed: true,
            aborted: true,
            pause_us: 14,
            late_us: Some(15),
        };
        let quoted = EventRow {
            variant: "a,\"b\"".into(),
            ..full.clone()
        };
        let rows = [EventRow::default(), full, quoted];
        let mut ours = header_line().into_bytes();
        for r in &rows {
            encode_row(&mut ours, r);
        }
        assert_eq!(
            String::from_utf8(ours.clone()).unwrap(),
            String::from_utf8(by_csv(&rows)).unwrap()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.csv");
        std::fs::write(&path, &ours).unwrap();
        let mut back = Vec::new();
        for_each_event(&path, |r| back.push(r.clone())).unwrap();
        assert_eq!(back, rows);
    }

    /// Every outcome is written as its word and read back as itself; a word no lockbench
    /// writes is refused with its line, its field and the valid words, in this version's
    /// columns and in an older file's (serde's path) alike.
    #[test]
    fn outcomes_read_back_and_unknown_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.csv");
        let rows: Vec<EventRow> = SectionOutcome::all()
            .map(|outcome| EventRow {
                outcome,
                ..EventRow::default()
            })
            .collect();
        assert_eq!(rows.len(), 13);
        let mut text = header_line().into_bytes();
        for r in &rows {
            encode_row(&mut text, r);
        }
        std::fs::write(&path, &text).unwrap();
        let mut back = Vec::new();
        for_each_event(&path, |r| back.push(r.outcome)).unwrap();
        assert_eq!(back, rows.iter().map(|r| r.outcome).collect::<Vec<_>>());

        let text = String::from_utf8(text).unwrap();
        let edited = text.replacen(",crashed,", ",vanished,", 1);
        assert_ne!(edited, text);
        std::fs::write(&path, &edited).unwrap();
        let e = format!("{:#}", for_each_event(&path, |_| {}).unwrap_err());
        assert!(e.contains("line 14"), "{e}");
        assert!(e.contains("`vanished` is not a section outcome"), "{e}");
        assert!(e.contains("error_timeout, error_connection"), "{e}");

        // An older file (without the last column) goes through serde.
        let older: String = edited
            .lines()
            .map(|l| format!("{}\n", &l[..l.rfind(',').unwrap()]))
            .collect();
        std::fs::write(&path, &older).unwrap();
        let e = format!("{:#}", for_each_event(&path, |_| {}).unwrap_err());
        assert!(e.contains("`vanished` is not a section outcome"), "{e}");
    }
}
