//! A single-threaded executor on a virtual clock: the workers' futures are polled only when
//! the event they wait for is due, and the clock jumps from one event to the next. Nothing
//! sleeps, nothing reads the wall clock, no waker crosses a thread.
//!
//! Every wait is a timer: [`sleep_until`], [`yield_now`] (a timer at the current instant) and an
//! idle request slot woken by the arrivals ([`wake`]). Events of the same instant run in the
//! order they were scheduled, so a run is a pure function of its seed.
//!
//! The state is thread-local: one simulation per thread, on the thread that calls [`run`].

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, Waker};

/// A scheduled wake-up, in 16 bytes (four to a cache line in the heap).
#[derive(Debug, Clone, Copy)]
struct Timer {
    /// The instant, µs.
    t: u64,
    /// The order of scheduling (events of one instant run in it) above the task's number:
    /// unique, so ordering by it orders by the scheduling.
    order: u64,
}

impl Timer {
    /// Bits of `order` for the task (at most 16.7 million tasks; [`run`] checks).
    const TASK_BITS: u32 = 24;
    const MAX_TASKS: usize = 1 << Self::TASK_BITS;

    fn new(t: u64, seq: u64, task: u32) -> Self {
        // 2^40 events: years of simulated time at today's rates.
        assert!(seq < 1 << (64 - Self::TASK_BITS), "too many events");
        Self {
            t,
            order: seq << Self::TASK_BITS | u64::from(task),
        }
    }

    fn task(&self) -> u32 {
        (self.order & (Self::MAX_TASKS as u64 - 1)) as u32
    }

    #[cfg(test)]
    fn seq(&self) -> u64 {
        self.order >> Self::TASK_BITS
    }

    /// The order of timers as one 128-bit number (instant, then scheduling order): compared
    /// without branches, so the heap's sift picks the least of four children with
    /// conditional moves rather than mispredicted jumps.
    fn key(&self) -> u128 {
        u128::from(self.t) << 64 | u128::from(self.order)
    }
}

/// The timers, earliest (then first scheduled) first: a 4-ary min-heap. Half as deep as a
/// binary heap, and a node's four children share a cache line or two, so a pop — the
/// executor's most frequent operation, one per event — touches fewer lines than
/// `std::collections::BinaryHeap` does. Keys are unique (`seq`), so the order is total.
#[derive(Debug, Default)]
struct Timers {
    heap: Vec<Timer>,
}

impl Timers {
    const D: usize = 4;

    const fn new() -> Self {
        Self { heap: Vec::new() }
    }

    fn clear(&mut self) {
        self.heap.clear();
    }

    fn push(&mut self, x: Timer) {
        self.heap.push(x);
        let mut i = self.heap.len() - 1;
        while i > 0 {
            let parent = (i - 1) / Self::D;
            if self.heap[parent].key() <= x.key() {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = x;
    }

    fn pop(&mut self) -> Option<Timer> {
        let last = self.heap.pop()?;
        if self.heap.is_empty() {
            return Some(last);
        }
        let top = self.heap[0];
        self.sift_down_from_root(last);
        Some(top)
    }

    fn peek(&self) -> Option<Timer> {
        self.heap.first().copied()
    }

    /// The instant of the earliest timer (`u64::MAX`: none). While the root is the event being
    /// run, the next is [`Timers::second`]'s, which [`run`] finds once per event.
    fn next_t(&self) -> u64 {
        self.peek().map_or(u64::MAX, |x| x.t)
    }

    /// The timer that runs after the earliest, as the heap stands (the least of the root's
    /// children).
    fn second(&self) -> Option<Timer> {
        let end = self.heap.len().min(1 + Self::D);
        self.heap
            .get(1..end)?
            .iter()
            .copied()
            .min_by_key(Timer::key)
    }

    /// Replaces the earliest timer with `x`: a pop and a push in one sift, which stops at
    /// once when `x` is due soon (a command's next hop usually is).
    fn replace_top(&mut self, x: Timer) {
        if self.heap.is_empty() {
            self.heap.push(x);
        } else {
            self.sift_down_from_root(x);
        }
    }

    /// Puts `x` at the root (over what was there) and sifts it down.
    fn sift_down_from_root(&mut self, x: Timer) {
        let n = self.heap.len();
        let mut i = 0;
        loop {
            let first = Self::D * i + 1;
            if first >= n {
                break;
            }
            let mut min = first;
            for c in first + 1..(first + Self::D).min(n) {
                if self.heap[c].key() < self.heap[min].key() {
                    min = c;
                }
            }
            if self.heap[min].key() >= x.key() {
                break;
            }
            self.heap[i] = self.heap[min];
            i = min;
        }
        self.heap[i] = x;
    }
}

/// The executor's state on this thread, in one thread-local (one access, not one per field).
struct State {
    now: Cell<u64>,
    current: Cell<u32>,
    seq: Cell<u64>,
    running: Cell<bool>,
    timers: RefCell<Timers>,
    /// The earliest timer is the event being run: still in the heap, it is replaced by the
    /// first timer the event schedules (or popped after it, if it schedules none).
    top_taken: Cell<bool>,
    /// A sleep may complete within its poll (see [`Sleep`]): set while the event loop runs
    /// (not while the tasks are first polled, all at instant 0).
    inline: Cell<bool>,
    /// The instant of the next call of [`run`]'s hook.
    next_hook: Cell<u64>,
    /// [`run`]'s `clock`, mirrored as the clock moves.
    clock: RefCell<Option<Arc<AtomicU64>>>,
    /// Sleeps completed within their poll (events that were not queued).
    inlined: Cell<u64>,
    /// While `top_taken`: the instant of the timer after the root (`u64::MAX`: none), found
    /// once per event — the heap does not change until the event schedules its first timer,
    /// which clears `top_taken`.
    second_t: Cell<u64>,
    /// Per task, memory it will touch when it next runs (see [`hint`]); null: none.
    hints: RefCell<Vec<*const u8>>,
}

thread_local! {
    static STATE: State = const {
        State {
            now: Cell::new(0),
            current: Cell::new(0),
            seq: Cell::new(0),
            running: Cell::new(false),
            timers: RefCell::new(Timers::new()),
            top_taken: Cell::new(false),
            inline: Cell::new(false),
            next_hook: Cell::new(u64::MAX),
            clock: RefCell::new(None),
            inlined: Cell::new(0),
            second_t: Cell::new(u64::MAX),
            hints: RefCell::new(Vec::new()),
        }
    };
}

/// Whether a simulation is running on this thread.
pub(crate) fn running() -> bool {
    STATE.with(|s| s.running.get())
}

/// Now on the virtual clock, µs since time zero.
pub(crate) fn now_us() -> u64 {
    STATE.with(|s| s.now.get())
}

/// The task being polled.
pub(crate) fn current() -> u32 {
    STATE.with(|s| s.current.get())
}

/// A hint from the task being polled: it will read `addr` soon, now or when it next runs. It is
/// prefetched at once, and again (with the task's own state) just before the task's next turn.
/// Only a hint: a stale or null address changes nothing.
pub(crate) fn hint(addr: *const u8) {
    prefetch_line(addr);
    STATE.with(|s| {
        let i = s.current.get() as usize;
        if let Some(h) = s.hints.borrow_mut().get_mut(i) {
            *h = addr;
        }
    });
}

/// Schedules `task` to be polled at `t_us` (not before now).
pub(crate) fn wake(task: u32, t_us: u64) {
    STATE.with(|s| {
        let seq = s.seq.get();
        s.seq.set(seq + 1);
        let timer = Timer::new(t_us.max(s.now.get()), seq, task);
        if s.top_taken.replace(false) {
            s.timers.borrow_mut().replace_top(timer);
        } else {
            s.timers.borrow_mut().push(timer);
        }
    });
}

/// Completes at `t_us` on the virtual clock.
pub(crate) fn sleep_until(t_us: u64) -> Sleep {
    Sleep {
        until: t_us,
        armed: false,
    }
}

/// Lets every other event due now run first.
pub(crate) fn yield_now() -> Sleep {
    Sleep {
        until: now_us(),
        armed: false,
    }
}

/// Moves the clock to `t_us` at once, within the event being run, if nothing else can happen
/// before it: no timer is due until after `t_us` (one due at `t_us` itself was scheduled
/// earlier, so it runs first), and the hook is not due by then. The event loop would pop this
/// task's wake-up next, at `t_us`, and poll it — with nothing run in between and no other
/// task's order changed (the wake's place in the order, its `seq`, was only relative) — so the
/// task may as well go on now: one heap push, pop and poll fewer, and the task's state still in
/// the cache. (A command's half round trip and the server's reply usually fit before the next
/// event.) `false`: the task must wait in the queue.
fn advance_inline(t_us: u64) -> bool {
    STATE.with(|s| {
        let next = if s.top_taken.get() {
            s.second_t.get()
        } else {
            s.timers.borrow().next_t()
        };
        if !s.inline.get() || t_us >= s.next_hook.get() || next <= t_us {
            return false;
        }
        s.now.set(t_us);
        if let Some(c) = &*s.clock.borrow() {
            c.store(t_us, Relaxed);
        }
        s.inlined.set(s.inlined.get() + 1);
        true
    })
}

/// The future of [`sleep_until`] and [`yield_now`]. A sleep into the future completes in its
/// first poll when nothing else can happen before its instant (see [`advance_inline`]); a
/// yield always waits in the queue.
#[derive(Debug)]
pub(crate) struct Sleep {
    until: u64,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let now = now_us();
        // A yield (armed at its own instant) must let the queue run once.
        if self.armed && now >= self.until {
            return Poll::Ready(());
        }
        if !self.armed && now > self.until {
            return Poll::Ready(());
        }
        if !self.armed {
            if self.until > now && advance_inline(self.until) {
                return Poll::Ready(());
            }
            self.armed = true;
            wake(current(), self.until);
        }
        Poll::Pending
    }
}

/// Pending once, ready when polled again: a task that parked itself somewhere it will be
/// [`wake`]d from.
#[derive(Debug, Default)]
pub(crate) struct Park {
    parked: bool,
}

impl Future for Park {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.parked {
            Poll::Ready(())
        } else {
            self.parked = true;
            Poll::Pending
        }
    }
}

/// Asks the CPU to bring `x`'s memory into the cache (a hint: no effect on what runs).
fn prefetch<T: ?Sized>(x: &T) {
    let p = std::ptr::from_ref(x).cast::<u8>();
    for off in (0..std::mem::size_of_val(x)).step_by(64) {
        prefetch_line(p.wrapping_add(off));
    }
}

/// Asks the CPU to bring the cache line at `p` into the cache.
///
/// lockbench's one `unsafe` (the library denies it everywhere else; the binary forbids it):
/// `_mm_prefetch` is a safe function with `#[target_feature(enable = "sse")]`, and rustc 1.95
/// still asks for `unsafe` to call one outside a function declaring that feature, though SSE is
/// part of every x86-64 target. The instruction is a hint: it never faults, whatever the
/// address, and changes nothing the program reads. What it buys: a simulated day 144 -> 94 s
/// (docs/src/measurements/virtual-time.md, "How fast").
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: see above; no memory is read or written.
        #[allow(unsafe_code)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p.cast())
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A boxed task.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()>>>;

/// What [`run`] did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ran {
    /// Events processed (task polls, and sleeps completed without one: see [`Sleep`]).
    pub events: u64,
    /// Of which sleeps completed without a poll of their own.
    pub inlined: u64,
    /// The virtual instant of the last one, µs.
    pub end_us: u64,
}

/// Runs `tasks` to completion on a fresh virtual clock starting at 0. `clock` mirrors the
/// virtual time for readers on other threads. `hook` is called at every multiple of
/// `every_us` of virtual time that passes (with that instant), before the events after it;
/// it returns `false` to stop polling (what is left is dropped).
pub(crate) fn run(
    tasks: Vec<Task>,
    clock: &Arc<AtomicU64>,
    every_us: u64,
    mut hook: impl FnMut(u64) -> bool,
) -> Ran {
    STATE.with(|s| {
        s.now.set(0);
        s.seq.set(0);
        s.timers.borrow_mut().clear();
        s.top_taken.set(false);
        s.inline.set(false);
        s.next_hook.set(u64::MAX);
        *s.clock.borrow_mut() = Some(clock.clone());
        s.inlined.set(0);
        *s.hints.borrow_mut() = vec![std::ptr::null(); tasks.len()];
    });
    clock.store(0, Relaxed);
    // Unset again when `run` returns, however it returns.
    struct Running;
    impl Drop for Running {
        fn drop(&mut self) {
            STATE.with(|s| {
                s.running.set(false);
                s.inline.set(false);
                s.clock.borrow_mut().take();
            });
        }
    }
    STATE.with(|s| s.running.set(true));
    let _running = Running;
    assert!(tasks.len() <= Timer::MAX_TASKS, "too many tasks");
    let mut tasks: Vec<Option<Task>> = tasks.into_iter().map(Some).collect();
    let mut cx = Context::from_waker(Waker::noop());
    let mut ran = Ran::default();
    let mut poll = |id: u32, tasks: &mut Vec<Option<Task>>, ran: &mut Ran| {
        if let Some(t) = tasks[id as usize].as_mut() {
            STATE.with(|s| s.current.set(id));
            ran.events += 1;
            if t.as_mut().poll(&mut cx).is_ready() {
                tasks[id as usize] = None;
            }
        }
    };
    for id in 0..tasks.len() as u32 {
        poll(id, &mut tasks, &mut ran);
    }
    let every_us = every_us.max(1);
    let mut next_hook = every_us;
    STATE.with(|s| {
        s.next_hook.set(next_hook);
        s.inline.set(true);
    });
    let finish = |ran: &mut Ran| {
        STATE.with(|s| {
            ran.inlined = s.inlined.get();
            ran.events += ran.inlined;
            s.inline.set(false);
        });
    };
    while let Some(timer) = STATE.with(|s| s.timers.borrow().peek()) {
        let (t, id) = (timer.t, timer.task());
        while t >= next_hook {
            STATE.with(|s| s.now.set(next_hook));
            clock.store(next_hook, Relaxed);
            if !hook(next_hook) {
                STATE.with(|s| s.timers.borrow_mut().clear());
                finish(&mut ran);
                return ran;
            }
            next_hook += every_us;
            STATE.with(|s| s.next_hook.set(next_hook));
        }
        STATE.with(|s| s.now.set(t));
        clock.store(t, Relaxed);
        STATE.with(|s| s.top_taken.set(true));
        // The next event's task is known now: its state is fetched while this one runs.
        let next = STATE.with(|s| {
            let second = s.timers.borrow().second();
            s.second_t.set(second.map_or(u64::MAX, |x| x.t));
            let task = second?.task() as usize;
            Some((task, s.hints.borrow().get(task).copied()?))
        });
        if let Some((task, hint)) = next
            && let Some(Some(t)) = tasks.get(task)
        {
            prefetch(&**t);
            if !hint.is_null() {
                prefetch_line(hint);
            }
        }
        poll(id, &mut tasks, &mut ran);
        STATE.with(|s| {
            // The task may have moved the clock past `t` (a sleep completed in its poll).
            ran.end_us = s.now.get();
            if s.top_taken.replace(false) {
                s.timers.borrow_mut().pop();
            }
        });
    }
    finish(&mut ran);
    ran
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// Sleeps each of `waits` in turn, logging its name and the virtual time after each.
    fn logging_task(
        log: &Rc<RefCell<Vec<(&'static str, u64)>>>,
        name: &'static str,
        waits: Vec<u64>,
    ) -> Task {
        let log = log.clone();
        Box::pin(async move {
            for w in waits {
                sleep_until(now_us() + w).await;
                log.borrow_mut().push((name, now_us()));
            }
        })
    }

    #[test]
    fn a_timer_keeps_its_task_and_orders_by_scheduling() {
        let last = Timer::MAX_TASKS as u32 - 1;
        let (a, b) = (Timer::new(5, 1, last), Timer::new(5, 2, 0));
        assert_eq!((a.task(), a.seq(), b.task(), b.seq()), (last, 1, 0, 2));
        assert!(a.key() < b.key());
    }

    #[test]
    fn the_timer_heap_pops_in_time_then_scheduling_order() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut heap = Timers::new();
        let mut reference = std::collections::BinaryHeap::new();
        let mut seq = 0;
        for _ in 0..20_000 {
            if rng.random::<f64>() < 0.55 {
                let t = rng.random_range(0..200u64);
                heap.push(Timer::new(t, seq, (seq % 1000) as u32));
                reference.push(std::cmp::Reverse((t, seq)));
                seq += 1;
            } else if rng.random::<f64>() < 0.5 {
                let got = heap.pop().map(|x| (x.t, x.seq()));
                assert_eq!(got, reference.pop().map(|r| r.0));
            } else {
                // An event that schedules one timer: the top replaced.
                let got = heap.peek().map(|x| (x.t, x.seq()));
                assert_eq!(got, reference.pop().map(|r| r.0));
                let t = got.map_or(0, |g| g.0) + rng.random_range(0..50u64);
                heap.replace_top(Timer::new(t, seq, 7));
                reference.push(std::cmp::Reverse((t, seq)));
                seq += 1;
            }
            // The timer after the earliest (what the executor prefetches for).
            let first = reference.pop();
            let second = reference.peek().map(|r| r.0);
            reference.extend(first);
            assert_eq!(heap.second().map(|x| (x.t, x.seq())), second);
        }
        while let Some(std::cmp::Reverse(want)) = reference.pop() {
            assert_eq!(heap.pop().map(|x| (x.t, x.seq())), Some(want));
        }
        assert!(heap.pop().is_none());
    }

    #[test]
    fn events_run_in_time_then_scheduling_order() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let task = |name, waits| logging_task(&log, name, waits);
        let clock = Arc::new(AtomicU64::new(0));
        let mut hooks = Vec::new();
        let ran = run(
            vec![task("a", vec![5, 5]), task("b", vec![10, 0])],
            &clock,
            4,
            |t| {
                hooks.push(t);
                true
            },
        );
        assert_eq!(
            *log.borrow(),
            // At 10, b's wake was scheduled (at 0) before a's (at 5).
            vec![("a", 5), ("b", 10), ("a", 10), ("b", 10)]
        );
        assert_eq!(ran.end_us, 10);
        assert_eq!(clock.load(Relaxed), 10);
        assert_eq!(hooks, vec![4, 8]);
    }

    #[test]
    fn a_sleep_before_every_other_event_and_the_hook_goes_on_in_its_poll() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let task = |name, waits| logging_task(&log, name, waits);
        let clock = Arc::new(AtomicU64::new(0));
        let mut hooks = Vec::new();
        let ran = run(
            vec![task("a", vec![3, 3, 3, 3]), task("b", vec![7])],
            &clock,
            10,
            |t| {
                hooks.push(t);
                true
            },
        );
        // a's wake at 6 comes before b's at 7 and the hook at 10: a goes on at 6 within its
        // poll at 3. Its wakes at 9 (b at 7 first) and 12 (the hook at 10 first) are queued.
        assert_eq!(
            *log.borrow(),
            vec![("a", 3), ("a", 6), ("b", 7), ("a", 9), ("a", 12)]
        );
        assert_eq!(hooks, vec![10]);
        assert_eq!((ran.inlined, ran.events, ran.end_us), (1, 7, 12));
        assert_eq!(clock.load(Relaxed), 12);
    }

    #[test]
    fn a_yield_lets_the_others_of_the_instant_run() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let (l1, l2) = (log.clone(), log.clone());
        let clock = Arc::new(AtomicU64::new(0));
        run(
            vec![
                Box::pin(async move {
                    l1.borrow_mut().push(1);
                    yield_now().await;
                    l1.borrow_mut().push(3);
                }),
                Box::pin(async move {
                    l2.borrow_mut().push(2);
                }),
            ],
            &clock,
            1_000,
            |_| true,
        );
        assert_eq!(*log.borrow(), vec![1, 2, 3]);
    }
}
