//! Writing an eval's files (atomically, each a temporary file renamed): `eval.json`,
//! `meta_env.json`, lm-eval's `results_<timestamp>.json` for a finished run, `agg_eval.json`
//! (the row of `collect_eval_results.py`), and the eval's `report.md` / `report.html`.

use super::record::{AGG_FILE, EvalRecord, EvalStatus, META_FILE, RECORD_FILE, Sample};
use super::{score, task};
use crate::problem::atomic_write;
use serde_json::{Value, json};
use std::io;
use std::path::Path;

/// The version `lm_eval_version` names: the results follow its file shape and scoring, and
/// InferenceX's collector recognises result files by that key.
pub const LM_EVAL_COMPAT: &str = "0.4.13";

/// The reason an eval against the reference engine is not applicable.
pub const SIMULATED: &str = "simulated engine";

pub fn producer() -> String {
    format!("sweep {}", env!("CARGO_PKG_VERSION"))
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

fn json_file(path: &Path, v: &impl serde::Serialize) -> io::Result<()> {
    atomic_write(path, &serde_json::to_vec_pretty(v).map_err(io::Error::other)?)
}

/// `eval.json`.
pub fn record(out: &Path, rec: &EvalRecord) -> io::Result<()> {
    json_file(&out.join(RECORD_FILE), rec)
}

fn meta_and_row(out: &Path, rec: &EvalRecord, source: &str) -> io::Result<()> {
    json_file(&out.join(META_FILE), &rec.meta)?;
    json_file(&out.join(AGG_FILE), &json!([rec.agg_row(source)]))
}

/// Records an eval the target cannot take (the reference engine answers no math): status
/// `not_applicable` with `reason`, no score and no results file.
pub fn not_applicable(out: &Path, mut rec: EvalRecord, reason: &str) -> io::Result<EvalRecord> {
    rec.status = EvalStatus::NotApplicable;
    rec.reason = Some(reason.to_string());
    rec.result_kind = "not_applicable".into();
    rec.n = 0;
    rec.em_strict = None;
    rec.em_strict_stderr = None;
    rec.em_flexible = None;
    rec.em_flexible_stderr = None;
    // Nothing was asked, so nothing failed: the infrastructure question does not arise.
    rec.infrastructure_success = true;
    rec.results_file = None;
    std::fs::create_dir_all(out)?;
    meta_and_row(out, &rec, &out.join(RECORD_FILE).display().to_string())?;
    record(out, &rec)?;
    Ok(rec)
}

/// `2026-12-02T04-52-47.861393`: lm-eval's `date_id` (ISO time, `:` replaced), here in UTC.
fn date_id() -> String {
    now_rfc3339().trim_end_matches('Z').replace(':', "-")
}

/// lm-eval's `task_hashes` entry: the hash of every logged sample's doc, prompt and target
/// hashes, strict-match samples then flexible-extract ones, in doc order.
pub fn task_hash(samples: &[&Sample]) -> String {
    let one: String = samples.iter().map(|s| format!("{}{}{}", s.doc_hash, s.prompt_hash, s.target_hash)).collect();
    task::sha256_hex(&one.repeat(2))
}

fn stderr_value(m: &score::Mean) -> Value {
    m.stderr.map(Value::from).unwrap_or_else(|| "N/A".into())
}

/// The lm-eval results file for a finished run: the keys `collect_eval_results.py` and
/// `validate_scores.py` read, with the task configuration InferenceX's gsm8k.yaml expands to.
pub fn lm_eval_results(rec: &EvalRecord, scores: &score::Scores, task_hash: &str, date: f64) -> Value {
    let model = rec.model.clone().unwrap_or_default();
    let model_args = model_args(rec, &model);
    json!({
        "results": {"gsm8k": {
            "name": "gsm8k",
            "alias": "gsm8k",
            "sample_len": scores.n,
            "exact_match,strict-match": scores.strict.value,
            "exact_match_stderr,strict-match": stderr_value(&scores.strict),
            "exact_match,flexible-extract": scores.flexible.value,
            "exact_match_stderr,flexible-extract": stderr_value(&scores.flexible),
        }},
        "group_subtasks": {},
        "configs": {"gsm8k": task_config(rec, &model_args)},
        "versions": {"gsm8k": task::TASK_VERSION},
        "n-shot": {"gsm8k": task::NUM_FEWSHOT},
        "higher_is_better": {"gsm8k": {"exact_match": true}},
        "n-samples": {"gsm8k": {"original": rec.n_total, "effective": scores.n}},
        "config": {
            "model": "local-chat-completions",
            "model_args": model_args,
            "batch_size": 1,
            "batch_sizes": [],
            "limit": rec.limit.map(|l| l as f64),
            "bootstrap_iters": 100000,
            "gen_kwargs": {"max_tokens": rec.max_tokens, "temperature": 0, "top_p": 1},
            "fewshot_seed": task::FEWSHOT_SEED,
        },
        "git_hash": null,
        "date": date,
        "lm_eval_version": format!("{LM_EVAL_COMPAT} (compatible; written by {})", producer()),
        "task_hashes": {"gsm8k": task_hash},
        "model_source": "local-chat-completions",
        "model_name": model,
        "model_name_sanitized": model.replace(['/', ':'], "__"),
        "system_instruction": null,
        "fewshot_as_multiturn": true,
        "chat_template": "",
        "total_evaluation_time_seconds": rec.wall_s.to_string(),
        "sweep": {
            "producer": producer(),
            "data": rec.data,
            "infrastructure_success": rec.infrastructure_success,
            "result_kind": rec.result_kind,
        },
    })
}

/// lm-eval's `model_args` of the `local-chat-completions` model as `run_lm_eval.sh` passes them.
fn model_args(rec: &EvalRecord, model: &str) -> Value {
    json!({
        "model": model,
        "base_url": format!("{}/v1/chat/completions", rec.base_url.clone().unwrap_or_default()),
        "api_key": "EMPTY",
        "eos_string": "</s>",
        "max_retries": task::MAX_ATTEMPTS,
        "num_concurrent": rec.concurrency,
        "timeout": task::REQUEST_TIMEOUT_S,
        "tokenized_requests": false,
        "max_length": rec.max_model_len,
    })
}

/// The task configuration InferenceX's gsm8k.yaml expands to (`configs.gsm8k`).
fn task_config(rec: &EvalRecord, model_args: &Value) -> Value {
    let fewshot_text = "Question: {{question}}\nEnd your response with the answer on the last line, formatted as: #### [number]\nAnswer:";
    let filter = |name: &str, pattern: &str| json!({"name": name, "filter": [{"function": "regex", "group_select": -1, "regex_pattern": pattern}, {"function": "take_first"}]});
    let mut meta = model_args.clone();
    meta["config_source"] = "inline".into();
    meta["version"] = task::TASK_VERSION.into();
    json!({
        "task": "gsm8k",
        "tag": ["math_word_problems"],
        "dataset_path": "openai/gsm8k",
        "dataset_name": "main",
        "training_split": "train",
        "test_split": "test",
        "fewshot_split": "train",
        "doc_to_text": fewshot_text,
        "doc_to_target": "{{answer}}",
        "unsafe_code": false,
        "description": "",
        "target_delimiter": " ",
        "fewshot_delimiter": "\n\n",
        "fewshot_config": {"sampler": "default", "split": "train", "doc_to_text": fewshot_text, "doc_to_target": "{{answer}}",
            "fewshot_delimiter": "\n\n", "target_delimiter": " "},
        "num_fewshot": task::NUM_FEWSHOT,
        "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": true, "ignore_case": true,
            "ignore_punctuation": false, "regexes_to_ignore": score::REGEXES_TO_IGNORE}],
        "output_type": "generate_until",
        "generation_kwargs": {"until": task::STOP, "do_sample": false, "temperature": 0, "max_tokens": rec.max_tokens, "top_p": 1},
        "repeats": 1,
        "filter_list": [filter(score::STRICT, score::STRICT_PATTERN), filter(score::FLEXIBLE, score::FLEXIBLE_PATTERN)],
        "should_decontaminate": false,
        "metadata": meta,
    })
}

/// Completes a run whose every question is answered: scores, the lm-eval results file (an
/// earlier one of this folder is replaced), `meta_env.json`, `agg_eval.json`, `eval.json`.
pub fn finished(out: &Path, mut rec: EvalRecord, samples: &[&Sample], old_results: Option<String>) -> io::Result<EvalRecord> {
    let scored: Vec<score::Scored> = samples.iter().filter_map(|s| s.scored()).collect();
    let Some(scores) = score::aggregate(&scored) else {
        return Err(io::Error::other("no answered sample to score"));
    };
    rec.status = EvalStatus::Done;
    rec.reason = None;
    rec.infrastructure_success = true;
    rec.n = scores.n;
    rec.em_strict = Some(scores.strict.value);
    rec.em_strict_stderr = scores.strict.stderr;
    rec.em_flexible = Some(scores.flexible.value);
    rec.em_flexible_stderr = scores.flexible.stderr;
    let name = format!("results_{}.json", date_id());
    let date = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0) - rec.wall_s;
    json_file(&out.join(&name), &lm_eval_results(&rec, &scores, &task_hash(samples), date))?;
    if let Some(old) = old_results.filter(|o| *o != name && !o.contains('/')) {
        let _ = std::fs::remove_file(out.join(old));
    }
    rec.results_file = Some(name.clone());
    meta_and_row(out, &rec, &out.join(&name).display().to_string())?;
    record(out, &rec)?;
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_hash_is_lm_evals() {
        // lm-eval 0.4.13's `task_hashes.gsm8k` for `--limit 7` over InferenceX's gsm8k.yaml.
        let d = crate::eval::data::embedded();
        let samples: Vec<Sample> = task::prompts(&d, 7)
            .iter()
            .map(|p| {
                let doc = &d.test[p.doc_id];
                Sample {
                    doc_id: p.doc_id,
                    prompt_hash: task::prompt_hash(&p.messages(&d)),
                    doc_hash: task::doc_hash(doc),
                    target_hash: task::target_hash(doc),
                    target: String::new(),
                    response: None,
                    from_reasoning: false,
                    filtered_resps: None,
                    exact_match: None,
                    finish_reason: None,
                    completion_tokens: None,
                    error: None,
                    attempts: 1,
                    latency_s: 0.0,
                }
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        assert_eq!(task_hash(&refs), "452161689dd8c3efa4eadeac7ca129fe3421d76aa256ed19c3406d398aa1cd12");
    }
}
