//! `observe --metrics ADDR`: the observed run's figures served live for Prometheus, by the
//! endpoint `run --metrics` serves ([`crate::metrics`]) under the same names where the figure
//! is the same — holds (`lockbench_sections_total`), overruns, wrongful deletes, refused
//! releases, holders open now, overlap — read from the ledger once a second, then replaced
//! by the summary's values, so the last scrape equals `summary.json`.

use super::door::Shared;
use crate::analysis::summary::Summary;
use crate::metrics::{Board, Endpoint, Labels, Live};
use crate::model::fault::Fault;
use crate::record::HistSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the board takes the ledger's figures (as `run`'s once a second).
const EVERY: Duration = Duration::from_secs(1);

/// A serving endpoint and the observed run's series on it.
pub(crate) struct LiveMetrics {
    endpoint: Endpoint,
    series: usize,
    windows: Vec<Fault>,
    updater: Option<tokio::task::JoinHandle<()>>,
}

impl LiveMetrics {
    /// Binds `--metrics` and begins the run's series: bad input (exit 2) when it cannot bind,
    /// before anything starts. `windows`: the server and network faults, whose
    /// `lockbench_fault_window` reads 1 while open.
    pub(crate) fn bind(
        addr: SocketAddr,
        allow_remote: bool,
        run_id: &str,
        windows: &[Fault],
    ) -> anyhow::Result<LiveMetrics> {
        let endpoint = Endpoint::start(addr, allow_remote)?;
        let labels = Labels {
            variant: "observed".into(),
            server: String::new(),
            run_id: run_id.to_string(),
            agent: None,
        };
        let kinds: Vec<String> = windows.iter().map(|f| f.kind.to_string()).collect();
        // The TTL is the program's, known from its first acquisition ([`Board::set_ttl`]).
        let series = endpoint.board.begin(&labels, 0, &kinds);
        Ok(LiveMetrics {
            endpoint,
            series,
            windows: windows.to_vec(),
            updater: None,
        })
    }

    /// From `start` on, copies the doors' ledger's figures to the series once a second.
    pub(crate) fn follow(&mut self, shared: Arc<Shared>, start: Instant) {
        let board = self.endpoint.board.clone();
        let (series, windows) = (self.series, self.windows.clone());
        self.updater = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            loop {
                tick.tick().await;
                update(&board, series, &shared, &windows, start);
            }
        }));
    }

    /// Where it serves, `http://ADDR/metrics`.
    pub(crate) fn url(&self) -> String {
        self.endpoint.url()
    }

    /// The run ended: the series take the summary's values and final histograms.
    pub(crate) fn publish(&mut self, summary: &Summary, hists: &HistSet) {
        if let Some(u) = self.updater.take() {
            u.abort();
        }
        let ttl_ms = summary.meta.ttl_ms.max(1);
        self.endpoint.board.set_ttl(self.series, ttl_ms);
        self.endpoint.board.publish(self.series, summary, hists);
    }

    /// Closes the endpoint once the files are written (after a last scrape, when scraped and
    /// `wait`; see [`Endpoint::close`]).
    pub(crate) async fn close(mut self, wait: bool, say: bool) {
        if let Some(u) = self.updater.take() {
            u.abort();
        }
        self.endpoint.close(wait, say).await;
    }
}

/// Copies the ledger's figures so far onto the board.
fn update(board: &Board, series: usize, shared: &Shared, windows: &[Fault], start: Instant) {
    let now = Instant::now();
    let f = shared.ledger.live(now);
    let outages = shared.outages(now);
    let now_us = now.saturating_duration_since(start).as_micros() as u64;
    if f.ttl_max_us > 0 {
        board.set_ttl(series, f.ttl_max_us.div_ceil(1000));
    }
    board.live(
        series,
        &Live {
            counts: f.counts,
            errors: Vec::new(),
            outages: outages.ended,
            outage_us: outages.total_us,
            overlap_us: f.overlap.overlap_us,
            overlap_incidents: f.overlap.incidents,
            peak_holders: f.overlap.peak_holders,
            holders: f.holders,
            holders_max: f.holders_max,
            open_faults: (windows.iter())
                .filter(|w| w.covers(now_us))
                .map(|w| w.kind.to_string())
                .collect(),
        },
    );
    board.histograms(series, &f.hists);
}
