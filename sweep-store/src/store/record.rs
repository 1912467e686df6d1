//! A `sweep` run folder read into a [`RunRecord`]: `summary.json` (points, aggregates, Pareto),
//! `plan.json` (each point's matrix row and the changelog entries), `run.json` (options and
//! recipe digests), `gate.json` (the verdict), the point folders' files and eval results. The
//! store reads what the run wrote; it never runs anything.

use super::StoreError;
use super::types::{Ci, EvalScore, PointFile, PointMetrics, PointRow, RunRecord, RunRow, ViewFrontier};
use crate::pareto::{CurveResult, VIEWS, View};
use crate::results::{PointResult, RunSummary, Status, point_dir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Reads a run folder (one with `summary.json`) into what the store writes. `source` says
/// which command records it (`run`, `collect`, `gate`, `import`, …).
pub fn read_run_dir(dir: &Path, source: &str) -> Result<RunRecord, StoreError> {
    let folder = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let summary = RunSummary::load(dir).map_err(|source| StoreError::Summary { path: dir.join("summary.json"), source })?;
    let plan_bytes = read_optional(&dir.join("plan.json"))?;
    let plan: Option<Value> = match &plan_bytes {
        Some(b) => Some(parse_json(&dir.join("plan.json"), b)?),
        None => None,
    };
    let identity: Option<Value> = read_optional(&dir.join("run.json"))?.map(|b| parse_json(&dir.join("run.json"), &b)).transpose()?;
    let gate: Option<crate::gate::Verdict> = match read_optional(&dir.join("gate.json"))? {
        Some(b) => Some(serde_json::from_slice(&b).map_err(|e| StoreError::Input {
            path: dir.join("gate.json"),
            message: format!("not a gate verdict: {e} (re-run `sweep gate` on the run)"),
        })?),
        None => None,
    };
    let rows = plan.as_ref().map(plan_rows).unwrap_or_default();
    let digests: BTreeMap<String, String> = identity
        .as_ref()
        .and_then(|i| i.get("recipes"))
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect())
        .unwrap_or_default();

    let mut blobs = BTreeMap::new();
    let mut points = Vec::new();
    let mut evals = Vec::new();
    for p in &summary.points {
        let row = match rows.get(&p.id) {
            Some(r) => Some(r.clone()),
            // A folder without plan.json: the aggregate carries the same identity fields.
            None => read_optional(&point_dir(dir, &p.id).join("agg.json"))?.and_then(|b| serde_json::from_slice::<Value>(&b).ok()),
        };
        let mut point = point_row(&summary, p, row.as_ref(), digests.get(&p.id).cloned());
        if !p.profiles.is_null() {
            point.profiles_hash = Some(put_blob(&mut blobs, &p.profiles));
        }
        if let Some(l) = &p.launch {
            point.launch_hash = Some(put_blob(&mut blobs, &serde_json::to_value(l).unwrap_or(Value::Null)));
        }
        let pdir = point_dir(dir, &p.id);
        point.files = point_files(dir, &pdir)?;
        evals.extend(eval_scores(&pdir, &p.id, dir));
        points.push(point);
    }
    // Eval points (`eval:<point>`) ran on the server of their throughput twin: their lm-eval
    // scores are kept against that point, the file naming the eval's folder.
    for e in &summary.evals {
        let twin = e.id.trim_start_matches("eval:");
        if points.iter().any(|p| p.point_id == twin) {
            evals.extend(eval_scores(&point_dir(dir, &e.id), twin, dir));
        }
    }
    let run = run_row(&summary, &points, plan.as_ref(), identity.as_ref(), gate.as_ref(), &folder, source);
    Ok(RunRecord { run, points, evals, plan: plan_bytes, blobs })
}

/// Reads a file that may be absent.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Input { path: path.to_path_buf(), message: e.to_string() }),
    }
}

fn parse_json(path: &Path, bytes: &[u8]) -> Result<Value, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Input { path: path.to_path_buf(), message: format!("not JSON: {e}") })
}

/// Every planned point's matrix row, by point id.
fn plan_rows(plan: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let listed = std::iter::once(&plan["canary"]).chain(
        ["matrices", "evals"]
            .iter()
            .flat_map(|k| plan[*k].as_array().into_iter().flatten().flat_map(|m| m["points"].as_array().into_iter().flatten())),
    );
    for p in listed {
        if let (Some(id), Some(row)) = (p["id"].as_str(), p.get("row")) {
            out.insert(id.to_string(), row.clone());
        }
    }
    out
}

/// Stores a JSON body once, under the digest of its bytes; the digest.
pub(crate) fn put_blob(blobs: &mut BTreeMap<String, String>, v: &Value) -> String {
    let body = v.to_string();
    let hash = super::types::digest(&body);
    blobs.insert(hash.clone(), body);
    hash
}

/// `done`, `failed`, … and the reason.
fn status_parts(s: &Status) -> (&'static str, Option<String>) {
    match s {
        Status::Done => ("done", None),
        Status::Failed { reason } => ("failed", Some(reason.clone())),
        Status::Cancelled { reason } => ("cancelled", Some(reason.clone())),
        Status::Interrupted { reason } => ("interrupted", Some(reason.clone())),
        Status::Pending => ("pending", None),
    }
}

/// A text field of a matrix row (hyphenated, as in plan.json) or an aggregate (snake case).
fn field(row: Option<&Value>, keys: &[&str]) -> Option<String> {
    let r = row?;
    keys.iter().find_map(|k| match r.get(*k)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        v => Some(v.to_string()),
    })
}

/// The layout part of a point id (`…/dep2-c160` → `dep2`).
pub(crate) fn topology_of(id: &str, conc: u32) -> Option<String> {
    let last = id.rsplit('/').next()?;
    last.strip_suffix(&format!("-c{conc}")).map(str::to_string)
}

fn point_row(run: &RunSummary, p: &PointResult, row: Option<&Value>, digest: Option<String>) -> PointRow {
    let (status, status_reason) = status_parts(&p.status);
    let prof = |k: &str| p.profiles.get(k).and_then(Value::as_str).map(str::to_string);
    let metrics = p.summary.as_ref().map(|s| {
        let pa = p.pareto.as_ref();
        let view_ci = |v: View, value: f64| {
            let ci = pa.and_then(|x| x.x_ci.get(&v));
            Ci { value, lo: ci.map(|c| c.0), hi: ci.map(|c| c.1) }
        };
        PointMetrics {
            requests_ok: Some(s.requests_ok as i64),
            requests_error: Some(s.requests_error as i64),
            tput_per_gpu: Ci { value: s.tput_per_gpu, lo: pa.map(|x| x.y_ci.0), hi: pa.map(|x| x.y_ci.1) },
            output_tput_per_gpu: Some(s.output_tput_per_gpu),
            input_tput_per_gpu: Some(s.input_tput_per_gpu),
            intvty_p90: view_ci(View::IntvtyP90, s.intvty_p90),
            e2e_norm_intvty_p90: view_ci(View::E2eNormIntvtyP90, s.e2e_norm_intvty_p90),
            ttft_p50: Some(s.ttft.p50),
            ttft_p90: Some(s.ttft.p90),
            ttft_p99: Some(s.ttft.p99),
            e2el_p75: view_ci(View::E2elP75, s.e2el.p75),
            e2el_p90: view_ci(View::E2elP90, s.e2el.p90),
            theoretical_cache_hit_rate: Some(s.theoretical_cache_hit_rate),
            submission_valid: Some(s.submission_valid),
            power: s.power.clone(),
        }
    });
    PointRow {
        run_id: run.run_id.clone(),
        point_id: p.id.clone(),
        config_key: p.config_key.clone(),
        recipe_fingerprint: field(row, &["recipe-fingerprint", "recipe_fingerprint"]),
        recipe_digest: digest,
        hardware: field(row, &["runner", "hw"]),
        framework: field(row, &["framework"]),
        model: field(row, &["model"]),
        precision: field(row, &["precision"]),
        image: field(row, &["image"]),
        arm: p.arm.clone(),
        topology: topology_of(&p.id, p.conc),
        conc: p.conc.into(),
        gpus: p.gpus.into(),
        matrix: Some(p.matrix.clone()).filter(|m| !m.is_empty()),
        status: status.into(),
        status_reason,
        valid: p.ok(),
        result_kind: p.result_kind.clone(),
        hardware_profile: prof("hardware_profile"),
        model_profile: prof("model_profile"),
        profiles_hash: None,
        launch_hash: None,
        trace_set: Some(p.trace_set.clone()).filter(|t| !t.is_empty()),
        invalid_reasons: p.summary.as_ref().map(|s| s.invalid_reasons.clone()).unwrap_or_default(),
        frontier: if p.pareto.is_some() { frontier_of(&run.curves, &p.curve_key(), &p.id) } else { BTreeMap::new() },
        p_frontier: p.pareto.as_ref().map(|x| x.p_frontier),
        seeds: p.seeds.clone(),
        files: Vec::new(),
        wall_s: Some(p.wall_s),
        metrics,
    }
}

/// A point's membership of each view's frontier in its curve.
pub(crate) fn frontier_of(curves: &[CurveResult], curve: &str, id: &str) -> BTreeMap<View, ViewFrontier> {
    let Some(c) = curves.iter().find(|c| c.curve == curve) else { return BTreeMap::new() };
    VIEWS
        .iter()
        .filter_map(|v| {
            let r = c.views.get(v)?;
            Some((*v, ViewFrontier { on_frontier: r.frontier.iter().any(|f| f == id), dominated_by: r.dominated_by.get(id).cloned() }))
        })
        .collect()
}

/// What a file of a point folder is.
fn file_kind(name: &str) -> &'static str {
    if name.starts_with("profile_export") {
        "records"
    } else if name == "agg.json" || (name.starts_with("agg_") && name.ends_with(".json")) {
        "aggregate"
    } else if name.starts_with("server_metrics") {
        "server_metrics"
    } else if name == "status.json" {
        "status"
    } else if name.ends_with(".log") {
        "log"
    } else if name.starts_with("results") && name.ends_with(".json") {
        "evals"
    } else {
        "other"
    }
}

/// The files of a point folder (and its sub-folders, such as `twin/`), relative to the run folder.
pub(crate) fn point_files(run: &Path, pdir: &Path) -> Result<Vec<PointFile>, StoreError> {
    let mut out = Vec::new();
    let mut stack = vec![pdir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = match std::fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::Input { path: d, message: e.to_string() }),
        };
        for e in rd.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            // Temporary files of an atomic write in progress are not results.
            if name.starts_with('.') {
                continue;
            }
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let rel = path.strip_prefix(run).unwrap_or(&path).to_string_lossy().into_owned();
                out.push(PointFile { path: rel, kind: file_kind(&name).into(), bytes: meta.len() as i64 });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Every numeric metric (not a standard error) of the lm-eval `results*.json` files of a point folder.
pub(crate) fn eval_scores(pdir: &Path, point: &str, run: &Path) -> Vec<EvalScore> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(pdir) else { return out };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("results") && n.to_string_lossy().ends_with(".json")))
        .collect();
    files.sort();
    for f in files {
        let Ok(v) = std::fs::read(&f).map_err(|_| ()).and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|_| ())) else { continue };
        let rel = f.strip_prefix(run).unwrap_or(&f).to_string_lossy().into_owned();
        for (task, metrics) in v.get("results").and_then(Value::as_object).into_iter().flatten() {
            for (metric, val) in metrics.as_object().into_iter().flatten() {
                if let Some(score) = val.as_f64().filter(|_| !metric.contains("stderr")) {
                    out.push(EvalScore { point_id: point.into(), file: rel.clone(), task: task.clone(), metric: metric.clone(), score });
                }
            }
        }
    }
    out
}

/// `YYYYMMDDTHHMMSSZ` at the start of a run id (the default `--out` name), as Unix seconds.
pub(crate) fn stamp_of(run_id: &str) -> Option<i64> {
    let s = run_id.get(..16)?;
    let b = s.as_bytes();
    if b[8] != b'T' || b[15] != b'Z' || !s[..8].bytes().chain(s[9..15].bytes()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let t = format!("{}-{}-{}T{}:{}:{}Z", &s[0..4], &s[4..6], &s[6..8], &s[9..11], &s[11..13], &s[13..15]);
    let at = humantime::parse_rfc3339(&t).ok()?;
    at.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs() as i64)
}

pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// This machine's name (where a recorded folder lives).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        let s = String::from_utf8_lossy(&buf[..end]).into_owned();
        if !s.is_empty() {
            return s;
        }
    }
    "localhost".into()
}

/// The run's kind from its points': one kind, `mixed`, or empty when no point ran.
pub(crate) fn run_kind(points: &[PointRow]) -> String {
    let kinds: BTreeSet<&str> = points.iter().map(|p| p.result_kind.as_str()).filter(|k| !k.is_empty()).collect();
    match kinds.len() {
        0 => String::new(),
        1 => kinds.into_iter().next().unwrap_or_default().to_string(),
        _ => "mixed".into(),
    }
}

/// The distinct runner labels and hardware profiles of the points.
pub(crate) fn run_hardware(points: &[PointRow]) -> Vec<String> {
    let set: BTreeSet<String> = points.iter().flat_map(|p| p.hardware.iter().chain(&p.hardware_profile).cloned()).collect();
    set.into_iter().filter(|h| !h.contains(char::is_whitespace)).collect()
}

pub(crate) fn gate_word(v: &crate::gate::Verdict) -> &'static str {
    if v.passed {
        "pass"
    } else if v.checks.iter().all(|c| c.passed) && !v.incomplete.is_empty() {
        "incomplete"
    } else {
        "fail"
    }
}

fn run_row(
    s: &RunSummary,
    points: &[PointRow],
    plan: Option<&Value>,
    identity: Option<&Value>,
    gate: Option<&crate::gate::Verdict>,
    folder: &Path,
    source: &str,
) -> RunRow {
    let id = |k: &str| identity.and_then(|i| i.get(k));
    let changelog = plan.and_then(|p| p.get("changelog_metadata")).filter(|c| !c.is_null()).cloned();
    let pr_link = changelog.as_ref().and_then(|c| c["entries"][0]["pr-link"].as_str()).map(str::to_string);
    let configs: BTreeSet<String> = s.points.iter().map(|p| p.config_key.clone()).collect();
    // Labels as given (`a,b` lists or separate words), one item each, each with its exact text.
    let labels: Vec<String> =
        s.labels.iter().flat_map(|l| l.split(',')).map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
    RunRow {
        run_id: s.run_id.clone(),
        started_unix: stamp_of(&s.run_id),
        finished_unix: s.created_unix as i64,
        recorded_unix: now_unix(),
        labels,
        configs: configs.into_iter().collect(),
        hardware: run_hardware(points),
        target: s.target.clone(),
        result_kind: run_kind(points),
        seed: Some(s.seed as i64),
        seed_replicates: id("seed_replicates").and_then(Value::as_i64),
        duration_s: id("duration").and_then(Value::as_f64),
        traces: id("traces").and_then(Value::as_str).map(str::to_string),
        sweep_version: id("version").and_then(Value::as_str).map(str::to_string),
        head_ref: plan.and_then(|p| p["head_ref"].as_str()).map(str::to_string),
        base_ref: plan.and_then(|p| p["base_ref"].as_str()).map(str::to_string),
        changelog,
        pr_link,
        gate: gate.map(|g| gate_word(g).to_string()),
        gate_baseline: gate.and_then(|g| g.baseline.clone()),
        gate_failed_checks: gate.map(|g| g.checks.iter().filter(|c| !c.passed).count() as i64),
        points_total: points.len() as i64,
        points_ok: points.iter().filter(|p| p.valid).count() as i64,
        folder: folder.to_string_lossy().into_owned(),
        host: hostname(),
        source: source.into(),
        report: folder.join("report.html").is_file().then(|| "report.html".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_stamps_and_topologies() {
        assert_eq!(stamp_of("20251129T164609Z-full-sweep-fail-fast"), Some(1_764_434_769));
        assert_eq!(stamp_of("my-run"), None);
        assert_eq!(stamp_of("20251129X164609Z-x"), None);
        assert_eq!(topology_of("cfg/dep2-c160", 160).as_deref(), Some("dep2"));
        assert_eq!(topology_of("cfg/tp2-ep2-c16", 16).as_deref(), Some("tp2-ep2"));
        assert_eq!(topology_of("cfg/odd", 4), None);
    }
}
