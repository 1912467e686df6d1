//! The virtual-clock target: one discrete-event loop drives the AgentX [`Workload`] and the
//! reference [`Engine`] together, in process, on virtual nanoseconds.
//!
//! Both sides are sans-IO state machines, so the loop only decides which happens next: an engine
//! step ending (tokens, finished requests), a workload timer, or an immediate refusal (a submit
//! error such as a context overflow). Prompts travel as chained 64-token page hashes
//! ([`PageHashCache`] reuses a conversation's previous turn, so only new pages are hashed);
//! no token vector is ever built. Engine outputs become [`Record`]s exactly the way an HTTP client
//! would see them: first token, last chunk, end, and token counts from the finish event's usage.
//!
//! The same seed and inputs give byte-identical records.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::{Engine, EngineConfig, FinishReason, GpuSpec, ModelSpec, Output, SubmitError, Time};
use serde_json::{Map, Value, json};

use super::ledger::{Close, Command, Ledger};
pub use super::pools::{fit_pool, trace_max_tokens};
use crate::metrics::PointContext;
use crate::prompt::{PAGE_TOKENS, PageHashCache};
use crate::recipe::serving::Launch;
use crate::records::{Record, RecordError};
use crate::results::Status;
use crate::run::{Job, Outcome as PointOutcome, PointRunner};
use crate::workload::{Action, Event, Failure, Machine, Outcome as WlOutcome, RequestId, RequestSpec, TracePlan, Workload, WorkloadConfig};

const SEC: u64 = 1_000_000_000;

/// Why a point could not be set up on the reference engine.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("point has no resolved server command (recipe missing for its config key?)")]
    NoLaunch,
    #[error("server command `{}`: {message}", crate::problem::excerpt_words(.command))]
    Args { command: String, message: String },
    #[error("router command `{}`: {message}", crate::problem::excerpt_words(.command))]
    RouterArgs { command: String, message: String },
    #[error("{0}")]
    Profile(String),
    #[error("engine configuration: {0}")]
    Config(String),
    #[error("workload: {0}")]
    Workload(String),
}

/// Drops the program part of a command line (`python3 -m sglang.launch_server`,
/// `sweep engine serve`, …): everything before the first `--flag`.
pub(crate) fn flags_only(argv: &[String]) -> &[String] {
    let i = argv.iter().position(|a| a.starts_with("--")).unwrap_or(argv.len());
    &argv[i..]
}

pub use super::profiles::{best_for_runner, best_hardware, hardware_for_runner, hardware_kind};

/// Profile choices for building an engine; `None` = derive from the point.
#[derive(Clone, Debug, Default)]
pub struct ProfileChoice {
    /// Model profile name, alias, HF path or `.yaml` file (default: `--model-path`, else the row's `model`).
    pub model: Option<String>,
    /// Hardware profile name or `.yaml` file (default: from the row's `runner`).
    pub hardware: Option<String>,
}

/// Builds the reference engine for a resolved launch (SGLang argv + env, optional router).
/// `model_hint` / `runner` come from the master row when the choice leaves them open.
/// The engine configuration a point's server and router commands give: the flags `sweep run`
/// accepts, and what `sweep validate` checks.
pub fn engine_config(launch: &Launch) -> Result<EngineConfig, SimError> {
    let argv = flags_only(&launch.worker_argv);
    let mut cfg = EngineConfig::from_args(argv, &launch.env)
        .map_err(|e| SimError::Args { command: launch.worker_argv.join(" "), message: e.to_string() })?;
    if let Some(r) = &launch.router_argv {
        cfg = cfg.with_router_args(flags_only(r)).map_err(|e| SimError::RouterArgs { command: r.join(" "), message: e.to_string() })?;
    }
    Ok(cfg)
}

pub fn build_engine(
    launch: &Launch,
    model_hint: Option<&str>,
    runner: Option<&str>,
    choice: &ProfileChoice,
    seed: u64,
) -> Result<Engine, SimError> {
    let cfg = engine_config(launch)?;
    let model_name =
        choice.model.clone().or_else(|| cfg.model_path.clone()).or_else(|| model_hint.map(str::to_string)).ok_or_else(|| {
            SimError::Profile("no model: the command has no --model-path and the row no `model`; pass --model NAME".into())
        })?;
    let model = ModelSpec::lookup(&model_name).map_err(|e| SimError::Profile(e.to_string()))?;
    let gpu = match (&choice.hardware, runner) {
        (Some(h), _) => GpuSpec::lookup(h).map_err(|e| SimError::Profile(e.to_string()))?,
        (None, Some(r)) => best_for_runner(r, Some(&model))?,
        (None, None) => return Err(SimError::Profile("no hardware: the point has no `runner`; pass --hardware NAME".into())),
    };
    Engine::new(cfg, model, gpu, seed).map_err(|e| SimError::Config(e.to_string()))
}

/// The engine's identity for results: profiles and the modelled / not-modelled flag split.
pub fn profiles_json(engine: &Engine) -> Value {
    let i = engine.info();
    json!({
        "engine": "sweep reference engine",
        "model_profile": i.model_profile,
        "hardware_profile": i.hardware_profile,
        "hardware_profile_kind": GpuSpec::lookup(&i.hardware_profile).map(|g| hardware_kind(&g)).unwrap_or("file"),
        // How far the profile was from published points of its GPU when it was made.
        "hardware_profile_standing": GpuSpec::lookup(&i.hardware_profile).ok().map(|g| super::profiles::profile_residuals(&g)),
        "cost_calibrated": i.cost_calibrated,
        "unconfirmed_model_facts": i.unconfirmed_model_facts,
        "tp_size": i.tp_size,
        "attn_dp_size": i.attn_dp_size,
        "ep_size": i.ep_size,
        "modelled_flags": i.modelled_flags,
        "front_end_flags": i.front_end_flags,
        "accepted_not_modelled_flags": i.accepted_not_modelled_flags,
        "unknown_flags": i.unknown_flags,
        "warnings": i.warnings,
    })
}

/// Server-side metrics at the end of a point, named as SGLang's `/metrics` would name them.
pub fn server_metrics_json(engine: &Engine, elapsed_ns: u64) -> Value {
    let s = engine.stats();
    let busy = if elapsed_ns > 0 { s.busy_time.0 as f64 / elapsed_ns as f64 } else { 0.0 };
    json!({
        "present": true,
        "source": "reference engine (virtual clock)",
        "cache_hit_rate": s.cache_hit_rate,
        "prompt_tokens_total": s.prompt_tokens_total,
        "cached_tokens_total": s.cached_tokens_total,
        "generation_tokens_total": s.generation_tokens_total,
        "num_requests_total": s.num_requests_total,
        "num_aborted_requests_total": s.num_aborted_requests_total,
        "num_retracted_requests_total": s.num_retracted_requests_total,
        "evicted_tokens_total": s.evicted_tokens_total,
        "token_usage": s.token_usage,
        "avg_spec_accept_length": s.avg_spec_accept_length,
        "spec_verify_calls_total": s.spec_verify_calls_total,
        "prefill_batches": s.prefill_batches,
        "decode_iterations": s.decode_iterations,
        "busy_fraction": busy,
        "sglang:cache_hit_rate": s.cache_hit_rate,
        "sglang:token_usage": s.token_usage,
        "sglang:spec_accept_length": s.avg_spec_accept_length,
        "kv": {
            "source": "engine",
            "pool_tokens": s.kv.pool_tokens,
            "pool_tokens_per_rank": s.kv.pool_tokens_per_rank,
            "ranks": s.kv.ranks,
            "peak_used_tokens": s.kv.peak_used_tokens,
            "peak_occupied_tokens": s.kv.peak_occupied_tokens,
            "peak_token_usage": s.kv.peak_token_usage,
            "evicted_tokens": s.kv.evicted_tokens,
            "reprefilled_tokens": s.kv.reprefilled_tokens(),
            "reprefill_evicted_tokens": s.kv.reprefill_evicted_tokens,
            "retraction_recompute_tokens": s.kv.retraction_recompute_tokens,
            "retractions": s.kv.retractions,
            "prefix_hit_rate": s.kv.prefix_hit_rate,
            "ideal_prefix_hit_rate": s.kv.ideal_prefix_hit_rate,
        },
    })
}

pub use super::ledger::Progress;

/// What a virtual-clock run produced.
#[derive(Debug)]
pub struct SimRun {
    pub records: Vec<Record>,
    /// How the workload ended; `None` when interrupted.
    pub outcome: Option<WlOutcome>,
    /// (profiling start, deadline), virtual ns.
    pub profiling: Option<(u64, u64)>,
    pub end_ns: u64,
    pub interrupted: bool,
    /// Loop iterations (workload events delivered).
    pub events: u64,
    /// The engine's state every [`SAMPLE_NS`] of virtual time.
    pub gauges: Gauges,
    /// One GPU's energy counter (`Engine::gpu_energy_j`) when profiling started and ended.
    pub energy_marks: super::energy::EnergyMarks,
}

/// How often the engine's state is sampled: 360 samples over an hour-long point.
pub const SAMPLE_NS: u64 = 10 * SEC;

/// The engine's queues, KV use and token counters sampled on the virtual clock (the time series
/// of a point's report page, `timeseries.json`). Times are on the records' clock.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Gauges {
    pub t_ns: Vec<u64>,
    pub running: Vec<u32>,
    pub queued: Vec<u32>,
    /// KV tokens held by requests (used − evictable), summed over ranks.
    pub kv_used_tokens: Vec<u64>,
    /// Idle cached KV tokens (evictable), summed over ranks.
    pub kv_cached_tokens: Vec<u64>,
    /// The fullest rank's share of its pool in use by requests (SGLang's `token_usage`).
    pub kv_usage: Vec<f64>,
    pub prompt_tokens_total: Vec<u64>,
    pub generation_tokens_total: Vec<u64>,
    /// The pool over every rank.
    pub kv_capacity_tokens: u64,
    #[serde(skip)]
    next_ns: u64,
}

impl Gauges {
    /// Samples every boundary up to `t` (the engine's state holds until its next event).
    fn until(&mut self, engine: &Engine, t: u64) {
        if self.next_ns > t {
            return;
        }
        let s = engine.stats();
        while self.next_ns <= t {
            self.t_ns.push(self.next_ns);
            self.running.push(s.num_running);
            self.queued.push(s.num_queued);
            self.kv_used_tokens.push(s.ranks.iter().map(|r| r.used_tokens).sum());
            self.kv_cached_tokens.push(s.ranks.iter().map(|r| r.evictable_tokens).sum());
            self.kv_usage.push(s.token_usage);
            self.prompt_tokens_total.push(s.prompt_tokens_total);
            self.generation_tokens_total.push(s.generation_tokens_total);
            self.kv_capacity_tokens = s.ranks.iter().map(|r| r.capacity_tokens).sum();
            self.next_ns += SAMPLE_NS;
        }
    }

    /// `timeseries.json`.
    pub fn json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        v["source"] = json!("reference engine (virtual clock)");
        v["interval_s"] = json!(SAMPLE_NS / SEC);
        v
    }
}

/// Runs `wl` against `engine` to the end (or until `cancel` is set), from virtual time 0.
pub fn simulate(engine: &mut Engine, wl: &mut dyn Machine, cancel: &AtomicBool, mut progress: impl FnMut(&Progress)) -> SimRun {
    let cap = (wl.concurrency() as usize) * 8 + 64;
    let mut sim = Sim {
        engine,
        ledger: Ledger::new(),
        immediate: VecDeque::new(),
        outq: VecDeque::new(),
        outs: Vec::new(),
        hashes: PageHashCache::new(PAGE_TOKENS, cap),
        now: 0,
        gauges: Gauges::default(),
    };
    let mut actions: Vec<Action> = Vec::new();
    let mut commands: Vec<Command> = Vec::new();
    let mut event = Event::Start;
    let mut run = SimRun {
        records: Vec::new(),
        outcome: None,
        profiling: None,
        end_ns: 0,
        interrupted: false,
        events: 0,
        gauges: Gauges::default(),
        energy_marks: super::energy::EnergyMarks::default(),
    };
    loop {
        actions.clear();
        wl.handle(sim.now, event, &mut actions);
        run.events += 1;
        for a in &actions {
            run.energy_marks.see(sim.engine, a);
        }
        sim.ledger.apply(sim.now, &mut actions, &mut commands);
        for c in commands.drain(..) {
            match c {
                Command::Send(spec) => sim.submit(&spec),
                Command::Cancel(id) => {
                    sim.engine.abort(Time(sim.now), id);
                }
            }
        }
        if sim.ledger.is_finished() {
            break;
        }
        if run.events % 512 == 1 {
            sim.ledger.progress.now_ns = sim.now;
            progress(&sim.ledger.progress);
            if cancel.load(Ordering::Relaxed) {
                run.interrupted = true;
                break;
            }
        }
        match sim.next_event() {
            Some(e) => event = e,
            None => break,
        }
    }
    sim.finish(run, progress)
}

/// The loop's state between workload events: the engine, the ledger, and what the engine has
/// produced or refused but the workload has not seen yet.
struct Sim<'e> {
    engine: &'e mut Engine,
    ledger: Ledger,
    /// Requests the engine refused at submission, reported before anything else.
    immediate: VecDeque<(RequestId, Failure)>,
    /// Engine outputs not read yet.
    outq: VecDeque<Output>,
    outs: Vec<Output>,
    hashes: PageHashCache,
    now: u64,
    gauges: Gauges,
}

impl Sim<'_> {
    /// Submits a request to the engine as chained page hashes; a refusal (a context overflow,
    /// an invalid request) closes its record and becomes an immediate failure.
    fn submit(&mut self, spec: &RequestSpec) {
        let page_hashes: Arc<[u64]> = self.hashes.page_hashes(&spec.prompt);
        let prompt = engine::Prompt::from_chained(page_hashes, PAGE_TOKENS as u32, spec.prompt.total_tokens())
            .expect("page hashes cover every full page");
        let max_new = spec.max_tokens.clamp(1, u32::MAX as u64) as u32;
        if let Err(e) = self.engine.submit(Time(self.now), engine::Request::new(spec.id, prompt, max_new)) {
            let (kind, failure) = match e {
                SubmitError::PromptTooLong { .. } | SubmitError::ContextExceeded { .. } | SubmitError::ExceedsKvPool { .. } => {
                    ("context_overflow".to_string(), Failure::ContextOverflow)
                }
                _ => (format!("http_{}", e.status_code()), Failure::Error),
            };
            if let Some(r) = self.ledger.open_record(spec.id) {
                r.error = Some(RecordError { kind, message: e.to_string(), status: Some(e.status_code()) });
            }
            self.ledger.end(spec.id, None);
            self.immediate.push_back((spec.id, failure));
        }
    }

    /// The next event: an immediate refusal, else the next engine output that ends a request,
    /// else the earlier of the engine's next step boundary and the workload's wake (engine first
    /// on ties, so completions are seen before timers of the same instant); `None` when nothing
    /// is left to happen.
    fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some((id, f)) = self.immediate.pop_front() {
                return Some(Event::Failed(id, f));
            }
            if let Some(o) = self.outq.pop_front() {
                match self.read_output(o) {
                    Some(e) => return Some(e),
                    None => continue,
                }
            }
            let te = self.engine.next_event_time().map(|t| t.0);
            let wake = self.ledger.wake();
            let engine_first = match (te, wake) {
                (Some(t), Some(w)) => t <= w,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if let Some(t) = if engine_first { te } else { wake } {
                self.gauges.until(self.engine, t);
            }
            match (te, wake) {
                (Some(t), _) if engine_first => {
                    self.engine.advance(Time(t), &mut self.outs);
                    self.now = self.now.max(t);
                    self.outq.extend(self.outs.drain(..));
                }
                (_, Some(w)) => {
                    self.now = self.now.max(w);
                    self.ledger.woke();
                    return Some(Event::Wake);
                }
                _ => return None,
            }
        }
    }

    /// An engine output into its request's record, as an HTTP client would see it; the event
    /// when it ends the request.
    fn read_output(&mut self, o: Output) -> Option<Event> {
        match o {
            Output::Tokens { id, time, first, .. } => {
                if let Some(r) = self.ledger.open_record(id) {
                    if first {
                        r.first_token_ns = Some(time.0);
                    }
                    r.note_chunk_gap(time.0);
                    r.last_chunk_ns = Some(time.0);
                    r.chunks += 1;
                }
                None
            }
            Output::Finished { id, time, reason, usage, error } => {
                let r = self.ledger.open_record(id)?;
                self.now = self.now.max(time.0);
                r.end_ns = time.0;
                r.input_tokens = Some(usage.prompt_tokens);
                r.output_tokens = Some(usage.completion_tokens);
                r.cached_tokens = Some(usage.cached_tokens);
                let err = match (error, reason) {
                    (Some(e), _) => Some(e.to_string()),
                    (None, FinishReason::Abort) => Some("request aborted by the server".to_string()),
                    _ => None,
                };
                let failed = err.is_some();
                if let Some(m) = err {
                    r.error = Some(RecordError { kind: "server_error".into(), message: m, status: Some(500) });
                }
                self.ledger.end(id, None);
                Some(if failed { Event::Failed(id, Failure::Error) } else { Event::Completed(id) })
            }
        }
    }

    /// The run's records (requests still open at an interruption are recorded as cancelled),
    /// outcome and end, and a last progress report.
    fn finish(mut self, mut run: SimRun, mut progress: impl FnMut(&Progress)) -> SimRun {
        run.profiling = self.ledger.window_at(self.now);
        run.outcome = self.ledger.outcome.take();
        let mut prog = self.ledger.progress;
        run.records = self.ledger.finish(self.now, Close::Cancelled);
        run.end_ns = self.now;
        self.gauges.until(self.engine, self.now);
        run.gauges = self.gauges;
        prog.now_ns = self.now;
        progress(&prog);
        run
    }
}

/// Workload settings for a point: its duration and warmup, overridable.
pub fn workload_config(point: &crate::plan::PlanPoint, seed: u64, duration_s: Option<f64>) -> WorkloadConfig {
    let d = duration_s.or(point.duration_s.map(|d| d as f64)).unwrap_or(3600.0);
    let mut cfg = WorkloadConfig {
        concurrency: point.conc.max(1),
        seed,
        run_id: point.id.clone(),
        duration_ns: (d.max(0.0) * SEC as f64).round() as u64,
        ..WorkloadConfig::default()
    };
    if let Some(w) = point.warmup_per_lane {
        cfg.warmup_requests_per_lane = w;
    }
    cfg
}

/// Runs plan points on the reference engine on the virtual clock.
pub struct SimRunner {
    /// The trace set each point replays.
    pub pools: Arc<super::pools::PointPools>,
    /// Overrides every point's profiling duration (seconds).
    pub duration_s: Option<f64>,
    pub profiles: ProfileChoice,
    /// Points run at once.
    pub jobs: usize,
}

impl SimRunner {
    /// Every point replays `pool`, recorded as `trace_set`.
    pub fn new(pool: Vec<Arc<TracePlan>>, trace_set: String) -> Self {
        Self::with_pools(Arc::new(super::pools::PointPools::fixed(pool, trace_set)))
    }

    pub fn with_pools(pools: Arc<super::pools::PointPools>) -> Self {
        let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        SimRunner { pools, duration_s: None, profiles: ProfileChoice::default(), jobs }
    }

    fn context(&self, job: &Job) -> PointContext {
        let p = &job.point;
        PointContext {
            identity: crate::run::identity(p),
            num_gpus: p.gpus.max(1),
            result_kind: "predicted".into(),
            profiles: Value::Null,
            target: "sim".into(),
            seed: job.seed,
            concurrency: p.conc,
            ..Default::default()
        }
    }
}

fn row_str<'a>(row: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    row.get(k).and_then(Value::as_str)
}

impl PointRunner for SimRunner {
    fn max_parallel(&self) -> usize {
        self.jobs.max(1)
    }

    fn run(&self, job: &Job) -> PointOutcome {
        let mut ctx = self.context(job);
        let fail = |ctx: PointContext, reason: String| PointOutcome { status: Status::Failed { reason }, records: Vec::new(), ctx };
        let p = &job.point;
        let Some(launch) = &p.launch else { return fail(ctx, SimError::NoLaunch.to_string()) };
        let mut engine = match build_engine(launch, row_str(&p.row, "model"), row_str(&p.row, "runner"), &self.profiles, job.seed) {
            Ok(e) => e,
            Err(e) => return fail(ctx, e.to_string()),
        };
        if let Some(cfg) = super::fixed::point_config(p) {
            return match cfg {
                Ok(cfg) => super::fixed::run_point(&mut engine, cfg, ctx, &job.cancel, |_| {}),
                Err(e) => fail(ctx, e.to_string()),
            };
        }
        let set = match self.pools.pool_for(p) {
            Ok(s) => s,
            Err(e) => return fail(ctx, e.to_string()),
        };
        ctx.trace_set = set.trace_set.clone();
        run_point(&mut engine, &set.plans, workload_config(p, job.seed, self.duration_s), ctx, &job.cancel, |_| {})
    }

    /// The reference engine generates no real tokens: an eval is recorded as not applicable,
    /// never scored.
    fn run_eval(&self, job: &crate::run::EvalJob) -> crate::run::EvalOutcome {
        crate::eval::point::not_applicable(job, crate::eval::write::SIMULATED)
    }
}

/// One point on the virtual clock, the same for `sweep run`, `sweep replay --engine`, the fit and
/// the twin: the trace pool filtered at the engine's context length, the workload, the simulation
/// and the outcome, with the profiles and trace set named in `ctx`.
pub fn run_point(
    engine: &mut Engine,
    pool: &[Arc<TracePlan>],
    cfg: WorkloadConfig,
    mut ctx: PointContext,
    cancel: &AtomicBool,
    progress: impl FnMut(&Progress),
) -> PointOutcome {
    ctx.profiles = profiles_json(engine);
    ctx.benchmark_id = cfg.run_id.clone();
    let fail = |ctx: PointContext, reason: String| PointOutcome { status: Status::Failed { reason }, records: Vec::new(), ctx };
    let pool = match fit_pool(pool, engine.limits().context_length) {
        Ok((pool, note)) => {
            if let Some(n) = note {
                ctx.trace_set = format!("{} ({n})", ctx.trace_set);
            }
            pool
        }
        Err(e) => return fail(ctx, e.to_string()),
    };
    let mut wl = match Workload::new(cfg, pool) {
        Ok(w) => w,
        Err(e) => return fail(ctx, SimError::Workload(e.to_string()).to_string()),
    };
    let run = simulate(engine, &mut wl, cancel, progress);
    sim_outcome(run, engine, ctx)
}

/// Turns a finished simulation into a point outcome (status, records, context).
pub fn sim_outcome(run: SimRun, engine: &Engine, mut ctx: PointContext) -> PointOutcome {
    ctx.profile_duration_s = run.profiling.map(|(a, d)| (d - a) as f64 / 1e9).unwrap_or(0.0);
    ctx.profile_start_ns = run.profiling.map(|p| p.0);
    ctx.server_metrics = Some(server_metrics_json(engine, run.end_ns));
    ctx.timeseries = Some(run.gauges.json());
    ctx.power = super::energy::predicted_power(&run, engine, ctx.num_gpus);
    let status =
        super::point_status(run.interrupted, run.outcome.as_ref(), &mut ctx, "the workload stopped before finishing (nothing left to run)");
    PointOutcome { status, records: run.records, ctx }
}
