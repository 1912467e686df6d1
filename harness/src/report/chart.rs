//! The Pareto charts of a run: one per view, PNG and SVG, drawn with plotters.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::{kind_label, on_frontier};
use crate::gate::fmt_num;
use crate::pareto::{VIEWS, View};
use crate::results::{PointResult, RunSummary};

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// One Pareto chart of `view`: every config's frontier and points with their 95 % whiskers.
fn draw<DB: DrawingBackend>(root: DrawingArea<DB, plotters::coord::Shift>, run: &RunSummary, view: View) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let pts: Vec<&PointResult> = run.points.iter().filter(|p| p.pareto.is_some()).collect();
    let (xr, yr) = ranges(&pts, view);
    let title = format!("tok/s/GPU vs {} — {}", view.label(), kind_label(run));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(76)
        .build_cartesian_2d(xr, yr)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(view.label())
        .y_desc("total tok/s/GPU")
        .y_label_formatter(&|y| fmt_num(*y))
        .x_label_formatter(&|x| format!("{x:.1}"))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(e)?;

    let mut curves: BTreeMap<&str, Vec<&PointResult>> = BTreeMap::new();
    for p in &pts {
        curves.entry(p.config_key.as_str()).or_default().push(p);
    }
    for (ci, (curve, cpts)) in curves.iter().enumerate() {
        draw_curve(&mut chart, run, view, PALETTE[ci % PALETTE.len()], curve, cpts)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// The axes' ranges: x over every value and interval end with margins (from 0 at the least),
/// y from 0 to above the highest interval end.
fn ranges(pts: &[&PointResult], view: View) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let xs: Vec<f64> = pts
        .iter()
        .flat_map(|p| {
            let pp = p.pareto.as_ref().expect("filtered");
            let ci = pp.x_ci.get(&view).copied().unwrap_or((pp.x[&view], pp.x[&view]));
            [pp.x[&view], ci.0, ci.1]
        })
        .filter(|x| x.is_finite())
        .collect();
    let ys: Vec<f64> = pts
        .iter()
        .flat_map(|p| {
            let pp = p.pareto.as_ref().expect("filtered");
            [pp.y, pp.y_ci.0, pp.y_ci.1]
        })
        .filter(|x| x.is_finite())
        .collect();
    let (x0, x1) = (xs.iter().cloned().fold(f64::INFINITY, f64::min), xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
    let (y0, y1) = (0f64, ys.iter().cloned().fold(0.0, f64::max));
    let (x0, x1) = if x0.is_finite() && x1 > x0 { (x0 - (x1 - x0) * 0.08, x1 + (x1 - x0) * 0.12) } else { (0.0, 1.0) };
    let x0 = x0.max(0.0);
    let y1 = if y1 > 0.0 { y1 * 1.12 } else { 1.0 };
    (x0..x1, y0..y1)
}

/// One config's frontier line (ordered along x) and its points: whiskers, a dot (faint when
/// invalid, ringed when off the frontier) and a label.
fn draw_curve<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    run: &RunSummary,
    view: View,
    color: RGBColor,
    curve: &str,
    cpts: &[&PointResult],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    // Frontier line (ordered along x).
    let mut front: Vec<(f64, f64)> = cpts
        .iter()
        .filter(|p| on_frontier(run, view, &p.id))
        .map(|p| {
            let pp = p.pareto.as_ref().expect("filtered");
            (pp.x[&view], pp.y)
        })
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    chart
        .draw_series(LineSeries::new(front, color.stroke_width(2)))
        .map_err(e)?
        .label(format!("{curve} (frontier)"))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    for p in cpts {
        let pp = p.pareto.as_ref().expect("filtered");
        let (x, y) = (pp.x[&view], pp.y);
        let xci = pp.x_ci.get(&view).copied().unwrap_or((x, x));
        let whisker = color.mix(0.6).stroke_width(1);
        chart.draw_series(std::iter::once(PathElement::new(vec![(x, pp.y_ci.0), (x, pp.y_ci.1)], whisker))).map_err(e)?;
        chart.draw_series(std::iter::once(PathElement::new(vec![(xci.0, y), (xci.1, y)], whisker))).map_err(e)?;
        let style = if pp.valid { color.filled() } else { color.mix(0.3).filled() };
        let on = on_frontier(run, view, &p.id);
        chart.draw_series(std::iter::once(Circle::new((x, y), if on { 6 } else { 4 }, style))).map_err(e)?;
        if !on {
            chart.draw_series(std::iter::once(Circle::new((x, y), 6, color.stroke_width(1)))).map_err(e)?;
        }
        let label = format!("{} c{}", short_arm(&p.arm), p.conc);
        let text = EmptyElement::at((x, y)) + Text::new(label, (8, -16), ("sans-serif", 12).into_font().color(&BLACK));
        chart.draw_series(std::iter::once(text)).map_err(e)?;
    }
    Ok(())
}

fn short_arm(arm: &str) -> String {
    arm.trim_start_matches("Agg ").to_string()
}

/// Writes `pareto_<view>.png` and `.svg` for every view; returns the SVG texts by view.
pub fn charts(run: &RunSummary, dir: &Path) -> Result<BTreeMap<View, String>, String> {
    let mut svgs = BTreeMap::new();
    for v in VIEWS {
        let png = dir.join(format!("pareto_{}.png", v.key()));
        let tmp = dir.join(format!(".pareto_{}.tmp.png", v.key()));
        draw(BitMapBackend::new(&tmp, (1100, 700)).into_drawing_area(), run, v)?;
        std::fs::rename(&tmp, &png).map_err(|e| format!("{}: {e}", png.display()))?;
        let mut svg = String::new();
        draw(SVGBackend::with_string(&mut svg, (1100, 700)).into_drawing_area(), run, v)?;
        crate::problem::atomic_write(&dir.join(format!("pareto_{}.svg", v.key())), svg.as_bytes()).map_err(|e| e.to_string())?;
        svgs.insert(v, svg);
    }
    Ok(svgs)
}
