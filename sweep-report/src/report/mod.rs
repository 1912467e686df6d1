//! Reports of a run, in the order a performance engineer reads them: the gate's verdict, the
//! summary table, the Pareto charts, then (collapsed, or at the end of the Markdown) provenance,
//! KV figures, coverage, engine profiles and each point's flags. `report.md` is the pull-request
//! text, `report.html` the self-contained page (charts inlined as SVG, hover details, links to
//! each point's page), and `<point>/report.html` a page per point with its latency distributions
//! and time series.
//!
//! Charts are laid out once in pixels (`chart.rs` the Pareto panels, `axis.rs` scales and ticks,
//! `labels.rs` label placement) as a display list (`scene.rs`) rendered to SVG and PNG; the HTML
//! is written in `html.rs`, point pages in `point.rs`; the Markdown and what they share are here.

mod axis;
mod chart;
mod error;
pub mod eval;
mod html;
mod labels;
mod point;
mod scene;
pub mod summary;

pub use chart::{Chart, Group, figures, groups, point_href};
pub use error::{DrawError, ReportError};
pub use html::html;
pub use point::{TimeSeries, point_page, write_point_pages};
pub use scene::{Bounds, Scene};

use crate::gate::{Verdict, fmt_num};
use crate::pareto::View;
use crate::results::{PointResult, RunSummary, Status};
use std::path::{Path, PathBuf};

fn kind_label(run: &RunSummary) -> String {
    let kinds: Vec<&str> = {
        let mut k: Vec<&str> = run.points.iter().map(|p| p.result_kind.as_str()).filter(|k| !k.is_empty()).collect();
        k.sort();
        k.dedup();
        k
    };
    if kinds.is_empty() { "no results".into() } else { kinds.join(" + ") }
}

fn on_frontier(run: &RunSummary, view: View, id: &str) -> bool {
    run.curves.iter().any(|c| c.views.get(&view).is_some_and(|v| v.frontier.iter().any(|f| f == id)))
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
        Status::Interrupted { reason } => format!("interrupted: {reason}"),
        Status::Pending => "not run".into(),
    }
}

/// Frontier membership on the North Star view (tok/s/GPU against P90 E2E-normalised
/// interactivity), with the dominating point's short name and the frontier probability.
pub fn frontier_cell(run: &RunSummary, p: &PointResult) -> String {
    match &p.pareto {
        Some(pp) if on_frontier(run, View::E2eNormIntvtyP90, &p.id) => format!("yes (p = {:.2})", pp.p_frontier),
        Some(pp) => {
            let by = run.curves.iter().find_map(|c| c.views.get(&View::E2eNormIntvtyP90).and_then(|v| v.dominated_by.get(&p.id)));
            match by {
                Some(d) => format!("no, dominated by {} (p = {:.2})", d.rsplit('/').next().unwrap_or(d), pp.p_frontier),
                None if !pp.valid => "no (invalid)".into(),
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

/// The summary's cells of a point, shared by the Markdown and the HTML.
pub(crate) struct Cells {
    pub tput: String,
    pub tput_ci: String,
    pub out: String,
    pub out_ci: String,
    pub intvty: String,
    pub e2e_norm: String,
    pub ttft: [String; 3],
    pub e2el: [String; 2],
    /// GPU energy per output token (J), `-` without valid power.
    pub joules: String,
}

impl Cells {
    pub fn of(p: &PointResult) -> Option<Cells> {
        let s = p.summary.as_ref()?;
        let ci = |c: (f64, f64)| format!("{}–{}", fmt_num(c.0), fmt_num(c.1));
        let pp = p.pareto.as_ref();
        Some(Cells {
            tput: fmt_num(s.tput_per_gpu),
            tput_ci: pp.map(|pp| ci(pp.y_ci)).unwrap_or_default(),
            out: fmt_num(s.output_tput_per_gpu),
            // Runs written before output intervals were kept have none (zero width at 0).
            out_ci: pp.filter(|pp| pp.y_out_ci.1 > 0.0).map(|pp| ci(pp.y_out_ci)).unwrap_or_default(),
            intvty: format!("{:.1}", s.intvty_p90),
            e2e_norm: format!("{:.1}", s.e2e_norm_intvty_p90),
            ttft: [format!("{:.2}", s.ttft.p50), format!("{:.2}", s.ttft.p90), format!("{:.2}", s.ttft.p99)],
            e2el: [format!("{:.2}", s.e2el.p75), format!("{:.2}", s.e2el.p90)],
            joules: s.power.as_ref().map_or_else(|| "-".into(), |w| format!("{:.3}", w.joules_per_output_token)),
        })
    }
}

/// The definitions under every summary table.
pub const DEFINITIONS: &str = "tok/s/GPU counts input (cached included) and output tokens per GPU; output tok/s/GPU counts output tokens only (InferenceX shows both). P90 interactivity = 1 / P90 of per-request ITL; P90 E2E-normalised interactivity = 1 / P90 of E2EL/OSL, tok/s/user. Frontier: per config, the points no other point beats on both tok/s/GPU and P90 E2E-normalised interactivity (the North Star view); p = share of bootstrap replicates in which the point is on it. Intervals: 95 % bootstrap over requests. J/out tok: GPU energy over the profiling window per output token (measured with nvidia-smi as InferenceX does, or predicted by the engine's power model, as the point is).";

/// The verdict in one line: `**Gate: PASS** — 67 checks, 0 failed` (or that none was run).
pub fn verdict_line(v: Option<&Verdict>) -> String {
    match v {
        None => "**Gate: not run** (`sweep gate <run>` writes the verdict)".into(),
        Some(v) => {
            let failed = v.checks.iter().filter(|c| !c.passed).count();
            let base = v.baseline.as_ref().map(|b| format!(", against baseline `{b}`")).unwrap_or_default();
            let inc = if v.incomplete.is_empty() { String::new() } else { format!(", {} point(s) not finished", v.incomplete.len()) };
            format!("**Gate: {}** — {} checks, {failed} failed{inc}{base}", v.word(), v.checks.len())
        }
    }
}

/// The pull-request text: verdict, table, charts, then the details.
pub fn markdown(run: &RunSummary, verdict: Option<&Verdict>) -> String {
    let mut o = format!("## sweep run `{}` — {} ({})\n\n", run.run_id, run.labels.join(" + "), kind_label(run));
    o.push_str(&verdict_line(verdict));
    o.push_str("\n\n");
    if let Some(v) = verdict {
        for c in v.checks.iter().filter(|c| !c.passed) {
            o.push_str(&format!("- FAIL {}: {}\n", c.name, c.detail));
        }
        if !v.incomplete.is_empty() {
            o.push_str(&format!("- INCOMPLETE: {} (re-run with `--resume`)\n", v.incomplete.join(", ")));
        }
        if v.checks.iter().any(|c| !c.passed) || !v.incomplete.is_empty() {
            o.push('\n');
        }
    }
    o.push_str(&points_table(run));
    o.push_str(&format!("\n{DEFINITIONS}\n"));
    o.push_str("\n### Charts\n\n");
    for c in Chart::ALL {
        o.push_str(&format!("![{}]({}.png)\n", c.title(), c.key()));
    }
    o.push_str(&format!(
        "\nOne panel per model × GPU; log axes where a range spans more than 20×. Each point's distributions and time series: `<point>/report.html` (e.g. `{}`).\n",
        run.points.first().map(|p| point_href(&p.id)).unwrap_or_default()
    ));
    o.push_str("\n### Details\n\n");
    o.push_str("<details><summary>Provenance: profiles and traces</summary>\n\n");
    for (config, what) in provenance(run) {
        o.push_str(&format!("- `{config}`: {what}\n"));
    }
    o.push_str("\n</details>\n\n");
    // The details' own summary names it: no heading inside.
    let kv = kv_markdown(run).replacen("\n### KV cache per point\n", "", 1);
    if !kv.is_empty() {
        o.push_str(&format!("<details><summary>KV cache per point</summary>\n{kv}\n</details>\n\n"));
    }
    o.push_str("<details><summary>Pareto coverage</summary>\n\nCoverage: ");
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
    o.push_str("\n\n</details>\n");
    if let Some(v) = verdict {
        o.push_str(&format!(
            "\n<details><summary>Gate checks ({})</summary>\n\n| check | result | detail |\n|---|---|---|\n",
            v.checks.len()
        ));
        for c in &v.checks {
            o.push_str(&format!("| {} | {} | {} |\n", c.name, if c.passed { "pass" } else { "FAIL" }, c.detail.replace('|', "\\|")));
        }
        o.push_str("\n</details>\n");
    }
    o.push_str(&recipes_details(run));
    o
}

/// The Markdown summary table: a row per point, `-` where a point has no aggregate.
fn points_table(run: &RunSummary) -> String {
    let mut o = String::from(
        "| point | kind | tok/s/GPU (95 % CI) | output tok/s/GPU | P90 interactivity | P90 E2E-norm. intvty (frontier x) | TTFT p50 / p90 / p99 (s) | E2EL p75 / p90 (s) | J/out tok | frontier | status |\n",
    );
    o.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for p in &run.points {
        let row = match Cells::of(p) {
            Some(c) => format!(
                "{} ({}) | {} | {} | {} | {} / {} / {} | {} / {} | {}",
                c.tput, c.tput_ci, c.out, c.intvty, c.e2e_norm, c.ttft[0], c.ttft[1], c.ttft[2], c.e2el[0], c.e2el[1], c.joules
            ),
            None => ["-"; 7].join(" | "),
        };
        o.push_str(&format!("| {} | {} | {row} | {} | {} |\n", p.id, p.result_kind, frontier_cell(run, p), status_text(p)));
    }
    o
}

/// The collapsed section of each launched point's server command, environment and router.
fn recipes_details(run: &RunSummary) -> String {
    let mut o = String::from("\n<details><summary>Resolved recipes (each point's server command and environment)</summary>\n\n");
    for p in &run.points {
        if let Some(l) = &p.launch {
            o.push_str(&format!("`{}`\n\n```\n{}\n", p.id, crate::recipe::serving::shell_quote(&l.worker_argv)));
            for (k, v) in &l.env {
                o.push_str(&format!("{k}={v}\n"));
            }
            if let Some(r) = &l.router_argv {
                o.push_str(&format!("router: {}\n", crate::recipe::serving::shell_quote(r)));
            }
            o.push_str("```\n\n");
        }
    }
    o.push_str("</details>\n");
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

/// Writes the charts, `report.md` and `report.html` (the verdict read from `gate.json` when
/// `sweep gate` wrote one for this run). `sweep gate` calls this alone to refresh the verdict.
pub fn write_main(run: &RunSummary, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let verdict = Verdict::load(dir, &run.run_id);
    let figs = chart::charts(run, dir)?;
    let (mut md_text, mut html_text) = (markdown(run, verdict.as_ref()), html(run, verdict.as_ref(), &figs));
    // Twin mode's residual table, when the run has one.
    if let Some(t) = crate::twin::load(dir) {
        md_text.push_str(&t.markdown());
        html_text = html_text.replace("<!-- twin -->", &t.html());
    }
    // Eval results kept in the run's folder (eval points, collected artifacts): after the
    // summary table, before the charts — a reviewer reads scores beside throughput.
    if let Some((md, html)) = eval::sections_for(dir) {
        match md_text.find("\n### Charts") {
            Some(i) => md_text.insert_str(i, &md),
            None => md_text.push_str(&md),
        }
        html_text = match html_text.find("<h2 id=\"charts\">") {
            Some(i) => format!("{}{html}{}", &html_text[..i], &html_text[i..]),
            None => html_text.replace("</body></html>", &format!("{html}</body></html>")),
        };
    }
    let md = dir.join("report.md");
    crate::problem::atomic_write(&md, md_text.as_bytes()).map_err(|source| ReportError::Write { path: md.clone(), source })?;
    let html_p = dir.join("report.html");
    crate::problem::atomic_write(&html_p, html_text.as_bytes()).map_err(|source| ReportError::Write { path: html_p.clone(), source })?;
    Ok(vec![html_p, md])
}

/// Writes the charts, `report.md`, `report.html` and every point's page.
pub fn write_all(run: &RunSummary, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let mut files = write_main(run, dir)?;
    files.extend(write_point_pages(run, dir)?);
    Ok(files)
}

#[cfg(test)]
pub(crate) mod tests;
