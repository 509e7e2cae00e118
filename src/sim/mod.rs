//! `--backend sim`: the same workers, the same steps and the same model of the server's
//! commands as the memory backend, on a virtual clock ([`exec`]), so a day of a service runs in
//! seconds.
//!
//! - The workers are [`crate::engine::worker::run_worker`] with a [`SimPacer`]: the real
//!   pacer's sleeps, stop signal, arrivals and rows, in virtual time.
//! - The server is [`crate::store::memory::MemoryStore`] behind a [`SimNet`]: each command
//!   travels half a round trip (drawn from a distribution), waits for the server — one command
//!   at a time, each taking the service time — runs on the keyspace at that instant, and its
//!   reply travels the other half.
//! - What is recorded goes through the same recorder, counts, overlap trackers, histograms and
//!   `events.csv` as a real run; the interval logs are cut on the virtual clock.
//! - [`part`]: a time-limited run cut into parts simulated at once (`sim_parallel`).

pub(crate) mod crosscheck;
pub(crate) mod exec;
pub(crate) mod part;

use crate::dist::Sampler;
use crate::engine::pacer::{Halt, Pacer};
use crate::model::error::CmdResult;
use crate::record::EventRow;
use crate::store::memory::keyspace::{Keyspace, lock};
use crate::store::memory::net::Net;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

thread_local! {
    /// When the server is free to start the next command, µs.
    static SERVER_FREE_AT: Cell<u64> = const { Cell::new(0) };
    /// The network's random stream.
    static NET_RNG: RefCell<SmallRng> = RefCell::new(SmallRng::seed_from_u64(0));
    /// The run's request to its workers.
    static HALT: Cell<Halt> = const { Cell::new(Halt::Run) };
    /// Open sections are cut short at this instant (a time-limited run's end plus its grace).
    static CUT_US: Cell<u64> = const { Cell::new(u64::MAX) };
    /// Arrivals waiting for a request slot.
    static ARRIVALS: RefCell<VecDeque<u64>> = const { RefCell::new(VecDeque::new()) };
    /// Request slots waiting for an arrival.
    static IDLE: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    /// No more arrivals will come.
    static ARRIVALS_DONE: Cell<bool> = const { Cell::new(false) };
    /// The open model's arrivals still to come (see [`Feed`]).
    static FEED: RefCell<Feed> = const { RefCell::new(Feed::new()) };
}

/// The open model's arrivals, handed from one to the next without a task of their own.
///
/// Exactly one task *holds* the next arrival: it is woken at the arrival's instant, and there
/// it hands the arrival after on before serving its own. The holder is an idle request slot
/// when there is one — the arrival costs one event, the slot's wake-up — and otherwise the
/// feed task, which queues the arrival in the backlog (or drops it when the backlog is full)
/// as a real run's dispatcher does. Every arrival is counted as a request at its instant.
struct Feed {
    /// The arrival times still to come.
    schedule: Option<crate::engine::open_loop::Schedule>,
    /// Per task, the arrival it holds, µs (`NONE`: none).
    held: Vec<u64>,
    /// The feed task's number.
    feeder: u32,
    /// Counted once per arrival (the run's `requests`), and per dropped one.
    counts: Option<std::sync::Arc<crate::engine::recorder::Recorder>>,
}

impl Feed {
    const NONE: u64 = u64::MAX;

    const fn new() -> Self {
        Self {
            schedule: None,
            held: Vec::new(),
            feeder: 0,
            counts: None,
        }
    }
}

/// The arrival `task` holds, taken (it was woken at its instant), if it holds one.
fn take_held(task: u32) -> Option<u64> {
    FEED.with(|f| {
        let mut f = f.borrow_mut();
        let a = std::mem::replace(f.held.get_mut(task as usize)?, Feed::NONE);
        (a != Feed::NONE).then_some(a)
    })
}

/// The holder of an arrival, woken at its instant: counts it as a request, lets `queue` place it
/// (the feed task's backlog), and hands the next arrival on. `false`: the run stops instead (no
/// arrival is served any more).
fn arrival_due(queue: impl FnOnce()) -> bool {
    if HALT.with(Cell::get) != Halt::Run {
        arrivals_done();
        return false;
    }
    count(|c| &c.requests);
    queue();
    hand_on();
    true
}

/// Adds one to the run's counter `which` (the recorder the feed counts into).
fn count(which: impl FnOnce(&crate::analysis::counts::LiveCounts) -> &AtomicU64) {
    FEED.with(|f| {
        if let Some(r) = &f.borrow().counts {
            which(&r.counters.counts).fetch_add(1, Relaxed);
        }
    });
}

/// Draws the next arrival and hands it to its holder — an idle slot, else the feed task — woken
/// at its instant; none left: the arrivals are done.
fn hand_on() {
    let next = FEED.with(|f| {
        let mut f = f.borrow_mut();
        let at = f.schedule.as_mut()?.next()?.as_micros() as u64;
        let holder = IDLE.with(|i| i.borrow_mut().pop()).unwrap_or(f.feeder);
        f.held[holder as usize] = at;
        Some((holder, at))
    });
    match next {
        Some((holder, at)) => exec::wake(holder, at),
        None => arrivals_done(),
    }
}

/// Resets the simulation's state on this thread: before a run.
pub(crate) fn reset(seed: u64, cut_us: Option<u64>) {
    SERVER_FREE_AT.with(|c| c.set(0));
    NET_RNG.with(|r| *r.borrow_mut() = SmallRng::seed_from_u64(seed ^ 0x0005_EED0_F4E7));
    HALT.with(|h| h.set(Halt::Run));
    CUT_US.with(|c| c.set(cut_us.unwrap_or(u64::MAX)));
    ARRIVALS.with(|a| a.borrow_mut().clear());
    IDLE.with(|i| i.borrow_mut().clear());
    ARRIVALS_DONE.with(|d| d.set(false));
    FEED.with(|f| *f.borrow_mut() = Feed::new());
}

/// Raises the run's request to its workers (it never falls).
pub(crate) fn halt(h: Halt) {
    HALT.with(|c| c.set(c.get().max(h)));
}

/// The network and server of a simulated run.
#[derive(Debug, Clone)]
pub struct SimNet {
    /// Round trip of a command, excluding the server's time (ms).
    rtt: Sampler,
    /// The server's time per command, µs.
    service_us: u64,
    describe: String,
    /// The virtual clock, µs, mirrored for readers outside the simulation (the recorder, the
    /// read-backs after a variant).
    clock: Arc<AtomicU64>,
}

impl SimNet {
    /// A network whose round trips follow `rtt` (written as given in `rtt_text`), with a
    /// server taking `service_us` per command.
    pub fn new(rtt: Sampler, rtt_text: &str, service_us: u64) -> Self {
        Self {
            rtt,
            service_us,
            clock: Arc::default(),
            describe: format!(
                "simulated: round trip {rtt_text}, server {} per command",
                crate::model::units::fmt_us(service_us, crate::model::units::Style::Compact)
            ),
        }
    }
}

impl Net for SimNet {
    fn now_us(&self) -> u64 {
        self.clock.load(Relaxed)
    }

    fn virtual_clock(&self) -> Option<Arc<AtomicU64>> {
        Some(self.clock.clone())
    }

    fn fork(&self) -> Self {
        Self {
            clock: Arc::default(),
            ..self.clone()
        }
    }

    async fn call<T: Send>(
        &self,
        keys: &Mutex<Keyspace>,
        f: impl FnOnce(&mut Keyspace, u64) -> T + Send,
    ) -> T {
        if !exec::running() {
            // Outside a simulation (the checks before a run, the read-backs and the cleanup
            // after it): at once, at the clock's last instant.
            return f(&mut lock(keys), self.now_us());
        }
        let sent = exec::now_us();
        let rtt = NET_RNG
            .with(|r| crate::model::units::ms_to_us(self.rtt.sample_ms(&mut *r.borrow_mut())));
        let there = rtt / 2;
        let arrives = sent + there;
        exec::sleep_until(arrives).await;
        // One command at a time, in the order they arrive.
        let start = SERVER_FREE_AT.with(|c| {
            let start = c.get().max(arrives);
            c.set(start + self.service_us);
            start
        });
        let out = f(&mut lock(keys), start);
        exec::sleep_until(start + self.service_us + (rtt - there)).await;
        out
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

/// The virtual clock's [`Pacer`].
pub(crate) struct SimPacer {
    /// Section rows for `events.csv` (`None`: not written).
    pub events: Option<mpsc::Sender<EventRow>>,
    /// How late a timer fires (ms), as a real runtime's timer does (`None`: on time).
    pub timer: Option<Sampler>,
}

impl SimPacer {
    fn late_us(&self) -> u64 {
        self.timer.as_ref().map_or(0, |t| {
            NET_RNG.with(|r| crate::model::units::ms_to_us(t.sample_ms(&mut *r.borrow_mut())))
        })
    }
}

/// Sleeps until `t_us`, or until the cut if that comes first (then the run stops: `false`).
async fn sleep_or_cut(t_us: u64) -> bool {
    if HALT.with(Cell::get) != Halt::Run {
        return false;
    }
    let cut = CUT_US.with(Cell::get);
    if t_us >= cut {
        exec::sleep_until(cut).await;
        halt(Halt::Stop);
        return false;
    }
    exec::sleep_until(t_us).await;
    HALT.with(Cell::get) == Halt::Run
}

impl Pacer for SimPacer {
    fn halt(&self) -> Halt {
        HALT.with(Cell::get)
    }

    fn sleep_until(&mut self, t_us: u64) -> impl Future<Output = bool> + Send {
        sleep_or_cut(t_us + self.late_us())
    }

    fn sleep_until_precise(&mut self, t_us: u64) -> impl Future<Output = bool> + Send {
        sleep_or_cut(t_us + self.late_us())
    }

    fn yield_now(&mut self) -> impl Future<Output = ()> + Send {
        exec::yield_now()
    }

    fn command<T: Send>(
        &mut self,
        command: impl Future<Output = CmdResult<T>> + Send,
    ) -> impl Future<Output = CmdResult<T>> + Send {
        command
    }

    async fn next_arrival(&mut self) -> Option<u64> {
        loop {
            if let Some(a) = ARRIVALS.with(|q| q.borrow_mut().pop_front()) {
                return Some(a);
            }
            if ARRIVALS_DONE.with(Cell::get) || HALT.with(Cell::get) != Halt::Run {
                return None;
            }
            let me = exec::current();
            IDLE.with(|i| i.borrow_mut().push(me));
            exec::Park::default().await;
            // Woken as the next arrival's holder (at its instant), or for the backlog.
            if let Some(at) = take_held(me) {
                return arrival_due(|| ()).then_some(at);
            }
        }
    }

    fn will_record(&mut self, rec: &crate::engine::recorder::Recorder, key: usize) {
        exec::hint(rec.key_line(key));
    }

    /// Sent at once (no future holding the row in every worker's state).
    fn row(&mut self, row: EventRow) -> impl Future<Output = ()> + Send {
        if let Some(tx) = &self.events {
            // The simulation runs on its own thread, outside the runtime: blocking is allowed,
            // and a full channel holds the virtual clock, not the rows.
            let _ = tx.blocking_send(row);
        }
        std::future::ready(())
    }
}

/// An arrival at `at_us` (now): queued for a slot, an idle slot woken; `false` when the
/// backlog is full (the arrival is dropped).
pub(crate) fn arrive(at_us: u64, backlog: usize) -> bool {
    let queued = ARRIVALS.with(|q| {
        let mut q = q.borrow_mut();
        if q.len() >= backlog {
            return false;
        }
        q.push_back(at_us);
        true
    });
    if queued && let Some(slot) = IDLE.with(|i| i.borrow_mut().pop()) {
        exec::wake(slot, exec::now_us());
    }
    queued
}

/// No more arrivals: every idle slot is woken to end.
pub(crate) fn arrivals_done() {
    ARRIVALS_DONE.with(|d| d.set(true));
    for slot in IDLE.with(|i| std::mem::take(&mut *i.borrow_mut())) {
        exec::wake(slot, exec::now_us());
    }
}

/// What a simulated variant did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Simulated {
    /// The executor's events (task polls) and the virtual instant of the last.
    pub ran: exec::Ran,
    /// Wall time the simulation took, s.
    pub wall_s: f64,
}

/// Runs the workers of one variant (and the open model's arrivals) to the end on a virtual
/// clock, on a thread of their own. `clock` is the recorder's virtual clock; the collector's
/// intervals end every `log_every_us` of virtual time, when `on_tick` is called too (it may
/// raise the run's halt: Ctrl-C).
pub(crate) fn run_workers<C: crate::store::LockConn>(
    conns: Vec<C>,
    ctx: &std::sync::Arc<crate::engine::context::WorkerCtx>,
    plan: &crate::profile::Plan,
    clock: &std::sync::Arc<std::sync::atomic::AtomicU64>,
    events: Option<mpsc::Sender<EventRow>>,
    (collector, log_every_us): (&crate::engine::collector::Collector, u64),
    on_tick: impl FnMut(u64) -> Option<Halt> + Send,
) -> anyhow::Result<Simulated> {
    let cut_us = plan
        .run_time()
        .map(|d| (d + crate::engine::end_grace(plan.workload.ttl_ms)).as_micros() as u64);
    let length_us = plan.run_time().unwrap_or_default().as_micros() as u64;
    let mut on_tick = on_tick;
    let t0 = std::time::Instant::now();
    let ran = std::thread::scope(|s| {
        s.spawn(move || {
            reset(plan.seed, cut_us);
            let mut tasks: Vec<exec::Task> = Vec::with_capacity(conns.len() + 1);
            for (id, conn) in conns.into_iter().enumerate() {
                let pacer = SimPacer {
                    events: events.clone(),
                    timer: plan.sim.sim_timer.clone(),
                };
                tasks.push(Box::pin(crate::engine::worker::run_worker(
                    id,
                    conn,
                    ctx.clone(),
                    pacer,
                    None,
                )));
            }
            if let Some(arrivals) = plan.workload.arrivals {
                let feeder = tasks.len() as u32;
                FEED.with(|f| {
                    *f.borrow_mut() = Feed {
                        schedule: Some(arrivals.schedule(length_us, ctx.seed)),
                        held: vec![Feed::NONE; tasks.len() + 1],
                        feeder,
                        counts: Some(ctx.recorder.clone()),
                    }
                });
                // The feed task hands out the first arrival (the slots, polled before it, are
                // idle), and holds every arrival that comes while no slot is idle: it queues
                // them for the next free slot — before handing the next one on, so that a slot
                // idle since is woken for this one.
                tasks.push(Box::pin(async move {
                    hand_on();
                    loop {
                        exec::Park::default().await;
                        let Some(at) = take_held(feeder) else {
                            continue;
                        };
                        let queue = || {
                            if !arrive(at, crate::engine::ARRIVAL_BACKLOG) {
                                count(|c| &c.dropped_arrivals);
                            }
                        };
                        if !arrival_due(queue) {
                            return;
                        }
                    }
                }));
            }
            let ticker = collector.ticker();
            exec::run(tasks, clock, log_every_us, |t| {
                ticker.tick(std::time::Duration::from_micros(t));
                if let Some(h) = on_tick(t) {
                    halt(h);
                }
                true
            })
        })
        .join()
    })
    .map_err(|_| anyhow::anyhow!("the simulation panicked"))?;
    Ok(Simulated {
        ran,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// The windows of a simulated variant's fault schedule, as scheduled (only holder crashes can
/// be simulated: they are the workers' part), clipped to its end at `end_us`; a window that
/// begins after it is recorded as not reached.
pub(crate) fn fault_windows(
    faults: &[crate::model::fault::Fault],
    end_us: u64,
) -> Vec<crate::model::fault::FaultWindow> {
    faults
        .iter()
        .map(|f| {
            let detail = crate::faults::detail(f);
            if f.at_us >= end_us {
                return crate::model::fault::FaultWindow::not_reached(f, detail);
            }
            let ms = |us: u64| us as f64 / 1000.0;
            crate::model::fault::FaultWindow::of(
                f.kind,
                ms(f.at_us),
                ms(f.end_us().min(end_us)),
                detail,
            )
        })
        .collect()
}

/// The network and timer a real run measured, for simulating the same profile
/// (`sim_from = "DIR"`): every command round trip of a release (`release_latency_us`), and
/// every section's timer lateness (its duration beyond the intended one, pauses aside), read
/// from `DIR/events.csv`, as empirical distributions.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// Round trips.
    pub rtt: crate::dist::Dist,
    /// How many.
    pub rtt_n: usize,
    /// Timer lateness.
    pub timer: crate::dist::Dist,
    /// How many.
    pub timer_n: usize,
}

/// Reads [`Measured`] from a real run's directory.
pub(crate) fn measured(dir: &std::path::Path) -> anyhow::Result<Measured> {
    let path = dir.join("events.csv");
    if !path.is_file() {
        anyhow::bail!(
            "{} has no events.csv: give the directory of a real run (results/<run-id>/) made with events = \"all\"",
            dir.display()
        );
    }
    let (mut rtt, mut timer) = (Vec::new(), Vec::new());
    crate::results::events::for_each_event(&path, |r| {
        // A release that was answered: its round trip.
        if r.outcome.release().is_some() {
            rtt.push(r.release_latency_us as f64 / 1000.0);
        }
        if let Some(late) = r.timer_error_us() {
            timer.push(late as f64 / 1000.0);
        }
    })?;
    if rtt.is_empty() || timer.is_empty() {
        anyhow::bail!("{} has no completed section to measure", path.display());
    }
    let empirical = |mut v: Vec<f64>, column: &str| {
        v.sort_by(f64::total_cmp);
        crate::dist::Dist::Empirical(crate::dist::Empirical {
            file: path.display().to_string(),
            column: column.to_string(),
            unit: crate::inputs::Unit::Us,
            scale: 1.0,
            values: Some(std::sync::Arc::new(v)),
        })
    };
    Ok(Measured {
        rtt_n: rtt.len(),
        timer_n: timer.len(),
        rtt: empirical(rtt, "release_latency_us"),
        timer: empirical(timer, "duration_us - intended_us"),
    })
}
