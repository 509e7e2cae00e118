//! The CPU gate: a few tests measure timing (the precise timer against tokio's, a real run the
//! simulator must agree with) and were alone in their binaries, or one at a time in them, so
//! that no other test competed for the CPU. In one binary they hold [`alone`] instead: it waits
//! until no other test's server, run or `lockbench` command is under way, and keeps new ones
//! waiting until it is dropped. Those take [`shared`] (a [`super::Server`], a
//! [`super::Running`] command, the in-process run helpers); the test holding `alone` passes its
//! own through on its thread.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

struct State {
    /// Shared holders (servers, commands, runs) under way.
    shared: usize,
    /// The thread of the test that holds the CPU alone.
    alone: Option<ThreadId>,
}

static STATE: Mutex<State> = Mutex::new(State {
    shared: 0,
    alone: None,
});
static CHANGED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    // A panic never happens with the lock held; a poisoned lock is still consistent.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wait(g: MutexGuard<'static, State>) -> MutexGuard<'static, State> {
    CHANGED.wait(g).unwrap_or_else(PoisonError::into_inner)
}

/// The CPU for the calling test alone, until dropped (see the module text). Not reentrant.
#[must_use = "the CPU is the test's only while the guard lives"]
pub fn alone() -> Alone {
    let me = std::thread::current().id();
    let mut g = state();
    assert_ne!(g.alone, Some(me), "alone() taken twice by one test");
    while g.alone.is_some() || g.shared > 0 {
        g = wait(g);
    }
    g.alone = Some(me);
    Alone(())
}

/// Held by a test that has the CPU alone.
pub struct Alone(());

impl Drop for Alone {
    fn drop(&mut self) {
        state().alone = None;
        CHANGED.notify_all();
    }
}

/// A share of the CPU: waits while another test holds it [`alone`]. Shares never wait for each
/// other, so a test may hold several (its server, then a command).
pub fn shared() -> Shared {
    let me = std::thread::current().id();
    let mut g = state();
    if g.alone == Some(me) {
        return Shared { counted: false };
    }
    while g.alone.is_some() {
        g = wait(g);
    }
    g.shared += 1;
    Shared { counted: true }
}

/// A share of the CPU, given back when dropped.
pub struct Shared {
    counted: bool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.counted {
            state().shared -= 1;
            CHANGED.notify_all();
        }
    }
}
