//! The engine: a sans-IO, deterministic state machine reproducing SGLang's
//! scheduler (see the crate docs for the driving contract).
//!
//! This file holds the engine's state, the types it exchanges with its shell and the
//! driving calls (`new`, `advance`, `abort`); the scheduler's parts are `impl Engine`
//! blocks beside it: admission and DP routing (`admission.rs`), queue ordering
//! (`queue.rs`), KV accounting (`pool.rs`), prefill and decode batches (`prefill.rs`,
//! `decode.rs`), a step's launch and completion (`step.rs`), a request's end
//! (`finish.rs`), statistics (`stats.rs`, `kv_pressure.rs`).

use crate::args::EngineConfig;
use crate::cost::{CostModel, RankLoad};
use crate::kv::{IdealCache, NodeId, RadixTree, UnitKey};
use crate::limits::{ConfigError, Limits};
use crate::profiles::{GpuSpec, ModelSpec};
use crate::prompt::Prompt;
use crate::rng::Rng;
use crate::time::Time;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

mod admission;
mod decode;
mod finish;
mod kv_pressure;
mod pool;
mod prefill;
mod queue;
mod recv;
mod stats;
mod step;

pub use kv_pressure::KvStats;
pub use stats::{EngineInfo, EngineStats, RankStats, SampledGauges};

/// Caller-chosen request identifier (unique among live requests).
pub type RequestId = u64;

/// A generation request.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: RequestId,
    pub prompt: Prompt,
    /// `max_tokens` / `max_completion_tokens`; `None` = bounded by the context.
    pub max_new_tokens: Option<u32>,
    /// Generate exactly `max_new_tokens` (SGLang `ignore_eos`).
    pub ignore_eos: bool,
    /// The simulated model emits EOS after this many tokens (finish reason
    /// `stop`) unless `ignore_eos`; `None` = never.
    pub eos_after: Option<u32>,
    /// Chained hashes (same chain and block size as the prompt) of the full blocks
    /// that follow the prompt's full blocks once the output is appended, so that the
    /// cached output can match the next turn's prompt. Without it the output's KV is
    /// cached under hashes that match nothing.
    pub continuation: Option<Arc<[u64]>>,
    /// Pin to an attention-DP rank (SGLang `data_parallel_rank`).
    pub dp_rank: Option<u32>,
}

impl Request {
    /// A request generating exactly `max_new_tokens` (`ignore_eos`), the way
    /// benchmark clients send them.
    pub fn new(id: RequestId, prompt: Prompt, max_new_tokens: u32) -> Request {
        Request { id, prompt, max_new_tokens: Some(max_new_tokens), ignore_eos: true, eos_after: None, continuation: None, dp_rank: None }
    }
}

/// Why a request was refused at submission (the HTTP shell maps these to SGLang's
/// status codes and messages with [`SubmitError::status_code`] and `Display`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("The input ({input} tokens) is longer than the model's context length ({context} tokens).")]
    PromptTooLong { input: u64, context: u64 },
    #[error(
        "Requested token count exceeds the model's maximum context length of {context} tokens. You requested a total of {total} tokens: {input} tokens from the input messages and {max_new} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit."
    )]
    ContextExceeded { input: u64, max_new: u64, total: u64, context: u64 },
    #[error(
        "Input length ({input} tokens) exceeds the maximum allowed length ({max} tokens). Use a shorter input or enable --allow-auto-truncate."
    )]
    ExceedsKvPool { input: u64, max: u64 },
    #[error("The request queue is full.")]
    QueueFull,
    #[error("Messages cannot be empty.")]
    EmptyPrompt,
    #[error("request id {0} is already in use")]
    DuplicateId(RequestId),
    #[error(
        "prompt block size {got} is incompatible with page size {page}; use blocks that divide the page size or are a multiple of it, the same for every request ({expected} so far)"
    )]
    BlockSize { got: u32, page: u32, expected: u32 },
    #[error("data_parallel_rank {rank} out of range (attention-DP size {size})")]
    BadDpRank { rank: u32, size: u32 },
    #[error("submit at {now} but the engine has unprocessed events at {pending}; call advance({now}) first")]
    NotAdvanced { now: Time, pending: Time },
}

impl SubmitError {
    /// SGLang's HTTP status for this error.
    pub fn status_code(&self) -> u16 {
        match self {
            SubmitError::QueueFull => 503,
            SubmitError::DuplicateId(_) | SubmitError::NotAdvanced { .. } => 500,
            _ => 400,
        }
    }
}

/// Why a request finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    Abort,
}

/// An error that ended an admitted request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum RequestError {
    #[error("Out of memory even after retracting all other requests in the batch.")]
    OutOfMemory,
    #[error("The request was aborted by the client.")]
    Aborted,
}

/// Token accounting of a finished request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    /// Prefix-cache hit at the first prefill (not re-counted after retraction).
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    pub num_retractions: u32,
    pub spec_verify_ct: u32,
    /// Submission to first admission.
    pub queue_time: Time,
}

/// What the engine tells its shell.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// Tokens became visible at `time` (end of the step that produced them).
    /// `count` tokens in one chunk: a speculative step or `--stream-interval`
    /// may deliver several at once. `generated` is the running total.
    Tokens { id: RequestId, time: Time, count: u32, first: bool, generated: u32 },
    /// The request ended (exactly once per admitted request).
    Finished { id: RequestId, time: Time, reason: FinishReason, usage: Usage, error: Option<RequestError> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Waiting,
    Prefill,
    Running,
    Done,
}

#[derive(Debug)]
struct Req {
    id: RequestId,
    prompt_len: u64,
    key: UnitKey,
    max_new: u32,
    ignore_eos: bool,
    eos_after: Option<u32>,
    rank: u32,
    arrival: Time,
    seq: u64,
    phase: Phase,
    generated: u32,
    /// Tokens to prefill in this admission (prompt + generated after a retraction).
    target: u64,
    /// Tokens whose KV exists in this admission.
    kv: u64,
    prefix_tokens: u64,
    lock: Option<NodeId>,
    own: u64,
    cached: Option<u64>,
    queue_time: Time,
    retractions: u32,
    verify_ct: u32,
    unsent: u32,
    sent_first: bool,
    aborted: bool,
    hrrn_mark: u64,
    /// Prefix match length (tokens) from the last queue-ordering pass.
    match_tokens: u64,
    /// Tree node that match ends on.
    match_node: NodeId,
    /// In-batch prefix dedup: shares a prefix with an earlier queued request that
    /// is not cached yet, so it waits for that one to populate the cache.
    deprioritized: bool,
}

impl Req {
    fn remaining_new(&self) -> u64 {
        (self.max_new - self.generated.min(self.max_new)) as u64
    }
}

#[derive(Clone, Debug, Default)]
struct RankBatch {
    prefill: Vec<(u32, u64)>,
    decode: bool,
    accept: u32,
}

#[derive(Debug)]
struct Rank {
    waiting: Vec<u32>,
    running: Vec<u32>,
    chunked: Option<u32>,
    tree: RadixTree,
    own_used: u64,
    new_token_ratio: f64,
    assigned_reqs: u64,
    assigned_tokens: u64,
    router_tree: RadixTree,
    prefill_tokens_done: u64,
    batch: RankBatch,
    retracted_last: u32,
    /// Everything this rank's cache ever held (what eviction is measured against).
    ideal: IdealCache,
}

struct InFlight {
    start: Time,
    end: Time,
    prefill: bool,
}

/// The simulated engine (see the crate docs).
pub struct Engine {
    cfg: EngineConfig,
    model: ModelSpec,
    gpu: GpuSpec,
    limits: Limits,
    cost: CostModel,
    reqs: Vec<Req>,
    free_slots: Vec<u32>,
    by_id: HashMap<RequestId, u32>,
    ranks: Vec<Rank>,
    now: Time,
    in_flight: Option<InFlight>,
    wake_at: Option<Time>,
    rng: Rng,
    seq: u64,
    rr_next: u32,
    unit_tokens: u64,
    block_tokens: Option<u32>,
    decode_interval_left: u32,
    pending: Vec<Output>,
    stats: EngineStats,
    accept_window: Vec<(u32, u32)>,
    gen_window: Vec<(u64, Time)>,
    router_last_evict: Time,
    loads: Vec<RankLoad>,
    last_graph: bool,
    accept_total: u64,
    batch_hit: u64,
    batch_computed: u64,
    kv_tally: kv_pressure::KvTally,
    recv: recv::RecvSkipper,
    /// Prefix matches end at cached sequence ends only (see [`RadixTree::match_tail_hinted`]):
    /// a sliding-window model without `--swa-prefix-tails` or bounded replay.
    swa_tails_only: bool,
}

fn round_up(x: u64, page: u64) -> u64 {
    x.div_ceil(page) * page
}

impl Engine {
    /// Resolves limits (KV pool, caps, graphs, speculation) and builds an idle engine.
    pub fn new(config: EngineConfig, model: ModelSpec, gpu: GpuSpec, seed: u64) -> Result<Engine, ConfigError> {
        let (limits, cost) = Limits::resolve(&config, &model, &gpu)?;
        let n = limits.attn_dp_size as usize;
        let init_ratio = (config.env.init_new_token_ratio * config.schedule_conservativeness).min(1.0);
        let ranks = (0..n)
            .map(|_| Rank {
                waiting: Vec::new(),
                running: Vec::new(),
                chunked: None,
                tree: RadixTree::new(),
                own_used: 0,
                new_token_ratio: init_ratio,
                assigned_reqs: 0,
                assigned_tokens: 0,
                router_tree: RadixTree::new(),
                prefill_tokens_done: 0,
                batch: RankBatch::default(),
                retracted_last: 0,
                ideal: IdealCache::new(),
            })
            .collect();
        let config_recv_interval = config.scheduler_recv_interval;
        let swa_tails_only =
            matches!(model.kv, crate::profiles::KvLayout::Dsv4 { .. }) && config.swa_prefix_tails == 0 && !config.swa_bounded_replay;
        Ok(Engine {
            rng: Rng::new(config.random_seed.unwrap_or(seed)),
            cfg: config,
            model,
            gpu,
            unit_tokens: limits.page_size as u64,
            limits,
            cost,
            reqs: Vec::new(),
            free_slots: Vec::new(),
            by_id: HashMap::new(),
            ranks,
            now: Time::ZERO,
            in_flight: None,
            wake_at: None,
            seq: 0,
            rr_next: 0,
            block_tokens: None,
            decode_interval_left: 0,
            pending: Vec::new(),
            stats: EngineStats::default(),
            accept_window: Vec::new(),
            gen_window: Vec::new(),
            router_last_evict: Time::ZERO,
            loads: vec![RankLoad::default(); n],
            last_graph: false,
            accept_total: 0,
            batch_hit: 0,
            batch_computed: 0,
            kv_tally: Default::default(),
            recv: recv::RecvSkipper::new(config_recv_interval),
            swa_tails_only,
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
    pub fn model(&self) -> &ModelSpec {
        &self.model
    }
    pub fn gpu(&self) -> &GpuSpec {
        &self.gpu
    }
    pub fn cost_model(&self) -> &CostModel {
        &self.cost
    }
    /// Energy one GPU has drawn from time 0 to `at`, joules (idle power throughout, plus what
    /// every step priced so far drew above it); `None` when the GPU's profile has no power model.
    pub fn gpu_energy_j(&self, at: Time) -> Option<f64> {
        self.gpu.power.as_ref().map(|p| p.idle_w * at.as_secs_f64() + self.stats.gpu_active_energy_j)
    }
    /// Time of the last `advance`.
    pub fn now(&self) -> Time {
        self.now
    }
    /// Live requests (waiting, prefilling or running).
    pub fn live_requests(&self) -> usize {
        self.by_id.len()
    }
    /// True when nothing is queued, running or in flight.
    pub fn is_idle(&self) -> bool {
        self.by_id.is_empty() && self.in_flight.is_none()
    }

    /// When the engine next needs `advance` (a step ends or queued work can start);
    /// `None` when idle with nothing to do.
    pub fn next_event_time(&self) -> Option<Time> {
        if !self.pending.is_empty() {
            return Some(self.now);
        }
        match (&self.in_flight, self.wake_at) {
            (Some(f), _) => Some(f.end),
            (None, w) => w,
        }
    }

    /// Client abort (disconnect): the request ends now with reason `abort`.
    /// Returns false when the id is unknown or already finished.
    pub fn abort(&mut self, now: Time, id: RequestId) -> bool {
        let Some(&slot) = self.by_id.get(&id) else {
            return false;
        };
        let now = now.max(self.now);
        let r = &mut self.reqs[slot as usize];
        if r.aborted {
            return false;
        }
        r.aborted = true;
        let rank = r.rank as usize;
        match r.phase {
            Phase::Waiting => {
                self.ranks[rank].waiting.retain(|&s| s != slot);
                self.recv.inbox.retain(|&s| s != slot);
                self.finish(slot, now, FinishReason::Abort, Some(RequestError::Aborted), true);
            }
            // In the current batch: removed at the step boundary, reported now.
            Phase::Prefill | Phase::Running => {
                let usage = self.usage(slot);
                self.pending.push(Output::Finished {
                    id,
                    time: now,
                    reason: FinishReason::Abort,
                    usage,
                    error: Some(RequestError::Aborted),
                });
                self.stats.num_aborted_requests_total += 1;
                let rk = &mut self.ranks[rank];
                let in_batch = self.in_flight.is_some()
                    && (rk.batch.prefill.iter().any(|x| x.0 == slot) || (rk.batch.decode && rk.running.contains(&slot)));
                if !in_batch {
                    rk.running.retain(|&s| s != slot);
                    self.release(slot);
                }
            }
            Phase::Done => return false,
        }
        if self.in_flight.is_none() && self.wake_at.is_none() && self.ranks.iter().any(|r| !r.waiting.is_empty()) {
            self.wake_at = Some(now);
        }
        true
    }

    /// Empties the prefix cache; refused (false) while any request is live (SGLang
    /// answers 400 then).
    pub fn flush_cache(&mut self) -> bool {
        if !self.by_id.is_empty() || self.in_flight.is_some() {
            return false;
        }
        // A flush is asked for, not forced by the pool: the ideal cache forgets too.
        self.ranks.iter_mut().all(|r| {
            r.ideal = IdealCache::new();
            r.tree.flush()
        })
    }

    /// Processes every event due at or before `to`, appending outputs in time order.
    pub fn advance(&mut self, to: Time, out: &mut Vec<Output>) {
        if !self.pending.is_empty() {
            out.append(&mut self.pending);
        }
        loop {
            if let Some(f) = &self.in_flight {
                if f.end > to {
                    break;
                }
                let end = f.end;
                let prefill = f.prefill;
                let start = f.start;
                self.in_flight = None;
                self.complete(end, prefill, start, out);
                self.launch(end);
                out.append(&mut self.pending);
                continue;
            }
            match self.wake_at {
                Some(w) if w <= to => {
                    self.wake_at = None;
                    self.launch(w);
                    out.append(&mut self.pending);
                }
                _ => break,
            }
        }
        self.now = self.now.max(to);
    }
}
