//! The point aggregate (`agg.json`, InferenceX agentic shape plus sweep's provenance) and its
//! summary, in the steps the spec defines: latency and token statistics, throughput and QPS,
//! request accounting, validity, then the JSON.

use std::collections::BTreeMap;

use polars::prelude::*;
use serde_json::{Value, json};

use super::serving::ServingMetrics;
use super::{MetricCoverage, PointContext, Stats, Summary, metric_duration_coverage, record_frame, round_json, stats, stats_nonneg};
use crate::records::{Record, RecordPhase};

/// Computes the aggregate JSON (InferenceX agentic shape plus sweep's provenance) and its summary.
pub fn aggregate(records: &[Record], ctx: &PointContext) -> PolarsResult<(Value, Summary)> {
    let df = record_frame(records)?;
    let gpus = ctx.num_gpus.max(1) as f64;
    let lat = Latencies::of(&df)?;
    let ok: Vec<&Record> = records.iter().filter(|r| r.phase == RecordPhase::Profiling && r.ok()).collect();
    let prof: Vec<&Record> = records.iter().filter(|r| r.phase == RecordPhase::Profiling).collect();
    let tp = Throughput::of(&ok)?;
    let hit: u64 = ok.iter().map(|r| r.theoretical_hit_blocks).sum();
    let tot_blocks: u64 = ok.iter().map(|r| r.theoretical_total_blocks).sum();
    let theo = if tot_blocks > 0 { hit as f64 / tot_blocks as f64 } else { 0.0 };
    let acc = Accounting::of(records, &prof);
    let coverage = metric_duration_coverage(ctx, &prof);
    let tokens = TokenSources::of(&ok);
    let fixed = ctx.fixed.as_ref().map(|meta| ServingMetrics::of(records, meta, ctx.profile_duration_s));
    let (mut invalid, sub_invalid) = validity(ctx, &acc, ok.is_empty(), coverage.as_ref());
    invalid.extend(tokens.unknown_reason(ok.len()));
    let valid = invalid.is_empty();
    // Fixed-length throughputs are benchmark_serving's: over the benchmark's duration, input
    // as the client counted its prompts.
    let (tot_tps, out_tps, in_tps) = match &fixed {
        Some(m) => (m.total_token_throughput, m.output_throughput, m.total_token_throughput - m.output_throughput),
        None => (tp.tot_tps, tp.out_tps, tp.in_tps),
    };

    let summary = Summary {
        requests_ok: ok.len(),
        requests_error: acc.prof_errors,
        tput_per_gpu: tot_tps / gpus,
        output_tput_per_gpu: out_tps / gpus,
        input_tput_per_gpu: in_tps / gpus,
        ttft: lat.ttft.clone(),
        e2el: lat.e2el.clone(),
        itl: lat.itl.clone(),
        intvty_p90: if lat.itl.p90 > 0.0 { 1.0 / lat.itl.p90 } else { 0.0 },
        e2e_norm_intvty_p90: if lat.e2e_r.p90 > 0.0 { 1.0 / lat.e2e_r.p90 } else { 0.0 },
        theoretical_cache_hit_rate: theo,
        kv: ctx.server_metrics.as_ref().and_then(crate::kv::KvSummary::from_server_metrics),
        valid,
        invalid_reasons: invalid.clone(),
        submission_valid: sub_invalid.is_empty() && valid,
        submission_invalid_reasons: sub_invalid.clone(),
        power: None,
    };

    let mut agg = ctx.identity.clone();
    agg.insert("scenario_type".into(), json!(if ctx.fixed.is_some() { "fixed-seq-len" } else { "agentic-coding" }));
    if let Some(meta) = &ctx.fixed {
        agg.insert("isl".into(), json!(meta.isl));
        agg.insert("osl".into(), json!(meta.osl));
        agg.insert("random_range_ratio".into(), json!(meta.range_ratio));
        agg.insert("benchmark_serving".into(), benchmark_serving(records, meta, ctx));
    }
    agg.insert("result_kind".into(), json!(ctx.result_kind));
    agg.insert("profiles".into(), ctx.profiles.clone());
    agg.insert("target".into(), json!(ctx.target));
    agg.insert("trace_set".into(), json!(ctx.trace_set));
    agg.insert("seed".into(), json!(ctx.seed));
    agg.insert("benchmark_id".into(), json!(ctx.benchmark_id));
    agg.insert("metric_duration_coverage".into(), json!(coverage));
    agg.insert("num_gpus".into(), json!(ctx.num_gpus));
    agg.insert("num_requests_total".into(), json!(acc.records_total));
    agg.insert("num_requests_successful".into(), json!(ok.len()));
    agg.insert("request_accounting".into(), acc.json(ok.len()));
    agg.insert("request_metrics".into(), request_metrics(&lat, &tp, gpus, theo));
    agg.insert("token_counts".into(), tokens.json());
    if let Some(d) = &ctx.request_dialect {
        agg.insert("request_dialect".into(), d.clone());
    }
    agg.insert("server_metrics".into(), ctx.server_metrics.clone().unwrap_or(json!({"present": false})));
    if let Some(kv) = &summary.kv {
        agg.insert("kv".into(), serde_json::to_value(kv).unwrap_or(Value::Null));
    }
    if let Some(client) = client(ctx, &ok, acc.records_total)? {
        agg.insert("client".into(), client);
    }
    agg.insert("tput_per_gpu".into(), json!(tot_tps / gpus));
    agg.insert("output_tput_per_gpu".into(), json!(out_tps / gpus));
    agg.insert("input_tput_per_gpu".into(), json!(in_tps / gpus));
    agg.insert("validity".into(), json!({"valid": valid, "reasons": invalid, "submission_valid": summary.submission_valid, "submission_invalid_reasons": sub_invalid}));
    Ok(with_power(agg, summary, ctx, &ok))
}

/// The rounded aggregate with the point's power keys added after the rounding (they keep the
/// reference's own: 6 decimals per token), and the summary with its power figures.
fn with_power(agg: serde_json::Map<String, Value>, mut summary: Summary, ctx: &PointContext, ok: &[&Record]) -> (Value, Summary) {
    let window = ctx.power.as_ref().map(|_| agg.get("benchmark_serving").cloned().unwrap_or_else(|| profiling_window(ctx, ok)));
    let mut agg = match round_json(Value::Object(agg)) {
        Value::Object(m) => m,
        other => return (other, summary),
    };
    if let (Some(power), Some(window)) = (&ctx.power, window) {
        let r = crate::power::point_power(power, &window, ctx.num_gpus.max(1));
        agg.extend(r.keys);
        if let Some(v) = r.validation {
            agg.insert("power_validation".into(), serde_json::to_value(v).unwrap_or(Value::Null));
        }
        summary.power = r.figures;
    }
    (Value::Object(agg), summary)
}

/// An AgentX point's benchmark window as InferenceX's power adapter builds it: the profiling
/// window on the records' clock (Unix time for a live point), the successful requests and
/// their token counts.
fn profiling_window(ctx: &PointContext, ok: &[&Record]) -> Value {
    let start = ctx.profile_start_ns.unwrap_or(0) as f64 / 1e9;
    json!({
        "benchmark_start_time_unix": start,
        "benchmark_end_time_unix": start + ctx.profile_duration_s,
        "duration": ctx.profile_duration_s,
        "completed": ok.len(),
        "total_input_tokens": ok.iter().filter_map(|r| r.input_tokens).sum::<u64>(),
        "total_output_tokens": ok.iter().filter_map(|r| r.output_tokens).sum::<u64>(),
    })
}

/// The point's `benchmark_serving` result: the main run's start on the records' clock (Unix
/// time for a live run; the virtual clock's seconds otherwise, dated `virtual-clock`).
fn benchmark_serving(records: &[Record], meta: &super::serving::FixedMeta, ctx: &PointContext) -> Value {
    let start_ns = ctx.profile_start_ns.unwrap_or(0);
    // Any clock reading past 2001 is Unix time.
    let live = start_ns > 1_000_000_000 * 1_000_000_000;
    let date = if live {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(start_ns);
        let s = humantime::format_rfc3339_seconds(t).to_string();
        // 2026-12-04T05:30:00Z → 20261204-053000 (UTC).
        format!("{}-{}", s[..10].replace('-', ""), s[11..19].replace(':', ""))
    } else {
        "virtual-clock".to_string()
    };
    super::serving::result_json(records, meta, ctx.concurrency, ctx.profile_duration_s, start_ns as f64 / 1e9, &date)
}

/// Sets the aggregate's client CPU to `cpu` seconds (the whole process, measured once the
/// aggregate itself is computed).
pub fn set_client_cpu(agg: &mut Value, cpu: f64) {
    let total = agg["num_requests_total"].as_u64().unwrap_or(0);
    if let Some(c) = agg.get_mut("client").and_then(Value::as_object_mut) {
        c.insert("cpu_seconds".into(), json!(super::round_json(json!(cpu))));
        let per_1k = if total > 0 { cpu * 1000.0 / total as f64 } else { 0.0 };
        c.insert("cpu_seconds_per_1000_requests".into(), super::round_json(json!(per_1k)));
    }
}

/// Where the successful profiling records' token counts came from: the server's `usage` (or
/// the engine's own on the virtual clock), the client's tokenization of the streamed text, the
/// budget of a `length` finish, or nowhere.
#[derive(Default)]
struct TokenSources {
    server: usize,
    tokenized: usize,
    budget: usize,
    unknown: usize,
}

impl TokenSources {
    /// Why the point is invalid when some successful requests have no token count.
    fn unknown_reason(&self, ok: usize) -> Option<String> {
        (self.unknown > 0).then(|| {
            format!(
                "token_counts_unknown ({} of {ok} successful requests: the server sent no usage and no tokenizer counted the output; pass --tokenizer)",
                self.unknown
            )
        })
    }

    fn of(ok: &[&Record]) -> TokenSources {
        let mut t = TokenSources::default();
        for r in ok {
            match (r.output_tokens, r.token_source.as_deref()) {
                (None, _) => t.unknown += 1,
                (Some(_), Some("tokenized")) => t.tokenized += 1,
                (Some(_), Some("budget")) => t.budget += 1,
                (Some(_), _) => t.server += 1,
            }
        }
        t
    }

    fn json(&self) -> Value {
        json!({"usage": self.server, "tokenized": self.tokenized, "budget": self.budget, "unknown": self.unknown})
    }
}

/// Latency and token statistics of the successful profiling records.
struct Latencies {
    ttft: Stats,
    e2el: Stats,
    itl: Stats,
    fr_itl: Stats,
    /// E2EL per output token.
    e2e_r: Stats,
    isl: Stats,
    osl: Stats,
    osl_exp: Stats,
    /// Population std of 1/ITL and of OSL/E2EL (the reciprocal statistics' `std`).
    inv_itl_std: f64,
    inv_e2e_std: f64,
}

impl Latencies {
    fn of(df: &DataFrame) -> PolarsResult<Latencies> {
        let (ttft, e2el, itl, fr_itl) = (stats(df, "ttft")?, stats(df, "e2el")?, stats(df, "itl")?, stats(df, "full_response_itl")?);
        let (e2e_r, isl, osl, osl_exp) = (stats(df, "e2e_per_token")?, stats(df, "isl")?, stats(df, "osl")?, stats(df, "osl_expected")?);
        let inv_itl_std = stats(df, "inv_itl")?.std;
        let inv_e2e_std = stats(df, "inv_e2e_per_token")?.std;
        Ok(Latencies { ttft, e2el, itl, fr_itl, e2e_r, isl, osl, osl_exp, inv_itl_std, inv_e2e_std })
    }
}

/// Tokens per second over the span from the first successful start to the last successful end,
/// and QPS over consecutive 1 s windows from the first to the last completion.
struct Throughput {
    in_tps: f64,
    out_tps: f64,
    tot_tps: f64,
    duration: f64,
    qps: Stats,
}

impl Throughput {
    fn of(ok: &[&Record]) -> PolarsResult<Throughput> {
        let sum_isl: u64 = ok.iter().filter_map(|r| r.input_tokens).sum();
        let sum_osl: u64 = ok.iter().filter_map(|r| r.output_tokens).sum();
        let duration = match (ok.iter().map(|r| r.start_ns).min(), ok.iter().map(|r| r.end_ns).max()) {
            (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
            _ => 0.0,
        };
        let tps = |x: u64| if duration > 0.0 { x as f64 / duration } else { 0.0 };
        let (in_tps, out_tps, tot_tps) = (tps(sum_isl), tps(sum_osl), tps(sum_isl + sum_osl));

        let mut ends: Vec<u64> = ok.iter().map(|r| r.end_ns).collect();
        ends.sort_unstable();
        let qps_counts: Vec<Option<f64>> = match (ends.first(), ends.last()) {
            (Some(&a), Some(&b)) => {
                let n = ((b - a) / 1_000_000_000 + 1) as usize;
                let mut c = vec![0.0; n];
                for e in &ends {
                    c[((e - a) / 1_000_000_000) as usize] += 1.0;
                }
                c.into_iter().map(Some).collect()
            }
            _ => Vec::new(),
        };
        let qps_df = df!("qps" => qps_counts.clone())?;
        let mut qps = if qps_counts.is_empty() { Stats::default() } else { stats_nonneg(&qps_df, "qps")? };
        qps.n = qps_counts.len();
        Ok(Throughput { in_tps, out_tps, tot_tps, duration, qps })
    }
}

/// What happened to every record: dropped as warmup or error, cancelled, by error category, and
/// among the profiling records the errors, completions and context overflows.
struct Accounting {
    records_total: usize,
    warmup_dropped: usize,
    error_dropped: usize,
    cancelled: usize,
    categories: BTreeMap<String, u64>,
    prof_errors: usize,
    /// Profiling records that were not cancelled without an error.
    completed: usize,
    overflow: usize,
}

impl Accounting {
    fn of(records: &[Record], prof: &[&Record]) -> Accounting {
        let mut categories: BTreeMap<String, u64> = BTreeMap::new();
        for r in records {
            if let Some(c) = category(r) {
                *categories.entry(c).or_default() += 1;
            }
        }
        let prof_cancelled = prof.iter().filter(|r| r.was_cancelled && r.error.is_none()).count();
        Accounting {
            records_total: records.len(),
            warmup_dropped: records.iter().filter(|r| r.phase != RecordPhase::Profiling).count(),
            error_dropped: records.iter().filter(|r| r.error.is_some()).count(),
            cancelled: records.iter().filter(|r| r.was_cancelled).count(),
            categories,
            prof_errors: prof.iter().filter(|r| r.error.is_some()).count(),
            completed: prof.len() - prof_cancelled,
            overflow: prof.iter().filter(|r| r.error.as_ref().is_some_and(|e| e.is_context_overflow())).count(),
        }
    }

    fn json(&self, profiled: usize) -> Value {
        json!({
            "records_total": self.records_total,
            "records_profiled": profiled,
            "records_dropped_total": self.records_total - profiled,
            "records_warmup_dropped": self.warmup_dropped,
            "records_error_dropped": self.error_dropped,
            "records_cancelled": self.cancelled,
            "context_overflow_count": self.overflow,
            "error_categories": self.categories,
        })
    }
}

/// Error category: the error's `type`, else the text before the first `:` (≤ 120 chars).
fn category(r: &Record) -> Option<String> {
    let e = r.error.as_ref()?;
    let k = if !e.kind.is_empty() { e.kind.clone() } else { e.message.split(':').next().unwrap_or_default().to_string() };
    Some(k.chars().take(120).collect())
}

/// Validity (a point fails) and submission validity (reported with reasons): the reasons of each.
fn validity(ctx: &PointContext, acc: &Accounting, no_ok: bool, coverage: Option<&MetricCoverage>) -> (Vec<String>, Vec<String>) {
    let (prof_errors, completed, overflow) = (acc.prof_errors, acc.completed, acc.overflow);
    let mut invalid = Vec::new();
    if completed == 0 || no_ok {
        invalid.push("no_successful_requests".to_string());
    } else if let Some(meta) = &ctx.fixed {
        let total = meta.num_prompts.max(1) as f64;
        if prof_errors as f64 / total > super::serving::MAX_FAILURE_RATE {
            invalid.push(format!(
                "failure_rate_exceeded ({prof_errors}/{} = {:.1} % > 5 %, benchmark_serving's limit)",
                meta.num_prompts,
                100.0 * prof_errors as f64 / total
            ));
        }
    } else if prof_errors as f64 / completed as f64 > 0.10 {
        invalid.push(format!(
            "error_rate_exceeded ({prof_errors}/{completed} = {:.1} % > 10 %)",
            100.0 * prof_errors as f64 / completed as f64
        ));
    }
    if ctx.cancelled {
        invalid.push("run_cancelled".into());
    }
    if let Some(reason) = &ctx.failed {
        invalid.push(format!("point_failed ({reason})"));
    }
    let mut sub_invalid = Vec::new();
    // A fixed-length benchmark has no minimum duration: it runs its prompts to the end.
    if ctx.fixed.is_none() && ctx.profile_duration_s < 900.0 {
        sub_invalid.push(format!("unsafe_override (profile {:.0} s < 900 s)", ctx.profile_duration_s));
    }
    if completed > 0 && overflow as f64 / completed as f64 > 0.01 {
        sub_invalid.push(format!("context_overflow_rate_exceeded ({overflow}/{completed})"));
    }
    if let Some(c) = coverage
        && c.checked
        && !c.passed()
    {
        sub_invalid.push(format!(
            "insufficient_profile_metric_coverage (TTFT reaches {:.1} %, ITL {:.1} % of the {:.0} s profile; {:.0} % required)",
            c.ttft_ratio * 100.0,
            c.inter_token_latency_ratio * 100.0,
            ctx.profile_duration_s,
            c.required_ratio * 100.0
        ));
    }
    if let Some(cpu) = ctx.client_cpu_max
        && cpu > 0.85
    {
        sub_invalid.push(format!("client_saturation (harness CPU {:.0} %)", cpu * 100.0));
    }
    if ctx.cancelled {
        sub_invalid.push("run_cancelled".into());
    }
    if ctx.failed.is_some() {
        sub_invalid.push("point_failed".into());
    }
    (invalid, sub_invalid)
}

/// The aggregate's `request_metrics`: QPS, latencies and interactivity, tokens, throughput and
/// the theoretical cache hit rate.
fn request_metrics(lat: &Latencies, tp: &Throughput, gpus: f64, theo: f64) -> Value {
    let (qps, (in_tps, out_tps, tot_tps)) = (&tp.qps, (tp.in_tps, tp.out_tps, tp.tot_tps));
    let intvty = lat.itl.reciprocal(lat.inv_itl_std);
    let e2e_norm = lat.e2e_r.reciprocal(lat.inv_e2e_std);
    json!({
        "qps": {"window_seconds": 1, "samples": qps.n, "mean": qps.mean, "p50": qps.p50, "p75": qps.p75, "p90": qps.p90, "p95": qps.p95, "std": qps.std},
        "latency": {
            "ttft": lat.ttft.json(), "e2el": lat.e2el.json(), "itl": lat.itl.json(), "tpot": lat.itl.json(),
            "intvty": intvty, "e2e_norm_intvty": e2e_norm,
            "full_response_itl": lat.fr_itl.json(), "full_response_intvty": lat.fr_itl.reciprocal(0.0),
        },
        "tokens": {"input": lat.isl.json(), "output_actual": lat.osl.json(), "output_expected": lat.osl_exp.json()},
        "throughput": {
            "input": {"tokens_per_second": in_tps},
            "output": {"tokens_per_second": out_tps},
            "total": {"tokens_per_second": tot_tps},
            "duration_seconds": tp.duration,
            "per_gpu": {"total_tput_tps": tot_tps / gpus, "output_tput_tps": out_tps / gpus, "input_tput_tps": in_tps / gpus},
        },
        "cache": {"theoretical_cache_hit_rate": theo},
    })
}

/// The harness's own cost, so a saturated client is visible next to the server's numbers
/// (`None` when its CPU time was not measured).
fn client(ctx: &PointContext, ok: &[&Record], records_total: usize) -> PolarsResult<Option<Value>> {
    let Some(cpu) = ctx.client_cpu_seconds else {
        return Ok(None);
    };
    let per_1k = if records_total > 0 { cpu * 1000.0 / records_total as f64 } else { 0.0 };
    let mut client = json!({"cpu_seconds": cpu, "cpu_seconds_per_1000_requests": per_1k, "cpu_max_share": ctx.client_cpu_max});
    if let Some(l) = ctx.client_loop_cpu_seconds {
        client["replay_loop_cpu_seconds"] = json!(l);
    }
    // Where the server stamps its events: its own TTFT per request, and what the path to this
    // client added to it (wall milliseconds).
    let values = |f: &dyn Fn(&Record) -> Option<f64>| ok.iter().filter_map(|r| f(r)).collect::<Vec<f64>>();
    let added = values(&|r| r.added_latency_ns.map(|x| x as f64 / 1e6));
    if !added.is_empty() {
        let server = values(&|r| r.server_ttft_ns.map(|x| x as f64 / 1e9));
        client["added_latency_ms"] = stats_nonneg(&df!("v" => added)?, "v")?.json();
        client["server_ttft"] = stats_nonneg(&df!("v" => server)?, "v")?.json();
    }
    Ok(Some(client))
}
