//! One server connection for many clients (`--server-connections shared`, the default): the
//! requests of every connection that has no state of its own at the server go out on one
//! pipelined server connection, the *line*, and each reply goes back to the client whose
//! request it answers, in order. A hop then costs the server side one read and one write per
//! batch of requests instead of one each per request (what twemproxy does; measured in
//! `scripts/proxy-bench.sh`).
//!
//! Only requests whose meaning does not depend on their connection share the line
//! ([`shareable`]): reads and writes of keys, scripts, `PING`, `INFO`… A connection that sends
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

use super::door::Upstream;
use crate::store::frame::frame_len;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// The most bytes one read of the line takes.
const CHUNK_BYTES: usize = 64 * 1024;

/// Whether a request (`name`, its first argument `sub`) means the same on any connection:
/// it may go out on the shared line. Anything not named here gets a connection of its own.
pub(crate) fn shareable(name: &[u8], sub: Option<&[u8]>, argc: usize) -> bool {
    const SAME_ON_ANY: &[&[u8]] = &[
        b"GET",
        b"SET",
        b"SETNX",
        b"SETEX",
        b"PSETEX",
        b"GETDEL",
        b"GETEX",
        b"GETSET",
        b"DEL",
        b"UNLINK",
        b"DELEX",
        b"EXISTS",
        b"EXPIRE",
        b"PEXPIRE",
        b"EXPIREAT",
        b"PEXPIREAT",
        b"PERSIST",
        b"TTL",
        b"PTTL",
        b"EXPIRETIME",
        b"PEXPIRETIME",
        b"TYPE",
        b"INCR",
        b"INCRBY",
        b"DECR",
        b"DECRBY",
        b"INCRBYFLOAT",
        b"APPEND",
        b"STRLEN",
        b"MGET",
        b"MSET",
        b"MSETNX",
        b"HGET",
        b"HSET",
        b"HSETNX",
        b"HDEL",
        b"HGETALL",
        b"HMGET",
        b"HMSET",
        b"HINCRBY",
        b"HEXISTS",
        b"HLEN",
        b"LPUSH",
        b"RPUSH",
        b"LPOP",
        b"RPOP",
        b"LLEN",
        b"LRANGE",
        b"LREM",
        b"LINDEX",
        b"SADD",
        b"SREM",
        b"SMEMBERS",
        b"SISMEMBER",
        b"SCARD",
        b"ZADD",
        b"ZREM",
        b"ZRANGE",
        b"ZSCORE",
        b"ZCARD",
        b"ZRANGEBYSCORE",
        b"ZREMRANGEBYSCORE",
        b"EVAL",
        b"EVALSHA",
        b"EVAL_RO",
        b"EVALSHA_RO",
        b"FCALL",
        b"FCALL_RO",
        b"PING",
        b"ECHO",
        b"INFO",
        b"TIME",
        b"DBSIZE",
    ];
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    let sub_is = |n: &[u8]| sub.is_some_and(|s| s.eq_ignore_ascii_case(n));
    SAME_ON_ANY.iter().any(|n| is(n))
        // The line is always in database 0, and a library's name only labels a connection.
        || (is(b"SELECT") && sub == Some(b"0"))
        || (is(b"CLIENT") && sub_is(b"SETINFO"))
        || (is(b"SCRIPT") && (sub_is(b"LOAD") || sub_is(b"EXISTS")))
        // The protocol alone: there is a line for each (with AUTH or SETNAME it is the
        // connection's own).
        || (is(b"HELLO") && argc == 2 && (sub == Some(b"2") || sub == Some(b"3")))
}

/// Where the line puts a client's replies: complete reply frames, in order.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    state: Mutex<InboxState>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct InboxState {
    bytes: Vec<u8>,
    frames: usize,
    /// The line failed with replies still owed to this client.
    closed: bool,
}

/// What [`Inbox::take`] found: replies (`frames` of them, in `bytes`), and whether the line
/// failed owing this client more.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    pub(crate) bytes: Vec<u8>,
    pub(crate) frames: usize,
    pub(crate) closed: bool,
}

impl Inbox {
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
                    return;
                }
            }
            wait.await;
        }
    }

    /// Adds `frame`, `replies` of them (0 for an attribute, which goes with the next).
    fn put(&self, frame: &[u8], replies: usize) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
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
    upstream: Upstream,
    /// The RESP2 line and the RESP3 one (opened with `HELLO 3`).
    lines_by_protocol: [Mutex<Option<Arc<Line>>>; 2],
    connecting: tokio::sync::Mutex<()>,
    /// The lines' tasks (aborted with the mux).
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Lines opened, and clients handed a connection of their own.
    pub(crate) lines: AtomicU64,
    pub(crate) own_connections: AtomicU64,
    /// What [`Mux::probe`] found.
    refuses_maint: AtomicBool,
    /// Lines failed so far: the watch closes every connection that was on the line, owed a
    /// reply or not, as the server's restart would have closed its own.
    failures: tokio::sync::watch::Sender<u64>,
}

/// One shared server connection: what waits to be written, and whose replies come next.
#[derive(Debug, Default)]
struct Line {
    out: Mutex<LineOut>,
    wake: Notify,
}

#[derive(Debug, Default)]
struct LineOut {
    pending: Vec<u8>,
    /// Clients owed replies, in the order their requests went out, with how many each.
    owed: VecDeque<(Arc<Inbox>, usize)>,
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
    /// A mux in front of `upstream` (plain TCP); no connection is opened yet.
    pub(crate) fn new(upstream: Upstream) -> Mux {
        Mux {
            upstream,
            lines_by_protocol: [Mutex::new(None), Mutex::new(None)],
            connecting: tokio::sync::Mutex::new(()),
            tasks: Mutex::new(Vec::new()),
            lines: AtomicU64::new(0),
            own_connections: AtomicU64::new(0),
            refuses_maint: AtomicBool::new(false),
            failures: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Follows the lines' failures (it changes when one fails).
    pub(crate) fn failures(&self) -> tokio::sync::watch::Receiver<u64> {
        self.failures.subscribe()
    }

    /// Asks the server, on a connection of its own, whether it refuses
    /// `CLIENT MAINT_NOTIFICATIONS` (Redis before 8.2, Valkey). redis-py 8 sends it on every
    /// connection, ignoring a refusal; where it is refused it changes nothing, so those
    /// connections may stay on the line. A server that does not answer in time is taken to
    /// know it (each such connection gets its own).
    pub(crate) async fn probe(&self) {
        let ask = async {
            let mut c = self.upstream.connect_plain().await.ok()?;
            let req = b"*3\r\n$6\r\nCLIENT\r\n$19\r\nMAINT_NOTIFICATIONS\r\n$3\r\nOFF\r\n";
            c.write_all(req).await.ok()?;
            let mut first = [0u8; 1];
            c.read_exact(&mut first).await.ok()?;
            Some(first[0] == b'-')
        };
        let refused = tokio::time::timeout(std::time::Duration::from_secs(2), ask).await;
        let refused = refused.ok().flatten().unwrap_or(false);
        self.refuses_maint.store(refused, Ordering::Relaxed);
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
                let mut out = line.out.lock().unwrap_or_else(|p| p.into_inner());
                if !out.failed {
                    out.pending.extend_from_slice(requests);
                    out.owed.push_back((inbox.clone(), frames));
                    drop(out);
                    line.wake.notify_one();
                    return Ok(());
                }
            }
            self.open(resp3).await?;
        }
    }

    /// Opens a new line for the protocol unless another task just did.
    async fn open(&self, resp3: bool) -> std::io::Result<()> {
        let _one = self.connecting.lock().await;
        let slot = &self.lines_by_protocol[usize::from(resp3)];
        let alive = slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|l| !l.out.lock().unwrap_or_else(|p| p.into_inner()).failed);
        if alive {
            return Ok(());
        }
        let stream = self.upstream.connect_plain().await?;
        let line = Arc::new(Line::default());
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
        let task = tokio::spawn(run_line(stream, line.clone(), self.failures.clone()));
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task.abort_handle());
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(line);
        self.lines.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Writes what clients queued, and routes each reply to the client it is owed to, until the
/// line fails; then closes every client still owed a reply.
async fn run_line(
    stream: tokio::net::TcpStream,
    line: Arc<Line>,
    failures: tokio::sync::watch::Sender<u64>,
) {
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
                    Ok(None) if acc.len() - at > super::stream::MAX_FRAME => return,
                    Ok(None) => break,
                    Err(_) => return,
                };
                // A reply nobody is owed: the line cannot be trusted any more.
                let Some((inbox, owed)) = out.owed.front_mut() else {
                    return;
                };
                let frame = &acc[at..at + len];
                at += len;
                match frame[0] {
                    // RESP3 out of band: an attribute goes with the reply after it; a push
                    // answers no request (the line subscribes to nothing, tracks nothing).
                    b'|' => {
                        inbox.put(frame, 0);
                        continue;
                    }
                    b'>' => continue,
                    _ => inbox.put(frame, 1),
                }
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
        out.pending.clear();
        std::mem::take(&mut out.owed)
    };
    for (inbox, _) in owed {
        inbox.close();
    }
    failures.send_modify(|n| *n += 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_that_mean_the_same_on_any_connection_share() {
        assert!(shareable(b"get", Some(b"k"), 2));
        assert!(shareable(b"EVALSHA", Some(b"abc"), 3));
        assert!(shareable(b"select", Some(b"0"), 2));
        assert!(shareable(b"client", Some(b"setinfo"), 4));
        assert!(shareable(b"HELLO", Some(b"3"), 2));
        assert!(!shareable(b"HELLO", Some(b"3"), 5), "HELLO 3 AUTH u p");
        for (name, sub) in [
            (&b"SELECT"[..], Some(&b"1"[..])),
            (b"MULTI", None),
            (b"WATCH", Some(b"k")),
            (b"BLPOP", Some(b"k")),
            (b"SUBSCRIBE", Some(b"c")),
            (b"AUTH", Some(b"p")),
            (b"HELLO", Some(b"4")),
            (b"CLIENT", Some(b"REPLY")),
            (b"QUIT", None),
            (b"SCRIPT", Some(b"FLUSH")),
        ] {
            assert!(
                !shareable(name, sub, 2),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }
}
