//! Reports of a run: Pareto charts (plotters, PNG and SVG), the pull-request table (`report.md`)
//! and a self-contained `report.html` (charts inlined as SVG, tables, each point's resolved
//! recipe, `measured` / `predicted` labels).

use crate::gate::fmt_num;
use crate::pareto::{VIEWS, View};
use crate::results::{PointResult, RunSummary, Status};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn kind_label(run: &RunSummary) -> String {
    let kinds: Vec<&str> = {
        let mut k: Vec<&str> = run.points.iter().map(|p| p.result_kind.as_str()).collect();
        k.sort();
        k.dedup();
        k
    };
    kinds.join(" + ")
}

fn on_frontier(run: &RunSummary, view: View, id: &str) -> bool {
    run.curves.iter().any(|c| c.views.get(&view).is_some_and(|v| v.frontier.iter().any(|f| f == id)))
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, plotters::coord::Shift>, run: &RunSummary, view: View) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let pts: Vec<&PointResult> = run.points.iter().filter(|p| p.pareto.is_some()).collect();
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
    let title = format!("tok/s/GPU vs {} — {}", view.label(), kind_label(run));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(76)
        .build_cartesian_2d(x0..x1, y0..y1)
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
        let color = PALETTE[ci % PALETTE.len()];
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

pub fn status_text(p: &PointResult) -> String {
    match &p.status {
        Status::Done => match &p.summary {
            Some(s) if s.valid => "ok".into(),
            Some(s) => format!("invalid: {}", s.invalid_reasons.join(", ")),
            None => "no aggregate".into(),
        },
        Status::Failed { reason } => format!("FAILED: {reason}"),
        Status::Cancelled { reason } => format!("cancelled: {reason}"),
        Status::Pending => "not run".into(),
    }
}

pub fn frontier_cell(run: &RunSummary, p: &PointResult) -> String {
    match &p.pareto {
        Some(pp) if on_frontier(run, View::E2eNormIntvtyP90, &p.id) => format!("yes (p = {:.2})", pp.p_frontier),
        Some(pp) => {
            let by = run.curves.iter().find_map(|c| c.views.get(&View::E2eNormIntvtyP90).and_then(|v| v.dominated_by.get(&p.id)));
            match by {
                Some(d) => format!("no, dominated by {} (p = {:.2})", d.rsplit('/').next().unwrap_or(d), pp.p_frontier),
                None => format!("no (p = {:.2})", pp.p_frontier),
            }
        }
        None => "-".into(),
    }
}

/// What each config's results rest on (profiles and traces), once per distinct combination.
pub fn provenance(run: &RunSummary) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        run.points.iter().filter(|p| !p.result_kind.is_empty()).map(|p| (p.config_key.clone(), p.provenance())).collect();
    v.sort();
    v.dedup();
    v
}

/// The pull-request table.
pub fn markdown(run: &RunSummary) -> String {
    let mut o = format!("## sweep run `{}` — {} ({})\n\n", run.run_id, run.labels.join(" + "), kind_label(run));
    for (config, what) in provenance(run) {
        o.push_str(&format!("- `{config}`: {what}\n"));
    }
    o.push('\n');
    o.push_str("| point | kind | tok/s/GPU (95 % CI) | P90 interactivity | P90 E2E-norm. intvty | TTFT p50 / p90 / p99 (s) | E2EL p75 / p90 (s) | frontier | status |\n");
    o.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for p in &run.points {
        let (tput, iv, en, ttft, e2el) = match (&p.summary, &p.pareto) {
            (Some(s), Some(pp)) => (
                format!("{} ({}–{})", fmt_num(s.tput_per_gpu), fmt_num(pp.y_ci.0), fmt_num(pp.y_ci.1)),
                format!("{:.1}", s.intvty_p90),
                format!("{:.1}", s.e2e_norm_intvty_p90),
                format!("{:.2} / {:.2} / {:.2}", s.ttft.p50, s.ttft.p90, s.ttft.p99),
                format!("{:.2} / {:.2}", s.e2el.p75, s.e2el.p90),
            ),
            _ => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
        };
        o.push_str(&format!(
            "| {} | {} | {tput} | {iv} | {en} | {ttft} | {e2el} | {} | {} |\n",
            p.id,
            p.result_kind,
            frontier_cell(run, p),
            status_text(p)
        ));
    }
    o.push_str(&kv_markdown(run));
    o.push_str("\nCoverage: ");
    let cov: Vec<String> = run
        .curves
        .iter()
        .map(|c| {
            format!(
                "`{}` {} ({} measured, {} invalid, {} on the frontier)",
                c.curve,
                if c.coverage.pass { "PASS" } else { "FAIL" },
                c.coverage.measured,
                c.coverage.invalid,
                c.coverage.frontier
            )
        })
        .collect();
    o.push_str(&cov.join("; "));
    o.push_str("\n\nInteractivity = 1 / P90 of per-request ITL; E2E-normalised = 1 / P90 of E2EL/OSL (the North Star x-axis). Throughput counts input (including cached) and output tokens. `p` = share of bootstrap replicates in which the point is on the frontier.\n");
    o
}

/// Points that report KV figures, with them.
fn kv_rows(run: &RunSummary) -> Vec<(&PointResult, &crate::kv::KvSummary)> {
    run.points.iter().filter_map(|p| p.summary.as_ref().and_then(|s| s.kv.as_ref()).map(|k| (p, k))).collect()
}

const KV_NOTE: &str = "Peak used excludes idle cached KV; re-prefilled = prefill paid again for evicted prefixes and retracted requests; ideal = the hit rate of the same requests had nothing been evicted. `-`: the target does not report it.";

/// The compact KV table (empty when no point reports KV figures).
pub fn kv_markdown(run: &RunSummary) -> String {
    let rows = kv_rows(run);
    if rows.is_empty() {
        return String::new();
    }
    let mut o =
        format!("\n### KV cache per point\n\n| point | source | {} |\n|---|---|{}\n", crate::kv::HEADERS.join(" | "), "---|".repeat(7));
    for (p, k) in rows {
        o.push_str(&format!("| {} | {} | {} |\n", p.id, k.source, k.cells().join(" | ")));
    }
    o.push_str(&format!("\n{KV_NOTE}\n"));
    o
}

fn kv_html(run: &RunSummary) -> String {
    let rows = kv_rows(run);
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from("<h2>KV cache per point</h2>\n<table id=\"kv\"><tr><th>point</th><th>source</th>");
    for h in crate::kv::HEADERS {
        o.push_str(&format!("<th>{}</th>", esc(h)));
    }
    o.push_str("</tr>\n");
    for (p, k) in rows {
        o.push_str(&format!("<tr><td>{}</td><td>{}</td>", esc(&p.id), esc(&k.source)));
        for c in k.cells() {
            o.push_str(&format!("<td>{}</td>", esc(&c)));
        }
        o.push_str("</tr>\n");
    }
    o.push_str(&format!("</table>\n<p>{}</p>\n", esc(KV_NOTE)));
    o
}

fn esc(s: &str) -> String {
    crate::html::escape(s)
}

/// The self-contained HTML report (no external resources).
pub fn html(run: &RunSummary, svgs: &BTreeMap<View, String>) -> String {
    let mut o = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sweep report ");
    o.push_str(&esc(&run.run_id));
    o.push_str("</title><style>body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.kind{font-weight:bold;padding:2px 6px;border-radius:4px}.predicted{background:#fff3cd}.measured{background:#d4edda}.fail{color:#b00020}svg{max-width:100%;height:auto}pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}</style></head><body>\n");
    o.push_str(&format!("<h1>sweep run <code>{}</code></h1>\n", esc(&run.run_id)));
    let kind = kind_label(run);
    o.push_str(&format!(
        "<p>Labels: <b>{}</b> · target: <code>{}</code> · results: <span class=\"kind {}\">{}</span></p>\n",
        esc(&run.labels.join(" + ")),
        esc(&run.target),
        esc(kind.split(' ').next().unwrap_or("")),
        esc(&kind)
    ));
    if run.points.iter().any(|p| p.result_kind == "predicted") {
        o.push_str("<p><b>Predicted</b> by the reference engine (not measured on hardware).</p>\n");
    }
    o.push_str("<ul id=\"provenance\">\n");
    for (config, what) in provenance(run) {
        o.push_str(&format!("<li><code>{}</code>: {}</li>\n", esc(&config), esc(&what)));
    }
    o.push_str("</ul>\n");
    o.push_str("<h2>Summary</h2>\n<table id=\"summary\"><tr><th>point</th><th>kind</th><th>tok/s/GPU</th><th>95 % CI</th><th>P90 intvty</th><th>P90 E2E-norm</th><th>TTFT p50</th><th>TTFT p90</th><th>TTFT p99</th><th>E2EL p75</th><th>E2EL p90</th><th>frontier</th><th>status</th></tr>\n");
    for p in &run.points {
        let cells = match (&p.summary, &p.pareto) {
            (Some(s), Some(pp)) => format!(
                "<td>{}</td><td>{}–{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.2}</td><td>{:.2}</td>",
                fmt_num(s.tput_per_gpu),
                fmt_num(pp.y_ci.0),
                fmt_num(pp.y_ci.1),
                s.intvty_p90,
                s.e2e_norm_intvty_p90,
                s.ttft.p50,
                s.ttft.p90,
                s.ttft.p99,
                s.e2el.p75,
                s.e2el.p90
            ),
            _ => "<td>-</td>".repeat(9),
        };
        let st = status_text(p);
        let cls = if st == "ok" { "" } else { " class=\"fail\"" };
        o.push_str(&format!(
            "<tr><td>{}</td><td><span class=\"kind {}\">{}</span></td>{cells}<td>{}</td><td{cls}>{}</td></tr>\n",
            esc(&p.id),
            esc(&p.result_kind),
            esc(&p.result_kind),
            esc(&frontier_cell(run, p)),
            esc(&st)
        ));
    }
    o.push_str("</table>\n");
    o.push_str(&kv_html(run));
    o.push_str("<h2>Pareto frontiers</h2>\n");
    for (v, svg) in svgs {
        o.push_str(&format!(
            "<h3>{}</h3>\n<div class=\"chart\" id=\"chart-{}\">{}</div>\n",
            esc(v.label()),
            v.key(),
            svg.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
        ));
    }
    o.push_str("<h2>Coverage</h2>\n<table><tr><th>curve</th><th>measured</th><th>invalid</th><th>frontier</th><th>verdict</th></tr>\n");
    for c in &run.curves {
        o.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&c.curve),
            c.coverage.measured,
            c.coverage.invalid,
            c.coverage.frontier,
            if c.coverage.pass { "PASS" } else { "FAIL (needs ≥ 5 valid points)" }
        ));
    }
    o.push_str("</table>\n<h2>Resolved recipes</h2>\n");
    for p in &run.points {
        if let Some(l) = &p.launch {
            let env: Vec<String> = l.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            o.push_str(&format!(
                "<details><summary>{} — {} c{}</summary><pre>{}\n\n{}{}</pre></details>\n",
                esc(&p.id),
                esc(&l.arm),
                l.conc,
                esc(&crate::recipe::serving::shell_quote(&l.worker_argv)),
                esc(&env.join("\n")),
                l.router_argv.as_ref().map(|r| format!("\n\nrouter: {}", esc(&crate::recipe::serving::shell_quote(r)))).unwrap_or_default()
            ));
        }
    }
    o.push_str("<p>Interactivity = 1 / P90 of per-request ITL; E2E-normalised interactivity = 1 / P90 of E2EL/OSL. Whiskers: 95 % bootstrap intervals. Throughput counts input (including cached) and output tokens per GPU.</p>\n</body></html>\n");
    o
}

/// Writes charts, `report.md` and `report.html` into the run directory.
pub fn write_all(run: &RunSummary, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let svgs = charts(run, dir)?;
    let (mut md_text, mut html_text) = (markdown(run), html(run, &svgs));
    // Twin mode's residual table, when the run has one.
    if let Some(t) = crate::twin::load(dir) {
        md_text.push_str(&t.markdown());
        html_text = html_text.replace("</body></html>", &format!("{}</body></html>", t.html()));
    }
    let md = dir.join("report.md");
    crate::problem::atomic_write(&md, md_text.as_bytes()).map_err(|e| e.to_string())?;
    let html_p = dir.join("report.html");
    crate::problem::atomic_write(&html_p, html_text.as_bytes()).map_err(|e| e.to_string())?;
    Ok(vec![html_p, md])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::metrics::{Stats, Summary};
    use crate::pareto::{Samples, analyse, points_with_uncertainty};
    use crate::results::PointResult;

    /// A run with one curve of `n` points whose throughput rises and interactivity falls with conc.
    pub fn fake_run(n: usize) -> RunSummary {
        let mut inputs = Vec::new();
        for i in 0..n {
            let c = 1u32 << i;
            let s = Samples {
                tokens: (0..100).map(|k| 10_000.0 * c as f64 + k as f64).collect(),
                itl: (0..100).map(|k| 0.005 * (1.0 + i as f64) + k as f64 * 1e-5).collect(),
                e2el: (0..100).map(|k| 2.0 + i as f64 + k as f64 * 0.01).collect(),
                e2e_per_token: (0..100).map(|k| 0.01 * (1.0 + i as f64) + k as f64 * 1e-5).collect(),
                duration_s: 100.0,
                gpus: 4.0,
            };
            inputs.push((format!("cfg/tp4-c{c}"), "cfg".to_string(), "Agg TP4".to_string(), c, true, s));
        }
        let pts = points_with_uncertainty(&inputs, 50, 42);
        let points = pts
            .iter()
            .map(|p| PointResult {
                id: p.id.clone(),
                config_key: p.curve.clone(),
                arm: p.arm.clone(),
                conc: p.conc,
                gpus: 4,
                matrix: "single_node.agentic".into(),
                status: Status::Done,
                result_kind: "predicted".into(),
                profiles: serde_json::json!({"engine": "deepseek-v4.1-flash", "hardware": "gb300"}),
                trace_set: "synthetic".into(),
                summary: Some(Summary {
                    requests_ok: 100,
                    tput_per_gpu: p.y,
                    intvty_p90: p.x[&View::IntvtyP90],
                    e2e_norm_intvty_p90: p.x[&View::E2eNormIntvtyP90],
                    ttft: Stats { p50: 0.2, p90: 0.3, p99: 1.0, ..Default::default() },
                    e2el: Stats { p75: 3.0, p90: p.x[&View::E2elP90], ..Default::default() },
                    valid: true,
                    submission_valid: true,
                    ..Default::default()
                }),
                pareto: Some(p.clone()),
                seeds: Vec::new(),
                launch: None,
                wall_s: 1.0,
            })
            .collect();
        RunSummary {
            run_id: "test-run".into(),
            labels: vec!["full-sweep-fail-fast".into()],
            target: "sim".into(),
            created_unix: 0,
            seed: 42,
            replicates: 50,
            points,
            curves: analyse(&pts),
        }
    }

    #[test]
    fn writes_charts_and_reports() {
        let run = fake_run(5);
        let d = tempfile::tempdir().unwrap();
        let files = write_all(&run, d.path()).unwrap();
        // Keep the output for a look (e.g. scripts/check-report.sh on it).
        if let Ok(keep) = std::env::var("SWEEP_KEEP_TEST_REPORT") {
            std::fs::create_dir_all(&keep).unwrap();
            for e in std::fs::read_dir(d.path()).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), std::path::Path::new(&keep).join(e.file_name())).unwrap();
            }
        }
        assert_eq!(files.len(), 2);
        let png = std::fs::read(d.path().join("pareto_e2e_norm_intvty_p90.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert!(png.len() > 10_000, "a drawn chart, not an empty image: {} bytes", png.len());
        let html = std::fs::read_to_string(d.path().join("report.html")).unwrap();
        assert!(html.contains("<table id=\"summary\">") && html.contains("<svg") && html.contains("predicted"));
        assert!(!html.contains("src=\"http"), "self-contained");
        let md = std::fs::read_to_string(d.path().join("report.md")).unwrap();
        assert_eq!(md.lines().filter(|l| l.starts_with("| cfg/")).count(), 5);
        assert!(md.contains("`cfg` PASS"));
        assert!(!md.contains("KV cache per point"), "no KV figures, no KV table");
    }

    #[test]
    fn kv_table_lists_the_points_that_report_kv() {
        let mut run = fake_run(3);
        let kv = crate::kv::KvSummary {
            source: "engine".into(),
            pool_tokens: Some(33_554_432),
            peak_used_tokens: Some(30_000_000),
            peak_token_usage: Some(0.95),
            evicted_tokens: Some(1_200_000),
            reprefilled_tokens: Some(800_000),
            retractions: Some(7),
            prefix_hit_rate: Some(0.90),
            ideal_prefix_hit_rate: Some(0.95),
        };
        run.points[1].summary.as_mut().unwrap().kv = Some(kv);
        let md = markdown(&run);
        let rows: Vec<&str> = md.lines().filter(|l| l.contains("| engine |")).collect();
        assert_eq!(rows.len(), 1, "{md}");
        assert!(rows[0].starts_with(&format!("| {} |", run.points[1].id)));
        assert!(
            rows[0].contains("33.55M") && rows[0].contains("95.0 %") && rows[0].contains("| 7 |") && rows[0].contains("90.0 % / 95.0 %")
        );
        let html = html(&run, &BTreeMap::new());
        assert!(html.contains("<table id=\"kv\">") && html.contains("1.20M"));
    }
}
