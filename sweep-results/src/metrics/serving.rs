//! The fixed-sequence-length result in `benchmark_serving.py`'s own shape (its
//! `calculate_metrics` and the JSON `--save-result` writes), from the per-request records, so
//! that InferenceX's collectors read `sweep`'s output unchanged.
//!
//! As `benchmark_serving` computes them: over the successful main-run requests, TTFT, E2EL
//! (first send to last chunk), TPOT = (E2EL − TTFT) / (output tokens − 1) for outputs longer than
//! one token, ITL = every gap between successive chunks of every request (a chunk is any with a
//! choice, empty text included: `targets/http/stream.rs` reads fixed-length streams so); mean,
//! median, population std and numpy's linear percentiles; throughputs over the benchmark's
//! duration (first send of the main run to its last end); input tokens as the client counted its
//! prompts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::percentile_linear;
use crate::records::{Record, RecordPhase};

/// `benchmark_serving`'s `max_failure_rate`: above it the benchmark exits with a failure.
pub const MAX_FAILURE_RATE: f64 = 0.05;

/// `benchmark_serving`'s default `--metric-percentiles` ("90,99,99.9"), which InferenceX's
/// `run_benchmark_serving` leaves as it is: its result JSON has `p90_*`, `p99_*` and `p99.9_*`.
pub const DEFAULT_PERCENTILES: [f64; 3] = [90.0, 99.0, 99.9];

/// What a fixed-length point's aggregate needs besides its records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FixedMeta {
    pub isl: u32,
    pub osl: u32,
    pub range_ratio: f64,
    pub num_prompts: u32,
    pub num_warmups: u32,
    pub seed: u32,
    /// `benchmark_serving --backend`: `vllm` (completions) or `openai-chat`.
    pub backend: String,
    pub model_id: String,
    /// The prompt length of each request as the client built it, by request index.
    pub input_lens: Vec<u32>,
    /// `--metric-percentiles` (InferenceX: the default, [`DEFAULT_PERCENTILES`]).
    pub percentiles: Vec<f64>,
    /// `--goodput` SLOs, ms: `ttft`, `tpot`, `e2el`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub goodput: BTreeMap<String, f64>,
}

/// The headline numbers of `calculate_metrics` (seconds and tokens).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServingMetrics {
    pub completed: usize,
    pub total_input: u64,
    pub total_output: u64,
    pub duration_s: f64,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub ttfts: Vec<f64>,
    pub tpots: Vec<f64>,
    pub itls: Vec<f64>,
    pub e2els: Vec<f64>,
    pub good_completed: usize,
}

impl ServingMetrics {
    /// `calculate_metrics` over the main run's records (`source_outer_idx` is the request index).
    pub fn of(records: &[Record], meta: &FixedMeta, duration_s: f64) -> ServingMetrics {
        let mut m = ServingMetrics { duration_s, ..Default::default() };
        let mut all_tpots = Vec::new();
        for r in records.iter().filter(|r| r.phase == RecordPhase::Profiling && r.ok()) {
            let (Some(ttft), Some(e2el)) = (r.ttft_ns(), r.e2el_ns()) else { continue };
            let out = r.output_tokens.unwrap_or(0);
            m.total_output += out;
            m.total_input += u64::from(input_len(meta, r));
            let (ttft, e2el) = (ttft as f64 / 1e9, e2el as f64 / 1e9);
            let mut tpot = 0.0;
            if out > 1 {
                tpot = (e2el - ttft) / (out - 1) as f64;
                m.tpots.push(tpot);
            }
            all_tpots.push(tpot);
            m.itls.extend(r.chunk_gaps_ns.iter().map(|&g| g as f64 / 1e9));
            m.ttfts.push(ttft);
            m.e2els.push(e2el);
            m.completed += 1;
        }
        if !meta.goodput.is_empty() {
            let slo = |k: &str| meta.goodput.get(k).map(|ms| ms / 1e3);
            m.good_completed = (0..m.completed)
                .filter(|&i| {
                    slo("ttft").is_none_or(|s| m.ttfts[i] <= s)
                        && slo("tpot").is_none_or(|s| all_tpots[i] <= s)
                        && slo("e2el").is_none_or(|s| m.e2els[i] <= s)
                })
                .count();
        }
        let per_s = |x: f64| if duration_s > 0.0 { x / duration_s } else { 0.0 };
        m.request_throughput = per_s(m.completed as f64);
        m.output_throughput = per_s(m.total_output as f64);
        m.total_token_throughput = per_s((m.total_input + m.total_output) as f64);
        m
    }
}

fn input_len(meta: &FixedMeta, r: &Record) -> u32 {
    meta.input_lens.get(r.source_outer_idx as usize).copied().unwrap_or_else(|| r.input_tokens.unwrap_or(0) as u32)
}

/// numpy's mean, median, std and percentile of `xs` in seconds, as ms (`np.mean(xs or 0)`: 0 for
/// an empty list).
fn describe(xs: &[f64], percentiles: &[f64]) -> (f64, f64, f64, Vec<(f64, f64)>) {
    if xs.is_empty() {
        return (0.0, 0.0, 0.0, percentiles.iter().map(|&p| (p, 0.0)).collect());
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    let mean = s.iter().sum::<f64>() / n;
    let std = (s.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
    let pct = percentiles.iter().map(|&p| (p, percentile_linear(&s, p / 100.0) * 1e3)).collect();
    (mean * 1e3, percentile_linear(&s, 0.5) * 1e3, std * 1e3, pct)
}

/// `p99`, `p99.9`: Python's `str(int(p)) if int(p) == p else str(p)`.
fn p_word(p: f64) -> String {
    if p.fract() == 0.0 { format!("{}", p as i64) } else { format!("{p}") }
}

/// The result JSON `benchmark_serving --save-result` writes (without the detailed per-request
/// lists, as InferenceX runs it), for the main run of `records`. `start_unix_s` is the main run's
/// first send on the records' clock, in seconds; `date` is `YYYYMMDD-HHMMSS`.
pub fn result_json(records: &[Record], meta: &FixedMeta, concurrency: u32, duration_s: f64, start_unix_s: f64, date: &str) -> Value {
    let m = ServingMetrics::of(records, meta, duration_s);
    let mut out = Map::new();
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    put("date", json!(date));
    put("backend", json!(meta.backend));
    put("model_id", json!(meta.model_id));
    put("tokenizer_id", json!(meta.model_id));
    put("best_of", json!(1));
    put("num_prompts", json!(meta.num_prompts));
    put("request_rate", json!("inf"));
    put("burstiness", json!(1.0));
    put("max_concurrency", json!(concurrency));
    put("duration", json!(duration_s));
    put("benchmark_start_time_unix", json!(start_unix_s));
    put("benchmark_end_time_unix", json!(start_unix_s + duration_s));
    put("completed", json!(m.completed));
    put("total_input_tokens", json!(m.total_input));
    put("total_output_tokens", json!(m.total_output));
    put("request_throughput", json!(m.request_throughput));
    // The key is spelt with a colon in benchmark_serving.
    let goodput = (!meta.goodput.is_empty()).then(|| if duration_s > 0.0 { m.good_completed as f64 / duration_s } else { 0.0 });
    put("request_goodput:", json!(goodput));
    put("output_throughput", json!(m.output_throughput));
    put("total_token_throughput", json!(m.total_token_throughput));
    let main: Vec<&Record> = records.iter().filter(|r| r.phase == RecordPhase::Profiling).collect();
    put("input_lens", json!(main.iter().map(|r| input_len(meta, r)).collect::<Vec<_>>()));
    put("output_lens", json!(main.iter().map(|r| if r.ok() { r.output_tokens.unwrap_or(0) } else { 0 }).collect::<Vec<_>>()));
    for (name, xs) in [("ttft", &m.ttfts), ("tpot", &m.tpots), ("itl", &m.itls), ("e2el", &m.e2els)] {
        let (mean, median, std, pct) = describe(xs, &meta.percentiles);
        put(&format!("mean_{name}_ms"), json!(mean));
        put(&format!("median_{name}_ms"), json!(median));
        put(&format!("std_{name}_ms"), json!(std));
        for (p, v) in pct {
            put(&format!("p{}_{name}_ms", p_word(p)), json!(v));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests;
