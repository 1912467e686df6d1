//! Eval folders as they lie on disk: `sweep eval`'s own (`eval.json`) and InferenceX's
//! artifacts (`meta_env.json` beside lm-eval's `results*.json`, batched `_concN` sets), found
//! under a run and read into [`EvalRecord`]s, and the `agg_eval_all.json` rows built from them.
//! The record types and the samples log are in [`super::record`].

use super::record::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The lm-eval results files of a folder (a JSON file holding `lm_eval_version`, or a
/// `results*.json` with `results`), newest first, as `collect_eval_results.py` finds them.
pub fn lm_eval_results(dir: &Path) -> Vec<(PathBuf, Value)> {
    let mut found: Vec<(std::time::SystemTime, PathBuf, Value)> = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !name.ends_with(".json") || name == META_FILE || name == RECORD_FILE || name == AGG_FILE {
            continue;
        }
        let Ok(v) = read_json(&p) else { continue };
        // The collector's mark of an lm-eval file; `validate_scores.py` reads any `results*.json`.
        if v.get("lm_eval_version").is_none() && !(name.starts_with("results") && v.get("results").is_some()) {
            continue;
        }
        let t = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        found.push((t, p, v));
    }
    found.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
    found.into_iter().map(|(_, p, v)| (p, v)).collect()
}

/// The newest lm-eval results file of a folder.
pub fn newest_lm_eval_results(dir: &Path) -> Option<(PathBuf, Value)> {
    lm_eval_results(dir).into_iter().next()
}

/// A batched eval's result file name: `…_conc<N>.json` or `…_conc<N>_<k>.json`.
static CONC_SUFFIX: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"_conc(\d+)(?:_\d+)?\.json$").expect("conc suffix pattern"));

/// A record built from one lm-eval results file (lm-eval finished, so the infrastructure
/// succeeded; `limit` from its config).
fn from_results(path: &Path, v: &Value, meta: Meta) -> Result<EvalRecord, RecordError> {
    let results = v["results"]
        .as_object()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| RecordError::Parse { path: path.to_path_buf(), message: "no `results` object with a task".into() })?;
    let (task, r) = results.iter().next().expect("non-empty");
    let pick = |prefix: &str, needle: &[&str]| {
        r.as_object()
            .into_iter()
            .flatten()
            .find(|(k, _)| k.starts_with(prefix) && needle.iter().any(|n| k.contains(n)))
            .and_then(|(_, x)| x.as_f64())
    };
    let n = v["n-samples"][task]["effective"].as_u64().unwrap_or(0) as usize;
    let n_total = v["n-samples"][task]["original"].as_u64().unwrap_or(n as u64) as usize;
    Ok(EvalRecord {
        task: task.clone(),
        status: EvalStatus::Done,
        reason: None,
        result_kind: "measured".into(),
        model: v["model_name"].as_str().map(str::to_string),
        base_url: v["config"]["model_args"]["base_url"].as_str().map(str::to_string),
        server: None,
        n,
        n_total,
        limit: v["config"]["limit"].as_f64().map(|l| l as usize),
        em_strict: pick("exact_match,", &["strict", "resolved"]),
        em_strict_stderr: pick("exact_match_stderr,", &["strict", "resolved"]),
        em_flexible: pick("exact_match,", &["flex", "extract"]),
        em_flexible_stderr: pick("exact_match_stderr,", &["flex", "extract"]),
        infrastructure_success: true,
        requests_failed: 0,
        concurrency: v["config"]["model_args"]["num_concurrent"].as_u64().unwrap_or(0) as usize,
        max_tokens: v["config"]["gen_kwargs"]["max_tokens"].as_u64().unwrap_or(0),
        max_model_len: v["config"]["model_args"]["max_length"].as_u64().unwrap_or(0),
        data: String::new(),
        started_at: String::new(),
        wall_s: v["total_evaluation_time_seconds"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0.0),
        results_file: path.file_name().map(|n| n.to_string_lossy().into_owned()),
        meta,
        producer: format!("lm-eval {}", v["lm_eval_version"].as_str().unwrap_or("?")),
    })
}

/// A batched eval's concurrency that has no result (failed, not completed, or no file): a
/// record that fails the gate with the reason.
fn missing_conc(dir: &Path, meta: &Meta, conc: u32, reason: String) -> EvalRecord {
    let mut m = meta.clone();
    m.conc = conc;
    EvalRecord {
        task: if m.eval_suite.is_empty() { super::task::TASK.into() } else { m.eval_suite.clone() },
        status: EvalStatus::Failed,
        reason: Some(reason),
        result_kind: "measured".into(),
        model: Some(m.model.clone()).filter(|s| !s.is_empty()),
        base_url: None,
        server: None,
        n: 0,
        n_total: expected_n(&m.eval_suite).unwrap_or(0),
        limit: None,
        em_strict: None,
        em_strict_stderr: None,
        em_flexible: None,
        em_flexible_stderr: None,
        infrastructure_success: false,
        requests_failed: 0,
        concurrency: conc as usize,
        max_tokens: 0,
        max_model_len: 0,
        data: String::new(),
        started_at: String::new(),
        wall_s: 0.0,
        results_file: None,
        meta: m,
        producer: format!("InferenceX batched eval artifacts ({})", dir.display()),
    }
}

/// Batched artifacts (`meta_env.json` with `eval_concs`, one `…_conc<N>.json` per concurrency,
/// as multi-node `all-evals` writes them): one record per requested concurrency, the newest
/// file of each completed one; a failed, uncompleted or missing concurrency is a failed record.
fn batched(dir: &Path, raw: &Value, meta: &Meta) -> Result<Vec<EvalRecord>, RecordError> {
    let list = |k: &str| -> Vec<u32> { raw[k].as_array().into_iter().flatten().filter_map(|c| c.as_u64()).map(|c| c as u32).collect() };
    let mut expected = list("eval_concs");
    expected.sort_unstable();
    expected.dedup();
    let completed = if raw.get("completed_eval_concs").is_some() { list("completed_eval_concs") } else { expected.clone() };
    let failed = list("failed_eval_concs");
    let files = lm_eval_results(dir);
    let mut out = Vec::new();
    for conc in expected {
        if failed.contains(&conc) {
            out.push(missing_conc(dir, meta, conc, format!("batched eval failed for concurrency {conc} (failed_eval_concs)")));
            continue;
        }
        if !completed.contains(&conc) {
            out.push(missing_conc(dir, meta, conc, format!("batched eval did not complete concurrency {conc}")));
            continue;
        }
        let file = files.iter().find(|(p, _)| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            CONC_SUFFIX.captures(&name).and_then(|c| c[1].parse::<u32>().ok()) == Some(conc)
        });
        match file {
            Some((p, v)) => {
                let mut m = meta.clone();
                m.conc = conc;
                out.push(from_results(p, v, m)?);
            }
            None => out.push(missing_conc(dir, meta, conc, format!("batched eval has no result file for concurrency {conc}"))),
        }
    }
    Ok(out)
}

/// Every eval in `dir`: its `eval.json`; else its InferenceX artifacts, one record per
/// concurrency of a batched eval.
pub fn read_eval_records(dir: &Path) -> Result<Vec<EvalRecord>, RecordError> {
    let rec = dir.join(RECORD_FILE);
    if rec.is_file() {
        let v = read_json(&rec)?;
        return Ok(vec![serde_json::from_value(v).map_err(|e| RecordError::Parse { path: rec, message: e.to_string() })?]);
    }
    let meta_path = dir.join(META_FILE);
    let (raw, meta) = if meta_path.is_file() {
        let raw = read_json(&meta_path)?;
        let meta: Meta = serde_json::from_value(raw.clone()).map_err(|e| RecordError::Parse { path: meta_path, message: e.to_string() })?;
        (raw, meta)
    } else {
        (Value::Null, Meta::default())
    };
    if raw.get("eval_concs").is_some_and(Value::is_array) {
        return batched(dir, &raw, &meta);
    }
    let (path, v) = newest_lm_eval_results(dir).ok_or_else(|| RecordError::Missing { dir: dir.to_path_buf() })?;
    Ok(vec![from_results(&path, &v, meta)?])
}

/// The eval in `dir` (the first of a batched folder's): see [`read_eval_records`].
pub fn read_eval_dir(dir: &Path) -> Result<EvalRecord, RecordError> {
    read_eval_records(dir)?.into_iter().next().ok_or_else(|| RecordError::Missing { dir: dir.to_path_buf() })
}

/// Whether `dir` holds an eval: `eval.json`, InferenceX's `meta_env.json`, or lm-eval
/// `results*.json` files.
pub fn is_eval_dir(dir: &Path) -> bool {
    if dir.join(RECORD_FILE).is_file() || dir.join(META_FILE).is_file() {
        return true;
    }
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.starts_with("results") && n.ends_with(".json") && e.path().is_file()
    })
}

/// Eval folders at `root` and up to two levels below it (a run's `evals/<row>/`, a point's
/// folder, downloaded artifacts), sorted.
pub fn find_eval_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut level = vec![root.to_path_buf()];
    for depth in 0..3 {
        let mut next = Vec::new();
        for d in level {
            if is_eval_dir(&d) {
                out.push(d.clone());
            }
            if depth < 2
                && let Ok(rd) = std::fs::read_dir(&d)
            {
                next.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
        }
        level = next;
    }
    out.sort();
    out
}

/// The rows `collect_eval_results.py` writes to `agg_eval_<name>.json` for every eval folder at
/// or under `root` (see [`EvalRecord::agg_row`]), single-node rows first, each group in its sort
/// order; folders that cannot be read are left out.
pub fn agg_rows(root: &Path) -> Vec<Value> {
    let mut rows: Vec<Value> = find_eval_dirs(root)
        .into_iter()
        .flat_map(|d| {
            let recs = read_eval_records(&d).unwrap_or_default();
            recs.into_iter()
                .map(|rec| {
                    let source = match &rec.results_file {
                        Some(f) => d.join(f),
                        None => d.join(RECORD_FILE),
                    };
                    rec.agg_row(&source.display().to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let key = |r: &Value| {
        let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
        let n = |k: &str| r[k].as_i64().unwrap_or(0);
        let multi = r["is_multinode"].as_bool().unwrap_or(false);
        let topo = if multi {
            vec![
                n("prefill_tp"),
                n("prefill_ep"),
                n("prefill_num_workers"),
                n("decode_tp"),
                n("decode_ep"),
                n("decode_num_workers"),
                n("conc"),
            ]
        } else {
            vec![n("tp"), n("ep"), n("conc")]
        };
        (multi, s("model_prefix"), s("hw"), s("framework"), s("precision"), s("spec_decoding"), n("isl"), n("osl"), topo)
    };
    rows.sort_by_key(|a| key(a));
    rows
}
