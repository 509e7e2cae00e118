//! Reading `.hlog` HdrHistogram interval logs (V2 deflate, tagged by variant): one reader for
//! the report and for `recommend`, so both accept and refuse the same files with the same
//! line numbers. The engine's collector writes them.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry, LogIteratorError};
use std::path::Path;

/// One interval of a log.
#[derive(Debug)]
pub struct Interval {
    /// Its tag (the variant), if any.
    pub tag: Option<String>,
    /// Its start, after the log's `BaseTime` (ms precision, as written).
    pub start: std::time::Duration,
    /// Its length.
    pub length: std::time::Duration,
    /// Its histogram (µs as lockbench writes them).
    pub histogram: Histogram<u64>,
    /// The 1-based line it is on.
    pub line: u64,
}

/// A line of a log that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct BadLine {
    /// 1-based line.
    pub line: u64,
    /// What part is wrong (the line, its histogram field).
    pub what: String,
}
crate::exit::classify!(BadLine => Failed);

/// Every interval of the log `bytes`, in order; comments and headers are skipped.
pub fn intervals(bytes: &[u8]) -> Result<Vec<Interval>, BadLine> {
    let mut out = Vec::new();
    for_each_interval(bytes, |iv| out.push(iv))?;
    Ok(out)
}

/// Calls `f` with every interval of the log `bytes`, in order, one at a time (a day's log
/// holds tens of thousands of intervals: decoded all at once they would take gigabytes).
pub fn for_each_interval(bytes: &[u8], mut f: impl FnMut(Interval)) -> Result<(), BadLine> {
    // Lines are counted on from the last offset asked for (offsets only grow), not from the
    // start each time: linear in the log's length, not quadratic.
    let (mut counted_to, mut lines) = (0usize, 1u64);
    let mut line_of = |offset: usize| {
        let end = offset.min(bytes.len());
        if end < counted_to {
            return bytes[..end].iter().filter(|b| **b == b'\n').count() as u64 + 1;
        }
        lines += bytes[counted_to..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count() as u64;
        counted_to = end;
        lines
    };
    let base = bytes.as_ptr() as usize;
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|LogIteratorError::ParseError { offset }| BadLine {
            line: line_of(offset),
            what:
                "not an HdrHistogram interval log line (expected `Tag=…,start,length,max,base64` \
                   or a `#` comment)"
                    .to_string(),
        })?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        // The encoded text is a slice of `bytes`: its address gives its line.
        let encoded = iv.encoded_histogram();
        let line = line_of((encoded.as_ptr() as usize).saturating_sub(base));
        let raw = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| BadLine {
                line,
                what: format!("the histogram field is not base64: {e}"),
            })?;
        let histogram: Histogram<u64> =
            de.deserialize(&mut raw.as_slice()).map_err(|e| BadLine {
                line,
                what: format!("the histogram field is not an HdrHistogram V2 encoding: {e:?}"),
            })?;
        f(Interval {
            tag: iv.tag().map(|t| t.as_str().to_string()),
            start: iv.start_timestamp(),
            length: iv.duration(),
            histogram,
            line,
        });
    }
    Ok(())
}

/// The intervals of the file at `path` merged per tag (untagged ones under `""`), in order of
/// first appearance.
pub fn read_by_tag(path: &Path) -> anyhow::Result<Vec<(String, Histogram<u64>)>> {
    let bytes = crate::inputs::read(path, crate::inputs::FileKind::Histogram)?;
    let mut out: Vec<(String, Histogram<u64>)> = Vec::new();
    // Merged as they are read. A line that cannot be read is reported before an interval that
    // cannot be merged, wherever each is (as when every interval was read first).
    let mut cannot_merge = None;
    for_each_interval(&bytes, |iv| {
        if cannot_merge.is_some() {
            return;
        }
        let tag = iv.tag.unwrap_or_default();
        let i = match out.iter().position(|(t, _)| *t == tag) {
            Some(i) => i,
            None => {
                out.push((tag, crate::record::new_hist()));
                out.len() - 1
            }
        };
        if let Err(e) = out[i].1.add(&iv.histogram) {
            cannot_merge = Some(anyhow::anyhow!(
                "{} line {}: cannot merge: {e:?}",
                path.display(),
                iv.line
            ));
        }
    })
    .map_err(|e| anyhow::anyhow!("{} {e}", path.display()))?;
    match cannot_merge {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of two tags reads back merged per tag; a broken line is named by number.
    #[test]
    fn reads_tagged_intervals_and_names_bad_lines() {
        use hdrhistogram::serialization::V2DeflateSerializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
        let mut buf = Vec::new();
        {
            let mut ser = V2DeflateSerializer::new();
            let mut w = IntervalLogWriterBuilder::new()
                .begin_log_with(&mut buf, &mut ser)
                .unwrap();
            for (tag, v) in [("del", 100u64), ("token", 200), ("del", 300)] {
                let mut h = crate::record::new_hist();
                h.record(v).unwrap();
                w.write_histogram(
                    &h,
                    std::time::Duration::ZERO,
                    std::time::Duration::from_secs(1),
                    Tag::new(tag),
                )
                .unwrap();
            }
        }
        let all = intervals(&buf).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1].tag.as_deref(), Some("token"));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.hlog");
        std::fs::write(&p, &buf).unwrap();
        let merged = read_by_tag(&p).unwrap();
        assert_eq!(merged[0].0, "del");
        assert_eq!(merged[0].1.len(), 2);
        let mut broken = buf.clone();
        broken.extend_from_slice(b"garbage line\n");
        let e = intervals(&broken).unwrap_err();
        assert!(e.line > 1 && e.what.contains("not an HdrHistogram"), "{e}");
    }
}
