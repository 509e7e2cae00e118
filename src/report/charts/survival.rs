//! `survival.png`: P(d > t) on a log y axis — the fraction of sections a TTL t would let
//! expire — with the TTL, where each curve crosses it, and the TTL each risk level asks for.

use super::{Area, HEIGHT, WIDTH, axis_num, bold, fmt_pct, font, ms, prob_label, with_png};
use super::{legend_line, series_labels};
use crate::model::units::{Style::Spaced, fmt_us};
use crate::report::palette::method_colour;
use hdrhistogram::Histogram;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

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

/// `survival.png`: P(d > t) on a log y axis, the TTL and where each curve crosses it.
pub fn draw(
    path: &Path,
    curves: &[SurvivalCurve],
    ttl_us: u64,
    log_x: bool,
    range_us: (f64, f64),
) -> anyhow::Result<()> {
    with_png(path, (WIDTH, HEIGHT), |root| {
        let n = curves.iter().map(|c| c.sections).max().unwrap_or(1).max(1);
        // One decade below the smallest non-zero probability the sample can show.
        let floor = 10f64.powf((0.5 / n as f64).log10().floor());
        let hi = range_us.1 / 1000.0;
        if log_x {
            survival_chart(
                root,
                (range_us.0 / 1000.0..hi).log_scale(),
                curves,
                ttl_us,
                floor,
            )
        } else {
            survival_chart(root, 0.0..hi, curves, ttl_us, floor)
        }
    })
}

fn survival_chart<XS>(
    root: &Area<'_>,
    xs: XS,
    curves: &[SurvivalCurve],
    ttl_us: u64,
    floor: f64,
) -> anyhow::Result<()>
where
    XS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .margin(15)
        .margin_right(40)
        .caption(
            "Survival of section durations: P(d > t) — a TTL t is outlived by this fraction",
            bold(19),
        )
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(xs, (floor..1.5).log_scale())?;
    let x_lo = chart.x_range().start;
    chart
        .configure_mesh()
        .x_desc("duration t (ms)")
        .y_desc("P(d > t), fraction of sections")
        .x_label_formatter(&|v| axis_num(*v))
        .y_label_formatter(&prob_label)
        .label_style(font(13))
        .axis_desc_style(font(14))
        .draw()?;
    for c in curves {
        let colour = method_colour(&c.variant);
        let mut steps = Vec::with_capacity(c.points.len() * 2);
        let mut prev: f64 = 1.0;
        for &(t, p) in &c.points {
            let x = ms(t).max(x_lo);
            steps.push((x, prev.max(floor)));
            steps.push((x, p.max(floor)));
            prev = p;
        }
        chart
            .draw_series(LineSeries::new(steps, colour.stroke_width(2)))?
            .label(format!("{} ({} sections)", c.variant, c.sections))
            .legend(legend_line(colour));
    }
    let ttl = ms(ttl_us);
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(ttl, floor), (ttl, 1.5)],
        BLACK.stroke_width(2),
    )))?;
    chart.draw_series(std::iter::once(Text::new(
        format!(" TTL {}", fmt_us(ttl_us, Spaced)),
        (ttl, 1.2),
        bold(14),
    )))?;
    for (i, c) in curves.iter().enumerate() {
        let colour = method_colour(&c.variant);
        let y = c.at_ttl.max(floor);
        chart.draw_series(std::iter::once(Circle::new((ttl, y), 6, colour.filled())))?;
        let text = if c.overruns == 0 {
            format!("{}: no section outlived the TTL", c.variant)
        } else {
            format!(
                "{}: P(d > TTL) = {} at the TTL ({} of {}, 1 in {:.0})",
                c.variant,
                fmt_pct(c.at_ttl),
                c.overruns,
                c.sections,
                1.0 / c.at_ttl
            )
        };
        let right = chart.plotting_area().get_pixel_range().0.end;
        let y_px = 80 + 40 + 22 * i as i32;
        let w = 9 * text.chars().count() as i32;
        root.draw(&Rectangle::new(
            [(right - w - 20, y_px - 10), (right - 10, y_px + 11)],
            WHITE.mix(0.9).filled(),
        ))?;
        root.draw(&Text::new(
            text,
            (right - 15, y_px),
            bold(14)
                .color(&colour)
                .pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
    }
    // Guide lines of the first curve: the TTL each risk level asks for.
    if let Some(c) = curves.first() {
        let grey = RGBColor(110, 110, 110);
        for &(p, t) in &c.levels {
            chart.draw_series(DashedLineSeries::new(
                vec![(x_lo, p), (ms(t), p)],
                4,
                4,
                grey.stroke_width(1),
            ))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("1 in {:.0} outlives {}", 1.0 / p, fmt_us(t, Spaced)),
                (x_lo, p),
                font(12)
                    .color(&grey)
                    .pos(Pos::new(HPos::Left, VPos::Bottom)),
            )))?;
        }
    }
    series_labels(&mut chart, SeriesLabelPosition::UpperRight, 14)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::hist;

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
}
