//! Live metrics (`--metrics ADDR`): the run's figures served over HTTP for Prometheus while a
//! `run`, `compare` or `observe` goes, in the Prometheus text format (0.0.4), or OpenMetrics
//! when the scraper asks for it (`Accept: application/openmetrics-text`).
//!
//! - [`addr`]: what the address accepts (a port alone is loopback).
//! - [`table`]: which metric each figure becomes — from the one table of figures.
//! - [`board`]: the values served, one series per variant, set live and then from the
//!   variant's summary, so the last scrape equals `summary.json`.
//!
//! The listener is bound before the run starts (a taken port is bad input, exit 2), and the
//! endpoint stays up until the run's files are written ([`Endpoint::close`]).

pub(crate) mod addr;
pub(crate) mod board;
pub mod table;

pub use board::Board;
pub use board::Labels;
pub(crate) use board::Live;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The content type of OpenMetrics text.
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the endpoint could not start: bad input (exit 2), naming the flag.
#[derive(Debug, thiserror::Error)]
#[error("--metrics {addr}: {why}")]
pub(crate) struct MetricsError {
    /// The address asked for.
    pub addr: String,
    /// What is wrong and what would be valid.
    pub why: String,
}
crate::exit::classify!(MetricsError => BadInput);

#[derive(Debug)]
struct View(Arc<Board>);

impl Collector for View {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// Scrapes seen: how many, and when the last two came (ms since the endpoint started).
#[derive(Debug, Default)]
struct Scrapes {
    count: AtomicU64,
    last_ms: AtomicU64,
    gap_ms: AtomicU64,
}

/// A bound, serving metrics endpoint.
pub(crate) struct Endpoint {
    /// The values it serves.
    pub board: Arc<Board>,
    addr: SocketAddr,
    scrapes: Arc<Scrapes>,
    started: Instant,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The text of a scrape: OpenMetrics when `openmetrics`, else Prometheus text 0.0.4.
pub fn encode(board: &Arc<Board>, openmetrics: bool) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(View(board.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug in the board.
    let _ = if openmetrics {
        prometheus_client::encoding::text::encode(&mut out, &registry)
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
    };
    out
}

impl Endpoint {
    /// Binds `addr` (loopback unless `allow_remote`) and serves `/metrics` on the current
    /// runtime. Fails, as bad input naming `--metrics`, on a non-loopback address without
    /// `--allow-remote` and on an address that cannot be bound (taken, not this machine's).
    pub(crate) fn start(addr: SocketAddr, allow_remote: bool) -> Result<Endpoint, MetricsError> {
        let err = |why: String| MetricsError {
            addr: addr.to_string(),
            why,
        };
        if !allow_remote && !addr.ip().to_canonical().is_loopback() {
            return Err(err(
                "not a loopback address: metrics are served on 127.0.0.1 or ::1 unless you pass \
                 --allow-remote (e.g. --metrics 0.0.0.0:9464 --allow-remote in a pod)"
                    .into(),
            ));
        }
        let std_listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| {
                err(format!(
                    "cannot listen there: {e}; use a free port, or port 0 for any free one"
                ))
            })?;
        let listener = tokio::net::TcpListener::from_std(std_listener)
            .map_err(|e| err(format!("cannot listen there: {e}")))?;
        let bound = listener.local_addr().map_err(|e| err(e.to_string()))?;
        let board = Arc::new(Board::default());
        let scrapes = Arc::new(Scrapes::default());
        let started = Instant::now();
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(serve(
            listener,
            board.clone(),
            scrapes.clone(),
            started,
            stop_rx,
        ));
        Ok(Endpoint {
            board,
            addr: bound,
            scrapes,
            started,
            stop,
            task,
        })
    }

    /// Its URL, `http://ADDR/metrics`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Closes the endpoint once the run's files are written. When someone was scraping and
    /// `wait` (not after an interrupt), first waits (at most twice the interval seen between
    /// scrapes, 1–60 s) for one scrape after this call, so the last scrape holds the final
    /// values; `say` tells the terminal so.
    pub(crate) async fn close(self, wait: bool, say: bool) {
        let seen = self.scrapes.count.load(Relaxed);
        if seen > 0 && wait {
            if say {
                let gap = self.scrapes.gap_ms.load(Relaxed).clamp(500, 30_000);
                eprintln!(
                    "metrics: waiting up to {} s for a last scrape of the final values (Ctrl-C ends it)",
                    (2 * gap).div_ceil(1000)
                );
            }
            let gap = self.scrapes.gap_ms.load(Relaxed).clamp(500, 30_000);
            let deadline = tokio::time::Instant::now() + Duration::from_millis(2 * gap);
            let now_ms = self.started.elapsed().as_millis() as u64;
            while tokio::time::Instant::now() < deadline
                && self.scrapes.last_ms.load(Relaxed) <= now_ms
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    board: Arc<Board>,
    scrapes: Arc<Scrapes>,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                // A failed accept (out of descriptors) loses one scrape, not the run.
                Err(_) => continue,
            },
            _ = stop.wait_for(|s| *s) => break,
        };
        let (board, scrapes) = (board.clone(), scrapes.clone());
        conns.spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let r = respond(&req, &board);
                if req.uri().path() == "/metrics" {
                    let now = started.elapsed().as_millis() as u64;
                    let last = scrapes.last_ms.swap(now, Relaxed);
                    if scrapes.count.fetch_add(1, Relaxed) > 0 {
                        scrapes.gap_ms.store(now.saturating_sub(last), Relaxed);
                    }
                }
                async move { Ok::<_, std::convert::Infallible>(r) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await;
        });
        // Finished connections are reaped as they go.
        while conns.try_join_next().is_some() {}
    }
    conns.abort_all();
}

fn respond<B>(req: &Request<B>, board: &Arc<Board>) -> Response<Full<Bytes>> {
    let text = |status, ctype: &str, body: String| {
        Response::builder()
            .status(status)
            .header(hyper::header::CONTENT_TYPE, ctype)
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    match req.uri().path() {
        "/metrics" => {
            let open = req
                .headers()
                .get_all(hyper::header::ACCEPT)
                .iter()
                .any(|v| {
                    v.to_str()
                        .is_ok_and(|s| s.contains("application/openmetrics-text"))
                });
            if open {
                text(StatusCode::OK, OPENMETRICS, encode(board, true))
            } else {
                text(
                    StatusCode::OK,
                    prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    encode(board, false),
                )
            }
        }
        "/" => text(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "lockbench: metrics at /metrics\n".into(),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: metrics are at /metrics\n".into(),
        ),
    }
}
