//! `sweep.png`: overrun fraction, overlap and wrongful deletes per hour against the TTL, one
//! line per release method. Its numbers come from `commands::sweep` (`chart_series`).

use super::{Area, WIDTH, axis_num, bold, font, prob_label, with_png};
use super::{legend_line, series_labels};
use crate::model::units::{Style::Spaced, fmt_us};
use crate::report::palette::method_colour;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

/// One method's line in `sweep.png`: `(TTL in real ms, value)` points, in TTL order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SweepSeries {
    /// Release method.
    pub method: String,
    /// Overrun fraction per TTL.
    pub overrun_fraction: Vec<(f64, f64)>,
    /// Seconds of overlap per hour of operation per TTL.
    pub overlap_s_per_hour: Vec<(f64, f64)>,
    /// Wrongful deletes per hour of operation per TTL.
    pub wrongful_per_hour: Vec<(f64, f64)>,
    /// Seconds keys stayed blocked after holder crashes, per hour of operation per TTL.
    pub blocked_s_per_hour: Vec<(f64, f64)>,
}

/// `sweep.png`: overrun fraction, overlap time per hour and wrongful deletes per hour against
/// the TTL (log x; log y for the first two, where zero is drawn on the floor line) — and, when
/// holders crashed, the other side of the choice: blocked time after crashes, rising with it.
pub(crate) fn draw(path: &Path, series: &[SweepSeries], ttl_unit: &str) -> anyhow::Result<()> {
    let crashes = series
        .iter()
        .any(|s| s.blocked_s_per_hour.iter().any(|p| p.1 > 0.0));
    let n = if crashes { 4 } else { 3 };
    with_png(path, (WIDTH, 350 * n as u32), |root| {
        let panels = root.split_evenly((n, 1));
        let all = |f: fn(&SweepSeries) -> &Vec<(f64, f64)>| {
            series
                .iter()
                .flat_map(move |s| f(s).iter().copied())
                .collect::<Vec<_>>()
        };
        let ttls: Vec<f64> = all(|s| &s.overrun_fraction).iter().map(|p| p.0).collect();
        let (lo, hi) = ttls
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &t| (a.min(t), b.max(t)));
        if ttls.is_empty() || lo <= 0.0 {
            panels[0].draw(&Text::new("no sweep cell ran", (40, 40), bold(18)))?;
            return Ok(());
        }
        let xr = (lo / 1.3)..(hi * 1.3);
        type Pick = fn(&SweepSeries) -> &Vec<(f64, f64)>;
        let specs: [(&str, &str, Pick, bool); 4] = [
            (
                "Overrun fraction: P(d > TTL)",
                "fraction of sections",
                |s| &s.overrun_fraction,
                true,
            ),
            (
                "Overlap: time with ≥ 2 holders per hour of operation",
                "seconds per hour",
                |s| &s.overlap_s_per_hour,
                true,
            ),
            (
                "Wrongful deletes per hour of operation",
                "deletes per hour",
                |s| &s.wrongful_per_hour,
                false,
            ),
            (
                "After holder crashes: time keys stayed blocked per hour of operation",
                "seconds per hour",
                |s| &s.blocked_s_per_hour,
                false,
            ),
        ];
        for (area, (title, ydesc, pick, log_y)) in panels.iter().zip(specs) {
            let values = all(pick);
            let max = values.iter().map(|p| p.1).fold(0.0, f64::max);
            let min_pos = values
                .iter()
                .map(|p| p.1)
                .filter(|v| *v > 0.0)
                .fold(f64::MAX, f64::min);
            let x_desc = format!("TTL ({ttl_unit}, log scale)");
            let xs = xr.clone().log_scale();
            if log_y {
                // Zero cannot sit on a log axis: it is drawn on the bottom line, and said so.
                let floor = if min_pos == f64::MAX {
                    1e-4
                } else {
                    10f64.powf(min_pos.log10().floor()) / 10.0
                };
                let top = (max * 2.0).max(floor * 100.0);
                let title = if values.iter().any(|p| p.1 == 0.0) {
                    format!("{title} (zero drawn on the bottom line)")
                } else {
                    title.to_string()
                };
                let lines = sweep_lines(series, pick, floor);
                sweep_panel(
                    area,
                    &title,
                    &x_desc,
                    ydesc,
                    xs,
                    (floor..top).log_scale(),
                    &lines,
                    &prob_label,
                )?;
            } else {
                let lines = sweep_lines(series, pick, f64::MIN);
                sweep_panel(
                    area,
                    title,
                    &x_desc,
                    ydesc,
                    xs,
                    0.0..(max * 1.15).max(1.0),
                    &lines,
                    &|v| axis_num(*v),
                )?;
            }
        }
        Ok(())
    })
}

/// `(method, points)` of one sweep panel, values lifted to at least `floor`.
fn sweep_lines(
    series: &[SweepSeries],
    pick: fn(&SweepSeries) -> &Vec<(f64, f64)>,
    floor: f64,
) -> Vec<(String, Vec<(f64, f64)>)> {
    series
        .iter()
        .map(|s| {
            (
                s.method.clone(),
                pick(s).iter().map(|&(x, y)| (x, y.max(floor))).collect(),
            )
        })
        .collect()
}

/// One panel of `sweep.png`: a line per method against the TTL.
#[allow(clippy::too_many_arguments)]
fn sweep_panel<XS, YS>(
    area: &Area<'_>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    xs: XS,
    ys: YS,
    lines: &[(String, Vec<(f64, f64)>)],
    y_label: &dyn Fn(&f64) -> String,
) -> anyhow::Result<()>
where
    XS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
    YS: AsRangedCoord<Value = f64>,
    YS::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .margin_right(30)
        .caption(title, bold(17))
        .x_label_area_size(40)
        .y_label_area_size(75)
        .build_cartesian_2d(xs, ys)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(8)
        .x_label_formatter(&|v| fmt_us((*v * 1000.0) as u64, Spaced))
        .y_label_formatter(y_label)
        .label_style(font(12))
        .axis_desc_style(font(13))
        .draw()?;
    for (method, pts) in lines {
        let c = method_colour(method);
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(method.clone())
            .legend(legend_line(c));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
    }
    series_labels(&mut chart, SeriesLabelPosition::UpperRight, 13)?;
    Ok(())
}
