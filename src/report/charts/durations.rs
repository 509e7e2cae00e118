//! `durations.png`: a histogram panel per variant on one shared axis (linear, or log-spaced
//! when the tail spans decades), the TTL line and the p50/p99/p99.9/max marks.

use super::{Area, HEIGHT, Marks, WIDTH, axis_num, bold, fmt_pct, font, ms, with_png};
use crate::model::units::{Style::Spaced, fmt_us};
use crate::report::palette::method_colour;
use hdrhistogram::Histogram;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// Bins of the duration histogram.
pub const DURATION_BINS: usize = 60;
/// The x axis of durations turns logarithmic when max / p50 exceeds this.
pub const LOG_X_SPREAD: f64 = 20.0;

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

/// Size of `durations.png` for `panels` variants.
pub fn durations_size(panels: usize) -> (u32, u32) {
    (WIDTH, HEIGHT.max(60 + 300 * panels as u32))
}

/// `durations.png`: a histogram panel per variant, TTL line, p50/p99/p99.9/max marks.
pub fn draw(path: &Path, c: &DurationChart) -> anyhow::Result<()> {
    with_png(path, durations_size(c.panels.len()), |root| {
        let (top, body) = root.split_vertically(44);
        top.draw(&Text::new(
            format!(
                "Section durations d (measured, acquire reply → release sent), TTL {}",
                fmt_us(c.ttl_us, Spaced)
            ),
            (20, 12),
            bold(20),
        ))?;
        let panels = body.split_evenly((c.panels.len().max(1), 1));
        let (lo, hi) = (c.range_us.0 / 1000.0, c.range_us.1 / 1000.0);
        for (area, p) in panels.iter().zip(&c.panels) {
            if c.log_x {
                duration_panel(area, (lo..hi).log_scale(), c, p)?;
            } else {
                duration_panel(area, lo..hi, c, p)?;
            }
        }
        Ok(())
    })
}

fn duration_panel<XS>(
    area: &Area<'_>,
    xs: XS,
    c: &DurationChart,
    p: &DurationPanel,
) -> anyhow::Result<()>
where
    XS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
{
    let colour = method_colour(&p.variant);
    let top = p.bins.iter().map(|b| b.count).max().unwrap_or(0).max(1) as f64 * 1.3;
    let caption = format!(
        "{}: {} sections · overruns (d > TTL): {} ({} sections)",
        p.variant,
        p.marks.count,
        fmt_pct(p.overrun_fraction()),
        p.overruns
    );
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(30)
        .caption(caption, font(17).color(&colour))
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(xs, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc(if c.log_x {
            "section duration d (ms, log scale)"
        } else {
            "section duration d (ms)"
        })
        .y_desc("sections")
        .x_label_formatter(&|v| axis_num(*v))
        .y_label_formatter(&|v| axis_num(*v))
        .label_style(font(13))
        .axis_desc_style(font(14))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    chart.draw_series(p.bins.iter().filter(|b| b.count > 0).map(|b| {
        Rectangle::new(
            [(b.lo_us / 1000.0, 0.0), (b.hi_us / 1000.0, b.count as f64)],
            colour.mix(0.75).filled(),
        )
    }))?;
    let ttl = ms(c.ttl_us);
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(ttl, 0.0), (ttl, top)],
        BLACK.stroke_width(2),
    )))?;
    chart.draw_series(std::iter::once(Text::new(
        format!(" TTL {}", fmt_us(c.ttl_us, Spaced)),
        (ttl, top * 0.98),
        bold(14),
    )))?;
    if p.marks.count == 0 {
        return Ok(());
    }
    let marks = [
        ("p50", p.marks.p50_us, 0.90),
        ("p99", p.marks.p99_us, 0.82),
        ("p99.9", p.marks.p999_us, 0.74),
        ("max", p.marks.max_us, 0.66),
    ];
    let grey = RGBColor(90, 90, 90);
    for (name, us, at) in marks {
        let x = ms(us);
        chart.draw_series(DashedLineSeries::new(
            vec![(x, 0.0), (x, top * at)],
            5,
            4,
            grey.stroke_width(1),
        ))?;
        // Labels near the right edge go left of their line, so they are not cut off.
        let (px, _) = chart.backend_coord(&(x, top));
        let right = chart.plotting_area().get_pixel_range().0.end;
        let (text, anchor) = if px > right - 140 {
            (format!("{name} {} ", fmt_us(us, Spaced)), HPos::Right)
        } else {
            (format!(" {name} {}", fmt_us(us, Spaced)), HPos::Left)
        };
        chart.draw_series(std::iter::once(Text::new(
            text,
            (x, top * at),
            font(12).color(&grey).pos(Pos::new(anchor, VPos::Top)),
        )))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::hist;

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
}
