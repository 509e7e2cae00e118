//! The program's connections to the doors, as the ledger keeps them: per connection, the
//! requests read and answered (`clients.csv`'s commands; a crash fault waits until a stopped
//! copy's requests are all answered) and a copy of its socket's descriptor while it is open
//! (what the copy sent that the proxy has not read yet).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One connection's counts.
#[derive(Debug)]
struct Counts {
    client: usize,
    asked: AtomicU64,
    answered: AtomicU64,
    open: AtomicBool,
    /// Dropped when the connection ends: it keeps the socket open.
    socket: Mutex<Option<OwnedFd>>,
}

/// Every connection of a run, open or ended.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    all: Mutex<Vec<Arc<Counts>>>,
}

/// An open connection, held by its door until the connection ends.
#[derive(Debug)]
pub(crate) struct Connection(Arc<Counts>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.open.store(false, Ordering::Relaxed);
        self.0
            .socket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }
}

impl Connection {
    /// `n` more requests were read.
    pub(crate) fn asked(&self, n: u64) {
        self.0.asked.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` requests were answered; `true` when none is left unanswered.
    pub(crate) fn answered(&self, n: u64) -> bool {
        let answered = self.0.answered.fetch_add(n, Ordering::Relaxed) + n;
        answered >= self.0.asked.load(Ordering::Relaxed)
    }
}

impl Connections {
    /// A new connection of `client`; `socket`: a copy of its descriptor (kept while it is
    /// open).
    pub(crate) fn open(&self, client: usize, socket: Option<OwnedFd>) -> Connection {
        let counts = Arc::new(Counts {
            client,
            asked: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            open: AtomicBool::new(true),
            socket: Mutex::new(socket),
        });
        self.lock().push(counts.clone());
        Connection(counts)
    }

    /// Requests read per client, over all its connections.
    pub(crate) fn commands(&self) -> std::collections::BTreeMap<usize, u64> {
        let mut m = std::collections::BTreeMap::new();
        for c in self.lock().iter() {
            *m.entry(c.client).or_default() += c.asked.load(Ordering::Relaxed);
        }
        m
    }

    /// Whether every open connection of `client` has each request it sent read (none waits
    /// unread in its socket) and answered.
    pub(crate) fn settled(&self, client: usize) -> bool {
        self.lock()
            .iter()
            .filter(|c| c.client == client && c.open.load(Ordering::Relaxed))
            .all(|c| {
                let unread = c.socket.lock().unwrap_or_else(|p| p.into_inner());
                let unread = unread
                    .as_ref()
                    .map_or(0, |s| rustix::io::ioctl_fionread(s).unwrap_or(0));
                unread == 0 && c.answered.load(Ordering::Relaxed) >= c.asked.load(Ordering::Relaxed)
            })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Counts>>> {
        self.all.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests read and answered per connection: a client is settled when each open one has
    /// every request answered; an ended connection's unanswered requests no longer count, its
    /// commands still do.
    #[test]
    fn a_client_is_settled_when_its_open_connections_are_answered() {
        let all = Connections::default();
        let a = all.open(2, None);
        let b = all.open(2, None);
        let other = all.open(0, None);
        a.asked(3);
        other.asked(1);
        assert!(!a.answered(2));
        assert!(!all.settled(2) && !all.settled(0) && all.settled(1));
        assert!(a.answered(1));
        assert!(all.settled(2));
        b.asked(1);
        assert!(!all.settled(2));
        drop(b);
        assert!(all.settled(2));
        let commands = all.commands();
        assert_eq!((commands[&0], commands[&2]), (1, 4));
    }
}
