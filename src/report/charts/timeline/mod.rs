//! `timeline.png`: the holders of the busiest key around the first overlap — TTL expiries,
//! overlap in red, wrongful deletes and refused releases, unsafe and fenced writes, pauses.
//! [`window`] picks which sections are shown; this file turns them into rows and draws them.
//!
//! Past 800 lines with the window in it: the window (with its tests) is its own file.

pub mod window;

use super::{Area, HEIGHT, Hatch, WIDTH, axis_num, bold, font, hatch, ms, with_png};
use crate::model::release::ReleaseOutcome;
use crate::model::units::{Style::Spaced, fmt_us};
use crate::record::SectionOutcome;
use crate::report::palette::method_colour;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Most sections shown in the timeline.
pub const TIMELINE_ROWS: usize = 40;

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
    pub fn from_outcome(outcome: SectionOutcome) -> Option<Self> {
        match outcome.release()? {
            ReleaseOutcome::WrongfulDelete => Some(Self::WrongfulDelete),
            ReleaseOutcome::RefusedExpired => Some(Self::RefusedExpired),
            ReleaseOutcome::RefusedHeldByOther => Some(Self::RefusedHeldByOther),
            ReleaseOutcome::RefusedUnclassified => Some(Self::RefusedUnclassified),
            ReleaseOutcome::Released | ReleaseOutcome::NothingDeleted => None,
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
    pub outcome: SectionOutcome,
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
                mark: ReleaseMark::from_outcome(s.outcome),
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

const BAR_OK: RGBColor = RGBColor(150, 170, 190);
const BAR_EXPIRED: RGBColor = RGBColor(240, 170, 60);
const BAR_LOST: RGBColor = RGBColor(120, 60, 160);
const OVERLAP: RGBColor = RGBColor(220, 0, 0);
const UNSAFE: RGBColor = RGBColor(200, 0, 160);
const FENCED: RGBColor = RGBColor(0, 140, 70);
const PAUSE: RGBColor = RGBColor(50, 50, 50);
/// Fault windows on the timeline (shaded behind the bars).
const FAULT: RGBColor = RGBColor(120, 60, 160);

/// A diamond of half-width `r` around `(x, y)`, in pixels.
fn diamond((x, y): (i32, i32), r: i32) -> Vec<(i32, i32)> {
    vec![(x, y - r), (x + r, y), (x, y + r), (x - r, y)]
}

fn draw_write_mark(area: &Area<'_>, mark: WriteMark, p: (i32, i32)) -> anyhow::Result<()> {
    match mark {
        WriteMark::UnsafeOverHolder => {
            area.draw(&Polygon::new(diamond(p, 6), UNSAFE.filled()))?;
            area.draw(&PathElement::new(
                [diamond(p, 6), vec![(p.0, p.1 - 6)]].concat(),
                BLACK.stroke_width(1),
            ))?;
        }
        WriteMark::UnsafeLockGone => {
            area.draw(&Polygon::new(diamond(p, 6), WHITE.filled()))?;
            area.draw(&PathElement::new(
                [diamond(p, 5), vec![(p.0, p.1 - 5)]].concat(),
                UNSAFE.stroke_width(2),
            ))?;
        }
        WriteMark::Fenced => {
            let (x, y) = p;
            area.draw(&Rectangle::new(
                [(x - 5, y - 5), (x + 5, y + 5)],
                FENCED.filled(),
            ))?;
        }
    }
    Ok(())
}

/// The pause symbol: two short vertical bars.
fn draw_pause_icon(area: &Area<'_>, (x, y): (i32, i32)) -> anyhow::Result<()> {
    for dx in [-3, 2] {
        area.draw(&Rectangle::new(
            [(x + dx, y - 5), (x + dx + 2, y + 5)],
            PAUSE.filled(),
        ))?;
    }
    Ok(())
}

fn draw_mark(area: &Area<'_>, mark: ReleaseMark, (x, y): (i32, i32)) -> anyhow::Result<()> {
    match mark {
        ReleaseMark::WrongfulDelete => {
            area.draw(&Cross::new((x, y), 6, BLACK.stroke_width(3)))?;
        }
        ReleaseMark::RefusedExpired => {
            area.draw(&Circle::new((x, y), 5, BLACK.stroke_width(2)))?;
        }
        ReleaseMark::RefusedHeldByOther => {
            area.draw(&TriangleMarker::new((x, y), 7, BLACK.filled()))?;
        }
        ReleaseMark::RefusedUnclassified => {
            area.draw(&Circle::new((x, y), 5, RGBColor(90, 90, 90).filled()))?;
        }
    }
    Ok(())
}

/// `timeline.png`: a Gantt view of one key's holders around the first overlap.
pub fn draw(path: &Path, t: &Timeline) -> anyhow::Result<()> {
    with_png(path, (WIDTH, HEIGHT), |root| {
        let resource_marks = t.rows.iter().any(|r| r.write.is_some() || r.pause_us > 0);
        let (head, body) = root.split_vertically(if resource_marks { 100 } else { 78 });
        let colour = method_colour(&t.variant);
        let title = match t.focus {
            Focus::FirstOverlap(at) => format!(
                "Holders of key {} ({}) around the first overlap, at {:.1} ms",
                t.key,
                t.variant,
                ms(at)
            ),
            Focus::Longest(_) => format!(
                "Holders of key {} ({}): no two holders ever overlapped; sections around the longest one",
                t.key, t.variant
            ),
            Focus::Empty => "No sections were recorded".to_string(),
        };
        head.draw(&Text::new(title, (20, 8), bold(18).color(&colour)))?;
        legend(&head, 20, 40)?;
        if resource_marks {
            resource_legend(&head, 20, 84, t.pause_before_write)?;
        }
        if t.rows.is_empty() {
            return Ok(());
        }
        let n = t.rows.len();
        let lo = t.rows.iter().map(|r| r.acquired_us).min().unwrap_or(0);
        let mut hi = t.rows.iter().map(|r| r.released_us).max().unwrap_or(lo);
        let expiry = t.rows.iter().map(|r| r.expiry_us).max().unwrap_or(hi);
        if expiry <= hi + (hi - lo) / 2 {
            hi = hi.max(expiry);
        }
        let pad = ((hi - lo) as f64 * 0.03).max(1.0) / 1000.0;
        let (x0, x1) = (ms(lo) - pad, ms(hi) + pad);
        let mut chart = ChartBuilder::on(&body)
            .margin(10)
            .margin_right(30)
            .x_label_area_size(40)
            .y_label_area_size(90)
            .build_cartesian_2d(x0..x1, 0.0..n as f64)?;
        chart
            .configure_mesh()
            .x_desc("time since the run started (ms)")
            .y_desc("holder (worker · section)")
            .x_label_formatter(&|v| axis_num(*v))
            .y_labels(0)
            .disable_y_mesh()
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()?;
        // Fault windows behind the bars, named at the top.
        for (kind, s, e) in &t.faults {
            let (s, e) = (ms(*s).max(x0), ms(*e).min(x1));
            if s >= e {
                continue;
            }
            chart.draw_series(std::iter::once(Rectangle::new(
                [(s, 0.0), (e, n as f64)],
                FAULT.mix(0.18).filled(),
            )))?;
            let (px, py) = chart.backend_coord(&(s, n as f64));
            root.draw(&Text::new(
                kind.clone(),
                (px + 4, py + 2),
                font(12).color(&FAULT),
            ))?;
        }
        // Row i from the top.
        let y = |i: usize| (n - i) as f64 - 0.5;
        for (i, r) in t.rows.iter().enumerate() {
            let (a, rel, exp) = (ms(r.acquired_us), ms(r.released_us), ms(r.expiry_us));
            let yc = y(i);
            let (y0, y1) = (yc - 0.33, yc + 0.33);
            let valid_until = rel.min(exp);
            let lost = r.lost_at_us.map(ms).filter(|&l| l < valid_until);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(a, y0), (lost.unwrap_or(valid_until), y1)],
                BAR_OK.filled(),
            )))?;
            if let Some(l) = lost {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(l, y0), (valid_until, y1)],
                    BAR_LOST.filled(),
                )))?;
            }
            if rel > exp {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(exp, y0), (rel, y1)],
                    BAR_EXPIRED.filled(),
                )))?;
            }
            // A narrower red band, so whether the lock was still valid stays visible.
            chart.draw_series(r.red.iter().map(|&(s, e)| {
                Rectangle::new([(ms(s), yc - 0.2), (ms(e), yc + 0.2)], OVERLAP.filled())
            }))?;
            if exp <= x1 {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(exp, yc - 0.45), (exp, yc + 0.45)],
                    BLACK.stroke_width(2),
                )))?;
            }
            let (px, py) = chart.backend_coord(&(x0, yc));
            root.draw(&Text::new(
                format!("w{} · {}", r.worker, r.seq),
                (px - 8, py),
                font(11).pos(Pos::new(HPos::Right, VPos::Center)),
            ))?;
            // Where the pause fell is known only for `before-write` (see `pause_span`):
            // hatched there, over the bar's own colours; otherwise only its length is shown.
            if let Some((s, e)) = r.pause_span(t.pause_before_write) {
                let p0 = chart.backend_coord(&(ms(s), y0));
                let p1 = chart.backend_coord(&(ms(e), y1));
                hatch(root, p0, p1, Hatch::Rising, 5, PAUSE.stroke_width(1))?;
            }
            let p = chart.backend_coord(&(rel, yc));
            if r.pause_us > 0 {
                let text = format!("{} pause", fmt_us(r.pause_us, Spaced));
                let right = chart.plotting_area().get_pixel_range().0.end;
                let w = 7 * text.chars().count() as i32 + 14;
                // Right of the release, or left of the bar's start near the right edge.
                let x = if p.0 + 14 + w < right {
                    p.0 + 14
                } else {
                    chart.backend_coord(&(a, yc)).0 - w - 4
                };
                draw_pause_icon(root, (x + 4, p.1))?;
                root.draw(&Text::new(
                    text,
                    (x + 12, p.1),
                    font(11)
                        .color(&PAUSE)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                ))?;
            }
            // The write is sent just before the release: its mark sits just left of it.
            if let Some(w) = r.write {
                draw_write_mark(root, w, (p.0 - 10, p.1))?;
            }
            if let Some(m) = r.mark {
                draw_mark(root, m, p)?;
            }
        }
        Ok(())
    })
}

fn legend(area: &Area<'_>, x: i32, y: i32) -> anyhow::Result<()> {
    let mut x = x;
    let swatch = |area: &Area<'_>, x: i32, c: RGBColor, text: &str| -> anyhow::Result<i32> {
        area.draw(&Rectangle::new([(x, y - 6), (x + 22, y + 6)], c.filled()))?;
        area.draw(&Text::new(
            text.to_string(),
            (x + 28, y),
            font(13).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        Ok(x + 34 + 7 * text.chars().count() as i32)
    };
    x = swatch(area, x, BAR_OK, "holding, lock valid")?;
    x = swatch(area, x, BAR_EXPIRED, "holding after TTL expiry")?;
    x = swatch(
        area,
        x,
        BAR_LOST,
        "lock deleted by another or lost in a restart",
    )?;
    x = swatch(area, x, OVERLAP, "≥ 2 holders")?;
    area.draw(&PathElement::new(
        vec![(x + 10, y - 8), (x + 10, y + 8)],
        BLACK.stroke_width(2),
    ))?;
    area.draw(&Text::new(
        "TTL expiry",
        (x + 18, y),
        font(13).pos(Pos::new(HPos::Left, VPos::Center)),
    ))?;
    x += 100;
    let y2 = y + 22;
    let mut x2 = 20;
    for m in ReleaseMark::ALL {
        draw_mark(area, m, (x2 + 8, y2))?;
        area.draw(&Text::new(
            format!("release: {}", m.label()),
            (x2 + 20, y2),
            font(13).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        x2 += 40 + 7 * (9 + m.label().chars().count()) as i32;
    }
    let _ = x;
    Ok(())
}

/// The third legend row: resource writes and pauses.
fn resource_legend(area: &Area<'_>, x: i32, y: i32, before_write: bool) -> anyhow::Result<()> {
    let mut x = x;
    let label = |area: &Area<'_>, x: i32, text: &str| -> anyhow::Result<i32> {
        area.draw(&Text::new(
            text.to_string(),
            (x, y),
            font(13).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        Ok(x + 7 * text.chars().count() as i32 + 24)
    };
    for m in WriteMark::ALL {
        draw_write_mark(area, m, (x + 6, y))?;
        x = label(area, x + 16, m.label())?;
    }
    if before_write {
        area.draw(&Rectangle::new(
            [(x, y - 6), (x + 22, y + 6)],
            BAR_OK.filled(),
        ))?;
        hatch(
            area,
            (x, y - 6),
            (x + 22, y + 6),
            Hatch::Rising,
            5,
            PAUSE.stroke_width(1),
        )?;
        label(area, x + 28, "holder paused (before the write)")?;
    } else {
        draw_pause_icon(area, (x + 4, y))?;
        label(
            area,
            x + 14,
            "holder paused (length; where is not recorded)",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stretches with ≥ 2 holders agree with overlap::compute's total and ignore touching ends.
    #[test]
    fn stretches_match_compute() {
        let iv = [(0, 10), (8, 20), (15, 30), (30, 40), (35, 36)];
        let s = overlap_stretches(&iv);
        assert_eq!(s, vec![(8, 10), (15, 20), (35, 36)]);
        let total: u64 = s.iter().map(|(a, b)| b - a).sum();
        assert_eq!(total, crate::analysis::overlap::compute(&iv).0.overlap_us);
    }

    fn span(worker: usize, a: u64, r: u64, outcome: &str) -> SectionSpan {
        SectionSpan {
            worker,
            seq: 0,
            acquired_us: a,
            released_us: r,
            outcome: SectionOutcome::from_name(outcome).unwrap(),
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
}
