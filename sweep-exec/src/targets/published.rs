//! A published point (`shared/data/published/points.yaml`) on the virtual clock: the engine built
//! from the point's own server flags and environment with a given hardware profile, the point's
//! scenario run (InferenceX's fixed-length client, or the AgentX replay), and the dashboard's four
//! metrics computed from the records as InferenceX computes them for that scenario.
//!
//! Shared by `sweep predict --points` and the joint fit (`sweep calibrate fit --points`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use engine::{Engine, GpuSpec, ModelSpec};

use crate::metrics::{self, PointContext};
use crate::published::{PublishedConfig, PublishedPoint};
use crate::recipe::serving::Launch;
use crate::workload::fixed::FixedConfig;
use crate::workload::{TracePlan, WorkloadConfig};

/// Why a published point has no prediction. Cloned into every evaluation of a joint fit, so the
/// sources underneath are kept as their messages.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PublishedError {
    /// The point's server flags are not the engine's.
    #[error("{0}")]
    Flags(String),
    /// The engine refuses the configuration (memory, parallelism).
    #[error("engine configuration: {0}")]
    Engine(String),
    #[error("{0} is an AgentX point and no trace set was given")]
    NoTraces(String),
    /// The point ran and failed (the run's reason).
    #[error("{0}")]
    Failed(String),
    /// The records do not aggregate.
    #[error("{0}")]
    Aggregate(String),
}

/// The dashboard metrics of one simulated point, keyed as `published::METRICS`.
pub type Metrics = BTreeMap<String, f64>;

/// The trace set an AgentX point replays: `traces`, else the model family's corpus.
pub fn trace_spec(model: &ModelSpec, traces: Option<&str>) -> String {
    traces.map(str::to_string).unwrap_or_else(|| super::pools::family_corpus(&model.family).to_string())
}

/// The engine the point's server command describes, on `gpu`.
pub fn engine(c: &PublishedConfig, p: &PublishedPoint, model: &ModelSpec, gpu: &GpuSpec, seed: u64) -> Result<Engine, PublishedError> {
    let mut argv = vec!["--model-path".to_string(), c.model.clone()];
    argv.extend(p.args.iter().cloned());
    let launch = Launch {
        arm: String::new(),
        conc: p.conc,
        worker_argv: argv,
        env: p.env.clone(),
        router_argv: None,
        router_env: Default::default(),
        golden_al: None,
        client_args: Vec::new(),
    };
    let cfg = super::sim::engine_config(&launch).map_err(|e| PublishedError::Flags(e.to_string()))?;
    Engine::new(cfg, model.clone(), gpu.clone(), seed).map_err(|e| PublishedError::Engine(e.to_string()))
}

/// Runs the point on `engine` and returns its metrics. `pool` is the AgentX trace set (unused by
/// fixed-length points); `duration_s` bounds an AgentX point's profiling window.
pub fn simulate(
    c: &PublishedConfig,
    p: &PublishedPoint,
    mut engine: Engine,
    pool: Option<(&str, &Arc<Vec<Arc<TracePlan>>>)>,
    seed: u64,
    duration_s: f64,
) -> Result<Metrics, PublishedError> {
    let ctx = PointContext {
        num_gpus: p.gpus.or(c.gpus).unwrap_or(1),
        concurrency: p.conc,
        result_kind: "predicted".into(),
        target: "sim".into(),
        seed,
        ..Default::default()
    };
    let cancel = AtomicBool::new(false);
    let o = match (p.isl, p.osl) {
        (Some(isl), Some(osl)) if c.scenario == "fixed-seq-len" => {
            super::fixed::run_point(&mut engine, FixedConfig::inferencex(isl, osl, p.conc), ctx, &cancel, |_| {})
        }
        _ => {
            let (spec, pool) = pool.ok_or_else(|| PublishedError::NoTraces(c.key.clone()))?;
            let cfg = WorkloadConfig {
                concurrency: p.conc.max(1),
                seed,
                run_id: format!("{}-c{}", c.key, p.conc),
                duration_ns: (duration_s * 1e9) as u64,
                ..WorkloadConfig::default()
            };
            let mut ctx = ctx;
            ctx.trace_set = spec.to_string();
            super::sim::run_point(&mut engine, pool, cfg, ctx, &cancel, |_| {})
        }
    };
    if let crate::results::Status::Failed { reason } = &o.status {
        return Err(PublishedError::Failed(reason.clone()));
    }
    let (agg, s) = metrics::aggregate(&o.records, &o.ctx).map_err(|e| PublishedError::Aggregate(e.to_string()))?;
    let bs = &agg["benchmark_serving"];
    let mut m = Metrics::new();
    m.insert("tput_total_per_gpu".into(), s.tput_per_gpu);
    m.insert("tput_out_per_gpu".into(), s.output_tput_per_gpu);
    match bs.as_object() {
        Some(_) => {
            m.insert("ttft_mean_ms".into(), bs["mean_ttft_ms"].as_f64().unwrap_or(f64::NAN));
            m.insert("tpot_mean_ms".into(), bs["mean_tpot_ms"].as_f64().unwrap_or(f64::NAN));
        }
        // InferenceX's agentic aggregation fills "TPOT" with the per-request inter-token latency.
        None => {
            m.insert("ttft_mean_ms".into(), s.ttft.mean * 1e3);
            m.insert("tpot_mean_ms".into(), s.itl.mean * 1e3);
        }
    }
    Ok(m)
}
