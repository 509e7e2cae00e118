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

/// Sees a collector's totals after each interval, on its thread.
pub(crate) type Observer = Box<dyn FnMut(&HistSet) + Send>;

/// Drains a recorder's histogram stripes once per interval into tagged interval logs and the
/// totals, from a dedicated thread.
pub struct Collector {
    pace: PaceTx,
    handle: std::thread::JoinHandle<anyhow::Result<HistSet>>,
}

/// When an interval ends: every `interval` of wall time until told to stop, or when the
/// simulator says (an instant on its virtual clock, µs since the recorder's time zero).
enum PaceTx {
    Wall(std_mpsc::Sender<()>),
    Virtual(std_mpsc::SyncSender<(Duration, bool, std_mpsc::SyncSender<()>)>),
}

enum PaceRx {
    Wall(std_mpsc::Receiver<()>, Duration),
    Virtual(std_mpsc::Receiver<(Duration, bool, std_mpsc::SyncSender<()>)>),
}

/// Ends the intervals of a [`Collector::start_virtual`] collector.
pub struct Ticker<'a>(&'a Collector);

impl Ticker<'_> {
    /// The interval ends at `at` (virtual time since the recorder's zero); returns once
    /// everything recorded so far is in it.
    pub fn tick(&self, at: Duration) {
        self.0.send_tick(at, false);
    }
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
        Self::start_observed(rec, dir, tag, base, offset, interval, None)
    }

    /// As [`Collector::start`]; `observer` sees the totals after each interval (live metrics).
    pub fn start_observed(
        rec: Arc<Recorder>,
        dir: &Path,
        tag: &str,
        base: SystemTime,
        offset: Duration,
        interval: Duration,
        observer: Option<Observer>,
    ) -> anyhow::Result<Self> {
        let (stop, stop_rx) = std_mpsc::channel::<()>();
        Self::spawn(
            rec,
            dir,
            tag,
            base,
            offset,
            (PaceTx::Wall(stop), PaceRx::Wall(stop_rx, interval)),
            observer,
        )
    }

    /// As [`Collector::start`], with intervals ended by the simulator on its virtual clock
    /// ([`Collector::ticker`], [`Collector::finish_at`]).
    pub fn start_virtual(
        rec: Arc<Recorder>,
        dir: &Path,
        tag: &str,
        base: SystemTime,
        offset: Duration,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = std_mpsc::sync_channel(0);
        Self::spawn(
            rec,
            dir,
            tag,
            base,
            offset,
            (PaceTx::Virtual(tx), PaceRx::Virtual(rx)),
            None,
        )
    }

    /// Ends this virtual-time collector's intervals.
    pub fn ticker(&self) -> Ticker<'_> {
        Ticker(self)
    }

    fn send_tick(&self, at: Duration, last: bool) {
        if let PaceTx::Virtual(tx) = &self.pace {
            let (ack, done) = std_mpsc::sync_channel(1);
            // A collector that failed has already stopped; its error comes with `finish`.
            if tx.send((at, last, ack)).is_ok() {
                let _ = done.recv();
            }
        }
    }

    /// The last interval of a virtual-time collector ends at `at`; returns the totals.
    pub fn finish_at(self, at: Duration) -> anyhow::Result<HistSet> {
        self.send_tick(at, true);
        self.finish()
    }

    /// `pace`: what ends the intervals, the sending end (the caller's) and the receiving end
    /// (the collector thread's).
    fn spawn(
        rec: Arc<Recorder>,
        dir: &Path,
        tag: &str,
        base: SystemTime,
        offset: Duration,
        (pace, pace_rx): (PaceTx, PaceRx),
        mut observer: Option<Observer>,
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
            let mut spare = HistSet::default();
            let mut last = offset;
            let t0 = std::time::Instant::now();
            loop {
                let (stopped, now, ack) = match &pace_rx {
                    PaceRx::Wall(stop_rx, interval) => {
                        let stopped = !matches!(
                            stop_rx.recv_timeout(*interval),
                            Err(std_mpsc::RecvTimeoutError::Timeout)
                        );
                        (stopped, offset + t0.elapsed(), None)
                    }
                    PaceRx::Virtual(rx) => match rx.recv() {
                        Ok((at, last, ack)) => (last, offset + at, Some(ack)),
                        Err(_) => (true, last, None),
                    },
                };
                interval_set.reset();
                rec.drain_into(&mut interval_set, &mut spare);
                // Everything recorded so far is in the interval: a simulation goes on while it
                // is written (its next tick is drained after this write; `finish` joins).
                if let Some(ack) = ack {
                    let _ = ack.send(());
                }
                for ((w, m), path) in writers.iter_mut().zip(Metric::ALL).zip(&paths) {
                    let h = interval_set.get(m);
                    w.write_histogram(h, last, now.saturating_sub(last), tag)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                }
                totals.add(&interval_set);
                if let Some(o) = &mut observer {
                    o(&totals);
                }
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
        Ok(Self { pace, handle })
    }

    /// Final drain; returns the totals of everything recorded.
    pub fn finish(self) -> anyhow::Result<HistSet> {
        if let PaceTx::Wall(stop) = &self.pace {
            let _ = stop.send(());
        }
        drop(self.pace);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the histogram collector thread panicked"))?
    }
}
