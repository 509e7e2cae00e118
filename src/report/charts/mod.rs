//! The charts, one module per chart: each holds the numbers its chart plots (pure functions
//! of histograms, intervals, rows and summaries, tested as numbers rather than pixels) and the
//! drawing that turns them into a PNG with plotters. What they share — the size, the embedded
//! font, axis numbers, hatching, the milliseconds and percentages printed — lives here once.
//!
//! Text uses the embedded DejaVu Sans (registered once as `sans-serif`), so charts look the
//! same on every machine and need no system fonts.

pub mod acquire_latency;
pub mod compare;
pub mod damage;
pub mod durations;
pub mod survival;
pub(crate) mod sweep;
pub mod timeline;

use anyhow::Context;
use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;

/// Milliseconds from microseconds.
pub fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// A fraction as a percentage with enough digits to tell small values apart.
pub fn fmt_pct(f: f64) -> String {
    let p = f * 100.0;
    if p == 0.0 {
        "0 %".to_string()
    } else if p >= 10.0 {
        format!("{p:.1} %")
    } else if p >= 0.1 {
        format!("{p:.2} %")
    } else {
        format!("{p:.4} %")
    }
}

/// The marked points of a distribution, µs (HdrHistogram values, as the summary reports them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest value.
    pub max_us: u64,
}

impl Marks {
    /// From a µs histogram (all zero when empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Width of every chart.
pub const WIDTH: u32 = 1000;
/// Height of single-panel charts.
pub const HEIGHT: u32 = 600;

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Registers the embedded fonts once per process.
fn fonts() -> anyhow::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let reg = |style, bytes| {
            plotters::style::register_font("sans-serif", style, bytes)
                .map_err(|_| "the embedded DejaVu font did not load".to_string())
        };
        reg(FontStyle::Normal, dejavu::sans::regular())?;
        reg(FontStyle::Bold, dejavu::sans::bold())
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().into()
}

fn bold(size: u32) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .style(FontStyle::Bold)
        .into()
}

/// Short axis numbers: `0.5`, `12`, `1500`.
fn axis_num(v: f64) -> String {
    let a = v.abs();
    let s = if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn with_png<F>(path: &Path, size: (u32, u32), draw: F) -> anyhow::Result<()>
where
    F: FnOnce(&Area<'_>) -> anyhow::Result<()>,
{
    fonts()?;
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    draw(&root).with_context(|| format!("cannot draw {}", path.display()))?;
    root.present()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Probability tick labels: plain numbers down to 0.01, then `1e-3` style.
fn prob_label(v: &f64) -> String {
    if *v >= 0.01 {
        axis_num(*v)
    } else {
        format!("{v:.0e}")
    }
}

/// Which way the lines of a [`hatch`] run.
#[derive(Debug, Clone, Copy)]
enum Hatch {
    /// Rising to the right.
    Rising,
    /// Falling to the right.
    Falling,
    /// Horizontal.
    Across,
}

/// Hatches the pixel rectangle `(x0, y0)–(x1, y1)` with lines `step` pixels apart, each
/// clipped to the rectangle.
fn hatch(
    area: &Area<'_>,
    (x0, y0): (i32, i32),
    (x1, y1): (i32, i32),
    kind: Hatch,
    step: i32,
    style: ShapeStyle,
) -> anyhow::Result<()> {
    let (x0, x1) = (x0.min(x1), x0.max(x1));
    let (y0, y1) = (y0.min(y1), y0.max(y1));
    let step = step.max(2);
    let lines: Vec<[(i32, i32); 2]> = match kind {
        Hatch::Across => (y0 + step / 2..y1)
            .step_by(step as usize)
            .map(|y| [(x0, y), (x1, y)])
            .collect(),
        // Pixel y grows downwards: a rising line keeps x + y constant.
        Hatch::Rising => (x0 + y0 + step / 2..x1 + y1)
            .step_by(step as usize)
            .map(|c| {
                let (a, b) = ((c - y1).max(x0), (c - y0).min(x1));
                [(a, c - a), (b, c - b)]
            })
            .collect(),
        Hatch::Falling => (x0 - y1 + step / 2..x1 - y0)
            .step_by(step as usize)
            .map(|c| {
                let (a, b) = ((c + y0).max(x0), (c + y1).min(x1));
                [(a, a - c), (b, b - c)]
            })
            .collect(),
    };
    for [p, q] in lines {
        area.draw(&PathElement::new(vec![p, q], style))?;
    }
    Ok(())
}

/// The legend mark of a line series: a short thick stroke of its colour.
fn legend_line(colour: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
}

/// The legend box of the line charts: white, framed, in the corner `position`.
fn series_labels<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, CT>,
    position: SeriesLabelPosition,
    size: u32,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(font(size))
        .draw()?;
    Ok(())
}

/// A µs histogram of `values`, for the charts' tests.
#[cfg(test)]
fn hist(values: &[u64]) -> Histogram<u64> {
    let mut h = crate::record::new_hist();
    for &v in values {
        h.record(v).unwrap();
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Axis numbers stay short.
    #[test]
    fn axis_numbers() {
        assert_eq!(axis_num(0.0), "0");
        assert_eq!(axis_num(12.5), "12.5");
        assert_eq!(axis_num(1500.0), "1500");
        assert_eq!(axis_num(0.25), "0.25");
    }

    /// Percentages print with a unit people read (durations: `units::fmt_us`, spaced style).
    #[test]
    fn formats() {
        assert_eq!(fmt_pct(0.0123), "1.23 %");
    }
}
