//! `compare.png` (runs with several variants): overruns, stale and refused releases, wrongful
//! deletes, overlap and throughput side by side, one small bar chart per figure.

use super::{Area, HEIGHT, WIDTH, axis_num, bold, font, with_png};
use crate::report::palette::method_colour;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

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
                .map(|s| (s.meta.variant.clone(), pick(s)))
                .collect(),
        })
        .collect()
}

/// `compare.png`: one small bar chart per figure, one bar per release method.
pub fn draw(path: &Path, panels: &[ComparePanel]) -> anyhow::Result<()> {
    with_png(path, (WIDTH, HEIGHT), |root| {
        let (head, body) = root.split_vertically(40);
        head.draw(&Text::new(
            "Release methods side by side (same seed, same workload)",
            (20, 10),
            bold(20),
        ))?;
        let cells = body.split_evenly((2, 3));
        for (area, p) in cells.iter().zip(panels) {
            compare_panel(area, p)?;
        }
        Ok(())
    })
}

fn compare_panel(area: &Area<'_>, p: &ComparePanel) -> anyhow::Result<()> {
    let n = p.values.len().max(1);
    let top = p.values.iter().map(|v| v.1).fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.25 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .caption(p.title, bold(15))
        // Names of a compare across servers (`token@valkey-8.1.8`) take two lines.
        .x_label_area_size(if p.values.iter().any(|v| v.0.contains('@')) {
            52
        } else {
            28
        })
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(p.unit)
        .y_label_formatter(&|v| axis_num(*v))
        .light_line_style(WHITE.mix(0.0))
        .label_style(font(12))
        .axis_desc_style(font(12))
        .draw()?;
    for (i, (name, v)) in p.values.iter().enumerate() {
        let colour = method_colour(name);
        let x = i as f64;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, 0.0), (x + 0.3, *v)],
            colour.filled(),
        )))?;
        let (px, py) = chart.backend_coord(&(x, 0.0));
        let (bx, by) = area.get_base_pixel();
        // `token@valkey-8.1.8` as three short lines: token / valkey / 8.1.8.
        let lines: Vec<&str> = match name.split_once('@') {
            Some((variant, server)) => std::iter::once(variant)
                .chain(server.splitn(2, '-'))
                .collect(),
            None => vec![name.as_str()],
        };
        for (j, line) in lines.iter().enumerate() {
            area.draw(&Text::new(
                line.to_string(),
                (px - bx, py - by + 6 + 13 * j as i32),
                font(if j == 0 { 13 } else { 10 }).pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        let label = if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            axis_num(*v)
        };
        chart.draw_series(std::iter::once(Text::new(
            label,
            (x, *v),
            bold(13).pos(Pos::new(HPos::Center, VPos::Bottom)),
        )))?;
    }
    Ok(())
}
