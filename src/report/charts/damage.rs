//! `damage.png` (runs in which some variant protects a resource): per variant, lost updates,
//! unsafe writes, fence refusals and extension failures.

use super::{Area, HEIGHT, Hatch, WIDTH, axis_num, bold, font, hatch, with_png};
use crate::report::palette::method_colour;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

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
                    variant: s.meta.variant.clone(),
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

/// `damage.png`: per variant, what the overlap did to the resource and what caught it.
pub fn draw(path: &Path, groups: &[DamageGroup]) -> anyhow::Result<()> {
    with_png(path, (WIDTH, HEIGHT), |root| {
        let (head, body) = root.split_vertically(96);
        head.draw(&Text::new(
            "Damage to the protected resource, per variant (counted by the server)",
            (20, 10),
            bold(20),
        ))?;
        damage_legend(&head, 20, 50)?;
        let n = groups.len().max(1);
        let top = groups
            .iter()
            .flat_map(|g| g.bars().map(|(_, v)| v))
            .max()
            .unwrap_or(0)
            .max(1) as f64
            * 1.2;
        let mut chart = ChartBuilder::on(&body)
            .margin(12)
            .margin_right(30)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n as f64, 0.0..top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("count")
            .y_label_formatter(&|v| axis_num(*v))
            .light_line_style(WHITE.mix(0.0))
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()?;
        let width = 0.8 / Damage::ALL.len() as f64;
        for (i, g) in groups.iter().enumerate() {
            let colour = method_colour(&g.variant);
            for (j, (kind, v)) in g.bars().into_iter().enumerate() {
                let x = i as f64 + 0.1 + j as f64 * width;
                let (x0, x1) = (x + width * 0.1, x + width * 0.9);
                let px0 = chart.backend_coord(&(x0, 0.0));
                let px1 = chart.backend_coord(&(x1, v as f64));
                if kind == Damage::RefusedByFence && g.refused_reads > 0 {
                    // Reads refused, stacked on the writes refused.
                    let mid = chart.backend_coord(&(x1, g.refused_writes as f64));
                    damage_bar(root, kind, colour, px0, (px1.0, mid.1))?;
                    damage_bar(root, kind, paler(colour), (px0.0, mid.1), px1)?;
                } else if v > 0 {
                    damage_bar(root, kind, colour, px0, px1)?;
                }
                chart.draw_series(std::iter::once(Text::new(
                    v.to_string(),
                    ((x0 + x1) / 2.0, v as f64),
                    font(12).pos(Pos::new(HPos::Center, VPos::Bottom)),
                )))?;
            }
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                g.variant.clone(),
                (px, py + 8),
                bold(14)
                    .color(&colour)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
            if !g.resource {
                root.draw(&Text::new(
                    "(no resource)",
                    (px, py + 26),
                    font(12).pos(Pos::new(HPos::Center, VPos::Top)),
                ))?;
            }
        }
        Ok(())
    })
}

/// `c` halfway to white.
fn paler(RGBColor(r, g, b): RGBColor) -> RGBColor {
    let half = |v: u8| v / 2 + 128;
    RGBColor(half(r), half(g), half(b))
}

/// One bar of `damage.png` in pixels: the variant's colour, one pattern per kind of damage.
fn damage_bar(
    area: &Area<'_>,
    kind: Damage,
    colour: RGBColor,
    p0: (i32, i32),
    p1: (i32, i32),
) -> anyhow::Result<()> {
    let light = colour.mix(0.35);
    let (fill, pattern): (ShapeStyle, Option<(Hatch, ShapeStyle)>) = match kind {
        Damage::LostUpdates => (colour.filled(), None),
        Damage::UnsafeOverHolder => (
            colour.filled(),
            Some((Hatch::Rising, BLACK.stroke_width(1))),
        ),
        Damage::UnsafeLockGone => (light.filled(), None),
        Damage::RefusedByFence => (
            WHITE.filled(),
            Some((Hatch::Across, colour.stroke_width(2))),
        ),
        Damage::ExtensionFailures => (
            WHITE.filled(),
            Some((Hatch::Falling, colour.stroke_width(2))),
        ),
    };
    area.draw(&Rectangle::new([p0, p1], fill))?;
    if let Some((h, style)) = pattern {
        hatch(area, p0, p1, h, 6, style)?;
    }
    area.draw(&Rectangle::new([p0, p1], colour.stroke_width(1)))?;
    Ok(())
}

fn damage_legend(area: &Area<'_>, x: i32, y: i32) -> anyhow::Result<()> {
    let grey = RGBColor(110, 110, 110);
    let (mut x, mut y) = (x, y);
    for (i, kind) in Damage::ALL.into_iter().enumerate() {
        if i == 3 {
            (x, y) = (20, y + 26);
        }
        damage_bar(area, kind, grey, (x, y - 8), (x + 26, y + 8))?;
        area.draw(&Text::new(
            kind.label(),
            (x + 34, y),
            font(14).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        x += 70 + 7 * kind.label().chars().count() as i32;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            keys: 0,
        };
        let m = Measured {
            counts,
            ..Measured::default()
        };
        summarize(
            meta,
            StopReason::Limit,
            Protection {
                resource,
                resource_final,
                ..Protection::default()
            },
            &m,
            &crate::record::HistSet::default(),
        )
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
}
