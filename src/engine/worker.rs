//! The one worker loop: attempt → section → release → think, with the busy policy and the
//! release method plugged in.
//!
//! Each worker owns independent seeded random streams (durations, think time, key choice,
//! backoff jitter, tokens), so the n-th section of worker *w* gets the same intended duration
//! whatever the release method, busy replies or timing: that is what makes `compare` paired.

use crate::dist::Sampler;
use crate::engine::recorder::{EventRow, Metric, Recorder};
use crate::profile::BusyPolicy;
use crate::release::{ReleaseMethod, ReleaseOutcome, release};
use crate::store::{CmdError, CmdResult, ErrorKind, LockConn};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Everything the workers of one variant share.
pub struct WorkerCtx {
    /// Where results go.
    pub recorder: Arc<Recorder>,
    /// Full key names, index = key number.
    pub key_names: Vec<String>,
    /// Fraction of attempts aimed at key 0.
    pub hot_key: Option<f64>,
    /// TTL in ms.
    pub ttl_ms: u64,
    /// Section durations.
    pub dist: Sampler,
    /// Think time.
    pub think: Sampler,
    /// Busy policy.
    pub busy: BusyPolicy,
    /// Release method.
    pub method: ReleaseMethod,
    /// Base seed.
    pub seed: u64,
    /// No attempt starts after this instant (time-limited runs).
    pub deadline: Option<Instant>,
    /// No attempt starts once this many sections have begun (count-limited runs).
    pub max_sections: Option<u64>,
    /// Variant name written in events.
    pub variant: String,
    /// Section rows for `events.csv`.
    pub events: Option<mpsc::Sender<EventRow>>,
    /// Sections begun plus acquisitions in flight (count-limited runs): an attempt reserves a
    /// slot first, so exactly `max_sections` sections happen.
    pub reserved: std::sync::atomic::AtomicU64,
}

/// Independent random streams of one worker, derived from the base seed and the worker id.
struct Streams {
    durations: SmallRng,
    think: SmallRng,
    keys: SmallRng,
    jitter: SmallRng,
    tokens: SmallRng,
}

impl Streams {
    fn new(seed: u64, worker: usize) -> Self {
        let s = |stream: u64| {
            // splitmix-style mixing so nearby seeds/workers give unrelated streams
            let mut z = seed
                ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            SmallRng::seed_from_u64(z ^ (z >> 31))
        };
        Self {
            durations: s(1),
            think: s(2),
            keys: s(3),
            jitter: s(4),
            tokens: s(5),
        }
    }
}

/// The intended durations (µs) worker `worker` draws for its first `n` sections under `seed`.
/// Used to check that runs with the same seed are paired.
pub fn intended_sequence(dist: &Sampler, seed: u64, worker: usize, n: usize) -> Vec<u64> {
    let mut st = Streams::new(seed, worker);
    (0..n)
        .map(|_| crate::units::ms_to_us(dist.sample_ms(&mut st.durations)))
        .collect()
}

impl WorkerCtx {
    fn should_stop(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Reserves a section slot for one acquisition (always granted in time-limited runs);
    /// `false` once every slot is taken by a begun section or an acquisition in flight.
    fn reserve(&self) -> bool {
        let Some(n) = self.max_sections else {
            return true;
        };
        self.reserved
            .fetch_update(Relaxed, Relaxed, |r| (r < n).then_some(r + 1))
            .is_ok()
    }

    /// Gives back the slot of an acquisition that did not happen.
    fn unreserve(&self) {
        if self.max_sections.is_some() {
            self.reserved.fetch_sub(1, Relaxed);
        }
    }

    fn choose_key(&self, rng: &mut SmallRng) -> usize {
        let n = self.key_names.len();
        match self.hot_key {
            Some(p) if rng.random::<f64>() < p => 0,
            _ => rng.random_range(0..n),
        }
    }
}

/// What the runner asks of its workers; it only ever rises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Halt {
    /// Keep going.
    Run,
    /// Start nothing new; open sections end now (counted as interrupted) and are released.
    Stop,
    /// Also stop waiting for replies: the server may be stalled and the user asked twice.
    Abandon,
}

/// Sleeps until `t`, or returns `false` early when the run stops.
async fn sleep_until_or_shutdown(t: Instant, shutdown: &mut watch::Receiver<Halt>) -> bool {
    if *shutdown.borrow() != Halt::Run {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(t) => true,
        Ok(_) = shutdown.wait_for(|h| *h != Halt::Run) => false,
    }
}

/// Awaits a command's reply unless the run is abandoned first; an abandoned command counts
/// as a timeout (its reply was not awaited), so its section still gets its row.
async fn unless_abandoned<T>(
    command: impl std::future::Future<Output = CmdResult<T>>,
    shutdown: &mut watch::Receiver<Halt>,
) -> CmdResult<T> {
    tokio::select! {
        biased;
        r = command => r,
        Ok(_) = shutdown.wait_for(|h| *h == Halt::Abandon) => Err(CmdError {
            kind: ErrorKind::Timeout,
            detail: "reply not awaited: the run was abandoned (second Ctrl-C or SIGTERM)".into(),
        }),
    }
}

/// Runs one worker until the run's end or shutdown. Never panics on a Redis error: every
/// failure is counted and the loop goes on.
pub async fn run_worker<C: LockConn>(
    id: usize,
    mut conn: C,
    ctx: Arc<WorkerCtx>,
    mut shutdown: watch::Receiver<Halt>,
) {
    let rec = &ctx.recorder;
    let c = &rec.counters;
    let mut st = Streams::new(ctx.seed, id);
    let ttl_us = ctx.ttl_ms * 1000;
    let mut seq: u64 = 0;
    let mut token_seq: u64 = 0;
    // Consecutive failed acquisitions: the pause after one doubles (10 ms up to 1 s), so a
    // server that is down or refusing is probed, not hammered, and a reconnect is tried often
    // enough to notice its return within a second.
    let mut failures: u32 = 0;
    while !ctx.should_stop() && *shutdown.borrow() == Halt::Run && ctx.reserve() {
        let key = ctx.choose_key(&mut st.keys);
        let key_name = &ctx.key_names[key];
        rec.touch(key);
        let first_attempt = rec.now_us();
        let mut attempts: u32 = 0;
        let mut backoff_round: u32 = 0;

        // Acquire.
        let token = loop {
            token_seq += 1;
            let token = format!("w{id}-{token_seq}-{:016x}", st.tokens.random::<u64>());
            attempts += 1;
            c.attempts.fetch_add(1, Relaxed);
            let sent = Instant::now();
            let sent_us = rec.now_us();
            let reply =
                unless_abandoned(conn.set_nx_px(key_name, &token, ctx.ttl_ms), &mut shutdown).await;
            rec.record(id, Metric::SetLatency, sent.elapsed().as_micros() as u64);
            if reply.is_ok() {
                rec.ok();
                failures = 0;
            }
            let retry_base = match reply {
                Ok(true) => break Some((token, sent_us)),
                Ok(false) => match ctx.busy {
                    BusyPolicy::FailFast => {
                        c.rejections.fetch_add(1, Relaxed);
                        break None;
                    }
                    BusyPolicy::Retry {
                        base_us,
                        cap_us,
                        max_wait_us,
                    } => {
                        if rec.now_us().saturating_sub(first_attempt) >= max_wait_us {
                            c.acquire_giveups.fetch_add(1, Relaxed);
                            break None;
                        }
                        c.retries.fetch_add(1, Relaxed);
                        // Full jitter: uniform in [0, min(cap, base·2^n)].
                        let ceil = base_us
                            .saturating_mul(1u64 << backoff_round.min(30))
                            .min(cap_us);
                        backoff_round += 1;
                        st.jitter.random_range(0..=ceil)
                    }
                },
                Err(e) => {
                    rec.error(&e);
                    let ceil_us = error_backoff_us(failures);
                    failures = failures.saturating_add(1);
                    let pause = st.jitter.random_range(ceil_us / 2..=ceil_us);
                    let _ = sleep_until_or_shutdown(
                        Instant::now() + Duration::from_micros(pause),
                        &mut shutdown,
                    )
                    .await;
                    break None;
                }
            };
            if ctx.should_stop()
                || !sleep_until_or_shutdown(
                    Instant::now() + Duration::from_micros(retry_base),
                    &mut shutdown,
                )
                .await
            {
                break None;
            }
        };

        if token.is_none() {
            ctx.unreserve();
        }
        if let Some((token, set_sent_us)) = token {
            let intended_ms = ctx.dist.sample_ms(&mut st.durations);
            let intended_us = crate::units::ms_to_us(intended_ms);
            c.sections.fetch_add(1, Relaxed);
            let (t0, holders_at_start) = rec.open_section(key);
            let end_at = rec.start + Duration::from_micros(t0.saturating_add(intended_us));
            let completed =
                intended_us == 0 || sleep_until_or_shutdown(end_at, &mut shutdown).await;
            let t1 = rec.close_section(id, key);
            let sent = Instant::now();
            let outcome = unless_abandoned(
                release(&mut conn, ctx.method, key_name, &token),
                &mut shutdown,
            )
            .await;
            let release_latency_us = sent.elapsed().as_micros() as u64;
            c.finished.fetch_add(1, Relaxed);

            let d = t1 - t0;
            let overrun = d > ttl_us;
            let excess = d.saturating_sub(ttl_us);
            // A fixed array, not a Vec: this runs once per section.
            let mut values = [
                (Metric::Duration, d),
                (Metric::Intended, intended_us),
                (Metric::AcquireLatency, t0.saturating_sub(first_attempt)),
                (Metric::ReleaseLatency, release_latency_us),
                (Metric::TimerError, 0),
                (Metric::Excess, 0),
            ];
            let mut n = 4;
            if completed {
                values[n] = (Metric::TimerError, d.saturating_sub(intended_us));
                n += 1;
            } else {
                c.interrupted.fetch_add(1, Relaxed);
            }
            if overrun {
                c.overruns.fetch_add(1, Relaxed);
                c.excess_total_us.fetch_add(excess, Relaxed);
                values[n] = (Metric::Excess, excess);
                n += 1;
            }
            rec.record_all(id, &values[..n]);
            let outcome_name = match &outcome {
                Ok(o) => {
                    rec.ok();
                    let tally = crate::release::tally(*o, overrun, set_sent_us, t1, ttl_us);
                    count_outcome(rec, *o, tally);
                    o.name().to_string()
                }
                Err(e) => {
                    rec.error(e);
                    format!("error_{}", e.kind.name())
                }
            };
            if let Some(tx) = &ctx.events {
                let row = EventRow {
                    variant: ctx.variant.clone(),
                    worker: id,
                    key,
                    seq,
                    attempt_start_us: first_attempt,
                    set_sent_us,
                    acquired_us: t0,
                    released_us: t1,
                    intended_us,
                    duration_us: d,
                    ttl_us,
                    overrun,
                    excess_us: excess,
                    holders_at_start,
                    attempts,
                    acquire_latency_us: t0.saturating_sub(first_attempt),
                    release_latency_us,
                    release: ctx.method.name().to_string(),
                    outcome: outcome_name,
                    interrupted: !completed,
                };
                // A closed channel means the writer failed; the run still counts everything.
                let _ = tx.send(row).await;
            }
            seq += 1;
        }

        // Think.
        let think_us = crate::units::ms_to_us(ctx.think.sample_ms(&mut st.think));
        if think_us > 0 {
            if !sleep_until_or_shutdown(
                Instant::now() + Duration::from_micros(think_us),
                &mut shutdown,
            )
            .await
            {
                break;
            }
        } else {
            // Let other tasks run between iterations even with zero think time.
            tokio::task::yield_now().await;
        }
    }
}

/// Upper bound of the pause after the `failures`-th consecutive failed acquisition, µs:
/// 10 ms doubling up to 1 s (the pause is drawn from its upper half).
fn error_backoff_us(failures: u32) -> u64 {
    (10_000u64 << failures.min(7)).min(1_000_000)
}

fn count_outcome(rec: &Recorder, o: ReleaseOutcome, t: crate::release::Tally) {
    let c = &rec.counters;
    let counter = match o {
        ReleaseOutcome::Released => &c.released,
        ReleaseOutcome::WrongfulDelete => &c.wrongful_deletes,
        ReleaseOutcome::NothingDeleted => &c.nothing_deleted,
        ReleaseOutcome::RefusedExpired => &c.refused_expired,
        ReleaseOutcome::RefusedHeldByOther => &c.refused_held_by_other,
        ReleaseOutcome::RefusedUnclassified => &c.refused_unclassified,
    };
    counter.fetch_add(1, Relaxed);
    c.stale_releases.fetch_add(u64::from(t.stale), Relaxed);
    c.stale_without_overrun
        .fetch_add(u64::from(t.stale_without_overrun), Relaxed);
    c.deleted_by_other
        .fetch_add(u64::from(t.deleted_by_other), Relaxed);
}
