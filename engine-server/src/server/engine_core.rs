//! The SGLang-faithful [`Engine`] behind the HTTP shell's [`Core`] interface.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::driver::{Core, CoreError, CoreEvent, CoreFinish, CoreRequest, CoreStats, Nanos, ReqId};
use engine::core::{Engine, FinishReason, Output, Request, RequestError};
use engine::prompt::Prompt;
use engine::time::Time;
use engine::{EngineConfig, GpuSpec, ModelSpec};

/// Errors building the engine from flags.
#[derive(Debug, thiserror::Error)]
pub enum EngineSetupError {
    #[error(transparent)]
    Args(#[from] engine::args::ArgsError),
    #[error("no engine model profile for {model:?}: {source}; pass --engine-model <profile name or .yaml>")]
    Model { model: String, source: engine::profiles::ProfileError },
    #[error("hardware profile {name:?}: {source}; pass --hardware <profile name or .yaml>")]
    Hardware { name: String, source: engine::profiles::ProfileError },
    #[error(transparent)]
    Config(#[from] engine::limits::ConfigError),
}

/// The engine plus what the shell needs to report it.
pub struct EngineCore {
    engine: Engine,
    page: u32,
    seed: u64,
    out: Vec<Output>,
}

/// The variables handed to the engine: SGLang's and the runtime ones recipes set
/// (the rest of the process environment is none of its business).
pub fn engine_env(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.into_iter().filter(|(k, _)| ["SGLANG_", "SGL_", "NCCL_", "PYTORCH_", "CUDA_"].iter().any(|p| k.starts_with(p))).collect()
}

impl EngineCore {
    /// Builds the engine from SGLang argv (front-end and server-only flags already
    /// read), the environment, a model profile (by default the one matching
    /// `--model-path`) and a hardware profile.
    /// `router`: the sglang-router flags of a recipe whose router the engine models in process
    /// (empty: none).
    pub fn from_args(
        argv: &[String],
        router: &[String],
        env: &BTreeMap<String, String>,
        model_profile: Option<&str>,
        hardware: &str,
        seed: u64,
    ) -> Result<EngineCore, EngineSetupError> {
        let mut cfg = EngineConfig::from_args(argv, env)?;
        if !router.is_empty() {
            cfg = cfg.with_router_args(router)?;
        }
        let name =
            model_profile.map(str::to_string).or_else(|| cfg.model_path.clone()).unwrap_or_else(|| "deepseek-ai/DeepSeek-V4-Flash".into());
        let model = ModelSpec::lookup(&name).map_err(|source| EngineSetupError::Model { model: name.clone(), source })?;
        let gpu = GpuSpec::lookup(hardware).map_err(|source| EngineSetupError::Hardware { name: hardware.to_string(), source })?;
        Ok(EngineCore::new(Engine::new(cfg, model, gpu, seed)?, seed))
    }

    pub fn new(engine: Engine, seed: u64) -> EngineCore {
        let page = engine.limits().page_size;
        EngineCore { engine, page, seed, out: Vec::new() }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

fn to_core_error(e: &engine::core::SubmitError) -> CoreError {
    CoreError { status: e.status_code(), message: e.to_string() }
}

impl Core for EngineCore {
    fn submit(&mut self, now: Nanos, req: CoreRequest) -> Result<(), CoreError> {
        // Real ids hashed per page: equal prefixes share cache pages, as in SGLang.
        let prompt = Prompt::from_tokens(&req.input_ids, self.page).map_err(|e| CoreError { status: 500, message: e.to_string() })?;
        let clamp = |x: u64| x.min(u32::MAX as u64) as u32;
        let continuation =
            (!req.continuation_output.is_empty()).then(|| prompt.continuation_from_tokens(&req.input_ids, &req.continuation_output));
        let r = Request {
            id: req.id,
            prompt,
            max_new_tokens: req.max_new_tokens.map(clamp),
            ignore_eos: req.ignore_eos,
            eos_after: req.eos_after.map(clamp),
            continuation,
            dp_rank: req.dp_rank,
        };
        self.engine.submit(Time(now), r).map_err(|e| to_core_error(&e))
    }

    fn abort(&mut self, now: Nanos, id: ReqId) {
        self.engine.abort(Time(now), id);
    }

    fn next_event_time(&self) -> Option<Nanos> {
        self.engine.next_event_time().map(|t| t.0)
    }

    fn advance(&mut self, now: Nanos) -> Vec<CoreEvent> {
        self.out.clear();
        self.engine.advance(Time(now), &mut self.out);
        self.out
            .drain(..)
            .map(|o| match o {
                Output::Tokens { id, count, time, .. } => CoreEvent::Tokens { id, n: count, at: time.0 },
                Output::Finished { id, reason, usage, error, time } => match error {
                    Some(RequestError::OutOfMemory) => {
                        CoreEvent::Failed { id, error: CoreError { status: 503, message: RequestError::OutOfMemory.to_string() } }
                    }
                    _ => CoreEvent::Finished {
                        id,
                        reason: match reason {
                            FinishReason::Stop => CoreFinish::Stop,
                            FinishReason::Length => CoreFinish::Length,
                            FinishReason::Abort => CoreFinish::Abort,
                        },
                        cached_tokens: usage.cached_tokens,
                        queue_time: usage.queue_time.as_secs_f64(),
                        at: time.0,
                    },
                },
            })
            .collect()
    }

    fn flush_cache(&mut self) -> bool {
        self.engine.flush_cache()
    }

    fn refresh_idle(&mut self) {
        self.engine.sample_idle_gauges();
    }

    fn stats(&self) -> CoreStats {
        let s = self.engine.stats();
        let l = self.engine.limits();
        let g = &s.sampled;
        CoreStats {
            num_running_reqs: g.num_running_reqs as u64,
            num_queue_reqs: g.num_queue_reqs as u64,
            num_used_tokens: g.num_used_tokens,
            token_usage: g.token_usage,
            gen_throughput: g.gen_throughput,
            cache_hit_rate: g.cache_hit_rate,
            spec_accept_length: g.spec_accept_length,
            spec_accept_rate: g.spec_accept_rate,
            num_retracted_reqs: g.num_retracted_reqs as u64,
            is_cuda_graph: g.is_cuda_graph,
            max_total_num_tokens: l.max_total_num_tokens,
            context_length: l.context_length,
            max_req_input_len: l.max_req_input_len,
            live_requests: self.engine.live_requests() as u64,
            evicted_tokens_total: s.evicted_tokens_total,
            num_retracted_requests_total: s.num_retracted_requests_total,
            num_retracted_input_tokens_total: s.num_retracted_input_tokens_total,
            num_retracted_output_tokens_total: s.num_retracted_output_tokens_total,
        }
    }

    fn server_info(&self) -> Value {
        let e = &self.engine;
        let cfg = e.config();
        let l = e.limits();
        let s = e.stats();
        let mut v = match serde_json::to_value(cfg) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        // Flags and variables as given are reported separately (below).
        for k in ["flags", "env_records", "warnings", "env", "launch_command"] {
            v.remove(k);
        }
        let limits = serde_json::to_value(l).unwrap_or(Value::Null);
        if let Value::Object(lm) = &limits {
            for (k, x) in lm {
                v.insert(k.clone(), x.clone());
            }
        }
        let internal: Vec<Value> = s
            .ranks
            .iter()
            .enumerate()
            .map(|(i, r)| {
                json!({
                    "dp_rank": i,
                    "world_size": cfg.tp_size,
                    "effective_max_running_requests_per_dp": l.max_running_requests_per_dp,
                    "last_gen_throughput": s.sampled.gen_throughput,
                    "avg_spec_accept_length": s.avg_spec_accept_length,
                    "memory_usage": {
                        "weight": l.weight_bytes_per_gpu / 1e9,
                        "kvcache": l.kv_budget_bytes_per_gpu / 1e9,
                        "token_capacity": r.capacity_tokens,
                    },
                    "running": r.running,
                    "queued": r.queued,
                    "token_usage": r.token_usage,
                })
            })
            .collect();
        v.insert("internal_states".into(), Value::Array(internal));
        v.insert("avg_spec_accept_length".into(), json!(s.avg_spec_accept_length));
        v.insert("profiles".into(), json!({"model": e.model().name, "hardware": e.gpu().name}));
        v.insert("flags_by_status".into(), serde_json::to_value(cfg.flag_split()).unwrap_or(Value::Null));
        v.insert("engine_warnings".into(), json!(cfg.warnings));
        v.insert("engine_info".into(), serde_json::to_value(e.info()).unwrap_or(Value::Null));
        v.insert("engine_seed".into(), json!(self.seed));
        Value::Object(v)
    }
}
