//! The plain data a run produces, below everything that makes, analyses or reads it: a
//! section's row (`events.csv`), the recorded metrics with their histograms, and outages.

use hdrhistogram::Histogram;
use std::borrow::Cow;

use crate::model::error::ErrorKind;
use crate::model::release::ReleaseOutcome;

/// How a section ended: the `outcome` column of `events.csv`. Typed from the worker to the
/// writer of the row and from the reader of a file on; its text ([`Self::name`]) exists only
/// in the file, so nothing turns it into words and back in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SectionOutcome {
    /// A release was sent and its reply classified.
    Release(ReleaseOutcome),
    /// The release failed (no reply, or an error reply): `error_<kind>`.
    ReleaseFailed(ErrorKind),
    /// Run without a lock (fail-open): nothing to release.
    Unlocked,
    /// The holder died mid-section: nothing was released.
    Crashed,
}

impl SectionOutcome {
    /// Every outcome, in the order the valid names are listed.
    pub fn all() -> impl Iterator<Item = SectionOutcome> {
        let released = ReleaseOutcome::ALL.into_iter().map(Self::Release);
        let failed = ErrorKind::ALL.into_iter().map(Self::ReleaseFailed);
        released
            .chain(failed)
            .chain([Self::Unlocked, Self::Crashed])
    }

    /// Its word in `events.csv` (`released`, `wrongful_delete`, … `error_<kind>`, `unlocked`,
    /// `crashed`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Release(o) => o.name(),
            Self::ReleaseFailed(k) => match k {
                ErrorKind::Timeout => "error_timeout",
                ErrorKind::Connection => "error_connection",
                ErrorKind::Server => "error_server",
                ErrorKind::Other => "error_other",
                ErrorKind::Abandoned => "error_abandoned",
            },
            Self::Unlocked => "unlocked",
            Self::Crashed => "crashed",
        }
    }

    /// Reads [`Self::name`] back; `None` for a word no lockbench writes.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::all().find(|o| o.name() == s)
    }

    /// Why `s` is not an outcome, and what is valid.
    pub fn unknown(s: &str) -> String {
        let valid: Vec<&str> = Self::all().map(Self::name).collect();
        format!("`{s}` is not a section outcome: use {}", valid.join(", "))
    }

    /// What the release did, when one was sent and answered.
    pub fn release(self) -> Option<ReleaseOutcome> {
        match self {
            Self::Release(o) => Some(o),
            _ => None,
        }
    }
}

/// A released section: what a row built field by field (tests, benches) starts from.
impl Default for SectionOutcome {
    fn default() -> Self {
        Self::Release(ReleaseOutcome::Released)
    }
}

impl std::fmt::Display for SectionOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for SectionOutcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for SectionOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::from_name(&s).ok_or_else(|| serde::de::Error::custom(Self::unknown(&s)))
    }
}

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
    /// From a holder's crash to the next acquisition of its key (0 when its lock had
    /// already expired).
    CrashBlocked,
    /// From a request's intended arrival to its end (served, refused or failed): open
    /// arrival model.
    RequestLatency,
}

impl Metric {
    /// Every metric, in file order.
    pub const ALL: [Metric; 10] = [
        Self::Duration,
        Self::Intended,
        Self::Excess,
        Self::AcquireLatency,
        Self::SetLatency,
        Self::ReleaseLatency,
        Self::TimerError,
        Self::OverlapStretch,
        Self::CrashBlocked,
        Self::RequestLatency,
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
            Self::CrashBlocked => "crash-blocked",
            Self::RequestLatency => "request-latency",
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
    /// Adds `h` to the histogram of `m`.
    pub fn add_hist(&mut self, m: Metric, h: &Histogram<u64>) {
        // Auto-resizing histograms accept any value, so add cannot fail.
        let _ = self.hists[m.index()].add(h);
    }
    /// Empties every histogram, keeping its memory.
    pub fn reset(&mut self) {
        for h in &mut self.hists {
            h.reset();
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
/// One row of `events.csv`: one section. Its words are `Cow`s so that a live run builds a
/// row without allocating (they are `'static` names there); rows read back own theirs.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct EventRow {
    /// Variant (release method) of the run (shared: one allocation per variant, not per row).
    pub variant: std::sync::Arc<str>,
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
    pub release: Cow<'static, str>,
    /// How it ended (`released`, `wrongful_delete`, `refused_expired`, … or `error_<kind>`).
    pub outcome: SectionOutcome,
    /// Cut short by Ctrl-C or the end-of-run grace period.
    pub interrupted: bool,
    /// The fence the acquisition returned (0: none, the variant does not fence).
    #[serde(default)]
    pub fence: u64,
    /// The resource read: `value`, `fenced` (refused under read-write fencing), `error`, or
    /// empty when there is no resource.
    #[serde(default)]
    pub read: Cow<'static, str>,
    /// The resource write: `accepted`, `unsafe` (accepted from a writer whose lock was gone,
    /// nobody holding it), `unsafe_over_holder` (accepted while another holder held the lock),
    /// `fenced` (refused), `skipped` (read refused or section aborted), `error`, or empty when
    /// there is no resource.
    #[serde(default)]
    pub write: Cow<'static, str>,
    /// Extensions that re-armed the lock.
    #[serde(default)]
    pub extensions: u32,
    /// An extension found the lock gone.
    #[serde(default)]
    pub extension_failed: bool,
    /// The holder gave up its section after losing the lock (`on_lost = "abort"`).
    #[serde(default)]
    pub aborted: bool,
    /// Length of the holder's stop-the-world pause, µs (0: none).
    #[serde(default)]
    pub pause_us: u64,
    /// How late the harness woke the holder at its section's end, µs: from the later of the
    /// end's due time and the instant the wait began, so time spent in commands inside the
    /// section (its resource read, an extension, slowed by a fault) is not counted. Empty in
    /// files from before this column.
    #[serde(default)]
    pub late_us: Option<u64>,
}

impl EventRow {
    /// How late the section's timer woke it, µs ([`late_us`](Self::late_us); in files from
    /// before it, its duration beyond the intended one, a pause aside). `None` for a section
    /// that did not run its course (cut short, aborted, crashed).
    pub fn timer_error_us(&self) -> Option<u64> {
        (!self.interrupted && !self.aborted && self.outcome != SectionOutcome::Crashed).then(|| {
            self.late_us.unwrap_or_else(|| {
                self.duration_us
                    .saturating_sub(self.intended_us + self.pause_us)
            })
        })
    }
}
