//! `acquire-latency.png`: an HdrHistogram percentile plot of acquire latency, one line per
//! variant, on the "nines" axis.

use super::{HEIGHT, Marks, WIDTH, axis_num, bold, font, ms, with_png};
use super::{legend_line, series_labels};
use crate::model::units::{Style::Spaced, fmt_us};
use crate::report::palette::method_colour;
use hdrhistogram::Histogram;
use plotters::prelude::*;
use std::path::Path;

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

/// `acquire-latency.png`: HdrHistogram percentile plot, one line per variant.
pub fn draw(path: &Path, curves: &[PercentileCurve]) -> anyhow::Result<()> {
    with_png(path, (WIDTH, HEIGHT), |root| {
        let n = curves.iter().map(|c| c.count).max().unwrap_or(1).max(1) as f64;
        let x_hi = 10f64.powf(n.log10().ceil()).max(100.0);
        let y_hi = curves
            .iter()
            .map(|c| ms(c.marks.max_us))
            .fold(0.0, f64::max)
            .max(0.001)
            * 1.1;
        let mut chart = ChartBuilder::on(root)
            .margin(15)
            .margin_right(40)
            .caption(
                "Acquire latency by percentile (first attempt → lock acquired)",
                bold(19),
            )
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d((1.0..x_hi).log_scale(), 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("percentile (log scale of 1/(1−p))")
            .y_desc("acquire latency (ms)")
            .x_labels(8)
            .x_label_formatter(&|x| nines_label(*x))
            .y_label_formatter(&|v| axis_num(*v))
            .label_style(font(13))
            .axis_desc_style(font(14))
            .draw()?;
        for c in curves {
            let colour = method_colour(&c.variant);
            chart
                .draw_series(LineSeries::new(
                    c.points.iter().map(|&(x, v)| (x, ms(v))),
                    colour.stroke_width(2),
                ))?
                .label(format!(
                    "{}: p50 {} · p99 {} · p99.9 {} · max {} (n = {})",
                    c.variant,
                    fmt_us(c.marks.p50_us, Spaced),
                    fmt_us(c.marks.p99_us, Spaced),
                    fmt_us(c.marks.p999_us, Spaced),
                    fmt_us(c.marks.max_us, Spaced),
                    c.count
                ))
                .legend(legend_line(colour));
        }
        series_labels(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::hist;

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
}
