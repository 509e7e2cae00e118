//! Exact overlap accounting for one lock key.
//!
//! A section is open on `[acquire reply received, release sent]`. For a key, *overlap time* is
//! the total time during which two or more sections are open, an *incident* is a section that
//! begins while another one is open, and the *peak* is the largest number of simultaneous
//! holders. Sections that merely touch (one ends at the instant the next begins) do not overlap.
//!
//! The same [`KeyTracker`] state machine serves the live run (workers call [`KeyTracker::open`] /
//! [`KeyTracker::close`] under a per-key mutex, so events arrive in time order) and the offline
//! computation over recorded intervals ([`compute`]), so both give identical figures.

/// Overlap figures for one key (or, merged, for a whole run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OverlapStats {
    /// Total time, in microseconds, with two or more sections open.
    pub overlap_us: u64,
    /// Sections that began while at least one other section of the same key was open.
    pub incidents: u64,
    /// Largest number of sections open at once (1 when sections never overlapped, 0 if none).
    pub peak_holders: u32,
    /// Number of maximal stretches with two or more holders.
    pub stretches: u64,
    /// When the first stretch with two or more holders began (µs), if any.
    pub first_overlap_us: Option<u64>,
}

impl OverlapStats {
    /// Adds another key's figures: times and counts add up, the peak is the larger one.
    pub fn merge(&mut self, other: &OverlapStats) {
        self.overlap_us += other.overlap_us;
        self.incidents += other.incidents;
        self.peak_holders = self.peak_holders.max(other.peak_holders);
        self.stretches += other.stretches;
        self.first_overlap_us = match (self.first_overlap_us, other.first_overlap_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Live state of one key: how many sections are open and since when the count last changed,
/// and the figures so far (and when the latest section opened). 56 bytes: with its mutex, one cache line per key in the recorder
/// (a section touches its key's tracker twice, seconds apart: two cache misses, not four).
#[derive(Debug, Clone)]
pub struct KeyTracker {
    open: u32,
    /// When the latest section opened, µs.
    last_open_us: u64,
    peak_holders: u32,
    /// Counts of one key: u32 keeps the tracker in one cache line with its mutex.
    incidents: u32,
    stretches: u32,
    last_change_us: u64,
    stretch_start_us: u64,
    overlap_us: u64,
    /// [`NO_OVERLAP`] until the first stretch.
    first_overlap_us: u64,
}

/// "No overlap yet" in [`KeyTracker::first_overlap_us`].
const NO_OVERLAP: u64 = u64::MAX;

impl Default for KeyTracker {
    fn default() -> Self {
        Self {
            open: 0,
            last_open_us: 0,
            peak_holders: 0,
            last_change_us: 0,
            stretch_start_us: 0,
            overlap_us: 0,
            incidents: 0,
            stretches: 0,
            first_overlap_us: NO_OVERLAP,
        }
    }
}

impl KeyTracker {
    /// A section opens at `t_us`. Returns how many other sections were open at that instant.
    /// Times must not go backwards (callers feed events in time order).
    pub fn open(&mut self, t_us: u64) -> u32 {
        self.advance(t_us);
        self.last_open_us = t_us;
        let others = self.open;
        if others >= 1 {
            self.incidents = self.incidents.saturating_add(1);
        }
        if others == 1 {
            self.stretch_start_us = t_us;
            if self.first_overlap_us == NO_OVERLAP {
                self.first_overlap_us = t_us;
            }
        }
        self.open += 1;
        self.peak_holders = self.peak_holders.max(self.open);
        others
    }

    /// How many sections are open.
    pub fn holders(&self) -> u32 {
        self.open
    }

    /// When the latest section opened, µs (0: none yet).
    pub fn last_open_us(&self) -> u64 {
        self.last_open_us
    }

    /// A section closes at `t_us`. Returns the overlap stretch `[start, end)` this close
    /// ended, if the number of holders just fell from two to one.
    pub fn close(&mut self, t_us: u64) -> Option<(u64, u64)> {
        self.advance(t_us);
        self.open = self.open.saturating_sub(1);
        if self.open == 1 {
            self.stretches = self.stretches.saturating_add(1);
            Some((self.stretch_start_us, t_us.max(self.stretch_start_us)))
        } else {
            None
        }
    }

    /// The time to stamp an event happening `now_us`: strictly after this key's previous
    /// event. Live events of one key then never share a microsecond, so the order the live
    /// tracker saw is the order [`compute`] reconstructs from the recorded timestamps (which
    /// puts a close before an open at equal times).
    pub fn stamp(&self, now_us: u64) -> u64 {
        now_us.max(self.last_change_us + 1)
    }

    /// Figures so far (overlap time counted up to the last event).
    pub fn stats(&self) -> OverlapStats {
        OverlapStats {
            overlap_us: self.overlap_us,
            incidents: u64::from(self.incidents),
            peak_holders: self.peak_holders,
            stretches: u64::from(self.stretches),
            first_overlap_us: (self.first_overlap_us != NO_OVERLAP)
                .then_some(self.first_overlap_us),
        }
    }

    fn advance(&mut self, t_us: u64) {
        let t = t_us.max(self.last_change_us);
        if self.open >= 2 {
            self.overlap_us += t - self.last_change_us;
        }
        self.last_change_us = t;
    }
}

/// Computes overlap figures for the sections `(start_us, end_us)` of one key, in any order.
/// Also returns every overlap stretch `[start, end)`, in time order.
pub fn compute(intervals: &[(u64, u64)]) -> (OverlapStats, Vec<(u64, u64)>) {
    // Order at equal times: ends of real intervals first (touching is not overlapping), then
    // starts, then ends of zero-length intervals (which must follow their own start).
    let mut events: Vec<(u64, u8)> = Vec::with_capacity(intervals.len() * 2);
    for &(s, e) in intervals {
        let e = e.max(s);
        events.push((s, 1));
        events.push((e, if e == s { 2 } else { 0 }));
    }
    events.sort_unstable();
    let mut tracker = KeyTracker::default();
    let mut stretches = Vec::new();
    for (t, kind) in events {
        if kind == 1 {
            tracker.open(t);
        } else if let Some(stretch) = tracker.close(t) {
            stretches.push(stretch);
        }
    }
    (tracker.stats(), stretches)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(iv: &[(u64, u64)]) -> OverlapStats {
        compute(iv).0
    }

    /// Disjoint sections never overlap, and the peak is one holder.
    #[test]
    fn disjoint_sections_do_not_overlap() {
        let s = stats(&[(0, 10), (20, 30), (40, 50)]);
        assert_eq!(
            s,
            OverlapStats {
                overlap_us: 0,
                incidents: 0,
                peak_holders: 1,
                stretches: 0,
                first_overlap_us: None
            }
        );
    }

    /// A section ending exactly when the next begins is not an overlap.
    #[test]
    fn touching_ends_are_not_overlap() {
        let s = stats(&[(0, 10), (10, 20), (20, 30)]);
        assert_eq!(s.overlap_us, 0);
        assert_eq!(s.incidents, 0);
        assert_eq!(s.peak_holders, 1);
    }

    /// A section entirely inside another overlaps for its whole length.
    #[test]
    fn nested_section_overlaps_for_its_length() {
        let (s, stretches) = compute(&[(0, 100), (20, 50)]);
        assert_eq!(s.overlap_us, 30);
        assert_eq!(s.incidents, 1);
        assert_eq!(s.peak_holders, 2);
        assert_eq!(stretches, vec![(20, 50)]);
    }

    /// A chain A–B–C where each overlaps only the next: two separate stretches.
    #[test]
    fn chained_sections_add_their_pairwise_overlaps() {
        let (s, stretches) = compute(&[(0, 10), (8, 20), (15, 30)]);
        // [8,10] and [15,20]
        assert_eq!(s.overlap_us, 2 + 5);
        assert_eq!(s.incidents, 2);
        assert_eq!(s.peak_holders, 2);
        assert_eq!(stretches, vec![(8, 10), (15, 20)]);
        assert_eq!(s.first_overlap_us, Some(8));
    }

    /// Three at once: overlap time counts wall time with ≥ 2 holders, not pairs.
    #[test]
    fn three_at_once_counts_time_not_pairs() {
        let (s, stretches) = compute(&[(0, 30), (10, 40), (20, 50)]);
        // ≥2 holders from 10 to 40
        assert_eq!(s.overlap_us, 30);
        assert_eq!(s.incidents, 2);
        assert_eq!(s.peak_holders, 3);
        assert_eq!(stretches, vec![(10, 40)]);
    }

    /// Input order does not matter, and zero-length sections inside another count as incidents
    /// but add no time.
    #[test]
    fn order_independent_and_zero_length() {
        let a = stats(&[(20, 50), (0, 30), (10, 40)]);
        let b = stats(&[(0, 30), (10, 40), (20, 50)]);
        assert_eq!(a, b);
        let z = stats(&[(0, 10), (5, 5)]);
        assert_eq!(z.overlap_us, 0);
        assert_eq!(z.incidents, 1);
        assert_eq!(z.peak_holders, 2);
        let lone = stats(&[(5, 5)]);
        assert_eq!(lone.peak_holders, 1);
    }

    /// Live stamps of one key strictly increase, so an open and a close in the same microsecond
    /// are recorded in the order they happened and recomputed identically.
    #[test]
    fn live_stamps_strictly_increase() {
        let mut k = KeyTracker::default();
        let a0 = k.stamp(10);
        k.open(a0);
        let b0 = k.stamp(20);
        k.open(b0); // B opens while A still holds...
        let a1 = k.stamp(20); // ...and A closes in the same microsecond.
        k.close(a1);
        let b1 = k.stamp(30);
        k.close(b1);
        assert!(a1 > b0);
        assert_eq!(compute(&[(a0, a1), (b0, b1)]).0, k.stats());
        assert_eq!(k.stats().incidents, 1);
    }

    /// Merging keys adds times and counts and keeps the larger peak.
    #[test]
    fn merge_adds_and_keeps_peak() {
        let mut a = stats(&[(0, 100), (20, 50)]);
        let b = stats(&[(0, 30), (10, 40), (20, 50)]);
        a.merge(&b);
        assert_eq!(a.overlap_us, 60);
        assert_eq!(a.incidents, 3);
        assert_eq!(a.peak_holders, 3);
    }
}
