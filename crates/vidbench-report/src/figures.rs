//! SVG line charts with plotters' SVG backend: one function for every figure
//! of the report (series of (x, y) points, linear or logarithmic axes).
//!
//! Figures must read in greyscale and for colour-blind readers, and the legend
//! must never hide data, so:
//! - every series has a style (one per server configuration, shared by the
//!   series of one configuration): a colour of the Okabe-Ito palette, a dash
//!   pattern and a marker shape: colours and dashes on a period of 8, markers
//!   of 4, so that the eight configurations of a Table 3 each have their own
//!   colour and dash (nginx by default and Apache under Libception shared a
//!   solid line when the dashes ran on a period of 5) and neighbours differ
//!   in all three;
//! - the legend sits in its own panel right of the plotting area;
//! - a point with a confidence interval (a mean over repetitions) gets a
//!   vertical bar of +/- the interval, clipped to the y range;
//! - reference lines (the failure threshold) are drawn across the plot in dark
//!   grey, long-dashed, and named in the legend.

use anyhow::Context;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::path::Path;

/// One line of a chart.
#[derive(Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Half-width of the 95 % confidence interval of each point (same length as
    /// `points`, or empty); `None` for a point measured once.
    pub ci: Vec<Option<f64>>,
    /// Index of the style (colour, dash, marker); series of one configuration share it.
    pub style: usize,
    /// Hollow markers and no line: used for disk throughput beside delivered.
    pub points_only: bool,
}

impl Series {
    /// A line through `points` with no confidence intervals.
    pub fn line(name: String, style: usize, points: Vec<(f64, f64)>) -> Self {
        Series { name, points, ci: Vec::new(), style, points_only: false }
    }
}

/// A horizontal reference line across the plot, named in the legend.
#[derive(Clone)]
pub struct Reference {
    pub y: f64,
    pub name: String,
}

/// A chart's axes and title.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    /// Logarithmic y axis (for values spanning orders of magnitude); points
    /// at or below zero are left out.
    pub log_y: bool,
    /// Fixed y range (e.g. 0..100 for CDFs); computed from the data otherwise.
    pub y_range: Option<(f64, f64)>,
    pub references: Vec<Reference>,
}

/// The Okabe-Ito palette (Okabe and Ito, "Color Universal Design", 2008), in an
/// order that keeps the low-contrast yellow last.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x00, 0x00, 0x00), // black
    RGBColor(0xF0, 0xE4, 0x42), // yellow
];
/// Dash and gap lengths in pixels; (0, 0) is a solid line.
const DASHES: [(u32, u32); 8] = [(0, 0), (10, 5), (3, 4), (16, 5), (7, 3), (2, 8), (24, 4), (5, 10)];
/// Colour of reference lines.
pub const REFERENCE_COLOR: RGBColor = RGBColor(0x44, 0x44, 0x44);
const REFERENCE_DASH: (u32, u32) = (14, 6);

const HEIGHT: u32 = 440;
const PLOT_WIDTH: u32 = 700;
const LEGEND_ROW: i32 = 22;
const FONT: (&str, u32) = ("sans-serif", 13);

#[derive(Clone, Copy)]
struct Style {
    color: RGBColor,
    dash: (u32, u32),
    marker: usize,
}

fn style(i: usize) -> Style {
    // Colours and dashes share a period; shifting the dash by one every
    // period keeps styles i and i + 8 apart (charts with a line per run).
    Style { color: PALETTE[i % PALETTE.len()], dash: DASHES[(i + i / PALETTE.len()) % DASHES.len()], marker: i % 4 }
}

/// Outline of marker `kind` (circle, square, triangle, diamond) around (0, 0) in
/// pixels, closed. One polygon type for every shape keeps the element types
/// concrete (plotters' dynamic elements do not work with a borrowed backend).
fn marker_outline(kind: usize) -> Vec<(i32, i32)> {
    let mut v: Vec<(i32, i32)> = match kind {
        0 => (0..12)
            .map(|k| {
                let a = k as f64 * std::f64::consts::PI / 6.0;
                ((4.5 * a.cos()).round() as i32, (4.5 * a.sin()).round() as i32)
            })
            .collect(),
        1 => vec![(-4, -4), (4, -4), (4, 4), (-4, 4)],
        2 => vec![(0, -5), (5, 4), (-5, 4)],
        _ => vec![(0, -5), (5, 0), (0, 5), (-5, 0)],
    };
    v.push(v[0]);
    v
}

fn bounds(series: &[Series], log_x: bool, references: &[Reference]) -> (f64, f64, f64) {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|x| !log_x || *x > 0.0);
    let (mut lo, mut hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    if !lo.is_finite() {
        lo = if log_x { 1.0 } else { 0.0 };
        hi = lo + 1.0;
    }
    if hi <= lo {
        hi = lo * 2.0 + 1.0;
    }
    let tops = series.iter().flat_map(|s| {
        s.points.iter().enumerate().map(|(i, p)| p.1 + s.ci.get(i).copied().flatten().unwrap_or(0.0))
    });
    let ymax = tops.chain(references.iter().map(|r| r.y)).fold(0.0f64, f64::max);
    (lo, hi, if ymax > 0.0 { ymax * 1.1 } else { 1.0 })
}

/// The y range of a logarithmic axis: from half the smallest positive point
/// or reference line to twice the largest (with its bar); a bar reaching
/// below is cut at the axis, as on a linear one.
fn log_y_range(series: &[Series], references: &[Reference]) -> (f64, f64) {
    let points = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let tops = series.iter().flat_map(|s| s.points.iter().enumerate().map(|(i, p)| p.1 + s.ci.get(i).copied().flatten().unwrap_or(0.0)));
    let positive = |v: &f64| *v > 0.0;
    let lo = points.chain(references.iter().map(|r| r.y)).filter(positive).fold(f64::INFINITY, f64::min);
    let hi = tops.chain(references.iter().map(|r| r.y)).filter(positive).fold(0.0f64, f64::max);
    if lo.is_finite() { (lo / 2.0, hi * 2.0) } else { (0.1, 10.0) }
}

/// Width of the legend panel: room for the longest name (about 7 px per character).
fn legend_width(names: &[&str]) -> u32 {
    let chars = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    (60 + 7 * chars).clamp(140, 420)
}

type Plot<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;

/// Draws the series, their CI bars and the reference lines into `c`.
fn plot<X, Y>(c: &mut Plot<'_, X, Y>, chart: &Chart<'_>, series: &[Series], (ylo, yhi): (f64, f64), (xlo, xhi): (f64, f64)) -> Result<(), Box<dyn std::error::Error>>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    c.configure_mesh().x_desc(chart.x_label).y_desc(chart.y_label).label_style(FONT).draw()?;
    for r in chart.references.iter().filter(|r| !chart.log_y || r.y > 0.0) {
        let line = [(xlo, r.y), (xhi, r.y)];
        c.draw_series(std::iter::once(DashedPathElement::new(line, REFERENCE_DASH.0, REFERENCE_DASH.1, REFERENCE_COLOR.stroke_width(2))))?;
    }
    for s in series {
        let st = style(s.style);
        let shown = |p: &(f64, f64)| (!chart.log_x || p.0 > 0.0) && (!chart.log_y || p.1 > 0.0);
        let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(shown).collect();
        if !s.points_only {
            let line = st.color.stroke_width(2);
            if st.dash.1 == 0 {
                c.draw_series(LineSeries::new(pts.clone(), line))?;
            } else {
                c.draw_series(DashedLineSeries::new(pts.clone(), st.dash.0, st.dash.1, line))?;
            }
        }
        let bars = s.points.iter().zip(&s.ci).filter(|(p, _)| shown(p));
        c.draw_series(bars.filter_map(|(p, ci)| {
            let ci = (*ci)?;
            Some(ErrorBar::new_vertical(p.0, (p.1 - ci).max(ylo), p.1, (p.1 + ci).min(yhi), st.color.stroke_width(1), 8))
        }))?;
        let outline = marker_outline(st.marker);
        if s.points_only {
            c.draw_series(pts.iter().map(|p| EmptyElement::at(*p) + PathElement::new(outline.clone(), st.color.stroke_width(2))))?;
        } else {
            c.draw_series(pts.iter().map(|p| EmptyElement::at(*p) + Polygon::new(outline.clone(), st.color.filled())))?;
        }
    }
    Ok(())
}

/// Draws the legend panel: one row per series, then one per reference line.
fn legend(area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>, series: &[Series], references: &[Reference]) -> Result<(), Box<dyn std::error::Error>> {
    let rows = series.len() + references.len();
    if rows == 0 {
        return Ok(());
    }
    let (w, _) = area.dim_in_pixel();
    let top = 40;
    area.draw(&Rectangle::new([(6, top - 14), (w as i32 - 6, top + LEGEND_ROW * rows as i32 - 6)], WHITE.filled()))?;
    area.draw(&Rectangle::new([(6, top - 14), (w as i32 - 6, top + LEGEND_ROW * rows as i32 - 6)], BLACK.stroke_width(1)))?;
    let sample = |y: i32| [(14, y), (50, y)];
    for (i, s) in series.iter().enumerate() {
        let y = top + LEGEND_ROW * i as i32;
        let st = style(s.style);
        if !s.points_only {
            if st.dash.1 == 0 {
                area.draw(&PathElement::new(sample(y), st.color.stroke_width(2)))?;
            } else {
                area.draw(&DashedPathElement::new(sample(y), st.dash.0, st.dash.1, st.color.stroke_width(2)))?;
            }
        }
        let outline = marker_outline(st.marker);
        if s.points_only {
            area.draw(&(EmptyElement::at((32, y)) + PathElement::new(outline, st.color.stroke_width(2))))?;
        } else {
            area.draw(&(EmptyElement::at((32, y)) + Polygon::new(outline, st.color.filled())))?;
        }
        area.draw(&Text::new(s.name.clone(), (58, y - 7), FONT))?;
    }
    for (i, r) in references.iter().enumerate() {
        let y = top + LEGEND_ROW * (series.len() + i) as i32;
        area.draw(&DashedPathElement::new(sample(y), REFERENCE_DASH.0, REFERENCE_DASH.1, REFERENCE_COLOR.stroke_width(2)))?;
        area.draw(&Text::new(r.name.clone(), (58, y - 7), FONT))?;
    }
    Ok(())
}

/// Draws `series` into an SVG file at `path`: the plot on the left, the legend
/// in a panel on its right.
pub fn line_chart(path: &Path, chart: &Chart<'_>, series: &[Series]) -> anyhow::Result<()> {
    let (xlo, xhi, ymax) = bounds(series, chart.log_x, &chart.references);
    let (ylo, yhi) = chart.y_range.unwrap_or(if chart.log_y { log_y_range(series, &chart.references) } else { (0.0, ymax) });
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).chain(chart.references.iter().map(|r| r.name.as_str())).collect();
    let root = SVGBackend::new(path, (PLOT_WIDTH + legend_width(&names), HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let draw = |root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>| -> Result<(), Box<dyn std::error::Error>> {
        let (left, right) = root.split_horizontally(PLOT_WIDTH);
        let mut builder = ChartBuilder::on(&left);
        builder.caption(chart.title, ("sans-serif", 18)).margin(12).x_label_area_size(40).y_label_area_size(56);
        match (chart.log_x, chart.log_y) {
            (true, true) => plot(&mut builder.build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())?, chart, series, (ylo, yhi), (xlo, xhi))?,
            (true, false) => plot(&mut builder.build_cartesian_2d((xlo..xhi).log_scale(), ylo..yhi)?, chart, series, (ylo, yhi), (xlo, xhi))?,
            (false, true) => plot(&mut builder.build_cartesian_2d(xlo..xhi, (ylo..yhi).log_scale())?, chart, series, (ylo, yhi), (xlo, xhi))?,
            (false, false) => plot(&mut builder.build_cartesian_2d(xlo..xhi, ylo..yhi)?, chart, series, (ylo, yhi), (xlo, xhi))?,
        }
        legend(&right, series, &chart.references)?;
        root.present()?;
        Ok(())
    };
    draw(&root).map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", path.display()))?;
    std::fs::metadata(path).with_context(|| format!("{} was not written", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The figure's structure read back from the SVG plotters wrote: where the
    //! legend is against the plotting area (the bounding box of the mesh lines),
    //! which points got CI bars, where the reference line is.
    use super::*;

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(&tag[at..at + tag[at..].find('"')?])
    }

    fn num(tag: &str, name: &str) -> f64 {
        attr(tag, name).unwrap_or_else(|| panic!("{name} in {tag}")).parse().unwrap()
    }

    /// Every element (one per line in plotters' output) of `kind`.
    fn elements<'a>(svg: &'a str, kind: &str) -> Vec<&'a str> {
        svg.lines().filter(|l| l.starts_with(&format!("<{kind} "))).collect()
    }

    /// x coordinates of an element: its points, or x1/x2, or cx.
    fn xs(tag: &str) -> Vec<f64> {
        if let Some(p) = attr(tag, "points") {
            return p.split_whitespace().map(|xy| xy.split(',').next().unwrap().parse().unwrap()).collect();
        }
        ["x1", "x2", "cx", "x"].iter().filter_map(|a| attr(tag, a)).map(|v| v.parse().unwrap()).collect()
    }

    fn draw(series: &[Series], references: Vec<Reference>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.svg");
        let chart = Chart { title: "t", x_label: "x", y_label: "y", log_x: false, log_y: false, y_range: Some((0.0, 10.0)), references };
        line_chart(&path, &chart, series).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    fn two_series() -> Vec<Series> {
        vec![
            Series {
                name: "measured three times".into(),
                points: vec![(1.0, 2.0), (2.0, 5.0), (3.0, 8.0)],
                ci: vec![Some(1.0), None, Some(0.5)],
                style: 0,
                points_only: false,
            },
            Series { name: "a server with a rather long configuration label disk".into(), points: vec![(1.0, 9.0), (3.0, 9.5)], ci: vec![], style: 1, points_only: true },
        ]
    }

    /// (left, top, right, bottom) of the plotting area: the mesh lines span it.
    fn plot_area(svg: &str) -> (f64, f64, f64, f64) {
        let mesh: Vec<&str> = elements(svg, "line").into_iter().filter(|l| matches!(attr(l, "opacity"), Some("0.1" | "0.2"))).collect();
        assert!(!mesh.is_empty(), "no mesh lines");
        let (mut l, mut t, mut r, mut b) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
        for m in mesh {
            for (x, y) in [(num(m, "x1"), num(m, "y1")), (num(m, "x2"), num(m, "y2"))] {
                (l, t, r, b) = (l.min(x), t.min(y), r.max(x), b.max(y));
            }
        }
        (l, t, r, b)
    }

    #[test]
    fn the_legend_is_outside_the_plotting_area_and_the_data() {
        let svg = draw(&two_series(), vec![Reference { y: 0.3, name: "failure threshold (0.3 %)".into() }]);
        let (_, _, right, _) = plot_area(&svg);
        let frame: Vec<&str> = elements(&svg, "rect").into_iter().filter(|r| attr(r, "stroke") == Some("#000000")).collect();
        assert_eq!(frame.len(), 1, "one framed legend box");
        let (lx, lw) = (num(frame[0], "x"), num(frame[0], "width"));
        assert!(lx > right, "legend box at x={lx} overlaps the plotting area (right edge {right})");
        // Every mark in a series colour left of the legend is data, and all data is left of the box.
        for c in [PALETTE[0], PALETTE[1]] {
            let marks: Vec<&str> = svg.lines().filter(|l| l.contains(&hex(c))).collect();
            let (data, legend): (Vec<&str>, Vec<&str>) = marks.into_iter().partition(|l| xs(l).iter().all(|x| *x < lx));
            assert!(!data.is_empty() && !legend.is_empty(), "{} drawn in the plot and in the legend", hex(c));
            assert!(legend.iter().all(|l| xs(l).iter().all(|x| (lx..=lx + lw).contains(x))), "a legend sample outside its box");
        }
        // The names are in the legend box, each once.
        for name in ["measured three times", "a server with a rather long configuration label disk", "failure threshold (0.3 %)"] {
            let texts: Vec<&str> = svg.lines().filter(|l| l.trim() == name).collect();
            assert_eq!(texts.len(), 1, "{name}");
        }
    }

    #[test]
    fn points_with_repetitions_get_ci_bars_and_others_none() {
        let svg = draw(&two_series(), Vec::new());
        let (_, top, _, bottom) = plot_area(&svg);
        let px = |v: f64| bottom - v / 10.0 * (bottom - top);
        let bars: Vec<&str> = elements(&svg, "line")
            .into_iter()
            .filter(|l| attr(l, "stroke") == Some(hex(PALETTE[0]).as_str()) && num(l, "x1") == num(l, "x2") && num(l, "y1") != num(l, "y2"))
            .collect();
        assert_eq!(bars.len(), 2, "two of three points were repeated: {bars:?}");
        // Bar lengths: +/- 1.0 and +/- 0.5 on a 0-10 axis.
        let mut spans: Vec<f64> = bars.iter().map(|b| (num(b, "y1") - num(b, "y2")).abs()).collect();
        spans.sort_by(f64::total_cmp);
        assert!((spans[0] - (px(0.0) - px(1.0))).abs() <= 2.0, "{spans:?}");
        assert!((spans[1] - (px(0.0) - px(2.0))).abs() <= 2.0, "{spans:?}");
        // The disk series (no CI) draws no bar: nothing vertical in its colour.
        assert!(!elements(&svg, "line").iter().any(|l| attr(l, "stroke") == Some(hex(PALETTE[1]).as_str())));
    }

    #[test]
    fn the_reference_line_is_at_its_y_across_the_plot() {
        let svg = draw(&two_series(), vec![Reference { y: 2.5, name: "failure threshold (2.5 %)".into() }]);
        let (left, top, right, bottom) = plot_area(&svg);
        let want = bottom - 2.5 / 10.0 * (bottom - top);
        let dashes: Vec<&str> = elements(&svg, "polyline").into_iter().filter(|l| attr(l, "stroke") == Some(hex(REFERENCE_COLOR).as_str())).collect();
        let in_plot: Vec<&str> = dashes.iter().copied().filter(|l| xs(l).iter().all(|x| *x <= right)).collect();
        assert!(in_plot.len() > 10, "a dashed line of many segments: {}", in_plot.len());
        let mut span = (f64::MAX, f64::MIN);
        for d in &in_plot {
            for xy in attr(d, "points").unwrap().split_whitespace() {
                let (x, y) = xy.split_once(',').unwrap();
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!((y - want).abs() <= 1.5, "threshold drawn at y={y}, want {want}");
                span = (span.0.min(x), span.1.max(x));
            }
        }
        assert!(span.0 - left <= 20.0 && right - span.1 <= 20.0, "the line spans the plot: {span:?} in {left}..{right}");
        // With no reference, no line in that colour.
        let plain = draw(&two_series(), Vec::new());
        assert!(!plain.contains(&hex(REFERENCE_COLOR)));
    }

    #[test]
    fn a_log_axis_spans_the_points_not_bars_reaching_towards_zero() {
        let s = Series { name: "s".into(), points: vec![(1.0, 10.0), (10.0, 100.0)], ci: vec![Some(9.99), Some(50.0)], style: 0, points_only: false };
        let (lo, hi) = log_y_range(&[s], &[Reference { y: 0.0, name: "zero".into() }, Reference { y: 2.0, name: "two".into() }]);
        assert_eq!((lo, hi), (1.0, 300.0), "from half the lowest point or line to twice the highest bar end");
        assert_eq!(log_y_range(&[], &[]), (0.1, 10.0));
    }

    #[test]
    fn styles_differ_in_colour_dash_and_marker_between_neighbours() {
        for i in 0..16 {
            let (a, b) = (style(i), style(i + 1));
            assert!(a.color != b.color && a.dash != b.dash && a.marker != b.marker, "styles {i} and {}", i + 1);
        }
        // The eight configurations of a Table 3: each its own colour and dash.
        for i in 0..8 {
            for j in i + 1..8 {
                assert!(style(i).color != style(j).color && style(i).dash != style(j).dash, "styles {i} and {j}");
            }
        }
        // Up to forty lines (one per run in some charts), no two alike.
        for i in 0..40 {
            for j in i + 1..40 {
                let (a, b) = (style(i), style(j));
                assert!(a.color != b.color || a.dash != b.dash || a.marker != b.marker, "styles {i} and {j} look alike");
            }
        }
    }
}
