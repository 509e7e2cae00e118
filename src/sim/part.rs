//! A simulated run in parts (`sim_parallel`): the parts after the first, each simulated on a
//! thread of its own beside part 0, which the runner drives itself
//! ([`crate::runner`]).

use crate::engine::collector::Collector;
use crate::engine::context::WorkerCtx;
use crate::engine::pacer::Halt;
use crate::engine::recorder::Recorder;
use crate::profile::Plan;
use crate::signals::{Request, request_of};
use crate::store::{Connector, LockConn};
use anyhow::Context;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// The length of each part of a simulated run in parts, µs.
pub(crate) fn part_len_us(part_plan: &Plan) -> u64 {
    part_plan.run_time().unwrap_or_default().as_micros() as u64
}

/// A part other than the first of a simulated run cut into parts (`sim_parallel`): its own
/// empty store and clock, recorder, workers and seed, simulated on a thread of its own beside
/// part 0. Its interval logs go to `<dir>/.part-K/` on the run's clock (its time zero is
/// K part lengths in) and are appended to the run's after part 0's; its histograms and counts
/// are added to part 0's. Nothing crosses between parts: each starts from an empty server, as
/// the whole run does.
pub(crate) struct SimPart<C> {
    plan: Plan,
    conns: Vec<C>,
    ctx: Arc<WorkerCtx>,
    recorder: Arc<Recorder>,
    clock: Arc<std::sync::atomic::AtomicU64>,
    collector: Option<Collector>,
    dir: std::path::PathBuf,
    /// Where the part starts on the run's clock, µs.
    start_us: u64,
}

impl<C: LockConn> SimPart<C> {
    /// Part `k` of `parts` of `whole`, with `slots` connections to a fork of `connector`'s
    /// store; its interval logs go under `run_dir` (the variant `name`'s, started at `base`,
    /// `offset` into the run), its worker context from `new_ctx(recorder, seed)`.
    pub(crate) async fn new<K: Connector<Conn = C>>(
        connector: &K,
        whole: &Plan,
        (parts, k): (usize, usize),
        slots: usize,
        (run_dir, name, base): (&Path, &str, SystemTime),
        offset: Duration,
        new_ctx: &impl Fn(Arc<Recorder>, u64) -> Arc<WorkerCtx>,
    ) -> anyhow::Result<Self> {
        let store = connector
            .fork()
            .context("sim_parallel needs a simulated store")?;
        let clock = store
            .virtual_clock()
            .context("sim_parallel needs a simulated store")?;
        let plan = whole.part(parts, k);
        let mut conns = Vec::with_capacity(slots);
        for _ in 0..slots {
            conns.push(store.connect().await?);
        }
        let recorder = Arc::new(Recorder::new_virtual(plan.workload.keys, clock.clone()));
        let dir = run_dir.join(format!(".part-{k}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let start_us = k as u64 * part_len_us(&plan);
        let start = Duration::from_micros(start_us);
        let collector =
            Collector::start_virtual(recorder.clone(), &dir, name, base, offset + start)
                .inspect_err(|_| {
                    let _ = std::fs::remove_dir_all(&dir);
                })?;
        Ok(Self {
            start_us,
            ctx: new_ctx(recorder.clone(), plan.seed),
            plan,
            conns,
            recorder,
            clock,
            collector: Some(collector),
            dir,
        })
    }

    /// Simulates the part to its end (Ctrl-C stops it as it stops part 0, and so does another
    /// part's failure: `failed`).
    pub(crate) fn run(
        &mut self,
        interval_us: u64,
        signals: watch::Receiver<u32>,
        failed: &std::sync::atomic::AtomicBool,
    ) -> anyhow::Result<crate::sim::Simulated> {
        let collector = self.collector.as_ref().context("part already finished")?;
        crate::sim::run_workers(
            std::mem::take(&mut self.conns),
            &self.ctx,
            &self.plan,
            &self.clock,
            None,
            (collector, interval_us),
            |_| {
                (request_of(*signals.borrow()) != Request::Continue || failed.load(Relaxed))
                    .then_some(Halt::Stop)
            },
        )
    }

    /// Its histograms and counts; its interval logs appended to those in `dir` (after what is
    /// there: part 0's, and the parts before it).
    pub(crate) fn finish(
        mut self,
        dir: &std::path::Path,
    ) -> anyhow::Result<(crate::record::HistSet, crate::analysis::summary::Measured)> {
        let collector = self.collector.take().context("part already finished")?;
        let hists = collector.finish_at(Duration::from_micros(self.recorder.now_us()))?;
        for m in crate::record::Metric::ALL {
            let name = format!("{}.hlog", m.file_stem());
            let part = self.dir.join(&name);
            let text = std::fs::read_to_string(&part)
                .with_context(|| format!("cannot read {}", part.display()))?;
            let mut out = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.join(&name))
                .with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
            // The intervals only (the header is the run's, already there).
            for line in text.lines().filter(|l| l.starts_with("Tag=")) {
                std::io::Write::write_all(&mut out, format!("{line}\n").as_bytes())
                    .with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
            }
        }
        // Its first overlaps on the run's clock (its own starts at zero).
        let mut measured = self.recorder.measured();
        for k in &mut measured.per_key {
            if let Some(t) = &mut k.first_overlap_us {
                *t += self.start_us;
            }
        }
        Ok((hists, measured))
    }
}

impl<C> SimPart<C> {
    /// The part's virtual clock, µs since its own time zero.
    pub(crate) fn now_us(&self) -> u64 {
        self.clock.load(Relaxed)
    }

    /// Ends the blocked time of its keys left blocked by a crashed holder (see
    /// [`Recorder::censor_crashes`]).
    pub(crate) fn censor_crashes(&self) -> u64 {
        self.recorder.censor_crashes()
    }
}

impl<C> Drop for SimPart<C> {
    fn drop(&mut self) {
        // Its logs are in the run's by now (or the run failed); the directory goes either way.
        if let Some(c) = self.collector.take() {
            let _ = c.finish();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
