//! The self-contained `report.html`: summary, KV, charts inlined as SVG, coverage and each
//! point's resolved recipe.

use std::collections::BTreeMap;

use super::{KV_NOTE, frontier_cell, kind_label, kv_rows, provenance, status_text};
use crate::gate::fmt_num;
use crate::pareto::View;
use crate::results::RunSummary;

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
    let mut o = head(run);
    summary_table(&mut o, run);
    o.push_str(&kv_html(run));
    charts(&mut o, svgs);
    coverage_table(&mut o, run);
    recipes(&mut o, run);
    o.push_str("<p>Interactivity = 1 / P90 of per-request ITL; E2E-normalised interactivity = 1 / P90 of E2EL/OSL. Whiskers: 95 % bootstrap intervals. Throughput counts input (including cached) and output tokens per GPU.</p>\n</body></html>\n");
    o
}

/// The document's head and the run's labels, kind and provenance.
fn head(run: &RunSummary) -> String {
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
    o
}

/// One row per point: headline numbers, frontier and status.
fn summary_table(o: &mut String, run: &RunSummary) {
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
}

/// Every view's chart, inlined as SVG.
fn charts(o: &mut String, svgs: &BTreeMap<View, String>) {
    o.push_str("<h2>Pareto frontiers</h2>\n");
    for (v, svg) in svgs {
        o.push_str(&format!(
            "<h3>{}</h3>\n<div class=\"chart\" id=\"chart-{}\">{}</div>\n",
            esc(v.label()),
            v.key(),
            svg.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
        ));
    }
}

/// Each curve's coverage verdict.
fn coverage_table(o: &mut String, run: &RunSummary) {
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
    o.push_str("</table>\n");
}

/// Each point's resolved server command, environment and router.
fn recipes(o: &mut String, run: &RunSummary) {
    o.push_str("<h2>Resolved recipes</h2>\n");
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
}
