//! From an integration and the benchmark's own result to the power keys of an aggregate result
//! and the validation record that explains them.

use super::{AccumulatorCheck, integrate_power, push_reason};
use super::{INTEGRATION_METHOD, IntegrationParams, LocalOffset, POWER_METRIC_SCHEMA_VERSION, PerGpu, PowerIntegration, Reason};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// The benchmark fields energy is normalised by, checked as strictly as the reference does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkData {
    pub start_unix: f64,
    pub end_unix: f64,
    pub reported_duration_s: f64,
    /// Successful queries; 0 when the result's count was unusable (and a reason says so).
    pub completed: u64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
}

impl BenchmarkData {
    pub fn integration_duration_s(&self) -> f64 {
        self.end_unix - self.start_unix
    }
}

/// A JSON number that Python reads as `int` (no fraction or exponent in the text).
fn positive_int(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64).filter(|n| *n > 0)
}

/// Reads `benchmark_start_time_unix`, `benchmark_end_time_unix`, `duration`, `completed` and the
/// token totals from a benchmark result. `None` when the window is unusable; otherwise the data
/// with any count problems as reasons (their counts then 0), so telemetry is still audited.
pub fn load_benchmark_data(json: &str) -> (Option<BenchmarkData>, Vec<Reason>) {
    let Ok(Value::Object(bench)) = serde_json::from_str::<Value>(json) else {
        // A JSON document that is not an object fails at the reference's first lookup.
        return (None, vec![Reason::InvalidBenchmarkResult]);
    };
    let num = |k: &str| bench.get(k).and_then(Value::as_f64);
    let (Some(start), Some(end), Some(duration)) = (num("benchmark_start_time_unix"), num("benchmark_end_time_unix"), num("duration"))
    else {
        return (None, vec![Reason::InvalidBenchmarkWindow]);
    };
    if ![start, end, duration].iter().all(|v| v.is_finite()) || end <= start || duration <= 0.0 {
        return (None, vec![Reason::InvalidBenchmarkWindow]);
    }
    let mut reasons = Vec::new();
    let integration_duration = end - start;
    if (duration - integration_duration).abs() > f64::max(0.5, integration_duration * 0.01) {
        push_reason(&mut reasons, Reason::BenchmarkDurationMismatch);
    }
    let mut count = |key: &str, reason: Reason| {
        positive_int(bench.get(key)).unwrap_or_else(|| {
            push_reason(&mut reasons, reason);
            0
        })
    };
    let completed = count("completed", Reason::InvalidSuccessfulQueryCount);
    let total_input_tokens = count("total_input_tokens", Reason::InvalidInputTokenCount);
    let total_output_tokens = count("total_output_tokens", Reason::InvalidOutputTokenCount);
    let data = BenchmarkData {
        start_unix: start,
        end_unix: end,
        reported_duration_s: duration,
        completed,
        total_input_tokens,
        total_output_tokens,
    };
    (Some(data), reasons)
}

/// Whole-deployment power and energy per unit of work, unrounded.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerMetrics {
    pub avg_power_w: f64,
    pub avg_total_gpu_power_w: f64,
    pub total_gpu_energy_j: f64,
    pub joules_per_successful_query: f64,
    pub joules_per_input_token: f64,
    pub joules_per_output_token: f64,
    pub joules_per_total_token: f64,
}

impl PowerMetrics {
    /// Key and value in the reference's emission order.
    pub fn entries(&self) -> [(&'static str, f64); 7] {
        [
            ("avg_power_w", self.avg_power_w),
            ("avg_total_gpu_power_w", self.avg_total_gpu_power_w),
            ("total_gpu_energy_j", self.total_gpu_energy_j),
            ("joules_per_successful_query", self.joules_per_successful_query),
            ("joules_per_input_token", self.joules_per_input_token),
            ("joules_per_output_token", self.joules_per_output_token),
            ("joules_per_total_token", self.joules_per_total_token),
        ]
    }

    fn map(&self, f: impl Fn(&str, f64) -> f64) -> PowerMetrics {
        let e = self.entries();
        let v = |i: usize| f(e[i].0, e[i].1);
        PowerMetrics {
            avg_power_w: v(0),
            avg_total_gpu_power_w: v(1),
            total_gpu_energy_j: v(2),
            joules_per_successful_query: v(3),
            joules_per_input_token: v(4),
            joules_per_output_token: v(5),
            joules_per_total_token: v(6),
        }
    }
}

/// The metrics of a valid integration; `None` if it lacks a total or a count is zero.
pub fn derived_metrics(integration: &PowerIntegration, bench: &BenchmarkData) -> Option<PowerMetrics> {
    PowerMetrics::of_energy(integration.total_gpu_energy_j?, integration.avg_power_w?, integration.avg_total_gpu_power_w?, bench)
}

impl PowerMetrics {
    /// The whole deployment's energy over the benchmark with its mean powers, per query and per
    /// token; `None` when a count is zero.
    pub fn of_energy(energy: f64, avg_power_w: f64, avg_total_gpu_power_w: f64, bench: &BenchmarkData) -> Option<PowerMetrics> {
        let per = |n: u64| (n > 0).then(|| energy / n as f64);
        Some(PowerMetrics {
            avg_power_w,
            avg_total_gpu_power_w,
            total_gpu_energy_j: energy,
            joules_per_successful_query: per(bench.completed)?,
            joules_per_input_token: per(bench.total_input_tokens)?,
            joules_per_output_token: per(bench.total_output_tokens)?,
            joules_per_total_token: per(bench.total_input_tokens + bench.total_output_tokens)?,
        })
    }

    /// Every figure finite: the reference refuses to write one that is not.
    pub fn is_finite(&self) -> bool {
        self.entries().iter().all(|(_, v)| v.is_finite())
    }
}

/// Python's `round(x, digits)`: the nearest decimal of that many places, ties to even on the
/// exact binary value (which Rust's fixed-precision formatting also does).
pub(crate) fn round_to(x: f64, digits: usize) -> f64 {
    format!("{x:.digits$}").parse().unwrap_or(x)
}

/// The power keys of an aggregate result, exactly as the reference writes them: the schema
/// version, `power_valid` as 1/0, and the seven metrics (watts and joules to 3 decimals, the
/// rest to 6) only when valid. Reasons are in `PowerValidation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerSummary {
    pub power_metric_schema_version: u32,
    pub power_valid: u8,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<PowerMetrics>,
}

/// The validation record beside the aggregate (the reference's sidecar, less the file paths).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PowerValidation {
    pub schema_version: u32,
    pub power_valid: bool,
    pub reasons: Vec<Reason>,
    pub benchmark_window: Option<Value>,
    pub integration_method: &'static str,
    pub expected_gpu_count: Option<i64>,
    pub observed_gpu_count: usize,
    pub observed_gpu_ids: Vec<String>,
    #[serde(serialize_with = "ordered_map")]
    pub per_gpu_sample_counts: PerGpu<usize>,
    #[serde(serialize_with = "ordered_map")]
    pub per_gpu_max_sample_gap_s: PerGpu<f64>,
    #[serde(serialize_with = "ordered_map")]
    pub per_gpu_energy_j: PerGpu<f64>,
    #[serde(serialize_with = "ordered_map")]
    pub device_issues: PerGpu<Vec<Reason>>,
    /// `None` (null) unless the caller ran `cross_check_accumulator` on counter snapshots.
    pub accumulator_check: Option<AccumulatorCheck>,
    /// Every metric to 6 decimals; empty unless valid.
    #[serde(serialize_with = "ordered_map")]
    pub metrics: PerGpu<f64>,
}

pub(super) fn ordered_map<V: Serialize, S: Serializer>(entries: &PerGpu<V>, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(entries.len()))?;
    for (k, v) in entries {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

/// Both records of one benchmark's power, and the unrounded metrics when valid.
#[derive(Clone, Debug, PartialEq)]
pub struct PowerReport {
    pub summary: PowerSummary,
    pub validation: PowerValidation,
    pub metrics: Option<PowerMetrics>,
    pub integration: PowerIntegration,
}

/// The aggregate's power keys for these metrics (`None`: not valid), rounded as the reference
/// rounds them: watts and joules to 3 decimals, the rest to 6.
pub fn summary_of(metrics: Option<PowerMetrics>) -> PowerSummary {
    PowerSummary {
        power_metric_schema_version: POWER_METRIC_SCHEMA_VERSION,
        power_valid: u8::from(metrics.is_some()),
        metrics: metrics.map(|m| m.map(|k, v| round_to(v, if k.ends_with("_w") || k.ends_with("_j") { 3 } else { 6 }))),
    }
}

/// The reference's `run` without its files: the benchmark result's JSON text, the telemetry
/// text (`None` for a missing file) and the expected GPU count give the aggregate's power keys
/// and the validation record. Non-finite metrics are refused as the reference refuses to write
/// them (`aggregate_result_unwritable`).
pub fn evaluate(bench_json: &str, csv: Option<&str>, local: LocalOffset, expected_num_gpus: Option<i64>) -> PowerReport {
    let (bench, bench_reasons) = load_benchmark_data(bench_json);
    let integration = match &bench {
        None => PowerIntegration::empty(expected_num_gpus, bench_reasons.clone()),
        Some(b) => integrate_power(csv, local, &IntegrationParams::new(b.start_unix, b.end_unix, expected_num_gpus)),
    };
    let mut reasons = bench_reasons;
    for r in &integration.invalid_reasons {
        push_reason(&mut reasons, *r);
    }
    let mut metrics = match &bench {
        Some(b) if reasons.is_empty() => derived_metrics(&integration, b),
        _ => None,
    };
    if reasons.is_empty() && !metrics.is_some_and(|m| m.is_finite()) {
        push_reason(&mut reasons, Reason::AggregateResultUnwritable);
        metrics = None;
    }
    let power_valid = reasons.is_empty();
    let summary = summary_of(metrics);
    let validation = PowerValidation {
        schema_version: 1,
        power_valid,
        reasons,
        benchmark_window: bench.as_ref().map(|b| {
            serde_json::json!({
                "start_time_unix": b.start_unix,
                "end_time_unix": b.end_unix,
                "reported_duration_s": b.reported_duration_s,
                "integration_duration_s": b.integration_duration_s(),
                "completed": b.completed,
                "total_input_tokens": b.total_input_tokens,
                "total_output_tokens": b.total_output_tokens,
            })
        }),
        integration_method: INTEGRATION_METHOD,
        expected_gpu_count: integration.expected_num_gpus,
        observed_gpu_count: integration.observed_num_gpus(),
        observed_gpu_ids: integration.observed_gpu_ids.clone(),
        per_gpu_sample_counts: integration.per_gpu_sample_counts.clone(),
        per_gpu_max_sample_gap_s: integration.per_gpu_max_sample_gap_s.clone(),
        per_gpu_energy_j: integration.per_gpu_energy_j.clone(),
        device_issues: integration.device_issues.clone(),
        accumulator_check: None,
        metrics: metrics.map_or_else(Vec::new, |m| m.entries().iter().map(|(k, v)| (k.to_string(), round_to(*v, 6))).collect()),
    };
    PowerReport { summary, validation, metrics, integration }
}
