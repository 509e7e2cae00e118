//! The one worker loop: attempt → section → release → think, with the busy policy and the
//! release method plugged in.
//!
//! Each worker owns independent seeded random streams (durations, think time, key choice,
//! backoff jitter, tokens), so the n-th section of worker *w* gets the same intended duration
//! whatever the release method, busy replies or timing: that is what makes `compare` paired.

use crate::analysis::counts::Counts;
use crate::engine::busy::{self, AfterBusy};
use crate::engine::context::WorkerCtx;
use crate::engine::keys::{push_decimal, push_hex16};
use crate::engine::pacer::Halt;
use crate::engine::pacer::Pacer;
use crate::engine::recorder::Recorder;
use crate::engine::streams::Streams;
use crate::model::error::{CmdResult, ErrorKind};
use crate::model::release::StaleRule;
use crate::model::variant::Fencing;
use crate::profile::{Acquire, OnUnavailable};
use crate::record::SectionOutcome;
use crate::record::{EventRow, Metric};
use crate::store::LockConn;
use crate::store::release;
use rand::RngExt;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

mod acquire;
mod hold;
mod library;

pub(crate) use library::Library;

/// Awaits a command's reply through the pacer (unless the run is abandoned first: then an
/// `abandoned` error, so its section still gets its row). Not an `async fn`: that would be one
/// more future holding its own copy of `command` in every worker's state.
fn counted<'a, T: Send + 'a>(
    rec: &Recorder,
    pacer: &'a mut impl Pacer,
    command: impl std::future::Future<Output = CmdResult<T>> + Send + 'a,
) -> impl std::future::Future<Output = CmdResult<T>> + Send + 'a {
    // Every command a worker sends goes through here: the one place they are counted (as it
    // is sent: the caller awaits the reply at once).
    rec.counters.counts.commands.fetch_add(1, Relaxed);
    pacer.command(command)
}

/// A lock just acquired.
struct Held {
    key: usize,
    /// The key's name.
    name: String,
    token: String,
    /// µs of the section's first attempt, of the successful `SET`'s send, of its reply.
    first_attempt_us: u64,
    set_sent_us: u64,
    acquired_us: u64,
    /// The key's tracker's stamp of this open, which [`Recorder::newer_holder`] compares:
    /// `acquired_us`, but for a library's section whose driver's stamp came after later
    /// events of its key (the tracker opened it just after them).
    ///
    /// [`Recorder::newer_holder`]: crate::engine::recorder::Recorder::newer_holder
    opened_us: u64,
    attempts: u32,
    holders_at_start: u32,
    /// The fence the acquisition returned (0: the variant does not fence).
    fence: u64,
    /// No lock was taken: Redis did not answer and the policy is fail-open.
    unlocked: bool,
    /// The holder dies right after acquiring (`crash_between`).
    crash_now: bool,
    /// When the lock expires at the server, µs (`None`: never — SETNX without its EXPIRE).
    lock_until_us: Option<u64>,
}

/// A section whose work is over (its release is about to be sent).
struct Section {
    held: Held,
    intended_us: u64,
    released_us: u64,
    /// It lasted what it should (not cut short by the run's end).
    completed: bool,
    /// The resource's value as read right after acquiring (`None`: refused, failed or no
    /// resource), and the row's words for the read and the write.
    value: Option<u64>,
    read: &'static str,
    write: &'static str,
    extensions: u32,
    extension_failed: bool,
    aborted: bool,
    pause_us: u64,
    /// How late the wake-up that ended it was, µs (see [`EventRow::late_us`]).
    late_us: u64,
    /// The holder died mid-section: no write, no release.
    crashed: bool,
    /// How long the crashed worker stays away, µs.
    restart_us: u64,
}

impl Section {
    /// A section of `held` about to start (its duration is drawn as it starts).
    fn new(held: Held) -> Self {
        Self {
            held,
            intended_us: 0,
            released_us: 0,
            completed: true,
            value: None,
            read: "",
            write: "",
            extensions: 0,
            extension_failed: false,
            aborted: false,
            pause_us: 0,
            late_us: 0,
            crashed: false,
            restart_us: 0,
        }
    }
}

/// One worker: its connection, random streams and counters, and the steps of a section.
struct Worker<C, P> {
    id: usize,
    conn: C,
    ctx: Arc<WorkerCtx>,
    pacer: P,
    st: Streams,
    seq: u64,
    token_seq: u64,
    /// A spare token string and key name string (a finished section's).
    token_buf: String,
    name_buf: String,
    /// Consecutive failed acquisitions (the pause after one grows with it).
    failures: u32,
    /// A lock library's driver, which takes and releases this worker's locks.
    lib: Option<Box<Library>>,
    /// The library's `extended` and `lost` events of the section just left.
    lib_events: (u32, u32),
}

impl<C: LockConn, P: Pacer> Worker<C, P> {
    fn may_start(&self) -> bool {
        !self.ctx.should_stop() && self.pacer.halt() == Halt::Run && self.ctx.reserve()
    }

    /// Acquire: `SET NX PX` until it succeeds or the busy policy says stop. The section's
    /// wait counts from `since_us` (a request's intended arrival) or from now.
    async fn acquire(&mut self, key: usize, since_us: Option<u64>) -> Option<Held> {
        if self.lib.is_some() {
            return self.acquire_by_library(key, since_us).await;
        }
        let ctx = self.ctx.clone();
        let rec = &ctx.recorder;
        let counts = &rec.counters.counts;
        // From the first `SET`'s send unless given (one clock read less per section).
        let mut first_attempt_us = since_us;
        let mut attempts: u32 = 0;
        let mut round: u32 = 0;
        let mut name = std::mem::take(&mut self.name_buf);
        ctx.key_names.write(key, &mut name);
        self.pacer.will_record(rec, key);
        loop {
            self.token_seq += 1;
            // The string of the last section that released, reused: no allocation per section.
            let mut token = std::mem::take(&mut self.token_buf);
            token.clear();
            // `w{id}-{seq}-{random:016x}`, written by hand: once per attempt.
            token.push('w');
            push_decimal(&mut token, self.id as u64);
            token.push('-');
            push_decimal(&mut token, self.token_seq);
            token.push('-');
            push_hex16(&mut token, self.st.tokens.random::<u64>());
            attempts += 1;
            counts.attempts.fetch_add(1, Relaxed);
            let set_sent_us = rec.now_us();
            let first_attempt_us = *first_attempt_us.get_or_insert(set_sent_us);
            let lock = name.as_str();
            // `Some(fence)` acquired (fence 0 when the variant does not fence).
            let reply = match &ctx.resource {
                Some(r) if r.fencing != Fencing::Off => {
                    // Read-write fencing registers the fence as the lock is taken.
                    let register =
                        (r.fencing == Fencing::ReadWrite).then_some(r.res_keys[key].as_str());
                    let set = self.conn.set_nx_px_fenced(
                        lock,
                        &r.fence_keys[key],
                        register,
                        &token,
                        ctx.ttl_ms,
                    );
                    counted(&ctx.recorder, &mut self.pacer, set).await
                }
                _ if ctx.acquire == Acquire::SetnxExpire => self.setnx_expire(lock, &token).await,
                _ if ctx.acquire_script().is_some() => self.acquire_by_script(lock, &token).await,
                _ => {
                    let set = self.conn.set_nx_px(lock, &token, ctx.ttl_ms);
                    counted(&ctx.recorder, &mut self.pacer, set)
                        .await
                        .map(|ok| ok.then_some(0))
                }
            };
            let replied_us = rec.now_us();
            let set_latency = replied_us.saturating_sub(set_sent_us);
            rec.record(self.id, Metric::SetLatency, set_latency);
            if reply.is_ok() {
                rec.ok();
                self.failures = 0;
            }
            let wait_us = match reply {
                Ok(Some(fence)) => {
                    let (acquired_us, holders_at_start) = rec.open_section(key, true, replied_us);
                    let crash_now = ctx.crash_between > 0.0
                        && self.st.crashes.random::<f64>() < ctx.crash_between;
                    // SETNX whose holder died before its PEXPIRE: the key never expires.
                    let never_expires = crash_now && ctx.acquire == Acquire::SetnxExpire;
                    return Some(Held {
                        key,
                        name,
                        token,
                        first_attempt_us,
                        set_sent_us,
                        acquired_us,
                        opened_us: acquired_us,
                        attempts,
                        holders_at_start,
                        fence,
                        unlocked: false,
                        crash_now,
                        lock_until_us: (!never_expires).then_some(set_sent_us + ctx.ttl_ms * 1000),
                    });
                }
                Ok(None) => {
                    let waited = replied_us.saturating_sub(first_attempt_us);
                    match busy::after_busy(ctx.busy, round, waited, &mut self.st.jitter) {
                        AfterBusy::Reject => {
                            counts.rejections.fetch_add(1, Relaxed);
                            return None;
                        }
                        AfterBusy::GiveUp => {
                            counts.acquire_giveups.fetch_add(1, Relaxed);
                            return None;
                        }
                        AfterBusy::Retry(wait_us) => {
                            counts.retries.fetch_add(1, Relaxed);
                            round += 1;
                            wait_us
                        }
                    }
                }
                Err(e) => {
                    rec.error(&e);
                    if matches!(e.kind, ErrorKind::Connection | ErrorKind::Timeout) {
                        match ctx.on_unavailable {
                            // The article's service: no lock, the work goes ahead.
                            OnUnavailable::FailOpen => {
                                let (acquired_us, holders_at_start) =
                                    rec.open_section(key, false, replied_us);
                                return Some(Held {
                                    key,
                                    name,
                                    token: String::new(),
                                    first_attempt_us,
                                    set_sent_us,
                                    acquired_us,
                                    opened_us: acquired_us,
                                    attempts,
                                    holders_at_start,
                                    fence: 0,
                                    unlocked: true,
                                    crash_now: false,
                                    lock_until_us: None,
                                });
                            }
                            OnUnavailable::FailClosed => {
                                counts.refused_unavailable.fetch_add(1, Relaxed);
                            }
                        }
                    }
                    let pause = busy::after_error(self.failures, &mut self.st.jitter);
                    self.failures = self.failures.saturating_add(1);
                    self.pause_us(pause).await;
                    return None;
                }
            };
            if ctx.should_stop() || !self.pause_us(wait_us).await {
                return None;
            }
        }
    }

    /// Release, then finish the section into one record: its counts (the same function the
    /// report's recount uses), its histogram values and its `events.csv` row, returned for the
    /// caller to send once its own figures are taken (a wait for the writer is no request's).
    async fn release_and_finish(&mut self, section: &mut Section) -> EventRow {
        let ctx = self.ctx.clone();
        let rec = &ctx.recorder;
        // The section ends as its release is sent, or as its holder dies.
        let sent_us = rec.now_us();
        section.released_us = if section.crashed {
            let h = &section.held;
            let ended = rec.crash(self.id, h.key, h.lock_until_us, !h.unlocked, sent_us);
            // The holder's process dies (its section closed first: a restart takes time, and
            // the dead holder holds nothing meanwhile): a library's driver is killed and
            // started again, a worker's own socket closes and opens again.
            if let Some(lib) = self.lib.as_mut() {
                if let Err(e) = lib.crash_and_restart().await
                    && let Some(client) = &ctx.client
                {
                    client.fail(e.to_string());
                }
            } else if ctx.own_connection {
                self.conn.renew_own_socket().await;
            }
            ended
        } else {
            rec.close_section(self.id, section.held.key, sent_us)
        };
        let h = &section.held;
        let outcome = if h.unlocked {
            // No lock was taken: nothing to release.
            SectionOutcome::Unlocked
        } else if section.crashed {
            SectionOutcome::Crashed
        } else if self.lib.is_some() {
            // A newer holder in now means the lock was gone when the release was sent.
            let others = rec.newer_holder(h.key, h.opened_us);
            let expired = h.lock_until_us.is_some_and(|until| sent_us >= until);
            let outcome = self.release_by_library(others, expired, &h.name).await;
            (section.extensions, section.extension_failed) =
                (self.lib_events.0, self.lib_events.1 > 0);
            // From the holder's side the release was sent when its driver read the `leave`
            // (the stamp lies between lockbench's write and the reply): the section ends there.
            // The live tracker closed it as the `leave` went out; the summary's overlap is the
            // recorded intervals' (`Recorder::keep_intervals`).
            if let Some(end) = self.lib.as_mut().and_then(|l| l.left_us.take()) {
                section.released_us = end.clamp(section.released_us, rec.now_us());
            }
            outcome
        } else {
            // A user's script is judged by the timeline (`script::classify_release`).
            // Asked as the deleting command goes out (the last of a release given as commands).
            let newer = || ctx.scripts.is_some() && rec.newer_holder(h.key, h.opened_us);
            let (name, token, ttl) = (&h.name, &h.token, ctx.ttl_ms);
            let script = ctx.release_script();
            let release = release(&mut self.conn, ctx.method, script, name, token, ttl, newer);
            match counted(&ctx.recorder, &mut self.pacer, release).await {
                Ok(o) => {
                    rec.ok();
                    SectionOutcome::Release(o)
                }
                Err(e) => {
                    rec.error(&e);
                    ctx.note_script_error(&e);
                    SectionOutcome::ReleaseFailed(e.kind)
                }
            }
        };
        let release_latency_us = rec.now_us().saturating_sub(sent_us);
        let row = self.finish(section, outcome, release_latency_us);
        self.token_buf = std::mem::take(&mut section.held.token);
        self.name_buf = std::mem::take(&mut section.held.name);
        self.seq += 1;
        row
    }

    /// A released section's row, counted and recorded. (Not in [`Self::release_and_finish`]'s
    /// body: its locals would then take room in every worker's state.)
    fn finish(
        &self,
        section: &Section,
        outcome: SectionOutcome,
        release_latency_us: u64,
    ) -> EventRow {
        let ctx = &*self.ctx;
        let rec = &ctx.recorder;
        let h = &section.held;
        let ttl_us = ctx.ttl_ms * 1000;
        let d = section.released_us - h.acquired_us;
        rec.log_section(h.key, h.acquired_us, section.released_us);
        let row = EventRow {
            variant: ctx.variant.clone(),
            worker: self.id,
            key: h.key,
            seq: self.seq,
            attempt_start_us: h.first_attempt_us,
            set_sent_us: h.set_sent_us,
            acquired_us: h.acquired_us,
            released_us: section.released_us,
            intended_us: section.intended_us,
            duration_us: d,
            ttl_us,
            overrun: d > ttl_us,
            excess_us: d.saturating_sub(ttl_us),
            holders_at_start: h.holders_at_start,
            attempts: h.attempts,
            acquire_latency_us: h.acquired_us.saturating_sub(h.first_attempt_us),
            release_latency_us,
            release: Cow::Borrowed(match &ctx.client {
                Some(c) => c.name,
                None => ctx.method.name(),
            }),
            outcome,
            interrupted: !section.completed,
            fence: h.fence,
            read: Cow::Borrowed(section.read),
            write: Cow::Borrowed(section.write),
            extensions: section.extensions,
            extension_failed: section.extension_failed,
            aborted: section.aborted,
            pause_us: section.pause_us,
            late_us: Some(section.late_us),
        };
        rec.counters
            .counts
            .add(&Counts::of_section(&row, StaleRule::Reply));
        // A fixed array, not a Vec: this runs once per section.
        let mut values = [
            (Metric::Duration, d),
            (Metric::Intended, section.intended_us),
            (Metric::AcquireLatency, row.acquire_latency_us),
            (Metric::ReleaseLatency, release_latency_us),
            (Metric::TimerError, 0),
            (Metric::Excess, 0),
        ];
        // A section without a lock, or whose holder died, sent no release: no release latency.
        let mut n = 4;
        if h.unlocked || section.crashed {
            n = 3;
        }
        // Timer error only of sections that ran their course; a pause is not timer error.
        if let Some(late) = row.timer_error_us() {
            values[n] = (Metric::TimerError, late);
            n += 1;
        }
        if row.overrun {
            values[n] = (Metric::Excess, row.excess_us);
            n += 1;
        }
        rec.record_all(self.id, &values[..n]);
        row
    }

    /// The open arrival model: take the next arrival, serve it as one request (acquire once
    /// or by the busy policy; if acquired, the section), and record its latency from its
    /// intended arrival. Ends when the arrivals end or the run stops.
    async fn serve_arrivals(&mut self) {
        let ctx = self.ctx.clone();
        loop {
            if self.pacer.halt() != Halt::Run {
                return;
            }
            let waiting_since_us = ctx.recorder.now_us();
            let Some(intended_us) = self.pacer.next_arrival().await else {
                return;
            };
            // Within the timer's resolution of its due time is on time.
            if intended_us + 1_000 < waiting_since_us {
                // It waited in the backlog for this slot.
                ctx.recorder
                    .counters
                    .counts
                    .late_arrivals
                    .fetch_add(1, Relaxed);
            }
            let key = ctx.choose_key(&mut self.st.keys);
            ctx.recorder.touch(key);
            let mut row = None;
            if let Some(held) = self.acquire(key, Some(intended_us)).await {
                let mut section = Section::new(held);
                self.hold(&mut section).await;
                if section.crashed {
                    let restart_us = section.restart_us;
                    let row = self.release_and_finish(&mut section).await;
                    self.pacer.row(row).await;
                    self.pause_us(restart_us).await;
                } else {
                    self.write(&mut section).await;
                    row = Some(self.release_and_finish(&mut section).await);
                }
            }
            let rec = &ctx.recorder;
            let latency = rec.now_us().saturating_sub(intended_us);
            rec.record(self.id, Metric::RequestLatency, latency);
            if let Some(row) = row {
                self.pacer.row(row).await;
            }
        }
    }

    /// Think between sections; `false` when the run stops meanwhile.
    async fn think(&mut self) -> bool {
        let think_us = crate::model::units::ms_to_us(self.ctx.think.sample_ms(&mut self.st.think));
        if think_us > 0 {
            self.pause_us(think_us).await
        } else {
            // Let other tasks run between iterations even with zero think time.
            self.pacer.yield_now().await;
            true
        }
    }

    /// Sleeps `us`; `false` when the run stops meanwhile.
    async fn pause_us(&mut self, us: u64) -> bool {
        let until = self.ctx.recorder.now_us() + us;
        self.pacer.sleep_until(until).await
    }
}

/// Runs one worker until the run's end or shutdown: acquire → hold → release and finish →
/// think. Never panics on a Redis error: every failure is counted and the loop goes on.
///
/// Not an `async fn`: the worker is built here and moved into the future, which therefore
/// holds one copy of the connection and the pacer, not the arguments too.
pub(crate) fn run_worker<C: LockConn, P: Pacer>(
    id: usize,
    conn: C,
    ctx: Arc<WorkerCtx>,
    pacer: P,
    lib: Option<Library>,
) -> impl std::future::Future<Output = ()> {
    let mut w = Worker {
        id,
        conn,
        st: Streams::new(ctx.seed, id),
        ctx,
        pacer,
        seq: 0,
        token_seq: 0,
        token_buf: String::new(),
        name_buf: String::new(),
        failures: 0,
        lib: lib.map(Box::new),
        lib_events: (0, 0),
    };
    async move {
        if w.ctx.open_model {
            w.serve_arrivals().await;
        } else {
            w.closed_loop().await;
        }
        if let Some(lib) = w.lib.take() {
            let ledger = w.ctx.client.as_ref().and_then(|c| c.ledger.clone());
            lib.close(ledger.as_deref()).await;
        }
    }
}

impl<C: LockConn, P: Pacer> Worker<C, P> {
    /// The closed loop: sections back to back, with think time between them.
    async fn closed_loop(&mut self) {
        let w = self;
        if let Some((ramp_us, fleet)) = w.ctx.ramp_up {
            let at = (u128::from(ramp_us) * w.id as u128 / fleet.max(1) as u128) as u64;
            if at > 0 && !w.pacer.sleep_until(at).await {
                return;
            }
        }
        while w.may_start() {
            let key = w.ctx.choose_key(&mut w.st.keys);
            w.ctx.recorder.touch(key);
            match w.acquire(key, None).await {
                Some(held) => {
                    let mut section = Section::new(held);
                    w.hold(&mut section).await;
                    if section.crashed {
                        // Dead: no write, no release; back after the restart delay as a new
                        // client.
                        let restart_us = section.restart_us;
                        let row = w.release_and_finish(&mut section).await;
                        w.pacer.row(row).await;
                        if !w.pause_us(restart_us).await {
                            break;
                        }
                        continue;
                    }
                    w.write(&mut section).await;
                    let row = w.release_and_finish(&mut section).await;
                    w.pacer.row(row).await;
                }
                None => w.ctx.unreserve(),
            }
            if !w.think().await {
                break;
            }
        }
    }
}
