//! Drawing: turns the numbers of [`super::data`] into PNGs with plotters. No computation of
//! figures happens here, only layout, so the numbers are tested in `data` and the drawing only
//! has to decode and not be blank.
//!
//! Past 800 lines through one drawing function per chart (seven, each with its legend and
//! marks), not through computation: every number drawn comes from `data`.
//!
//! Text uses the embedded DejaVu Sans (registered once as `sans-serif`), so charts look the
//! same on every machine and need no system fonts.

use super::data::{
    ComparePanel, Damage, DamageGroup, DurationChart, DurationPanel, Focus, PercentileCurve,
    ReleaseMark, SurvivalCurve, Timeline, WriteMark, fmt_pct, ms, nines_label,
};
use super::palette::method_colour;
use crate::model::units::{Style::Spaced, fmt_us};
use anyhow::Context;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::OnceLock;

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

/// Size of `durations.png` for `panels` variants.
pub fn durations_size(panels: usize) -> (u32, u32) {
    (WIDTH, HEIGHT.max(60 + 300 * panels as u32))
}

/// `durations.png`: a histogram panel per variant, TTL line, p50/p99/p99.9/max marks.
pub fn durations(path: &Path, c: &DurationChart) -> anyhow::Result<()> {
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

/// `survival.png`: P(d > t) on a log y axis, the TTL and where each curve crosses it.
pub fn survival(
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
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
            });
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(font(14))
        .draw()?;
    Ok(())
}

/// `acquire-latency.png`: HdrHistogram percentile plot, one line per variant.
pub fn acquire_latency(path: &Path, curves: &[PercentileCurve]) -> anyhow::Result<()> {
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
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(font(14))
            .draw()?;
        Ok(())
    })
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
pub fn timeline(path: &Path, t: &Timeline) -> anyhow::Result<()> {
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

/// `damage.png`: per variant, what the overlap did to the resource and what caught it.
pub fn damage(path: &Path, groups: &[DamageGroup]) -> anyhow::Result<()> {
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

/// `compare.png`: one small bar chart per figure, one bar per release method.
pub fn compare(path: &Path, panels: &[ComparePanel]) -> anyhow::Result<()> {
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
}

/// One method's line in `sweep.png`: `(TTL in real ms, value)` points, in TTL order.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSeries {
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
pub fn sweep(path: &Path, series: &[SweepSeries], ttl_unit: &str) -> anyhow::Result<()> {
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
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(font(13))
        .draw()?;
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
