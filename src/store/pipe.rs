//! A pipelined connection to one server, shared by every clone: lockbench's own link for
//! plain TCP and Unix sockets with RESP2 (TLS and RESP3 keep redis-rs's `ConnectionManager`).
//!
//! Why not redis-rs's multiplexed connection: with `--connection shared` the workers and the
//! connection's writer take turns on one thread, so the server waited for a whole batch of
//! replies to be handled before the next batch was written (a ping-pong), and redis-rs spends
//! two boxed futures, a channel message and a parsed `Value` per command. Measured on this
//! machine (2026-12-04) with a bare loop of the lock cycle, 50 tasks on one connection, against
//! `redis-benchmark -c 1 -P 50` run next to it: redis-rs's multiplexed connection 0.57× of the
//! peer; a prototype of this link 0.80× writing once per batch, and written as soon as N
//! commands are queued (the server starts on them while the client prepares the rest): N = 25
//! 0.87×, 16 0.93×, **8 1.18×**, 4 1.15× ([`FLUSH_AT`]).
//!
//! Behaviour kept from the `ConnectionManager` it replaces: a command waits at most the
//! response timeout (then a `timeout` error; its late reply is read and dropped); a lost
//! connection fails the commands in flight with a connection error and the next command makes
//! one connect attempt (commands waiting meanwhile share its outcome), no retries inside the
//! link; `AUTH` and `SELECT` from the URL on every connect.

use super::Timeouts;
use redis::{Cmd, ConnectionAddr, ConnectionInfo, RedisError, RedisFuture, RedisResult, Value};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use tokio::sync::oneshot;

/// Commands queued before they are written at once rather than when the connection's task
/// next runs: the server starts on them while the client prepares the rest of the batch.
pub(crate) const FLUSH_AT: usize = 8;

/// Where the link connects (from the URL).
#[derive(Debug, Clone)]
enum Addr {
    Tcp(String, u16),
    Unix(std::path::PathBuf),
}

/// One server's pipelined connection; clones share it.
#[derive(Clone)]
pub struct PipeLink {
    inner: Arc<Inner>,
}

struct Inner {
    addr: Addr,
    user: Option<String>,
    password: Option<String>,
    db: i64,
    timeouts: Timeouts,
    state: Arc<Mutex<State>>,
    /// Held while connecting: one attempt at a time.
    connecting: Arc<tokio::sync::Mutex<()>>,
}

type Reply = oneshot::Sender<RedisResult<Value>>;

#[derive(Default)]
struct State {
    sock: Option<Arc<Sock>>,
    /// The socket's number: its task only touches the state while it is current.
    generation: u64,
    /// Encoded commands not written yet.
    out: Vec<u8>,
    /// Commands in `out`.
    queued: usize,
    /// One per command written or queued, in order: the replies come back in it.
    waiters: VecDeque<Reply>,
    /// The connection task, to wake when something is queued.
    io: Option<Waker>,
    /// Connect attempts made, and how the last one failed.
    attempts: u64,
    last_failure: Option<RedisError>,
    /// Every clone is gone: the task ends.
    closed: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // Nothing panics while holding it; if something did, the state is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for Inner {
    fn drop(&mut self) {
        let mut st = lock(&self.state);
        st.closed = true;
        if let Some(w) = st.io.take() {
            w.wake();
        }
    }
}

/// A plain TCP or Unix socket.
enum Sock {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Sock {
    fn try_write(&self, b: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.try_write(b),
            Self::Unix(s) => s.try_write(b),
        }
    }
    fn try_read(&self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.try_read(b),
            Self::Unix(s) => s.try_read(b),
        }
    }
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Self::Tcp(s) => s.poll_read_ready(cx),
            Self::Unix(s) => s.poll_read_ready(cx),
        }
    }
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Self::Tcp(s) => s.poll_write_ready(cx),
            Self::Unix(s) => s.poll_write_ready(cx),
        }
    }
}

impl PipeLink {
    /// A link for `info` if it can be one (plain TCP or Unix socket, RESP2), connected once
    /// (`Ok(None)`: use redis-rs's connection instead).
    pub async fn open(info: &ConnectionInfo, timeouts: Timeouts) -> RedisResult<Option<Self>> {
        let addr = match info.addr() {
            ConnectionAddr::Tcp(host, port) => Addr::Tcp(host.clone(), *port),
            ConnectionAddr::Unix(path) => Addr::Unix(path.clone()),
            _ => return Ok(None),
        };
        let settings = info.redis_settings();
        if settings.protocol() != redis::ProtocolVersion::RESP2 {
            return Ok(None);
        }
        let link = Self {
            inner: Arc::new(Inner {
                addr,
                user: settings.username().map(str::to_string),
                password: settings.password().map(str::to_string),
                db: settings.db(),
                timeouts,
                state: Arc::default(),
                connecting: Arc::default(),
            }),
        };
        link.ensure_connected().await?;
        Ok(Some(link))
    }

    /// Closes the socket, as a process that dies closes its own (commands in flight fail, the
    /// connection's task ends and drops it), then connects again; a failed connect is left to
    /// the next command. `false` when there was no socket to close.
    pub async fn renew(&self) -> bool {
        if !self.close() {
            return false;
        }
        let _ = self.ensure_connected().await;
        true
    }

    fn close(&self) -> bool {
        let mut st = lock(&self.inner.state);
        if st.sock.take().is_none() {
            return false;
        }
        // The task sees another generation and ends without touching the state again.
        st.generation += 1;
        st.out.clear();
        st.queued = 0;
        for w in st.waiters.drain(..) {
            let closed = io::Error::new(io::ErrorKind::NotConnected, "the socket was closed");
            let _ = w.send(Err(closed.into()));
        }
        if let Some(w) = st.io.take() {
            w.wake();
        }
        true
    }

    fn connected(&self) -> bool {
        lock(&self.inner.state).sock.is_some()
    }

    /// Connects if the socket is gone: one attempt, shared by the commands that waited for it.
    /// The attempt runs in a task of its own, so a caller that gives up (a Redlock instance's
    /// timeout) does not abandon it half-way.
    async fn ensure_connected(&self) -> RedisResult<()> {
        if self.connected() {
            return Ok(());
        }
        let seen = lock(&self.inner.state).attempts;
        let one = self.inner.connecting.clone().lock_owned().await;
        {
            let st = lock(&self.inner.state);
            if st.sock.is_some() {
                return Ok(());
            }
            if st.attempts != seen
                && let Some(e) = &st.last_failure
            {
                return Err(e.clone());
            }
        }
        let inner = self.inner.clone();
        let attempt = tokio::spawn(async move {
            let _one = one;
            inner.attempt().await
        });
        attempt.await.unwrap_or_else(|e| {
            Err(io::Error::other(format!("the connect attempt failed: {e}")).into())
        })
    }

    /// Queues `frames` replies' worth of encoded commands (written by `write`), handing each
    /// reply's receiver to `slot` in order; `false` when there is no socket (nothing queued).
    fn enqueue(
        &self,
        write: &impl Fn(&mut Vec<u8>),
        frames: usize,
        mut slot: impl FnMut(oneshot::Receiver<RedisResult<Value>>),
    ) -> bool {
        let mut st = lock(&self.inner.state);
        let Some(sock) = st.sock.clone() else {
            return false;
        };
        let idle = st.out.is_empty() && st.waiters.is_empty();
        write(&mut st.out);
        st.queued += frames;
        for _ in 0..frames {
            let (tx, r) = oneshot::channel();
            st.waiters.push_back(tx);
            slot(r);
        }
        // Nothing else in flight: no batch to wait for. Enough queued: start the server on it.
        // What the socket does not take now is left for the connection's task, as is an error.
        if idle || st.queued >= FLUSH_AT {
            let _ = write_out(&mut st, &sock);
        }
        if !st.out.is_empty()
            && let Some(w) = st.io.take()
        {
            w.wake();
        }
        true
    }

    /// [`Self::enqueue`], connecting first if the socket is gone (one lock per command while
    /// connected).
    async fn send(
        &self,
        write: impl Fn(&mut Vec<u8>),
        frames: usize,
        mut slot: impl FnMut(oneshot::Receiver<RedisResult<Value>>),
    ) -> RedisResult<()> {
        if self.enqueue(&write, frames, &mut slot) {
            return Ok(());
        }
        self.ensure_connected().await?;
        if self.enqueue(&write, frames, &mut slot) {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::NotConnected, "the connection was lost").into())
        }
    }

    async fn reply(&self, rx: oneshot::Receiver<RedisResult<Value>>) -> RedisResult<Value> {
        match tokio::time::timeout(self.inner.timeouts.response, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the connection closed before the reply",
            )
            .into()),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no reply within {:?}", self.inner.timeouts.response),
            )
            .into()),
        }
    }
}

/// Writes what `out` holds without waiting, until it is empty (`Ok`) or the socket takes no
/// more (`WouldBlock`) or fails.
fn write_out(st: &mut State, sock: &Sock) -> io::Result<()> {
    while !st.out.is_empty() {
        match sock.try_write(&st.out) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                st.out.drain(..n);
            }
            Err(e) => return Err(e),
        }
    }
    st.queued = 0;
    Ok(())
}

impl Inner {
    /// One connect attempt (bounded by the connect timeout); on success the socket is
    /// installed and its task started.
    async fn attempt(&self) -> RedisResult<()> {
        let result = match tokio::time::timeout(self.timeouts.connect, self.dial()).await {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connect timed out after {:?}", self.timeouts.connect),
            )
            .into()),
        };
        let mut st = lock(&self.state);
        st.attempts += 1;
        match result {
            Ok(sock) => {
                let sock = Arc::new(sock);
                st.generation += 1;
                st.sock = Some(sock.clone());
                st.out.clear();
                st.queued = 0;
                st.last_failure = None;
                tokio::spawn(run(self.state.clone(), sock, st.generation));
                Ok(())
            }
            Err(e) => {
                st.last_failure = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Opens the socket and runs `AUTH`, `SELECT` and a `PING` on it.
    async fn dial(&self) -> RedisResult<Sock> {
        let sock = match &self.addr {
            Addr::Tcp(host, port) => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                s.set_nodelay(true)?;
                Sock::Tcp(s)
            }
            Addr::Unix(path) => Sock::Unix(tokio::net::UnixStream::connect(path).await?),
        };
        if let Some(password) = &self.password {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = &self.user {
                auth.arg(user);
            }
            auth.arg(password);
            exchange(&sock, &auth).await?;
        }
        if self.db != 0 {
            exchange(&sock, redis::cmd("SELECT").arg(self.db)).await?;
        }
        // A server that refuses the client (`ERR max number of clients reached`) says so on
        // accepting it: read that here, as a failed connect, not as some command's reply.
        exchange(&sock, &redis::cmd("PING")).await?;
        Ok(sock)
    }
}

/// Sends one command on a socket nobody else uses yet and reads its reply.
async fn exchange(sock: &Sock, cmd: &Cmd) -> RedisResult<Value> {
    let bytes = cmd.get_packed_command();
    let mut at = 0;
    while at < bytes.len() {
        match sock.try_write(&bytes[at..]) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                poll_fn(|cx| sock.poll_write_ready(cx)).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut buf = vec![0u8; 1024];
    let mut have = 0;
    loop {
        if let Some(len) = frame_len(&buf[..have])? {
            return decode(&buf[..len])?.extract_error();
        }
        if have == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match sock.try_read(&mut buf[have..]) {
            Ok(0) => return Err(eof().into()),
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                poll_fn(|cx| sock.poll_read_ready(cx)).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn eof() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the connection",
    )
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("bad reply: {what}"))
}

/// The length of the first complete reply in `buf` (`None`: not all there yet), read by the
/// one frame reader ([`super::frame`]).
fn frame_len(buf: &[u8]) -> io::Result<Option<usize>> {
    super::frame::frame_len(buf).map_err(|e| invalid(e.0))
}

/// One complete reply as redis-rs's value: the lock cycle's replies (`+OK`, `:n`, `$-1`)
/// directly, anything else through redis-rs's parser.
pub(crate) fn decode(frame: &[u8]) -> RedisResult<Value> {
    match frame {
        b"+OK\r\n" => return Ok(Value::Okay),
        b"$-1\r\n" | b"_\r\n" | b"*-1\r\n" => return Ok(Value::Nil),
        [b':', digits @ .., b'\r', b'\n'] => {
            if let Some(n) = std::str::from_utf8(digits)
                .ok()
                .and_then(|s| s.parse().ok())
            {
                return Ok(Value::Int(n));
            }
        }
        _ => {}
    }
    redis::parse_redis_value(frame)
}

/// How the connection's task ended.
enum Turn {
    /// Every clone is gone.
    Closed,
    /// The socket failed.
    Failed(io::Error),
}

/// The connection's task: writes what is queued, reads replies and hands them out in order,
/// until the socket fails or every clone is gone.
async fn run(state: Arc<Mutex<State>>, sock: Arc<Sock>, generation: u64) {
    let mut ending = Ending {
        state: state.clone(),
        generation,
        error: None,
    };
    let mut buf = vec![0u8; 16 * 1024];
    let mut have = 0;
    match poll_fn(|cx| turn(cx, &state, &sock, generation, &mut buf, &mut have)).await {
        Turn::Closed => ending.generation = 0,
        Turn::Failed(e) => ending.error = Some(e),
    }
}

/// Fails the commands in flight and forgets the socket when its task ends with it broken —
/// also if the task itself failed (a panic), so that no command waits for replies nobody
/// reads and the next one connects again.
struct Ending {
    state: Arc<Mutex<State>>,
    /// 0: the task ended because every clone is gone (generations start at 1).
    generation: u64,
    error: Option<io::Error>,
}

impl Drop for Ending {
    fn drop(&mut self) {
        if self.generation == 0 {
            return;
        }
        let e = self
            .error
            .take()
            .unwrap_or_else(|| io::Error::other("the connection's task ended unexpectedly"));
        let mut st = lock(&self.state);
        if st.generation == self.generation {
            st.sock = None;
            st.out.clear();
            st.queued = 0;
            for w in st.waiters.drain(..) {
                let _ = w.send(Err(io::Error::new(e.kind(), e.to_string()).into()));
            }
        }
    }
}

fn turn(
    cx: &mut Context<'_>,
    state: &Mutex<State>,
    sock: &Sock,
    generation: u64,
    buf: &mut Vec<u8>,
    have: &mut usize,
) -> Poll<Turn> {
    let mut st = lock(state);
    if st.closed || st.generation != generation {
        return Poll::Ready(Turn::Closed);
    }
    loop {
        match write_out(&mut st, sock) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => match sock.poll_write_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Turn::Failed(e)),
                Poll::Pending => break,
            },
            Err(e) => return Poll::Ready(Turn::Failed(e)),
        }
    }
    st.io = Some(cx.waker().clone());
    drop(st);
    loop {
        match sock.poll_read_ready(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(e)) => return Poll::Ready(Turn::Failed(e)),
            Poll::Ready(Ok(())) => {}
        }
        if *have == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match sock.try_read(&mut buf[*have..]) {
            Ok(0) => return Poll::Ready(Turn::Failed(eof())),
            Ok(n) => {
                *have += n;
                // Their workers run when this task returns; it reads on until the socket
                // has nothing more (which also re-arms its readiness).
                if let Err(e) = hand_out(state, generation, buf, have) {
                    return Poll::Ready(Turn::Failed(e));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Poll::Ready(Turn::Failed(e)),
        }
    }
}

/// Hands the complete replies at the start of `buf` to their commands, in order.
fn hand_out(
    state: &Mutex<State>,
    generation: u64,
    buf: &mut [u8],
    have: &mut usize,
) -> io::Result<()> {
    let mut at = 0;
    let mut st = lock(state);
    if st.generation != generation {
        return Ok(());
    }
    while let Some(len) = frame_len(&buf[at..*have])? {
        let frame = &buf[at..at + len];
        at += len;
        let Some(w) = st.waiters.pop_front() else {
            return Err(invalid("a reply to no command"));
        };
        // A dropped receiver (timed out, abandoned): the reply is read and dropped.
        let _ = w.send(decode(frame));
    }
    drop(st);
    buf.copy_within(at..*have, 0);
    *have -= at;
    Ok(())
}

impl redis::aio::ConnectionLike for PipeLink {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut rx = None;
            self.send(|out| cmd.write_packed_command(out), 1, |r| rx = Some(r))
                .await?;
            let Some(rx) = rx else {
                return Err(invalid("no reply slot").into());
            };
            self.reply(rx).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let packed = pipeline.get_packed_pipeline();
            let mut rx = Vec::with_capacity(offset + count);
            self.send(
                |out| out.extend_from_slice(&packed),
                offset + count,
                |r| rx.push(r),
            )
            .await?;
            let mut values = Vec::with_capacity(count);
            for (i, r) in rx.into_iter().enumerate() {
                let v = self.reply(r).await?;
                if i >= offset {
                    values.push(v);
                }
            }
            Ok(values)
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.db
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The link reports what the frame reader refuses as a bad reply, in its words.
    #[test]
    fn a_bad_frame_is_a_bad_reply() {
        let e = frame_len(b"?x\r\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(e.to_string(), "bad reply: an unknown type byte");
        assert_eq!(frame_len(b"+OK\r\n:1").unwrap(), Some(5));
    }

    #[test]
    fn replies_decode_as_redis_rs_decodes_them() {
        for frame in [
            &b"+OK\r\n"[..],
            b"+PONG\r\n",
            b"$-1\r\n",
            b":-1\r\n",
            b":42\r\n",
            b"$3\r\nabc\r\n",
            b"*2\r\n$1\r\nx\r\n:5\r\n",
            b"-NOSCRIPT No matching script\r\n",
        ] {
            assert_eq!(
                decode(frame).unwrap(),
                redis::parse_redis_value(frame).unwrap(),
                "{}",
                String::from_utf8_lossy(frame)
            );
        }
    }
}
