//! Point aggregates: the InferenceX agentic aggregate (spec `agentx.md` §6–§7, §10) computed from
//! the per-request records (a polars record table; statistics by [`Stats::of`]). One definition per metric, as the spec writes it:
//! statistics over successful profiling records, percentiles by linear interpolation between
//! order statistics, interactivity as the reciprocal of an ITL statistic (never a mean of 1/ITL).
//! The aggregate itself is computed in `aggregate.rs`; here are its statistics, inputs and
//! headline numbers.

mod aggregate;
pub mod serving;

pub use aggregate::{aggregate, set_client_cpu};
pub use serving::FixedMeta;

use crate::records::{Record, RecordPhase};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Statistics of one metric (population std).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub std: f64,
}

impl Stats {
    fn json(&self) -> Value {
        json!({"mean": self.mean, "p50": self.p50, "p75": self.p75, "p90": self.p90, "p95": self.p95, "p99": self.p99, "std": self.std})
    }
    /// `1 / stat` for every statistic; `std` is the population std of the reciprocals.
    fn reciprocal(&self, std_of_recip: f64) -> Value {
        let inv = |x: f64| if x > 0.0 { 1.0 / x } else { 0.0 };
        json!({"mean": inv(self.mean), "p50": inv(self.p50), "p75": inv(self.p75), "p90": inv(self.p90), "p95": inv(self.p95), "p99": inv(self.p99), "std": std_of_recip})
    }
}

/// The spec's percentile (numpy's `linear`): `k = (n−1)·p`, linear between order statistics of
/// `sorted`.
pub fn percentile_linear(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    at_rank(sorted, (sorted.len() - 1) as f64 * p)
}

/// The value at fractional rank `k` of non-empty `sorted`, linear between its neighbours: the
/// one interpolation behind every percentile here (callers compute `k` their way, so results
/// stay bit-identical to their references).
pub fn at_rank(sorted: &[f64], k: f64) -> f64 {
    let lo = k.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (k - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Statistics of a record-table column over its values that are > 0 (nulls and non-positive
/// values are not observations of the metric).
fn stats(df: &DataFrame, name: &str) -> PolarsResult<Stats> {
    Ok(Stats::of(column(df, name, |v| v > 0.0)?))
}

/// Statistics over every value (QPS windows may be empty).
fn stats_nonneg(df: &DataFrame, name: &str) -> PolarsResult<Stats> {
    Ok(Stats::of(column(df, name, |_| true)?))
}

/// A column's non-null values that pass `keep`.
fn column(df: &DataFrame, name: &str, keep: impl Fn(f64) -> bool) -> PolarsResult<Vec<f64>> {
    Ok(df.column(name)?.f64()?.to_vec().into_iter().flatten().filter(|&v| keep(v)).collect())
}

impl Stats {
    /// Count, mean, population std and the linear percentiles of `values` (all zero when empty).
    pub fn of(mut values: Vec<f64>) -> Stats {
        if values.is_empty() {
            return Stats::default();
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let q = |p: f64| percentile_linear(&values, p);
        Stats { n, mean, p50: q(0.50), p75: q(0.75), p90: q(0.90), p95: q(0.95), p99: q(0.99), std: var.sqrt() }
    }
}

/// The successful profiling records as a polars frame (seconds and tokens).
pub fn record_frame(records: &[Record]) -> PolarsResult<DataFrame> {
    let fin = |x: Option<f64>| x.filter(|v| v.is_finite());
    let s = |ns: Option<u64>| ns.map(|v| v as f64 / 1e9);
    let ok: Vec<&Record> = records.iter().filter(|r| r.phase == RecordPhase::Profiling && r.ok()).collect();
    df!(
        "ttft" => ok.iter().map(|r| s(r.ttft_ns())).collect::<Vec<_>>(),
        "e2el" => ok.iter().map(|r| s(r.e2el_ns())).collect::<Vec<_>>(),
        "itl" => ok.iter().map(|r| fin(r.itl_ns().map(|x| x / 1e9))).collect::<Vec<_>>(),
        "full_response_itl" => ok.iter().map(|r| fin(r.full_response_itl_ns().map(|x| x / 1e9))).collect::<Vec<_>>(),
        "e2e_per_token" => ok.iter().map(|r| match (r.e2el_ns(), r.output_tokens) { (Some(e), Some(o)) if e > 0 && o > 0 => Some(e as f64 / 1e9 / o as f64), _ => None }).collect::<Vec<_>>(),
        "inv_itl" => ok.iter().map(|r| fin(r.itl_ns().filter(|x| *x > 0.0).map(|x| 1e9 / x))).collect::<Vec<_>>(),
        "inv_e2e_per_token" => ok.iter().map(|r| match (r.e2el_ns(), r.output_tokens) { (Some(e), Some(o)) if e > 0 && o > 0 => Some(o as f64 * 1e9 / e as f64), _ => None }).collect::<Vec<_>>(),
        "isl" => ok.iter().map(|r| r.input_tokens.map(|x| x as f64)).collect::<Vec<_>>(),
        "osl" => ok.iter().map(|r| r.output_tokens.map(|x| x as f64)).collect::<Vec<_>>(),
        "osl_expected" => ok.iter().map(|r| r.expected_output_tokens.map(|x| x as f64)).collect::<Vec<_>>(),
        "start_ns" => ok.iter().map(|r| r.start_ns as f64).collect::<Vec<_>>(),
        "end_ns" => ok.iter().map(|r| r.end_ns as f64).collect::<Vec<_>>(),
    )
}

/// How far the latency signals reach into the profile (agentx-harness
/// `profile_metric_duration_coverage`): the last first-token time, and the last end of a response
/// with an inter-token interval, as shares of the configured profile from its start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricCoverage {
    pub ttft_ratio: f64,
    pub inter_token_latency_ratio: f64,
    pub required_ratio: f64,
    /// Checked only for profiles of at least 900 s that were not cancelled, as the reference does.
    pub checked: bool,
}

impl MetricCoverage {
    /// Either signal reaching the required share proves late profiling activity.
    pub fn passed(&self) -> bool {
        self.ttft_ratio >= self.required_ratio || self.inter_token_latency_ratio >= self.required_ratio
    }
}

/// Coverage of a point's profiling records; `None` when the profile's start is unknown.
pub fn metric_duration_coverage(ctx: &PointContext, prof: &[&Record]) -> Option<MetricCoverage> {
    let start = ctx.profile_start_ns?;
    let dur = ctx.profile_duration_s * 1e9;
    if dur <= 0.0 {
        return None;
    }
    let ratio = |t: Option<u64>| t.map_or(0.0, |t| (t.saturating_sub(start) as f64 / dur).clamp(0.0, 1.0));
    Some(MetricCoverage {
        ttft_ratio: ratio(prof.iter().filter_map(|r| r.first_token_ns).max()),
        inter_token_latency_ratio: ratio(prof.iter().filter(|r| r.ok() && r.itl_ns().is_some()).map(|r| r.end_ns).max()),
        required_ratio: 0.95,
        checked: ctx.profile_duration_s >= 900.0 && !ctx.cancelled,
    })
}

/// Identity and provenance of a point, copied into its aggregate.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PointContext {
    /// The InferenceX identity fields (hw, conc, image, model, topology, …).
    pub identity: Map<String, Value>,
    pub num_gpus: u32,
    /// `measured` or `predicted`.
    pub result_kind: String,
    /// Engine and hardware profiles (predicted) or the server's `/server_info` summary (measured).
    pub profiles: Value,
    pub target: String,
    pub trace_set: String,
    pub seed: u64,
    /// The id in every cache-bust marker of the point (random per live run).
    #[serde(default)]
    pub benchmark_id: String,
    pub concurrency: u32,
    pub profile_duration_s: f64,
    /// When profiling started, on the records' clock.
    #[serde(default)]
    pub profile_start_ns: Option<u64>,
    /// Highest CPU use of the harness process over 1 s samples, as a share (0–1) of the cores it may use.
    pub client_cpu_max: Option<f64>,
    /// CPU seconds the harness process used for a live point, if measured: the whole process
    /// for `sweep replay` (start-up, reading traces, the replay, aggregation), the point's share
    /// from its start for `sweep run`.
    #[serde(default)]
    pub client_cpu_seconds: Option<f64>,
    /// The part of it inside the replay loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_loop_cpu_seconds: Option<f64>,
    /// The run was cancelled (live abort, root warmup failure).
    pub cancelled: bool,
    /// The point failed (its server died, a live abort, …): why. Such a point is never valid.
    #[serde(default)]
    pub failed: Option<String>,
    /// Server-reported metrics (from the engine or a `/metrics` scrape).
    pub server_metrics: Option<Value>,
    /// How a live client wrote its requests (`targets::dialect::Dialect`), into `agg.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_dialect: Option<Value>,
    /// The engine's running and queued requests, KV use and token counters sampled over the
    /// point (the virtual clock: `timeseries.json`, read by the point's report page). Not part
    /// of the aggregate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeseries: Option<Value>,
    /// A fixed-sequence-length point: its scenario's parameters (the aggregate is then
    /// `benchmark_serving`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<FixedMeta>,
    /// GPU power over the point: telemetry sampled on the server's host, or the engine's
    /// prediction. `None`: no power keys (a live point with the monitor off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::power::PointPower>,
}

/// The headline numbers of a point, used by reports, Pareto and the gate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub requests_ok: usize,
    pub requests_error: usize,
    pub tput_per_gpu: f64,
    pub output_tput_per_gpu: f64,
    pub input_tput_per_gpu: f64,
    pub ttft: Stats,
    pub e2el: Stats,
    pub itl: Stats,
    /// 1 / ITL p90, tok/s/user.
    pub intvty_p90: f64,
    /// 1 / p90(E2EL / OSL), tok/s/user: the North Star x-axis.
    pub e2e_norm_intvty_p90: f64,
    pub theoretical_cache_hit_rate: f64,
    /// KV pool, pressure and prefix-cache figures, where the target reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<crate::kv::KvSummary>,
    pub valid: bool,
    pub invalid_reasons: Vec<String>,
    pub submission_valid: bool,
    pub submission_invalid_reasons: Vec<String>,
    /// Power and energy per token, when the point's power is valid (measured or predicted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::power::PowerFigures>,
}

/// A metric compared between a measured point and its simulated twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    TputPerGpu,
    E2elP75,
    E2elP90,
    IntvtyP90,
    TtftP50,
    TtftP90,
    TtftP99,
}

impl Metric {
    pub const ALL: [Metric; 7] =
        [Metric::TputPerGpu, Metric::E2elP75, Metric::E2elP90, Metric::IntvtyP90, Metric::TtftP50, Metric::TtftP90, Metric::TtftP99];

    /// The key used in seed YAML tables, profiles and `residuals.json`.
    pub fn key(self) -> &'static str {
        match self {
            Metric::TputPerGpu => "tput_per_gpu",
            Metric::E2elP75 => "e2el_p75",
            Metric::E2elP90 => "e2el_p90",
            Metric::IntvtyP90 => "interactivity_p90",
            Metric::TtftP50 => "ttft_p50",
            Metric::TtftP90 => "ttft_p90",
            Metric::TtftP99 => "ttft_p99",
        }
    }

    pub fn from_key(k: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == k)
    }

    /// Weight in the fit's loss: the headline pair (throughput per GPU, E2EL p90) counts fully,
    /// the rest less; TTFT tails are noisy (one long prefill moves p99), so they count least.
    pub fn weight(self) -> f64 {
        match self {
            Metric::TputPerGpu | Metric::E2elP90 => 1.0,
            Metric::E2elP75 | Metric::IntvtyP90 => 0.5,
            Metric::TtftP50 | Metric::TtftP90 => 0.25,
            Metric::TtftP99 => 0.1,
        }
    }

    pub fn of(self, s: &Summary) -> f64 {
        match self {
            Metric::TputPerGpu => s.tput_per_gpu,
            Metric::E2elP75 => s.e2el.p75,
            Metric::E2elP90 => s.e2el.p90,
            Metric::IntvtyP90 => s.intvty_p90,
            Metric::TtftP50 => s.ttft.p50,
            Metric::TtftP90 => s.ttft.p90,
            Metric::TtftP99 => s.ttft.p99,
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Metric::TputPerGpu => "tok/s/GPU",
            Metric::IntvtyP90 => "tok/s/user",
            _ => "s",
        }
    }
}

/// `(predicted − measured) / measured`, in percent.
pub fn residual_pct(measured: f64, predicted: f64) -> f64 {
    if measured == 0.0 { f64::NAN } else { (predicted - measured) / measured * 100.0 }
}

/// Rounds every float to 5 decimals; finite integral floats ≥ 1 become integers (spec §6.1).
pub fn round_json(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or(0.0);
            if !x.is_finite() {
                return Value::Null;
            }
            let r = (x * 1e5).round() / 1e5;
            if r >= 1.0 && r.fract() == 0.0 && r < 9.0e15 { json!(r as i64) } else { json!(r) }
        }
        Value::Array(a) => Value::Array(a.into_iter().map(round_json).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, round_json(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordError;
    use crate::records::tests::rec;

    #[test]
    fn percentiles_match_a_hand_computation() {
        // E2EL values 1, 2, 3, 4, 10 s: k = (n−1)·p.
        let recs: Vec<Record> =
            [1000u64, 2000, 3000, 4000, 10000].iter().enumerate().map(|(i, &e)| rec(i as u64 * 100, 100, e, 100, 11)).collect();
        let (_, s) = aggregate(&recs, &PointContext { num_gpus: 1, profile_duration_s: 3600.0, ..Default::default() }).unwrap();
        // p90: k = 3.6 → 4 + 0.6 × (10 − 4) = 7.6; p75: k = 3 → 4; p50: 3.
        assert!((s.e2el.p90 - 7.6).abs() < 1e-9, "{}", s.e2el.p90);
        assert!((s.e2el.p75 - 4.0).abs() < 1e-9);
        assert!((s.e2el.p50 - 3.0).abs() < 1e-9);
        let mut sorted = vec![1.0, 2.0, 3.0, 4.0, 10.0];
        sorted.sort_by(f64::total_cmp);
        assert!((percentile_linear(&sorted, 0.9) - s.e2el.p90).abs() < 1e-12);
        // Population std of 1,2,3,4,10: mean 4, var (9+4+1+0+36)/5 = 10.
        assert!((s.e2el.std - 10f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn throughput_interactivity_and_accounting() {
        let mut recs = vec![rec(0, 500, 10_500, 10_000, 101), rec(1000, 500, 5_500, 20_000, 51)];
        let mut warm = rec(0, 1, 2, 5, 1);
        warm.phase = RecordPhase::Warmup;
        recs.push(warm);
        let mut bad = rec(2000, 1, 2, 5, 1);
        bad.error = Some(RecordError { kind: "http_500".into(), message: "x".into(), status: Some(500) });
        recs.push(bad);
        let (agg, s) = aggregate(&recs, &PointContext { num_gpus: 4, profile_duration_s: 3600.0, ..Default::default() }).unwrap();
        // duration: first ok start 0 → last ok end 10.5 s (+100 ns) ; tokens 30,152.
        let dur = (10_500_000_000u64 + 100) as f64 / 1e9;
        assert!((s.tput_per_gpu - (30_000.0 + 152.0) / dur / 4.0).abs() < 1e-6);
        // ITLs: (10.5−0.5)/100 = 0.1 s and (5.5−0.5)/50 = 0.1 s → P90 interactivity 10 tok/s/user.
        assert!((s.intvty_p90 - 10.0).abs() < 1e-9);
        assert_eq!(agg["request_accounting"]["records_total"], 4);
        assert_eq!(agg["request_accounting"]["records_warmup_dropped"], 1);
        assert_eq!(agg["request_accounting"]["error_categories"]["http_500"], 1);
        // 1 error of 3 profiling records: 33 % > 10 % → invalid.
        assert!(!s.valid && s.invalid_reasons[0].starts_with("error_rate_exceeded"));
        assert_eq!(agg["num_requests_successful"], 2);
    }

    #[test]
    fn rounding_rules() {
        assert_eq!(round_json(json!(2.0)), json!(2));
        assert_eq!(round_json(json!(0.123456789)), json!(0.12346));
        assert_eq!(round_json(json!(0.5)), json!(0.5));
    }
}
