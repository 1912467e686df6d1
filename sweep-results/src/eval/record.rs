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

pub(super) fn read_json(path: &Path) -> Result<Value, RecordError> {
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

pub use super::folders::{
    agg_rows, find_eval_dirs, is_eval_dir, lm_eval_results, newest_lm_eval_results, read_eval_dir, read_eval_records,
};

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
