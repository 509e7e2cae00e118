//! A loopback TCP proxy between lockbench and a Redis server, for the `latency` and
//! `partition` fault kinds.
//!
//! Every accepted connection gets its own upstream connection and two one-way pumps. A pump
//! is a reader and a writer joined by a bounded channel: the reader stamps each chunk with
//! its delivery time when it arrives, and the writer delivers the chunks one by one, in order,
//! each when its time has come and no partition is on. So a latency change applies to chunks
//! that arrive after it, a chunk is never delivered before an earlier one (as over TCP), and a
//! partition holds bytes instead of losing them: the RESP stream stays valid, only late.
//!
//! State changes reach the pumps through a `watch` channel and delivery times are
//! `sleep_until` deadlines: nothing polls.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, sleep, sleep_until};

/// The most bytes one read takes.
const CHUNK_BYTES: usize = 16 * 1024;
/// Chunks held per direction before the reader stops reading (then TCP's own flow control
/// holds the sender): at most 1 MiB per direction in memory.
const HELD_CHUNKS: usize = 64;
/// The pause after a failed `accept` (e.g. out of file descriptors): retrying at once would
/// spin, and a connection closing meanwhile frees a descriptor.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Far enough to never come, near enough to add to any instant.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The faults in force; every pump watches them.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    delay: Duration,
    jitter: Duration,
    partitioned: bool,
}

/// A running proxy. Dropping it stops accepting and closes every proxied connection.
pub struct Proxy {
    listener: Loopback,
    faults: watch::Sender<Faults>,
}

/// A listener on `127.0.0.1:0` whose every accepted connection is served by a task of its
/// own: the fault proxy's, and each holder's watch ([`super::watch`]). Dropping it stops
/// accepting and ends every connection's task (their sockets close with them).
pub(crate) struct Loopback {
    addr: SocketAddr,
    connections: Arc<AtomicU64>,
    /// The accept loop; it owns every connection's task, so aborting it ends them all.
    acceptor: JoinHandle<()>,
}

impl Loopback {
    /// Listens on a free loopback port (never a fixed one) and serves connection *n*
    /// (counted from 0) with `serve(socket, n)`.
    pub(crate) async fn start<F, Fut>(serve: F) -> std::io::Result<Loopback>
    where
        F: Fn(TcpStream, u64) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        Self::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), serve).await
    }

    /// [`Self::start`] on `at` (`lockbench observe --listen`; the caller checks it is loopback
    /// unless remote clients are allowed).
    pub(crate) async fn start_on<F, Fut>(at: SocketAddr, serve: F) -> std::io::Result<Loopback>
    where
        F: Fn(TcpStream, u64) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind(at).await?;
        let addr = listener.local_addr()?;
        let connections = Arc::new(AtomicU64::new(0));
        let acceptor = tokio::spawn(accept_loop(listener, serve, connections.clone()));
        Ok(Loopback {
            addr,
            connections,
            acceptor,
        })
    }

    /// The address clients connect to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub(crate) fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        // Dropping the aborted accept loop drops the listener and its JoinSet, which aborts
        // every connection task; their sockets close as those tasks are dropped.
        self.acceptor.abort();
    }
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and forwards every accepted connection to `upstream`.
    /// `seed` makes the jitter reproducible (connection *n* draws from its own stream).
    pub async fn start(upstream: SocketAddr, seed: u64) -> std::io::Result<Proxy> {
        let (faults, watching) = watch::channel(Faults::default());
        let listener = Loopback::start(move |client, n| {
            let rng = SmallRng::seed_from_u64(seed.wrapping_add(n));
            serve(client, upstream, watching.clone(), rng)
        })
        .await?;
        Ok(Proxy { listener, faults })
    }

    /// The address clients connect to instead of the server's.
    pub fn addr(&self) -> SocketAddr {
        self.listener.addr()
    }

    /// From now on every chunk the server sends is delivered `delay ± jitter` (uniform,
    /// clamped at 0) after it reached the proxy, and never before an earlier chunk of the same
    /// connection. `Duration::ZERO, Duration::ZERO` ends it. Chunks already read keep the
    /// delivery time they were given.
    pub fn set_latency(&self, delay: Duration, jitter: Duration) {
        self.faults.send_modify(|f| {
            f.delay = delay;
            f.jitter = jitter;
        });
    }

    /// On: nothing gets through in either direction; bytes already read are held and
    /// delivered in order when it ends, and new connections are accepted but connect
    /// upstream only then. Off: the held bytes go out and traffic flows again.
    pub fn set_partition(&self, on: bool) {
        self.faults.send_modify(|f| f.partitioned = on);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.listener.connections()
    }
}

impl super::Network for Proxy {
    fn set_latency(&self, delay: Duration, jitter: Duration) {
        Proxy::set_latency(self, delay, jitter);
    }

    fn set_partition(&self, on: bool) {
        Proxy::set_partition(self, on);
    }
}

/// A listener the accept loop serves: a loopback port, or a Unix socket (a library's watch).
pub(crate) trait Accept: Send + 'static {
    /// An accepted connection.
    type Stream: Send + 'static;
    /// The next connection.
    fn next(&self) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Accept for TcpListener {
    type Stream = TcpStream;
    async fn next(&self) -> std::io::Result<TcpStream> {
        self.accept().await.map(|(s, _)| s)
    }
}

impl Accept for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn next(&self) -> std::io::Result<tokio::net::UnixStream> {
        self.accept().await.map(|(s, _)| s)
    }
}

/// Accepts until aborted; reaps finished connections so the set stays small.
pub(crate) async fn accept_loop<L, F, Fut>(listener: L, serve: F, connections: Arc<AtomicU64>)
where
    L: Accept,
    F: Fn(L::Stream, u64) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.next() => match accepted {
                Ok(client) => {
                    let n = connections.fetch_add(1, Ordering::Relaxed);
                    conns.spawn(serve(client, n));
                }
                Err(_) => sleep(ACCEPT_BACKOFF).await,
            },
            Some(_) = conns.join_next() => {}
        }
    }
}

/// One proxied connection: connects upstream once no partition is on, then pumps both ways
/// until either side is done. Returning drops both sockets, so one side closing (or an I/O
/// error, or an upstream that refuses) closes the other.
async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    mut faults: watch::Receiver<Faults>,
    rng: SmallRng,
) {
    if faults.wait_for(|f| !f.partitioned).await.is_err() {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    // RESP commands and replies are small: do not let Nagle add delay of its own.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_r, client_w) = client.into_split();
    let (server_r, server_w) = server.into_split();
    let to_server = pump(client_r, server_w, faults.clone(), None);
    let to_client = pump(server_r, client_w, faults, Some(rng));
    tokio::select! {
        () = to_server => {}
        () = to_client => {}
    }
}

/// A chunk read and when it may be delivered.
struct Chunk {
    bytes: Vec<u8>,
    due: Instant,
}

/// Moves bytes one way: `latency` (the jitter's random stream) is given for the server's
/// replies only. Ends once the source is done and every chunk read is delivered, or as soon
/// as a write fails.
async fn pump(
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    faults: watch::Receiver<Faults>,
    latency: Option<SmallRng>,
) {
    let (tx, rx) = mpsc::channel(HELD_CHUNKS);
    let writer = deliver(rx, to, faults.clone());
    tokio::pin!(writer);
    tokio::select! {
        () = read(from, tx, faults, latency) => (&mut writer).await,
        () = &mut writer => {}
    }
}

/// Reads chunks and stamps each with its delivery time; returning drops `tx`, which tells
/// the writer that nothing more will come.
async fn read(
    mut from: OwnedReadHalf,
    tx: mpsc::Sender<Chunk>,
    faults: watch::Receiver<Faults>,
    mut latency: Option<SmallRng>,
) {
    let mut buf = vec![0; CHUNK_BYTES];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let now = Instant::now();
        let due = match latency.as_mut() {
            Some(rng) => {
                let f = *faults.borrow();
                let wait = delivery_delay(f.delay, f.jitter, rng);
                // A delay too long to add is as good as forever.
                now.checked_add(wait).unwrap_or(now + FOREVER)
            }
            None => now,
        };
        let chunk = Chunk {
            bytes: buf[..n].to_vec(),
            due,
        };
        if tx.send(chunk).await.is_err() {
            return;
        }
    }
}

/// Delivers chunks in the order read, each at its time and only while no partition is on.
async fn deliver(
    mut rx: mpsc::Receiver<Chunk>,
    mut to: OwnedWriteHalf,
    mut faults: watch::Receiver<Faults>,
) {
    while let Some(chunk) = rx.recv().await {
        sleep_until(chunk.due).await;
        // An error means the Proxy is gone.
        if faults.wait_for(|f| !f.partitioned).await.is_err() {
            return;
        }
        if to.write_all(&chunk.bytes).await.is_err() {
            return;
        }
    }
}

/// `delay ± jitter`, uniform, clamped at 0.
pub(crate) fn delivery_delay(delay: Duration, jitter: Duration, rng: &mut SmallRng) -> Duration {
    if jitter.is_zero() {
        return delay;
    }
    let off = rng.random_range(-1.0..=1.0) * jitter.as_secs_f64();
    Duration::try_from_secs_f64((delay.as_secs_f64() + off).max(0.0)).unwrap_or(FOREVER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::spawn::SpawnedRedis;
    use tokio::time::timeout;

    /// Long enough to show that nothing arrived (a check, not synchronisation).
    const QUIET: Duration = Duration::from_millis(200);
    /// Bound on waits for things that must happen.
    const SOON: Duration = Duration::from_secs(5);

    /// An upstream that hands every accepted socket to the test.
    async fn upstream() -> (SocketAddr, mpsc::UnboundedReceiver<TcpStream>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                if tx.send(s).is_err() {
                    return;
                }
            }
        });
        (addr, rx)
    }

    /// An upstream that echoes every byte back.
    async fn echo() -> SocketAddr {
        let (addr, mut accepted) = upstream().await;
        tokio::spawn(async move {
            while let Some(mut s) = accepted.recv().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn next_socket(accepted: &mut mpsc::UnboundedReceiver<TcpStream>) -> TcpStream {
        timeout(SOON, accepted.recv()).await.unwrap().unwrap()
    }

    async fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        timeout(SOON, s.read_exact(&mut buf))
            .await
            .unwrap()
            .unwrap();
        buf
    }

    /// Whether nothing can be read from `s` for [`QUIET`].
    async fn silent(s: &mut TcpStream) -> bool {
        let mut buf = [0; 64];
        timeout(QUIET, s.read(&mut buf)).await.is_err()
    }

    /// Whether `s` sees its connection closed (end of stream or an error) soon.
    async fn closed(s: &mut TcpStream) -> bool {
        let mut buf = [0; 64];
        matches!(timeout(SOON, s.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
    }

    async fn round_trip(c: &mut TcpStream, msg: &[u8]) -> Duration {
        let start = std::time::Instant::now();
        c.write_all(msg).await.unwrap();
        assert_eq!(read_n(c, msg.len()).await, msg);
        start.elapsed()
    }

    /// Bytes go through both ways unchanged, and the connection is counted.
    #[tokio::test]
    async fn passes_bytes_through_both_ways() {
        let (up, mut accepted) = upstream().await;
        let proxy = Proxy::start(up, 1).await.unwrap();
        assert_eq!(proxy.connections(), 0);
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut server = next_socket(&mut accepted).await;
        client.write_all(b"to the server").await.unwrap();
        assert_eq!(read_n(&mut server, 13).await, b"to the server");
        server.write_all(b"to the client").await.unwrap();
        assert_eq!(read_n(&mut client, 13).await, b"to the client");
        assert_eq!(proxy.connections(), 1);
    }

    /// PING and SET/GET through the proxy with redis-rs, and a partition across which a raw
    /// RESP command gets no reply until it ends, then the right one.
    #[tokio::test]
    async fn redis_through_the_proxy_and_a_partition() {
        let redis = SpawnedRedis::start().await.expect(
            "these tests need redis-server on PATH: install it with `apt-get install -y redis-server`",
        );
        let up = SocketAddr::from((Ipv4Addr::LOCALHOST, redis.port()));
        let proxy = Proxy::start(up, 1).await.unwrap();
        let client = redis::Client::open(format!("redis://{}", proxy.addr())).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        assert_eq!(pong, "PONG");
        let () = redis::cmd("SET")
            .arg("proxy:k")
            .arg("held")
            .query_async(&mut conn)
            .await
            .unwrap();

        let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
        // Connected upstream before the partition: what it holds is the command itself.
        raw.write_all(b"*1\r\n$4\r\nPING\r\n").await.unwrap();
        assert_eq!(read_n(&mut raw, 7).await, b"+PONG\r\n");
        proxy.set_partition(true);
        raw.write_all(b"*2\r\n$3\r\nGET\r\n$7\r\nproxy:k\r\n")
            .await
            .unwrap();
        assert!(silent(&mut raw).await, "a reply crossed the partition");
        proxy.set_partition(false);
        assert_eq!(read_n(&mut raw, 10).await, b"$4\r\nheld\r\n");
        assert_eq!(proxy.connections(), 2);
    }

    /// 50 ms of latency adds at least 50 ms to every round trip and not much more (it is added
    /// once, to the replies only); setting it to zero ends it.
    #[tokio::test]
    async fn latency_delays_replies_by_the_set_amount() {
        let proxy = Proxy::start(echo().await, 1).await.unwrap();
        let mut c = TcpStream::connect(proxy.addr()).await.unwrap();
        let delay = Duration::from_millis(50);
        proxy.set_latency(delay, Duration::ZERO);
        let mut fastest = Duration::MAX;
        for _ in 0..5 {
            let rtt = round_trip(&mut c, b"x").await;
            assert!(rtt >= delay, "round trip {rtt:?} under the added {delay:?}");
            fastest = fastest.min(rtt);
        }
        // Slack for a busy machine, but below a second 50 ms.
        assert!(fastest < delay + Duration::from_millis(35), "{fastest:?}");
        proxy.set_latency(Duration::ZERO, Duration::ZERO);
        let mut fastest = Duration::MAX;
        for _ in 0..5 {
            fastest = fastest.min(round_trip(&mut c, b"y").await);
        }
        assert!(
            fastest < Duration::from_millis(25),
            "latency not ended: {fastest:?}"
        );
    }

    /// With jitter far larger than the gap between writes, the delivery times drawn are out of
    /// order, yet the bytes arrive in the order sent.
    #[tokio::test]
    async fn jitter_keeps_the_order() {
        let proxy = Proxy::start(echo().await, 7).await.unwrap();
        proxy.set_latency(Duration::from_millis(20), Duration::from_millis(20));
        let mut c = TcpStream::connect(proxy.addr()).await.unwrap();
        let (mut r, mut w) = c.split();
        let sent: Vec<u8> = (0..100u32)
            .flat_map(|i| format!("{i:03};").into_bytes())
            .collect();
        let writes = async {
            // Pacing, so the replies reach the proxy as many chunks.
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            for msg in sent.chunks(4) {
                tick.tick().await;
                w.write_all(msg).await.unwrap();
            }
        };
        let mut got = vec![0; sent.len()];
        let reads = timeout(SOON, r.read_exact(&mut got));
        let ((), read) = tokio::join!(writes, reads);
        read.unwrap().unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(sent).unwrap()
        );
    }

    /// The delays drawn stay within `delay ± jitter`, are clamped at 0, spread over the range
    /// (not all equal), and repeat for the same seed.
    #[test]
    fn delivery_delays_are_uniform_and_clamped() {
        let ms = Duration::from_millis;
        let draw = |delay, jitter, seed| {
            let mut rng = SmallRng::seed_from_u64(seed);
            (0..1000)
                .map(|_| delivery_delay(delay, jitter, &mut rng))
                .collect::<Vec<_>>()
        };
        let d = draw(ms(20), ms(10), 3);
        assert!(d.iter().all(|&x| x >= ms(10) && x <= ms(30)));
        assert!(d.iter().any(|&x| x < ms(12)) && d.iter().any(|&x| x > ms(28)));
        assert_eq!(d, draw(ms(20), ms(10), 3));
        assert_ne!(d, draw(ms(20), ms(10), 4));
        let clamped = draw(ms(5), ms(10), 3);
        assert!(clamped.iter().all(|&x| x <= ms(15)));
        assert!(clamped.iter().filter(|x| x.is_zero()).count() > 100);
        assert_eq!(draw(ms(20), Duration::ZERO, 3), vec![ms(20); 1000]);
        assert_eq!(
            delivery_delay(Duration::MAX, ms(1), &mut SmallRng::seed_from_u64(1)),
            FOREVER
        );
    }

    /// During a partition nothing crosses in either direction; when it ends, what was held is
    /// delivered, once and in order.
    #[tokio::test]
    async fn partition_holds_both_directions_until_it_ends() {
        let (up, mut accepted) = upstream().await;
        let proxy = Proxy::start(up, 1).await.unwrap();
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut server = next_socket(&mut accepted).await;
        proxy.set_partition(true);
        client.write_all(b"req1").await.unwrap();
        client.write_all(b"req2").await.unwrap();
        assert!(
            silent(&mut server).await,
            "the request crossed the partition"
        );
        server.write_all(b"reply").await.unwrap();
        assert!(silent(&mut client).await, "the reply crossed the partition");
        proxy.set_partition(false);
        assert_eq!(read_n(&mut server, 8).await, b"req1req2");
        assert_eq!(read_n(&mut client, 5).await, b"reply");
        assert!(
            silent(&mut server).await && silent(&mut client).await,
            "duplicated bytes"
        );
    }

    /// A connection opened during a partition is accepted and counted but reaches the server
    /// only when the partition ends; then it works, with what it sent meanwhile.
    #[tokio::test]
    async fn a_connection_opened_during_a_partition_works_after() {
        let (up, mut accepted) = upstream().await;
        let proxy = Proxy::start(up, 1).await.unwrap();
        proxy.set_partition(true);
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        client.write_all(b"early").await.unwrap();
        assert!(
            timeout(QUIET, accepted.recv()).await.is_err(),
            "connected upstream"
        );
        assert_eq!(proxy.connections(), 1);
        proxy.set_partition(false);
        let mut server = next_socket(&mut accepted).await;
        assert_eq!(read_n(&mut server, 5).await, b"early");
        server.write_all(b"late").await.unwrap();
        assert_eq!(read_n(&mut client, 4).await, b"late");
    }

    /// The server closing closes the client's connection, and the other way round.
    #[tokio::test]
    async fn either_side_closing_closes_the_other() {
        let (up, mut accepted) = upstream().await;
        let proxy = Proxy::start(up, 1).await.unwrap();
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        drop(next_socket(&mut accepted).await);
        assert!(closed(&mut client).await);

        let client = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut server = next_socket(&mut accepted).await;
        drop(client);
        assert!(closed(&mut server).await);
    }

    /// An upstream that refuses the connection closes the client's.
    #[tokio::test]
    async fn a_refused_upstream_closes_the_client() {
        let gone = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let up = gone.local_addr().unwrap();
        drop(gone);
        let proxy = Proxy::start(up, 1).await.unwrap();
        let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(closed(&mut client).await);
    }

    /// Dropping the proxy closes both sides of its connections and stops accepting.
    #[tokio::test]
    async fn dropping_the_proxy_closes_everything() {
        let (up, mut accepted) = upstream().await;
        let proxy = Proxy::start(up, 1).await.unwrap();
        let addr = proxy.addr();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let mut server = next_socket(&mut accepted).await;
        assert_eq!(round_trip_via(&mut client, &mut server).await, b"hi");
        drop(proxy);
        assert!(closed(&mut client).await, "client connection still open");
        assert!(closed(&mut server).await, "server connection still open");
        assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
    }

    async fn round_trip_via(client: &mut TcpStream, server: &mut TcpStream) -> Vec<u8> {
        client.write_all(b"hi").await.unwrap();
        let got = read_n(server, 2).await;
        server.write_all(&got).await.unwrap();
        read_n(client, 2).await
    }
}
