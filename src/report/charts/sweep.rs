//! `sweep.png`: overrun fraction, overlap and wrongful deletes per hour against the TTL, one
//! line per release method: its numbers ([`series`], from the cells' summaries) and its
//! drawing ([`draw`]). The per-hour figures are also the sweep table's and `sweep.csv`'s.

use super::{Area, WIDTH, axis_num, bold, font, prob_label, with_png};
use super::{legend_line, series_labels};
use crate::analysis::summary::Summary;
use crate::model::units::{Style::Spaced, fmt_us};
use crate::model::variant::Variant;
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

/// Seconds of overlap per hour of operation (real, unscaled time: the scale cancels); `None`
/// when the cell ran for no time.
pub(crate) fn overlap_s_per_hour(s: &Summary) -> Option<f64> {
    (s.meta.elapsed_s > 0.0).then(|| s.overlap_ms / 1000.0 / (s.meta.elapsed_s / 3600.0))
}
/// Seconds keys stayed blocked after holder crashes, per hour of operation (the scale
/// cancels, as for overlap).
pub(crate) fn blocked_s_per_hour(s: &Summary) -> Option<f64> {
    let total_ms = s.crash_blocked_ms.mean * s.crash_blocked_ms.count as f64;
    (s.meta.elapsed_s > 0.0).then(|| total_ms / 1000.0 / (s.meta.elapsed_s / 3600.0))
}
/// Wrongful deletes per hour of real (unscaled) operation.
pub(crate) fn wrongful_deletes_per_hour(s: &Summary) -> Option<f64> {
    (s.meta.elapsed_s > 0.0)
        .then(|| s.counts.wrongful_deletes as f64 / (s.meta.elapsed_s / s.meta.time_scale / 3600.0))
}

/// The numbers `sweep.png` plots, from the sweep's cells that ran (their release method and
/// summary): per method, each figure against the TTL in real (unscaled) milliseconds, in TTL
/// order; methods in the order they first appear.
pub(crate) fn series<'a>(
    cells: impl IntoIterator<Item = (&'a Variant, &'a Summary)>,
) -> Vec<SweepSeries> {
    let mut out: Vec<SweepSeries> = Vec::new();
    for (release, s) in cells {
        let i = match out.iter().position(|x| x.method == release.name()) {
            Some(i) => i,
            None => {
                out.push(SweepSeries {
                    method: release.name(),
                    overrun_fraction: Vec::new(),
                    overlap_s_per_hour: Vec::new(),
                    wrongful_per_hour: Vec::new(),
                    blocked_s_per_hour: Vec::new(),
                });
                out.len() - 1
            }
        };
        let x = s.meta.unscaled_ttl_ms;
        let e = &mut out[i];
        e.overrun_fraction.push((x, s.overrun_fraction));
        e.overlap_s_per_hour
            .push((x, overlap_s_per_hour(s).unwrap_or(0.0)));
        e.wrongful_per_hour
            .push((x, wrongful_deletes_per_hour(s).unwrap_or(0.0)));
        e.blocked_s_per_hour
            .push((x, blocked_s_per_hour(s).unwrap_or(0.0)));
    }
    for e in &mut out {
        for v in [
            &mut e.overrun_fraction,
            &mut e.overlap_s_per_hour,
            &mut e.wrongful_per_hour,
            &mut e.blocked_s_per_hour,
        ] {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    out
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
                    (&x_desc, ydesc),
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
                    (&x_desc, ydesc),
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

/// One panel of `sweep.png`: a line per method against the TTL; `descs` are the x and y
/// axes' descriptions.
fn sweep_panel<XS, YS>(
    area: &Area<'_>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::release::ReleaseMethod;

    /// A cell's summary: `ttl_ms`, run for `elapsed_s` at `time_scale`, with `wrongful`
    /// wrongful deletes and `overlap_ms` of overlap.
    fn cell(
        ttl_ms: f64,
        elapsed_s: f64,
        time_scale: f64,
        wrongful: u64,
        overlap_ms: f64,
    ) -> Summary {
        use crate::analysis::summary::{Measured, Meta, Protection, StopReason, summarize};
        let meta = Meta {
            variant: "v".into(),
            release: "del".into(),
            connection_mode: "per-worker".into(),
            backend: "memory".into(),
            server_version: "memory".into(),
            workers: 1,
            ttl_ms: (ttl_ms * time_scale) as u64,
            time_scale,
            unscaled_ttl_ms: ttl_ms,
            seed: 1,
            elapsed_s,
            keys: 0,
        };
        let m = Measured {
            counts: crate::analysis::counts::Counts {
                wrongful_deletes: wrongful,
                ..Default::default()
            },
            ..Measured::default()
        };
        let mut s = summarize(
            meta,
            StopReason::Limit,
            Protection::default(),
            &m,
            &crate::record::HistSet::default(),
        );
        s.overlap_ms = overlap_ms;
        s
    }

    /// One line per method in the order they first appear, points in TTL order, the per-hour
    /// figures in real time (a cell that ran for no time draws 0).
    #[test]
    fn series_groups_by_method_and_orders_by_ttl() {
        let (del, token) = (
            Variant::from(ReleaseMethod::Del),
            Variant::from(ReleaseMethod::Token),
        );
        let cells = [
            (del, cell(200.0, 3600.0, 1.0, 2, 1000.0)),
            (token, cell(100.0, 1800.0, 1.0, 0, 0.0)),
            (del, cell(100.0, 360.0, 0.1, 1, 500.0)),
            (del, cell(50.0, 0.0, 1.0, 1, 0.0)),
        ];
        let s = series(cells.iter().map(|(v, s)| (v, s)));
        assert_eq!(
            s.iter().map(|x| x.method.as_str()).collect::<Vec<_>>(),
            ["del", "token"]
        );
        assert_eq!(
            s[0].wrongful_per_hour,
            [(50.0, 0.0), (100.0, 1.0), (200.0, 2.0)]
        );
        assert_eq!(
            s[0].overlap_s_per_hour,
            [(50.0, 0.0), (100.0, 5.0), (200.0, 1.0)]
        );
        assert_eq!(s[1].overrun_fraction.len(), 1);
    }
}
