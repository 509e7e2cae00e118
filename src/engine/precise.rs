//! The precise timer's thread (`--timer precise`): a section's end woken ahead of time from a
//! thread of its own, so that a busy runtime runs the holder next.
//!
//! tokio's timer fires on a millisecond tick, and the task it wakes waits behind every task
//! ready before it — under a retry storm, hundreds. Here a dedicated thread keeps the
//! deadlines: it sleeps (its kernel timer slack cut to 1 ns) until [`EARLY`] before the
//! earliest, then wakes that task from outside the runtime. That puts the task in the runtime's
//! *remote* queue, which the scheduler checks before its local one at every tick (the runtime
//! is built with `global_queue_interval(1)`), so the holder runs next however many others are
//! ready; it then spins out what is left of [`EARLY`] on the runtime thread ([`PreciseSleep`]).
//!
//! The spin costs the runtime thread up to [`EARLY`] per section end, so this path is taken
//! only while section ends are rare enough ([`use_thread`]: at most [`MAX_RATE`] a second);
//! above that the driver keeps its yield loop, which shares the thread between many holders
//! ending at once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How long before a deadline its task is woken. The thread's own wake-up must fit in it: on
/// this 2-core VM with both cores busy, a timed wait ends 20–30 µs late at the median and
/// 300–450 µs at p99 (measured through this thread; README, "Section precision").
pub const EARLY: Duration = Duration::from_micros(500);

/// Section ends per second up to which the timer thread is used: its spins then take at most a
/// fifth of the runtime thread (`MAX_RATE` × [`EARLY`] = 0.2 s per s).
pub const MAX_RATE: u64 = 400;

/// One deadline: when, in which order it came (deadlines of one instant wake in it), whom.
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

/// The process's timer thread, started on first use (`None`: it could not be started).
fn timer() -> Option<&'static Timer> {
    static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();
    *TIMER.get_or_init(|| {
        let t: &'static Timer = Box::leak(Box::new(Timer {
            deadlines: Mutex::new(Deadlines::default()),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("lockbench-timer".into())
            .spawn(move || t.run())
            .ok()
            .map(|_| t)
    })
}

impl Timer {
    fn run(&self) {
        // Best effort: without it a timed wait may overshoot by the default 50 µs slack.
        let _ = cut_timer_slack();
        let mut g = lock(&self.deadlines);
        loop {
            let now = Instant::now();
            match g.heap.peek().map(|e| e.0.at) {
                None => {
                    g = self
                        .changed
                        .wait(g)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                Some(at) if at > now + EARLY => {
                    g = self
                        .changed
                        .wait_timeout(g, at - EARLY - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                Some(_) => {
                    let mut due = Vec::new();
                    while let Some(e) = g.heap.peek()
                        && e.0.at <= now + EARLY
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

/// Sets this thread's timer slack to 1 ns (Linux: `/proc/TID/timerslack_ns`, which a thread
/// may write for itself without privilege).
fn cut_timer_slack() -> std::io::Result<()> {
    let link = std::fs::read_link("/proc/thread-self")?;
    let tid = link
        .file_name()
        .ok_or_else(|| std::io::Error::other("no thread id"))?;
    std::fs::write(
        std::path::Path::new("/proc")
            .join(tid)
            .join("timerslack_ns"),
        "1",
    )
}

/// Counts a precise section end and says whether the timer thread should wake it: while
/// section ends come at most [`MAX_RATE`] a second (measured over the last 100 ms window) and
/// the thread is running.
pub fn use_thread() -> bool {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    static WINDOW_START_US: AtomicU64 = AtomicU64::new(0);
    static COUNT: AtomicU64 = AtomicU64::new(0);
    static RATE: AtomicU64 = AtomicU64::new(0);
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
    RATE.load(Relaxed).max(so_far) <= MAX_RATE && timer().is_some()
}

/// Completes at `t`: woken by the timer thread [`EARLY`] before, then spinning to `t`.
pub fn sleep_until(t: Instant) -> PreciseSleep {
    PreciseSleep {
        t,
        registered: false,
    }
}

/// The future of [`sleep_until`].
#[derive(Debug)]
pub struct PreciseSleep {
    t: Instant,
    registered: bool,
}

impl Future for PreciseSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        if now >= self.t {
            return Poll::Ready(());
        }
        if self.t - now <= EARLY {
            // Woken for the last stretch (or first polled within it): spun out here.
            while Instant::now() < self.t {
                std::hint::spin_loop();
            }
            return Poll::Ready(());
        }
        // The first poll; a later one before the stretch is a wake for something else in a
        // `select!`, and the entry stands (a task's waker does not change).
        if !self.registered {
            match timer() {
                Some(timer) => timer.add(self.t, cx.waker().clone()),
                // No thread (see `use_thread`): come back after the other ready tasks.
                None => cx.waker().wake_by_ref(),
            }
            self.registered = true;
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_wake_in_time_order_and_never_early() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .global_queue_interval(1)
            .enable_all()
            .build()
            .expect("runtime");
        let base = Instant::now() + Duration::from_millis(5);
        // Out of order, one before the stretch of another, one already inside its stretch.
        let offsets_us = [3_000u64, 1_000, 2_200, 300, 1_000];
        let ends = rt.block_on(async {
            let tasks: Vec<_> = offsets_us
                .iter()
                .map(|&o| {
                    let t = base + Duration::from_micros(o);
                    tokio::spawn(async move {
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
        for (t, woke) in ends {
            assert!(woke >= t, "woke {:?} early", t - woke);
        }
    }
}
