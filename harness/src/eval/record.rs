//! An eval's results on disk, the read side: what `sweep eval` writes into its folder and
//! InferenceX's artifacts, read back for the gate, reports and the verifier. Executes nothing.
//!
//! A folder holds `eval.json` ([`EvalRecord`]: status, scores, n, `infrastructure_success`),
//! `meta_env.json` ([`Meta`], as InferenceX's `_write_lm_eval_meta_json` writes it),
//! `results_<timestamp>.json` (lm-eval's shape, only for a run that finished), `agg_eval.json`
//! (the row `collect_eval_results.py` builds) and the per-sample log `samples.jsonl`.
//! [`read_eval_dir`] also reads a folder of InferenceX eval artifacts (`meta_env.json` and an
//! lm-eval `results*.json`) that has no `eval.json`.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub const RECORD_FILE: &str = "eval.json";
pub const META_FILE: &str = "meta_env.json";
pub const SAMPLES_FILE: &str = "samples.jsonl";
pub const AGG_FILE: &str = "agg_eval.json";

/// What became of an eval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalStatus {
    /// Every selected question was answered and scored.
    Done,
    /// The target cannot take the eval (the reference engine answers no math): no score exists.
    NotApplicable,
    /// Stopped by the user; the samples so far are kept and a re-run resumes.
    Interrupted,
    /// Requests failed past their retries (`infrastructure_success: false`).
    Failed,
}

fn str_or_num<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        v => v.to_string(),
    })
}

fn bool_or_str<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Bool(b) => b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        _ => false,
    })
}

fn u32_or_str<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_u64().and_then(|x| u32::try_from(x).ok()).unwrap_or(1),
        Value::String(s) => s.trim().parse().unwrap_or(1),
        _ => 1,
    })
}

/// `meta_env.json`: the identity InferenceX keys eval rows on, field for field as
/// `_write_lm_eval_meta_json` writes it (single eval, no batched concurrencies).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Meta {
    #[serde(deserialize_with = "bool_or_str")]
    pub is_multinode: bool,
    pub framework: String,
    pub precision: String,
    pub spec_decoding: String,
    pub eval_suite: String,
    pub recipe_fingerprint: String,
    #[serde(deserialize_with = "u32_or_str")]
    pub tp: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub pp: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub dcp_size: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub pcp_size: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub conc: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub ep: u32,
    #[serde(deserialize_with = "bool_or_str")]
    pub dp_attention: bool,
    #[serde(deserialize_with = "u32_or_str")]
    pub prefill_tp: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub prefill_pp: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub prefill_dcp_size: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub prefill_pcp_size: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub prefill_ep: u32,
    #[serde(deserialize_with = "bool_or_str")]
    pub prefill_dp_attention: bool,
    #[serde(deserialize_with = "u32_or_str")]
    pub prefill_num_workers: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub decode_tp: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub decode_pp: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub decode_dcp_size: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub decode_pcp_size: u32,
    #[serde(deserialize_with = "u32_or_str")]
    pub decode_ep: u32,
    #[serde(deserialize_with = "bool_or_str")]
    pub decode_dp_attention: bool,
    #[serde(deserialize_with = "u32_or_str")]
    pub decode_num_workers: u32,
    pub model: String,
    pub infmax_model_prefix: String,
    pub hw: String,
    /// Strings, as the shell writes them (`"isl": "8192"`).
    #[serde(deserialize_with = "str_or_num")]
    pub isl: String,
    #[serde(deserialize_with = "str_or_num")]
    pub osl: String,
}

impl Default for Meta {
    fn default() -> Self {
        Meta {
            is_multinode: false,
            framework: "unknown".into(),
            precision: "unknown".into(),
            spec_decoding: String::new(),
            eval_suite: "gsm8k".into(),
            recipe_fingerprint: String::new(),
            tp: 1,
            pp: 1,
            dcp_size: 1,
            pcp_size: 1,
            conc: 1,
            ep: 1,
            dp_attention: false,
            prefill_tp: 1,
            prefill_pp: 1,
            prefill_dcp_size: 1,
            prefill_pcp_size: 1,
            prefill_ep: 1,
            prefill_dp_attention: false,
            prefill_num_workers: 1,
            decode_tp: 1,
            decode_pp: 1,
            decode_dcp_size: 1,
            decode_pcp_size: 1,
            decode_ep: 1,
            decode_dp_attention: false,
            decode_num_workers: 1,
            model: String::new(),
            infmax_model_prefix: "unknown".into(),
            hw: "unknown".into(),
            isl: "0".into(),
            osl: "0".into(),
        }
    }
}

impl Meta {
    /// The model prefix thresholds are looked up by, unless unknown.
    pub fn model_prefix(&self) -> Option<&str> {
        Some(self.infmax_model_prefix.as_str()).filter(|p| !p.is_empty() && *p != "unknown")
    }

    /// The row as people name it: `dsv4 B200 sglang fp8 TP8 EP1 DPA C64` (only what is known).
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.model_prefix() {
            parts.push(p.to_string());
        }
        for (v, f) in [
            (&self.hw, str::to_uppercase as fn(&str) -> String),
            (&self.framework, str::to_lowercase),
            (&self.precision, str::to_lowercase),
        ] {
            if v != "unknown" && !v.is_empty() {
                parts.push(f(v));
            }
        }
        if self.is_multinode {
            parts.push(format!(
                "P TP{} EP{} ×{} / D TP{} EP{} ×{}",
                self.prefill_tp, self.prefill_ep, self.prefill_num_workers, self.decode_tp, self.decode_ep, self.decode_num_workers
            ));
        } else {
            parts.push(format!("TP{} EP{}", self.tp, self.ep));
        }
        if self.dp_attention {
            parts.push("DPA".into());
        }
        parts.push(format!("C{}", self.conc));
        parts.join(" ")
    }
}

/// `eval.json`: one eval's outcome. Scores are present only for what was measured: a
/// not-applicable eval has none, and is never presented as a score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    pub task: String,
    pub status: EvalStatus,
    /// Why it is not applicable, failed or stopped (`simulated engine`, the last request error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `measured` (answers of a real server), or `not_applicable`.
    pub result_kind: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    /// What the server says it is (`/server_info`: version, engine, image when known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<Value>,
    /// Questions scored (lm-eval's `n-samples.effective`).
    pub n: usize,
    /// Questions in the test split (`n-samples.original`).
    pub n_total: usize,
    /// `--limit`: a smoke run of the first N questions, never a full-n result.
    #[serde(default)]
    pub limit: Option<usize>,
    #[serde(default)]
    pub em_strict: Option<f64>,
    #[serde(default)]
    pub em_strict_stderr: Option<f64>,
    #[serde(default)]
    pub em_flexible: Option<f64>,
    #[serde(default)]
    pub em_flexible_stderr: Option<f64>,
    /// Every request got an answer (none failed past its retries) and the results were written.
    pub infrastructure_success: bool,
    #[serde(default)]
    pub requests_failed: usize,
    #[serde(default)]
    pub concurrency: usize,
    #[serde(default)]
    pub max_tokens: u64,
    #[serde(default)]
    pub max_model_len: u64,
    /// Where the questions came from (`embedded` or a folder).
    #[serde(default)]
    pub data: String,
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub wall_s: f64,
    /// The lm-eval-shaped results file, when the run finished.
    #[serde(default)]
    pub results_file: Option<String>,
    pub meta: Meta,
    /// What wrote it (`sweep 0.1.0`, or `lm-eval 0.4.x` for InferenceX artifacts).
    #[serde(default)]
    pub producer: String,
}

impl EvalRecord {
    /// A full-n result: not limited, and every question of the test split scored.
    pub fn full_n(&self) -> bool {
        self.limit.is_none() && self.n >= self.n_total && self.n_total >= expected_n(&self.task).unwrap_or(0)
    }

    /// `not_applicable: simulated engine`-style status text.
    pub fn status_text(&self) -> String {
        let s = match self.status {
            EvalStatus::Done => "done",
            EvalStatus::NotApplicable => "not_applicable",
            EvalStatus::Interrupted => "interrupted",
            EvalStatus::Failed => "failed",
        };
        match &self.reason {
            Some(r) => format!("{s}: {r}"),
            None => s.to_string(),
        }
    }

    /// The row `collect_eval_results.py` builds for this eval (`build_row`), plus its
    /// `status` and `infrastructure_success`.
    pub fn agg_row(&self, source: &str) -> Value {
        let m = &self.meta;
        let dp = |b: bool| Value::from(b.to_string());
        let dp_attention = if m.is_multinode && m.prefill_dp_attention != m.decode_dp_attention {
            format!("prefill={},decode={}", m.prefill_dp_attention, m.decode_dp_attention)
        } else if m.is_multinode {
            m.prefill_dp_attention.to_string()
        } else {
            m.dp_attention.to_string()
        };
        let int = |s: &str| s.trim().parse::<i64>().unwrap_or(0);
        let (score, score_name, score_se) = match self.em_strict {
            Some(s) => (Value::from(s), Value::from("em_strict"), self.em_strict_stderr.map(Value::from).unwrap_or(Value::Null)),
            None => (Value::Null, Value::Null, Value::Null),
        };
        serde_json::json!({
            "is_multinode": m.is_multinode,
            "model_prefix": m.infmax_model_prefix,
            "model": self.model.clone().unwrap_or_else(|| m.model.clone()),
            "hw": m.hw.to_uppercase(),
            "framework": m.framework.to_lowercase(),
            "precision": m.precision.to_lowercase(),
            "spec_decoding": m.spec_decoding,
            "isl": int(&m.isl),
            "osl": int(&m.osl),
            "tp": m.tp,
            "ep": m.ep,
            "prefill_tp": m.prefill_tp,
            "prefill_ep": m.prefill_ep,
            "prefill_num_workers": m.prefill_num_workers,
            "decode_tp": m.decode_tp,
            "decode_ep": m.decode_ep,
            "decode_num_workers": m.decode_num_workers,
            "conc": m.conc,
            "dp_attention": dp_attention,
            "prefill_dp_attention": dp(if m.is_multinode { m.prefill_dp_attention } else { m.dp_attention }),
            "decode_dp_attention": dp(if m.is_multinode { m.decode_dp_attention } else { m.dp_attention }),
            "task": self.task,
            "em_strict": self.em_strict,
            "em_strict_se": self.em_strict_stderr,
            "em_flexible": self.em_flexible,
            "em_flexible_se": self.em_flexible_stderr,
            "n_eff": if self.status == EvalStatus::NotApplicable { Value::Null } else { Value::from(self.n) },
            "source": source,
            "score": score,
            "score_name": score_name,
            "score_se": score_se,
            "status": self.status_text(),
            "infrastructure_success": self.infrastructure_success,
            "limit": self.limit,
        })
    }
}

/// The size of a task's full test split, when known (a gsm8k result below it is partial).
pub fn expected_n(task: &str) -> Option<usize> {
    (task == super::task::TASK).then_some(super::data::TEST_ROWS)
}

/// Both filters' values of one sample (lm-eval's filter names as keys).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FilterPair<T> {
    #[serde(rename = "strict-match")]
    pub strict: T,
    #[serde(rename = "flexible-extract")]
    pub flexible: T,
}

/// One line of `samples.jsonl`: a question's answer and its scores, or the error it ended with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub doc_id: usize,
    /// lm-eval's hashes of the sample: the prompt (its chat turns), the doc and the target.
    pub prompt_hash: String,
    pub doc_hash: String,
    pub target_hash: String,
    /// The gold answer (what follows `#### `).
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The server's `content` was empty and its `reasoning_content` was scored instead (as
    /// InferenceX's lm-eval patch does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_reasoning: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filtered_resps: Option<FilterPair<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<FilterPair<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Why no answer came (the last attempt's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub attempts: u32,
    pub latency_s: f64,
}

impl Sample {
    /// The scores of an answered sample.
    pub fn scored(&self) -> Option<super::score::Scored> {
        let (f, e) = (self.filtered_resps.as_ref()?, self.exact_match.as_ref()?);
        Some(super::score::Scored {
            strict: f.strict.clone(),
            flexible: f.flexible.clone(),
            strict_match: e.strict,
            flexible_match: e.flexible,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not an eval record: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{dir}: no eval results (neither eval.json nor an lm-eval results*.json with meta_env.json)")]
    Missing { dir: PathBuf },
}

fn read_json(path: &Path) -> Result<Value, RecordError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
    serde_json::from_str(&text)
        .map_err(|e| RecordError::Parse { path: path.to_path_buf(), message: crate::problem::excerpt(&e.to_string()) })
}

/// The samples in a `samples.jsonl` and the length of its whole lines: a last line cut short
/// (the process was killed while writing it) is left out, and appending resumes at that length.
pub fn read_samples(path: &Path) -> Result<(Vec<Sample>, u64), RecordError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(source) => return Err(RecordError::Io { path: path.to_path_buf(), source }),
    };
    let mut out = Vec::new();
    let mut good = 0usize;
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < bytes.len() {
        line_no += 1;
        let Some(end) = bytes[start..].iter().position(|b| *b == b'\n').map(|i| start + i) else { break };
        let line = &bytes[start..end];
        if !line.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice::<Sample>(line) {
                Ok(s) => out.push(s),
                Err(e) => {
                    return Err(RecordError::Parse {
                        path: path.to_path_buf(),
                        message: format!(
                            "line {line_no}: {}; it is not a sample of `sweep eval` (move the file away to start over)",
                            crate::problem::excerpt(&e.to_string())
                        ),
                    });
                }
            }
        }
        start = end + 1;
        good = start;
    }
    Ok((out, good as u64))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_reads_what_the_shell_writes() {
        let m: Meta = serde_json::from_str(
            r#"{"is_multinode": false, "framework": "sglang", "precision": "fp8", "tp": 8, "conc": 64, "ep": "1",
                "dp_attention": "true", "model": "m", "infmax_model_prefix": "dsv4", "hw": "b200", "isl": "8192", "osl": 1024}"#,
        )
        .unwrap();
        assert_eq!((m.tp, m.ep, m.dp_attention, m.isl.as_str(), m.osl.as_str()), (8, 1, true, "8192", "1024"));
        assert_eq!(m.label(), "dsv4 B200 sglang fp8 TP8 EP1 DPA C64");
        assert_eq!(Meta::default().model_prefix(), None);
    }

    #[test]
    fn rows_are_collect_eval_results_rows_in_its_order() {
        let d = tempfile::tempdir().unwrap();
        for (dir, tp, conc, strict) in [("b", 8, 64, 0.97), ("a", 8, 16, 0.96), ("c", 4, 256, 0.95)] {
            let p = d.path().join(dir);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join(META_FILE), format!(r#"{{"infmax_model_prefix": "dsv4", "hw": "b200", "framework": "SGLang", "precision": "FP8", "tp": {tp}, "conc": {conc}}}"#)).unwrap();
            std::fs::write(
                p.join("results_x.json"),
                format!(r#"{{"lm_eval_version": "0.4.9", "results": {{"gsm8k": {{"exact_match,strict-match": {strict}, "exact_match,flexible-extract": 0.9}}}}, "n-samples": {{"gsm8k": {{"original": 1319, "effective": 1319}}}}}}"#),
            )
            .unwrap();
        }
        let rows = agg_rows(d.path());
        let got: Vec<(i64, i64, f64)> =
            rows.iter().map(|r| (r["tp"].as_i64().unwrap(), r["conc"].as_i64().unwrap(), r["score"].as_f64().unwrap())).collect();
        assert_eq!(got, [(4, 256, 0.95), (8, 16, 0.96), (8, 64, 0.97)]);
        let r = &rows[0];
        assert_eq!((r["hw"].as_str(), r["framework"].as_str(), r["precision"].as_str()), (Some("B200"), Some("sglang"), Some("fp8")));
        assert_eq!((r["score_name"].as_str(), r["n_eff"].as_u64(), r["em_flexible"].as_f64()), (Some("em_strict"), Some(1319), Some(0.9)));
        assert!(r["source"].as_str().unwrap().ends_with("results_x.json"));
    }

    #[test]
    fn batched_artifacts_give_one_record_per_concurrency() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join(META_FILE),
            r#"{"is_multinode": true, "infmax_model_prefix": "dsv4", "conc": 8, "eval_concs": [8, 16, 32, 64], "completed_eval_concs": [8, 16, 64], "failed_eval_concs": [32]}"#,
        )
        .unwrap();
        let result = |strict: f64| {
            format!(
                r#"{{"lm_eval_version": "0.4.9", "results": {{"gsm8k": {{"exact_match,strict-match": {strict}, "exact_match,flexible-extract": 0.95}}}}, "n-samples": {{"gsm8k": {{"original": 1319, "effective": 1319}}}}}}"#
            )
        };
        std::fs::write(d.path().join("results_a_conc8.json"), result(0.96)).unwrap();
        std::fs::write(d.path().join("results_a_conc16_1.json"), result(0.97)).unwrap();
        let recs = read_eval_records(d.path()).unwrap();
        let got: Vec<(u32, EvalStatus, Option<f64>)> = recs.iter().map(|r| (r.meta.conc, r.status, r.em_strict)).collect();
        assert_eq!(
            got,
            [
                (8, EvalStatus::Done, Some(0.96)),
                (16, EvalStatus::Done, Some(0.97)),
                (32, EvalStatus::Failed, None),
                (64, EvalStatus::Failed, None)
            ]
        );
        assert!(recs[2].reason.as_deref().unwrap().contains("failed for concurrency 32"));
        assert!(recs[3].reason.as_deref().unwrap().contains("no result file for concurrency 64"));
        assert!(!recs[3].infrastructure_success);
    }

    #[test]
    fn a_torn_last_sample_line_is_left_out() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("samples.jsonl");
        let s = Sample {
            doc_id: 3,
            prompt_hash: "p".into(),
            doc_hash: "d".into(),
            target_hash: "t".into(),
            target: "18".into(),
            response: Some("#### 18".into()),
            from_reasoning: false,
            filtered_resps: Some(FilterPair { strict: "18".into(), flexible: "18".into() }),
            exact_match: Some(FilterPair { strict: 1.0, flexible: 1.0 }),
            finish_reason: Some("stop".into()),
            completion_tokens: Some(4),
            error: None,
            attempts: 1,
            latency_s: 0.5,
        };
        let line = serde_json::to_string(&s).unwrap();
        std::fs::write(&p, format!("{line}\n{}", &line[..20])).unwrap();
        let (v, len) = read_samples(&p).unwrap();
        assert_eq!((v, len), (vec![s.clone()], line.len() as u64 + 1));
        std::fs::write(&p, format!("{line}\nnot json\n")).unwrap();
        let e = read_samples(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("not a sample of `sweep eval`"), "{e}");
        assert_eq!(read_samples(&d.path().join("none.jsonl")).unwrap(), (vec![], 0));
    }
}
