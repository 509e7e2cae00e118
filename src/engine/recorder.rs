//! What a run records, in fixed memory.
//!
//! - Counters are atomics, read live by the progress bar.
//! - Histograms (HdrHistogram, microseconds, 3 significant figures) live in a few *stripes*
//!   behind plain mutexes: a worker records into stripe `worker % stripes`, so memory does not
//!   grow with the number of workers (a histogram per worker would cost ~100 KB each) and the
//!   mutexes are rarely contended. A collector thread drains the stripes once per interval into
//!   the interval logs (`.hlog`) and the run totals.
//! - Per-key [`KeyTracker`]s under mutexes: a worker takes its section's start and end
//!   timestamps *while holding* the key's mutex, so the tracker sees events in time order and
//!   the overlap figures are exact for the recorded intervals.
//! - One row per section goes through a bounded channel to a thread that streams `events.csv`.

use crate::overlap::{KeyTracker, OverlapStats};
use crate::store::{CmdError, ErrorKind};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use tokio::time::Instant;

/// A recorded distribution. All values in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Measured section duration *d*.
    Duration,
    /// Intended duration drawn from the distribution.
    Intended,
    /// Excess *d* − TTL of overruns.
    Excess,
    /// From first attempt to successful acquisition.
    AcquireLatency,
    /// Round trip of one `SET NX PX`.
    SetLatency,
    /// Round trip of one release command.
    ReleaseLatency,
    /// Measured minus intended duration (timer and scheduling error).
    TimerError,
    /// Length of each stretch with two or more holders.
    OverlapStretch,
}

impl Metric {
    /// Every metric, in file order.
    pub const ALL: [Metric; 8] = [
        Self::Duration,
        Self::Intended,
        Self::Excess,
        Self::AcquireLatency,
        Self::SetLatency,
        Self::ReleaseLatency,
        Self::TimerError,
        Self::OverlapStretch,
    ];

    /// File stem of its `.hgrm` / `.hlog` files.
    pub fn file_stem(self) -> &'static str {
        match self {
            Self::Duration => "durations",
            Self::Intended => "intended-durations",
            Self::Excess => "excess",
            Self::AcquireLatency => "acquire-latency",
            Self::SetLatency => "set-latency",
            Self::ReleaseLatency => "release-latency",
            Self::TimerError => "timer-error",
            Self::OverlapStretch => "overlap-stretch",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One histogram per metric.
#[derive(Debug, Clone)]
pub struct HistSet {
    hists: Vec<Histogram<u64>>,
}

impl Default for HistSet {
    fn default() -> Self {
        Self {
            hists: Metric::ALL.iter().map(|_| new_hist()).collect(),
        }
    }
}

/// An auto-resizing histogram: µs, 3 significant figures.
pub fn new_hist() -> Histogram<u64> {
    // new(3) only fails for sigfig > 5.
    Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant figures is valid"))
}

impl HistSet {
    /// Records a value (µs) of `m`.
    pub fn record(&mut self, m: Metric, us: u64) {
        // `record` grows an auto-resizing histogram; `saturating_record` would clamp instead.
        let h = &mut self.hists[m.index()];
        if h.record(us).is_err() {
            h.saturating_record(us);
        }
    }
    /// The histogram of `m`.
    pub fn get(&self, m: Metric) -> &Histogram<u64> {
        &self.hists[m.index()]
    }
    /// Adds every histogram of `other`.
    pub fn add(&mut self, other: &HistSet) {
        for (a, b) in self.hists.iter_mut().zip(&other.hists) {
            // Auto-resizing histograms accept any value, so add cannot fail.
            let _ = a.add(b);
        }
    }
    /// Empties every histogram, keeping its memory.
    pub fn reset(&mut self) {
        for h in &mut self.hists {
            h.reset();
        }
    }
}

/// Counters of a run (monotonic; read live).
#[derive(Debug, Default)]
pub struct Counters {
    /// Acquisition commands sent.
    pub attempts: AtomicU64,
    /// Successful acquisitions (sections begun).
    pub sections: AtomicU64,
    /// Sections whose release was sent (finished).
    pub finished: AtomicU64,
    /// Sections with d > TTL.
    pub overruns: AtomicU64,
    /// Sum of the excesses d − TTL of overruns, µs.
    pub excess_total_us: AtomicU64,
    /// Releases that found the holder's key gone.
    pub stale_releases: AtomicU64,
    /// Stale releases sent by a section with d ≤ TTL (the key's expiry counts from the
    /// server's SET, up to one round trip before the reply).
    pub stale_without_overrun: AtomicU64,
    /// Releases that found the key gone before it could have expired: another holder's naive
    /// `DEL` had removed it (only possible with `del`).
    pub deleted_by_other: AtomicU64,
    /// Token-checked releases refused: key absent.
    pub refused_expired: AtomicU64,
    /// Token-checked releases refused: another token present.
    pub refused_held_by_other: AtomicU64,
    /// Token-checked releases refused, class unknown (`delex`).
    pub refused_unclassified: AtomicU64,
    /// `del` releases that removed another holder's lock.
    pub wrongful_deletes: AtomicU64,
    /// `del` releases that found nothing to delete.
    pub nothing_deleted: AtomicU64,
    /// Releases that deleted the holder's own lock.
    pub released: AtomicU64,
    /// Attempts refused because the lock was busy (fail-fast).
    pub rejections: AtomicU64,
    /// Acquisitions abandoned after the retry policy's max wait.
    pub acquire_giveups: AtomicU64,
    /// Busy replies that led to a retry.
    pub retries: AtomicU64,
    /// Sections cut short by Ctrl-C or the end-of-run grace period.
    pub interrupted: AtomicU64,
    /// Sections that began while another holder of the same key was open (live view).
    pub overlap_incidents: AtomicU64,
    errors: [AtomicU64; 4],
}

impl Counters {
    /// Errors of `kind` so far.
    pub fn errors(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize].load(Relaxed)
    }
    /// All errors so far.
    pub fn total_errors(&self) -> u64 {
        ErrorKind::ALL.iter().map(|k| self.errors(*k)).sum()
    }
}

/// Shared recording state of one variant's run.
pub struct Recorder {
    /// Time zero of the run: every timestamp is µs since this instant.
    pub start: Instant,
    /// Live counters.
    pub counters: Counters,
    stripes: Vec<Mutex<HistSet>>,
    keys: Vec<Mutex<KeyTracker>>,
    /// One bit per key: an acquisition was sent for it (so cleanup deletes just those).
    touched: Vec<AtomicU64>,
    first_errors: Mutex<Vec<(ErrorKind, String)>>,
    health: Health,
}

/// Since when commands fail, and the outages so far: what the give-up rule and the outage
/// figures read. Kept apart from the counters because two of its fields are instants, not
/// counts.
#[derive(Debug)]
struct Health {
    /// µs of the first failed command since the last success ([`NONE`] while commands succeed).
    failing_since: AtomicU64,
    /// µs of the first connection or timeout failure since the last success ([`NONE`] when none).
    outage_since: AtomicU64,
    /// Outages ended by a successful command.
    outages: AtomicU64,
    /// Their total length, µs.
    outage_us: AtomicU64,
}

/// "No instant" in [`Health`].
const NONE: u64 = u64::MAX;

impl Default for Health {
    fn default() -> Self {
        Self {
            failing_since: AtomicU64::new(NONE),
            outage_since: AtomicU64::new(NONE),
            outages: AtomicU64::new(0),
            outage_us: AtomicU64::new(0),
        }
    }
}

/// Outages seen by a run: stretches in which the server could not be reached (connection or
/// timeout errors), each from its first failure to the next successful command.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Outages {
    /// Outages that ended (a later command succeeded).
    pub ended: u64,
    /// Their total length, µs, plus the length of one still open at the end.
    pub total_us: u64,
    /// Whether the run ended inside an outage.
    pub open_at_end: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; if something did, the data is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Recorder {
    /// A recorder for `keys` keys and `workers` workers, with time zero now.
    pub fn new(keys: usize, workers: usize) -> Self {
        let stripes = workers.clamp(1, 16);
        let stripes = (0..stripes)
            .map(|_| Mutex::new(HistSet::default()))
            .collect();
        let keys_trackers = (0..keys)
            .map(|_| Mutex::new(KeyTracker::default()))
            .collect();
        let touched = (0..keys.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        Self {
            // Time zero after the allocations: with millions of keys they take long enough to
            // eat a short run's whole length.
            start: Instant::now(),
            counters: Counters::default(),
            stripes,
            keys: keys_trackers,
            touched,
            first_errors: Mutex::new(Vec::new()),
            health: Health::default(),
        }
    }

    /// Marks `key` as possibly written (before its `SET` is sent).
    pub fn touch(&self, key: usize) {
        self.touched[key / 64].fetch_or(1 << (key % 64), Relaxed);
    }

    /// Keys that may have been written, in order.
    pub fn touched_keys(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, w) in self.touched.iter().enumerate() {
            let mut bits = w.load(Relaxed);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                out.push(i * 64 + b);
                bits &= bits - 1;
            }
        }
        out
    }

    /// µs since time zero.
    pub fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Records `us` into `m` for `worker`.
    pub fn record(&self, worker: usize, m: Metric, us: u64) {
        lock(&self.stripes[worker % self.stripes.len()]).record(m, us);
    }

    /// Records several values under one lock.
    pub fn record_all(&self, worker: usize, values: &[(Metric, u64)]) {
        let mut s = lock(&self.stripes[worker % self.stripes.len()]);
        for &(m, us) in values {
            s.record(m, us);
        }
    }

    /// A section of `key` opens now: returns its start (µs) and how many others were open.
    pub fn open_section(&self, key: usize) -> (u64, u32) {
        let mut k = lock(&self.keys[key]);
        let t = k.stamp(self.now_us());
        let others = k.open(t);
        if others > 0 {
            self.counters.overlap_incidents.fetch_add(1, Relaxed);
        }
        (t, others)
    }

    /// A section of `key` closes now: returns its end (µs).
    pub fn close_section(&self, worker: usize, key: usize) -> u64 {
        let (t, stretch) = {
            let mut k = lock(&self.keys[key]);
            let t = k.stamp(self.now_us());
            (t, k.close(t))
        };
        if let Some((from, to)) = stretch {
            self.record(worker, Metric::OverlapStretch, to - from);
        }
        t
    }

    /// Notes a command that succeeded: ends a failure streak and an outage.
    pub fn ok(&self) {
        let h = &self.health;
        // Two relaxed loads on the hot path; the swaps only run after a failure.
        if h.failing_since.load(Relaxed) != NONE {
            h.failing_since.store(NONE, Relaxed);
        }
        if h.outage_since.load(Relaxed) != NONE {
            let since = h.outage_since.swap(NONE, Relaxed);
            if since != NONE {
                h.outages.fetch_add(1, Relaxed);
                h.outage_us
                    .fetch_add(self.now_us().saturating_sub(since), Relaxed);
            }
        }
    }

    /// µs since the first failed command of the current failure streak, if commands are
    /// failing (no command succeeded since).
    pub fn failing_for_us(&self) -> Option<u64> {
        match self.health.failing_since.load(Relaxed) {
            NONE => None,
            since => Some(self.now_us().saturating_sub(since)),
        }
    }

    /// The outages so far.
    pub fn outages(&self) -> Outages {
        let h = &self.health;
        let open = h.outage_since.load(Relaxed);
        let open_us = match open {
            NONE => 0,
            since => self.now_us().saturating_sub(since),
        };
        Outages {
            ended: h.outages.load(Relaxed),
            total_us: h.outage_us.load(Relaxed) + open_us,
            open_at_end: open != NONE,
        }
    }

    /// Counts a failed command.
    pub fn error(&self, e: &CmdError) {
        self.counters.errors[e.kind as usize].fetch_add(1, Relaxed);
        let now = self.now_us();
        let h = &self.health;
        // First failure of a streak wins; later ones leave the instant alone.
        let _ = h
            .failing_since
            .compare_exchange(NONE, now, Relaxed, Relaxed);
        if matches!(e.kind, ErrorKind::Connection | ErrorKind::Timeout) {
            let _ = h.outage_since.compare_exchange(NONE, now, Relaxed, Relaxed);
        }
        let mut first = lock(&self.first_errors);
        if !first.iter().any(|(k, _)| *k == e.kind) {
            first.push((e.kind, e.detail.clone()));
        }
    }

    /// The first error message of each kind seen.
    pub fn first_errors(&self) -> Vec<(ErrorKind, String)> {
        lock(&self.first_errors).clone()
    }

    /// Overlap figures per key, and their merge.
    pub fn overlap(&self) -> (Vec<OverlapStats>, OverlapStats) {
        let per_key: Vec<OverlapStats> = self.keys.iter().map(|k| lock(k).stats()).collect();
        let mut all = OverlapStats::default();
        for k in &per_key {
            all.merge(k);
        }
        (per_key, all)
    }

    /// Moves everything recorded since the last drain into `into` and empties the stripes.
    pub fn drain_into(&self, into: &mut HistSet) {
        for s in &self.stripes {
            let mut s = lock(s);
            into.add(&s);
            s.reset();
        }
    }
}

/// One row of `events.csv`: one section.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct EventRow {
    /// Variant (release method) of the run.
    pub variant: String,
    /// Worker id.
    pub worker: usize,
    /// Key index.
    pub key: usize,
    /// The worker's section number (0-based): the n-th draw of its duration stream.
    pub seq: u64,
    /// First attempt sent (µs since run start).
    pub attempt_start_us: u64,
    /// The successful `SET` sent: the key's expiry at the server is at least TTL after this.
    #[serde(default)]
    pub set_sent_us: u64,
    /// Acquire reply received: the section begins.
    pub acquired_us: u64,
    /// Release sent: the section ends.
    pub released_us: u64,
    /// Duration drawn from the distribution.
    pub intended_us: u64,
    /// Measured duration *d*.
    pub duration_us: u64,
    /// TTL.
    pub ttl_us: u64,
    /// d > TTL.
    pub overrun: bool,
    /// d − TTL when positive.
    pub excess_us: u64,
    /// Other holders of the key open when this section began.
    pub holders_at_start: u32,
    /// Acquisition commands this section needed.
    pub attempts: u32,
    /// From first attempt to acquisition.
    pub acquire_latency_us: u64,
    /// Round trip of the release command.
    pub release_latency_us: u64,
    /// Release method.
    pub release: String,
    /// Reply class (`released`, `wrongful_delete`, `refused_expired`, … or `error_<kind>`).
    pub outcome: String,
    /// Cut short by Ctrl-C or the end-of-run grace period.
    pub interrupted: bool,
}
