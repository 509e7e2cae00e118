//! Which sections of the key `timeline.png` shows: [`WindowPicker`], fed every section of the
//! key in one pass over `events.csv`, keeps a bounded number of them.

use super::{Focus, SectionSpan};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(iv: &[(u64, u64)]) -> Vec<SectionSpan> {
        iv.iter()
            .enumerate()
            .map(|(i, &(a, r))| SectionSpan {
                worker: i,
                seq: 0,
                acquired_us: a,
                released_us: r,
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
}
