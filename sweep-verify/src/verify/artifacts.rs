//! `--run DIR`: a sweep run directory (`summary.json`, `plan.json`, `gate.json`, each point's
//! `agg.json`) and eval results in InferenceX's shapes anywhere under it: lm-eval
//! `results*.json` beside a `meta_env.json` (as `run_lm_eval.sh` leaves them, batched `_concN`
//! files included) and `agg_eval_all.json` rows (as `collect_eval_results.py` writes them). A
//! folder of downloaded InferenceX artifacts works too (`agg_bmk.json` / `agg_*.json` rows carry
//! the throughput image).

use crate::results::{RunSummary, Status};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One throughput point of the run as its aggregate records it.
#[derive(Clone, Debug)]
pub struct ThroughputPoint {
    pub id: String,
    pub file: PathBuf,
    pub config_key: Option<String>,
    pub model_prefix: Option<String>,
    pub image: Option<String>,
    pub result_kind: Option<String>,
    /// Whether the engine's own metrics were captured (`server_metrics.present`).
    pub server_metrics: Option<bool>,
    /// Whether the aggregate carries its headline metric (`tput_per_gpu`, a number).
    pub has_tput: bool,
}

/// One eval row (task × eval point).
#[derive(Clone, Debug, Default)]
pub struct EvalRow {
    pub source: PathBuf,
    pub task: String,
    pub model_prefix: Option<String>,
    pub hw: Option<String>,
    pub conc: Option<u64>,
    pub tp: Option<u64>,
    pub ep: Option<u64>,
    pub dp_attention: Option<String>,
    pub em_strict: Option<f64>,
    pub em_flexible: Option<f64>,
    pub n_eff: Option<u64>,
    /// The task's full size (lm-eval `n-samples.original`) when the results say it.
    pub n_total: Option<u64>,
    pub infrastructure_success: Option<bool>,
    pub not_applicable: Option<String>,
    pub image: Option<String>,
}

pub struct RunArtifacts {
    pub dir: PathBuf,
    pub summary: Option<RunSummary>,
    /// `plan.json`'s `head_ref`: the commit the run was planned from.
    pub head_ref: Option<String>,
    pub gate_passed: Option<bool>,
    pub points: Vec<ThroughputPoint>,
    pub evals: Vec<EvalRow>,
}

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("--run {}: not a directory; pass a sweep run directory or a folder of downloaded eval/benchmark artifacts", .0.display())]
    NotADir(PathBuf),
    #[error("{}: {msg}", .file.display())]
    Bad { file: PathBuf, msg: String },
    /// A run directory whose `summary.json` (`file`) does not load.
    #[error("{}: {source}", .file.display())]
    Summary {
        file: PathBuf,
        #[source]
        source: crate::results::SummaryError,
    },
}

fn read_json(p: &Path) -> Result<Option<Value>, ArtifactError> {
    match std::fs::read_to_string(p) {
        Ok(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| ArtifactError::Bad { file: p.to_path_buf(), msg: format!("not JSON: {e} (re-download or regenerate it)") }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ArtifactError::Bad { file: p.to_path_buf(), msg: e.to_string() }),
    }
}

/// Files under `dir` (depth-limited: a run directory is shallow; records are not read).
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if depth > 0 {
                walk(&p, depth - 1, out);
            }
        } else {
            out.push(p);
        }
    }
}

fn s(v: &Value, k: &str) -> Option<String> {
    match v.get(k)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        x => Some(x.to_string()),
    }
}

fn u(v: &Value, k: &str) -> Option<u64> {
    let x = v.get(k)?;
    x.as_u64().or_else(|| x.as_str().and_then(|s| s.parse().ok())).or_else(|| x.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

fn b(v: &Value, k: &str) -> Option<bool> {
    let x = v.get(k)?;
    x.as_bool().or_else(|| x.as_str().map(|s| s.eq_ignore_ascii_case("true")))
}

impl RunArtifacts {
    pub fn load(dir: &Path) -> Result<RunArtifacts, ArtifactError> {
        if !dir.is_dir() {
            return Err(ArtifactError::NotADir(dir.to_path_buf()));
        }
        let summary = if dir.join("summary.json").is_file() {
            Some(RunSummary::load(dir).map_err(|source| ArtifactError::Summary { file: dir.join("summary.json"), source })?)
        } else {
            None
        };
        let head_ref = read_json(&dir.join("plan.json"))?.and_then(|p| s(&p, "head_ref"));
        let gate_passed = read_json(&dir.join("gate.json"))?.and_then(|g| g.get("passed").and_then(Value::as_bool));
        let mut files = Vec::new();
        walk(dir, 6, &mut files);
        let mut points = Vec::new();
        let mut evals = Vec::new();
        let mut seen_sources: BTreeSet<PathBuf> = BTreeSet::new();
        let meta_dirs: Vec<PathBuf> = files
            .iter()
            .filter(|f| f.file_name().is_some_and(|n| n == "meta_env.json"))
            .filter_map(|f| f.parent().map(Path::to_path_buf))
            .collect();
        for d in &meta_dirs {
            let mut set = eval_set(d)?;
            if set.is_empty() {
                // `sweep eval` writes no lm-eval results where it asked nothing (not applicable,
                // or a server that never answered): its own record says why.
                set.extend(sweep_eval_record(d)?);
            }
            for r in set {
                seen_sources.insert(r.source.clone());
                evals.push(r);
            }
        }
        for f in &files {
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name == "agg_eval_all.json" {
                for r in agg_eval_rows(f)? {
                    if !seen_sources.contains(&r.source) {
                        evals.push(r);
                    }
                }
            } else if name == "agg.json" {
                // A sweep point's aggregate: `<run>/<config>/<arm>-c<conc>/agg.json`.
                let Some(v) = read_json(f)? else { continue };
                let id = f.parent().and_then(|p| p.strip_prefix(dir).ok()).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
                if id.starts_with("eval") || id.contains("/twin") {
                    continue;
                }
                points.push(ThroughputPoint {
                    config_key: summary.as_ref().and_then(|s| s.point(&id)).map(|p| p.config_key.clone()),
                    model_prefix: s(&v, "infmax_model_prefix"),
                    image: s(&v, "image"),
                    result_kind: s(&v, "result_kind"),
                    server_metrics: v.get("server_metrics").and_then(|m| m.get("present")).and_then(Value::as_bool),
                    has_tput: v.get("tput_per_gpu").and_then(Value::as_f64).is_some_and(f64::is_finite),
                    file: f.clone(),
                    id,
                });
            } else if name.starts_with("agg_") && name.ends_with(".json") {
                // InferenceX benchmark aggregates: an array of rows (`agg_bmk.json`) or one row.
                let Some(v) = read_json(f)? else { continue };
                let rows: Vec<Value> = match v {
                    Value::Array(a) => a,
                    o @ Value::Object(_) => vec![o],
                    _ => Vec::new(),
                };
                for (i, r) in rows.iter().enumerate().filter(|(_, r)| r.get("tput_per_gpu").is_some()) {
                    points.push(ThroughputPoint {
                        id: format!("{}[{i}]", f.strip_prefix(dir).unwrap_or(f).display()),
                        file: f.clone(),
                        config_key: None,
                        model_prefix: s(r, "infmax_model_prefix"),
                        image: s(r, "image"),
                        result_kind: s(r, "result_kind").or(Some("measured".into())),
                        server_metrics: None,
                        has_tput: r.get("tput_per_gpu").and_then(Value::as_f64).is_some_and(f64::is_finite),
                    });
                }
            }
        }
        // Tasks together, lower concurrency first (the order a reviewer reads them in).
        evals.sort_by(|a, b| (&a.task, a.conc, &a.source).cmp(&(&b.task, b.conc, &b.source)));
        Ok(RunArtifacts { dir: dir.to_path_buf(), summary, head_ref, gate_passed, points, evals })
    }

    /// Throughput points of the summary that did not finish with a valid aggregate.
    pub fn unfinished(&self) -> Vec<String> {
        let Some(s) = &self.summary else { return Vec::new() };
        s.points
            .iter()
            .filter(|p| !p.id.starts_with("eval:"))
            .filter(|p| !(matches!(p.status, Status::Done) && p.summary.as_ref().is_some_and(|x| x.valid)))
            .map(|p| p.id.clone())
            .collect()
    }
}

/// `agg_eval_all.json`: rows as `collect_eval_results.py` builds them (plus `image`,
/// `infrastructure_success`, `not_applicable`, `n_total` when the writer records them).
fn agg_eval_rows(f: &Path) -> Result<Vec<EvalRow>, ArtifactError> {
    let Some(v) = read_json(f)? else { return Ok(Vec::new()) };
    let Value::Array(rows) = v else {
        return Err(ArtifactError::Bad { file: f.to_path_buf(), msg: "expected an array of eval rows".into() });
    };
    Ok(rows
        .iter()
        .map(|r| EvalRow {
            source: s(r, "source").map(PathBuf::from).unwrap_or_else(|| f.to_path_buf()),
            task: s(r, "task").unwrap_or_else(|| "unknown".into()),
            model_prefix: s(r, "model_prefix").or_else(|| s(r, "infmax_model_prefix")),
            hw: s(r, "hw"),
            conc: u(r, "conc"),
            tp: u(r, "tp"),
            ep: u(r, "ep"),
            dp_attention: s(r, "dp_attention"),
            em_strict: r.get("em_strict").and_then(Value::as_f64),
            em_flexible: r.get("em_flexible").and_then(Value::as_f64),
            n_eff: u(r, "n_eff"),
            n_total: u(r, "n_total"),
            infrastructure_success: b(r, "infrastructure_success"),
            not_applicable: s(r, "not_applicable"),
            image: s(r, "image"),
        })
        .collect())
}

/// `eval.json` as `sweep eval` writes it, for a set without lm-eval results.
fn sweep_eval_record(d: &Path) -> Result<Option<EvalRow>, ArtifactError> {
    let f = d.join("eval.json");
    let Some(v) = read_json(&f)? else { return Ok(None) };
    let Some(task) = s(&v, "task") else { return Ok(None) };
    let meta = read_json(&d.join("meta_env.json"))?.unwrap_or(Value::Null);
    let na = (s(&v, "status").as_deref() == Some("not_applicable")).then(|| s(&v, "reason").unwrap_or_else(|| "not applicable".into()));
    Ok(Some(EvalRow {
        source: f,
        task,
        model_prefix: s(&meta, "infmax_model_prefix").filter(|x| x != "unknown"),
        hw: s(&meta, "hw"),
        conc: u(&v, "concurrency").or_else(|| u(&meta, "conc")),
        tp: u(&meta, "tp"),
        ep: u(&meta, "ep"),
        dp_attention: s(&meta, "dp_attention"),
        em_strict: v.get("em_strict").and_then(Value::as_f64),
        em_flexible: v.get("em_flexible").and_then(Value::as_f64),
        n_eff: u(&v, "n"),
        n_total: u(&v, "n_total"),
        infrastructure_success: b(&v, "infrastructure_success"),
        not_applicable: na,
        image: s(&v, "image").or_else(|| s(&meta, "image")),
    }))
}

/// The `_concN` suffix of a batched result file.
fn conc_suffix(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".json")?;
    let i = stem.rfind("_conc")?;
    let digits: String = stem[i + 5..].chars().take_while(char::is_ascii_digit).collect();
    let rest = &stem[i + 5 + digits.len()..];
    (!digits.is_empty() && (rest.is_empty() || (rest.starts_with('_') && rest[1..].chars().all(|c| c.is_ascii_digit()))))
        .then(|| digits.parse().ok())
        .flatten()
}

/// An lm-eval results file of an eval set, with its modification time.
type Candidate = (PathBuf, Value, SystemTime);

/// The lm-eval results files of an eval set (`meta_env.json` aside), with their modification times.
fn result_files(d: &Path) -> Result<Vec<Candidate>, ArtifactError> {
    let mut cands = Vec::new();
    for e in std::fs::read_dir(d).map_err(|e| ArtifactError::Bad { file: d.to_path_buf(), msg: e.to_string() })?.flatten() {
        let p = e.path();
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !name.ends_with(".json") || name == "meta_env.json" || !p.is_file() {
            continue;
        }
        let Ok(Some(v)) = read_json(&p) else { continue };
        if v.get("lm_eval_version").is_none() {
            continue;
        }
        let mtime = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        cands.push((p, v, mtime));
    }
    Ok(cands)
}

/// The newest result per completed concurrency of a batched set (`_concN` files), else the
/// newest result: each with its concurrency when batched.
fn newest_results(cands: Vec<Candidate>, batched: bool, completed: Option<&BTreeSet<u64>>) -> Vec<(PathBuf, Value, Option<u64>)> {
    if !batched {
        return cands.into_iter().max_by_key(|(_, _, t)| *t).map(|(p, v, _)| vec![(p, v, None)]).unwrap_or_default();
    }
    let mut by_conc: BTreeMap<u64, Candidate> = BTreeMap::new();
    for (p, v, t) in cands {
        let Some(c) = conc_suffix(&p.file_name().unwrap_or_default().to_string_lossy()) else { continue };
        if completed.is_some_and(|set| !set.contains(&c)) {
            continue;
        }
        if by_conc.get(&c).is_none_or(|(_, _, t0)| t > *t0) {
            by_conc.insert(c, (p, v, t));
        }
    }
    by_conc.into_iter().map(|(c, (p, v, _))| (p, v, Some(c))).collect()
}

/// A task's strict and flexible exact-match scores: the task's first metric under its filters
/// (strict or resolved; flexible or extract), or the bare metric (else `acc`) without filters.
fn em_scores(cfg: Option<&Value>, res: &Value) -> (Option<f64>, Option<f64>) {
    let base = cfg
        .and_then(|c| c.get("metric_list"))
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .and_then(|m| m.get("metric"))
        .and_then(Value::as_str)
        .unwrap_or("exact_match");
    let filters: Vec<String> = cfg
        .and_then(|c| c.get("filter_list"))
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string)).collect())
        .unwrap_or_else(|| {
            // Without the task config, the filters are the metric keys' suffixes.
            res.as_object().into_iter().flatten().filter_map(|(k, _)| k.strip_prefix(&format!("{base},")).map(str::to_string)).collect()
        });
    let val = |f: &str| res.get(format!("{base},{f}")).and_then(Value::as_f64);
    let (mut strict, mut flex) = (None, None);
    for f in &filters {
        if f.contains("strict") || f.contains("resolved") {
            strict = val(f);
        } else if f.contains("flex") || f.contains("extract") {
            flex = val(f);
        }
    }
    if filters.is_empty() {
        strict = res.get(base).and_then(Value::as_f64).or_else(|| res.get("acc").and_then(Value::as_f64));
    }
    (strict, flex)
}

/// One eval set (a folder with `meta_env.json`): its newest lm-eval result, or the newest per
/// completed concurrency of a batched set, one row per task.
fn eval_set(d: &Path) -> Result<Vec<EvalRow>, ArtifactError> {
    let meta = read_json(&d.join("meta_env.json"))?.unwrap_or(Value::Null);
    let batched = meta.get("eval_concs").is_some_and(Value::is_array);
    let completed: Option<BTreeSet<u64>> =
        meta.get("completed_eval_concs").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_u64).collect());
    let chosen = newest_results(result_files(d)?, batched, completed.as_ref());
    let mut out = Vec::new();
    for (p, v, conc) in chosen {
        for (task, res) in v.get("results").and_then(Value::as_object).into_iter().flatten() {
            let (strict, flex) = em_scores(v.get("configs").and_then(|c| c.get(task)), res);
            let n = v.get("n-samples").and_then(|n| n.get(task));
            let pick = |k: &str| v.get(k).or_else(|| meta.get(k));
            out.push(EvalRow {
                source: p.clone(),
                task: task.clone(),
                model_prefix: s(&meta, "infmax_model_prefix").filter(|x| x != "unknown"),
                hw: s(&meta, "hw"),
                conc: conc.or_else(|| u(&meta, "conc")),
                tp: u(&meta, "tp"),
                ep: u(&meta, "ep"),
                dp_attention: s(&meta, "dp_attention"),
                em_strict: strict,
                em_flexible: flex,
                n_eff: n.and_then(|n| u(n, "effective")),
                n_total: n.and_then(|n| u(n, "original")),
                infrastructure_success: pick("infrastructure_success")
                    .and_then(|x| x.as_bool().or_else(|| x.as_str().map(|s| s == "true"))),
                not_applicable: pick("not_applicable").and_then(|x| x.as_str().map(str::to_string)),
                image: pick("image").and_then(|x| x.as_str().map(str::to_string)),
            });
        }
        // A results file that says it is not applicable may carry no task results at all.
        if out.iter().all(|r| r.source != p)
            && let Some(na) = v.get("not_applicable").or_else(|| meta.get("not_applicable")).and_then(Value::as_str)
        {
            out.push(EvalRow {
                source: p.clone(),
                task: "gsm8k".into(),
                model_prefix: s(&meta, "infmax_model_prefix"),
                conc,
                not_applicable: Some(na.to_string()),
                image: s(&v, "image").or_else(|| s(&meta, "image")),
                ..Default::default()
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_suffixes() {
        assert_eq!(conc_suffix("results_2026_conc32.json"), Some(32));
        assert_eq!(conc_suffix("results_conc160_1.json"), Some(160));
        assert_eq!(conc_suffix("results_2026.json"), None);
        assert_eq!(conc_suffix("results_concx.json"), None);
    }
}
