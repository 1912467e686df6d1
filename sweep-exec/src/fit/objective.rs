//! The objective: metric weights, the loss of an evaluation against measured targets, and the
//! targets a short-duration search aims at.

use std::collections::BTreeMap;

use super::{FitError, MeasuredPoint, Metric, PointError};
use crate::metrics::Summary;
use crate::plan::PlanPoint;

/// Each metric's default weight.
pub fn default_weights() -> BTreeMap<Metric, f64> {
    Metric::ALL.iter().map(|m| (*m, m.weight())).collect()
}

/// Reads `key=weight,…` overrides onto the default weights.
pub fn parse_weights(spec: &[String]) -> Result<BTreeMap<Metric, f64>, FitError> {
    let mut w = default_weights();
    for item in spec {
        let (k, v) = item.split_once('=').ok_or_else(|| FitError::Params(format!("--weights {item}: expected metric=weight")))?;
        let m = Metric::from_key(k.trim()).ok_or_else(|| FitError::Params(format!("--weights {item}: unknown metric {k}")))?;
        let x: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| FitError::Params(format!("--weights {item}: not a weight >= 0")))?;
        w.insert(m, x);
    }
    Ok(w)
}

/// The loss definition written into fitted profiles and the docs.
pub fn loss_definition(weights: &BTreeMap<Metric, f64>) -> String {
    let w: Vec<String> = weights.iter().map(|(m, x)| format!("{} {}", m.key(), x)).collect();
    format!(
        "sum over points and measured metrics of w * ln(predicted / measured)^2, divided by the sum of the weights; weights: {}; a point that fails on the virtual clock adds 25 per weight",
        w.join(", ")
    )
}

/// What an evaluation replays at: a profiling duration and the targets its loss compares with
/// (`tag` tells levels apart in the memo).
pub(super) struct Level<'a> {
    pub(super) tag: u64,
    pub(super) duration_s: Option<f64>,
    pub(super) targets: &'a [(PlanPoint, MeasuredPoint)],
}

/// The measured targets moved by the ratio short / full of one candidate's replays: a search at
/// the short duration against them aims where the full duration meets the measurements, as long
/// as that ratio (mostly the workload's: contexts grow over a session) changes slowly with the
/// parameters. A metric that failed at either level keeps its measured value.
pub fn corrected_targets(points: &[(PlanPoint, MeasuredPoint)], full: &Evaluation, short: &Evaluation) -> Vec<(PlanPoint, MeasuredPoint)> {
    points
        .iter()
        .zip(full.summaries.iter().zip(&short.summaries))
        .map(|((p, m), (f, s))| {
            let mut m = m.clone();
            if let (Ok(f), Ok(s)) = (f, s) {
                for (k, v) in m.metrics.iter_mut() {
                    let r = k.of(s) / k.of(f);
                    if r.is_finite() && r > 0.0 {
                        *v *= r;
                    }
                }
            }
            (p.clone(), m)
        })
        .collect()
}

/// Per-point results of one candidate.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// The loss; when `complete` is false, a lower bound of it (the points not simulated would
    /// only add to it).
    pub loss: f64,
    pub summaries: Vec<Result<Summary, PointError>>,
    /// Every point was simulated.
    pub complete: bool,
}

/// A point's share of the loss numerator (the sum over its measured metrics of w · ln²), and
/// the weights it adds to the denominator.
pub(super) fn point_loss(m: &MeasuredPoint, s: &Result<Summary, PointError>, weights: &BTreeMap<Metric, f64>) -> (f64, f64) {
    let (mut num, mut den) = (0.0, 0.0);
    for (metric, meas) in &m.metrics {
        let w = weights.get(metric).copied().unwrap_or(0.0);
        den += w;
        num += w * match s {
            Ok(s) => {
                let p = metric.of(s);
                if p.is_finite() && p > 0.0 { (p / meas).ln().powi(2) } else { 25.0 }
            }
            Err(_) => 25.0,
        };
    }
    (num, den)
}

/// The loss of per-point summaries against the measured points.
pub fn loss(points: &[(PlanPoint, MeasuredPoint)], summaries: &[Result<Summary, PointError>], weights: &BTreeMap<Metric, f64>) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for ((_, m), s) in points.iter().zip(summaries) {
        let (n, d) = point_loss(m, s, weights);
        num += n;
        den += d;
    }
    if den > 0.0 { num / den } else { 0.0 }
}
