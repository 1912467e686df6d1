//! The advisory cross-check of the sampled stream against the GPUs' own energy counters
//! (`amd-smi metric -E --csv` snapshots taken when the monitor starts and stops).
//!
//! The snapshots bracket the monitor's whole life, not one benchmark window, so the check
//! integrates the whole stream: it validates the sampling instrument, not a window's metrics,
//! and never changes `power_valid` or the reasons.

use super::parse::{detect_columns, parse_power, parse_timestamp, read_csv};
use super::{LocalOffset, PerGpu, gpu_sort_key};
use serde::Serialize;

/// Largest relative disagreement between counter delta and stream integral that still passes.
pub const ACCUMULATOR_TOLERANCE: f64 = 0.05;

/// The check's outcome, serialised with the reference's keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AccumulatorCheck {
    /// A snapshot is missing or unreadable (`missing_start_snapshot`, `unparseable_end_snapshot`,
    /// `cross_check_error`, ...).
    Unavailable {
        available: bool,
        reason: &'static str,
    },
    Available(Box<AccumulatorComparison>),
}

impl AccumulatorCheck {
    fn unavailable(reason: &'static str) -> AccumulatorCheck {
        AccumulatorCheck::Unavailable { available: false, reason }
    }
}

/// Counter delta against stream integral over the devices both snapshots name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AccumulatorComparison {
    pub available: bool,
    pub accumulator_delta_j: f64,
    pub integrated_stream_j: f64,
    /// `None` when the counters did not advance (no meaningful ratio).
    pub relative_error: Option<f64>,
    pub within_tolerance: bool,
    pub tolerance: f64,
    #[serde(serialize_with = "super::report::ordered_map")]
    pub per_gpu_delta_j: PerGpu<f64>,
    pub integrated_gpu_ids: Vec<String>,
    /// Devices in only one of the snapshots.
    pub unmatched_gpus: Vec<String>,
    /// Devices whose counter went backwards (wrapped or reset).
    pub negative_delta_gpus: Vec<String>,
    pub stream_span_s: f64,
}

/// Python's `float()` of a stripped cell: Rust's grammar plus `_` between digits.
fn python_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let underscores_ok = b
        .iter()
        .enumerate()
        .all(|(i, &c)| c != b'_' || (i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit)));
    if !underscores_ok {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// Device id to counter joules from one snapshot; `Err` when the text cannot be read, `Ok(None)`
/// when it has no usable reading.
fn read_snapshot(text: &str) -> Result<Option<PerGpu<f64>>, ()> {
    let parsed = read_csv(text);
    if parsed.error.is_some() {
        return Err(());
    }
    let mut records = parsed.records.into_iter();
    let header: Vec<String> = records.next().unwrap_or_default().iter().map(|c| c.trim().to_string()).collect();
    let at = |name: &str| header.iter().rposition(|h| h == name);
    let (Some(gpu_at), Some(energy_at)) = (at("gpu"), at("total_energy_consumption")) else {
        return Ok(None);
    };
    let mut energy: PerGpu<f64> = Vec::new();
    for r in records.filter(|r| !r.is_empty()) {
        let get = |i: usize| r.get(i).map_or("", |c| c.trim());
        let gpu = get(gpu_at);
        let Some(joules) = python_float(get(energy_at)).filter(|j| j.is_finite()) else {
            continue;
        };
        if gpu.is_empty() {
            continue;
        }
        match energy.iter_mut().find(|(id, _)| id == gpu) {
            Some(slot) => slot.1 = joules,
            None => energy.push((gpu.to_string(), joules)),
        }
    }
    Ok((!energy.is_empty()).then_some(energy))
}

/// Every parseable (timestamp, watt) sample per device, ordered in time.
fn stream_by_gpu(text: &str, local: LocalOffset) -> Result<PerGpu<Vec<(f64, f64)>>, ()> {
    let parsed = read_csv(text);
    if parsed.error.is_some() {
        return Err(());
    }
    let mut records = parsed.records.into_iter();
    let header: Vec<String> = records.next().unwrap_or_default().iter().map(|c| c.trim().to_string()).collect();
    let columns = detect_columns(&header);
    let at = |name: &Option<String>| name.as_ref().and_then(|n| header.iter().rposition(|h| h == n));
    let (Some(ts_at), Some(pw_at), Some(gpu_at)) = (at(&columns.timestamp), at(&columns.power), at(&columns.gpu)) else {
        return Ok(Vec::new());
    };
    let mut out: PerGpu<Vec<(f64, f64)>> = Vec::new();
    for r in records.filter(|r| !r.is_empty()) {
        let get = |i: usize| r.get(i).map_or("", |c| c.trim());
        let (t, p, gpu) = (parse_timestamp(get(ts_at), local), parse_power(get(pw_at)), get(gpu_at));
        let (Some(t), Some(p)) = (t.filter(|t| t.is_finite()), p.filter(|p| p.is_finite())) else {
            continue;
        };
        if gpu.is_empty() {
            continue;
        }
        match out.iter_mut().find(|(id, _)| id == gpu) {
            Some(slot) => slot.1.push((t, p)),
            None => out.push((gpu.to_string(), vec![(t, p)])),
        }
    }
    for (_, s) in &mut out {
        s.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    }
    Ok(out)
}

/// Trapezoidal energy of consecutive samples, no clipping.
fn trapezoid(samples: &[(f64, f64)]) -> f64 {
    samples.windows(2).fold(0.0, |e, w| e + (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
}

fn sorted_ids<'a>(ids: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = ids.cloned().collect();
    v.sort_by_cached_key(|id| gpu_sort_key(id));
    v
}

/// Compares the counters' delta with the whole stream's integral. `None` when neither snapshot
/// exists (a monitor without counters); `start`/`end` are the snapshot texts, `None` if absent.
pub fn cross_check_accumulator(stream_csv: &str, start: Option<&str>, end: Option<&str>, local: LocalOffset) -> Option<AccumulatorCheck> {
    let (start, end) = match (start, end) {
        (None, None) => return None,
        (None, Some(_)) => return Some(AccumulatorCheck::unavailable("missing_start_snapshot")),
        (Some(_), None) => return Some(AccumulatorCheck::unavailable("missing_end_snapshot")),
        (Some(s), Some(e)) => (s, e),
    };
    let error = AccumulatorCheck::unavailable("cross_check_error");
    let Ok(start) = read_snapshot(start) else { return Some(error) };
    let Some(start) = start else { return Some(AccumulatorCheck::unavailable("unparseable_start_snapshot")) };
    let Ok(end) = read_snapshot(end) else { return Some(error) };
    let Some(end) = end else { return Some(AccumulatorCheck::unavailable("unparseable_end_snapshot")) };
    let lookup = |m: &PerGpu<f64>, id: &str| m.iter().find(|(k, _)| k == id).map(|(_, v)| *v);
    let matched = sorted_ids(start.iter().map(|(k, _)| k).filter(|k| lookup(&end, k).is_some()));
    let per_gpu_delta_j: PerGpu<f64> =
        matched.iter().filter_map(|id| Some((id.clone(), lookup(&end, id)? - lookup(&start, id)?))).collect();
    let only_one = start.iter().chain(&end).map(|(k, _)| k).filter(|k| lookup(&start, k).is_none() || lookup(&end, k).is_none());
    let mut unmatched_gpus = sorted_ids(only_one);
    unmatched_gpus.dedup();
    let negative_delta_gpus = per_gpu_delta_j.iter().filter(|(_, d)| *d < 0.0).map(|(k, _)| k.clone()).collect::<Vec<_>>();
    let Ok(stream) = stream_by_gpu(stream_csv, local) else { return Some(error) };
    let integrated: Vec<&(String, Vec<(f64, f64)>)> =
        sorted_ids(stream.iter().map(|(k, _)| k).filter(|k| lookup(&per_gpu_delta_j, k).is_some()))
            .into_iter()
            .filter_map(|id| stream.iter().find(|(k, _)| *k == id))
            .collect();
    let integrated_stream_j = integrated.iter().fold(0.0, |acc, (_, s)| acc + trapezoid(s));
    let bounds: Vec<f64> = integrated.iter().flat_map(|(_, s)| [s[0].0, s[s.len() - 1].0]).collect();
    let stream_span_s = match bounds.iter().copied().reduce(f64::max) {
        Some(max) => max - bounds.iter().copied().fold(f64::INFINITY, f64::min),
        None => 0.0,
    };
    let accumulator_delta_j = per_gpu_delta_j.iter().fold(0.0, |acc, (_, d)| acc + d);
    let relative_error = (accumulator_delta_j > 0.0).then(|| (accumulator_delta_j - integrated_stream_j).abs() / accumulator_delta_j);
    let within_tolerance = relative_error.is_some_and(|e| negative_delta_gpus.is_empty() && e <= ACCUMULATOR_TOLERANCE);
    Some(AccumulatorCheck::Available(Box::new(AccumulatorComparison {
        available: true,
        accumulator_delta_j,
        integrated_stream_j,
        relative_error,
        within_tolerance,
        tolerance: ACCUMULATOR_TOLERANCE,
        per_gpu_delta_j,
        integrated_gpu_ids: integrated.iter().map(|(k, _)| k.clone()).collect(),
        unmatched_gpus,
        negative_delta_gpus,
        stream_span_s,
    })))
}
