//! What paces a worker's steps through time: the real clock (tokio timers, the run's stop
//! signal, a channel to the `events.csv` writer) or the simulator's virtual clock
//! ([`crate::sim`]). The worker's steps — acquire, hold, write, release, think — are written
//! once against [`Pacer`], so a simulated run and a real one cannot drift apart.
//!
//! Every instant a pacer takes or gives is µs since the variant's time zero, the same clock
//! as [`crate::engine::recorder::Recorder::now_us`].

use crate::engine::recorder::Recorder;
use crate::model::error::{CmdError, CmdResult, ErrorKind};
use crate::record::EventRow;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What the runner asks of its workers; it only ever rises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Halt {
    /// Keep going.
    Run,
    /// Start nothing new; open sections end now (counted as interrupted) and are released.
    Stop,
    /// Also stop waiting for replies: the server may be stalled and the user asked twice.
    Abandon,
}

/// A worker's access to time, to the run's stop signal, to the open model's arrivals and to
/// the `events.csv` writer.
pub(crate) trait Pacer: Send + 'static {
    /// The run's current request to its workers.
    fn halt(&self) -> Halt;
    /// Sleeps until `t_us`; `false` when the run stops first.
    fn sleep_until(&mut self, t_us: u64) -> impl Future<Output = bool> + Send;
    /// Returns once the run stops (at once when it has): what a wait on something else than
    /// the pacer's clock races (a library's reply). By default a sleep far past any run.
    fn until_halt(&mut self) -> impl Future<Output = ()> + Send {
        async {
            self.sleep_until(u64::MAX / 2).await;
        }
    }
    /// As [`Pacer::sleep_until`], for a section's end: as close to `t_us` as the pacer can.
    fn sleep_until_precise(&mut self, t_us: u64) -> impl Future<Output = bool> + Send;
    /// Lets the other workers run.
    fn yield_now(&mut self) -> impl Future<Output = ()> + Send;
    /// Awaits a command's reply unless the run is abandoned first (then an `abandoned` error).
    fn command<T: Send>(
        &mut self,
        command: impl Future<Output = CmdResult<T>> + Send,
    ) -> impl Future<Output = CmdResult<T>> + Send;
    /// The open model's next arrival (its intended instant); `None` when the arrivals end or
    /// the run stops.
    fn next_arrival(&mut self) -> impl Future<Output = Option<u64>> + Send;
    /// Hands a finished section's row to the `events.csv` writer, if the run writes one.
    fn row(&mut self, row: EventRow) -> impl Future<Output = ()> + Send;
    /// A hint: the worker will soon record on `key` (its section opens or closes), perhaps
    /// after a wait. The simulator fetches that key's memory at once and again just before the
    /// worker's next turn; a real run ignores it.
    fn will_record(&mut self, _rec: &Recorder, _key: usize) {}
}

/// Arrivals waiting for a request slot: each is its intended arrival, µs since time zero. Every
/// worker is a slot; a free one takes the next arrival.
pub(crate) struct ArrivalQueue {
    /// The backlog (bounded: a full one drops arrivals, counted).
    pub rx: tokio::sync::Mutex<mpsc::Receiver<u64>>,
}

/// [`Halt::Abandon`] for the commands awaiting replies: a flag read at every poll and the
/// waiting tasks' wakers, each registered once (a watch channel's `wait_for` would put a waiter
/// on its list and take it off again for every command: 2 % of the runtime thread at 200,000
/// commands a second).
#[derive(Default)]
pub(crate) struct AbandonSignal {
    set: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl AbandonSignal {
    /// Abandons every command awaiting its reply, now and from now on.
    pub(crate) fn abandon(&self) {
        self.set.store(true, SeqCst);
        let wakers = std::mem::take(&mut *self.lock());
        for w in wakers {
            w.wake();
        }
    }

    fn is_set(&self) -> bool {
        self.set.load(SeqCst)
    }

    fn register(&self, waker: &Waker) {
        self.lock().push(waker.clone());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        // Nothing panics while holding it.
        self.wakers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The real clock: tokio's timers, the run's stop signal as a watch channel.
pub(crate) struct RealPacer {
    /// The variant's time zero.
    pub start: Instant,
    /// The run's stop signal.
    pub halt: watch::Receiver<Halt>,
    /// The stop signal's last step, for the commands in flight.
    pub abandon: Arc<AbandonSignal>,
    /// The waker registered with `abandon` (a task's waker does not change).
    pub registered: Option<Waker>,
    /// How a section waits for its end.
    pub precise: bool,
    /// The open model's arrivals (`None`: a closed loop).
    pub arrivals: Option<Arc<ArrivalQueue>>,
    /// Section rows for `events.csv`.
    pub events: Option<mpsc::Sender<EventRow>>,
}

impl RealPacer {
    fn at(&self, t_us: u64) -> Instant {
        self.start + Duration::from_micros(t_us)
    }
}

/// Sleeps until `t`, or returns `false` early when the run stops.
async fn sleep_until_or_halt(t: Instant, halt: &mut watch::Receiver<Halt>) -> bool {
    if *halt.borrow() != Halt::Run {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(t) => true,
        Ok(_) = halt.wait_for(|h| *h != Halt::Run) => false,
    }
}

impl Pacer for RealPacer {
    fn halt(&self) -> Halt {
        *self.halt.borrow()
    }

    async fn sleep_until(&mut self, t_us: u64) -> bool {
        let t = self.at(t_us);
        sleep_until_or_halt(t, &mut self.halt).await
    }

    /// With the precise timer, while section ends are rare ([`super::precise::use_thread`]) the
    /// timer thread wakes the task ahead of `t`, into the runtime's remote queue (run next), and
    /// it spins out the rest; when they are frequent, the last
    /// [`super::precise::PRECISE_LEAD`] is spent yielding instead of on tokio's millisecond
    /// timer, sharing the thread among the holders ending at once, and the timer thread wakes
    /// the task [`super::precise::SPIN_LAST`] before `t` too (run next: it spins out the rest).
    /// Either way the task wakes within tens of µs of `t` on a quiet machine (measured in the
    /// book: docs/src/measurements/section-precision.md), at a CPU cost.
    /// The stop signal alone, without a timer: a library's holder races it with every
    /// acquisition (a timer a day away, set and cleared a lock cycle, was a few per cent of
    /// lockbench's CPU per cycle at 1,000 holders).
    async fn until_halt(&mut self) {
        // A closed signal never stops the run, as [`sleep_until_or_halt`] reads it.
        if self.halt.wait_for(|h| *h != Halt::Run).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    async fn sleep_until_precise(&mut self, t_us: u64) -> bool {
        let t = self.at(t_us);
        if !self.precise {
            return sleep_until_or_halt(t, &mut self.halt).await;
        }
        if *self.halt.borrow() != Halt::Run {
            return false;
        }
        if super::precise::use_thread() {
            return tokio::select! {
                () = super::precise::sleep_until(t.into_std()) => true,
                Ok(_) = self.halt.wait_for(|h| *h != Halt::Run) => false,
            };
        }
        let coarse = t.checked_sub(super::precise::PRECISE_LEAD).unwrap_or(t);
        if coarse > Instant::now() && !sleep_until_or_halt(coarse, &mut self.halt).await {
            return false;
        }
        // The timer thread also wakes this task just before `t`, into the remote queue, so
        // that it is polled then rather than behind a pass over every other ready task.
        let last = t.into_std().checked_sub(super::precise::SPIN_LAST);
        if let Some(last) = last {
            std::future::poll_fn(|cx| {
                super::precise::wake_at(last, cx.waker());
                std::task::Poll::Ready(())
            })
            .await;
        }
        loop {
            let now = Instant::now();
            if now >= t {
                return true;
            }
            if *self.halt.borrow() != Halt::Run {
                return false;
            }
            if t - now <= super::precise::SPIN_LAST {
                super::precise::spin_until(t.into_std());
                return true;
            }
            tokio::task::yield_now().await;
        }
    }

    async fn yield_now(&mut self) {
        tokio::task::yield_now().await;
    }

    /// An abandoned command counts as a timeout of its own kind (its reply was not awaited),
    /// so its section still gets its row.
    async fn command<T: Send>(
        &mut self,
        command: impl Future<Output = CmdResult<T>> + Send,
    ) -> CmdResult<T> {
        let mut command = pin!(command);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = command.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            if !self.abandon.is_set()
                && !self
                    .registered
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
            {
                self.abandon.register(cx.waker());
                self.registered = Some(cx.waker().clone());
            }
            // Read after registering: an abandon before it is seen here, one after wakes us.
            if self.abandon.is_set() {
                return Poll::Ready(Err(CmdError {
                    kind: ErrorKind::Abandoned,
                    detail: "reply not awaited: the run was abandoned (second Ctrl-C or SIGTERM)"
                        .into(),
                }));
            }
            Poll::Pending
        })
        .await
    }

    async fn next_arrival(&mut self) -> Option<u64> {
        let queue = self.arrivals.clone()?;
        tokio::select! {
            a = async { queue.rx.lock().await.recv().await } => a,
            _ = self.halt.wait_for(|h| *h != Halt::Run) => None,
        }
    }

    async fn row(&mut self, row: EventRow) {
        if let Some(tx) = &self.events {
            // A closed channel means the writer failed; the run still counts everything.
            let _ = tx.send(row).await;
        }
    }
}
