//! `sweep collect`: merge the point results of several run directories (GitHub Actions matrix
//! jobs, Slurm jobs) into one run with the same layout as a local run.

use super::{RunError, finalize, load_samples};
use crate::results::{RunSummary, Status, point_dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &dst)?;
        } else {
            std::fs::copy(e.path(), &dst)?;
        }
    }
    Ok(())
}

/// Finds run directories (folders with `summary.json`) at or below each input path.
fn find_runs(inputs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = inputs.to_vec();
    while let Some(d) = stack.pop() {
        if d.join("summary.json").is_file() {
            out.push(d);
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    out.sort();
    out
}

/// Merges the finished points of every run found under `inputs` into `out`.
pub fn collect(inputs: &[PathBuf], out: &Path) -> Result<RunSummary, RunError> {
    let runs = find_runs(inputs);
    if runs.is_empty() {
        return Err(RunError::NoRuns { inputs: inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") });
    }
    std::fs::create_dir_all(out).map_err(RunError::io(out))?;
    let mut merged: Option<RunSummary> = None;
    let mut origin: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut plan: Option<serde_json::Value> = None;
    for r in &runs {
        let s = RunSummary::load(r).map_err(|e| RunError::Summary(e.to_string()))?;
        let p: Option<serde_json::Value> = std::fs::read_to_string(r.join("plan.json")).ok().and_then(|t| serde_json::from_str(&t).ok());
        match (&plan, p) {
            (None, Some(p)) => plan = Some(p),
            (Some(a), Some(b)) if a["matrices"] != b["matrices"] || a["canary"] != b["canary"] => {
                return Err(RunError::PlannedDifferently { run: r.clone(), first: runs[0].clone() });
            }
            _ => {}
        }
        let m = merged.get_or_insert_with(|| RunSummary { points: Vec::new(), curves: Vec::new(), evals: Vec::new(), ..s.clone() });
        for e in s.evals {
            if e.status == Status::Pending {
                continue;
            }
            if let Some(prev) = origin.get(&e.id) {
                return Err(RunError::Duplicate { point: e.id.clone(), first: prev.clone(), second: r.clone() });
            }
            copy_tree(&point_dir(r, &e.id), &point_dir(out, &e.id)).map_err(|source| RunError::Copy { point: e.id.clone(), source })?;
            origin.insert(e.id.clone(), r.clone());
            m.evals.push(e);
        }
        for p in s.points {
            if p.status == Status::Pending {
                continue;
            }
            if let Some(prev) = origin.get(&p.id) {
                return Err(RunError::Duplicate { point: p.id.clone(), first: prev.clone(), second: r.clone() });
            }
            copy_tree(&point_dir(r, &p.id), &point_dir(out, &p.id)).map_err(|source| RunError::Copy { point: p.id.clone(), source })?;
            origin.insert(p.id.clone(), r.clone());
            m.points.push(p);
        }
    }
    let mut m = merged.expect("at least one run");
    m.run_id = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or(m.run_id);
    // Plan order: canary, then matrices.
    if let Some(plan) = &plan {
        let order: Vec<String> = std::iter::once(&plan["canary"])
            .chain(plan["matrices"].as_array().into_iter().flatten().flat_map(|mx| mx["points"].as_array().into_iter().flatten()))
            .filter_map(|p| p["id"].as_str().map(str::to_string))
            .collect();
        m.points.sort_by_key(|p| order.iter().position(|o| o == &p.id).unwrap_or(usize::MAX));
        let eval_order: Vec<String> = plan["evals"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|mx| mx["points"].as_array().into_iter().flatten())
            .filter_map(|p| p["id"].as_str().map(str::to_string))
            .collect();
        m.evals.sort_by_key(|e| eval_order.iter().position(|o| o == &e.id).unwrap_or(usize::MAX));
        let plan_json = out.join("plan.json");
        crate::results::write_json(&plan_json, plan).map_err(RunError::io(&plan_json))?;
    }
    let samples = m.points.iter().filter_map(|p| load_samples(out, p).map(|s| (p.id.clone(), s))).collect();
    finalize(m, &samples, out)
}
