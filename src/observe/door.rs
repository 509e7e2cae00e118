//! The doors of an observed run: loopback listeners (the fault proxy's [`Loopback`]) that
//! forward every connection to the server through the observed streams
//! ([`super::stream`]), noting what the replies told into the [`Ledger`].
//!
//! One shared door (`--listen`, for services pointed at it by hand: each connection is a
//! client of its own) and one door per copy lockbench started (every connection of that copy
//! is the copy's: a connection pool is one client). Each connection is one task reading a
//! chunk, forwarding it, reading the next: a client that floods is held by TCP's own flow
//! control, and the requests in flight per connection are capped ([`MAX_IN_FLIGHT`]).

use super::ledger::Ledger;
use super::stream::{Broken, LockKeys, Queue, Replies, Requests};
use crate::faults::proxy::Loopback;
use crate::record::Outages;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
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
    /// Commands per client, counted per read (the ledger reads them at the end).
    commands: Mutex<Vec<(usize, Arc<AtomicU64>)>>,
    outage: Mutex<Outage>,
    /// Connections closed for a bad frame: the count and the first messages.
    pub(crate) broken: Mutex<(u64, Vec<String>)>,
    /// The first client number of the shared door's connections.
    pub(crate) first_free: usize,
    /// The schedule's `latency` and `partition`, when it has one ([`super::network`]).
    pub(crate) network: Option<Arc<super::network::Network>>,
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
            commands: Mutex::new(Vec::new()),
            outage: Mutex::new(Outage::default()),
            broken: Mutex::new((0, Vec::new())),
            first_free,
            network: None,
        }
    }

    /// Commands seen per client.
    pub(crate) fn commands(&self) -> std::collections::BTreeMap<usize, u64> {
        let mut m = std::collections::BTreeMap::new();
        for (c, n) in self
            .commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            *m.entry(*c).or_default() += n.load(Ordering::Relaxed);
        }
        m
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

    fn server_up(&self, up: bool) {
        let mut o = self.outage.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match (up, o.down_since) {
            (true, Some(t)) => {
                o.outages.ended += 1;
                o.outages.total_us += now.saturating_duration_since(t).as_micros() as u64;
                o.down_since = None;
            }
            (false, None) => o.down_since = Some(now),
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

/// One observed connection of `client`: connects upstream, then forwards both ways through
/// the observed streams until either side is done, or a frame breaks it (the client is told
/// why in an error reply). Returning drops both sockets.
async fn serve(client_sock: TcpStream, client: usize, shared: Arc<Shared>) {
    let who = match client.checked_sub(shared.first_free) {
        Some(n) => format!("connection {n}"),
        None => format!("copy {}", client + 1),
    };
    if client >= shared.first_free {
        shared.ledger.name_client(client, who.clone());
    }
    shared.ledger.connected(client);
    let counter = Arc::new(AtomicU64::new(0));
    shared
        .commands
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((client, counter.clone()));
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
            let mut c = client_sock;
            let msg = format!("-ERR lockbench observe: the server is unreachable: {e}\r\n");
            let _ = c.write_all(msg.as_bytes()).await;
            return;
        }
    };
    let _ = client_sock.set_nodelay(true);
    match server {
        ServerConn::Plain(s) => {
            let (r, w) = s.into_split();
            let hooks = (on_request, on_reply);
            forward(client_sock, r, w, hooks, client, &who, &counter, &shared).await
        }
        ServerConn::Tls(s) => {
            let (r, w) = tokio::io::split(*s);
            let hooks = (on_request, on_reply);
            forward(client_sock, r, w, hooks, client, &who, &counter, &shared).await
        }
    }
}

/// Forwards both ways between the client and the server's halves until either side is done,
/// or a frame breaks it; a network fault's hooks (requests', replies') hold or delay them.
#[allow(clippy::too_many_arguments)]
async fn forward(
    client_sock: TcpStream,
    mut server_r: impl AsyncRead + Unpin,
    mut server_w: impl AsyncWrite + Unpin,
    (mut on_request, mut on_reply): (Option<super::network::Hooks>, Option<super::network::Hooks>),
    client: usize,
    who: &str,
    counter: &AtomicU64,
    shared: &Shared,
) {
    let (mut client_r, mut client_w) = client_sock.into_split();
    let queue = Mutex::new(Queue::default());
    let drained = Notify::new();
    let keys = &shared.keys;
    let ledger = &shared.ledger;
    let to_server = async {
        let mut reqs = Requests::default();
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
            counter.fetch_add(reqs.commands - before, Ordering::Relaxed);
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
        let mut reps = Replies::default();
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
            let fed = reps.feed(&buf[..n], &queue, &mut out, |e, asked| {
                ledger.seen(client, e, asked)
            });
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
        Err(Broken(why)) => {
            shared.broke(who, &why);
            let msg = format!("-ERR lockbench observe: closing this connection: {why}\r\n");
            let _ = client_w.write_all(msg.as_bytes()).await;
        }
        // The server closed the connection: an outage if it cannot be reached again.
        Ok(true) => {
            if !shared.upstream.reachable().await {
                shared.server_up(false);
            }
        }
        Ok(false) => {}
    }
}
