//! The watch: a forwarder between one holder's lock library and one lock server (on a Unix
//! socket of its own, or a loopback port: the fault proxy's [`Loopback`]), so lockbench knows
//! which holder sent each command and sees each reply. It changes nothing the library observes except one rewrite
//! ([`super::resp`]): a single-key `DEL` of a run's key goes out as `GETDEL`, so the value
//! removed names whose lock it was. Every holder's watch writes into one [`Ledger`] per
//! variant: the values each holder set, and what each holder's deletes removed.
//!
//! The watch never sends a command of its own, and never logs: AUTH and every other request
//! pass as they came (only keys of the run are kept, in the ledger).

use super::attribution::Ledger;
use super::mux::{Delivery, Inbox, Mux};
use super::proxy::{Loopback, accept_loop};
use super::resp::{Queue, Replies, Requests, Rules};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The most bytes one read takes.
const CHUNK_BYTES: usize = 16 * 1024;

/// A holder's watch on one server. Dropping it closes its connections (and removes its socket).
pub(crate) struct Watch {
    listener: Listener,
}

/// Where a watch listens for its holder's library.
enum Listener {
    /// A free loopback port.
    Tcp(Loopback),
    /// A Unix socket in the variant's [`SocketDir`]: the kernel skips TCP and IP, which at a
    /// thousand redis-semaphore holders spared lockbench 12–20 % of its CPU a lock cycle and
    /// the driver 7–18 % (`scripts/scale-bench.sh`).
    Unix(UnixLoopback),
}

/// A private directory (mode 0700) for a variant's watch sockets, removed when the last watch
/// that listens in it is dropped.
#[derive(Debug)]
pub(crate) struct SocketDir {
    path: std::path::PathBuf,
}

/// The longest socket path a `sockaddr_un` takes (108 bytes with its NUL, on Linux).
const MAX_SOCKET_PATH: usize = 107;

impl SocketDir {
    /// A new directory under the system's temporary directory; `None` where it cannot be made
    /// or its sockets' paths would be too long for a `sockaddr_un` (the watches then listen on
    /// loopback ports).
    pub(crate) fn new() -> Option<Arc<SocketDir>> {
        crate::store::spawn::remove_stale_dirs();
        SocketDir::under(&std::env::temp_dir())
    }

    /// [`SocketDir::new`] under `base`.
    fn under(base: &std::path::Path) -> Option<Arc<SocketDir>> {
        use std::os::unix::fs::DirBuilderExt;
        // A path the drivers read back as it is from a URL: absolute, and nothing a URL
        // would have to encode (a `%` or a space decoded differently by each parser).
        let plain = |p: &std::path::Path| {
            p.is_absolute()
                && p.to_str().is_some_and(|t| {
                    t.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
                })
        };
        if !plain(base) {
            return None;
        }
        for attempt in 0..8u32 {
            let nonce = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!(
                "lockbench-watch-{}-{nonce:08x}{attempt}",
                std::process::id()
            ));
            // "h<holder>-s<server>.sock" for a million holders and a hundred servers.
            if path.as_os_str().len() + "/h999999-s99.sock".len() > MAX_SOCKET_PATH {
                return None;
            }
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Some(Arc::new(SocketDir { path })),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(_) => return None,
            }
        }
        None
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A Unix socket listener serving each connection with its own task; dropping it ends them
/// all and removes the socket.
struct UnixLoopback {
    path: std::path::PathBuf,
    acceptor: tokio::task::JoinHandle<()>,
    _dir: Arc<SocketDir>,
}

impl Drop for UnixLoopback {
    fn drop(&mut self) {
        self.acceptor.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How the holders reached their watches, as the summary says it (`watch.reached_by`).
pub(crate) const BY_UNIX_SOCKET: &str = "unix socket";
/// See [`BY_UNIX_SOCKET`].
pub(crate) const BY_LOOPBACK_TCP: &str = "loopback tcp";
/// No watch on the wire: the holders' driver processes tap their own connections
/// ([`crate::client::driver::TapSpec`]).
pub(crate) const BY_DRIVER_TAP: &str = "driver tap";

/// The ways a watch's holder reaches it ([`Watch::start`]).
pub(crate) enum Listen {
    /// A free loopback port.
    Tcp,
    /// A Unix socket named `name` in `dir`.
    Unix(Arc<SocketDir>, String),
}

impl Watch {
    /// Forwards every connection to `upstream` (its addresses tried in order, as a client
    /// does) as holder `holder`'s, noting into `ledger`; on `mux`'s shared line while the
    /// connection's requests allow (`None`: each on a server connection of its own). The
    /// holder reaches it as `on` says.
    pub(crate) async fn start(
        on: Listen,
        upstream: Arc<[SocketAddr]>,
        holder: usize,
        rules: Rules,
        ledger: Arc<Ledger>,
        mux: Option<Arc<Mux>>,
    ) -> std::io::Result<Watch> {
        let serving = move |client_r, client_w| {
            serve(
                (client_r, client_w),
                upstream.clone(),
                holder,
                rules.clone(),
                ledger.clone(),
                mux.clone(),
            )
        };
        let listener = match on {
            Listen::Tcp => Listener::Tcp(
                Loopback::start(move |client: TcpStream, _| {
                    // RESP commands and replies are small: no Nagle delay of the watch's own.
                    let _ = client.set_nodelay(true);
                    let (r, w) = client.into_split();
                    serving(Box::new(r) as Reader, Box::new(w) as Writer)
                })
                .await?,
            ),
            Listen::Unix(dir, name) => {
                let path = dir.path.join(name);
                let listener = tokio::net::UnixListener::bind(&path)?;
                let serve = move |client: tokio::net::UnixStream, _| {
                    let (r, w) = client.into_split();
                    serving(Box::new(r) as Reader, Box::new(w) as Writer)
                };
                let accepted = Arc::new(std::sync::atomic::AtomicU64::new(0));
                let acceptor = tokio::spawn(accept_loop(listener, serve, accepted));
                Listener::Unix(UnixLoopback {
                    path,
                    acceptor,
                    _dir: dir,
                })
            }
        };
        Ok(Watch { listener })
    }

    /// `url` with its host and port replaced by the watch's (user, password, database and
    /// options kept); on a Unix socket, `unix://<path>?db=N` with the user and password as
    /// `username=` and `password=` (redis-py's form, which the drivers read). `None` for what
    /// the watch cannot carry (`rediss://`, a socket).
    pub(crate) fn url(&self, url: &str) -> Option<String> {
        match &self.listener {
            Listener::Tcp(l) => url_at(url, l.addr()),
            Listener::Unix(l) => unix_url_at(url, &l.path),
        }
    }
}

/// A connection's halves, whichever socket it came on.
type Reader = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Writer = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

/// `url`'s user, password and database on the Unix socket at `path`: `unix://<path>?db=N`
/// (`username=`, `password=` percent-encoded in the query: a URL without a host takes no
/// credentials). `None` for what a watch cannot carry.
fn unix_url_at(url: &str, path: &std::path::Path) -> Option<String> {
    let (url, _) = redis_url(url)?;
    let db = url.path().trim_start_matches('/');
    let decode = |t: &str| {
        percent_encoding::percent_decode_str(t)
            .decode_utf8()
            .map(|c| c.into_owned())
            .ok()
    };
    let username = match url.username() {
        "" => None,
        u => Some(decode(u)?),
    };
    let password = match url.password() {
        None => None,
        Some(p) => Some(decode(p)?),
    };
    crate::target::drivers_unix_url(
        path,
        if db.is_empty() { "0" } else { db },
        username.as_deref(),
        password.as_deref(),
    )
}

/// `url` with its host and port replaced by `addr` (user, password, database and options
/// kept); `None` for what a proxy cannot carry (`rediss://`, a socket).
pub(crate) fn url_at(url: &str, addr: SocketAddr) -> Option<String> {
    let (mut url, _) = redis_url(url)?;
    url.set_ip_host(addr.ip()).ok()?;
    url.set_port(Some(addr.port())).ok()?;
    Some(url.into())
}

/// A `redis://` URL read by the `url` crate, with the host it names (IP addresses without
/// brackets, as a resolver takes them); `None` for another scheme or no host.
fn redis_url(text: &str) -> Option<(url::Url, String)> {
    let url = url::Url::parse(text).ok()?;
    if url.scheme() != "redis" {
        return None;
    }
    let host = match url.host()? {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(a) => a.to_string(),
        url::Host::Ipv6(a) => a.to_string(),
    };
    (!host.is_empty()).then_some((url, host))
}

/// The addresses a `redis://` URL names, at its port or Redis's 6379 (`None`: another scheme,
/// or a name that does not resolve).
pub(crate) async fn upstream_of(url: &str) -> Option<Arc<[SocketAddr]>> {
    let (url, host) = redis_url(url)?;
    let port = url.port().unwrap_or(6379);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()?
        .collect();
    (!addrs.is_empty()).then(|| addrs.into())
}

/// One watched connection: on the holders' shared line ([`super::mux`]) while its
/// requests allow, else (or from its first request that needs one) on a server connection of
/// its own, forwarding both ways through the RESP streams until either side is done. Which
/// holder sent a request is known by the connection it came on, shared line or not: the
/// ledger's figures are the same either way. Returning drops both sockets.
async fn serve(
    (mut client_r, mut client_w): (Reader, Writer),
    upstream: Arc<[SocketAddr]>,
    holder: usize,
    rules: Rules,
    ledger: Arc<Ledger>,
    mux: Option<Arc<Mux>>,
) {
    let (mut reqs, mut reps) = (Requests::default(), Replies::default());
    let queue = Mutex::new(Queue::default());
    let (mut first, mut resp3) = (Vec::new(), false);
    if let Some(mux) = &mux {
        let io = (&mut client_r, &mut client_w);
        let streams = (&mut reqs, &mut reps, &queue);
        match on_the_line(io, mux, streams, &rules, holder, &ledger).await {
            Some(left) => (first, resp3) = left,
            None => return,
        }
        mux.own_connections.fetch_add(1, Ordering::Relaxed);
    }
    let Ok(server) = TcpStream::connect(&upstream[..]).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (mut server_r, mut server_w) = server.into_split();
    if resp3 && !hello3(&mut server_r, &mut server_w).await {
        return;
    }
    let to_server = async {
        if server_w.write_all(&first).await.is_err() {
            return;
        }
        let (mut buf, mut out) = (vec![0; CHUNK_BYTES], Vec::new());
        loop {
            let n = match client_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            out.clear();
            reqs.feed(&buf[..n], &rules, &queue, &mut out);
            if server_w.write_all(&out).await.is_err() {
                return;
            }
        }
    };
    let to_client = async {
        let (mut buf, mut out) = (vec![0; CHUNK_BYTES], Vec::new());
        loop {
            let n = match server_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            out.clear();
            // Noted before the client has the reply: a release's removal is in the ledger
            // when the library's release returns.
            reps.feed(&buf[..n], &queue, &mut out, |s| ledger.seen(holder, s));
            if client_w.write_all(&out).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = to_server => {}
        () = to_client => {}
    }
}

/// Opens a connection's own server connection in RESP3, as the client asked on the RESP3 line:
/// `HELLO 3` sent and its reply read here (the client had its answer on the line). `false`:
/// the server closed, or refused it.
async fn hello3(r: &mut OwnedReadHalf, w: &mut OwnedWriteHalf) -> bool {
    if w.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut reply = Vec::with_capacity(1024);
    loop {
        match crate::store::frame::frame_len(&reply) {
            Ok(Some(_)) => return reply[0] != b'-',
            Ok(None) => {}
            Err(_) => return false,
        }
        reply.reserve(1024);
        match r.read_buf(&mut reply).await {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

/// Forwards a holder's connection's requests on the shared line and its replies back until a
/// request needs a connection of its own: then, once every reply owed on the line has reached
/// the client, returns the requests still to send (the read that held that request) and whether
/// the client was on the RESP3 line (its own connection must be too). `None`:
/// the connection ends — the client left, the server is unreachable, or a line failed (every
/// connection on the line is closed, as the server's restart would have closed its own).
async fn on_the_line(
    (client_r, client_w): (&mut Reader, &mut Writer),
    mux: &Mux,
    (reqs, reps, queue): (&mut Requests, &mut Replies, &Mutex<Queue>),
    rules: &Rules,
    holder: usize,
    ledger: &Ledger,
) -> Option<(Vec<u8>, bool)> {
    let inbox = Arc::new(Inbox::default());
    reqs.server_refuses_maint = mux.server_refuses_maint();
    let (mut buf, mut out) = (vec![0; CHUNK_BYTES], Vec::with_capacity(CHUNK_BYTES));
    let mut replies = Delivery::default();
    let mut back = Vec::with_capacity(CHUNK_BYTES);
    // Replies owed to this connection on the line, and that line's protocol.
    let (mut owed, mut on_resp3) = (0usize, false);
    // Puts the replies that came through the connection's streams (noting what they told
    // before the client has them) and on to the client.
    let mut deliver = async |replies: &Delivery, owed: &mut usize| -> Option<()> {
        *owed -= replies.frames;
        back.clear();
        reps.feed(&replies.bytes, queue, &mut back, |s| ledger.seen(holder, s));
        client_w.write_all(&back).await.ok()?;
        (!replies.closed).then_some(())
    };
    loop {
        tokio::select! {
            biased;
            // Owed or not: a line that fails closes every connection that sent on it.
            () = inbox.take(&mut replies) => deliver(&replies, &mut owed).await?,
            read = client_r.read(&mut buf) => {
                let n = match read {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => n,
                };
                out.clear();
                let before = reqs.commands;
                reqs.feed(&buf[..n], rules, queue, &mut out);
                // Its owed replies first, so that they reach the client in order: before
                // its own connection, or the other protocol's line.
                if reqs.needs_own || reqs.resp3 != on_resp3 {
                    while owed > 0 {
                        inbox.take(&mut replies).await;
                        deliver(&replies, &mut owed).await?;
                    }
                    if reqs.needs_own {
                        return Some((out, on_resp3));
                    }
                    on_resp3 = reqs.resp3;
                }
                let frames = usize::try_from(reqs.commands - before).unwrap_or(usize::MAX);
                if frames > 0 {
                    mux.send(&out, frames, &inbox, on_resp3).await.ok()?;
                    owed += frames;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::attribution::Removed;
    use crate::store::spawn::SpawnedRedis;

    /// The URL keeps its user, password, database and options; only the address changes.
    #[tokio::test]
    async fn urls_keep_everything_but_the_address() {
        let w = Watch::start(
            Listen::Tcp,
            Arc::from(Vec::new()),
            0,
            Rules {
                getdel: true,
                prefix: "lb:".into(),
            },
            Arc::new(Ledger::default()),
            None,
        )
        .await
        .unwrap();
        let Listener::Tcp(l) = &w.listener else {
            panic!("asked for a loopback port")
        };
        let at = l.addr();
        assert_eq!(
            w.url("redis://:pw@127.0.0.1:6379/2?x=1"),
            Some(format!("redis://:pw@{at}/2?x=1"))
        );
        assert_eq!(
            w.url("redis://u:p%40ss@h/0"),
            Some(format!("redis://u:p%40ss@{at}/0"))
        );
        assert_eq!(w.url("redis://h:1"), Some(format!("redis://{at}")));
        assert_eq!(w.url("rediss://h:1/0"), None);
        assert_eq!(w.url("unix:///tmp/redis.sock"), None);
        assert_eq!(w.url("redis:///0"), None);
        // On a Unix socket: the database and credentials go in the query, decoded once.
        let at = std::path::Path::new("/tmp/d/h1-s0.sock");
        assert_eq!(
            unix_url_at("redis://u:p%40ss@h:1/2", at).as_deref(),
            Some("unix:///tmp/d/h1-s0.sock?db=2&username=u&password=p%40ss")
        );
        assert_eq!(
            unix_url_at("redis://:pw@h:1", at).as_deref(),
            Some("unix:///tmp/d/h1-s0.sock?db=0&password=pw")
        );
        assert_eq!(unix_url_at("rediss://h:1/0", at), None);
        // What a query would misread is encoded: & + % = and a space.
        let url = unix_url_at("redis://:a%26b%2Bc%25d%3De%20f@h:1/0", at).unwrap();
        let parsed = url::Url::parse(&url).unwrap();
        let pw = parsed.query_pairs().find(|(k, _)| k == "password");
        assert_eq!(
            pw.map(|(_, v)| v.into_owned()).as_deref(),
            Some("a&b+c%d=e f"),
            "{url}"
        );
    }

    /// The sockets' directory is the user's alone (0700) and gone with the last watch in it;
    /// a temporary directory whose path a URL would have to encode, or a relative one, gives
    /// none (the watches take loopback ports).
    #[test]
    fn the_sockets_directory_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = SocketDir::under(tmp.path()).expect("a directory");
        let mode = std::fs::metadata(&dir.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        let path = dir.path.clone();
        drop(dir);
        assert!(!path.exists(), "left behind");
        let spaced = tmp.path().join("a b");
        std::fs::create_dir(&spaced).unwrap();
        assert!(SocketDir::under(&spaced).is_none());
        assert!(SocketDir::under(std::path::Path::new("relative")).is_none());
        assert_eq!(
            redis_url("redis://[::1]:7").map(|u| u.1),
            Some("::1".to_string())
        );
        assert_eq!(
            redis_url("redis://h").map(|u| (u.0.port(), u.1)),
            Some((None, "h".to_string()))
        );
    }

    /// Through two holders' watches on a real server, each on a server connection of its own
    /// and then both on one shared line: a SET NX is noted, holder 1's DEL of holder 0's lock
    /// answers `:1` as DEL does and is attributed to holder 1 with holder 0 as the victim;
    /// holder 0's later DEL finds nothing (`:0`); a DEL of two keys passes; own releases are
    /// released. Shared, the two holders' connections are one line at the server.
    #[tokio::test]
    async fn a_delete_of_another_s_lock_is_attributed() {
        let redis = SpawnedRedis::start().await.expect("redis-server on PATH");
        let up = upstream_of(&format!("redis://localhost:{}", redis.port()))
            .await
            .unwrap();
        for shared in [false, true] {
            let mux = shared.then(|| Arc::new(Mux::new(up.clone())));
            attributes_through(&up, mux.clone(), redis.port()).await;
            if let Some(mux) = mux {
                assert_eq!(mux.lines.load(Ordering::Relaxed), 1);
                assert_eq!(mux.own_connections.load(Ordering::Relaxed), 0);
            }
        }
        redis.stop().await;
    }

    async fn attributes_through(up: &Arc<[SocketAddr]>, mux: Option<Arc<Mux>>, port: u16) {
        let ledger = Arc::new(Ledger::default());
        let rules = Rules {
            getdel: true,
            prefix: "lb:".into(),
        };
        let mut conns = Vec::new();
        let mut watches = Vec::new();
        for holder in 0..2 {
            let w = Watch::start(
                Listen::Tcp,
                up.clone(),
                holder,
                rules.clone(),
                ledger.clone(),
                mux.clone(),
            )
            .await
            .unwrap();
            let url = w.url(&format!("redis://127.0.0.1:{port}/0")).unwrap();
            let c = redis::Client::open(url).unwrap();
            conns.push(c.get_multiplexed_async_connection().await.unwrap());
            watches.push(w);
        }
        let q = |args: &[&str]| {
            let mut c = redis::cmd(args[0]);
            for a in &args[1..] {
                c.arg(*a);
            }
            c
        };
        let _: i64 = q(&["DEL", "lb:k", "lb:a"])
            .query_async(&mut conns[0])
            .await
            .unwrap();
        let ok: Option<String> = q(&["SET", "lb:k", "t0", "NX", "PX", "10000"])
            .query_async(&mut conns[0])
            .await
            .unwrap();
        assert_eq!(ok.as_deref(), Some("OK"));
        let n: i64 = q(&["DEL", "lb:k"])
            .query_async(&mut conns[1])
            .await
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(ledger.release(1, "lb:k"), Some(Removed::Other(0)));
        let n: i64 = q(&["DEL", "lb:k"])
            .query_async(&mut conns[0])
            .await
            .unwrap();
        assert_eq!(n, 0);
        assert_eq!(ledger.release(0, "lb:k"), Some(Removed::Nothing));
        let _: () = q(&["SET", "lb:a", "1"])
            .query_async(&mut conns[0])
            .await
            .unwrap();
        let n: i64 = q(&["DEL", "lb:a", "lb:b"])
            .query_async(&mut conns[0])
            .await
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(ledger.release(0, "lb:a"), None, "a two-key DEL passes");
        let _: Option<String> = q(&["SET", "lb:k", "t1", "NX", "PX", "10000"])
            .query_async(&mut conns[1])
            .await
            .unwrap();
        let n: i64 = q(&["UNLINK", "lb:k"])
            .query_async(&mut conns[1])
            .await
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(ledger.release(1, "lb:k"), Some(Removed::Own));
        let t = ledger.tally();
        assert_eq!(t.getdels, 3);
        assert_eq!(t.attributed.len(), 1);
        assert_eq!(
            (t.attributed[0].deleter, t.attributed[0].victim),
            (1, Some(0))
        );
        assert_eq!(t.outside, 0);
        drop(watches);
    }
}
