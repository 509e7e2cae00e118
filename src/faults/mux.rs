//! One server connection for many clients (`--server-connections shared`, the default): the
//! requests of every connection that has no state of its own at the server go out on one
//! pipelined server connection, the *line*, and each reply goes back to the client whose
//! request it answers, in order. A hop then costs the server side one read and one write per
//! batch of requests instead of one each per request (what twemproxy does; measured in
//! `scripts/proxy-bench.sh`).
//!
//! Only requests whose meaning does not depend on their connection share the line
//! ([`super::share::shareable`]): reads and writes of keys, scripts, `PING`, `INFO`… A connection that sends
//! anything else (`MULTI`, `WATCH`, `SELECT` of another database, `AUTH`, `HELLO`, a blocking
//! or subscribing command, `CLIENT` but `SETINFO`, `QUIT`…) is handed a connection of its own
//! first, once every reply of its shared requests is back, and keeps it: from then on it is
//! forwarded as with `--server-connections per-client`. Every request gets exactly one reply on
//! the line, so the replies are routed by counting: a client's batch of `n` requests is owed the
//! next `n` replies after those owed to the batches before it.
//!
//! When the line fails (the server restarts, closes it, or sends what is not RESP), every
//! client with a reply still owed is closed, as its own connection would have been; the next
//! request opens a new line.

use super::resp::MAX_FRAME;
use crate::store::frame::frame_len;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// The most bytes one read of the line takes.
const CHUNK_BYTES: usize = 64 * 1024;

/// Replies that may wait in one client's inbox, unread: beyond it the client is closed (its
/// replies come from the line, which cannot wait for one client without holding up all).
pub(crate) const UNREAD_LIMIT: usize = 2 * MAX_FRAME;

/// Where the line puts a client's replies: complete reply frames, in order.
#[derive(Debug)]
pub(crate) struct Inbox {
    state: Mutex<InboxState>,
    ready: Notify,
    limit: usize,
    /// The line of each protocol this client last sent on (its number; 0: none).
    on_line: [AtomicU64; 2],
}

impl Default for Inbox {
    fn default() -> Inbox {
        Inbox::with_limit(UNREAD_LIMIT)
    }
}

#[derive(Debug, Default)]
struct InboxState {
    bytes: Vec<u8>,
    frames: usize,
    /// The line failed with replies still owed to this client.
    closed: bool,
    /// More than the limit waited unread: the rest were dropped.
    overflowed: bool,
}

/// What [`Inbox::take`] found: replies (`frames` of them, in `bytes`), and whether the line
/// failed owing this client more.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    pub(crate) bytes: Vec<u8>,
    pub(crate) frames: usize,
    pub(crate) closed: bool,
    /// Closed because more than [`UNREAD_LIMIT`] of replies waited unread.
    pub(crate) overflowed: bool,
}

impl Inbox {
    /// An inbox closed when more than `limit` bytes wait in it.
    pub(crate) fn with_limit(limit: usize) -> Inbox {
        Inbox {
            state: Mutex::default(),
            ready: Notify::new(),
            limit,
            on_line: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Waits until replies have come or the line failed, then takes them (`into`'s buffer is
    /// reused).
    pub(crate) async fn take(&self, into: &mut Delivery) {
        loop {
            let wait = self.ready.notified();
            {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if s.frames > 0 || s.closed {
                    into.bytes.clear();
                    std::mem::swap(&mut into.bytes, &mut s.bytes);
                    into.frames = std::mem::take(&mut s.frames);
                    into.closed = s.closed;
                    into.overflowed = s.overflowed;
                    return;
                }
            }
            wait.await;
        }
    }

    /// Adds `frame`, `replies` of them (0 for an attribute, which goes with the next).
    fn put(&self, frame: &[u8], replies: usize) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.overflowed {
            return;
        }
        if s.bytes.len() + frame.len() > self.limit {
            (s.overflowed, s.closed, s.frames) = (true, true, 0);
            s.bytes = Vec::new();
            drop(s);
            self.ready.notify_one();
            return;
        }
        s.bytes.extend_from_slice(frame);
        s.frames += replies;
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.ready.notify_one();
    }
}

/// The shared server connection of a run's doors, opened at the first shared request and
/// again after a failure.
#[derive(Debug)]
pub(crate) struct Mux {
    /// The server's addresses (a line is plain TCP).
    addrs: Arc<[SocketAddr]>,
    /// The RESP2 line and the RESP3 one (opened with `HELLO 3`).
    lines_by_protocol: [Mutex<Option<Arc<Line>>>; 2],
    /// One line opened at a time per protocol: the others wait for it.
    connecting: [tokio::sync::Mutex<()>; 2],
    /// The lines' tasks (aborted with the mux).
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Lines opened, and clients handed a connection of their own.
    pub(crate) lines: AtomicU64,
    pub(crate) own_connections: AtomicU64,
    /// Clients handed their own connection at a `WAIT`/`WAITAOF` after requests on a line.
    pub(crate) waits_after_line: AtomicU64,
    /// What [`Mux::probe`] found.
    refuses_maint: AtomicBool,
}

/// How long opening a line may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Requests waiting to be written on a line beyond which a sender waits for the write: a
/// paused server holds its clients back through TCP instead of in memory.
const PENDING_LIMIT: usize = MAX_FRAME;

/// One shared server connection: what waits to be written, and whose replies come next.
#[derive(Debug, Default)]
struct Line {
    /// Its number among the lines opened (from 1).
    number: u64,
    out: Mutex<LineOut>,
    wake: Notify,
    /// Told after every write (and when the line fails): senders waiting for room.
    written: Notify,
}

#[derive(Debug, Default)]
struct LineOut {
    pending: Vec<u8>,
    /// Clients owed replies, in the order their requests went out, with how many each.
    owed: VecDeque<(Arc<Inbox>, usize)>,
    /// Every client that sent on the line: closed with it, owed replies or not, as a server
    /// that restarts closes every connection.
    users: Vec<std::sync::Weak<Inbox>>,
    failed: bool,
}

impl Drop for Mux {
    fn drop(&mut self) {
        for t in self
            .tasks
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Mux {
    /// A mux in front of the server at `addrs` (plain TCP); no connection is opened yet.
    pub(crate) fn new(addrs: Arc<[SocketAddr]>) -> Mux {
        Mux {
            addrs,
            lines_by_protocol: [Mutex::new(None), Mutex::new(None)],
            connecting: [tokio::sync::Mutex::new(()), tokio::sync::Mutex::new(())],
            tasks: Mutex::new(Vec::new()),
            lines: AtomicU64::new(0),
            own_connections: AtomicU64::new(0),
            waits_after_line: AtomicU64::new(0),
            refuses_maint: AtomicBool::new(false),
        }
    }

    /// Asks the server, on a connection of its own, whether it refuses
    /// `CLIENT MAINT_NOTIFICATIONS` (Redis before 8.2, Valkey). redis-py 8 sends it on every
    /// connection, ignoring a refusal; where it is refused it changes nothing, so those
    /// connections may stay on the line. A server that does not answer in time is taken to
    /// know it (each such connection gets its own).
    pub(crate) async fn probe(&self) {
        let ask = async {
            let mut c = self.connect().await.ok()?;
            let req = b"*3\r\n$6\r\nCLIENT\r\n$19\r\nMAINT_NOTIFICATIONS\r\n$3\r\nOFF\r\n";
            c.write_all(req).await.ok()?;
            // Refused only by name (`-ERR unknown subcommand …`): an error of another kind
            // (NOAUTH, NOPERM) says nothing of the command.
            let mut reply = [0u8; 64];
            let n = c.read(&mut reply).await.ok()?;
            let reply = String::from_utf8_lossy(&reply[..n]).to_ascii_lowercase();
            Some(reply.starts_with("-err unknown"))
        };
        let refused = tokio::time::timeout(std::time::Duration::from_secs(2), ask).await;
        let refused = refused.ok().flatten().unwrap_or(false);
        self.refuses_maint.store(refused, Ordering::Relaxed);
    }

    /// A new connection to the server, within [`CONNECT_TIMEOUT`] (the clients waiting for a
    /// line wait for it).
    async fn connect(&self) -> std::io::Result<tokio::net::TcpStream> {
        let connect = tokio::net::TcpStream::connect(&self.addrs[..]);
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| std::io::Error::other("no connection within 10 s"))??;
        let _ = tcp.set_nodelay(true);
        Ok(tcp)
    }

    /// Whether the server refused `CLIENT MAINT_NOTIFICATIONS` when probed.
    pub(crate) fn server_refuses_maint(&self) -> bool {
        self.refuses_maint.load(Ordering::Relaxed)
    }

    /// Sends `requests` (`frames` complete requests) on the line of the client's protocol
    /// (`resp3`); their replies will be put in `inbox`. `Err` when no line can be opened (the
    /// server is unreachable).
    pub(crate) async fn send(
        &self,
        requests: &[u8],
        frames: usize,
        inbox: &Arc<Inbox>,
        resp3: bool,
    ) -> std::io::Result<()> {
        let slot = &self.lines_by_protocol[usize::from(resp3)];
        loop {
            let line = slot.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(line) = line {
                let room = line.written.notified();
                // Sent, no room yet, or the line failed.
                let sent = {
                    let mut out = line.out.lock().unwrap_or_else(|p| p.into_inner());
                    if out.failed {
                        None
                    } else if out.pending.len() > PENDING_LIMIT {
                        Some(false)
                    } else {
                        out.pending.extend_from_slice(requests);
                        out.owed.push_back((inbox.clone(), frames));
                        let p = usize::from(resp3);
                        if inbox.on_line[p].swap(line.number, Ordering::Relaxed) != line.number {
                            if out.users.len().is_power_of_two() {
                                out.users.retain(|u| u.strong_count() > 0);
                            }
                            out.users.push(Arc::downgrade(inbox));
                        }
                        Some(true)
                    }
                };
                match sent {
                    Some(true) => {
                        line.wake.notify_one();
                        return Ok(());
                    }
                    Some(false) => {
                        room.await;
                        continue;
                    }
                    None => {}
                }
            }
            self.open(resp3).await?;
        }
    }

    /// Opens a new line for the protocol unless another task just did.
    async fn open(&self, resp3: bool) -> std::io::Result<()> {
        let _one = self.connecting[usize::from(resp3)].lock().await;
        let slot = &self.lines_by_protocol[usize::from(resp3)];
        let alive = slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|l| !l.out.lock().unwrap_or_else(|p| p.into_inner()).failed);
        if alive {
            return Ok(());
        }
        let stream = self.connect().await?;
        let line = Arc::new(Line {
            number: self.lines.fetch_add(1, Ordering::Relaxed) + 1,
            ..Line::default()
        });
        if resp3 {
            // Its own HELLO first, answered to nobody: a client's HELLO 3 on the line is
            // answered as on a connection of its own.
            let mut out = line.out.lock().unwrap_or_else(|p| p.into_inner());
            out.pending
                .extend_from_slice(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
            out.owed.push_back((Arc::new(Inbox::default()), 1));
            drop(out);
            line.wake.notify_one();
        }
        let task = tokio::spawn(run_line(stream, line.clone()));
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task.abort_handle());
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(line);
        Ok(())
    }
}

/// Writes what clients queued, and routes each reply to the client it is owed to, until the
/// line fails; then closes every client that sent on it.
async fn run_line(stream: tokio::net::TcpStream, line: Arc<Line>) {
    let (mut r, mut w) = stream.into_split();
    let writer = async {
        let mut batch = Vec::with_capacity(CHUNK_BYTES);
        loop {
            line.wake.notified().await;
            // Once more round the runtime first: the clients whose requests are read in the
            // same turn add theirs, and the batch goes out in one write.
            // (Measured: 1.26–1.39× HAProxy's rate against 1.14–1.40× without, in two
            // rounds each of scripts/proxy-bench.sh, its added p50 0.09–0.25 ms against
            // 0.24–0.35.)
            tokio::task::yield_now().await;
            {
                let mut out = line.out.lock().unwrap_or_else(|p| p.into_inner());
                std::mem::swap(&mut batch, &mut out.pending);
            }
            if !batch.is_empty() && w.write_all(&batch).await.is_err() {
                return;
            }
            batch.clear();
            line.written.notify_waiters();
        }
    };
    let reader = async {
        let mut acc: Vec<u8> = Vec::with_capacity(CHUNK_BYTES);
        loop {
            acc.reserve(CHUNK_BYTES);
            match r.read_buf(&mut acc).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let mut at = 0;
            let mut out = line.out.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                let len = match frame_len(&acc[at..]) {
                    Ok(Some(len)) => len,
                    Ok(None) if acc.len() - at > MAX_FRAME => return,
                    Ok(None) => break,
                    Err(_) => return,
                };
                let frame = &acc[at..at + len];
                at += len;
                // A RESP3 push answers no request (the line subscribes to nothing, tracks
                // nothing): dropped.
                if frame[0] == b'>' {
                    continue;
                }
                // A reply nobody is owed: the line cannot be trusted any more.
                let Some((inbox, owed)) = out.owed.front_mut() else {
                    return;
                };
                // An attribute goes with the reply after it.
                if frame[0] == b'|' {
                    inbox.put(frame, 0);
                    continue;
                }
                inbox.put(frame, 1);
                *owed -= 1;
                if *owed == 0 {
                    inbox.ready.notify_one();
                    out.owed.pop_front();
                }
            }
            // Part of a batch's replies: its client may forward them already.
            if let Some((inbox, _)) = out.owed.front() {
                inbox.ready.notify_one();
            }
            drop(out);
            acc.drain(..at);
        }
    };
    tokio::select! {
        () = writer => {}
        () = reader => {}
    }
    let owed = {
        let mut out = line.out.lock().unwrap_or_else(|p| p.into_inner());
        out.failed = true;
        out.pending = Vec::new();
        let users = std::mem::take(&mut out.users);
        (std::mem::take(&mut out.owed), users)
    };
    line.written.notify_waiters();
    let (owed, users) = owed;
    for (inbox, _) in owed {
        inbox.close();
    }
    for inbox in users.iter().filter_map(std::sync::Weak::upgrade) {
        inbox.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that leaves more than its limit unread is closed, and what came after is
    /// dropped, not kept; below the limit every frame is delivered in order.
    #[tokio::test]
    async fn an_inbox_left_unread_past_its_limit_is_closed_and_holds_nothing() {
        let inbox = Inbox::with_limit(10);
        inbox.put(b"+OK\r\n", 1);
        inbox.put(b":1\r\n", 1);
        let mut d = Delivery::default();
        inbox.take(&mut d).await;
        assert_eq!(
            (&d.bytes[..], d.frames, d.closed),
            (&b"+OK\r\n:1\r\n"[..], 2, false)
        );
        inbox.put(b"$5\r\nhello\r\n", 1);
        inbox.put(b"+OK\r\n", 1);
        inbox.take(&mut d).await;
        assert!(d.closed && d.overflowed, "{d:?}");
        assert_eq!((d.bytes.len(), d.frames), (0, 0));
        inbox.put(b"+OK\r\n", 1);
        inbox.take(&mut d).await;
        assert!(d.bytes.is_empty() && d.overflowed);
    }
}
