//! The Pareto charts of a run. One panel per model × hardware (configs of one model on one GPU
//! share a panel unless their scales differ by more than 20×, then each config has its own), so
//! a curve is never pressed flat by another's range; axes turn logarithmic where a range spans
//! more than 20×; labels never overprint ([`super::labels`]); every point carries its 95 %
//! bootstrap whiskers on both axes, drawn over the marker; a legend under the plot explains
//! the markers and the frontier rule. Each chart is written as `pareto_<key>.svg` and `.png`
//! (its panels side by side) and inlined panel by panel in `report.html`.

use std::collections::BTreeMap;
use std::path::Path;

use super::axis::Axis;
use super::error::ReportError;
use super::labels::{self, Placed, Request, Segment};
use super::on_frontier;
use super::scene::{Anchor, Bounds, Item, Rgb, Scene, text_width};
use crate::gate::fmt_num;
use crate::pareto::{Point, View};
use crate::results::{PointResult, RunSummary};

/// Series colours (colour-blind-safe Tableau order), one per config in the run.
const PALETTE: [Rgb; 8] = [
    Rgb(31, 119, 180),
    Rgb(214, 39, 40),
    Rgb(44, 160, 44),
    Rgb(148, 103, 189),
    Rgb(255, 127, 14),
    Rgb(23, 190, 207),
    Rgb(140, 86, 75),
    Rgb(227, 119, 194),
];

/// Configs of one group whose typical values differ by more than this get a panel each.
const SPLIT_RATIO: f64 = 20.0;

/// What a chart plots: total or output tok/s/GPU (y) against a view's metric (x).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Chart {
    Total(View),
    /// Output tok/s/GPU against the North Star's x (InferenceX shows it beside the total).
    Output,
}

impl Chart {
    /// In the order the report shows them: the frontier's own view first.
    pub const ALL: [Chart; 5] = [
        Chart::Total(View::E2eNormIntvtyP90),
        Chart::Output,
        Chart::Total(View::IntvtyP90),
        Chart::Total(View::E2elP90),
        Chart::Total(View::E2elP75),
    ];

    /// The x-axis view.
    pub fn view(self) -> View {
        match self {
            Chart::Total(v) => v,
            Chart::Output => View::E2eNormIntvtyP90,
        }
    }

    /// File stem: `pareto_<view>` (as before) and `pareto_output_e2e_norm_intvty_p90`.
    pub fn key(self) -> String {
        match self {
            Chart::Total(v) => format!("pareto_{}", v.key()),
            Chart::Output => format!("pareto_output_{}", View::E2eNormIntvtyP90.key()),
        }
    }

    pub fn y_label(self) -> &'static str {
        match self {
            Chart::Total(_) => "total tok/s/GPU",
            Chart::Output => "output tok/s/GPU",
        }
    }

    pub fn title(self) -> String {
        let what = match self {
            Chart::Total(View::E2eNormIntvtyP90) => " (the frontier's view)".to_string(),
            _ => String::new(),
        };
        format!("{} against {}{what}", self.y_label(), self.view().label())
    }

    fn y(self, r: &PointResult, p: &Point) -> (f64, (f64, f64)) {
        match self {
            Chart::Total(_) => (p.y, p.y_ci),
            // Runs analysed before output intervals existed: the aggregate's figure, no interval.
            Chart::Output if p.y_out == 0.0 => {
                let y = r.summary.as_ref().map_or(0.0, |s| s.output_tput_per_gpu);
                (y, (y, y))
            }
            Chart::Output => (p.y_out, p.y_out_ci),
        }
    }
}

/// Points that share a panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub title: String,
    pub configs: Vec<String>,
}

/// Model prefix and GPU of an InferenceX config key (`<model>-<precision>-<gpu>-…`).
fn model_and_gpu(key: &str) -> (String, String) {
    let parts: Vec<&str> = key.split('-').collect();
    if parts.len() >= 3 { (parts[0].to_string(), parts[2].to_uppercase()) } else { (key.to_string(), String::new()) }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite() && *x > 0.0);
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A panel's model, GPU and fixed-seq-len sequence (none: AgentX).
type PanelKey = (String, String, Option<String>);

/// The run's panels: one per model × GPU, split per config where scales differ by > 20×.
pub fn groups(run: &RunSummary) -> Vec<Group> {
    // In the order the run lists its points (as the summary table does).
    // Panels per model × GPU × scenario (AgentX, or each fixed ISL/OSL); curves per config and
    // sequence length (`PointResult::curve_key`).
    let mut by: Vec<(PanelKey, Vec<String>)> = Vec::new();
    for p in run.points.iter().filter(|p| p.pareto.is_some()) {
        let (model, gpu) = model_and_gpu(&p.config_key);
        let key = (model, gpu, p.seq().map(str::to_string));
        let i = by.iter().position(|(k, _)| *k == key).unwrap_or_else(|| {
            by.push((key, Vec::new()));
            by.len() - 1
        });
        let curve = p.curve_key();
        if !by[i].1.contains(&curve) {
            by[i].1.push(curve);
        }
    }
    let mut out = Vec::new();
    for ((model, gpu, seq), configs) in by {
        let mut title = if gpu.is_empty() { model.clone() } else { format!("{model} on {gpu}") };
        if let Some(s) = seq {
            title = format!("{title}, fixed {}", seq_label(&s));
        }
        let typical = |f: &dyn Fn(&Point) -> f64| -> Vec<f64> {
            configs
                .iter()
                .map(|c| median(run.points.iter().filter(|p| &p.curve_key() == c).filter_map(|p| p.pareto.as_ref()).map(f).collect()))
                .collect()
        };
        let spread = |v: Vec<f64>| {
            let v: Vec<f64> = v.into_iter().filter(|x| x.is_finite()).collect();
            let (a, b) = (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max));
            if a > 0.0 { b / a } else { 1.0 }
        };
        let split = configs.len() > 1
            && (spread(typical(&|p| p.y)) > SPLIT_RATIO || spread(typical(&|p| p.x[&View::E2eNormIntvtyP90])) > SPLIT_RATIO);
        if split {
            out.extend(configs.into_iter().map(|c| Group { title: c.clone(), configs: vec![c] }));
        } else {
            out.push(Group { title, configs });
        }
    }
    out
}

/// `1k1k` → `1k/1k`, `2048_128` → `2048/128` (a matrix's sequence name as a reader writes it).
pub fn seq_label(s: &str) -> String {
    if let Some((i, o)) = s.split_once('_') {
        return format!("{i}/{o}");
    }
    match s.find('k') {
        Some(k) if k + 1 < s.len() => format!("{}/{}", &s[..=k], &s[k + 1..]),
        _ => s.to_string(),
    }
}

/// Each config's colour, stable across every chart of the run.
pub fn colors(run: &RunSummary) -> BTreeMap<String, Rgb> {
    let mut keys: Vec<String> = run.points.iter().map(|p| p.curve_key()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().enumerate().map(|(i, k)| (k.to_string(), PALETTE[i % PALETTE.len()])).collect()
}

/// The page of a point, relative to the run directory (ids hold `/`: nested folders).
pub fn point_href(id: &str) -> String {
    format!("{}/report.html", id.replace(':', "_"))
}

/// A short label: `DEP2 c160`.
pub fn short_label(p: &PointResult) -> String {
    format!("{} c{}", p.arm.trim_start_matches("Agg ").trim(), p.conc)
}

const W: f64 = 640.0;
const ML: f64 = 78.0;
const MR: f64 = 20.0;
const MT: f64 = 50.0;
const PH: f64 = 330.0;
const XA: f64 = 48.0;
const R: f64 = 5.5;
const LABEL: f64 = 12.0;
const SMALL: f64 = 11.0;

/// One point as a panel draws it.
struct Dot<'a> {
    p: &'a PointResult,
    x: f64,
    y: f64,
    xci: (f64, f64),
    yci: (f64, f64),
    front: bool,
    valid: bool,
    color: Rgb,
}

fn ci_text(ci: (f64, f64)) -> String {
    format!("95 % CI {}–{}", fmt_num(ci.0), fmt_num(ci.1))
}

fn tooltip(run: &RunSummary, chart: Chart, d: &Dot) -> String {
    format!(
        "{} — {}, concurrency {}\n{}: {} ({})\n{}: {} ({})\nfrontier: {}\nstatus: {}",
        d.p.id,
        d.p.arm,
        d.p.conc,
        chart.y_label(),
        fmt_num(d.y),
        ci_text(d.yci),
        chart.view().label(),
        fmt_num(d.x),
        ci_text(d.xci),
        super::frontier_cell(run, d.p),
        super::status_text(d.p)
    )
}

/// One panel of `chart` over the configs of `g`.
pub fn panel(run: &RunSummary, chart: Chart, g: &Group, colors: &BTreeMap<String, Rgb>) -> Scene {
    let dots = dots(run, chart, g, colors);
    let (px0, px1, py0, py1) = (ML, W - MR, MT + PH, MT);
    let xs: Vec<f64> = dots.iter().flat_map(|d| [d.x, d.xci.0, d.xci.1]).collect();
    let ys: Vec<f64> = dots.iter().flat_map(|d| [d.y, d.yci.0, d.yci.1]).collect();
    let (xa, ya) = (Axis::fit(&xs, px0, px1), Axis::fit(&ys, py0, py1));
    let mut items = Vec::new();
    frame(&mut items, g, chart, run, &xa, &ya);
    let soft = frontier_lines(&mut items, &dots, g, colors, &xa, &ya);
    // Markers, each with its whiskers on top and a hover title linking to the point's page.
    let mut markers = Vec::new();
    let mut reqs = Vec::new();
    let mut whiskers = Vec::new();
    for d in &dots {
        let c = (xa.px(d.x), ya.px(d.y));
        markers.push(Bounds::new(c.0 - R, c.1 - R, c.0 + R, c.1 + R));
        reqs.push(Request { at: c, r: R, text: short_label(d.p), size: LABEL });
        let (item, segments) = marker(run, chart, d, &xa, &ya);
        whiskers.extend(segments);
        items.push(item);
    }
    let placed = labels::place(&reqs, Bounds::new(px0, py1, px1, py0), &markers, &[(&whiskers, 40.0), (&soft, 12.0)]);
    let keyed = label_items(&mut items, &placed, &reqs);
    let h = legend(&mut items, chart, g, colors, &keyed);
    Scene { w: W, h, items }
}

/// The points of `g` that have an x in `chart`'s view, as the panel draws them.
fn dots<'a>(run: &'a RunSummary, chart: Chart, g: &Group, colors: &BTreeMap<String, Rgb>) -> Vec<Dot<'a>> {
    let view = chart.view();
    run.points
        .iter()
        .filter(|p| g.configs.contains(&p.curve_key()))
        .filter_map(|p| {
            let pp = p.pareto.as_ref()?;
            let x = *pp.x.get(&view)?;
            let (y, yci) = chart.y(p, pp);
            let front = on_frontier(run, view, &p.id);
            Some(Dot {
                p,
                x,
                y,
                xci: pp.x_ci.get(&view).copied().unwrap_or((x, x)),
                yci,
                front,
                valid: pp.valid,
                color: colors.get(&p.curve_key()).copied().unwrap_or(PALETTE[0]),
            })
        })
        .collect()
}

/// Draws each config's frontier line (under the markers); returns their segments, which
/// labels should avoid.
fn frontier_lines(items: &mut Vec<Item>, dots: &[Dot], g: &Group, colors: &BTreeMap<String, Rgb>, xa: &Axis, ya: &Axis) -> Vec<Segment> {
    let mut soft: Vec<Segment> = Vec::new();
    for c in &g.configs {
        let mut f: Vec<(f64, f64)> = dots.iter().filter(|d| &d.p.curve_key() == c && d.front).map(|d| (xa.px(d.x), ya.px(d.y))).collect();
        f.sort_by(|a, b| a.0.total_cmp(&b.0));
        soft.extend(f.windows(2).map(|w| (w[0], w[1])));
        let color = colors.get(c).copied().unwrap_or(PALETTE[0]);
        items.push(Item::Line { pts: f, color, width: 2.0, dash: false, opacity: 0.9, class: "frontier" });
    }
    soft
}

/// A point's marker with its whiskers and caps, grouped under a hover title that links to the
/// point's page; also the whiskers' two segments, which labels must keep clear of.
fn marker(run: &RunSummary, chart: Chart, d: &Dot, xa: &Axis, ya: &Axis) -> (Item, [Segment; 2]) {
    let c = (xa.px(d.x), ya.px(d.y));
    let (fill, stroke) = if !d.valid {
        (Some(Rgb::LIGHT), Some((Rgb::GREY, 1.5)))
    } else if d.front {
        (Some(d.color), Some((d.color.darker(0.3), 1.0)))
    } else {
        (Some(Rgb::WHITE), Some((d.color, 2.0)))
    };
    let wc = if d.valid { d.color.darker(0.45) } else { Rgb::GREY };
    let (x0, x1, y0, y1) = (xa.px(d.xci.0), xa.px(d.xci.1), ya.px(d.yci.0), ya.px(d.yci.1));
    let segments = [((x0 - 1.0, c.1), (x1 + 1.0, c.1)), ((c.0, y0 + 1.0), (c.0, y1 - 1.0))];
    let cap = 4.0;
    let w = |pts, class| Item::Line { pts, color: wc, width: 1.5, dash: false, opacity: 1.0, class };
    let group = vec![
        Item::Circle { c, r: R, fill, stroke, class: "mk" },
        w(vec![(x0, c.1), (x1, c.1)], "wx"),
        w(vec![(x0, c.1 - cap), (x0, c.1 + cap)], "wx"),
        w(vec![(x1, c.1 - cap), (x1, c.1 + cap)], "wx"),
        w(vec![(c.0, y0), (c.0, y1)], "wy"),
        w(vec![(c.0 - cap, y0), (c.0 + cap, y0)], "wy"),
        w(vec![(c.0 - cap, y1), (c.0 + cap, y1)], "wy"),
    ];
    let item = Item::Group {
        items: group,
        title: Some(tooltip(run, chart, d)),
        href: Some(point_href(&d.p.id)),
        id: Some(d.p.id.clone()),
        class: if d.front { "pt front" } else { "pt" },
        offset: (0.0, 0.0),
    };
    (item, segments)
}

/// Draws the placed labels and their leaders; returns the numbered ones (number, label text),
/// sorted, for the legend's key.
fn label_items(items: &mut Vec<Item>, placed: &[Placed], reqs: &[Request]) -> Vec<(usize, String)> {
    let mut keyed: Vec<(usize, String)> = Vec::new();
    for (p, r) in placed.iter().zip(reqs) {
        if let Some((a, b)) = p.leader {
            items.push(Item::Line { pts: vec![a, b], color: Rgb::GREY, width: 1.0, dash: false, opacity: 1.0, class: "leader" });
        }
        if !p.text.is_empty() {
            items.push(Item::Text {
                at: p.at,
                text: p.text.clone(),
                size: LABEL,
                anchor: p.anchor,
                color: Rgb::BLACK,
                bold: p.key.is_some(),
                vertical: false,
                class: "lbl",
            });
        }
        if let Some(k) = p.key {
            keyed.push((k, r.text.clone()));
        }
    }
    keyed.sort();
    keyed
}

/// Title, grid, ticks and axis titles.
fn frame(items: &mut Vec<Item>, g: &Group, chart: Chart, run: &RunSummary, xa: &Axis, ya: &Axis) {
    let kind = super::kind_label(run);
    titles(items, &g.title, &format!("{} against {} — {kind}", chart.y_label(), chart.view().label()), ML);
    let better = if chart.view().higher_is_better() { "→ better" } else { "← better" };
    axes(items, xa, ya, &format!("{} ({better})", xa.title(chart.view().label())), &ya.title(chart.y_label()));
}

/// A panel's title and grey subtitle, from `x`.
pub(super) fn titles(items: &mut Vec<Item>, title: &str, sub: &str, x: f64) {
    items.push(Item::Text {
        at: (x, 17.0),
        text: title.into(),
        size: 14.0,
        anchor: Anchor::Start,
        color: Rgb::BLACK,
        bold: true,
        vertical: false,
        class: "title",
    });
    items.push(Item::Text {
        at: (x, 36.0),
        text: sub.into(),
        size: SMALL,
        anchor: Anchor::Start,
        color: Rgb::GREY,
        bold: false,
        vertical: false,
        class: "subtitle",
    });
}

/// The plot's background, grid, ticks, frame and axis titles.
pub(super) fn axes(items: &mut Vec<Item>, xa: &Axis, ya: &Axis, x_title: &str, y_title: &str) {
    let plot = Bounds::new(xa.p0, ya.p1, xa.p1, ya.p0);
    items.push(Item::Rect { b: plot, fill: Some(Rgb(250, 250, 250)), stroke: None, opacity: 1.0 });
    let grid = |pts| Item::Line { pts, color: Rgb::LIGHT, width: 1.0, dash: false, opacity: 1.0, class: "grid" };
    let tick = |pts| Item::Line { pts, color: Rgb::GREY, width: 1.0, dash: false, opacity: 1.0, class: "" };
    let label =
        |at, t, anchor| Item::Text { at, text: t, size: SMALL, anchor, color: Rgb::BLACK, bold: false, vertical: false, class: "tick" };
    for (v, t) in xa.ticks() {
        let x = xa.px(v);
        items.push(grid(vec![(x, plot.y0), (x, plot.y1)]));
        items.push(tick(vec![(x, plot.y1), (x, plot.y1 + 4.0)]));
        items.push(label((x, plot.y1 + 14.0), t, Anchor::Middle));
    }
    for (v, t) in ya.ticks() {
        let y = ya.px(v);
        items.push(grid(vec![(plot.x0, y), (plot.x1, y)]));
        items.push(tick(vec![(plot.x0 - 4.0, y), (plot.x0, y)]));
        items.push(label((plot.x0 - 7.0, y), t, Anchor::End));
    }
    items.push(Item::Rect { b: plot, fill: None, stroke: Some(Rgb::GREY), opacity: 1.0 });
    items.push(Item::Text {
        at: ((plot.x0 + plot.x1) / 2.0, plot.y1 + 34.0),
        text: x_title.into(),
        size: 12.0,
        anchor: Anchor::Middle,
        color: Rgb::BLACK,
        bold: false,
        vertical: false,
        class: "axis",
    });
    items.push(Item::Text {
        at: (15.0, (plot.y0 + plot.y1) / 2.0),
        text: y_title.into(),
        size: 12.0,
        anchor: Anchor::Middle,
        color: Rgb::BLACK,
        bold: false,
        vertical: true,
        class: "axis",
    });
}

/// Breaks `text` into lines of at most `width` pixels at `size`.
pub fn wrap(text: &str, size: f64, width: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for w in text.split(' ') {
        let cand = if cur.is_empty() { w.to_string() } else { format!("{cur} {w}") };
        if text_width(&cand, size) > width && !cur.is_empty() {
            lines.push(std::mem::replace(&mut cur, w.to_string()));
        } else {
            cur = cand;
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// The frontier rule, in words, for a chart's view.
pub fn frontier_rule(view: View) -> String {
    let base = "Frontier (line): per config, the points no other point of the config beats on both total tok/s/GPU and P90 E2E-normalised interactivity";
    match view {
        View::E2eNormIntvtyP90 => format!("{base}."),
        _ => format!("{base}, and that are also unbeaten in this chart's coordinates."),
    }
}

/// The legend under the plot: configs, markers, whiskers, the frontier rule and the key of
/// numbered labels. Returns the panel's height.
fn legend(items: &mut Vec<Item>, chart: Chart, g: &Group, colors: &BTreeMap<String, Rgb>, keyed: &[(usize, String)]) -> f64 {
    let mut y = MT + PH + XA + 10.0;
    let (x0, width) = (ML - 50.0, W - ML + 50.0 - MR);
    for c in &g.configs {
        let color = colors.get(c).copied().unwrap_or(PALETTE[0]);
        items.push(Item::line(vec![(x0, y), (x0 + 22.0, y)], color, 2.0));
        items.push(Item::Circle { c: (x0 + 11.0, y), r: 4.0, fill: Some(color), stroke: None, class: "" });
        items.push(legend_text((x0 + 30.0, y), c.clone(), Rgb::BLACK, "legend"));
        y += 17.0;
    }
    // Marker key, drawn with the real marker shapes.
    let color = g.configs.first().and_then(|c| colors.get(c)).copied().unwrap_or(PALETTE[0]);
    let mut x = x0;
    let entries: [(Option<Rgb>, (Rgb, f64), &str); 3] = [
        (Some(color), (color.darker(0.3), 1.0), "filled: on the frontier"),
        (Some(Rgb::WHITE), (color, 2.0), "hollow: dominated"),
        (Some(Rgb::LIGHT), (Rgb::GREY, 1.5), "grey: invalid, left out"),
    ];
    for (fill, stroke, what) in entries {
        items.push(Item::Circle { c: (x + 5.0, y), r: 4.5, fill, stroke: Some(stroke), class: "" });
        items.push(legend_text((x + 14.0, y), what, Rgb::BLACK, "legend"));
        x += 14.0 + text_width(what, SMALL) + 14.0;
    }
    let wc = color.darker(0.45);
    let ci = "whiskers: 95 % bootstrap CI, both axes";
    if x + 26.0 + text_width(ci, SMALL) > x0 + width {
        y += 16.0;
        x = x0;
    }
    items.push(Item::line(vec![(x, y), (x + 20.0, y)], wc, 1.5));
    items.push(Item::line(vec![(x, y - 4.0), (x, y + 4.0)], wc, 1.5));
    items.push(Item::line(vec![(x + 20.0, y - 4.0), (x + 20.0, y + 4.0)], wc, 1.5));
    items.push(legend_text((x + 26.0, y), ci, Rgb::BLACK, "legend"));
    y += 17.0;
    for line in wrap(&frontier_rule(chart.view()), SMALL, width) {
        items.push(legend_text((x0, y), line, Rgb::GREY, "legend"));
        y += 15.0;
    }
    if !keyed.is_empty() {
        let key: Vec<String> = keyed.iter().map(|(k, t)| format!("{k} = {t}")).collect();
        for line in wrap(&format!("Numbered points: {}", key.join(" · ")), SMALL, width) {
            items.push(legend_text((x0, y), line, Rgb::BLACK, "legend key"));
            y += 15.0;
        }
    }
    y + 4.0
}

/// A line of legend text: small, starting at `at`.
fn legend_text(at: (f64, f64), text: impl Into<String>, color: Rgb, class: &'static str) -> Item {
    Item::Text { at, text: text.into(), size: SMALL, anchor: Anchor::Start, color, bold: false, vertical: false, class }
}

/// A chart and its panels, laid out.
pub type Figure = (Chart, Vec<(Group, Scene)>);

/// Every chart's panels (laid out, not yet rendered).
pub fn figures(run: &RunSummary) -> Vec<Figure> {
    let groups = groups(run);
    let colors = colors(run);
    Chart::ALL.iter().map(|&c| (c, groups.iter().map(|g| (g.clone(), panel(run, c, g, &colors))).collect())).collect()
}

/// Writes `pareto_<key>.svg` and `.png` for every chart (panels side by side); returns the
/// figures for the HTML report.
pub fn charts(run: &RunSummary, dir: &Path) -> Result<Vec<Figure>, ReportError> {
    let figs = figures(run);
    for (chart, panels) in &figs {
        if panels.is_empty() {
            continue;
        }
        let scene = Scene::hstack(panels.iter().map(|(_, s)| s.clone()).collect(), 16.0);
        let key = chart.key();
        let svg = dir.join(format!("{key}.svg"));
        crate::problem::atomic_write(&svg, scene.svg(&key).as_bytes()).map_err(|source| ReportError::Write { path: svg, source })?;
        let png = dir.join(format!("{key}.png"));
        crate::problem::atomic_replace(&png, |tmp| {
            scene.png(tmp).map_err(std::io::Error::other)?;
            crate::problem::sync_file(tmp)
        })
        .map_err(|source| ReportError::Write { path: png, source })?;
    }
    Ok(figs)
}
