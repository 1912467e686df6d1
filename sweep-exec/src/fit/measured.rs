//! The measured points a fit aims at: read from a run directory or a results table, and paired
//! with the plan's points.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{FitError, Metric};
use crate::plan::PlanPoint;
use crate::results::RunSummary;

/// One measured point: its arm and concurrency (or plan point id) and the metrics it has.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPoint {
    pub arm: String,
    pub conc: u32,
    /// Plan point id, when the source is a run directory.
    pub id: Option<String>,
    pub metrics: BTreeMap<Metric, f64>,
}

/// Reads measured points for `config_key` from a run directory (`summary.json`: its measured,
/// finished, valid points) or a YAML table with a `calibration-results` list (each entry: `arm`,
/// `conc` and any of the metric keys). Returns the points and a description of the source.
pub fn load_measured(path: &Path, config_key: &str) -> Result<Vec<MeasuredPoint>, FitError> {
    let bad = |message: String| FitError::Results { path: path.display().to_string(), message };
    if path.is_dir() {
        let run = RunSummary::load(path).map_err(|e| bad(e.to_string()))?;
        let pts: Vec<MeasuredPoint> = run
            .points
            .iter()
            .filter(|p| p.config_key == config_key && p.result_kind == "measured" && p.ok())
            .filter_map(|p| {
                let s = p.summary.as_ref()?;
                Some(MeasuredPoint {
                    arm: p.arm.clone(),
                    conc: p.conc,
                    id: Some(p.id.clone()),
                    metrics: Metric::ALL.iter().map(|m| (*m, m.of(s))).filter(|(_, v)| v.is_finite() && *v > 0.0).collect(),
                })
            })
            .collect();
        if pts.is_empty() {
            return Err(bad(format!(
                "no finished, valid `measured` point of {config_key} in this run (points: {}); fit on a run against a real server",
                run.points.iter().map(|p| format!("{} ({})", p.id, p.result_kind)).collect::<Vec<_>>().join(", ")
            )));
        }
        return Ok(pts);
    }
    let doc: Value = crate::yaml::load_typed(path).map_err(|e| {
        let p = e.0.first();
        bad(p.map(|p| format!("{}{}", p.line.map(|l| format!("line {l}: ")).unwrap_or_default(), p.message)).unwrap_or_default())
    })?;
    if let Some(k) = doc.get("config-key").and_then(Value::as_str)
        && k != config_key
    {
        return Err(bad(format!("its config-key is {k}, not {config_key}; pass --config {k}")));
    }
    let rows = doc
        .get("calibration-results")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `calibration-results` list (entries: {arm, conc, tput_per_gpu, e2el_p90, …})".into()))?;
    let mut pts = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let at = format!("calibration-results[{i}]");
        let arm = r.get("arm").and_then(Value::as_str).ok_or_else(|| bad(format!("{at}.arm: missing (the arm name, e.g. Agg TP4)")))?;
        let conc = r.get("conc").and_then(Value::as_u64).ok_or_else(|| bad(format!("{at}.conc: missing or not a whole number")))? as u32;
        let mut metrics = BTreeMap::new();
        for (k, v) in r.as_object().into_iter().flatten() {
            if k == "arm" || k == "conc" {
                continue;
            }
            let m = Metric::from_key(k).ok_or_else(|| {
                bad(format!("{at}.{k}: unknown metric; known: {}", Metric::ALL.iter().map(|m| m.key()).collect::<Vec<_>>().join(", ")))
            })?;
            let x = v.as_f64().filter(|x| x.is_finite() && *x > 0.0).ok_or_else(|| bad(format!("{at}.{k}: not a positive number")))?;
            metrics.insert(m, x);
        }
        if metrics.is_empty() {
            return Err(bad(format!("{at}: no metric")));
        }
        pts.push(MeasuredPoint { arm: arm.to_string(), conc, id: None, metrics });
    }
    if pts.is_empty() {
        return Err(bad("`calibration-results` is empty".into()));
    }
    Ok(pts)
}

fn norm_arm(s: &str) -> String {
    s.to_ascii_lowercase().replace(['-', '_', ' '], "")
}

/// Pairs measured points with the plan's points of the same config (by id, else arm and conc).
pub fn match_points(plan_points: &[PlanPoint], measured: &[MeasuredPoint]) -> Result<Vec<(PlanPoint, MeasuredPoint)>, FitError> {
    let mut out = Vec::new();
    for m in measured {
        let hit = plan_points.iter().find(|p| match &m.id {
            Some(id) => &p.id == id,
            None => {
                p.conc == m.conc && (norm_arm(&p.arm) == norm_arm(&m.arm) || p.id.ends_with(&format!("/{}-c{}", norm_arm(&m.arm), m.conc)))
            }
        });
        match hit {
            Some(p) => out.push((p.clone(), m.clone())),
            None => {
                return Err(FitError::Points(format!(
                    "measured point {} c{} has no point in the plan (plan points: {})",
                    m.arm,
                    m.conc,
                    plan_points.iter().map(|p| format!("{} c{}", p.arm, p.conc)).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    Ok(out)
}
