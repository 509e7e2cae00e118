//! What a run records, in fixed memory.
//!
//! - Counters are atomics, read live by the progress bar.
//! - Histograms (HdrHistogram, microseconds, 3 significant figures) live in a few *stripes*
//!   behind plain mutexes: a worker records into stripe `worker % stripes`, so memory does not
//!   grow with the number of workers (a histogram per worker would cost ~100 KB each) and the
//!   mutexes are rarely contended. A collector thread drains the stripes once per interval into
//!   the interval logs (`.hlog`) and the run totals.
//! - Per-key [`KeyTracker`]s under mutexes: a worker's section start and end are stamped
//!   *while holding* the key's mutex — the clock read just before (the `SET`'s reply, the
//!   release's send), raised past the key's last event if need be ([`KeyTracker::stamp`]) —
//!   so the tracker sees events in time order and the overlap figures are exact for the
//!   recorded intervals.
//! - One row per section goes through a bounded channel to a thread that streams `events.csv`.

use crate::analysis::counts::LiveCounts;
use crate::analysis::overlap::{KeyTracker, OverlapStats};
use crate::analysis::summary::Measured;
use crate::model::error::{CmdError, ErrorKind};
use crate::record::{HistSet, Metric, Outages};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::time::Instant;

/// Counters of a run (monotonic; read live): the counted figures, plus what only the live
/// run needs — overlap incidents for the progress bar (the summary takes them from the exact
/// overlap) and failed commands by kind.
#[derive(Debug, Default)]
pub struct Counters {
    /// The counted figures.
    pub counts: LiveCounts,
    /// Sections that began while another holder of the same key was open (live view).
    pub overlap_incidents: AtomicU64,
    errors: [AtomicU64; 5],
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
    /// A simulated run's virtual clock, µs (`None`: the real clock, from `start`).
    virtual_now: Option<Arc<AtomicU64>>,
    /// Live counters.
    pub counters: Counters,
    stripes: Vec<Mutex<HistSet>>,
    keys: Vec<TrackerLine>,
    /// One bit per key: an acquisition was sent for it (so cleanup deletes just those).
    touched: Vec<AtomicU64>,
    first_errors: Mutex<Vec<(ErrorKind, String)>>,
    health: Health,
    /// Keys whose holder crashed while its lock was still set, with the crash instant (µs):
    /// the next acquisition of the key ends its blocked time. Crashes are rare, so a map
    /// behind a counter the hot path reads first.
    crashed: Mutex<std::collections::HashMap<usize, u64>>,
    pending_crashes: AtomicU64,
    /// A lock library's sections as recorded, per key (`None`: not kept). A library's section
    /// starts at its driver's stamp, and the stamps come in the order their `held` lines
    /// arrive — on a loaded machine not the order of the stamps — so the live trackers (a sweep
    /// in time order) see such an open at the key's last event at the earliest. The summary's
    /// overlap is then these intervals' [`compute`](crate::analysis::overlap::compute), as
    /// `report verify` computes it from events.csv; the trackers keep the live view.
    intervals: Option<Vec<Mutex<Intervals>>>,
}

/// A key's sections, `[start, end]` µs, in the order they closed.
type Intervals = Vec<(u64, u64)>;

/// A key's tracker under its mutex, alone on a cache line: a section's open and close each
/// read one line (sections pick keys at random among many, so each is a cache miss), and
/// neighbouring keys never share one.
#[derive(Debug, Default)]
#[repr(align(64))]
struct TrackerLine(Mutex<KeyTracker>);

const _: () = assert!(std::mem::size_of::<TrackerLine>() == 64);

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
        let keys_trackers = (0..keys).map(|_| TrackerLine::default()).collect();
        let touched = (0..keys.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        Self {
            // Time zero after the allocations: with millions of keys they take long enough to
            // eat a short run's whole length.
            start: Instant::now(),
            virtual_now: None,
            counters: Counters::default(),
            stripes,
            keys: keys_trackers,
            touched,
            first_errors: Mutex::new(Vec::new()),
            health: Health::default(),
            crashed: Mutex::new(Default::default()),
            pending_crashes: AtomicU64::new(0),
            intervals: None,
        }
    }

    /// Keeps every section's interval, per key, for the summary's overlap (a lock library's
    /// variant: its sections' starts are its drivers' stamps, which come out of order).
    pub fn keep_intervals(&mut self) {
        self.intervals = Some((0..self.keys.len()).map(|_| Mutex::default()).collect());
    }

    /// Notes a recorded section of `key`, `[from_us, to_us]`, when intervals are kept.
    pub fn log_section(&self, key: usize, from_us: u64, to_us: u64) {
        if let Some(k) = self.intervals.as_ref().and_then(|i| i.get(key)) {
            lock(k).push((from_us, to_us));
        }
    }

    /// The overlap figures of `key`: of its kept intervals, else its tracker's.
    fn key_stats(&self, key: usize) -> OverlapStats {
        match self.intervals.as_ref().and_then(|i| i.get(key)) {
            Some(k) => crate::analysis::overlap::compute(&lock(k)).0,
            None => lock(&self.keys[key].0).stats(),
        }
    }

    /// A recorder on a simulated run's virtual clock (µs, advanced by the simulator).
    /// One stripe: the simulation records from one thread.
    pub fn new_virtual(keys: usize, clock: Arc<AtomicU64>) -> Self {
        Self {
            virtual_now: Some(clock),
            ..Self::new(keys, 1)
        }
    }

    /// Where `key`'s tracker lives (for a prefetch: see [`crate::sim::exec::hint`]).
    pub fn key_line(&self, key: usize) -> *const u8 {
        self.keys
            .get(key)
            .map_or(std::ptr::null(), |k| std::ptr::from_ref(k).cast())
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

    /// `at`, an instant of the real clock, as µs on the run's clock (0 before its start): a
    /// driver's stamp mapped by [`crate::client::clock`].
    pub fn us_at(&self, at: std::time::Instant) -> u64 {
        at.saturating_duration_since(self.start.into_std())
            .as_micros() as u64
    }

    /// µs since time zero.
    pub fn now_us(&self) -> u64 {
        match &self.virtual_now {
            Some(v) => v.load(Relaxed),
            None => self.start.elapsed().as_micros() as u64,
        }
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

    /// A section of `key` opens at `now` (µs, just read): returns its start (µs: later if the
    /// key's last event was) and how many others were open.
    pub fn open_section(&self, key: usize, locked: bool, now: u64) -> (u64, u32) {
        let mut k = lock(&self.keys[key].0);
        let t = k.stamp(now);
        let others = k.open(t);
        drop(k);
        if others > 0 {
            self.counters.overlap_incidents.fetch_add(1, Relaxed);
        }
        // Only a real acquisition ends a crashed holder's blocking (fail-open takes no lock).
        if locked
            && self.pending_crashes.load(Relaxed) > 0
            && let Some(at) = lock(&self.crashed).remove(&key)
        {
            self.pending_crashes.fetch_sub(1, Relaxed);
            self.record(key, Metric::CrashBlocked, t.saturating_sub(at));
        }
        (t, others)
    }

    /// The holder of `key` dies at `now`, without releasing: its section closes (returns its end,
    /// µs). `lock_until_us` is when its lock would expire (`None`: no lock, or one that never
    /// expires). A lock still set blocks the key until the next acquisition; one already
    /// expired blocked nothing (0 is recorded).
    pub fn crash(
        &self,
        worker: usize,
        key: usize,
        lock_until_us: Option<u64>,
        held: bool,
        now: u64,
    ) -> u64 {
        let t = self.close_section(worker, key, now);
        if !held {
            return t;
        }
        match lock_until_us {
            Some(until) if until <= t => self.record(worker, Metric::CrashBlocked, 0),
            _ => {
                if lock(&self.crashed).insert(key, t).is_none() {
                    self.pending_crashes.fetch_add(1, Relaxed);
                }
            }
        }
        t
    }

    /// Ends the blocked time of keys nobody acquired after their holder's crash at the
    /// variant's end (a lower bound: they were still blocked). Returns how many.
    pub fn censor_crashes(&self) -> u64 {
        let now = self.now_us();
        let pending: Vec<(usize, u64)> = lock(&self.crashed).drain().collect();
        self.pending_crashes.store(0, Relaxed);
        for &(key, at) in &pending {
            self.record(key, Metric::CrashBlocked, now.saturating_sub(at));
        }
        pending.len() as u64
    }

    /// Whether a section of `key` that opened after `since_us` (µs) may still be open: a
    /// holder newer than the one that acquired at `since_us`, who could only acquire once that
    /// one's lock was gone. (The latest section to open, if any is open: a newer one that
    /// already closed beside an older one still open reads as open.)
    pub fn newer_holder(&self, key: usize, since_us: u64) -> bool {
        let k = lock(&self.keys[key].0);
        k.holders() > 0 && k.last_open_us() > since_us
    }

    /// A section of `key` closes at `now` (µs, just read): returns its end (µs: later if the
    /// key's last event was).
    pub fn close_section(&self, worker: usize, key: usize, now: u64) -> u64 {
        let (t, stretch) = {
            let mut k = lock(&self.keys[key].0);
            let t = k.stamp(now);
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

    /// The keys now, for live metrics: their overlap figures so far (merged), the holders open
    /// now summed over the keys, and the most open on one key. Takes each key's mutex in turn
    /// (a key at a time, as a section does), so the caller keeps it to about once a second.
    pub fn keys_now(&self) -> (OverlapStats, u64, u32) {
        let (mut stats, mut holders, mut most) = (OverlapStats::default(), 0, 0);
        for k in &self.keys {
            let k = lock(&k.0);
            stats.merge(&k.stats());
            holders += u64::from(k.holders());
            most = most.max(k.holders());
        }
        (stats, holders, most)
    }

    /// What the variant measured, as plain values for [`crate::analysis::summary::summarize`].
    pub fn measured(&self) -> Measured {
        let first = self.first_errors();
        Measured {
            counts: self.counters.counts.snapshot(),
            errors: ErrorKind::ALL
                .iter()
                .map(|k| {
                    let msg = first.iter().find(|(f, _)| f == k).map(|(_, m)| m.clone());
                    (*k, self.counters.errors(*k), msg)
                })
                .collect(),
            per_key: (0..self.keys.len()).map(|k| self.key_stats(k)).collect(),
            outages: self.outages(),
        }
    }

    /// Moves everything recorded since the last drain into `into` (empty when called) and
    /// empties the stripes. Each stripe is swapped under its lock — the first with `into`
    /// itself, the others with the empty `spare`, added outside the lock — so a worker recording
    /// meanwhile never waits for the adding (a precise section's end would be late by it).
    /// `spare` comes back empty.
    pub fn drain_into(&self, into: &mut HistSet, spare: &mut HistSet) {
        let mut stripes = self.stripes.iter();
        if let Some(first) = stripes.next() {
            std::mem::swap(&mut *lock(first), into);
        }
        for s in stripes {
            std::mem::swap(&mut *lock(s), spare);
            into.add(spare);
            spare.reset();
        }
    }
}
