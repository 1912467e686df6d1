//! One plan point on the virtual clock with a candidate hardware profile, and its mean over
//! several trace orders.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use engine::{Engine, GpuSpec, ModelSpec};
use serde_json::Value;

use super::PointError;
use crate::metrics::{PointContext, Summary};
use crate::plan::PlanPoint;
use crate::results::Status;
use crate::targets::sim::SimError;
use crate::workload::TracePlan;

/// Runs one plan point on the virtual clock with an explicit hardware profile; its summary.
pub fn simulate_point(
    point: &PlanPoint,
    gpu: &GpuSpec,
    model: Option<&str>,
    pool: &[Arc<TracePlan>],
    seed: u64,
    duration_s: Option<f64>,
) -> Result<Summary, PointError> {
    simulate_point_timed(point, gpu, model, pool, seed, duration_s).0
}

/// The engine a point's recipe launches (its server and router flags) with hardware profile
/// `gpu` and the model profile `model`, else the recipe's.
fn point_engine(point: &PlanPoint, gpu: &GpuSpec, model: Option<&str>, seed: u64) -> Result<Engine, PointError> {
    let launch = point.launch.as_ref().ok_or(PointError::NoLaunch)?;
    // The flags as `sweep run` reads them; the fit reports only the flag error itself.
    let cfg = crate::targets::sim::engine_config(launch).map_err(|e| match e {
        SimError::Args { message, .. } | SimError::RouterArgs { message, .. } => PointError::Flags(message),
        other => PointError::Flags(other.to_string()),
    })?;
    let name = model
        .map(str::to_string)
        .or_else(|| cfg.model_path.clone())
        .or_else(|| point.row.get("model").and_then(Value::as_str).map(str::to_string))
        .ok_or(PointError::NoModel)?;
    let m = ModelSpec::lookup(&name).map_err(|e| PointError::Model(e.to_string()))?;
    Engine::new(cfg, m, gpu.clone(), seed).map_err(|e| PointError::Engine(e.to_string()))
}

/// [`simulate_point`] with the seconds spent in its three stages: setup (engine, trace filter,
/// workload), replay on the virtual clock, and the aggregate.
pub fn simulate_point_timed(
    point: &PlanPoint,
    gpu: &GpuSpec,
    model: Option<&str>,
    pool: &[Arc<TracePlan>],
    seed: u64,
    duration_s: Option<f64>,
) -> (Result<Summary, PointError>, [f64; 3]) {
    let mut t = [0.0; 3];
    let t0 = std::time::Instant::now();
    let mut engine = match point_engine(point, gpu, model, seed) {
        Ok(x) => x,
        Err(e) => return (Err(e), t),
    };
    t[0] = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let ctx = PointContext {
        identity: crate::run::identity(point),
        num_gpus: point.gpus.max(1),
        result_kind: "predicted".into(),
        seed,
        concurrency: point.conc,
        ..Default::default()
    };
    let cfg = crate::targets::sim::workload_config(point, seed, duration_s);
    let out = crate::targets::sim::run_point(&mut engine, pool, cfg, ctx, &AtomicBool::new(false), |_| {});
    t[1] = t1.elapsed().as_secs_f64();
    let t2 = std::time::Instant::now();
    let r = if out.status != Status::Done {
        Err(PointError::Ended(out.status))
    } else {
        match crate::metrics::aggregate(&out.records, &out.ctx) {
            Err(e) => Err(PointError::Aggregate(e.to_string())),
            Ok((_, s)) if s.requests_ok == 0 => Err(PointError::NoSuccess),
            Ok((_, s)) => Ok(s),
        }
    };
    t[2] = t2.elapsed().as_secs_f64();
    (r, t)
}

/// The pool read from the `k`-th of `orders` evenly spaced starting traces. AgentX hands traces
/// to lanes in file order, so a low-concurrency point replays only the first few sessions
/// (TP4 c1: about 7 in an hour); other orders are other, equally likely samples of the set.
pub fn rotated(pool: &[Arc<TracePlan>], k: usize, orders: usize) -> Vec<Arc<TracePlan>> {
    if pool.is_empty() || orders <= 1 {
        return pool.to_vec();
    }
    let off = (k % orders) * pool.len() / orders;
    pool[off..].iter().chain(&pool[..off]).cloned().collect()
}

/// The mean of every compared metric over several summaries of one point (other fields: the
/// first summary's).
pub fn mean_summary(v: &[Summary]) -> Option<Summary> {
    let mut out = v.first()?.clone();
    let n = v.len() as f64;
    let mean = |f: &dyn Fn(&Summary) -> f64| v.iter().map(f).sum::<f64>() / n;
    out.tput_per_gpu = mean(&|s| s.tput_per_gpu);
    out.e2el.p75 = mean(&|s| s.e2el.p75);
    out.e2el.p90 = mean(&|s| s.e2el.p90);
    out.intvty_p90 = mean(&|s| s.intvty_p90);
    out.ttft.p50 = mean(&|s| s.ttft.p50);
    out.ttft.p90 = mean(&|s| s.ttft.p90);
    out.ttft.p99 = mean(&|s| s.ttft.p99);
    out.requests_ok = v.iter().map(|s| s.requests_ok).sum();
    out.requests_error = v.iter().map(|s| s.requests_error).sum();
    Some(out)
}

/// [`simulate_point`] over `orders` trace orders ([`rotated`]), each compared metric averaged;
/// any failed order fails the point.
pub fn simulate_point_orders(
    point: &PlanPoint,
    gpu: &GpuSpec,
    model: Option<&str>,
    pool: &[Arc<TracePlan>],
    seed: u64,
    duration_s: Option<f64>,
    orders: usize,
) -> Result<Summary, PointError> {
    let orders = orders.max(1);
    let mut v = Vec::with_capacity(orders);
    for k in 0..orders {
        v.push(simulate_point(point, gpu, model, &rotated(pool, k, orders), seed, duration_s)?);
    }
    mean_summary(&v).ok_or(PointError::NoTraceOrder)
}
