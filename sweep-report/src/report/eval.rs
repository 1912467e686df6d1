//! Eval results in reports: one row per eval (its identity, status, both filters' scores with
//! their standard errors, n, the threshold and its source, the gate's word). A not-applicable
//! eval shows its status and no number.

use crate::eval::record::{EvalRecord, EvalStatus};
use crate::gate::EvalGate;
use crate::html::escape;

pub struct Row<'a> {
    pub label: String,
    pub record: &'a EvalRecord,
    pub gate: Option<&'a EvalGate>,
}

/// `0.9750 ± 0.0043`, or `-` when there is no score.
fn score(v: Option<f64>, se: Option<f64>) -> String {
    match (v, se) {
        (Some(v), Some(se)) => format!("{v:.4} ± {se:.4}"),
        (Some(v), None) => format!("{v:.4}"),
        (None, _) => "-".into(),
    }
}

fn n_cell(r: &EvalRecord) -> String {
    match (r.status, r.limit) {
        (EvalStatus::NotApplicable, _) => "-".into(),
        (_, Some(l)) => format!("{} (limit {l})", r.n),
        (_, None) => format!("{} / {}", r.n, r.n_total),
    }
}

fn threshold_cell(g: Option<&EvalGate>) -> String {
    match g.and_then(|g| g.threshold.as_ref()) {
        Some((t, src)) => format!("{t} ({src})"),
        None => "-".into(),
    }
}

fn verdict_cell(g: Option<&EvalGate>) -> &'static str {
    match g {
        None => "-",
        Some(g) if !g.applicable => "N/A",
        Some(g) if g.check.passed => "PASS",
        Some(_) => "FAIL",
    }
}

fn cells(row: &Row) -> [String; 9] {
    let r = row.record;
    [
        row.label.clone(),
        r.task.clone(),
        r.status_text(),
        score(r.em_strict, r.em_strict_stderr),
        score(r.em_flexible, r.em_flexible_stderr),
        n_cell(r),
        if r.status == EvalStatus::NotApplicable { "-".into() } else { r.infrastructure_success.to_string() },
        threshold_cell(row.gate),
        verdict_cell(row.gate).into(),
    ]
}

const HEADERS: [&str; 9] = ["eval", "task", "status", "em_strict", "em_flexible", "n", "infrastructure_success", "threshold", "gate"];

/// The evals as a Markdown section.
pub fn markdown(rows: &[Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from("\n### Evals\n\n");
    o.push_str(&format!("| {} |\n|{}\n", HEADERS.join(" | "), "---|".repeat(HEADERS.len())));
    for row in rows {
        let c = cells(row).map(|s| s.replace('|', "\\|"));
        o.push_str(&format!("| {} |\n", c.join(" | ")));
    }
    o.push('\n');
    for row in rows {
        if let Some(g) = row.gate.filter(|g| !g.check.passed || !g.applicable) {
            o.push_str(&format!("- {}: {}\n", g.check.name, g.check.detail));
        }
    }
    o.push_str(
        "\nScores are lm-eval's `exact_match` on gsm8k (5-shot, chat template) with the strict-match and flexible-extract filters; \
         ± is the standard error of the mean. A not-applicable eval has no score.\n",
    );
    o
}

/// A page of its own for one eval folder.
pub fn markdown_page(rows: &[Row]) -> String {
    let mut o = String::from("# Eval report\n");
    for row in rows {
        let r = row.record;
        o.push_str(&format!(
            "\n{}: model {}, server {}, {} ({}), started {}, {:.0} s, concurrency {}, max_tokens {}, questions from {}\n",
            row.label,
            r.model.as_deref().unwrap_or("-"),
            r.base_url.as_deref().unwrap_or("-"),
            r.result_kind,
            r.producer,
            if r.started_at.is_empty() { "-" } else { &r.started_at },
            r.wall_s,
            r.concurrency,
            r.max_tokens,
            if r.data.is_empty() { "-" } else { &r.data }
        ));
    }
    o.push_str(&markdown(rows));
    o
}

/// The evals as an HTML section.
pub fn html(rows: &[Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from("<h2>Evals</h2>\n<table>\n<tr>");
    for h in HEADERS {
        o.push_str(&format!("<th>{}</th>", escape(h)));
    }
    o.push_str("</tr>\n");
    for row in rows {
        let class = match verdict_cell(row.gate) {
            "FAIL" => " class=\"fail\"",
            "N/A" => " class=\"na\"",
            _ => "",
        };
        o.push_str(&format!("<tr{class}>"));
        for c in cells(row) {
            o.push_str(&format!("<td>{}</td>", escape(&c)));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n<ul>\n");
    for row in rows {
        if let Some(g) = row.gate.filter(|g| !g.check.passed || !g.applicable) {
            o.push_str(&format!("<li>{}: {}</li>\n", escape(&g.check.name), escape(&g.check.detail)));
        }
    }
    o.push_str("</ul>\n<p>Scores are lm-eval's <code>exact_match</code> on gsm8k (5-shot, chat template) with the strict-match and flexible-extract filters; ± is the standard error of the mean. A not-applicable eval has no score.</p>\n");
    o
}

/// A self-contained page for one eval folder.
pub fn html_page(rows: &[Row]) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Eval report</title><style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px}}tr.fail td{{background:#fdd}}tr.na td{{color:#666}}</style></head><body><h1>Eval report</h1>\n{}</body></html>\n",
        html(rows)
    )
}

/// The eval's own `report.md` and `report.html` (with its gate check when thresholds apply).
pub fn write_pages(out: &std::path::Path, rec: &EvalRecord, gate: Option<&EvalGate>) -> std::io::Result<()> {
    let rows = [Row { label: rec.meta.label(), record: rec, gate }];
    crate::problem::atomic_write(&out.join("report.md"), markdown_page(&rows).as_bytes())?;
    crate::problem::atomic_write(&out.join("report.html"), html_page(&rows).as_bytes())
}

/// The Markdown and HTML sections for the evals at or under a run folder (gated against
/// InferenceX's thresholds), or `None` when it has none.
pub fn sections_for(dir: &std::path::Path) -> Option<(String, String)> {
    let thr = crate::gate::Thresholds::embedded();
    let found = crate::gate::check_eval_dirs(dir, &thr, None);
    let rows: Vec<Row> = found
        .iter()
        .filter_map(|(d, rec, g)| {
            let rec = rec.as_ref()?;
            let rel = d.strip_prefix(dir).ok().filter(|r| !r.as_os_str().is_empty()).unwrap_or(d);
            Some(Row { label: format!("{} ({})", rec.meta.label(), rel.display()), record: rec, gate: Some(g) })
        })
        .collect();
    (!rows.is_empty()).then(|| (markdown(&rows), html(&rows)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::record::Meta;

    fn record(status: EvalStatus, strict: Option<f64>) -> EvalRecord {
        EvalRecord {
            task: "gsm8k".into(),
            status,
            reason: (status == EvalStatus::NotApplicable).then(|| "simulated engine".into()),
            result_kind: "measured".into(),
            model: Some("m".into()),
            base_url: None,
            server: None,
            n: if strict.is_some() { 1319 } else { 0 },
            n_total: 1319,
            limit: None,
            em_strict: strict,
            em_strict_stderr: strict.map(|_| 0.0043),
            em_flexible: strict.map(|s| s + 0.001),
            em_flexible_stderr: strict.map(|_| 0.0042),
            infrastructure_success: true,
            requests_failed: 0,
            concurrency: 32,
            max_tokens: 12288,
            max_model_len: 16384,
            data: "embedded".into(),
            started_at: String::new(),
            wall_s: 0.0,
            results_file: None,
            meta: Meta { infmax_model_prefix: "dsv4".into(), conc: 32, ..Meta::default() },
            producer: "sweep".into(),
        }
    }

    #[test]
    fn a_not_applicable_eval_shows_no_number() {
        let t = crate::gate::Thresholds::embedded();
        let (done, na) = (record(EvalStatus::Done, Some(0.975)), record(EvalStatus::NotApplicable, None));
        let (gd, gn) = (crate::gate::check_eval(&done, "a", &t, None), crate::gate::check_eval(&na, "b", &t, None));
        let rows = [Row { label: "a".into(), record: &done, gate: Some(&gd) }, Row { label: "b".into(), record: &na, gate: Some(&gn) }];
        let md = markdown(&rows);
        assert!(
            md.contains("| a | gsm8k | done | 0.9750 ± 0.0043 | 0.9760 ± 0.0042 | 1319 / 1319 | true | 0.91 (models.dsv4) | PASS |"),
            "{md}"
        );
        assert!(md.contains("| b | gsm8k | not_applicable: simulated engine | - | - | - | - | - | N/A |"), "{md}");
        let html = html(&rows);
        assert!(html.contains("<tr class=\"na\">") && html.contains("0.9750 ± 0.0043"), "{html}");
    }
}
