//! A worker whose locks a lock library takes and releases, through its driver process: the
//! acquisition and the release of [`Worker`] for a library's variant.

use super::{Held, Worker, busy};
use crate::client::driver::{DriverError, Entered, Recipe, error_kind};
use crate::client::holder::Holder;
use crate::engine::pacer::Pacer;
use crate::faults::attribution::Removed;
use crate::faults::watch::Watch;
use crate::model::error::{CmdError, ErrorKind};
use crate::model::release::ReleaseOutcome::*;
use crate::record::{Metric, SectionOutcome};
use crate::store::LockConn;
use rand::RngExt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// A worker's lock library: its holder (a driver process, or rslock in process), the section
/// it holds open, how to start the holder again after a crash, and the holder's watches
/// between the library and its servers (closed with it).
pub(crate) struct Library {
    pub(super) driver: Holder,
    open: Option<u64>,
    recipe: Arc<Recipe>,
    holder: usize,
    /// Kept for their lifetime: dropping one closes its connections.
    _watches: Vec<Watch>,
    /// The section just left: when the driver read the `leave` (its stamp, µs on the run's
    /// clock), the section's end; `None` without a stamp.
    pub(super) left_us: Option<u64>,
}

impl Library {
    /// Holder `holder`'s library, through `driver`, started by `recipe` (whose servers are
    /// `watches`' addresses when the holder is watched).
    pub(crate) fn new(
        driver: Holder,
        recipe: Arc<Recipe>,
        holder: usize,
        watches: Vec<Watch>,
    ) -> Self {
        Self {
            driver,
            open: None,
            recipe,
            holder,
            _watches: watches,
            left_us: None,
        }
    }

    /// The holder's process crashes mid-section: SIGKILL (its lock is neither released nor
    /// renewed again), then a new process is started and greeted, as a supervisor restarts a
    /// crashed service.
    pub(super) async fn crash_and_restart(&mut self) -> Result<(), DriverError> {
        self.open = None;
        self.driver.kill_now().await;
        let fresh = Holder::start(&self.recipe, self.holder).await?;
        // The dead process, reaped.
        std::mem::replace(&mut self.driver, fresh).kill().await;
        Ok(())
    }

    /// The holder (its library's name, key format, renewal).
    pub(crate) fn holder(&self) -> &Holder {
        &self.driver
    }

    /// Says goodbye to the driver process; what its tap saw of the holder's last releases
    /// goes to `ledger`.
    pub(crate) async fn close(self, ledger: Option<&crate::faults::attribution::Ledger>) {
        let seen = self.driver.bye().await;
        if let Some(ledger) = ledger {
            ledger.tapped(self.holder, &seen);
        }
    }
}

impl<C: LockConn, P: Pacer> Worker<C, P> {
    /// Acquire through the lock library: one `section` of its driver, the library's own idiom
    /// with its own retries within the wait budget. The section opens when the library's acquire
    /// returned, by the driver's stamp mapped onto lockbench's clock ([`crate::client::clock`]),
    /// or, from a driver without stamps, when its `held` line arrives. A driver that fails (a
    /// stamp outside the request and its reply included) stops the variant.
    pub(super) async fn acquire_by_library(
        &mut self,
        key: usize,
        since_us: Option<u64>,
    ) -> Option<Held> {
        let ctx = self.ctx.clone();
        let rec = &ctx.recorder;
        let counts = &rec.counters.counts;
        let client = ctx.client.as_ref()?;
        let mut name = std::mem::take(&mut self.name_buf);
        ctx.key_names.write(key, &mut name);
        self.pacer.will_record(rec, key);
        counts.attempts.fetch_add(1, Relaxed);
        counts.commands.fetch_add(1, Relaxed);
        let set_sent_us = rec.now_us();
        let first_attempt_us = since_us.unwrap_or(set_sent_us);
        let lib = self.lib.as_mut()?;
        // An interrupted run (Ctrl-C, SIGTERM) does not wait for an acquisition the library may
        // spend its whole wait budget on, or a driver that hangs: the holder's process is
        // stopped (a lock it may still take expires with its TTL; the cleanup removes it). At
        // the run's own end the reply is awaited: a driver that hangs is found by its patience.
        // Once the run's end has stopped the workers, a later Ctrl-C is looked for every
        // 100 ms (the stop's wake-up comes once).
        let outcome = {
            let mut section = Box::pin(lib.driver.section(&name, ctx.ttl_ms, client.wait_ms));
            let mut halted = false;
            loop {
                tokio::select! {
                    r = &mut section => break Some(r),
                    // A halted pacer's wait returns at once: after the stop, the real clock's
                    // (a library runs only in real time).
                    () = self.pacer.until_halt(), if !halted => halted = true,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(100)), if halted => {}
                }
                if halted && client.interrupted.load(Relaxed) {
                    break None;
                }
            }
        };
        let Some(entered) = outcome else {
            lib.driver.kill_now().await;
            rec.error(&CmdError {
                kind: ErrorKind::Abandoned,
                detail: format!(
                    "the run stopped while {} was acquiring: its driver was stopped",
                    client.name
                ),
            });
            self.name_buf = name;
            return None;
        };
        let replied_us = rec.now_us();
        let (id, token, held_at, seen) = match entered {
            Err(e) => {
                client.fail(e.to_string());
                self.name_buf = name;
                return None;
            }
            Ok(Entered::Held {
                id,
                token,
                held_at,
                seen,
            }) => (id, token, held_at, seen),
            Ok(Entered::NotAcquired {
                outcome,
                error,
                kind,
            }) => {
                self.name_buf = name;
                match outcome.as_str() {
                    "timeout" => counts.acquire_giveups.fetch_add(1, Relaxed),
                    "fail" => counts.rejections.fetch_add(1, Relaxed),
                    _ => {
                        rec.error(&CmdError {
                            kind: error_kind(kind.as_deref()),
                            detail: format!(
                                "{}'s acquire: {}",
                                client.name,
                                error.unwrap_or_else(|| outcome.clone())
                            ),
                        });
                        let pause = busy::after_error(self.failures, &mut self.st.jitter);
                        self.failures = self.failures.saturating_add(1);
                        self.pause_us(pause).await;
                        return None;
                    }
                };
                return None;
            }
        };
        // The lock was held when the library's acquire returned (the driver's stamp), which
        // on a loaded machine is long before its `held` line arrives; a driver without stamps
        // is timed on the arrival. (Kept within the request and the arrival: the stamp lies
        // there up to the anchor's slack.)
        let held_us = match held_at {
            Some(at) => rec.us_at(at).clamp(set_sent_us, replied_us),
            None => replied_us,
        };
        rec.record(
            self.id,
            Metric::SetLatency,
            held_us.saturating_sub(set_sent_us),
        );
        rec.ok();
        self.failures = 0;
        lib.open = Some(id);
        client.to_lock_key(&mut name);
        // What the driver's tap saw (the lock's `SET`), and a token the library reports (a
        // script's acquire neither the tap nor the watch can read), are the holder's values.
        // (The drivers do not repeat a token's `SET`, and the ledger keeps a value once.)
        if let Some(ledger) = &client.ledger {
            ledger.tapped(lib.holder, &seen);
            if let Some(t) = &token {
                ledger.set(lib.holder, &name, t.as_bytes());
            }
        }
        // The tracker opens it in arrival order (at the stamp, or just after the key's last
        // event); the row has the stamp, and the summary's overlap the rows' intervals.
        let (opened_us, holders_at_start) = rec.open_section(key, true, held_us);
        let acquired_us = if held_at.is_some() {
            held_us
        } else {
            opened_us
        };
        Some(Held {
            key,
            name,
            token: token.unwrap_or_default(),
            first_attempt_us,
            set_sent_us,
            acquired_us,
            opened_us,
            attempts: 1,
            holders_at_start,
            fence: 0,
            unlocked: false,
            // The holder dies right after acquiring, as with lockbench's own lock.
            crash_now: ctx.crash_between > 0.0
                && self.st.crashes.random::<f64>() < ctx.crash_between,
            // A library that renews its locks keeps them past the TTL. One that retried within
            // its wait budget set the key with its last SET, which went out at most a round
            // trip before its reply: the expiry is counted from the reply, as the driver
            // stamped it (from the request, a lock taken after a second of retries would expire
            // a second early).
            lock_until_us: (!client.auto_renewal).then_some(held_us + ctx.ttl_ms * 1000),
        })
    }

    /// Leave the library's section (of the lock written under `key`): the library releases,
    /// and says how it went. Where the holder is watched, the server says what it deleted
    /// ([`Removed`]): its own lock (released), another holder's or a value no holder set
    /// (a wrongful delete, attributed in the ledger), or nothing; a library that sent no `DEL`
    /// (a compare-and-delete script) deleted no other's lock. Otherwise the timeline tells:
    /// `ok` while a newer section of the key was open as the leave was sent (`others`) removed
    /// that holder's lock — its holder could only acquire once ours was gone, so a
    /// compare-and-delete would have refused: only a plain `DEL` deletes it; `ok` without a
    /// `DEL` sent (redis-lock past its own deadline) deleted nothing.
    ///
    /// A release the library does not report (rslock's `unlock`, a compare-and-delete) is
    /// classified from the timeline: refused if a newer holder was in or the TTL had run out
    /// on lockbench's clock (`expired`) as it was sent, released otherwise.
    pub(super) async fn release_by_library(
        &mut self,
        others: bool,
        expired: bool,
        key: &str,
    ) -> SectionOutcome {
        let ctx = self.ctx.clone();
        let rec = &ctx.recorder;
        let Some(client) = ctx.client.as_ref() else {
            return SectionOutcome::ReleaseFailed(ErrorKind::Other);
        };
        let Some(lib) = self.lib.as_mut() else {
            return SectionOutcome::ReleaseFailed(ErrorKind::Other);
        };
        let Some(id) = lib.open.take() else {
            return SectionOutcome::ReleaseFailed(ErrorKind::Other);
        };
        rec.counters.counts.commands.fetch_add(1, Relaxed);
        let left = match lib.driver.leave(id).await {
            Ok(l) => l,
            Err(e) => {
                client.fail(e.to_string());
                return SectionOutcome::ReleaseFailed(ErrorKind::Other);
            }
        };
        self.lib_events = (left.extended, left.lost);
        // The driver read the `leave` after lockbench wrote it; the lock was held until then.
        lib.left_us = left.leave_at.map(|at| rec.us_at(at));
        // The watch noted the removal before the library had its reply; the driver's tap
        // tells it on the reply.
        let removed = client.ledger.as_ref().map(|l| {
            l.tapped(lib.holder, &left.seen);
            l.release(lib.holder, key)
        });
        let no_del = left
            .detail
            .as_deref()
            .is_some_and(|d| d.starts_with("no DEL"));
        let unreported = left.detail.as_deref() == Some(crate::client::rslock::UNREPORTED);
        match left.outcome.as_str() {
            "ok" | "not_owned" | "lost" => {
                rec.ok();
                SectionOutcome::Release(match (removed, left.outcome.as_str()) {
                    (Some(Some(Removed::Other(_) | Removed::Unknown)), _) => WrongfulDelete,
                    (Some(Some(Removed::Own)), _) => Released,
                    (Some(Some(Removed::Nothing)), _) => NothingDeleted,
                    (_, "ok") if no_del => NothingDeleted,
                    (_, "ok") if unreported && others => RefusedHeldByOther,
                    (_, "ok") if unreported && expired => RefusedExpired,
                    // Watched, and no `DEL` removed anything: the library's compare-and-delete
                    // script ran, and with a newer holder in it refused.
                    (Some(None), "ok") if others => RefusedHeldByOther,
                    (None, "ok") if others => WrongfulDelete,
                    (_, "ok") => Released,
                    _ => RefusedUnclassified,
                })
            }
            other => {
                let kind = error_kind(left.kind.as_deref());
                rec.error(&CmdError {
                    kind,
                    detail: format!(
                        "{}'s release: {}",
                        client.name,
                        left.error.unwrap_or_else(|| other.to_string())
                    ),
                });
                SectionOutcome::ReleaseFailed(kind)
            }
        }
    }
}
