//! What the steps of a variant hand each other: where it runs ([`VariantEnv`]), what
//! preparing it gave ([`Prepared`]) and what executing it gave ([`Executed`]).

use super::RunOptions;
use crate::analysis::summary::StopReason;
use crate::engine::collector::Collector;
use crate::engine::context::WorkerCtx;
use crate::engine::recorder::Recorder;
use crate::model::server::ServerInfo;
use crate::sim::part::SimPart;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;
use tokio::sync::watch;

/// Where a variant runs and what it reports to.
pub(crate) struct VariantEnv<'a> {
    /// The variant's name (with its server when several run).
    pub(crate) name: &'a str,
    pub(crate) dir: &'a Path,
    pub(crate) base: SystemTime,
    pub(crate) opts: &'a RunOptions,
    /// What the fault schedule breaks this variant's server with.
    pub(crate) control: &'a crate::faults::FaultControl,
    pub(crate) signals: watch::Receiver<u32>,
    pub(crate) server: &'a ServerInfo,
    /// Every key the variant may have written is added here, also when it fails.
    pub(crate) written_keys: &'a mut Vec<String>,
    /// The resource and fence keys of those, when the run has a resource.
    pub(crate) companion_keys: &'a mut Vec<String>,
    /// Live metrics: the board and this variant's series on it.
    pub(crate) metrics: Option<(Arc<crate::metrics::Board>, usize)>,
}

/// A variant ready to run: its connections open (connecting is not measured time), the
/// recorder and interval logs started, the workers' context built.
pub(crate) struct Prepared<C> {
    /// One per worker (or request slot); clones of the probe on a shared connection.
    pub(crate) conns: Vec<C>,
    /// A lock library's variant: each worker's driver process.
    pub(crate) libs: Vec<crate::engine::worker::Library>,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) collector: Collector,
    pub(crate) ctx: Arc<WorkerCtx>,
    /// The other parts of a simulated run in parts.
    pub(crate) others: Vec<SimPart<C>>,
    pub(crate) parts: usize,
    /// The simulator's virtual clock, on a simulated store.
    pub(crate) sim_clock: Option<Arc<AtomicU64>>,
    pub(crate) arrival_tx: Option<tokio::sync::mpsc::Sender<u64>>,
    pub(crate) arrival_rx: Option<tokio::sync::mpsc::Receiver<u64>>,
}

/// What running a variant's workers gave, in real or virtual time.
pub(crate) struct Executed {
    pub(crate) elapsed_s: f64,
    pub(crate) stop_reason: StopReason,
    pub(crate) panicked: Option<String>,
    pub(crate) crash_blocked_censored: u64,
    pub(crate) faults: Vec<crate::model::fault::FaultWindow>,
    /// A simulated run's executor figures.
    pub(crate) simulated: Option<crate::sim::Simulated>,
}
