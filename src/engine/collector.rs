//! Drains a recorder's histogram stripes once per interval into the `.hlog` interval logs
//! and the run totals, on a dedicated thread (the engine's side of the `.hlog` format).

use crate::engine::recorder::Recorder;
use crate::record::{HistSet, Metric};
use anyhow::Context;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Drains a recorder's histogram stripes once per interval into tagged interval logs and the
/// totals, from a dedicated thread.
pub struct Collector {
    stop: std_mpsc::Sender<()>,
    handle: std::thread::JoinHandle<anyhow::Result<HistSet>>,
}

impl Collector {
    /// Starts collecting `rec` into `<dir>/<metric>.hlog`, intervals tagged `tag`. `base` is the
    /// run's start (the logs' BaseTime); `offset` is how long after it this recorder started.
    pub fn start(
        rec: Arc<Recorder>,
        dir: &Path,
        tag: &str,
        base: SystemTime,
        offset: Duration,
        interval: Duration,
    ) -> anyhow::Result<Self> {
        let mut files = Vec::new();
        for m in Metric::ALL {
            let path = dir.join(format!("{}.hlog", m.file_stem()));
            let new = !path.exists();
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            files.push((BufWriter::new(f), new, m, path));
        }
        let (stop, stop_rx) = std_mpsc::channel::<()>();
        let tag = tag.to_string();
        let handle = std::thread::spawn(move || -> anyhow::Result<HistSet> {
            let base_secs = base
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            let mut sers: Vec<V2DeflateSerializer> =
                files.iter().map(|_| V2DeflateSerializer::new()).collect();
            let mut writers = Vec::new();
            let paths: Vec<PathBuf> = files.iter().map(|f| f.3.clone()).collect();
            for ((w, new, m, path), ser) in files.iter_mut().zip(sers.iter_mut()) {
                let mut b = IntervalLogWriterBuilder::new();
                if *new {
                    b.add_comment(&format!(
                        "lockbench {} {} (values in microseconds)",
                        env!("CARGO_PKG_VERSION"),
                        m.file_stem()
                    ));
                    b.with_start_time(base).with_base_time(base);
                    let _ = base_secs;
                }
                writers.push(
                    b.begin_log_with(w, ser)
                        .with_context(|| format!("cannot write {}", path.display()))?,
                );
            }
            let tag = Tag::new(&tag);
            let mut totals = HistSet::default();
            let mut interval_set = HistSet::default();
            let mut last = offset;
            let t0 = std::time::Instant::now();
            loop {
                let stopped = !matches!(
                    stop_rx.recv_timeout(interval),
                    Err(std_mpsc::RecvTimeoutError::Timeout)
                );
                let now = offset + t0.elapsed();
                interval_set.reset();
                rec.drain_into(&mut interval_set);
                for ((w, m), path) in writers.iter_mut().zip(Metric::ALL).zip(&paths) {
                    let h = interval_set.get(m);
                    w.write_histogram(h, last, now.saturating_sub(last), tag)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                }
                totals.add(&interval_set);
                last = now;
                if stopped {
                    break;
                }
            }
            drop(writers);
            for (w, _, _, path) in &mut files {
                w.flush()
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            Ok(totals)
        });
        Ok(Self { stop, handle })
    }

    /// Final drain; returns the totals of everything recorded.
    pub fn finish(self) -> anyhow::Result<HistSet> {
        let _ = self.stop.send(());
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the histogram collector thread panicked"))?
    }
}
