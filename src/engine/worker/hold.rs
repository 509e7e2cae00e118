//! A section while its lock is held: the resource read, the work for the sampled duration,
//! the holder's pauses and crashes, the watchdog's lease extensions, and the write to the
//! protected resource.

use super::{Section, Worker, counted};
use crate::engine::context::Extend;
use crate::engine::pacer::Pacer;
use crate::model::fault::FaultKind;
use crate::model::fault::PauseAt;
use crate::model::variant::Fencing;
use crate::profile::OnLost;
use crate::store::LockConn;
use crate::store::extend_by;
use crate::store::{ReadOutcome, WriteOutcome};
use rand::RngExt;

impl<C: LockConn, P: Pacer> Worker<C, P> {
    /// Hold: read the resource, then work for the sampled duration (measured from the
    /// acquire reply) while the watchdog re-arms the lock. A pause stops both, as a GC pause
    /// or a VM stall freezes a whole process: the work resumes after it, and a watchdog tick
    /// that fell due during it fires late.
    /// The section is the caller's (`s`, fresh from [`Section::new`]), not this future's: one
    /// copy of it in the worker's state, not one per step.
    pub(super) async fn hold(&mut self, s: &mut Section) {
        let ctx = self.ctx.clone();
        let rec = &ctx.recorder;
        let intended_us = crate::model::units::ms_to_us(ctx.dist.sample_ms(&mut self.st.durations));
        s.intended_us = intended_us;
        let key = s.held.key;
        self.read_resource(s).await;
        // Instants in µs since time zero.
        let start = s.held.acquired_us;
        let mut end_at = start + intended_us;
        let (pause_us, mut pause_at) = self.draw_pause(start, intended_us);
        let mut next_extend = ctx
            .extend
            .filter(|_| !s.held.unlocked)
            .map(|e| start + e.every_us);
        let crash_at = self.draw_crash(s, intended_us);
        self.pacer.will_record(rec, key);
        // How late the harness's last wake-up was: the timer error, when the section ends on
        // it. Time spent in commands (the read, an extension) is the server's, not lateness:
        // a wait that begins after its due time is not late.
        let mut late_us = 0;
        loop {
            let next = [Some(end_at), pause_at, next_extend, crash_at]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end_at);
            // Only the section's end needs precision; pauses, ticks and crashes do not.
            let before = rec.now_us();
            let now = if next <= before {
                before
            } else {
                let slept = if next == end_at {
                    self.pacer.sleep_until_precise(next).await
                } else {
                    self.pacer.sleep_until(next).await
                };
                if !slept {
                    s.completed = false;
                    break;
                }
                let now = rec.now_us();
                late_us = now - next;
                now
            };
            s.late_us = late_us;
            if crash_at.is_some_and(|c| c <= now) {
                s.crashed = true;
                break;
            }
            if let Some(p) = pause_at
                && p <= now
            {
                pause_at = None;
                let d = pause_us;
                if !self.pause_holder(now, d).await {
                    s.completed = false;
                    break;
                }
                late_us = rec.now_us().saturating_sub(now + d);
                s.pause_us = pause_us;
                end_at += d;
                continue;
            }
            if let (Some(e), Some(n)) = (ctx.extend, next_extend)
                && n <= now
            {
                late_us = 0;
                match self.extend_lease(s, e, now).await {
                    Some(next) => next_extend = next,
                    None => {
                        s.aborted = true;
                        break;
                    }
                }
                continue;
            }
            if end_at <= now {
                break;
            }
        }
    }

    /// The resource's read at the start of the section (with the fence when it is checked on
    /// read and write): its value, or what kept it from being read.
    async fn read_resource(&mut self, s: &mut Section) {
        let ctx = self.ctx.clone();
        let rec = &ctx.recorder;
        let Some(r) = &ctx.resource else {
            return;
        };
        let register = (r.fencing == Fencing::ReadWrite).then_some(s.held.fence);
        let read = self.conn.resource_read(&r.res_keys[s.held.key], register);
        let reply = counted(&ctx.recorder, &mut self.pacer, read).await;
        if reply.is_ok() {
            rec.ok();
        }
        (s.value, s.read) = match reply {
            Ok(ReadOutcome::Value(v)) => (Some(v), "value"),
            Ok(ReadOutcome::Fenced { .. }) => (None, "fenced"),
            Err(e) => {
                rec.error(&e);
                (None, "error")
            }
        };
    }

    /// This section's pause, when the variant pauses holders: its length, µs, and when it
    /// strikes (µs since time zero) in a section of `intended_us` from `start`.
    fn draw_pause(&mut self, start: u64, intended_us: u64) -> (u64, Option<u64>) {
        let ctx = self.ctx.clone();
        let pause_us = ctx.pause.as_ref().map_or(0, |p| {
            crate::model::units::ms_to_us(p.length.sample_ms(&mut self.st.pauses))
        });
        let pause_at = match ctx.pause.as_ref() {
            Some(p) if pause_us > 0 => Some(match p.at {
                PauseAt::Random => {
                    let f: f64 = self.st.pauses.random();
                    start + (intended_us as f64 * f) as u64
                }
                PauseAt::BeforeWrite => start + intended_us,
            }),
            _ => None,
        };
        (pause_us, pause_at)
    }

    /// When the holder dies, if it does: at once (`crash_between`), or within a holder-crash
    /// window covering the acquisition, at a uniformly random point of its work.
    fn draw_crash(&mut self, s: &mut Section, intended_us: u64) -> Option<u64> {
        let start = s.held.acquired_us;
        if s.held.crash_now {
            return Some(start);
        }
        let ctx = self.ctx.clone();
        let window = ctx
            .crashes
            .iter()
            .find(|f| f.kind == FaultKind::HolderCrash && f.covers(s.held.acquired_us));
        match window {
            Some(f) if self.st.crashes.random::<f64>() < f.probability => {
                s.restart_us = f.restart_us;
                let at: f64 = self.st.crashes.random();
                Some(start + (intended_us as f64 * at) as u64)
            }
            _ => None,
        }
    }

    /// Stops the holder for `d` µs from `now`; `false` when the run stopped during the pause.
    /// A lock library's holder stops whole, its renewal threads and timers too, as a GC pause
    /// or a stalled VM stops a process.
    async fn pause_holder(&mut self, now: u64, d: u64) -> bool {
        if let Some(lib) = &self.lib {
            lib.driver.freeze(true).await;
        }
        let slept = self.pacer.sleep_until(now + d).await;
        if let Some(lib) = &self.lib {
            lib.driver.freeze(false).await;
        }
        slept
    }

    /// One watchdog tick at `now`: re-arms the lock. The next tick (`Some(None)`: no more,
    /// the lock is gone), or `None` when the holder aborts on finding its lock gone.
    async fn extend_lease(&mut self, s: &mut Section, e: Extend, now: u64) -> Option<Option<u64>> {
        let ctx = self.ctx.clone();
        let rec = &ctx.recorder;
        let sent_us = rec.now_us();
        let (token, script) = (&s.held.token, ctx.extend_script());
        let ext = extend_by(
            &mut self.conn,
            e.with,
            script,
            &s.held.name,
            token,
            ctx.ttl_ms,
        );
        Some(match counted(&ctx.recorder, &mut self.pacer, ext).await {
            Ok(true) => {
                rec.ok();
                s.extensions += 1;
                s.held.lock_until_us = Some(sent_us + ctx.ttl_ms * 1000);
                Some(now + e.every_us)
            }
            Ok(false) => {
                rec.ok();
                s.extension_failed = true;
                if e.on_lost == OnLost::Abort {
                    return None;
                }
                None
            }
            Err(err) => {
                rec.error(&err);
                ctx.note_script_error(&err);
                Some(now + e.every_us)
            }
        })
    }

    /// Write `value + 1` right before releasing (read-modify-write across the section), with
    /// the fence when the variant fences. The server says whether the writer still held the
    /// lock at that instant, when the resource is on the lock's server.
    pub(super) async fn write(&mut self, s: &mut Section) {
        if self.ctx.resource.is_none() {
            return;
        }
        let ctx = self.ctx.clone();
        let Some(r) = &ctx.resource else {
            return;
        };
        let value = match s.value {
            Some(v) if !s.aborted => v,
            _ => {
                s.write = "skipped";
                return;
            }
        };
        let key = s.held.key;
        let fence = (r.fencing != Fencing::Off).then_some(s.held.fence);
        let write = self.conn.resource_write(
            &r.res_keys[key],
            &s.held.name,
            &s.held.token,
            fence,
            value + 1,
        );
        let reply = counted(&ctx.recorder, &mut self.pacer, write).await;
        if reply.is_ok() {
            ctx.recorder.ok();
        }
        s.write = match reply {
            Ok(WriteOutcome::Accepted { holder: true, .. }) => "accepted",
            // The writer had lost the lock and another holder had it: the damage case.
            Ok(WriteOutcome::Accepted {
                other_holder: true, ..
            }) => "unsafe_over_holder",
            // The writer's lock was gone and nobody held it.
            Ok(WriteOutcome::Accepted { .. }) => "unsafe",
            // A resource apart from the lock: the run's own timeline tells. A newer holder in
            // now (one that acquired after the writer, so once its lock was gone) is the
            // damage case; past the writer's lock expiry (from the SET's send: the earliest
            // the server can have expired it) with nobody newer in, the lock was gone.
            Ok(WriteOutcome::Written) => {
                let now = ctx.recorder.now_us();
                if ctx.recorder.newer_holder(key, s.held.opened_us) {
                    "unsafe_over_holder"
                } else if s.held.lock_until_us.is_some_and(|until| now >= until) {
                    "unsafe"
                } else {
                    "accepted"
                }
            }
            Ok(WriteOutcome::Fenced { .. }) => "fenced",
            Err(e) => {
                ctx.recorder.error(&e);
                "error"
            }
        };
    }
}
