//! The precise timer's thread (`--timer precise`): a section's end woken ahead of time from a
//! thread of its own, so that a busy runtime runs the holder next.
//!
//! tokio's timer fires on a millisecond tick, and the task it wakes waits behind every task
//! ready before it — under a retry storm, hundreds. Here a dedicated thread keeps the
//! deadlines: it sleeps (its kernel timer slack cut to 1 ns) until a lead ([`early`]) before
//! the earliest, then wakes that task from outside the runtime. That puts the task in the runtime's
//! *remote* queue, which the scheduler checks before its local one at every tick (the runtime
//! is built with `global_queue_interval(1)`), so the holder runs next however many others are
//! ready; it then spins out what is left of the lead on the runtime thread ([`PreciseSleep`]).
//!
//! The lead follows the thread's own lateness: the largest of its last [`LATE_WINDOW`] timed
//! wake-ups plus [`MARGIN`], within [`MIN_EARLY`]..[`MAX_EARLY`] — and within the spin budget:
//! the spins may take at most [`SPIN_BUDGET`] of the runtime thread at the current rate of
//! section ends. Above [`MAX_RATE`] ends a second the pacer keeps its yield loop instead
//! ([`use_thread`]), which shares the thread between many holders ending at once.
//!
//! While it wakes the ends, the thread asks for the real-time class ([`set_realtime`]), so that
//! its own wake-up is not what is late when both cores are busy.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How long before a precise section's end the pacer's yield loop takes over from tokio's timer
/// (the timer's own lateness, ~1–2 ms, must fit inside it), when section ends are too frequent
/// for this thread ([`use_thread`]).
pub(crate) const PRECISE_LEAD: Duration = Duration::from_micros(2_500);

/// The lead's bounds. Measured through this thread on this 2-core VM with both cores busy, a
/// timed wait ends 20–30 µs late at the median and 300–450 µs at p99, and over a millisecond
/// under a retry storm that saturates both cores (docs/src/measurements/section-precision.md).
pub const MIN_EARLY: Duration = Duration::from_micros(200);
/// See [`MIN_EARLY`].
pub const MAX_EARLY: Duration = Duration::from_micros(2_000);
/// Added to the largest recent lateness.
pub const MARGIN: Duration = Duration::from_micros(100);
/// How many of the thread's last timed wake-ups the lead covers.
pub const LATE_WINDOW: usize = 64;
/// The share of the runtime thread the spins may take (0.2 s per s).
pub const SPIN_BUDGET: f64 = 0.2;
/// Section ends per second up to which the timer thread is used (at the budget, a lead of
/// 500 µs).
pub const MAX_RATE: u64 = 400;

/// With frequent section ends (the yield loop), how long before its end a holder is also woken
/// by the timer thread — into the remote queue, polled next — and spins out the rest. Longer
/// spins keep the thread from the other holders ending meanwhile (100 and 200 µs measured
/// worse, docs/src/measurements/section-precision.md).
pub const SPIN_LAST: Duration = Duration::from_micros(50);

/// The timer thread is running (cleared if it ever ends: then no sleep waits on it).
static ALIVE: AtomicBool = AtomicBool::new(true);

/// The current lead, µs (see the module's text).
static EARLY_US: AtomicU64 = AtomicU64::new(500);
/// Precise section ends per second, over the last 100 ms window.
static RATE: AtomicU64 = AtomicU64::new(0);

/// How long before a deadline its task is woken now.
pub fn early() -> Duration {
    Duration::from_micros(EARLY_US.load(Relaxed))
}

/// The lead for `late_us`, the thread's recent lateness (its largest), at the current rate.
fn lead_for(late_us: u64, rate: u64) -> u64 {
    let budget = (SPIN_BUDGET * 1e6 / rate.max(1) as f64) as u64;
    (late_us + MARGIN.as_micros() as u64)
        .min(budget)
        .clamp(MIN_EARLY.as_micros() as u64, MAX_EARLY.as_micros() as u64)
}

/// One wake-up: when, in which order it came (wake-ups of one instant happen in it), whom.
struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

/// The timer thread's shared state.
struct Timer {
    deadlines: Mutex<Deadlines>,
    changed: Condvar,
}

fn lock(m: &Mutex<Deadlines>) -> std::sync::MutexGuard<'_, Deadlines> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The process's timer thread, started on first use (`None`: it could not be started, or it
/// has ended).
fn timer() -> Option<&'static Timer> {
    static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();
    let timer = *TIMER.get_or_init(|| {
        let t: &'static Timer = Box::leak(Box::new(Timer {
            deadlines: Mutex::new(Deadlines::default()),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("lockbench-timer".into())
            .spawn(move || t.run())
            .ok()
            .map(|_| t)
    });
    timer.filter(|_| ALIVE.load(Relaxed))
}

impl Timer {
    fn run(&self) {
        // Should the thread ever end (a panic), no sleep waits on it any more.
        struct Alive;
        impl Drop for Alive {
            fn drop(&mut self) {
                ALIVE.store(false, Relaxed);
            }
        }
        let _alive = Alive;
        // Best effort: without it a timed wait may overshoot by the default 50 µs slack.
        let _ = cut_timer_slack();
        let mut g = lock(&self.deadlines);
        let mut late = [0u64; LATE_WINDOW];
        let mut next_late = 0;
        let mut realtime = false;
        loop {
            // Real-time priority while this thread wakes the section ends (see [`realtime`]).
            let want = THREAD_PATH.load(Relaxed);
            if want != realtime {
                realtime = set_realtime(want);
            }
            let now = Instant::now();
            match g.heap.peek().map(|e| e.0.at) {
                None => {
                    g = self
                        .changed
                        .wait(g)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                Some(at) if at > now => {
                    let (back, waited) = self
                        .changed
                        .wait_timeout(g, at - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    g = back;
                    if waited.timed_out() {
                        // How late the kernel woke this thread: the lead must cover it.
                        late[next_late] = at.elapsed().as_micros() as u64;
                        next_late = (next_late + 1) % LATE_WINDOW;
                        let worst = late.iter().copied().max().unwrap_or(0);
                        EARLY_US.store(lead_for(worst, RATE.load(Relaxed)), Relaxed);
                    }
                }
                Some(_) => {
                    let mut due = Vec::new();
                    while let Some(e) = g.heap.peek()
                        && e.0.at <= now
                    {
                        due.extend(g.heap.pop().map(|e| e.0.waker));
                    }
                    drop(g);
                    for w in due {
                        w.wake();
                    }
                    g = lock(&self.deadlines);
                }
            }
        }
    }

    fn add(&self, at: Instant, waker: Waker) {
        let mut g = lock(&self.deadlines);
        let seq = g.seq;
        g.seq += 1;
        let earliest = g.heap.peek().is_none_or(|e| at < e.0.at);
        g.heap.push(Reverse(Entry { at, seq, waker }));
        drop(g);
        if earliest {
            self.changed.notify_one();
        }
    }
}

/// The timer thread's real-time priority: [`PRIORITY_UNTRIED`], [`PRIORITY_GRANTED`] (at least
/// once) or [`PRIORITY_REFUSED`].
static PRIORITY: AtomicU8 = AtomicU8::new(PRIORITY_UNTRIED);
const PRIORITY_UNTRIED: u8 = 0;
const PRIORITY_GRANTED: u8 = 1;
const PRIORITY_REFUSED: u8 = 2;

/// Puts this thread in the real-time class (`SCHED_FIFO`, priority 1) or back in the normal one
/// (`SCHED_OTHER`, nice 0); whether it is in the real-time class now.
///
/// While the timer thread wakes every section end (at most [`MAX_RATE`] a second), a real-time
/// class makes the kernel run it as soon as its timed wait ends, ahead of the threads that keep
/// both cores busy (the server, the runtime under a retry storm), whose turn a normal thread
/// waits for: `quick.toml --workers 1000`, p99 of the timer error 0.45–0.76 ms with a normal
/// thread, 0.008–0.25 ms with this (docs/src/measurements/section-precision.md). It runs a few µs per wake, so
/// it takes nothing measurable from the others. With frequent ends (the yield loop, thousands of
/// wakes a second) it would preempt the runtime thread at every one: measured worse (p99
/// 0.23–0.41 vs 0.11–0.18 ms for 1,000 holders), so the thread goes back to the normal class.
/// Not permitted (no `CAP_SYS_NICE`, no `RLIMIT_RTPRIO`): the thread stays normal, and the run's
/// footer says so.
fn set_realtime(on: bool) -> bool {
    use thread_priority::{
        NormalThreadSchedulePolicy, RealtimeThreadSchedulePolicy, ThreadPriority,
        ThreadPriorityOsValue, ThreadSchedulePolicy, set_thread_priority_and_policy,
        thread_native_id,
    };
    let me = thread_native_id();
    if !on {
        let _ = set_thread_priority_and_policy(
            me,
            ThreadPriority::Os(ThreadPriorityOsValue::default()),
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other),
        );
        // Linux gives a thread leaving the real-time class its default timer slack (50 µs)
        // back: cut it again. Left at 50 µs, most of the thread's wakes 50 µs before a frequent
        // end came after the end (measured: 1,000 holders per connection, in the runs that
        // began with rare ends).
        let _ = cut_timer_slack();
        return false;
    }
    if PRIORITY.load(Relaxed) == PRIORITY_REFUSED {
        return false;
    }
    let granted = set_thread_priority_and_policy(
        me,
        ThreadPriority::Min,
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .is_ok();
    if granted {
        PRIORITY.store(PRIORITY_GRANTED, Relaxed);
    } else {
        let _ = PRIORITY.compare_exchange(PRIORITY_UNTRIED, PRIORITY_REFUSED, Relaxed, Relaxed);
    }
    granted
}

/// Whether the timer thread has run at real-time priority (`Some(true)`), was refused it
/// (`Some(false)`), or never asked (`None`): see `set_realtime`.
pub fn realtime() -> Option<bool> {
    match PRIORITY.load(Relaxed) {
        PRIORITY_GRANTED => Some(true),
        PRIORITY_REFUSED => Some(false),
        _ => None,
    }
}

/// Sets this thread's timer slack to 1 ns (Linux: `/proc/TID/timerslack_ns`, which a thread
/// may write for itself without privilege).
fn cut_timer_slack() -> std::io::Result<()> {
    let tid = crate::threads::thread_id()?;
    std::fs::write(format!("/proc/{tid}/timerslack_ns"), "1")
}

/// Counts a precise section end and says whether the timer thread should wake it: while
/// section ends come at most [`MAX_RATE`] a second (measured over the last 100 ms window) and
/// the thread is running.
pub fn use_thread() -> bool {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    static WINDOW_START_US: AtomicU64 = AtomicU64::new(0);
    static COUNT: AtomicU64 = AtomicU64::new(0);
    const WINDOW_US: u64 = 100_000;
    let now_us = EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64;
    let n = COUNT.fetch_add(1, Relaxed) + 1;
    let start = WINDOW_START_US.load(Relaxed);
    let span = now_us.saturating_sub(start);
    if span >= WINDOW_US
        && WINDOW_START_US
            .compare_exchange(start, now_us, Relaxed, Relaxed)
            .is_ok()
    {
        RATE.store(n * 1_000_000 / span, Relaxed);
        COUNT.store(0, Relaxed);
    }
    // The window so far counts too (over at least 10 ms): a burst — the first sections of a
    // thousand workers — is seen before its window closes.
    let so_far = n * 1_000_000 / span.max(WINDOW_US / 10);
    let thread = RATE.load(Relaxed).max(so_far) <= MAX_RATE && timer().is_some();
    THREAD_PATH.store(thread, Relaxed);
    ENDS[usize::from(thread)].fetch_add(1, Relaxed);
    thread
}

/// The path the last precise section end took was the timer thread's.
static THREAD_PATH: AtomicBool = AtomicBool::new(true);

/// Precise section ends so far in this process, by path: `[yield loop, timer thread]`.
static ENDS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// How this process's precise section ends were woken: (by the timer thread, by the yield
/// loop), every variant so far.
pub fn ends_by_path() -> (u64, u64) {
    (ENDS[1].load(Relaxed), ENDS[0].load(Relaxed))
}

/// Has the timer thread wake `waker` at `at` (into the runtime's remote queue, run next):
/// `false` if there is no timer thread.
pub fn wake_at(at: Instant, waker: &Waker) -> bool {
    timer().map(|t| t.add(at, waker.clone())).is_some()
}

/// Spins on the calling thread until `t` (the last few µs of a precise wait).
pub fn spin_until(t: Instant) {
    while Instant::now() < t {
        std::hint::spin_loop();
    }
}

/// Completes at `t`: woken by the timer thread a lead ([`early`]) before, then spinning to `t`.
pub fn sleep_until(t: Instant) -> PreciseSleep {
    PreciseSleep { t, wake: None }
}

/// The future of [`sleep_until`].
#[derive(Debug)]
pub struct PreciseSleep {
    t: Instant,
    /// When the timer thread was asked to wake the task (`None`: not yet).
    wake: Option<Instant>,
}

impl Future for PreciseSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        if now >= self.t {
            return Poll::Ready(());
        }
        // Spin only within the lead: first polled inside it, or woken for it. A poll before
        // the wake is for something else (a `select!` sibling, tokio's cooperative budget) and
        // waits on: the entry stands (a task's waker does not change).
        let lead = match self.wake {
            Some(wake) => now >= wake,
            None => self.t - now <= early(),
        };
        if lead {
            spin_until(self.t);
            return Poll::Ready(());
        }
        if self.wake.is_none() {
            let wake = self.t.checked_sub(early()).unwrap_or(self.t);
            if wake_at(wake, cx.waker()) {
                self.wake = Some(wake);
            } else {
                // No thread (see `use_thread`): come back after the other ready tasks, and
                // ask again then.
                cx.waker().wake_by_ref();
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lead_covers_the_lateness_within_the_spin_budget() {
        // Quiet: the floor. Late by 1 ms at 100 ends/s: 1.1 ms (the budget allows 2 ms).
        assert_eq!(lead_for(20, 100), 200);
        assert_eq!(lead_for(1_000, 100), 1_100);
        // The same lateness at 400 ends/s: the budget's 500 µs (0.2 s of spin per s).
        assert_eq!(lead_for(1_000, 400), 500);
        // Never beyond the ceiling, never below the floor.
        assert_eq!(lead_for(50_000, 1), 2_000);
        assert_eq!(lead_for(1_000, 100_000), 200);
    }

    #[test]
    fn deadlines_wake_in_time_order_and_never_early() {
        EARLY_US.store(MIN_EARLY.as_micros() as u64, Relaxed);
        let rt = tokio::runtime::Builder::new_current_thread()
            .global_queue_interval(1)
            .enable_all()
            .build()
            .expect("runtime");
        let base = Instant::now() + Duration::from_millis(5);
        // Out of order, two at one instant, one due before the others' stretches, and one
        // (`None`) polled first inside its own lead.
        let offsets_us = [
            Some(4_000u64),
            Some(1_500),
            Some(3_200),
            Some(300),
            Some(1_500),
            None,
        ];
        let ends = rt.block_on(async {
            let tasks: Vec<_> = offsets_us
                .iter()
                .map(|&o| {
                    tokio::spawn(async move {
                        let t = match o {
                            Some(o) => base + Duration::from_micros(o),
                            None => Instant::now() + Duration::from_micros(100),
                        };
                        sleep_until(t).await;
                        (t, Instant::now())
                    })
                })
                .collect();
            let mut ends = Vec::new();
            for task in tasks {
                ends.push(task.await.expect("task"));
            }
            ends
        });
        for &(t, woke) in &ends {
            assert!(woke >= t, "woke {:?} early", t - woke);
        }
        // Ended in the order of their deadlines (those 700 µs or more apart).
        let mut by_deadline: Vec<_> = ends[..5].to_vec();
        by_deadline.sort();
        for pair in by_deadline.windows(2) {
            if pair[1].0 - pair[0].0 >= Duration::from_micros(700) {
                assert!(pair[0].1 <= pair[1].1, "a later deadline ended first");
            }
        }
    }

    #[test]
    fn a_poll_before_the_wake_waits_on_instead_of_spinning() {
        EARLY_US.store(MIN_EARLY.as_micros() as u64, Relaxed);
        let mut cx = Context::from_waker(Waker::noop());
        // 1.5 ms ahead: outside the lead, inside the longest lead a wake-up may have had.
        let t = Instant::now() + Duration::from_micros(1_500);
        let mut sleep = std::pin::pin!(sleep_until(t));
        assert!(sleep.as_mut().poll(&mut cx).is_pending(), "registered");
        // Polled again before its wake (as a `select!` sibling's wake does): no spin to `t`.
        assert!(
            sleep.as_mut().poll(&mut cx).is_pending(),
            "spun before its wake"
        );
        assert!(Instant::now() < t, "returned only at its deadline");
    }
}
