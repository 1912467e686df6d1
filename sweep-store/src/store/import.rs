//! What `sweep import` reads: `sweep` run folders (with `summary.json`) and InferenceX-style
//! agentic result artifacts — one folder per point holding the agentic aggregate (`agg.json`,
//! `agg_*.json` or another JSON with `request_metrics`, spec `agentx.md` §7) and, when it was
//! kept, the AIPerf `profile_export.jsonl` (beside it or under `aiperf_artifacts/`).
//!
//! The aggregate's published numbers are stored as they are. When every point has its records,
//! the 95 % intervals and frontier probabilities are computed from them exactly as a `sweep`
//! run computes its own (request bootstrap, seed 42, 200 replicates); otherwise the points have
//! no intervals and frontier membership is decided on the published values alone.

use super::StoreError;
use super::record::{frontier_of, hostname, now_unix, point_files, put_blob, run_hardware, run_kind};
use super::types::{Ci, PointMetrics, PointRow, RunRecord, RunRow};
use crate::metrics::Stats;
use crate::pareto::{self, Samples, View};
use crate::records::{Record, RecordPhase};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bootstrap replicates and seed of imported intervals (those of `sweep run`).
const REPLICATES: usize = 200;
const SEED: u64 = 42;
/// How deep below an argument folders are searched.
const MAX_DEPTH: usize = 6;
/// The largest JSON file read as an aggregate (real ones are under 20 KB).
const MAX_AGGREGATE_BYTES: u64 = 16 << 20;

/// What was found under one `sweep import` argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Found {
    /// A `sweep` run folder.
    Run(PathBuf),
    /// InferenceX-style point folders, imported together as one run rooted at the first path.
    Artifacts(PathBuf, Vec<PathBuf>),
}

/// Run folders and artifact folders at or below `path`.
pub fn discover(path: &Path) -> Result<Vec<Found>, StoreError> {
    if !path.exists() {
        return Err(StoreError::Input {
            path: path.to_path_buf(),
            message: "no such file or folder; give run folders, folders of them, or InferenceX agentic result folders".into(),
        });
    }
    let mut runs = Vec::new();
    let mut artifacts = Vec::new();
    let mut stack = vec![(path.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        if d.join("summary.json").is_file() {
            runs.push(d);
            continue;
        }
        if aggregate_file(&d).is_some() {
            artifacts.push(d);
            continue;
        }
        if depth >= MAX_DEPTH {
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).map(|p| (p, depth + 1)));
        }
    }
    runs.sort();
    artifacts.sort();
    let mut out: Vec<Found> = runs.into_iter().map(Found::Run).collect();
    if !artifacts.is_empty() {
        out.push(Found::Artifacts(path.to_path_buf(), artifacts));
    }
    if out.is_empty() {
        return Err(StoreError::Input {
            path: path.to_path_buf(),
            message: "no run folder (summary.json) or agentic aggregate (agg.json with request_metrics) here".into(),
        });
    }
    Ok(out)
}

/// The aggregate JSON of an artifact folder: `agg.json`, else `agg_*.json`, else any other JSON
/// file with `request_metrics` (AIPerf's own exports and eval results are not aggregates).
pub fn aggregate_file(dir: &Path) -> Option<PathBuf> {
    // Aggregates are kilobytes: a larger JSON file is something else, and is not read whole.
    let is_agg = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.len() <= MAX_AGGREGATE_BYTES)
            && std::fs::read(p)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .is_some_and(|v| v.get("request_metrics").is_some_and(Value::is_object))
    };
    let first = dir.join("agg.json");
    if first.is_file() && is_agg(&first) {
        return Some(first);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            !(n.starts_with("profile_export") || n.starts_with("server_metrics") || n.starts_with("results") || n == "status.json")
        })
        .collect();
    files.sort_by_key(|p| (!p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("agg_")), p.clone()));
    files.into_iter().find(|p| is_agg(p))
}

/// The per-request records of an artifact folder, when kept.
fn records_file(dir: &Path) -> Option<PathBuf> {
    [dir.join("profile_export.jsonl"), dir.join("aiperf_artifacts").join("profile_export.jsonl")].into_iter().find(|p| p.is_file())
}

/// How an import is named.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The run id (default: the argument folder's name).
    pub run_id: Option<String>,
    /// The config key of every point (default: the aggregate's `point_id` prefix, else
    /// `<model prefix>-<precision>-<hw>-<framework>` from its identity fields).
    pub config: Option<String>,
}

struct ArtifactPoint {
    dir: PathBuf,
    agg: Value,
    agg_path: PathBuf,
    records: Option<Vec<Record>>,
}

/// Reads InferenceX-style point folders into one run.
pub fn read_artifacts(root: &Path, dirs: &[PathBuf], opts: &ImportOptions) -> Result<RunRecord, StoreError> {
    let root_abs = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    let mut pts = Vec::new();
    for d in dirs {
        let agg_path = aggregate_file(d)
            .ok_or_else(|| StoreError::Input { path: d.clone(), message: "no agentic aggregate (agg.json with request_metrics)".into() })?;
        let bytes = std::fs::read(&agg_path).map_err(|e| StoreError::Input { path: agg_path.clone(), message: e.to_string() })?;
        let agg: Value =
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Input { path: agg_path.clone(), message: format!("not JSON: {e}") })?;
        let records = match records_file(d) {
            Some(p) => Some(crate::records::read_jsonl(&p).map_err(|source| StoreError::Records { path: p.clone(), source })?),
            None => None,
        };
        pts.push(ArtifactPoint { dir: d.clone(), agg, agg_path, records });
    }
    let run_id = opts.run_id.clone().unwrap_or_else(|| {
        root_abs.file_name().map(|n| n.to_string_lossy().into_owned()).filter(|n| !n.is_empty()).unwrap_or_else(|| "import".into())
    });

    let mut blobs = BTreeMap::new();
    let mut points: Vec<PointRow> = Vec::new();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for a in &pts {
        let mut p = point_from_aggregate(&run_id, &a.agg, a.records.as_deref(), opts.config.as_deref(), &a.agg_path)?;
        if let Some(first) = seen.insert(p.point_id.clone(), a.dir.clone()) {
            return Err(StoreError::Input {
                path: a.dir.clone(),
                message: format!(
                    "point {} is also in {}: import one result per point (or the folders one at a time, with --run-id)",
                    p.point_id,
                    first.display()
                ),
            });
        }
        if let Some(prof) = a.agg.get("profiles").filter(|v| !v.is_null()) {
            p.profiles_hash = Some(put_blob(&mut blobs, prof));
        }
        p.files = point_files(&root_abs, &std::path::absolute(&a.dir).unwrap_or_else(|_| a.dir.clone()))?;
        points.push(p);
    }
    frontiers(&mut points, &pts);
    points.sort_by(|a, b| (&a.config_key, a.conc, &a.point_id).cmp(&(&b.config_key, b.conc, &b.point_id)));

    let finished = finished_unix(&pts);
    let targets: std::collections::BTreeSet<String> = pts.iter().filter_map(|a| a.agg["target"].as_str().map(str::to_string)).collect();
    let configs: std::collections::BTreeSet<String> = points.iter().map(|p| p.config_key.clone()).collect();
    let run = RunRow {
        run_id: run_id.clone(),
        started_unix: None,
        finished_unix: finished,
        recorded_unix: now_unix(),
        labels: Vec::new(),
        configs: configs.into_iter().collect(),
        hardware: run_hardware(&points),
        target: if targets.len() == 1 { targets.into_iter().next().unwrap_or_default() } else { "inferencex".into() },
        result_kind: run_kind(&points),
        seed: pts.iter().find_map(|a| a.agg["seed"].as_i64()),
        seed_replicates: None,
        duration_s: None,
        traces: None,
        sweep_version: None,
        head_ref: None,
        base_ref: None,
        changelog: None,
        pr_link: None,
        gate: None,
        gate_baseline: None,
        gate_failed_checks: None,
        points_total: points.len() as i64,
        points_ok: points.iter().filter(|p| p.valid).count() as i64,
        folder: root_abs.to_string_lossy().into_owned(),
        host: hostname(),
        source: "import-inferencex".into(),
        report: None,
    };
    Ok(RunRecord { run, points, evals: Vec::new(), plan: None, blobs })
}

/// The aggregate's number at a JSON path.
fn num(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_f64()
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Null | Value::String(_) => None,
        other => Some(other.to_string()),
    }
}

/// The parallel layout in `sweep`'s point-id form: `tp4`, `tp2-ep2`, `dep8`, `tp8-pp2`.
fn layout(agg: &Value) -> String {
    if agg["is_multinode"].as_bool() == Some(true) {
        return "multinode".into();
    }
    let n = |k: &str| agg[k].as_i64().or_else(|| agg[k].as_str().and_then(|s| s.parse().ok())).unwrap_or(1);
    let dpa = match &agg["dp_attention"] {
        Value::Bool(b) => *b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    };
    let (tp, ep) = (n("tp"), n("ep"));
    let mut s = if dpa && ep == tp {
        format!("dep{tp}")
    } else {
        let mut s = format!("tp{tp}");
        if ep > 1 {
            s.push_str(&format!("-ep{ep}"));
        }
        if dpa {
            s.push_str("-dpa");
        }
        s
    };
    for (k, short) in [("pp", "pp"), ("dcp_size", "dcp"), ("pcp_size", "pcp")] {
        if n(k) > 1 {
            s.push_str(&format!("-{short}{}", n(k)));
        }
    }
    s
}

fn point_from_aggregate(
    run_id: &str,
    agg: &Value,
    records: Option<&[Record]>,
    config: Option<&str>,
    path: &Path,
) -> Result<PointRow, StoreError> {
    let bad = |m: &str| StoreError::Input { path: path.to_path_buf(), message: m.to_string() };
    let conc = agg["conc"].as_i64().ok_or_else(|| bad("no `conc` (the point's concurrency): is this an InferenceX agentic aggregate?"))?;
    let gpus = agg["num_gpus"].as_i64().ok_or_else(|| bad("no `num_gpus`: is this an InferenceX agentic aggregate?"))?;
    let tput = num(agg, &["tput_per_gpu"])
        .or_else(|| num(agg, &["request_metrics", "throughput", "per_gpu", "total_tput_tps"]))
        .ok_or_else(|| bad("no `tput_per_gpu` nor `request_metrics.throughput.per_gpu.total_tput_tps`"))?;
    let own_id = text(agg, "point_id");
    let config_key = match (config, &own_id) {
        (Some(c), _) => c.to_string(),
        (None, Some(id)) if id.contains('/') => id.split('/').next().unwrap_or_default().to_string(),
        _ => ["infmax_model_prefix", "precision", "hw", "framework"].iter().filter_map(|k| text(agg, k)).collect::<Vec<_>>().join("-"),
    };
    let topo = layout(agg);
    let point_id = match own_id {
        Some(id) if config.is_none() && id.contains('/') => id,
        Some(id) if id.contains('/') => format!("{config_key}/{}", id.rsplit('/').next().unwrap_or_default()),
        _ => format!("{config_key}/{topo}-c{conc}"),
    };
    let validity = &agg["validity"];
    let ok_requests = agg["num_requests_successful"].as_i64();
    let valid = validity["valid"].as_bool().unwrap_or(ok_requests.unwrap_or(0) > 0);
    let mut invalid_reasons: Vec<String> =
        validity["reasons"].as_array().into_iter().flatten().filter_map(|r| r.as_str().map(str::to_string)).collect();
    if !valid && invalid_reasons.is_empty() {
        invalid_reasons.push("no_successful_requests".into());
    }
    let metrics = aggregate_metrics(agg, records, tput, ok_requests);
    let prof_field = |k: &str| agg["profiles"].get(k).and_then(Value::as_str).map(str::to_string);
    Ok(PointRow {
        run_id: run_id.to_string(),
        point_id,
        config_key,
        recipe_fingerprint: text(agg, "recipe_fingerprint"),
        recipe_digest: None,
        hardware: text(agg, "hw"),
        framework: text(agg, "framework"),
        model: text(agg, "model"),
        precision: text(agg, "precision"),
        image: text(agg, "image"),
        arm: text(agg, "arm").unwrap_or_else(|| topo.to_uppercase()),
        topology: Some(topo),
        conc,
        gpus,
        matrix: None,
        status: if valid { "done" } else { "failed" }.into(),
        status_reason: (!valid).then(|| format!("invalid aggregate: {}", invalid_reasons.join(", "))),
        valid,
        result_kind: text(agg, "result_kind").unwrap_or_else(|| "measured".into()),
        hardware_profile: prof_field("hardware_profile"),
        model_profile: prof_field("model_profile"),
        profiles_hash: None,
        launch_hash: None,
        trace_set: text(agg, "trace_set").or_else(|| agg["dataset"].get("hf_dataset_name").and_then(Value::as_str).map(str::to_string)),
        metrics: Some(metrics),
        invalid_reasons,
        frontier: BTreeMap::new(),
        p_frontier: None,
        seeds: Vec::new(),
        files: Vec::new(),
        wall_s: None,
    })
}

/// The point's metrics: the aggregate's published numbers (TTFT p99 and the failed requests from
/// the records when they are here), without intervals.
fn aggregate_metrics(agg: &Value, records: Option<&[Record]>, tput: f64, ok_requests: Option<i64>) -> PointMetrics {
    let lat = |m: &str, s: &str| num(agg, &["request_metrics", "latency", m, s]);
    let prof: Vec<&Record> = records.unwrap_or_default().iter().filter(|r| r.phase == RecordPhase::Profiling).collect();
    // TTFT p99 is not in InferenceX aggregates: from the records when they are here.
    let ttft_p99 = lat("ttft", "p99").or_else(|| {
        records.map(|_| Stats::of(prof.iter().filter(|r| r.ok()).filter_map(|r| r.ttft_ns()).map(|t| t as f64 / 1e9).collect()).p99)
    });
    let ci = |value: Option<f64>| Ci { value: value.unwrap_or(f64::NAN), lo: None, hi: None };
    PointMetrics {
        requests_ok: ok_requests,
        requests_error: records.map(|_| prof.iter().filter(|r| r.error.is_some()).count() as i64),
        tput_per_gpu: ci(Some(tput)),
        output_tput_per_gpu: num(agg, &["request_metrics", "throughput", "per_gpu", "output_tput_tps"])
            .or_else(|| num(agg, &["output_tput_per_gpu"])),
        input_tput_per_gpu: num(agg, &["request_metrics", "throughput", "per_gpu", "input_tput_tps"]),
        intvty_p90: ci(lat("intvty", "p90").or_else(|| lat("itl", "p90").filter(|x| *x > 0.0).map(|x| 1.0 / x))),
        e2e_norm_intvty_p90: ci(lat("e2e_norm_intvty", "p90")),
        ttft_p50: lat("ttft", "p50"),
        ttft_p90: lat("ttft", "p90"),
        ttft_p99,
        e2el_p75: ci(lat("e2el", "p75")),
        e2el_p90: ci(lat("e2el", "p90")),
        theoretical_cache_hit_rate: num(agg, &["request_metrics", "cache", "theoretical_cache_hit_rate"]),
        submission_valid: agg["validity"]["submission_valid"].as_bool(),
        power: power_of(agg),
    }
}

/// Frontiers per config over the published values; with every point's records, bootstrap
/// intervals and frontier probabilities as `sweep run` computes them.
fn frontiers(points: &mut [PointRow], arts: &[ArtifactPoint]) {
    let x_of = |m: &PointMetrics| -> BTreeMap<View, f64> {
        [
            (View::E2eNormIntvtyP90, m.e2e_norm_intvty_p90.value),
            (View::IntvtyP90, m.intvty_p90.value),
            (View::E2elP90, m.e2el_p90.value),
            (View::E2elP75, m.e2el_p75.value),
        ]
        .into_iter()
        .filter(|(_, x)| x.is_finite())
        .collect()
    };
    // Points without every view's value cannot be placed on the frontiers.
    let placed: Vec<usize> = (0..points.len()).filter(|&i| points[i].metrics.as_ref().is_some_and(|m| x_of(m).len() == 4)).collect();
    let all_records = placed.iter().all(|&i| arts[i].records.is_some());
    let mut analysed: Vec<pareto::Point> = if all_records && !placed.is_empty() {
        let inputs: Vec<(String, String, String, u32, bool, Samples)> = placed
            .iter()
            .map(|&i| {
                let p = &points[i];
                let s = Samples::from_records(arts[i].records.as_deref().unwrap_or_default(), p.gpus.max(1) as u32);
                (p.point_id.clone(), p.config_key.clone(), p.arm.clone(), p.conc as u32, p.valid, s)
            })
            .collect();
        pareto::points_with_uncertainty(&inputs, REPLICATES, SEED)
    } else {
        placed
            .iter()
            .map(|&i| {
                let p = &points[i];
                pareto::Point {
                    id: p.point_id.clone(),
                    curve: p.config_key.clone(),
                    arm: p.arm.clone(),
                    conc: p.conc as u32,
                    valid: p.valid,
                    y: 0.0,
                    x: BTreeMap::new(),
                    y_ci: (0.0, 0.0),
                    x_ci: BTreeMap::new(),
                    p_frontier: f64::NAN,
                    y_out: 0.0,
                    y_out_ci: (0.0, 0.0),
                }
            })
            .collect()
    };
    // Membership on the published numbers (the ones stored and shown).
    for (a, &i) in analysed.iter_mut().zip(&placed) {
        let m = points[i].metrics.as_ref().expect("placed points have metrics");
        a.y = m.tput_per_gpu.value;
        a.x = x_of(m);
    }
    let curves = pareto::analyse(&analysed);
    for (a, &i) in analysed.iter().zip(&placed) {
        let p = &mut points[i];
        p.frontier = frontier_of(&curves, &p.config_key, &p.point_id);
        if all_records {
            p.p_frontier = Some(a.p_frontier);
            if let Some(m) = p.metrics.as_mut() {
                m.tput_per_gpu.lo = Some(a.y_ci.0);
                m.tput_per_gpu.hi = Some(a.y_ci.1);
                for (v, c) in [
                    (View::E2eNormIntvtyP90, &mut m.e2e_norm_intvty_p90),
                    (View::IntvtyP90, &mut m.intvty_p90),
                    (View::E2elP90, &mut m.e2el_p90),
                    (View::E2elP75, &mut m.e2el_p75),
                ] {
                    if let Some((lo, hi)) = a.x_ci.get(&v) {
                        c.lo = Some(*lo);
                        c.hi = Some(*hi);
                    }
                }
            }
        }
    }
}

/// The last request end of live records (Unix nanoseconds), else the aggregates' modification time.
fn finished_unix(arts: &[ArtifactPoint]) -> i64 {
    // Records on the virtual clock start near zero; live ones carry Unix times (after 2001).
    let live_end = arts.iter().flat_map(|a| a.records.iter().flatten()).map(|r| r.end_ns).filter(|&t| t > 1_000_000_000_000_000_000).max();
    if let Some(t) = live_end {
        return (t / 1_000_000_000) as i64;
    }
    arts.iter()
        .filter_map(|a| std::fs::metadata(&a.agg_path).ok()?.modified().ok())
        .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
        .max()
        .unwrap_or_else(now_unix)
}

/// An aggregate's power keys as InferenceX writes them (`power_valid` 1 and the metrics), where valid.
fn power_of(agg: &Value) -> Option<crate::power::PowerFigures> {
    if agg.get("power_valid").and_then(Value::as_u64) != Some(1) {
        return None;
    }
    let n = |k: &str| agg.get(k).and_then(Value::as_f64);
    Some(crate::power::PowerFigures {
        source: agg.get("power_source").and_then(Value::as_str).unwrap_or("measured").to_string(),
        avg_power_w: n("avg_power_w")?,
        total_gpu_energy_j: n("total_gpu_energy_j")?,
        joules_per_output_token: n("joules_per_output_token")?,
        joules_per_total_token: n("joules_per_total_token")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_aggregate_without_its_identity_is_named_with_the_missing_field() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bmk_x");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("agg.json"), br#"{"request_metrics": {"latency": {}}, "num_gpus": 8}"#).unwrap();
        let found = discover(d.path()).unwrap();
        assert_eq!(found, vec![Found::Artifacts(d.path().to_path_buf(), vec![p.clone()])]);
        let e = read_artifacts(d.path(), std::slice::from_ref(&p), &ImportOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with(&p.join("agg.json").display().to_string()) && e.contains("no `conc`"), "{e}");
        // A folder with nothing to import says what it looked for.
        let empty = tempfile::tempdir().unwrap();
        let e = discover(empty.path()).unwrap_err().to_string();
        assert!(e.contains("no run folder (summary.json) or agentic aggregate"), "{e}");
    }

    #[test]
    fn layouts_follow_point_ids() {
        assert_eq!(layout(&json!({"tp": 8, "ep": 8, "dp_attention": "true"})), "dep8");
        assert_eq!(layout(&json!({"tp": 2, "ep": 2, "dp_attention": false})), "tp2-ep2");
        assert_eq!(layout(&json!({"tp": 4, "ep": 1, "dp_attention": "false", "pp": 2})), "tp4-pp2");
        assert_eq!(layout(&json!({"is_multinode": true})), "multinode");
    }
}
