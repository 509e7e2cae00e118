//! The doors of an observed run: loopback listeners (the fault proxy's [`Loopback`]) that
//! forward every connection to the server through the observed streams
//! ([`super::stream`]), noting what the replies told into the [`Ledger`].
//!
//! One shared door (`--listen`, for services pointed at it by hand: each connection is a
//! client of its own) and one door per copy lockbench started (every connection of that copy
//! is the copy's: a connection pool is one client). Each connection is one task reading a
//! chunk, forwarding it, reading the next: a client that floods is held by TCP's own flow
//! control, and the requests in flight per connection are capped ([`MAX_IN_FLIGHT`]; on the
//! shared line of [`crate::faults::mux`], the requests queued for the line are capped in bytes, and a
//! client that leaves more than [`crate::faults::mux::UNREAD_LIMIT`] of replies unread is closed).

use super::connections::Connection;
use super::ledger::Ledger;
use super::stream::{Broken, LockKeys, Queue, Replies, Requests};
use crate::faults::mux::{Delivery, Inbox, Mux};
use crate::faults::proxy::Loopback;
use crate::record::Outages;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Notify;

/// The most bytes one read takes.
const CHUNK_BYTES: usize = 64 * 1024;
/// Requests in flight on one connection (sent, reply not yet back) before the proxy stops
/// reading the client: a client that pipelines without reading its replies waits, instead of
/// growing the queue.
const MAX_IN_FLIGHT: usize = 64 * 1024;
/// Protocol errors kept with their messages.
const KEPT_ERRORS: usize = 20;

/// The server the doors forward to: its addresses, and TLS when `--redis` is `rediss://` (the
/// program's side stays plain TCP on loopback).
#[derive(Clone)]
pub(crate) struct Upstream {
    addrs: Arc<[SocketAddr]>,
    /// The connector (certificates checked as redis-rs checks them for lockbench's own
    /// `rediss://`: the system's roots, or `SSL_CERT_FILE`; none with `#insecure`) and the
    /// name the server's certificate must carry.
    tls: Option<(tokio_native_tls::TlsConnector, String)>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("addrs", &self.addrs)
            .field("tls", &self.tls.as_ref().map(|(_, name)| name))
            .finish()
    }
}

/// A connection to the server: plain, or TLS over TCP.
enum ServerConn {
    Plain(TcpStream),
    Tls(Box<tokio_native_tls::TlsStream<TcpStream>>),
}

impl Upstream {
    /// A plain `redis://` server at `addrs`.
    pub(crate) fn plain(addrs: Arc<[SocketAddr]>) -> Upstream {
        Upstream { addrs, tls: None }
    }

    /// A `rediss://` server at `addrs` whose certificate names `host` (`insecure`: no check of
    /// the certificate or the name, as `#insecure` means for redis-rs).
    pub(crate) fn tls(
        addrs: Arc<[SocketAddr]>,
        host: &str,
        insecure: bool,
    ) -> Result<Upstream, tokio_native_tls::native_tls::Error> {
        let connector = tokio_native_tls::native_tls::TlsConnector::builder()
            .danger_accept_invalid_certs(insecure)
            .danger_accept_invalid_hostnames(insecure)
            .build()?;
        Ok(Upstream {
            addrs,
            tls: Some((connector.into(), host.to_string())),
        })
    }

    /// A new connection to the server, TLS handshake done; `Err` says which step failed.
    async fn connect(&self) -> std::io::Result<ServerConn> {
        let tcp = TcpStream::connect(&self.addrs[..]).await?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => Ok(ServerConn::Plain(tcp)),
            Some((connector, host)) => match connector.connect(host, tcp).await {
                Ok(s) => Ok(ServerConn::Tls(Box::new(s))),
                Err(e) => Err(std::io::Error::other(format!(
                    "the TLS handshake failed: {e}"
                ))),
            },
        }
    }

    /// The server's addresses when it is plain TCP (`None`: TLS).
    pub(crate) fn plain_addrs(&self) -> Option<Arc<[SocketAddr]>> {
        self.tls.is_none().then(|| self.addrs.clone())
    }

    /// Whether the server accepts a TCP connection (a handshake is not tried).
    async fn reachable(&self) -> bool {
        TcpStream::connect(&self.addrs[..]).await.is_ok()
    }

    /// Checked once before the run: `Err` when the server answers TCP but its TLS handshake
    /// fails (a certificate or name that does not verify is the user's setting, not an
    /// outage). A server that is down is not an error here: its outage is counted.
    pub(crate) async fn check(&self) -> Result<(), String> {
        if self.tls.is_none() || !self.reachable().await {
            return Ok(());
        }
        match self.connect().await {
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// What every door shares: the server, the ledger, the lock keys, and what went wrong.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) upstream: Upstream,
    pub(crate) keys: LockKeys,
    pub(crate) ledger: Arc<Ledger>,
    outage: Mutex<Outage>,
    /// Connections closed for a bad frame: the count and the first messages.
    pub(crate) broken: Mutex<(u64, Vec<String>)>,
    /// The first client number of the shared door's connections.
    pub(crate) first_free: usize,
    /// The schedule's `latency` and `partition`, when it has one ([`super::network`]).
    pub(crate) network: Option<Arc<super::network::Network>>,
    /// The shared server connection (`--server-connections shared`, a plain server, no
    /// network faults); `None`: every connection has its own.
    pub(crate) mux: Option<Mux>,
}

/// The server's outages as the doors saw them.
#[derive(Debug, Default)]
struct Outage {
    down_since: Option<Instant>,
    outages: Outages,
}

impl Shared {
    /// Doors' state for `upstream`; clients from `first_free` on are the shared door's.
    pub(crate) fn new(
        upstream: Upstream,
        keys: LockKeys,
        ledger: Arc<Ledger>,
        first_free: usize,
    ) -> Shared {
        Shared {
            upstream,
            keys,
            ledger,
            outage: Mutex::new(Outage::default()),
            broken: Mutex::new((0, Vec::new())),
            first_free,
            network: None,
            mux: None,
        }
    }

    /// The outages at `end` (one still open counts to `end`).
    pub(crate) fn outages(&self, end: Instant) -> Outages {
        let o = self.outage.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = o.outages;
        if let Some(t) = o.down_since {
            out.open_at_end = true;
            out.total_us += end.saturating_duration_since(t).as_micros() as u64;
        }
        out
    }

    /// Notes whether the server answered; the clock is read only when that changes (every
    /// batch a client sends on the shared line says the server is up).
    fn server_up(&self, up: bool) {
        let mut o = self.outage.lock().unwrap_or_else(|p| p.into_inner());
        match (up, o.down_since) {
            (true, Some(t)) => {
                o.outages.ended += 1;
                o.outages.total_us += t.elapsed().as_micros() as u64;
                o.down_since = None;
            }
            (false, None) => o.down_since = Some(Instant::now()),
            _ => {}
        }
    }

    fn broke(&self, who: &str, why: &str) {
        let msg = format!("{who}: connection closed: {why}");
        eprintln!("lockbench observe: {msg}");
        let mut b = self.broken.lock().unwrap_or_else(|p| p.into_inner());
        b.0 += 1;
        if b.1.len() < KEPT_ERRORS {
            b.1.push(msg);
        }
    }
}

/// A door: a listener whose connections are client `client`'s (a copy's door), or each a
/// client of its own (the shared door). Dropping it closes its connections.
pub(crate) struct Door {
    listener: Loopback,
}

impl Door {
    /// Listens on `at`; `copy` is the client every connection is (`None`: the shared door).
    pub(crate) async fn start(
        at: SocketAddr,
        copy: Option<usize>,
        shared: Arc<Shared>,
    ) -> std::io::Result<Door> {
        let listener = Loopback::start_on(at, move |socket, n| {
            let client = copy.unwrap_or(shared.first_free + n as usize);
            serve(socket, client, shared.clone())
        })
        .await?;
        Ok(Door { listener })
    }

    /// The address clients connect to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.listener.addr()
    }
}

/// A connection's streams, kept when it leaves the shared line for a connection of its own.
#[derive(Default)]
struct Streams {
    reqs: Requests,
    reps: Replies,
    queue: Mutex<Queue>,
}

/// How a connection's forwarding ended.
enum End {
    /// The client is gone.
    Client,
    /// The server closed the connection (or the shared line failed).
    Server,
    /// A frame broke the stream: the client is told why.
    Broken(String),
    /// No server connection could be opened: the client is told why.
    Unreachable(String),
}

/// One observed connection of `client`: on the shared line while its requests allow
/// ([`crate::faults::mux`]), else (or from its first request that needs one) on a server connection of
/// its own, until either side is done or a frame breaks it (the client is told why in an error
/// reply). Returning drops both sockets.
async fn serve(client_sock: TcpStream, client: usize, shared: Arc<Shared>) {
    let who = match client.checked_sub(shared.first_free) {
        Some(n) => format!("connection {n}"),
        None => format!("copy {}", client + 1),
    };
    if client >= shared.first_free {
        shared.ledger.name_client(client, who.clone());
    }
    let _ = client_sock.set_nodelay(true);
    // Held until the connection ends (with a copy of its descriptor).
    let conn = {
        use std::os::fd::AsFd;
        let fd = client_sock.as_fd().try_clone_to_owned().ok();
        shared.ledger.connection(client, fd)
    };
    let (mut client_r, mut client_w) = client_sock.into_split();
    let mut streams = Streams::default();
    let mut first = Vec::new();
    if let Some(mux) = &shared.mux {
        let io = (&mut client_r, &mut client_w);
        match on_the_line(io, mux, &mut streams, client, &conn, &shared).await {
            Ok(requests) => {
                mux.own_connections.fetch_add(1, Ordering::Relaxed);
                first = requests;
            }
            Err(end) => return ended(end, &mut client_w, &who, &shared).await,
        }
    }
    // A network fault's hooks, one set per direction: a partition holds the connection too.
    let hooks = || shared.network.as_ref().map(|n| n.hooks());
    let (mut on_request, on_reply) = (hooks(), hooks());
    if let Some(h) = &mut on_request {
        h.pass().await;
    }
    let server = match shared.upstream.connect().await {
        Ok(s) => {
            shared.server_up(true);
            s
        }
        Err(e) => {
            shared.server_up(false);
            let end = End::Unreachable(e.to_string());
            return ended(end, &mut client_w, &who, &shared).await;
        }
    };
    let client_io = (client_r, &mut client_w);
    let hooks = (on_request, on_reply);
    let end = match server {
        ServerConn::Plain(s) => {
            let (r, w) = s.into_split();
            let server_io = (r, w, first);
            forward(client_io, server_io, hooks, streams, client, &conn, &shared).await
        }
        ServerConn::Tls(s) => {
            let (r, w) = tokio::io::split(*s);
            let server_io = (r, w, first);
            forward(client_io, server_io, hooks, streams, client, &conn, &shared).await
        }
    };
    ended(end, &mut client_w, &who, &shared).await
}

/// What follows a connection's end: a broken stream is told to the client and kept; a server
/// that closed it is an outage if it cannot be reached again.
async fn ended(end: End, client_w: &mut OwnedWriteHalf, who: &str, shared: &Shared) {
    match end {
        End::Broken(why) => {
            shared.broke(who, &why);
            let msg = format!("-ERR lockbench observe: closing this connection: {why}\r\n");
            let _ = client_w.write_all(msg.as_bytes()).await;
        }
        End::Server => {
            if !shared.upstream.reachable().await {
                shared.server_up(false);
            }
        }
        End::Unreachable(e) => {
            let msg = format!("-ERR lockbench observe: the server is unreachable: {e}\r\n");
            let _ = client_w.write_all(msg.as_bytes()).await;
        }
        End::Client => {}
    }
}

/// Forwards `client`'s requests on the shared line and its replies back until a request needs
/// a connection of its own: then, once every reply owed on the line has reached the client,
/// returns the requests still to send (the batch that held that request; a RESP3 client's
/// `HELLO 3` first). `Err`: the connection ended. Requests and replies go concurrently, as in
/// [`forward`]: a client that writes a long pipeline before it reads is read on while its
/// replies wait in its inbox (up to [`crate::faults::mux::UNREAD_LIMIT`]).
async fn on_the_line(
    (client_r, client_w): (&mut OwnedReadHalf, &mut OwnedWriteHalf),
    mux: &Mux,
    streams: &mut Streams,
    client: usize,
    conn: &Connection,
    shared: &Shared,
) -> Result<Vec<u8>, End> {
    let inbox = Arc::new(Inbox::default());
    let Streams { reqs, reps, queue } = streams;
    let queue = &*queue;
    reqs.server_refuses_maint = mux.server_refuses_maint();
    let (keys, ledger) = (&shared.keys, &shared.ledger);
    // Replies owed to this client on the line; `delivered` tells the reading side it fell.
    let owed = AtomicUsize::new(0);
    let delivered = Notify::new();
    let owed_at_most = async |most: usize| loop {
        let wait = delivered.notified();
        if owed.load(Ordering::Relaxed) <= most {
            return;
        }
        wait.await;
    };
    let writing = async {
        let (mut replies, mut back) = (Delivery::default(), Vec::with_capacity(CHUNK_BYTES));
        loop {
            inbox.take(&mut replies).await;
            if replies.overflowed {
                let mib = crate::faults::mux::UNREAD_LIMIT >> 20;
                let why = format!("more than {mib} MiB of its replies waited unread");
                return Err(End::Broken(why));
            }
            back.clear();
            let answered = reps.answered;
            let fed = reps.feed(&replies.bytes, queue, &mut back, |e, asked| {
                ledger.seen(client, e, asked)
            });
            ledger.answered(conn, reps.answered - answered);
            if client_w.write_all(&back).await.is_err() {
                return Err(End::Client);
            }
            // Owed until written: the reading side hands over only then.
            owed.fetch_sub(replies.frames, Ordering::Relaxed);
            delivered.notify_one();
            fed.map_err(|Broken(why)| End::Broken(why))?;
            if replies.closed {
                return Err(End::Server);
            }
        }
    };
    let reading = async {
        let (mut buf, mut out) = (vec![0; CHUNK_BYTES], Vec::with_capacity(CHUNK_BYTES));
        // The protocol of the line this client is on.
        let mut on_resp3 = false;
        loop {
            owed_at_most(MAX_IN_FLIGHT).await;
            let n = match client_r.read(&mut buf).await {
                Ok(0) | Err(_) => return Err(End::Client),
                Ok(n) => n,
            };
            out.clear();
            let before = reqs.commands;
            let fed = reqs.feed(&buf[..n], keys, queue, &mut out);
            conn.asked(reqs.commands - before);
            if reqs.needs_own {
                if reqs.waits && before > 0 {
                    waited_after_line(mux);
                }
                owed_at_most(0).await;
                // A bad frame after good requests: none is sent, the connection closes.
                fed.map_err(|Broken(why)| End::Broken(why))?;
                if on_resp3 {
                    let mut first = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n".to_vec();
                    first.append(&mut out);
                    let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                    q.expects.push_front(super::stream::Expect::Swallow);
                    return Ok(first);
                }
                return Ok(out);
            }
            // A client that changed its protocol: its replies owed on the other line first,
            // so that they reach it in order.
            if reqs.resp3 != on_resp3 {
                owed_at_most(0).await;
                on_resp3 = reqs.resp3;
            }
            let frames = frames_in(&out);
            if frames > 0 {
                if let Err(e) = mux.send(&out, frames, &inbox, on_resp3).await {
                    shared.server_up(false);
                    return Err(End::Unreachable(e.to_string()));
                }
                shared.server_up(true);
                owed.fetch_add(frames, Ordering::Relaxed);
            }
            fed.map_err(|Broken(why)| End::Broken(why))?;
        }
    };
    tokio::select! {
        r = reading => r,
        r = writing => r,
    }
}

/// A client handed its own connection at a `WAIT` or `WAITAOF` after requests on the line: the
/// new connection has written nothing, so the server answers at once, without waiting for the
/// writes the client made on the line. Counted, and said once on stderr.
fn waited_after_line(mux: &Mux) {
    if mux.waits_after_line.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!(
            "lockbench observe: a client sent WAIT/WAITAOF after writing on the shared server \
             connection: it waits for no write of its own (observe it with \
             --server-connections per-client)"
        );
    }
}

/// The complete requests in `bytes` (RESP arrays, as the line is sent only those).
fn frames_in(bytes: &[u8]) -> usize {
    let (mut n, mut at) = (0, 0);
    while let Ok(Some(len)) = crate::store::frame::frame_len(&bytes[at..]) {
        n += 1;
        at += len;
    }
    n
}

/// Forwards both ways between the client and the server's halves (first sending `first`,
/// requests already read) until either side is done, or a frame breaks it; a network fault's
/// hooks (requests', replies') hold or delay them.
async fn forward(
    (mut client_r, client_w): (OwnedReadHalf, &mut OwnedWriteHalf),
    (mut server_r, mut server_w, first): (impl AsyncRead + Unpin, impl AsyncWrite + Unpin, Vec<u8>),
    (mut on_request, mut on_reply): (Option<super::network::Hooks>, Option<super::network::Hooks>),
    streams: Streams,
    client: usize,
    conn: &Connection,
    shared: &Shared,
) -> End {
    let Streams {
        mut reqs,
        mut reps,
        queue,
    } = streams;
    let drained = Notify::new();
    let keys = &shared.keys;
    let ledger = &shared.ledger;
    let to_server = async {
        if server_w.write_all(&first).await.is_err() {
            return Ok(());
        }
        let (mut buf, mut out) = (vec![0; CHUNK_BYTES], Vec::with_capacity(CHUNK_BYTES));
        loop {
            let n = match client_r.read(&mut buf).await {
                Ok(0) | Err(_) => return Ok(()),
                Ok(n) => n,
            };
            if let Some(h) = &mut on_request {
                h.pass().await;
            }
            out.clear();
            let before = reqs.commands;
            let fed = reqs.feed(&buf[..n], keys, &queue, &mut out);
            conn.asked(reqs.commands - before);
            if server_w.write_all(&out).await.is_err() {
                return Ok(());
            }
            fed?;
            loop {
                let wait = drained.notified();
                let in_flight = queue.lock().unwrap_or_else(|p| p.into_inner()).in_flight();
                if in_flight <= MAX_IN_FLIGHT {
                    break;
                }
                wait.await;
            }
        }
    };
    let to_client = async {
        let (mut buf, mut out) = (vec![0; CHUNK_BYTES], Vec::with_capacity(CHUNK_BYTES));
        loop {
            let n = match server_r.read(&mut buf).await {
                Ok(0) | Err(_) => return Ok::<bool, Broken>(true),
                Ok(n) => n,
            };
            let read = on_reply.as_ref().map(|_| tokio::time::Instant::now());
            out.clear();
            // Noted before the client has the reply: a release is in the ledger when the
            // program's release returns.
            let answered = reps.answered;
            let fed = reps.feed(&buf[..n], &queue, &mut out, |e, asked| {
                ledger.seen(client, e, asked)
            });
            ledger.answered(conn, reps.answered - answered);
            drained.notify_one();
            if let (Some(h), Some(read)) = (&mut on_reply, read) {
                h.reply(read).await;
            }
            if client_w.write_all(&out).await.is_err() {
                return Ok(false);
            }
            fed?;
        }
    };
    let ended = tokio::select! {
        r = to_server => r.map(|()| false),
        r = to_client => r,
    };
    match ended {
        Err(Broken(why)) => End::Broken(why),
        Ok(true) => End::Server,
        Ok(false) => End::Client,
    }
}
