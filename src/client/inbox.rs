//! A holder's inbox: the lines of its driver process's stdout that name it ([`Incoming`]), handed
//! over by the process's reader ([`super::driver`]) and awaited by the holder.

use super::line::Msg;
use std::collections::VecDeque;
use std::sync::Mutex;

/// What the process's stdout gave one of its holders.
// `Line` is nearly every message, kept in place in its inbox: boxed, it would be an
// allocation a line, which is what reading a line into a `Msg` saves.
#[allow(clippy::large_enum_variant)]
pub(super) enum Incoming {
    /// A reply or an event naming the holder, and its line (in a string the holder gives back
    /// to its inbox once read: [`Inbox::recycle`]).
    Line(Msg, String),
    /// What is not the protocol, for every holder awaiting a reply.
    Broken(String),
    /// Its stdin could not be written (the process is gone, or closed it): how.
    Unwritable(String),
}

/// A holder's inbox: what its process's stdout gave it, in order, until it is closed (the
/// holder left, or stdout ended). A queue under a lock and the waker of the holder awaiting
/// it, not a tokio mpsc channel per holder: a channel's blocks of 32 slots, allocated and
/// freed as a thousand holders' replies pass through them, were a sixth of lockbench's CPU
/// per lock cycle (profiled at 1,000 holders); a holder has one request in flight, so its
/// queue holds a line or two.
#[derive(Default)]
pub(super) struct Inbox {
    state: Mutex<InboxState>,
}

#[derive(Default)]
struct InboxState {
    /// The oldest message, kept in place: a holder's inbox holds one message nearly always,
    /// and one cache line less a message matters at a thousand holders.
    first: Option<Incoming>,
    /// The messages after `first`.
    more: VecDeque<Incoming>,
    /// The holder awaiting its next line, woken when one comes (or the inbox closes).
    waker: Option<std::task::Waker>,
    /// Nothing more comes: what is queued is still read, then the end.
    closed: bool,
    /// The string of a line the holder has read, for the next line: a holder's lines cost
    /// no allocation each (a hundred lines read in one go, allocated there and freed as their
    /// holders run, took glibc's slow path).
    spare: Option<String>,
}

impl InboxState {
    fn push(&mut self, m: Incoming) {
        if self.first.is_none() && self.more.is_empty() {
            self.first = Some(m);
        } else {
            self.more.push_back(m);
        }
    }

    fn pop(&mut self) -> Option<Incoming> {
        self.first.take().or_else(|| self.more.pop_front())
    }
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        // Nothing panics while holding it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `line` for the holder, unless the inbox is closed: the string itself, which
    /// the reader swaps for the inbox's spare one to read its next line into (no copy).
    pub(super) fn send_line(&self, m: Msg, line: &mut String) {
        let waker = {
            let mut s = self.lock();
            if s.closed {
                return;
            }
            let spare = s.spare.take().unwrap_or_default();
            s.push(Incoming::Line(m, std::mem::replace(line, spare)));
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The string of a line the holder has read, for a later line.
    pub(super) fn recycle(&self, line: String) {
        self.lock().spare.get_or_insert(line);
    }

    /// Queues `m` for the holder, unless the inbox is closed (a holder that left reads no more).
    pub(super) fn send(&self, m: Incoming) {
        let waker = {
            let mut s = self.lock();
            if s.closed {
                return;
            }
            s.push(m);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Nothing more is queued; the holder reads what is, then the end.
    pub(super) fn close(&self) {
        let waker = {
            let mut s = self.lock();
            s.closed = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The next message; `None` once the inbox is closed and read. Cancel-safe: a message is
    /// taken only when it is returned.
    pub(super) fn recv(&self) -> impl std::future::Future<Output = Option<Incoming>> + '_ {
        std::future::poll_fn(|cx| {
            let mut s = self.lock();
            if let Some(m) = s.pop() {
                return std::task::Poll::Ready(Some(m));
            }
            if s.closed {
                return std::task::Poll::Ready(None);
            }
            if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                s.waker = Some(cx.waker().clone());
            }
            std::task::Poll::Pending
        })
    }
}
