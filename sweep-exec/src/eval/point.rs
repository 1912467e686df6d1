//! An eval point of `sweep run`: gsm8k against the point's server, or recorded not applicable
//! on the reference engine. Its identity (`meta_env.json`) comes from the plan row, as
//! InferenceX's workflow exports it to the eval job.

use super::record::{EvalRecord, EvalStatus, Meta};
use super::runner::{self, EvalConfig};
use super::{data, task, write};
use crate::results::Status;
use crate::run::{EvalJob, EvalOutcome};
use serde_json::{Map, Value};

/// `meta_env.json` of an eval point, from its matrix row.
pub fn meta(job: &EvalJob) -> Meta {
    let r = &job.point.row;
    let s = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    let n = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_u64).map(|x| x as u32);
    let b = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_bool);
    let mut meta = Meta { conc: job.point.conc, eval_suite: task::TASK.into(), ..Meta::default() };
    if let Some(x) = s(r, "framework") {
        meta.framework = x;
    }
    if let Some(x) = s(r, "precision") {
        meta.precision = x;
    }
    if let Some(x) = s(r, "spec-decoding") {
        meta.spec_decoding = x;
    }
    if let Some(x) = s(r, "model") {
        meta.model = x;
    }
    if let Some(x) = s(r, "model-prefix") {
        meta.infmax_model_prefix = x;
    }
    if let Some(x) = s(r, "runner") {
        // A runner label (`cluster:gb300-nv`) names the hardware after its scheme.
        meta.hw = x.rsplit(':').next().unwrap_or(&x).to_string();
    }
    for (k, f) in [("isl", &mut meta.isl), ("osl", &mut meta.osl)] {
        if let Some(v) = r.get(k).filter(|v| !v.is_null()) {
            *f = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
        }
    }
    meta.tp = n(r, "tp").unwrap_or(meta.tp);
    meta.ep = n(r, "ep").unwrap_or(meta.ep);
    meta.pp = n(r, "pp").unwrap_or(meta.pp);
    meta.dp_attention = b(r, "dp-attn").unwrap_or(false);
    if let (Some(Value::Object(p)), Some(Value::Object(d))) = (r.get("prefill"), r.get("decode")) {
        meta.is_multinode = true;
        meta.prefill_tp = n(p, "tp").unwrap_or(1);
        meta.prefill_ep = n(p, "ep").unwrap_or(1);
        meta.prefill_num_workers = n(p, "num-worker").unwrap_or(1);
        meta.prefill_dp_attention = b(p, "dp-attn").unwrap_or(false);
        meta.decode_tp = n(d, "tp").unwrap_or(1);
        meta.decode_ep = n(d, "ep").unwrap_or(1);
        meta.decode_num_workers = n(d, "num-worker").unwrap_or(1);
        meta.decode_dp_attention = b(d, "dp-attn").unwrap_or(false);
    }
    meta
}

/// The eval recorded `not_applicable: <reason>` (no score): the reference engine answers no math.
pub fn not_applicable(job: &EvalJob, reason: &str) -> EvalOutcome {
    let d = data::embedded();
    let meta = meta(job);
    let rec = EvalRecord {
        task: task::TASK.into(),
        status: EvalStatus::NotApplicable,
        reason: None,
        result_kind: "not_applicable".into(),
        model: Some(meta.model.clone()).filter(|m| !m.is_empty()),
        base_url: None,
        server: Some(serde_json::json!({"engine": "sweep reference engine (simulated, virtual clock)"})),
        n: 0,
        n_total: d.test.len(),
        limit: job.limit,
        em_strict: None,
        em_strict_stderr: None,
        em_flexible: None,
        em_flexible_stderr: None,
        infrastructure_success: true,
        requests_failed: 0,
        concurrency: job.point.conc as usize,
        max_tokens: task::max_output_tokens(task::DEFAULT_MAX_MODEL_LEN),
        max_model_len: task::DEFAULT_MAX_MODEL_LEN,
        data: d.source,
        started_at: write::now_rfc3339(),
        wall_s: 0.0,
        results_file: None,
        meta,
        producer: write::producer(),
    };
    match write::not_applicable(&job.dir, rec, reason) {
        Ok(rec) => EvalOutcome { status: Status::Done, detail: Some(rec.agg_row(&job.dir.display().to_string())) },
        Err(e) => EvalOutcome { status: Status::Failed { reason: format!("{}: {e}", job.dir.display()) }, detail: None },
    }
}

/// gsm8k against `base_url` (a server of the point's config that is up), as InferenceX runs it
/// (the row's eval concurrency, retries, timeouts); the files go in the eval's folder, and a
/// folder with logged samples resumes. A server that turns out to be the reference engine is
/// recorded not applicable.
pub fn run(job: &EvalJob, base_url: &str) -> EvalOutcome {
    let mut cfg = EvalConfig::new(base_url, &job.dir);
    cfg.concurrency = job.point.conc.max(1) as usize;
    cfg.limit = job.limit;
    cfg.meta = meta(job);
    cfg.image = job.point.row.get("image").and_then(Value::as_str).map(str::to_string);
    let d = data::embedded();
    match runner::run_blocking(&cfg, &d, &job.cancel, |_| {}) {
        Ok(rec) => {
            let status = match rec.status {
                EvalStatus::Done | EvalStatus::NotApplicable => Status::Done,
                EvalStatus::Interrupted => Status::Interrupted { reason: "interrupted; --resume continues from its logged samples".into() },
                EvalStatus::Failed => Status::Failed { reason: format!("gsm8k: {} (infrastructure_success: false)", rec.status_text()) },
            };
            EvalOutcome { status, detail: Some(rec.agg_row(&job.dir.display().to_string())) }
        }
        Err(e) => EvalOutcome { status: Status::Failed { reason: format!("gsm8k: {e}") }, detail: None },
    }
}
