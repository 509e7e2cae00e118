//! A variant's workers in real time.

use super::env::{Executed, Prepared, VariantEnv};
use super::progress::{progress_bar, update_bar};
use crate::analysis::summary::StopReason;
use crate::engine::context::WorkerCtx;
use crate::engine::end_grace;
use crate::engine::pacer::ArrivalQueue;
use crate::engine::pacer::Halt;
use crate::engine::pacer::RealPacer;
use crate::engine::recorder::Recorder;
use crate::engine::worker::run_worker;
use crate::profile::Plan;
use crate::signals::Request;
use crate::signals::request_of;
use crate::store::LockConn;
use anyhow::Context as _;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// What the recorder has counted so far, for the metrics endpoint.
fn live_metrics(plan: &Plan, rec: &Recorder) -> crate::metrics::Live {
    let (stats, holders, holders_max) = rec.keys_now();
    let outages = rec.outages();
    let now = rec.now_us();
    crate::metrics::Live {
        counts: rec.counters.counts.snapshot(),
        errors: crate::model::error::ErrorKind::ALL
            .iter()
            .map(|k| (k.name(), rec.counters.errors(*k)))
            .collect(),
        outages: outages.ended,
        outage_us: outages.total_us,
        overlap_us: stats.overlap_us,
        overlap_incidents: stats.incidents,
        peak_holders: stats.peak_holders,
        holders,
        holders_max,
        open_faults: plan
            .faults
            .schedule
            .iter()
            .filter(|f| f.covers(now))
            .map(|f| f.kind.to_string())
            .collect(),
    }
}

/// Runs a variant's workers in real time: tokio tasks, the arrivals' dispatcher, the fault
/// schedule, the progress bar, Ctrl-C, the end-of-run grace and the give-up rule. Takes the
/// workers' connections, drivers and arrivals' queue out of `prepared`.
pub(crate) async fn run_real<C: LockConn>(
    plan: &Plan,
    prepared: &mut Prepared<C>,
    events: &tokio::sync::mpsc::Sender<crate::record::EventRow>,
    env: &VariantEnv<'_>,
) -> anyhow::Result<Executed> {
    let (ctx, recorder) = (&prepared.ctx.clone(), &prepared.recorder.clone());
    let arrival_tx = prepared.arrival_tx.take();
    let arrival_rx = prepared.arrival_rx.take();
    let arrival_rx = arrival_rx.context("the arrivals' queue was taken")?;
    let deadline = plan.run_time().map(|d| recorder.start + d);
    // Sections still open at the deadline may finish; past this grace they are cut short.
    let (local_tx, local_rx) = watch::channel(Halt::Run);
    let halter = Halter {
        tx: local_tx,
        abandon: Arc::new(crate::engine::pacer::AbandonSignal::default()),
    };
    let halt = |h: Halt| halter.halt(h);
    let arrivals = arrival_tx.is_some().then(|| {
        Arc::new(ArrivalQueue {
            rx: tokio::sync::Mutex::new(arrival_rx),
        })
    });
    let crew = Crew {
        conns: std::mem::take(&mut prepared.conns),
        libs: std::mem::take(&mut prepared.libs),
        arrivals,
    };
    let mut set = spawn_workers(plan, ctx, crew, events, env, &local_rx, &halter.abandon);
    let dispatcher = spawn_dispatcher(plan, ctx, arrival_tx, &local_rx);
    // The fault schedule runs on the variant's clock until its workers are done.
    let (faults_done, faults_done_rx) = watch::channel(false);
    // A library's keys start with its own prefix (`mutex:`) before lockbench's.
    let wrap = ctx.client.as_ref().map_or("", |c| c.wrap.0.as_str());
    let control = crate::faults::FaultControl {
        key_prefix: format!("{wrap}{}", ctx.key_names.prefix()),
        ..env.control.clone()
    };
    let driver = tokio::spawn(crate::faults::drive(
        plan.faults.schedule.clone(),
        control,
        recorder.start,
        deadline,
        faults_done_rx,
    ));
    let bar = progress_bar(plan, env.opts, env.name);
    let grace = end_grace(plan.workload.ttl_ms);
    let mut signals = env.signals.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut ticks = 0u64;
    let mut cut_at: Option<Instant> = None;
    let mut panicked: Option<String> = None;
    let mut stop_reason = StopReason::Limit;
    // A signal that came before the workers started.
    on_signal(
        *signals.borrow_and_update(),
        &mut stop_reason,
        ctx,
        env,
        &halter,
    );
    loop {
        tokio::select! {
            r = set.join_next() => {
                match r {
                    None => break,
                    Some(Err(e)) if e.is_panic() => {
                        // Stop the others normally so their locks are released and counted.
                        panicked.get_or_insert_with(|| e.to_string());
                        halt(Halt::Stop);
                    }
                    Some(_) => {}
                }
            }
            Ok(()) = signals.changed() => {
                on_signal(*signals.borrow_and_update(), &mut stop_reason, ctx, env, &halter);
            }
            _ = tick.tick() => {
                update_bar(&bar, plan, recorder);
                // Live metrics once a second: reading every key's figures takes its mutex.
                ticks += 1;
                if ticks % 5 == 1
                    && let Some((board, i)) = &env.metrics
                {
                    board.live(*i, &live_metrics(plan, recorder));
                }
                if let Some(d) = deadline {
                    let cut = *cut_at.get_or_insert(d + grace);
                    if Instant::now() >= cut {
                        halt(Halt::Stop);
                    }
                }
                // The give-up rule: commands have failed, with none succeeding, for too long.
                if stop_reason == StopReason::Limit
                    && recorder
                        .failing_for_us()
                        .is_some_and(|f| f >= plan.timeouts.give_up_after_us)
                {
                    stop_reason = StopReason::GaveUp;
                    halt(Halt::Stop);
                }
            }
        }
    }
    bar.finish_and_clear();
    let elapsed_s = recorder.start.elapsed().as_secs_f64();
    if let Some(d) = dispatcher {
        d.abort();
    }
    // Blocked times still open end with the variant, not after a fault's undo.
    let crash_blocked_censored = recorder.censor_crashes();
    // Ends a fault still on (a paused or killed server comes back before the cleanup).
    let _ = faults_done.send(true);
    let faults = driver.await.unwrap_or_default();
    // The end barrier: the stuck-lock reads and the cleanup wait until every agent is done.
    if let Some(agent) = &env.opts.agent {
        agent.finish(grace, &mut signals).await;
    }
    Ok(Executed {
        elapsed_s,
        stop_reason,
        panicked,
        crash_blocked_censored,
        faults,
        simulated: None,
    })
}

/// Raises the variant's halt for its workers (never lowers it).
struct Halter {
    tx: watch::Sender<Halt>,
    abandon: Arc<crate::engine::pacer::AbandonSignal>,
}

impl Halter {
    fn halt(&self, h: Halt) {
        self.tx.send_if_modified(|cur| {
            let raise = h > *cur;
            if raise {
                *cur = h;
            }
            raise
        });
        // After the watch: a worker whose command is abandoned sees the halt too.
        if h == Halt::Abandon {
            self.abandon.abandon();
        }
    }
}

/// What the workers run with: a connection each, a lock library's driver each, and the
/// arrivals' queue of the open model.
struct Crew<C> {
    conns: Vec<C>,
    libs: Vec<crate::engine::worker::Library>,
    arrivals: Option<Arc<ArrivalQueue>>,
}

/// Starts one task per worker.
fn spawn_workers<C: LockConn>(
    plan: &Plan,
    ctx: &Arc<WorkerCtx>,
    crew: Crew<C>,
    events: &tokio::sync::mpsc::Sender<crate::record::EventRow>,
    env: &VariantEnv<'_>,
    halt: &watch::Receiver<Halt>,
    abandon: &Arc<crate::engine::pacer::AbandonSignal>,
) -> tokio::task::JoinSet<()> {
    let mut set = tokio::task::JoinSet::new();
    // Worker ids are global across agents: agent i runs workers i·W .. (i+1)·W, with the random
    // streams of the same workers in one process of N·W.
    let first = env.opts.agent.as_ref().map_or(0, |a| a.worker_first());
    let mut libs = crew.libs.into_iter();
    for (id, conn) in crew.conns.into_iter().enumerate() {
        let pacer = RealPacer {
            start: ctx.recorder.start,
            halt: halt.clone(),
            abandon: abandon.clone(),
            registered: None,
            precise: plan.workload.timer == crate::profile::Timer::Precise,
            arrivals: crew.arrivals.clone(),
            events: plan.events.then(|| events.clone()),
        };
        set.spawn(run_worker(
            first + id,
            conn,
            ctx.clone(),
            pacer,
            libs.next(),
        ));
    }
    set
}

/// Sends the arrivals at their intended times, until the run's length (or a stop).
fn spawn_dispatcher(
    plan: &Plan,
    ctx: &Arc<WorkerCtx>,
    arrival_tx: Option<tokio::sync::mpsc::Sender<u64>>,
    halt: &watch::Receiver<Halt>,
) -> Option<tokio::task::JoinHandle<()>> {
    arrival_tx.map(|tx| {
        let (arrivals, ctx, mut halt) = (plan.workload.arrivals, ctx.clone(), halt.clone());
        let length_us = plan.run_time().unwrap_or_default().as_micros() as u64;
        tokio::spawn(async move {
            let Some(arrivals) = arrivals else { return };
            let rec = &ctx.recorder;
            let counts = &rec.counters.counts;
            for at in arrivals.schedule(length_us, ctx.seed) {
                let due = rec.start + at;
                if due > Instant::now() {
                    tokio::select! {
                        _ = tokio::time::sleep_until(due) => {}
                        _ = halt.wait_for(|h| *h != Halt::Run) => return,
                    }
                }
                counts.requests.fetch_add(1, Relaxed);
                // Lateness is the slots' to count: an arrival is late when it was due before
                // the slot that takes it began waiting.
                if tx.try_send(at.as_micros() as u64).is_err() {
                    counts.dropped_arrivals.fetch_add(1, Relaxed);
                }
            }
        })
    })
}

/// A signal's count (Ctrl-C, SIGTERM): the first stops the run, the second abandons it.
fn on_signal(
    count: u32,
    stop_reason: &mut StopReason,
    ctx: &WorkerCtx,
    env: &VariantEnv<'_>,
    halter: &Halter,
) {
    match request_of(count) {
        Request::Continue => {}
        Request::Stop => {
            *stop_reason = StopReason::Interrupted;
            if let Some(c) = &ctx.client {
                c.interrupted
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            if !env.opts.quiet {
                eprintln!(
                    "stopping: open sections end now and are released; Ctrl-C again to stop \
                     waiting for the server and skip the key cleanup"
                );
            }
            halter.halt(Halt::Stop);
        }
        Request::Abandon => {
            *stop_reason = StopReason::Interrupted;
            if let Some(c) = &ctx.client {
                c.interrupted
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            halter.halt(Halt::Abandon);
        }
    }
}
