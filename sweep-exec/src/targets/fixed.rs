//! What both drivers decide for a fixed-sequence-length point: its workload from the plan point,
//! the checks before any request is sent (prompts that cannot fit the server's context,
//! concurrency above its running-request limit), and the aggregate's scenario parameters.

use std::sync::atomic::AtomicBool;

use super::ledger::Progress;
use crate::metrics::{FixedMeta, PointContext};
use crate::plan::PlanPoint;
use crate::plan::matrix::Scenario;
use crate::results::Status;
use crate::run::Outcome as PointOutcome;
use crate::workload::fixed::{Api, FixedConfig, FixedError, FixedWorkload};

/// Why a fixed-length point cannot start: its plan row or the server's limits.
#[derive(Debug, thiserror::Error)]
pub enum FixedPointError {
    #[error("point {0}: a fixed-seq-len row needs `isl` and `osl`")]
    NoSeqLen(String),
    #[error("point {id}: {source}")]
    Invalid { id: String, source: FixedError },
    #[error(
        "ISL {isl} + OSL {osl} = {need} tokens exceed the server's context length of {context}: lower --isl/--osl or raise --context-length"
    )]
    TooLong { isl: u32, osl: u32, need: u64, context: u64 },
    #[error(transparent)]
    Workload(#[from] FixedError),
}

/// The fixed-length workload of a plan point (`None` for an AgentX point): its ISL and OSL, the
/// recipe's range ratio, InferenceX's prompt and warmup counts (`PlanPoint::fixed`).
pub fn point_config(p: &PlanPoint) -> Option<Result<FixedConfig, FixedPointError>> {
    if p.scenario != Scenario::FixedSeqLen {
        return None;
    }
    let Some(f) = p.fixed else {
        return Some(Err(FixedPointError::NoSeqLen(p.id.clone())));
    };
    let cfg = FixedConfig {
        range_ratio: f.random_range_ratio,
        num_prompts: f.num_prompts,
        num_warmups: f.num_warmups,
        ..FixedConfig::inferencex(f.isl, f.osl, p.conc.max(1))
    };
    Some(cfg.validate().map(|()| cfg).map_err(|source| FixedPointError::Invalid { id: p.id.clone(), source }))
}

/// Refuses a workload whose longest possible request (ISL + OSL) cannot fit the server's
/// context, before anything is sent; warns when the concurrency exceeds the server's running
/// requests (the rest queue: the point measures queueing too).
pub fn check_limits(cfg: &FixedConfig, context_length: Option<u64>, max_running: Option<u32>) -> Result<Option<String>, FixedPointError> {
    if let Some(context) = context_length {
        let need = u64::from(cfg.isl) + u64::from(cfg.osl);
        if need > context {
            return Err(FixedPointError::TooLong { isl: cfg.isl, osl: cfg.osl, need, context });
        }
    }
    Ok(max_running.filter(|&m| cfg.concurrency > m).map(|m| {
        format!(
            "concurrency {} is above the server's --max-running-requests {m}: {} requests will queue at the server",
            cfg.concurrency,
            cfg.concurrency - m
        )
    }))
}

/// What a fixed-length point "replays", in its results' `trace_set`.
pub fn trace_set(cfg: &FixedConfig) -> String {
    format!("random {}/{} (range ratio {})", cfg.isl, cfg.osl, cfg.range_ratio)
}

/// The aggregate's scenario parameters of `wl`.
pub fn meta(wl: &FixedWorkload, model_id: &str) -> FixedMeta {
    let cfg = wl.config();
    FixedMeta {
        isl: cfg.isl,
        osl: cfg.osl,
        range_ratio: cfg.range_ratio,
        num_prompts: cfg.num_prompts,
        num_warmups: cfg.num_warmups,
        seed: cfg.seed,
        backend: match cfg.api {
            Api::Completions => "vllm".into(),
            Api::Chat => "openai-chat".into(),
        },
        model_id: model_id.to_string(),
        input_lens: wl.drawn().map(|d| d.input_len).collect(),
        percentiles: crate::metrics::serving::DEFAULT_PERCENTILES.to_vec(),
        goodput: Default::default(),
    }
}

/// One fixed-length point on the virtual clock.
pub fn run_point(
    engine: &mut engine::Engine,
    cfg: FixedConfig,
    mut ctx: PointContext,
    cancel: &AtomicBool,
    progress: impl FnMut(&Progress),
) -> PointOutcome {
    ctx.profiles = super::sim::profiles_json(engine);
    ctx.benchmark_id = format!("random-{}-{}-c{}", cfg.isl, cfg.osl, cfg.concurrency);
    ctx.trace_set = trace_set(&cfg);
    let fail = |ctx: PointContext, reason: String| PointOutcome { status: Status::Failed { reason }, records: Vec::new(), ctx };
    let limits = engine.limits();
    match check_limits(&cfg, Some(limits.context_length), Some(limits.max_running_requests)) {
        Ok(Some(w)) => tracing::warn!("{w}"),
        Ok(None) => {}
        Err(e) => return fail(ctx, e.to_string()),
    }
    let mut wl = match FixedWorkload::new(cfg) {
        Ok(w) => w,
        Err(e) => return fail(ctx, e.to_string()),
    };
    let model = engine.info().model_profile.clone();
    ctx.fixed = Some(meta(&wl, &model));
    let run = super::sim::simulate(engine, &mut wl, cancel, progress);
    super::sim::sim_outcome(run, engine, ctx)
}
