//! SVG line charts with plotters' SVG backend: one function for every figure
//! of the report (series of (x, y) points, linear or logarithmic x axis).

use anyhow::Context;
use plotters::prelude::*;
use std::path::Path;

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed-looking (points only, no line): used for disk throughput beside delivered.
    pub points_only: bool,
}

/// A chart's axes and title.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    /// Fixed y range (e.g. 0..100 for CDFs); computed from the data otherwise.
    pub y_range: Option<(f64, f64)>,
}

fn bounds(series: &[Series], log_x: bool) -> (f64, f64, f64) {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|x| !log_x || *x > 0.0);
    let (mut lo, mut hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    if !lo.is_finite() {
        lo = if log_x { 1.0 } else { 0.0 };
        hi = lo + 1.0;
    }
    if hi <= lo {
        hi = lo * 2.0 + 1.0;
    }
    let ymax = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0f64, f64::max);
    (lo, hi, if ymax > 0.0 { ymax * 1.1 } else { 1.0 })
}

/// Draws `series` into an SVG file at `path`.
pub fn line_chart(path: &Path, chart: &Chart<'_>, series: &[Series]) -> anyhow::Result<()> {
    let (xlo, xhi, ymax) = bounds(series, chart.log_x);
    let (ylo, yhi) = chart.y_range.unwrap_or((0.0, ymax));
    let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let draw = |root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>| -> Result<(), Box<dyn std::error::Error>> {
        let mut builder = ChartBuilder::on(root);
        builder.caption(chart.title, ("sans-serif", 18)).margin(12).x_label_area_size(40).y_label_area_size(56);
        let colors = |i: usize| Palette99::pick(i).to_rgba();
        if chart.log_x {
            let mut c = builder.build_cartesian_2d((xlo..xhi).log_scale(), ylo..yhi)?;
            c.configure_mesh().x_desc(chart.x_label).y_desc(chart.y_label).draw()?;
            for (i, s) in series.iter().enumerate() {
                let color = colors(i);
                let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| p.0 > 0.0).collect();
                if s.points_only {
                    c.draw_series(pts.iter().map(|p| Cross::new(*p, 4, color.stroke_width(2))))?
                        .label(&s.name)
                        .legend(move |(x, y)| Cross::new((x + 10, y), 4, color.stroke_width(2)));
                } else {
                    c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                        .label(&s.name)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
                    c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
                }
            }
            c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        } else {
            let mut c = builder.build_cartesian_2d(xlo..xhi, ylo..yhi)?;
            c.configure_mesh().x_desc(chart.x_label).y_desc(chart.y_label).draw()?;
            for (i, s) in series.iter().enumerate() {
                let color = colors(i);
                if s.points_only {
                    c.draw_series(s.points.iter().map(|p| Cross::new(*p, 4, color.stroke_width(2))))?
                        .label(&s.name)
                        .legend(move |(x, y)| Cross::new((x + 10, y), 4, color.stroke_width(2)));
                } else {
                    c.draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))?
                        .label(&s.name)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
                    c.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
                }
            }
            c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw(&root).map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", path.display()))?;
    std::fs::metadata(path).with_context(|| format!("{} was not written", path.display()))?;
    Ok(())
}
