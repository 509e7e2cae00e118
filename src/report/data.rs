//! What each chart plots, as plain numbers: bins, percentiles, survival points, the timeline
//! window with its red stretches and marks, the damage bars. Everything here is a pure
//! function of histograms, intervals, rows and summaries, so tests check the numbers rather
//! than pixels.
//!
//! Past 800 lines through its tests (about 460 lines) and one section per chart; the
//! timeline's window and marks are the largest, and the first to move out if it grows again.

use hdrhistogram::Histogram;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bins of the duration histogram.
pub const DURATION_BINS: usize = 60;
/// Most sections shown in the timeline.
pub const TIMELINE_ROWS: usize = 40;
/// The x axis of durations turns logarithmic when max / p50 exceeds this.
pub const LOG_X_SPREAD: f64 = 20.0;

/// Milliseconds from microseconds.
pub fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// A fraction as a percentage with enough digits to tell small values apart.
pub fn fmt_pct(f: f64) -> String {
    let p = f * 100.0;
    if p == 0.0 {
        "0 %".to_string()
    } else if p >= 10.0 {
        format!("{p:.1} %")
    } else if p >= 0.1 {
        format!("{p:.2} %")
    } else {
        format!("{p:.4} %")
    }
}

/// The marked points of a distribution, µs (HdrHistogram values, as the summary reports them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest value.
    pub max_us: u64,
}

impl Marks {
    /// From a µs histogram (all zero when empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// One bar of a histogram: `[lo_us, hi_us)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// Lower edge, µs.
    pub lo_us: f64,
    /// Upper edge, µs.
    pub hi_us: f64,
    /// Sections in the bin.
    pub count: u64,
}

/// One variant's panel of `durations.png`.
#[derive(Debug, Clone, PartialEq)]
pub struct DurationPanel {
    /// Variant (release method).
    pub variant: String,
    /// The bars; their counts add up to `marks.count`.
    pub bins: Vec<Bin>,
    /// p50, p99, p99.9, max.
    pub marks: Marks,
    /// Sections with d > TTL (exact, from the events).
    pub overruns: u64,
}

impl DurationPanel {
    /// overruns / sections.
    pub fn overrun_fraction(&self) -> f64 {
        if self.marks.count == 0 {
            0.0
        } else {
            self.overruns as f64 / self.marks.count as f64
        }
    }
}

/// Everything `durations.png` shows: one panel per variant on a shared x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct DurationChart {
    /// TTL, µs.
    pub ttl_us: u64,
    /// Logarithmic x axis (the tail spans decades).
    pub log_x: bool,
    /// x range, µs.
    pub range_us: (f64, f64),
    /// One per variant.
    pub panels: Vec<DurationPanel>,
}

/// One variant's input: name, µs histogram of durations, exact overrun count.
pub struct VariantDurations<'a> {
    /// Variant name.
    pub variant: &'a str,
    /// Durations, µs.
    pub hist: &'a Histogram<u64>,
    /// Sections with d > TTL.
    pub overruns: u64,
}

/// Bins every variant's durations on one shared axis: linear bins `[i·w, (i+1)·w)` from 0, or
/// log-spaced bins when some variant's max / p50 exceeds [`LOG_X_SPREAD`].
pub fn duration_chart(variants: &[VariantDurations<'_>], ttl_us: u64) -> DurationChart {
    let marks: Vec<Marks> = variants.iter().map(|v| Marks::of(v.hist)).collect();
    let hi = marks
        .iter()
        .map(|m| m.max_us)
        .max()
        .unwrap_or(0)
        .max(ttl_us);
    let lo = variants
        .iter()
        .filter(|v| !v.hist.is_empty())
        .map(|v| v.hist.min())
        .min()
        .unwrap_or(0)
        .min(ttl_us);
    let log_x = marks
        .iter()
        .any(|m| m.count > 0 && m.max_us as f64 > LOG_X_SPREAD * (m.p50_us.max(1) as f64));
    let edges = if log_x {
        let lo = (lo.max(1) as f64) * 0.9;
        let hi = (hi.max(1) as f64) * 1.1;
        Edges::Log { lo, hi }
    } else {
        Edges::Linear {
            width: (hi + 1).div_ceil(DURATION_BINS as u64).max(1),
        }
    };
    let panels = variants
        .iter()
        .zip(marks)
        .map(|(v, marks)| DurationPanel {
            variant: v.variant.to_string(),
            bins: bin_histogram(v.hist, edges),
            marks,
            overruns: v.overruns,
        })
        .collect();
    DurationChart {
        ttl_us,
        log_x,
        range_us: edges.range(),
        panels,
    }
}

#[derive(Debug, Clone, Copy)]
enum Edges {
    Linear { width: u64 },
    Log { lo: f64, hi: f64 },
}

impl Edges {
    fn range(self) -> (f64, f64) {
        match self {
            Edges::Linear { width } => (0.0, (width * DURATION_BINS as u64) as f64),
            Edges::Log { lo, hi } => (lo, hi),
        }
    }
    fn edge(self, i: usize) -> f64 {
        match self {
            Edges::Linear { width } => (width * i as u64) as f64,
            Edges::Log { lo, hi } => lo * (hi / lo).powf(i as f64 / DURATION_BINS as f64),
        }
    }
    fn index(self, v: u64) -> usize {
        let i = match self {
            Edges::Linear { width } => (v / width) as usize,
            Edges::Log { lo, hi } => {
                let x = (v.max(1) as f64 / lo).ln() / (hi / lo).ln();
                (x * DURATION_BINS as f64).floor().max(0.0) as usize
            }
        };
        i.min(DURATION_BINS - 1)
    }
}

/// Counts a histogram's values into bins; each HdrHistogram bucket goes to the bin of its
/// median-equivalent value (within 0.1 % of every value in it).
fn bin_histogram(h: &Histogram<u64>, edges: Edges) -> Vec<Bin> {
    let mut bins: Vec<Bin> = (0..DURATION_BINS)
        .map(|i| Bin {
            lo_us: edges.edge(i),
            hi_us: edges.edge(i + 1),
            count: 0,
        })
        .collect();
    for v in h.iter_recorded() {
        let value = h.median_equivalent(v.value_iterated_to());
        bins[edges.index(value)].count += v.count_at_value();
    }
    bins
}

/// The survival curve P(d > t) of one variant.
#[derive(Debug, Clone, PartialEq)]
pub struct SurvivalCurve {
    /// Variant name.
    pub variant: String,
    /// Sections.
    pub sections: u64,
    /// Sections with d > TTL (exact).
    pub overruns: u64,
    /// `(t µs, P(d > t))`, t increasing, P decreasing from 1 to 0. Each t is the top of an
    /// HdrHistogram bucket, so P is exact at it.
    pub points: Vec<(u64, f64)>,
    /// Where the curve crosses the TTL: P(d > TTL) = overruns / sections.
    pub at_ttl: f64,
    /// `(p, t µs)`: the shortest TTL t outlived by at most a fraction p of sections, for p in
    /// 10 %, 1 %, 0.1 %, 0.01 % (only those the sample size can support).
    pub levels: Vec<(f64, u64)>,
}

/// Builds the survival curve from a µs histogram and the exact overrun count.
pub fn survival(variant: &str, h: &Histogram<u64>, overruns: u64) -> SurvivalCurve {
    let n = h.len();
    let mut points = Vec::new();
    if n > 0 {
        points.push((h.lowest_equivalent(h.min()).saturating_sub(1), 1.0));
        let mut below = 0u64;
        for v in h.iter_recorded() {
            below += v.count_at_value();
            points.push((v.value_iterated_to(), (n - below) as f64 / n as f64));
        }
    }
    let levels = [0.1, 0.01, 0.001, 0.0001]
        .into_iter()
        .filter(|p| n > 0 && (n as f64) * p >= 1.0)
        .map(|p| (p, h.value_at_quantile(1.0 - p)))
        .collect();
    SurvivalCurve {
        variant: variant.to_string(),
        sections: n,
        overruns,
        points,
        at_ttl: if n > 0 {
            overruns as f64 / n as f64
        } else {
            0.0
        },
        levels,
    }
}

/// An HdrHistogram-style percentile curve (x = 1/(1−p) on a log axis).
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileCurve {
    /// Variant name.
    pub variant: String,
    /// Values.
    pub count: u64,
    /// `(1/(1−p), value µs)`, x increasing; the last point is the max at x = count.
    pub points: Vec<(f64, u64)>,
    /// p50, p99, p99.9, max.
    pub marks: Marks,
}

/// The percentile curve of a µs histogram (5 ticks per halving distance, as `.hgrm` files).
pub fn percentile_curve(variant: &str, h: &Histogram<u64>) -> PercentileCurve {
    let n = h.len();
    let mut points = Vec::new();
    if n > 0 {
        let top = n as f64;
        for v in h.iter_quantiles(5) {
            let q = v.quantile_iterated_to();
            let x = if q >= 1.0 {
                top
            } else {
                (1.0 / (1.0 - q)).min(top)
            };
            points.push((x, v.value_iterated_to()));
        }
        points.push((top, h.max()));
        points.dedup();
    }
    PercentileCurve {
        variant: variant.to_string(),
        count: n,
        points,
        marks: Marks::of(h),
    }
}

/// Label of a tick on the "nines" axis: x = 1/(1−p) → `p` as a percentage (1 → 0%, 10 → 90%,
/// 1000 → 99.9%).
pub fn nines_label(x: f64) -> String {
    if x <= 1.0 {
        return "0%".to_string();
    }
    let p = 100.0 * (1.0 - 1.0 / x);
    let digits = (x.log10().ceil() as i32 - 2).clamp(0, 8) as usize;
    let s = format!("{p:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}%")
}

/// Stretches `[start, end)` with two or more sections open, for intervals in any order. Ties
/// are ordered as in [`crate::analysis::overlap::compute`]: touching sections do not overlap.
pub fn overlap_stretches(intervals: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let (_, stretches) = crate::analysis::overlap::compute(intervals);
    // A zero-length stretch has nothing to draw.
    stretches
        .into_iter()
        .filter(|(from, to)| to > from)
        .collect()
}

/// Why the timeline shows the window it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// Around the first instant with two holders (µs).
    FirstOverlap(u64),
    /// No overlap anywhere: around the longest section (its start, µs).
    Longest(u64),
    /// No sections at all.
    Empty,
}

/// Sections shown before the first overlap, for context.
pub const ROWS_BEFORE_OVERLAP: usize = 3;

/// Where a [`WindowPicker`] centres.
#[derive(Debug, Clone, Copy)]
enum Centre {
    /// The first instant with two holders, µs.
    At(u64),
    /// The longest section `(start, end)`.
    Section(u64, u64),
}

/// Which side of the centre a section falls on.
enum Side {
    Before,
    Pinned,
    After,
}

/// A section ordered by start, then end, worker and section number (the timeline's order).
#[derive(Debug, Clone)]
struct Ranked(SectionSpan);

impl Ranked {
    fn key(&self) -> (u64, u64, usize, u64) {
        let s = &self.0;
        (
            s.acquired_us,
            s.released_us.max(s.acquired_us),
            s.worker,
            s.seq,
        )
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// Picks up to `max_rows` consecutive sections (by start) of one key from a stream of them in
/// any order: from a few before the first overlap — including every holder open at that
/// instant — or, without overlap, around the longest section. It holds at most
/// `2 × max_rows + 3` sections whatever the number offered, so the second pass over
/// `events.csv` stays in fixed memory.
///
/// On a live run (a key's starts never share a microsecond) this is exactly the window of
/// sorting every section of the key and taking `max_rows` from [`ROWS_BEFORE_OVERLAP`] before
/// the earliest holder open at the first overlap (or `max_rows / 2` before the longest
/// section): no section starts between that holder's start and the first overlap, since it
/// would itself have overlapped it.
#[derive(Debug, Clone)]
pub struct WindowPicker {
    centre: Centre,
    max_rows: usize,
    keep_before: usize,
    /// The latest `keep_before` sections before the centre (min-heap: the earliest goes first).
    before: BinaryHeap<Reverse<Ranked>>,
    /// Sections open at the first overlap, or the longest section.
    pinned: BinaryHeap<Ranked>,
    /// The earliest `max_rows` sections after the centre (max-heap: the latest goes first).
    after: BinaryHeap<Ranked>,
}

impl WindowPicker {
    /// Around the first instant `t_us` with two holders: every section open at `t_us`, the
    /// [`ROWS_BEFORE_OVERLAP`] latest that closed before it, and the earliest after it.
    pub fn first_overlap(t_us: u64, max_rows: usize) -> Self {
        Self::new(Centre::At(t_us), max_rows, ROWS_BEFORE_OVERLAP)
    }

    /// Around the longest section `(start, end)`: `max_rows / 2` before it, the rest after.
    pub fn longest(section: (u64, u64), max_rows: usize) -> Self {
        let (s, e) = section;
        Self::new(Centre::Section(s, e.max(s)), max_rows, max_rows.max(1) / 2)
    }

    fn new(centre: Centre, max_rows: usize, keep_before: usize) -> Self {
        Self {
            centre,
            max_rows: max_rows.max(1),
            keep_before,
            before: BinaryHeap::new(),
            pinned: BinaryHeap::new(),
            after: BinaryHeap::new(),
        }
    }

    /// What the window is centred on.
    pub fn focus(&self) -> Focus {
        match self.centre {
            Centre::At(t) => Focus::FirstOverlap(t),
            Centre::Section(s, _) => Focus::Longest(s),
        }
    }

    /// Considers one section of the key.
    pub fn offer(&mut self, section: SectionSpan) {
        let r = Ranked(section);
        let (s, e) = (r.key().0, r.key().1);
        let side = match self.centre {
            Centre::At(t) if s <= t && t < e => Side::Pinned,
            Centre::At(t) if s < t => Side::Before,
            Centre::At(_) => Side::After,
            // Only the first copy of the longest section is the centre.
            Centre::Section(cs, ce) if (s, e) == (cs, ce) && self.pinned.is_empty() => Side::Pinned,
            Centre::Section(cs, ce) if (s, e) < (cs, ce) => Side::Before,
            Centre::Section(..) => Side::After,
        };
        match side {
            Side::Before => {
                self.before.push(Reverse(r));
                if self.before.len() > self.keep_before {
                    self.before.pop();
                }
            }
            Side::Pinned => {
                self.pinned.push(r);
                if self.pinned.len() > self.max_rows {
                    self.pinned.pop();
                }
            }
            Side::After => {
                self.after.push(r);
                if self.after.len() > self.max_rows {
                    self.after.pop();
                }
            }
        }
    }

    /// The window's sections by start: those before and the pinned ones first, then the
    /// earliest after them, `max_rows` in all.
    pub fn finish(self) -> Vec<SectionSpan> {
        let mut rows: Vec<Ranked> = self.before.into_iter().map(|Reverse(r)| r).collect();
        rows.sort_unstable();
        rows.extend(self.pinned.into_sorted_vec());
        rows.truncate(self.max_rows);
        let room = self.max_rows - rows.len();
        rows.extend(self.after.into_sorted_vec().into_iter().take(room));
        rows.sort_unstable();
        rows.into_iter().map(|Ranked(s)| s).collect()
    }
}

/// What happened at a section's release, when it is worth marking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseMark {
    /// `del` removed another holder's lock.
    WrongfulDelete,
    /// Token-checked release refused: the key had expired.
    RefusedExpired,
    /// Token-checked release refused: another holder's token was there.
    RefusedHeldByOther,
    /// Token-checked release refused, class unknown.
    RefusedUnclassified,
}

impl ReleaseMark {
    /// From the `outcome` column; `None` for outcomes not marked.
    pub fn from_outcome(outcome: &str) -> Option<Self> {
        match outcome {
            "wrongful_delete" => Some(Self::WrongfulDelete),
            "refused_expired" => Some(Self::RefusedExpired),
            "refused_held_by_other" => Some(Self::RefusedHeldByOther),
            "refused_unclassified" => Some(Self::RefusedUnclassified),
            _ => None,
        }
    }
    /// Legend text.
    pub fn label(self) -> &'static str {
        match self {
            Self::WrongfulDelete => "wrongful delete",
            Self::RefusedExpired => "refused: expired",
            Self::RefusedHeldByOther => "refused: held by other",
            Self::RefusedUnclassified => "refused: unclassified",
        }
    }
    /// Every mark, in legend order.
    pub const ALL: [ReleaseMark; 4] = [
        Self::WrongfulDelete,
        Self::RefusedExpired,
        Self::RefusedHeldByOther,
        Self::RefusedUnclassified,
    ];
}

/// What happened to a section's resource write, when it is worth marking. The write is sent
/// right before the release, so it is marked at the section's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMark {
    /// Accepted while another holder held the lock.
    UnsafeOverHolder,
    /// Accepted while nobody held the lock (it had expired or been deleted).
    UnsafeLockGone,
    /// Refused by the resource: a higher fence had been seen.
    Fenced,
}

impl WriteMark {
    /// From the `write` column; `None` for writes not marked (accepted safely, skipped, …).
    pub fn from_write(write: &str) -> Option<Self> {
        match write {
            "unsafe_over_holder" => Some(Self::UnsafeOverHolder),
            "unsafe" => Some(Self::UnsafeLockGone),
            "fenced" => Some(Self::Fenced),
            _ => None,
        }
    }
    /// Legend text.
    pub fn label(self) -> &'static str {
        match self {
            Self::UnsafeOverHolder => "unsafe write over a holder",
            Self::UnsafeLockGone => "unsafe write, lock gone",
            Self::Fenced => "write refused by the fence",
        }
    }
    /// Every mark, in legend order.
    pub const ALL: [WriteMark; 3] = [Self::UnsafeOverHolder, Self::UnsafeLockGone, Self::Fenced];
}

/// One row (one holder's section) of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    /// Worker.
    pub worker: usize,
    /// The worker's section number.
    pub seq: u64,
    /// Section begins, µs.
    pub acquired_us: u64,
    /// Release sent, µs.
    pub released_us: u64,
    /// Its lock expires at the server, µs (acquired + TTL).
    pub expiry_us: u64,
    /// Parts of the bar with another holder open, µs.
    pub red: Vec<(u64, u64)>,
    /// What its release did, if marked.
    pub mark: Option<ReleaseMark>,
    /// When another holder's naive release deleted this holder's still-valid lock, µs.
    pub lost_at_us: Option<u64>,
    /// What its resource write did, if marked.
    pub write: Option<WriteMark>,
    /// Length of the holder's pause, µs (0: none).
    pub pause_us: u64,
}

impl TimelineRow {
    /// Where to draw the pause on the bar, µs: `events.csv` records its length, not when it
    /// struck, so it can be placed only when the profile says it struck right before the
    /// write (`pause_at = "before-write"`): the stretch ending at the write, clipped to the
    /// section. `None` when there was no pause or its place is unknown (`random`).
    pub fn pause_span(&self, before_write: bool) -> Option<(u64, u64)> {
        (before_write && self.pause_us > 0).then(|| {
            (
                self.released_us
                    .saturating_sub(self.pause_us)
                    .max(self.acquired_us),
                self.released_us,
            )
        })
    }
}

/// Everything `timeline.png` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Variant shown.
    pub variant: String,
    /// Key shown.
    pub key: usize,
    /// TTL, µs.
    pub ttl_us: u64,
    /// Why this window.
    pub focus: Focus,
    /// Rows by start time.
    pub rows: Vec<TimelineRow>,
    /// Pauses struck right before the write (`pause_at = "before-write"`), so their place on
    /// the bar is known; otherwise only their length is.
    pub pause_before_write: bool,
    /// The variant's fault windows: kind, start and end in µs from the variant's start.
    pub faults: Vec<(String, u64, u64)>,
}

/// A section as read back for the timeline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SectionSpan {
    /// Worker.
    pub worker: usize,
    /// The worker's section number.
    pub seq: u64,
    /// Start, µs.
    pub acquired_us: u64,
    /// End, µs.
    pub released_us: u64,
    /// `outcome` column.
    pub outcome: String,
    /// `write` column.
    pub write: String,
    /// `pause_us` column.
    pub pause_us: u64,
}

/// Builds the timeline rows from the window's sections; `stretches` are the overlap stretches
/// drawn in red ([`overlap_stretches`] of the window's own sections: the report never holds
/// all of a key's sections).
pub fn timeline(
    variant: &str,
    key: usize,
    ttl_us: u64,
    focus: Focus,
    mut sections: Vec<SectionSpan>,
    stretches: &[(u64, u64)],
    pause_before_write: bool,
) -> Timeline {
    sections.sort_by_key(|s| (s.acquired_us, s.released_us, s.worker, s.seq));
    sections.truncate(TIMELINE_ROWS);
    let rows = sections
        .into_iter()
        .map(|s| {
            let (a, r) = (s.acquired_us, s.released_us.max(s.acquired_us));
            let red = stretches
                .iter()
                .filter_map(|&(x, y)| {
                    let (lo, hi) = (x.max(a), y.min(r));
                    (lo < hi).then_some((lo, hi))
                })
                .collect();
            TimelineRow {
                worker: s.worker,
                seq: s.seq,
                acquired_us: a,
                released_us: r,
                expiry_us: a + ttl_us,
                red,
                mark: ReleaseMark::from_outcome(&s.outcome),
                lost_at_us: None,
                write: WriteMark::from_write(&s.write),
                pause_us: s.pause_us,
            }
        })
        .collect();
    let rows = mark_lost_locks(rows);
    Timeline {
        variant: variant.to_string(),
        key,
        ttl_us,
        focus,
        rows,
        pause_before_write,
        faults: Vec::new(),
    }
}

/// A wrongful delete at `t` removed the lock of the holder whose `SET` last succeeded before
/// `t` (the key held that holder's token): mark that row, if it is shown, still open and its
/// lock had not expired yet.
fn mark_lost_locks(mut rows: Vec<TimelineRow>) -> Vec<TimelineRow> {
    let deletes: Vec<(usize, u64)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.mark == Some(ReleaseMark::WrongfulDelete))
        .map(|(i, r)| (i, r.released_us))
        .collect();
    for (deleter, t) in deletes {
        let victim = rows
            .iter()
            .enumerate()
            .filter(|&(i, r)| i != deleter && r.acquired_us < t && r.released_us > t)
            .max_by_key(|(_, r)| r.acquired_us)
            .map(|(i, _)| i);
        if let Some(v) = victim
            && t < rows[v].expiry_us
        {
            let at = rows[v].lost_at_us.map_or(t, |x| x.min(t));
            rows[v].lost_at_us = Some(at);
        }
    }
    rows
}

/// The bars of `compare.png`: one figure per panel, one value per variant.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparePanel {
    /// Panel title.
    pub title: &'static str,
    /// Unit of the y axis.
    pub unit: &'static str,
    /// `(variant, value)` in run order.
    pub values: Vec<(String, f64)>,
}

/// The small multiples of `compare.png`, from the summaries.
pub fn compare_panels(summaries: &[crate::analysis::summary::Summary]) -> Vec<ComparePanel> {
    type Pick = fn(&crate::analysis::summary::Summary) -> f64;
    let specs: [(&'static str, &'static str, Pick); 6] = [
        ("overruns (d > TTL)", "sections", |s| {
            s.counts.overruns as f64
        }),
        ("stale releases", "releases", |s| {
            s.counts.stale_releases as f64
        }),
        ("refused stale releases", "releases", |s| {
            s.refused_releases as f64
        }),
        ("wrongful deletes", "releases", |s| {
            s.counts.wrongful_deletes as f64
        }),
        ("overlap time (≥ 2 holders)", "ms", |s| s.overlap_ms),
        ("throughput", "sections / s", |s| s.throughput_per_s),
    ];
    specs
        .into_iter()
        .map(|(title, unit, pick)| ComparePanel {
            title,
            unit,
            values: summaries
                .iter()
                .map(|s| (s.variant.clone(), pick(s)))
                .collect(),
        })
        .collect()
}

/// One kind of bar of `damage.png`: what the overlap did to the protected resource, and what
/// caught it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// Accepted writes whose effect is missing from the final value.
    LostUpdates,
    /// Accepted writes of a holder whose lock another holder held at that instant.
    UnsafeOverHolder,
    /// Accepted writes of a holder whose lock was gone, nobody holding it.
    UnsafeLockGone,
    /// Writes (and reads, under read-write fencing) the resource refused for a stale fence.
    RefusedByFence,
    /// Lease extensions that found the lock already gone.
    ExtensionFailures,
}

impl Damage {
    /// Every bar, in group order: the damage first, then what caught or missed it.
    pub const ALL: [Damage; 5] = [
        Self::LostUpdates,
        Self::UnsafeOverHolder,
        Self::UnsafeLockGone,
        Self::RefusedByFence,
        Self::ExtensionFailures,
    ];

    /// Legend text.
    pub fn label(self) -> &'static str {
        match self {
            Self::LostUpdates => "lost updates",
            Self::UnsafeOverHolder => "unsafe writes over a holder",
            Self::UnsafeLockGone => "unsafe writes, lock gone",
            Self::RefusedByFence => "refused by the fence (reads paler, on top)",
            Self::ExtensionFailures => "extension failures",
        }
    }
}

/// One variant's group of bars in `damage.png`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamageGroup {
    /// Variant name.
    pub variant: String,
    /// Its sections read-modify-wrote a resource (without one every bar is 0).
    pub resource: bool,
    /// Accepted writes missing from the final value.
    pub lost_updates: u64,
    /// Unsafe accepted writes while another holder held the lock.
    pub unsafe_over_holder: u64,
    /// Unsafe accepted writes while nobody held the lock.
    pub unsafe_lock_gone: u64,
    /// Writes refused by the fence.
    pub refused_writes: u64,
    /// Reads refused by the fence (read-write fencing), stacked on the refused writes.
    pub refused_reads: u64,
    /// Extensions too late to keep the lock.
    pub extension_failures: u64,
}

impl DamageGroup {
    /// The height of each bar, in [`Damage::ALL`] order.
    pub fn bars(&self) -> [(Damage, u64); 5] {
        Damage::ALL.map(|d| {
            let v = match d {
                Damage::LostUpdates => self.lost_updates,
                Damage::UnsafeOverHolder => self.unsafe_over_holder,
                Damage::UnsafeLockGone => self.unsafe_lock_gone,
                Damage::RefusedByFence => self.refused_writes + self.refused_reads,
                Damage::ExtensionFailures => self.extension_failures,
            };
            (d, v)
        })
    }
}

/// What `damage.png` plots: one group per variant, in run order; `None` when no variant
/// protected a resource (the chart is not drawn). A count the summary lacks (an older
/// lockbench) reads as 0.
pub fn damage_chart(summaries: &[crate::analysis::summary::Summary]) -> Option<Vec<DamageGroup>> {
    use crate::analysis::counts::NOT_RECORDED;
    if !summaries.iter().any(|s| s.protect.resource) {
        return None;
    }
    let n = |v: u64| if v == NOT_RECORDED { 0 } else { v };
    Some(
        summaries
            .iter()
            .map(|s| {
                let c = &s.counts;
                let unsafe_all = n(c.unsafe_writes_accepted);
                let over_holder = n(c.unsafe_writes_over_holder);
                DamageGroup {
                    variant: s.variant.clone(),
                    resource: s.protect.resource,
                    lost_updates: s.lost_updates,
                    unsafe_over_holder: over_holder,
                    unsafe_lock_gone: unsafe_all.saturating_sub(over_holder),
                    refused_writes: n(c.writes_rejected_fenced),
                    refused_reads: n(c.reads_rejected_fenced),
                    extension_failures: n(c.extension_failures),
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = crate::record::new_hist();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    /// Linear bins of width ceil((max+1)/60) from 0 count every value once, in the right bin.
    #[test]
    fn linear_bins_count_every_value() {
        // Values below 2048 µs, which HdrHistogram keeps exactly.
        let values: Vec<u64> = (0..100).map(|i| 100 + i * 10).collect(); // 100..1090 µs
        let h = hist(&values);
        let c = duration_chart(
            &[VariantDurations {
                variant: "token",
                hist: &h,
                overruns: 0,
            }],
            1200,
        );
        assert!(!c.log_x);
        // width = ceil(1201 / 60) = 21 µs
        assert_eq!(c.panels[0].bins[0].hi_us, 21.0);
        assert_eq!(c.range_us, (0.0, 1260.0));
        let total: u64 = c.panels[0].bins.iter().map(|b| b.count).sum();
        assert_eq!(total, 100);
        // 100 µs alone in bin 4 ([84,105)); 1080 and 1090 µs in bin 51 ([1071,1092)).
        assert_eq!(c.panels[0].bins[4].count, 1);
        assert_eq!(c.panels[0].bins[51].count, 2);
        assert_eq!(c.panels[0].marks.p50_us, 590);
        assert_eq!(c.panels[0].marks.max_us, 1090);
    }

    /// A tail spanning decades (max/p50 > 20) switches to log-spaced bins.
    #[test]
    fn long_tail_uses_log_x() {
        let mut values = vec![1000u64; 99];
        values.push(100_000);
        let h = hist(&values);
        let c = duration_chart(
            &[VariantDurations {
                variant: "del",
                hist: &h,
                overruns: 1,
            }],
            20_000,
        );
        assert!(c.log_x);
        let b = &c.panels[0].bins;
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 100);
        let at = |v: f64| b.iter().position(|b| b.lo_us <= v && v < b.hi_us).unwrap();
        assert_eq!(b[at(1000.0)].count, 99);
        assert_eq!(b[at(100_000.0)].count, 1);
        assert!((c.panels[0].overrun_fraction() - 0.01).abs() < 1e-12);
    }

    /// Survival starts at 1, ends at 0, and crosses the TTL at overruns / sections.
    #[test]
    fn survival_crossing_and_levels() {
        let values: Vec<u64> = (1..=1000).collect();
        let h = hist(&values);
        let s = survival("token", &h, 100);
        assert_eq!(s.points.first().unwrap().1, 1.0);
        assert_eq!(s.points.last().unwrap(), &(1000, 0.0));
        // exact for values below 2048: P(d > 900) = 100/1000
        assert!(s.points.contains(&(900, 0.1)));
        assert_eq!(s.at_ttl, 0.1);
        assert_eq!(s.levels, vec![(0.1, 900), (0.01, 990), (0.001, 999)]);
    }

    /// The percentile curve runs from x = 1 to x = count and ends at the max.
    #[test]
    fn percentile_curve_ends_at_max() {
        let values: Vec<u64> = (1..=1000).collect();
        let c = percentile_curve("del", &hist(&values));
        assert_eq!(c.points.first().unwrap().0, 1.0);
        assert_eq!(c.points.last().unwrap(), &(1000.0, 1000));
        assert!(c.points.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(c.marks.p99_us, 990);
    }

    /// The nines axis reads 0%, 90%, 99%, 99.9% at 1, 10, 100, 1000.
    #[test]
    fn nines_labels() {
        let l: Vec<String> = [1.0, 2.0, 10.0, 100.0, 1000.0, 1e5]
            .into_iter()
            .map(nines_label)
            .collect();
        assert_eq!(l, ["0%", "50%", "90%", "99%", "99.9%", "99.999%"]);
    }

    /// Stretches with ≥ 2 holders agree with overlap::compute's total and ignore touching ends.
    #[test]
    fn stretches_match_compute() {
        let iv = [(0, 10), (8, 20), (15, 30), (30, 40), (35, 36)];
        let s = overlap_stretches(&iv);
        assert_eq!(s, vec![(8, 10), (15, 20), (35, 36)]);
        let total: u64 = s.iter().map(|(a, b)| b - a).sum();
        assert_eq!(total, crate::analysis::overlap::compute(&iv).0.overlap_us);
    }

    fn spans(iv: &[(u64, u64)]) -> Vec<SectionSpan> {
        iv.iter()
            .enumerate()
            .map(|(i, &(a, r))| SectionSpan {
                worker: i,
                seq: 0,
                acquired_us: a,
                released_us: r,
                outcome: "released".into(),
                ..SectionSpan::default()
            })
            .collect()
    }

    /// Feeds `iv` to the picker (in reverse, as a file need not be in start order) and
    /// returns the first and last start shown.
    fn picked(iv: &[(u64, u64)], mut p: WindowPicker) -> (usize, u64, u64) {
        for s in spans(iv).into_iter().rev() {
            p.offer(s);
        }
        let rows = p.finish();
        (
            rows.len(),
            rows.first().unwrap().acquired_us,
            rows.last().unwrap().acquired_us,
        )
    }

    /// The window starts a few sections before the first overlap and includes the holder
    /// open at that instant; without overlap it centres on the longest section.
    #[test]
    fn window_around_first_overlap_or_longest() {
        let mut iv: Vec<(u64, u64)> = (0..100).map(|i| (i * 10, i * 10 + 5)).collect();
        iv[50] = (500, 530); // overlaps 510 and 520
        let t = crate::analysis::overlap::compute(&iv)
            .0
            .first_overlap_us
            .unwrap();
        let p = WindowPicker::first_overlap(t, 10);
        assert_eq!(p.focus(), Focus::FirstOverlap(510));
        assert_eq!(picked(&iv, p), (10, 470, 560));
        iv[50] = (500, 508);
        let p = WindowPicker::longest((500, 508), 10);
        assert_eq!(p.focus(), Focus::Longest(500));
        assert_eq!(picked(&iv, p), (10, 450, 540));
        // Near either end the window slides instead of shrinking, as the sorted rule did.
        assert_eq!(picked(&iv, WindowPicker::longest((0, 5), 10)), (10, 0, 90));
        assert_eq!(
            picked(&iv, WindowPicker::first_overlap(992, 10)),
            (4, 960, 990)
        );
        assert!(WindowPicker::first_overlap(5, 10).finish().is_empty());
    }

    /// The window the old rule picked after sorting every section of the key: `max_rows`
    /// consecutive sections from 3 before the earliest holder open at the first overlap (or
    /// `max_rows / 2` before the longest), then every section whose start is in that range.
    fn sorted_rule(iv: &[(u64, u64)], max_rows: usize) -> Vec<usize> {
        let mut sorted: Vec<(u64, u64)> = iv.to_vec();
        sorted.sort_unstable();
        let first = match crate::analysis::overlap::compute(iv).0.first_overlap_us {
            Some(t) => {
                let open = sorted.iter().position(|&(s, e)| s <= t && e > t).unwrap();
                open.saturating_sub(3)
            }
            None => {
                let longest = (0..sorted.len())
                    .max_by_key(|&i| (sorted[i].1 - sorted[i].0, Reverse(i)))
                    .unwrap();
                longest.saturating_sub(max_rows / 2)
            }
        };
        let last = (first + max_rows).min(sorted.len()) - 1;
        let (lo, hi) = (sorted[first].0, sorted[last].0);
        let mut shown: Vec<usize> = (0..iv.len())
            .filter(|&i| (lo..=hi).contains(&iv[i].0))
            .collect();
        shown.sort_by_key(|&i| iv[i]);
        shown.truncate(max_rows);
        shown
    }

    /// On live-like keys (every event of a key in its own microsecond) the streaming picker
    /// shows exactly what sorting all of the key's sections showed, holding at most
    /// 2 × max_rows + 3 sections however many it is offered.
    #[test]
    fn picker_matches_the_sorted_rule() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rand = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut overlapping = 0;
        for case in 0..300 {
            let workers = 1 + rand(4);
            let per_worker = 1 + rand(120);
            let mut iv = Vec::new();
            for w in 0..workers {
                // Times on a grid of 8 µs, offset by worker: no two events share a µs.
                let mut t = rand(2000);
                for _ in 0..per_worker {
                    let (gap, d) = (rand(60 * workers), 1 + rand(40));
                    let s = t + gap;
                    iv.push((s * 8 + w, (s + d) * 8 + w));
                    t = s + d + 1;
                }
            }
            let max_rows = [1, 5, 10, 40][case % 4];
            let stats = crate::analysis::overlap::compute(&iv).0;
            let mut p = match stats.first_overlap_us {
                Some(t) => {
                    overlapping += 1;
                    WindowPicker::first_overlap(t, max_rows)
                }
                None => {
                    let longest = iv.iter().copied().max_by_key(|&(s, e)| (e - s, Reverse(s)));
                    WindowPicker::longest(longest.unwrap(), max_rows)
                }
            };
            for s in spans(&iv).into_iter().rev() {
                p.offer(s);
                let held = p.before.len() + p.pinned.len() + p.after.len();
                assert!(held <= 2 * max_rows + ROWS_BEFORE_OVERLAP, "{held}");
            }
            let got: Vec<usize> = p.finish().iter().map(|s| s.worker).collect();
            assert_eq!(got, sorted_rule(&iv, max_rows), "case {case}: {iv:?}");
        }
        assert!(overlapping > 100, "{overlapping} cases with overlap");
    }

    fn span(worker: usize, a: u64, r: u64, outcome: &str) -> SectionSpan {
        SectionSpan {
            worker,
            seq: 0,
            acquired_us: a,
            released_us: r,
            outcome: outcome.into(),
            ..SectionSpan::default()
        }
    }

    /// Timeline rows carry the TTL expiry, the red parts clipped to the bar and the marks.
    #[test]
    fn timeline_rows_red_and_marks() {
        let iv = [(0, 300), (200, 350), (340, 400)];
        let stretches = overlap_stretches(&iv);
        assert_eq!(stretches, vec![(200, 300), (340, 350)]);
        let t = timeline(
            "del",
            0,
            100,
            Focus::FirstOverlap(200),
            vec![
                span(2, 340, 400, "released"),
                span(0, 0, 300, "wrongful_delete"),
                span(1, 200, 350, "nothing_deleted"),
            ],
            &stretches,
            false,
        );
        let w: Vec<usize> = t.rows.iter().map(|r| r.worker).collect();
        assert_eq!(w, [0, 1, 2]);
        assert_eq!(t.rows[0].expiry_us, 100);
        assert_eq!(t.rows[0].red, vec![(200, 300)]);
        assert_eq!(t.rows[1].red, vec![(200, 300), (340, 350)]);
        assert_eq!(t.rows[2].red, vec![(340, 350)]);
        assert_eq!(t.rows[0].mark, Some(ReleaseMark::WrongfulDelete));
        assert_eq!(t.rows[1].mark, None);
        assert_eq!(
            t.rows[1].lost_at_us, None,
            "W1's lock had already expired at 300"
        );
    }

    /// A wrongful delete marks the lock it removed: the latest holder whose lock was still
    /// valid at that instant — not a later newcomer, not an expired lock.
    #[test]
    fn wrongful_delete_marks_its_victim() {
        // TTL 100: W0 overruns and deletes W1's valid lock at 150; W2 walks in at 160.
        let sections = vec![
            span(0, 0, 150, "wrongful_delete"),
            span(1, 120, 230, "nothing_deleted"),
            span(2, 160, 200, "released"),
        ];
        let iv: Vec<(u64, u64)> = sections
            .iter()
            .map(|s| (s.acquired_us, s.released_us))
            .collect();
        let t = timeline(
            "del",
            0,
            100,
            Focus::FirstOverlap(120),
            sections,
            &overlap_stretches(&iv),
            false,
        );
        let lost: Vec<Option<u64>> = t.rows.iter().map(|r| r.lost_at_us).collect();
        assert_eq!(lost, [None, Some(150), None]);
    }

    /// A variant's summary from hand-built counts; `resource_final` is the value read back.
    fn summary(
        variant: &str,
        resource: bool,
        resource_final: u64,
        counts: crate::analysis::counts::Counts,
    ) -> crate::analysis::summary::Summary {
        use crate::analysis::summary::{Measured, Meta, Protection, StopReason, summarize};
        let meta = Meta {
            variant: variant.into(),
            release: "token".into(),
            connection_mode: "per-worker".into(),
            backend: "memory".into(),
            server_version: "memory".into(),
            workers: 4,
            ttl_ms: 50,
            time_scale: 1.0,
            unscaled_ttl_ms: 50.0,
            seed: 1,
            elapsed_s: 1.0,
            stop_reason: StopReason::Limit,
            protect: Protection {
                resource,
                resource_final,
                ..Protection::default()
            },
        };
        let m = Measured {
            counts,
            ..Measured::default()
        };
        summarize(meta, &m, &crate::record::HistSet::default())
    }

    /// Each bar of `damage.png` is its summary figure: lost updates, the unsafe writes split
    /// into over-a-holder and lock-gone (which add up to `unsafe_writes_accepted`), writes and
    /// reads refused by the fence kept apart for stacking, extension failures. A variant
    /// without a resource shows zeros and says so.
    #[test]
    fn damage_bars_from_summaries() {
        use crate::analysis::counts::Counts;
        let del = summary(
            "del",
            true,
            70,
            Counts {
                writes_accepted: 100,
                unsafe_writes_accepted: 12,
                unsafe_writes_over_holder: 9,
                ..Counts::default()
            },
        );
        let fenced = summary(
            "token+extend+fence-rw",
            true,
            40,
            Counts {
                writes_accepted: 40,
                writes_rejected_fenced: 5,
                reads_rejected_fenced: 2,
                extension_failures: 3,
                ..Counts::default()
            },
        );
        let plain = summary("token", false, 0, Counts::default());
        let groups = damage_chart(&[del, fenced, plain]).expect("some variant has a resource");
        let bars: Vec<Vec<u64>> = groups
            .iter()
            .map(|g| g.bars().iter().map(|&(_, v)| v).collect())
            .collect();
        assert_eq!(bars[0], [30, 9, 3, 0, 0], "100 accepted, final 70: 30 lost");
        assert_eq!(bars[1], [0, 0, 0, 7, 3]);
        assert_eq!((groups[1].refused_writes, groups[1].refused_reads), (5, 2));
        assert_eq!(bars[2], [0; 5]);
        assert_eq!(
            groups.iter().map(|g| g.resource).collect::<Vec<_>>(),
            [true, true, false]
        );
        assert_eq!(groups[1].variant, "token+extend+fence-rw");
    }

    /// No variant with a resource: no damage chart. Counts an older summary lacks
    /// (`NOT_RECORDED`) draw as 0, not as 2⁶⁴ − 1.
    #[test]
    fn damage_chart_only_with_a_resource() {
        use crate::analysis::counts::{Counts, NOT_RECORDED};
        assert_eq!(
            damage_chart(&[summary("del", false, 0, Counts::default())]),
            None
        );
        let mut old = summary("del", true, 0, Counts::default());
        old.counts.unsafe_writes_accepted = NOT_RECORDED;
        old.counts.unsafe_writes_over_holder = NOT_RECORDED;
        old.counts.writes_rejected_fenced = NOT_RECORDED;
        old.counts.reads_rejected_fenced = NOT_RECORDED;
        old.counts.extension_failures = NOT_RECORDED;
        let groups = damage_chart(&[old]).unwrap();
        assert!(groups[0].bars().iter().all(|&(_, v)| v == 0));
    }

    /// Timeline rows carry their write's mark (unsafe over a holder, unsafe with the lock
    /// gone, refused by the fence; nothing for a safe or skipped write) and their pause. The
    /// pause is placed — ending at the write, clipped to the section — only when it struck
    /// before the write; otherwise its place is unknown and only its length is kept.
    #[test]
    fn timeline_write_marks_and_pauses() {
        let with = |worker, a, r, write: &str, pause_us| SectionSpan {
            write: write.into(),
            pause_us,
            ..span(worker, a, r, "released")
        };
        let sections = vec![
            with(0, 0, 300, "unsafe_over_holder", 150),
            with(1, 100, 200, "unsafe", 0),
            with(2, 150, 400, "fenced", 500),
            with(3, 500, 600, "accepted", 0),
            with(4, 600, 700, "skipped", 0),
        ];
        let marks = |t: &Timeline| t.rows.iter().map(|r| r.write).collect::<Vec<_>>();
        let t = timeline("token", 0, 100, Focus::Empty, sections.clone(), &[], true);
        assert_eq!(
            marks(&t),
            [
                Some(WriteMark::UnsafeOverHolder),
                Some(WriteMark::UnsafeLockGone),
                Some(WriteMark::Fenced),
                None,
                None
            ]
        );
        let spans: Vec<Option<(u64, u64)>> = t
            .rows
            .iter()
            .map(|r| r.pause_span(t.pause_before_write))
            .collect();
        assert_eq!(spans[0], Some((150, 300)));
        assert_eq!(spans[1], None, "no pause");
        assert_eq!(
            spans[2],
            Some((150, 400)),
            "longer than the section: clipped"
        );
        let t = timeline("token", 0, 100, Focus::Empty, sections, &[], false);
        assert_eq!(t.rows[0].pause_us, 150);
        assert_eq!(t.rows[0].pause_span(t.pause_before_write), None);
    }

    /// Percentages print with a unit people read (durations: `units::fmt_us`, spaced style).
    #[test]
    fn formats() {
        assert_eq!(fmt_pct(0.0123), "1.23 %");
    }
}
