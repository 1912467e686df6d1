//! Reports of a run: Pareto charts (plotters, PNG and SVG), the pull-request table (`report.md`)
//! and a self-contained `report.html` (charts inlined as SVG, tables, each point's resolved
//! recipe, `measured` / `predicted` labels). Charts are drawn in `chart.rs`, the HTML written
//! in `html.rs`; the Markdown and what both share are here.

mod chart;
pub mod eval;
mod html;

pub use chart::charts;
pub use html::html;

use crate::gate::fmt_num;
use crate::pareto::View;
use crate::results::{PointResult, RunSummary, Status};
use std::path::{Path, PathBuf};

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

/// Writes charts, `report.md` and `report.html` into the run directory.
pub fn write_all(run: &RunSummary, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let svgs = charts(run, dir)?;
    let (mut md_text, mut html_text) = (markdown(run), html(run, &svgs));
    // Twin mode's residual table, when the run has one.
    if let Some(t) = crate::twin::load(dir) {
        md_text.push_str(&t.markdown());
        html_text = html_text.replace("</body></html>", &format!("{}</body></html>", t.html()));
    }
    // Eval results kept in the run's folder (eval points, collected artifacts).
    if let Some((md, html)) = eval::sections_for(dir) {
        md_text.push_str(&md);
        html_text = html_text.replace("</body></html>", &format!("{html}</body></html>"));
    }
    let md = dir.join("report.md");
    crate::problem::atomic_write(&md, md_text.as_bytes()).map_err(|e| e.to_string())?;
    let html_p = dir.join("report.html");
    crate::problem::atomic_write(&html_p, html_text.as_bytes()).map_err(|e| e.to_string())?;
    Ok(vec![html_p, md])
}

#[cfg(test)]
pub(crate) mod tests;
