//! Twin mode (`sweep run --twin`): every finished point of a live run is replayed with the same
//! recipe, trace set, seed and duration on the virtual clock, and each metric's residual
//! (simulated vs. live) is written to `residuals.json` and shown in the run's reports.
//!
//! Against `sweep engine serve` the twin uses the server's own model and hardware profiles (from
//! `/server_info`), so the two differ only by what real time adds: HTTP, tokenization, scheduling
//! jitter. Against a real server it uses `--hardware` (e.g. a fitted profile) or the runner's.
//!
//! This module is the residuals' data and rendering only (reports read it); running the twins is
//! `run::twin`.

use crate::metrics::Metric;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Residuals above this (in percent, absolute) are flagged in reports.
pub const FLAG_PCT: f64 = 10.0;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricResidual {
    /// The live run's value.
    pub measured: f64,
    /// The virtual-clock twin's value.
    pub predicted: f64,
    /// (predicted − measured) / measured × 100.
    pub residual_pct: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TwinPoint {
    pub id: String,
    /// `measured` (a real server) or `predicted` (a live reference engine), as the run labelled it.
    pub live_result_kind: String,
    /// Hardware and model profiles the twin used.
    pub twin_hardware_profile: String,
    pub twin_model_profile: String,
    /// `ok`, or why the twin could not run.
    pub status: String,
    pub metrics: BTreeMap<String, MetricResidual>,
}

/// `residuals.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Residuals {
    pub run_id: String,
    pub live_target: String,
    pub trace_set: String,
    pub seed: u64,
    pub duration_s: Option<f64>,
    /// Time scale of a live reference engine (its latencies are scaled down by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_time_scale: Option<f64>,
    pub flag_pct: f64,
    pub points: Vec<TwinPoint>,
}

/// Reads `residuals.json` of a run directory, when there is one.
pub fn load(dir: &Path) -> Option<Residuals> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("residuals.json")).ok()?).ok()
}

fn cell(r: &MetricResidual) -> String {
    let flag = if r.residual_pct.abs() > FLAG_PCT { " ⚠" } else { "" };
    format!("{} / {} / {:+.1} %{flag}", crate::gate::fmt_value(r.measured), crate::gate::fmt_value(r.predicted), r.residual_pct)
}

const COLS: [Metric; 6] = [Metric::TputPerGpu, Metric::IntvtyP90, Metric::TtftP50, Metric::TtftP90, Metric::E2elP75, Metric::E2elP90];

impl Residuals {
    /// The residual table for `report.md`.
    pub fn markdown(&self) -> String {
        let mut o = format!(
            "\n## Twin residuals (live vs. virtual clock)\n\nEach finished point was replayed on the virtual clock with the same recipe, traces ({}), seed {} and duration; cells are live / twin / residual (twin − live) / live; ⚠ marks |residual| > {} %.{}\n\n| point | twin profiles |",
            self.trace_set,
            self.seed,
            self.flag_pct,
            self.live_time_scale.filter(|t| *t != 1.0).map(|t| format!(" The live engine ran at time scale {t}.")).unwrap_or_default()
        );
        for m in COLS {
            o.push_str(&format!(" {} |", m.key()));
        }
        o.push_str("\n|---|---|");
        o.push_str(&"---|".repeat(COLS.len()));
        o.push('\n');
        for p in &self.points {
            o.push_str(&format!("| {} | {} on {} |", p.id, p.twin_model_profile, p.twin_hardware_profile));
            if p.metrics.is_empty() {
                let why: String = p.status.chars().take(160).collect();
                o.push_str(&format!(" {why} |{}\n", " |".repeat(COLS.len() - 1)));
                continue;
            }
            for m in COLS {
                o.push_str(&format!(" {} |", p.metrics.get(m.key()).map(cell).unwrap_or_else(|| "-".into())));
            }
            o.push('\n');
        }
        o
    }

    /// The residual table for `report.html`.
    pub fn html(&self) -> String {
        let esc = crate::html::escape;
        let mut o = format!(
            "<h2>Twin residuals (live vs. virtual clock)</h2>\n<p>Same recipe, traces ({}), seed {} and duration on the virtual clock. Cells: live / twin / residual; highlighted when |residual| &gt; {} %.</p>\n<table id=\"twin\"><tr><th>point</th><th>twin profiles</th>",
            esc(&self.trace_set),
            self.seed,
            self.flag_pct
        );
        for m in COLS {
            o.push_str(&format!("<th>{}</th>", m.key()));
        }
        o.push_str("</tr>\n");
        for p in &self.points {
            o.push_str(&format!("<tr><td>{}</td><td>{} on {}</td>", esc(&p.id), esc(&p.twin_model_profile), esc(&p.twin_hardware_profile)));
            if p.metrics.is_empty() {
                o.push_str(&format!("<td class=\"fail\" colspan=\"{}\">{}</td></tr>\n", COLS.len(), esc(&p.status)));
                continue;
            }
            for m in COLS {
                match p.metrics.get(m.key()) {
                    Some(r) => {
                        let cls = if r.residual_pct.abs() > FLAG_PCT { " class=\"fail\"" } else { "" };
                        o.push_str(&format!("<td{cls}>{}</td>", esc(&cell(r))));
                    }
                    None => o.push_str("<td>-</td>"),
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
        o
    }
}
