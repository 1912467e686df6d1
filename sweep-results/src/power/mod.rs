//! GPU board power over a benchmark window, integrated and validated exactly as InferenceX's
//! `aggregate_power.py` does, so energy figures compare with its published ones.
//!
//! The monitor samples every GPU about once a second (`nvidia-smi --query-gpu=timestamp,index,
//! power.draw,... --format=csv -l 1`, or `amd-smi metric --csv`). Each device is integrated on
//! its own with the trapezoidal rule, its power linearly interpolated at both window
//! boundaries, so the energy describes the whole deployment whatever the sampling jitter.
//! Telemetry that cannot support that number (a device that does not bracket the window, a gap
//! over `DEFAULT_MAX_SAMPLE_GAP_S`, an unparseable row near the window, fewer devices than the
//! topology) is never averaged over: the result is `power_valid` 0 with the reasons.
//!
//! The GPUs' own energy counters, where the monitor snapshots them, are compared with the stream
//! as an advisory check of the instrument (`cross_check_accumulator`).
//!
//! Pure: text in, figures out. The caller reads the files and writes the results.

mod accumulator;
mod parse;
mod point;
mod report;
#[cfg(test)]
mod tests;

pub use accumulator::{ACCUMULATOR_TOLERANCE, AccumulatorCheck, AccumulatorComparison, cross_check_accumulator};
pub use parse::{CSV_FIELD_LIMIT, Columns, CsvError, CsvRecords, detect_columns, parse_power, parse_timestamp, read_csv};
pub use point::{PointPower, PointPowerResult, PowerFigures, point_power};
pub use report::{
    BenchmarkData, PowerMetrics, PowerReport, PowerSummary, PowerValidation, derived_metrics, evaluate, load_benchmark_data, summary_of,
};

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Version of the meaning of the unprefixed `joules_per_*` keys: since 2 they are
/// whole-deployment energy, and rows without the stamp cannot be told apart from role-local ones.
pub const POWER_METRIC_SCHEMA_VERSION: u32 = 2;
/// Longest tolerated interval between two samples of one device around the window, seconds
/// (three missed readings of a 1 Hz monitor).
pub const DEFAULT_MAX_SAMPLE_GAP_S: f64 = 3.0;
/// How the energy was computed, as the validation record names it.
pub const INTEGRATION_METHOD: &str = "per_device_trapezoidal_with_linear_boundary_interpolation";

/// UTC offset, in seconds east, of the clock that wrote zone-less timestamps (nvidia-smi writes
/// local wall-clock time). InferenceX uses the reading host's zone; pass that host's offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalOffset(pub i32);

/// Why power is not valid: the reference's reason codes, in its spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    InvalidBenchmarkResult,
    InvalidBenchmarkWindow,
    BenchmarkDurationMismatch,
    InvalidSuccessfulQueryCount,
    InvalidInputTokenCount,
    InvalidOutputTokenCount,
    InvalidExpectedGpuCount,
    InvalidMaxSampleGap,
    TelemetryFileMissing,
    TelemetryFileEmpty,
    TelemetryFileUnreadable,
    TimestampColumnMissing,
    PowerColumnMissing,
    GpuIdentityColumnMissing,
    InvalidTimestampSample,
    InvalidPowerSample,
    GpuIdentityMissing,
    NoUsablePowerSamples,
    ExpectedGpuCountMismatch,
    InsufficientPowerSamples,
    BenchmarkWindowNotBracketed,
    SamplingGapExceeded,
    AggregateResultUnwritable,
}

/// Appends a reason once, keeping the order they were found in (the reference's report order).
fn push_reason(reasons: &mut Vec<Reason>, reason: Reason) {
    if !reasons.contains(&reason) {
        reasons.push(reason);
    }
}

/// What to integrate over and what to hold the telemetry to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntegrationParams {
    pub start_unix: f64,
    pub end_unix: f64,
    /// TP x PP x PCP of the single-node deployment; `None` skips the topology check.
    pub expected_num_gpus: Option<i64>,
    pub max_sample_gap_s: f64,
}

impl IntegrationParams {
    pub fn new(start_unix: f64, end_unix: f64, expected_num_gpus: Option<i64>) -> IntegrationParams {
        IntegrationParams { start_unix, end_unix, expected_num_gpus, max_sample_gap_s: DEFAULT_MAX_SAMPLE_GAP_S }
    }
}

/// Per-device values in the order devices are reported (numeric ids first, by value).
pub type PerGpu<V> = Vec<(String, V)>;

/// The auditable outcome of integrating one node's telemetry.
#[derive(Clone, Debug, PartialEq)]
pub struct PowerIntegration {
    pub power_valid: bool,
    pub invalid_reasons: Vec<Reason>,
    pub expected_num_gpus: Option<i64>,
    pub observed_gpu_ids: Vec<String>,
    pub per_gpu_sample_counts: PerGpu<usize>,
    /// Longest interval among the samples that bound and fall in the window.
    pub per_gpu_max_sample_gap_s: PerGpu<f64>,
    pub per_gpu_energy_j: PerGpu<f64>,
    pub device_issues: PerGpu<Vec<Reason>>,
    /// Mean power of one GPU: the total's average over the window, divided by the devices.
    pub avg_power_w: Option<f64>,
    pub avg_total_gpu_power_w: Option<f64>,
    pub total_gpu_energy_j: Option<f64>,
}

impl PowerIntegration {
    /// The invalid result when no device could be looked at.
    pub fn empty(expected_num_gpus: Option<i64>, reasons: Vec<Reason>) -> PowerIntegration {
        PowerIntegration {
            power_valid: false,
            invalid_reasons: reasons,
            expected_num_gpus,
            observed_gpu_ids: Vec::new(),
            per_gpu_sample_counts: Vec::new(),
            per_gpu_max_sample_gap_s: Vec::new(),
            per_gpu_energy_j: Vec::new(),
            device_issues: Vec::new(),
            avg_power_w: None,
            avg_total_gpu_power_w: None,
            total_gpu_energy_j: None,
        }
    }

    pub fn observed_num_gpus(&self) -> usize {
        self.observed_gpu_ids.len()
    }
}

/// Integrates the telemetry text of one node; `None` stands for a missing file. Never fails:
/// whatever is wrong with the window, the parameters or the text ends up in the reasons.
pub fn integrate_power(csv: Option<&str>, local: LocalOffset, params: &IntegrationParams) -> PowerIntegration {
    let expected = params.expected_num_gpus;
    let mut reasons = match precheck(params) {
        Ok(reasons) => reasons,
        Err(reasons) => return PowerIntegration::empty(expected, reasons),
    };
    let text = match csv {
        None => Some(Reason::TelemetryFileMissing),
        Some("") => Some(Reason::TelemetryFileEmpty),
        Some(_) => None,
    };
    if let Some(reason) = text {
        push_reason(&mut reasons, reason);
        return PowerIntegration::empty(expected, reasons);
    }
    let parsed = read_csv(csv.unwrap_or_default());
    let mut records = parsed.records.into_iter();
    let header: Vec<String> = records.next().unwrap_or_default().iter().map(|c| c.trim().to_string()).collect();
    let columns = detect_columns(&header);
    let (Some(ts), Some(pw), Some(gpu)) = (&columns.timestamp, &columns.power, &columns.gpu) else {
        if parsed.error.is_some() {
            push_reason(&mut reasons, Reason::TelemetryFileUnreadable);
            return PowerIntegration::empty(expected, reasons);
        }
        for (missing, reason) in [
            (columns.timestamp.is_none(), Reason::TimestampColumnMissing),
            (columns.power.is_none(), Reason::PowerColumnMissing),
            (columns.gpu.is_none(), Reason::GpuIdentityColumnMissing),
        ] {
            if missing {
                push_reason(&mut reasons, reason);
            }
        }
        return PowerIntegration::empty(expected, reasons);
    };
    let cell = |name: &str| header.iter().rposition(|h| h == name);
    let (ts_at, pw_at, gpu_at) = (cell(ts), cell(pw), cell(gpu));
    let rows = records.filter(|r| !r.is_empty()).map(|r| {
        let get = |at: Option<usize>| at.filter(|&i| i < r.len()).map_or("", |i| r[i].trim());
        TelemetryRow { timestamp: parse_timestamp(get(ts_at), local), power: parse_power(get(pw_at)), gpu_id: get(gpu_at).to_string() }
    });
    let samples = collect_samples(rows, params, &mut reasons);
    if parsed.error.is_some() {
        push_reason(&mut reasons, Reason::TelemetryFileUnreadable);
        return PowerIntegration::empty(expected, reasons);
    }
    integrate(samples, params, reasons)
}

/// The reasons the parameters alone give (`Ok`), or the only reason when they rule out looking
/// at the telemetry at all (`Err`).
fn precheck(params: &IntegrationParams) -> Result<Vec<Reason>, Vec<Reason>> {
    let (start, end) = (params.start_unix, params.end_unix);
    if !start.is_finite() || !end.is_finite() || end <= start {
        return Err(vec![Reason::InvalidBenchmarkWindow]);
    }
    let mut reasons = Vec::new();
    if params.expected_num_gpus.is_some_and(|n| n <= 0) {
        push_reason(&mut reasons, Reason::InvalidExpectedGpuCount);
    }
    let gap = params.max_sample_gap_s;
    if !gap.is_finite() || gap <= 0.0 {
        return Err(vec![Reason::InvalidMaxSampleGap]);
    }
    Ok(reasons)
}

/// One telemetry row as parsed: `None` where the cell is not a timestamp or a power reading.
#[derive(Clone, Debug, PartialEq)]
pub struct TelemetryRow {
    pub timestamp: Option<f64>,
    pub power: Option<f64>,
    /// Trimmed; empty when the row names no device.
    pub gpu_id: String,
}

/// One device's readings: each distinct timestamp with every power value seen at it.
pub type Readings = Vec<(f64, Vec<f64>)>;

/// Readings per device (first-seen order) and per exact timestamp, before duplicates are
/// averaged (some SMI versions stamp coarser than they sample).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceSamples {
    pub devices: Vec<(String, Readings)>,
    pub saw_missing_gpu_identity: bool,
}

/// Keeps the rows that can matter to the window (within one maximum gap of it), recording why
/// any of those is unusable. A row whose timestamp cannot be read may lie anywhere, so it
/// always counts against the stream.
pub fn collect_samples(
    rows: impl IntoIterator<Item = TelemetryRow>,
    params: &IntegrationParams,
    reasons: &mut Vec<Reason>,
) -> DeviceSamples {
    let mut out = DeviceSamples::default();
    let mut device_at: HashMap<String, usize> = HashMap::new();
    let mut time_at: Vec<HashMap<u64, usize>> = Vec::new();
    let gap = params.max_sample_gap_s;
    for row in rows {
        let Some(t) = row.timestamp.filter(|t| t.is_finite()) else {
            push_reason(reasons, Reason::InvalidTimestampSample);
            continue;
        };
        if t < params.start_unix - gap || t > params.end_unix + gap {
            continue;
        }
        let Some(p) = row.power.filter(|p| p.is_finite() && *p >= 0.0) else {
            push_reason(reasons, Reason::InvalidPowerSample);
            continue;
        };
        if row.gpu_id.is_empty() {
            out.saw_missing_gpu_identity = true;
            continue;
        }
        let d = *device_at.entry(row.gpu_id.clone()).or_insert_with(|| {
            out.devices.push((row.gpu_id.clone(), Vec::new()));
            time_at.push(HashMap::new());
            out.devices.len() - 1
        });
        // -0.0 and 0.0 are one key, as in a Python dict.
        let key = (t + 0.0).to_bits();
        let series = &mut out.devices[d].1;
        let i = *time_at[d].entry(key).or_insert_with(|| {
            series.push((t, Vec::new()));
            series.len() - 1
        });
        series[i].1.push(p);
    }
    out
}

/// Numeric ids first, by value; then the rest as strings. Stable, so equal keys keep their
/// first-seen order.
fn gpu_sort_key(id: &str) -> (u8, String, String) {
    if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
        let digits = id.trim_start_matches('0');
        (0, format!("{:0>width$}", digits, width = 64.max(digits.len())), String::new())
    } else {
        (1, String::new(), id.to_string())
    }
}

/// Validates and integrates every device over the window, adding to the reasons so far.
pub fn integrate(samples: DeviceSamples, params: &IntegrationParams, mut reasons: Vec<Reason>) -> PowerIntegration {
    let expected = params.expected_num_gpus;
    if samples.saw_missing_gpu_identity {
        push_reason(&mut reasons, Reason::GpuIdentityMissing);
    }
    if samples.devices.is_empty() {
        push_reason(&mut reasons, Reason::NoUsablePowerSamples);
        return PowerIntegration::empty(expected, reasons);
    }
    let mut devices = samples.devices;
    devices.sort_by_cached_key(|(id, _)| gpu_sort_key(id));
    if expected.is_some_and(|n| n > 0 && usize::try_from(n).ok() != Some(devices.len())) {
        push_reason(&mut reasons, Reason::ExpectedGpuCountMismatch);
    }
    let mut result = PowerIntegration::empty(expected, Vec::new());
    for (id, readings) in devices {
        result.observed_gpu_ids.push(id.clone());
        let mut series: Vec<(f64, f64)> = readings.into_iter().map(|(t, v)| (t, mean(&v))).collect();
        series.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        result.per_gpu_sample_counts.push((id.clone(), series.len()));
        let issue = if series.len() < 2 {
            Some(Reason::InsufficientPowerSamples)
        } else if series[0].0 > params.start_unix || series[series.len() - 1].0 < params.end_unix {
            Some(Reason::BenchmarkWindowNotBracketed)
        } else {
            let max_gap = max_gap_around(&series, params.start_unix, params.end_unix);
            result.per_gpu_max_sample_gap_s.push((id.clone(), max_gap));
            let energy = integrate_device(&series, params.start_unix, params.end_unix);
            result.per_gpu_energy_j.push((id.clone(), energy));
            (max_gap > params.max_sample_gap_s).then_some(Reason::SamplingGapExceeded)
        };
        if let Some(issue) = issue {
            push_reason(&mut reasons, issue);
            result.device_issues.push((id, vec![issue]));
        }
    }
    if result.per_gpu_energy_j.len() == result.observed_gpu_ids.len() {
        // Left to right, like Python's `sum` before 3.12.
        let total = result.per_gpu_energy_j.iter().fold(0.0, |acc, (_, e)| acc + e);
        let avg_total = total / (params.end_unix - params.start_unix);
        result.total_gpu_energy_j = Some(total);
        result.avg_total_gpu_power_w = Some(avg_total);
        result.avg_power_w = Some(avg_total / result.observed_gpu_ids.len() as f64);
    }
    result.power_valid = reasons.is_empty();
    result.invalid_reasons = reasons;
    result
}

/// Mean of duplicate readings (pairs exactly; `statistics.mean` rounds longer sums once).
fn mean(values: &[f64]) -> f64 {
    match values {
        [v] => *v,
        _ => values.iter().sum::<f64>() / values.len() as f64,
    }
}

/// Longest interval between the samples from the last one at or before `start` to the first
/// one at or after `end`.
fn max_gap_around(series: &[(f64, f64)], start: f64, end: f64) -> f64 {
    let left = series.partition_point(|s| s.0 <= start) - 1;
    let right = series.partition_point(|s| s.0 < end);
    series[left..=right].windows(2).map(|w| w[1].0 - w[0].0).fold(0.0, f64::max)
}

/// Power at `t`: a sample within a nanosecond of it, or the line between its neighbours.
fn interpolate(series: &[(f64, f64)], t: f64) -> f64 {
    let right = series.partition_point(|s| s.0 < t);
    if right < series.len() && (series[right].0 - t).abs() <= 1e-9 {
        return series[right].1;
    }
    let (lt, lp) = series[right - 1];
    let (rt, rp) = series[right];
    let fraction = (t - lt) / (rt - lt);
    lp + fraction * (rp - lp)
}

/// Trapezoidal energy of one device over `[start, end]`, which its samples bracket.
fn integrate_device(series: &[(f64, f64)], start: f64, end: f64) -> f64 {
    let mut clipped = vec![(start, interpolate(series, start))];
    clipped.extend(series.iter().copied().filter(|&(t, _)| start < t && t < end));
    clipped.push((end, interpolate(series, end)));
    clipped.windows(2).fold(0.0, |energy, w| energy + (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
}
