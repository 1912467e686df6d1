//! The self-contained `report.html`, in reading order: the gate's verdict, the summary table
//! (points grouped by config, each linking to its page), the Pareto charts (inline SVG panels with
//! hover details), twin residuals when present, then collapsed details: provenance, gate checks,
//! KV figures, coverage, engine profiles and resolved recipes.

use super::chart::Figure;
use super::{Cells, DEFINITIONS, KV_NOTE, frontier_cell, kind_label, kv_rows, provenance, status_text};
use crate::gate::Verdict;
use crate::results::RunSummary;

fn esc(s: &str) -> String {
    crate::html::escape(s)
}

/// Styles shared by the run's page and its point pages.
pub(super) const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em 2em;color:#222;max-width:1500px}\
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.2em;margin:1.4em 0 .5em;border-bottom:1px solid #ddd;padding-bottom:.2em}h3{font-size:1em;margin:1.2em 0 .3em}\
.meta{color:#555;margin:.2em 0 1em}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 7px;font-size:13px;text-align:right;white-space:nowrap}\
th{background:#f3f3f3;vertical-align:bottom}td:first-child,th:first-child{text-align:left}tr.cfg th{background:#e9eef5;text-align:left;font-weight:600}\
.ci{color:#777;font-size:11px}.kind{font-weight:600;padding:1px 6px;border-radius:4px}.predicted{background:#fff3cd}.measured{background:#d4edda}\
.fail{color:#b00020}.ok{color:#1b7a1b}.verdict{border-radius:6px;padding:.6em 1em;margin:.5em 0 1em;border:1px solid}\
.verdict h2{border:0;margin:0;padding:0;font-size:1.3em}.verdict.pass{background:#eaf6ec;border-color:#9fd3a7}.verdict.fail{background:#fdecee;border-color:#f1a5ae}\
.verdict.incomplete{background:#fff6e0;border-color:#f0cf7a}.verdict.none{background:#f4f4f4;border-color:#ccc}\
.panels{display:flex;flex-wrap:wrap;gap:12px}.panels svg{max-width:100%;height:auto;border:1px solid #eee}.note{color:#555;font-size:13px;max-width:1100px}\
details{margin:.4em 0}summary{cursor:pointer;font-weight:600}pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:12px}\
th.fr,th.st{text-align:left}td.fr{white-space:normal;min-width:8em;max-width:15em;text-align:left}td.st{text-align:left;white-space:normal;max-width:20em}svg a{cursor:pointer}svg .pt:hover circle{stroke-width:3}a{color:#1f5fa8}";

/// The self-contained HTML report (no external resources).
pub fn html(run: &RunSummary, verdict: Option<&Verdict>, figs: &[Figure]) -> String {
    let mut o = head(run);
    verdict_box(&mut o, verdict);
    summary_table(&mut o, run);
    charts(&mut o, figs);
    o.push_str("<!-- twin -->\n");
    details(&mut o, run, verdict);
    o.push_str("</body></html>\n");
    o
}

/// The document's head and the run's one-line description.
fn head(run: &RunSummary) -> String {
    let mut o = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>sweep report ",
    );
    o.push_str(&esc(&run.run_id));
    o.push_str(&format!("</title><style>{STYLE}</style></head><body>\n"));
    o.push_str(&format!("<h1>sweep run <code>{}</code></h1>\n", esc(&run.run_id)));
    let kind = kind_label(run);
    let predicted = run.points.iter().any(|p| p.result_kind == "predicted");
    o.push_str(&format!(
        "<p class=\"meta\">{} · target <code>{}</code> · {} point(s) · seed {} · results: <span class=\"kind {}\">{}</span>{}</p>\n",
        esc(&run.labels.join(" + ")),
        esc(&run.target),
        run.points.len(),
        run.seed,
        esc(kind.split(' ').next().unwrap_or("")),
        esc(&kind),
        if predicted { " — predicted by the reference engine, not measured on hardware (profiles under Details)" } else { "" }
    ));
    o
}

/// The gate's verdict first: failing checks listed, all checks collapsed.
fn verdict_box(o: &mut String, verdict: Option<&Verdict>) {
    let Some(v) = verdict else {
        o.push_str("<section id=\"verdict\" class=\"verdict none\"><h2>Gate: not run</h2><p><code>sweep gate &lt;run&gt;</code> writes the verdict; this page shows it once it exists.</p></section>\n");
        return;
    };
    let failed: Vec<_> = v.checks.iter().filter(|c| !c.passed).collect();
    let word = v.word();
    o.push_str(&format!(
        "<section id=\"verdict\" class=\"verdict {}\"><h2>Gate: {word}</h2><p>{} checks, {} failed{}{}</p>\n",
        word.to_lowercase(),
        v.checks.len(),
        failed.len(),
        if v.incomplete.is_empty() {
            String::new()
        } else {
            format!(", {} point(s) not finished (re-run with <code>--resume</code>)", v.incomplete.len())
        },
        v.baseline.as_ref().map(|b| format!(" · baseline <code>{}</code>", esc(b))).unwrap_or_default()
    ));
    if !failed.is_empty() {
        o.push_str("<ul>\n");
        for c in failed {
            o.push_str(&format!("<li class=\"fail\"><b>{}</b>: {}</li>\n", esc(&c.name), esc(&c.detail)));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</section>\n");
}

/// One row per point, grouped by config: headline numbers, frontier and status.
fn summary_table(o: &mut String, run: &RunSummary) {
    o.push_str("<h2>Summary</h2>\n<table id=\"summary\"><thead><tr><th>point</th><th>kind</th><th>tok/s/GPU<br>total</th><th>output<br>tok/s/GPU</th><th>P90 intvty<br>tok/s/user</th><th>P90 E2E-norm<br>intvty (frontier x)</th><th>TTFT p50<br>s</th><th>TTFT p90<br>s</th><th>TTFT p99<br>s</th><th>E2EL p75<br>s</th><th>E2EL p90<br>s</th><th>J/out<br>tok</th><th class=\"fr\">frontier</th><th class=\"st\">status</th></tr></thead>\n<tbody>\n");
    let mut configs: Vec<&str> = Vec::new();
    for p in &run.points {
        if !configs.contains(&p.config_key.as_str()) {
            configs.push(&p.config_key);
        }
    }
    for cfg in configs {
        o.push_str(&format!("<tr class=\"cfg\"><th colspan=\"14\">{}</th></tr>\n", esc(cfg)));
        for p in run.points.iter().filter(|p| p.config_key == cfg) {
            let short = p.id.strip_prefix(&format!("{cfg}/")).unwrap_or(&p.id);
            let cells = match Cells::of(p) {
                Some(c) => {
                    let ci = |s: &str| if s.is_empty() { String::new() } else { format!("<br><span class=\"ci\">{}</span>", esc(s)) };
                    format!(
                        "<td>{}{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                        c.tput,
                        ci(&c.tput_ci),
                        c.out,
                        ci(&c.out_ci),
                        c.intvty,
                        c.e2e_norm,
                        c.ttft[0],
                        c.ttft[1],
                        c.ttft[2],
                        c.e2el[0],
                        c.e2el[1],
                        c.joules
                    )
                }
                None => "<td>-</td>".repeat(10),
            };
            let st = status_text(p);
            let cls = if st == "ok" { "ok" } else { "fail" };
            let name =
                if p.summary.is_some() { format!("<a href=\"{}\">{}</a>", esc(&super::point_href(&p.id)), esc(short)) } else { esc(short) };
            o.push_str(&format!(
                "<tr data-point=\"{}\"><td title=\"{}\">{name}</td><td><span class=\"kind {}\">{}</span></td>{cells}<td class=\"fr\">{}</td><td class=\"st {cls}\">{}</td></tr>\n",
                esc(&p.id),
                esc(&p.id),
                esc(&p.result_kind),
                esc(&p.result_kind),
                esc(&frontier_cell(run, p)),
                esc(&st)
            ));
        }
    }
    o.push_str(&format!("</tbody></table>\n<p class=\"note\">{}</p>\n", esc(DEFINITIONS)));
}

/// Every chart: one inline SVG per panel, side by side.
fn charts(o: &mut String, figs: &[Figure]) {
    o.push_str("<h2 id=\"charts\">Pareto frontiers</h2>\n<p class=\"note\">One panel per model × GPU (per config where scales differ by more than 20×); an axis is logarithmic where its range spans more than 20×. Filled markers are on the frontier, hollow ones are dominated, grey ones invalid; whiskers are 95 % bootstrap intervals on both axes. Hover a point for its numbers; click it for its page.</p>\n");
    for (chart, panels) in figs {
        o.push_str(&format!("<h3>{}</h3>\n<div class=\"panels\" id=\"{}\">\n", esc(&chart.title()), chart.key()));
        for (i, (_, scene)) in panels.iter().enumerate() {
            o.push_str(&scene.svg(&format!("{}-{i}", chart.key())));
        }
        o.push_str("</div>\n");
    }
}

fn kv_html(run: &RunSummary) -> String {
    let rows = kv_rows(run);
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from("<details><summary>KV cache per point</summary>\n<table id=\"kv\"><tr><th>point</th><th>source</th>");
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
    o.push_str(&format!("</table>\n<p class=\"note\">{}</p></details>\n", esc(KV_NOTE)));
    o
}

/// Everything behind the numbers, collapsed.
fn details(o: &mut String, run: &RunSummary, verdict: Option<&Verdict>) {
    o.push_str("<h2 id=\"details\">Details</h2>\n<details><summary>Provenance: profiles and traces</summary>\n<ul id=\"provenance\">\n");
    for (config, what) in provenance(run) {
        o.push_str(&format!("<li><code>{}</code>: {}</li>\n", esc(&config), esc(&what)));
    }
    o.push_str("</ul></details>\n");
    if let Some(v) = verdict {
        o.push_str(&format!(
            "<details><summary>Gate checks ({})</summary>\n<table id=\"checks\"><tr><th>check</th><th>result</th><th>detail</th></tr>\n",
            v.checks.len()
        ));
        for c in &v.checks {
            o.push_str(&format!(
                "<tr><td>{}</td><td class=\"{}\">{}</td><td style=\"text-align:left;white-space:normal\">{}</td></tr>\n",
                esc(&c.name),
                if c.passed { "ok" } else { "fail" },
                if c.passed { "pass" } else { "FAIL" },
                esc(&c.detail)
            ));
        }
        o.push_str("</table></details>\n");
    }
    o.push_str(&kv_html(run));
    o.push_str("<details><summary>Pareto coverage</summary>\n<table><tr><th>curve</th><th>measured</th><th>invalid</th><th>frontier</th><th>verdict</th></tr>\n");
    for c in &run.curves {
        o.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&c.curve),
            c.coverage.measured,
            c.coverage.invalid,
            c.coverage.frontier,
            if c.coverage.pass { "PASS".to_string() } else { format!("FAIL (needs ≥ {} valid points)", crate::pareto::MIN_VALID_POINTS) }
        ));
    }
    o.push_str("</table></details>\n");
    // Engine profiles: one per config (its points share them but for the parallel layout).
    o.push_str("<details><summary>Engine profiles and server identity</summary>\n");
    let mut seen: Vec<&str> = Vec::new();
    for p in run.points.iter().filter(|p| !p.profiles.is_null()) {
        if seen.contains(&p.config_key.as_str()) {
            continue;
        }
        seen.push(&p.config_key);
        let json = serde_json::to_string_pretty(&p.profiles).unwrap_or_default();
        o.push_str(&format!("<h3><code>{}</code> (as at {})</h3><pre>{}</pre>\n", esc(&p.config_key), esc(&p.id), esc(&json)));
    }
    o.push_str("</details>\n<details><summary>Resolved recipes: each point's server command and environment</summary>\n");
    for p in &run.points {
        if let Some(l) = &p.launch {
            let env: Vec<String> = l.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            o.push_str(&format!(
                "<h3>{} — {} c{}</h3><pre>{}\n\n{}{}</pre>\n",
                esc(&p.id),
                esc(&l.arm),
                l.conc,
                esc(&crate::recipe::serving::shell_quote(&l.worker_argv)),
                esc(&env.join("\n")),
                l.router_argv.as_ref().map(|r| format!("\n\nrouter: {}", esc(&crate::recipe::serving::shell_quote(r)))).unwrap_or_default()
            ));
        }
    }
    o.push_str("</details>\n");
}
