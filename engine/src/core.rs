//! The engine: a sans-IO, deterministic state machine reproducing SGLang's
//! scheduler (see the crate docs for the driving contract).

use crate::args::{EngineConfig, LoadBalanceMethod, RouterPolicy, SchedulePolicy};
use crate::cost::{CostModel, DraftLoad, RankLoad, StepCost};
use crate::kv::{IdealCache, NodeId, RadixTree, UnitKey};
use crate::limits::{ConfigError, Limits};
use crate::profiles::{GpuSpec, ModelSpec};
use crate::prompt::{Prompt, chain_hash};
use crate::rng::Rng;
use crate::time::Time;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

mod kv_pressure;
pub use kv_pressure::KvStats;

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

/// Per-rank figures in a stats snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RankStats {
    pub running: u32,
    pub queued: u32,
    pub chunked: bool,
    pub capacity_tokens: u64,
    pub used_tokens: u64,
    pub evictable_tokens: u64,
    pub token_usage: f64,
    pub new_token_ratio: f64,
    pub cached_nodes: usize,
}

/// Gauges as SGLang samples them: refreshed on every prefill batch and every
/// `--decode-log-interval` decode iterations.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SampledGauges {
    pub num_running_reqs: u32,
    pub num_queue_reqs: u32,
    pub num_used_tokens: u64,
    pub token_usage: f64,
    pub gen_throughput: f64,
    pub cache_hit_rate: f64,
    pub spec_accept_length: f64,
    pub spec_accept_rate: f64,
    pub num_retracted_reqs: u32,
    pub is_cuda_graph: bool,
    pub new_token_ratio: f64,
}

/// Engine statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EngineStats {
    pub now: Time,
    pub ranks: Vec<RankStats>,
    pub num_running: u32,
    pub num_queued: u32,
    /// Max over ranks of (used − evictable) / capacity.
    pub token_usage: f64,
    /// Cached / (cached + computed) prompt tokens of the latest prefill batch.
    pub last_cache_hit_rate: f64,
    /// Over the whole run (first admissions only).
    pub cache_hit_rate: f64,
    /// Mean accept length (incl. bonus) over the last `decode_log_interval` verify steps.
    pub spec_accept_length: f64,
    pub avg_spec_accept_length: f64,
    pub spec_verify_calls_total: u64,
    pub prompt_tokens_total: u64,
    pub cached_tokens_total: u64,
    pub generation_tokens_total: u64,
    pub num_requests_total: u64,
    pub num_aborted_requests_total: u64,
    pub num_retracted_requests_total: u64,
    pub num_retracted_input_tokens_total: u64,
    pub num_retracted_output_tokens_total: u64,
    pub prefill_batches: u64,
    pub decode_iterations: u64,
    pub cuda_graph_passes: u64,
    pub eager_passes: u64,
    pub busy_time: Time,
    pub evicted_tokens_total: u64,
    /// Pool size, peaks, eviction and re-prefill figures.
    pub kv: KvStats,
    pub sampled: SampledGauges,
    pub last_step: Option<StepCost>,
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

    fn validate(&mut self, r: &Request) -> Result<(u32, u32), SubmitError> {
        let input = r.prompt.len();
        if input == 0 {
            return Err(SubmitError::EmptyPrompt);
        }
        let l = &self.limits;
        if input >= l.context_length {
            return Err(SubmitError::PromptTooLong { input, context: l.context_length });
        }
        if let Some(m) = r.max_new_tokens
            && input + m as u64 > l.context_length
        {
            return Err(SubmitError::ContextExceeded { input, max_new: m as u64, total: input + m as u64, context: l.context_length });
        }
        if input >= l.max_req_input_len {
            return Err(SubmitError::ExceedsKvPool { input, max: l.max_req_input_len });
        }
        if self.by_id.contains_key(&r.id) {
            return Err(SubmitError::DuplicateId(r.id));
        }
        let bt = r.prompt.block_tokens();
        let page = l.page_size;
        match self.block_tokens {
            Some(b) if b != bt => {
                return Err(SubmitError::BlockSize { got: bt, page, expected: b });
            }
            _ => {}
        }
        if !(page.is_multiple_of(bt) || bt.is_multiple_of(page)) {
            return Err(SubmitError::BlockSize { got: bt, page, expected: bt });
        }
        if let Some(q) = self.cfg.max_queued_requests {
            let queued: usize = self.ranks.iter().map(|r| r.waiting.len()).sum();
            if queued >= q as usize {
                return Err(SubmitError::QueueFull);
            }
        }
        if let Some(d) = r.dp_rank
            && d >= self.ranks.len() as u32
        {
            return Err(SubmitError::BadDpRank { rank: d, size: self.ranks.len() as u32 });
        }
        let mut max_new = (l.max_req_len - input - 1).min(u32::MAX as u64) as u32;
        if let Some(m) = r.max_new_tokens {
            max_new = max_new.min(m);
        }
        if let Some(lim) = self.cfg.env.max_new_tokens_limit {
            max_new = max_new.min(lim.min(u32::MAX as u64) as u32);
        }
        let stride = if bt < page { page / bt } else { 1 };
        Ok((max_new.max(1), stride))
    }

    /// Queues a request arriving at `now`. `now` must not be earlier than the last
    /// `advance`, and events due before `now` must have been processed.
    pub fn submit(&mut self, now: Time, req: Request) -> Result<(), SubmitError> {
        if let Some(p) = self.next_event_time()
            && p < now
            && self.pending.is_empty()
        {
            return Err(SubmitError::NotAdvanced { now, pending: p });
        }
        let now = now.max(self.now);
        let (max_new, stride) = self.validate(&req)?;
        let bt = req.prompt.block_tokens();
        if self.block_tokens.is_none() {
            self.block_tokens = Some(bt);
            self.unit_tokens = (self.limits.page_size as u64).max(bt as u64);
        }
        let rank = self.dispatch(now, &req);
        let seq = self.seq;
        self.seq += 1;
        // Output blocks: given by the caller, or unique hashes that match nothing.
        let tail: Arc<[u64]> = match &req.continuation {
            Some(c) => c.clone(),
            None => {
                // Capped: unbounded requests would otherwise hash a whole context.
                let total = (req.prompt.len() + (max_new as u64).min(32_768)) / bt as u64;
                let extra = total.saturating_sub(req.prompt.full_blocks() as u64) as usize;
                let mut h = chain_hash(req.prompt.blocks().last().copied().unwrap_or(0), req.id ^ 0x0u64.wrapping_sub(seq + 1));
                (0..extra)
                    .map(|i| {
                        h = chain_hash(h, i as u64 ^ 0xD00D);
                        h
                    })
                    .collect::<Vec<_>>()
                    .into()
            }
        };
        let key = UnitKey::new(req.prompt.blocks().clone(), Some(tail), stride);
        let r = Req {
            id: req.id,
            prompt_len: req.prompt.len(),
            key,
            max_new,
            ignore_eos: req.ignore_eos,
            // EOS is itself a generated token: it ends the output at position >= 1.
            eos_after: if req.ignore_eos { None } else { req.eos_after.map(|e| e.max(1)) },
            rank,
            arrival: now,
            seq,
            phase: Phase::Waiting,
            generated: 0,
            target: req.prompt.len(),
            kv: 0,
            prefix_tokens: 0,
            lock: None,
            own: 0,
            cached: None,
            queue_time: Time::ZERO,
            retractions: 0,
            verify_ct: 0,
            unsent: 0,
            sent_first: false,
            aborted: false,
            hrrn_mark: self.ranks[rank as usize].prefill_tokens_done,
            match_tokens: 0,
            match_node: crate::kv::radix::ROOT,
            deprioritized: false,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.reqs[s as usize] = r;
                s
            }
            None => {
                self.reqs.push(r);
                (self.reqs.len() - 1) as u32
            }
        };
        self.by_id.insert(req.id, slot);
        let rk = &mut self.ranks[rank as usize];
        rk.waiting.push(slot);
        rk.assigned_reqs += 1;
        rk.assigned_tokens += req.prompt.len();
        if self.in_flight.is_none() && self.wake_at.is_none() {
            self.wake_at = Some(now);
        }
        Ok(())
    }

    /// Picks the attention-DP rank (router, load-balance method or pin).
    fn dispatch(&mut self, now: Time, req: &Request) -> u32 {
        let n = self.ranks.len() as u32;
        if n == 1 {
            return 0;
        }
        if let Some(d) = req.dp_rank {
            return d;
        }
        if let Some(router) = self.cfg.router.clone()
            && router.dp_aware
        {
            return self.route(now, req, &router);
        }
        match self.cfg.load_balance_method {
            LoadBalanceMethod::RoundRobin | LoadBalanceMethod::FollowBootstrapRoom => {
                let r = self.rr_next % n;
                self.rr_next = self.rr_next.wrapping_add(1);
                r
            }
            LoadBalanceMethod::TotalRequests => (0..n).min_by_key(|&i| (self.ranks[i as usize].assigned_reqs, i)).unwrap_or(0),
            LoadBalanceMethod::TotalTokens => (0..n)
                .min_by_key(|&i| {
                    let r = &self.ranks[i as usize];
                    (r.assigned_tokens, r.assigned_reqs, i)
                })
                .unwrap_or(0),
        }
    }

    /// sglang-router policies with `--dp-aware`: cache_aware keeps an approximate
    /// prefix tree per rank of what it routed there.
    fn route(&mut self, now: Time, req: &Request, router: &crate::args::RouterConfig) -> u32 {
        let n = self.ranks.len() as u32;
        match router.policy {
            RouterPolicy::RoundRobin => {
                let r = self.rr_next % n;
                self.rr_next = self.rr_next.wrapping_add(1);
                r
            }
            RouterPolicy::Random => self.rng.below(n as u64) as u32,
            RouterPolicy::PowerOfTwo => {
                let a = self.rng.below(n as u64) as u32;
                let b = self.rng.below(n as u64) as u32;
                if self.ranks[b as usize].assigned_reqs < self.ranks[a as usize].assigned_reqs { b } else { a }
            }
            RouterPolicy::CacheAware => {
                let bt = req.prompt.block_tokens() as u64;
                let key = UnitKey::new(req.prompt.blocks().clone(), None, 1);
                // Periodic LRU eviction down to max_tree_size (tokens here).
                if now.saturating_sub(self.router_last_evict) >= Time::from_secs(router.eviction_interval_secs) {
                    self.router_last_evict = now;
                    for r in &mut self.ranks {
                        let size = r.router_tree.total_units() * bt;
                        if size > router.max_tree_size {
                            r.router_tree.evict((size - router.max_tree_size) / bt);
                        }
                    }
                }
                let loads: Vec<u64> = self.ranks.iter().map(|r| r.assigned_reqs).collect();
                let (max_l, min_l) = (*loads.iter().max().unwrap_or(&0), *loads.iter().min().unwrap_or(&0));
                let imbalanced = max_l.saturating_sub(min_l) > router.balance_abs_threshold
                    && max_l as f64 > router.balance_rel_threshold * min_l as f64;
                let chosen = if imbalanced {
                    (0..n).min_by_key(|&i| (loads[i as usize], i)).unwrap_or(0)
                } else {
                    let mut best = (0u32, 0u32);
                    for i in 0..n {
                        let m = self.ranks[i as usize].router_tree.match_prefix(&key, u32::MAX, false).units;
                        if m > best.1 {
                            best = (i, m);
                        }
                    }
                    let rate = best.1 as f64 * bt as f64 / req.prompt.len().max(1) as f64;
                    if rate > router.cache_threshold {
                        best.0
                    } else {
                        (0..n).min_by_key(|&i| (self.ranks[i as usize].router_tree.total_units(), i)).unwrap_or(0)
                    }
                };
                self.ranks[chosen as usize].router_tree.insert(&key, key.units());
                chosen
            }
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

    // ----- KV accounting -------------------------------------------------------

    fn free_tokens(&self, rank: usize) -> u64 {
        let r = &self.ranks[rank];
        let used = r.tree.total_units() * self.unit_tokens + r.own_used;
        self.limits.max_total_num_tokens.saturating_sub(used)
    }
    fn evictable_tokens(&self, rank: usize) -> u64 {
        self.ranks[rank].tree.evictable_units() * self.unit_tokens
    }
    /// Makes `tokens` free, evicting cached leaves; false if impossible.
    fn ensure_free(&mut self, rank: usize, tokens: u64) -> bool {
        let free = self.free_tokens(rank);
        if free >= tokens {
            return true;
        }
        let need_units = (tokens - free).div_ceil(self.unit_tokens);
        let got = self.ranks[rank].tree.evict(need_units);
        self.stats.evicted_tokens_total += got * self.unit_tokens;
        self.free_tokens(rank) >= tokens
    }
    /// Sets a request's own allocation for `kv` tokens; returns the growth.
    fn set_own(&mut self, slot: u32, kv: u64) -> i64 {
        let page = self.limits.page_size as u64;
        let r = &mut self.reqs[slot as usize];
        let new = round_up(kv.saturating_sub(r.prefix_tokens), page);
        let delta = new as i64 - r.own as i64;
        r.own = new;
        let rank = &mut self.ranks[r.rank as usize];
        rank.own_used = (rank.own_used as i64 + delta) as u64;
        delta
    }
    /// Inserts the request's first `kv` tokens into the tree and moves its lock to
    /// the new end (SGLang `cache_unfinished_req` / `cache_finished_req`).
    fn cache_prefix(&mut self, slot: u32, kv: u64, relock: bool) {
        if self.cfg.disable_radix_cache {
            return;
        }
        let unit = self.unit_tokens;
        let (rank, key, old_lock, prefix) = {
            let r = &self.reqs[slot as usize];
            (r.rank as usize, r.key.clone(), r.lock, r.prefix_tokens)
        };
        let units = ((kv / unit) as u32).min(key.units());
        let hint = crate::kv::Match { units: (prefix / unit) as u32, node: old_lock.unwrap_or(crate::kv::radix::ROOT) };
        let m = self.ranks[rank].tree.insert_hinted(&key, units, hint);
        self.ranks[rank].ideal.insert(&key, units);
        let end_units = m.units.max(units);
        let tree = &mut self.ranks[rank].tree;
        if relock {
            tree.lock(m.node);
        }
        if let Some(n) = old_lock {
            tree.unlock(n);
        }
        let r = &mut self.reqs[slot as usize];
        r.lock = if relock { Some(m.node) } else { None };
        r.prefix_tokens = if relock { end_units as u64 * unit } else { 0 };
        let kv_now = r.kv;
        self.set_own(slot, kv_now);
    }

    // ----- batch building --------------------------------------------------------

    fn order_waiting(&mut self, rank: usize) {
        let policy = if self.cfg.disable_radix_cache && self.cfg.schedule_policy.is_cache_aware() {
            SchedulePolicy::Fcfs
        } else {
            self.cfg.schedule_policy
        };
        let n = self.ranks[rank].waiting.len();
        if n <= 1 && policy != SchedulePolicy::Random {
            if policy.is_cache_aware() && n == 1 {
                let s = self.ranks[rank].waiting[0];
                self.refresh_match(s);
            }
            return;
        }
        match policy {
            // The native tree core matches (and touches) every queued request each
            // pass, so queued prefixes are the last to be evicted.
            SchedulePolicy::Fcfs | SchedulePolicy::RoutingKey => {
                let w = std::mem::take(&mut self.ranks[rank].waiting);
                for &s in &w {
                    self.refresh_match(s);
                }
                self.ranks[rank].waiting = w;
            }
            SchedulePolicy::Lof => {
                let reqs = &self.reqs;
                self.ranks[rank].waiting.sort_by_key(|&s| (std::cmp::Reverse(reqs[s as usize].max_new), reqs[s as usize].seq));
            }
            SchedulePolicy::Random => {
                let mut w = std::mem::take(&mut self.ranks[rank].waiting);
                self.rng.shuffle(&mut w);
                self.ranks[rank].waiting = w;
            }
            SchedulePolicy::Lpm | SchedulePolicy::DfsWeight | SchedulePolicy::Hrrn if n > 128 => {}
            SchedulePolicy::Lpm | SchedulePolicy::DfsWeight | SchedulePolicy::Hrrn | SchedulePolicy::ShortestPrefillFirst => {
                let w = std::mem::take(&mut self.ranks[rank].waiting);
                // In-batch prefix dedup (SGLang's waiting-queue radix tree).
                let check = self.cfg.env.in_batch_prefix_caching_check_threshold;
                let depri = self.cfg.env.in_batch_prefix_caching_deprioritize_threshold;
                let dedup = matches!(policy, SchedulePolicy::Lpm | SchedulePolicy::ShortestPrefillFirst);
                let mut wq = RadixTree::new();
                for &s in &w {
                    self.refresh_match(s);
                    let r = &self.reqs[s as usize];
                    let mut d = false;
                    if dedup && r.match_tokens <= check {
                        let max = self.max_prefix_units(r);
                        let key = r.key.clone();
                        let shared = wq.match_prefix(&key, max, false).units as u64 * self.unit_tokens;
                        if shared >= depri.max(1) {
                            d = true;
                        } else {
                            wq.insert(&key, max);
                        }
                    }
                    self.reqs[s as usize].deprioritized = d;
                }
                let mut w = w;
                let reqs = &self.reqs;
                let done = self.ranks[rank].prefill_tokens_done;
                match policy {
                    SchedulePolicy::ShortestPrefillFirst => w.sort_by_key(|&s| {
                        let r = &reqs[s as usize];
                        (r.deprioritized, r.target - r.match_tokens.min(r.target), r.seq)
                    }),
                    SchedulePolicy::Hrrn => w.sort_by(|&a, &b| {
                        let ratio = |s: u32| {
                            let r = &reqs[s as usize];
                            let unc = (r.target - r.match_tokens.min(r.target)).max(1) as f64;
                            (done - r.hrrn_mark.min(done)) as f64 / unc + 1.0
                        };
                        ratio(b)
                            .partial_cmp(&ratio(a))
                            .unwrap_or(std::cmp::Ordering::Equal)
                            .then(reqs[a as usize].seq.cmp(&reqs[b as usize].seq))
                    }),
                    _ => w.sort_by_key(|&s| {
                        let r = &reqs[s as usize];
                        (r.deprioritized, std::cmp::Reverse(r.match_tokens), r.seq)
                    }),
                }
                if policy == SchedulePolicy::DfsWeight {
                    self.order_dfs_weight(rank, &mut w);
                }
                self.ranks[rank].waiting = w;
            }
        }
    }

    fn max_prefix_units(&self, r: &Req) -> u32 {
        // At least one token must be computed to sample from.
        (((r.target.saturating_sub(1)) / self.unit_tokens) as u32).min(r.key.units())
    }

    fn refresh_match(&mut self, slot: u32) {
        if self.cfg.disable_radix_cache || self.cfg.env.radix_force_miss {
            self.reqs[slot as usize].match_tokens = 0;
            self.reqs[slot as usize].match_node = crate::kv::radix::ROOT;
            return;
        }
        let r = &self.reqs[slot as usize];
        let max = self.max_prefix_units(r);
        let key = r.key.clone();
        let rank = r.rank as usize;
        let hint = crate::kv::Match { units: (r.match_tokens / self.unit_tokens) as u32, node: r.match_node };
        let m = self.ranks[rank].tree.match_prefix_hinted(&key, max, hint, true);
        self.reqs[slot as usize].match_tokens = m.units as u64 * self.unit_tokens;
        self.reqs[slot as usize].match_node = m.node;
    }

    /// SGLang `dfs-weight`: depth-first over the radix tree, heavier subtrees (more
    /// waiting requests under them) first, a node's own requests after its children.
    /// Only the nodes on waiting requests' match paths are visited.
    fn order_dfs_weight(&mut self, rank: usize, w: &mut Vec<u32>) {
        use crate::kv::radix::ROOT;
        let mut weight: HashMap<NodeId, u64> = HashMap::new();
        let mut kids: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
        let mut own: HashMap<NodeId, Vec<u32>> = HashMap::new();
        let tree = &self.ranks[rank].tree;
        for &s in w.iter() {
            let node = self.reqs[s as usize].match_node;
            own.entry(node).or_default().push(s);
            let mut n = node;
            loop {
                let e = weight.entry(n).or_insert(0);
                let first_visit = *e == 0;
                *e += 1;
                let Some(p) = tree.parent(n) else { break };
                if first_visit {
                    kids.entry(p).or_default().push(n);
                }
                n = p;
            }
        }
        let mut order = Vec::with_capacity(w.len());
        // Iterative post-order: children by descending weight (ties: node id).
        let mut stack: Vec<(NodeId, bool)> = vec![(ROOT, false)];
        while let Some((n, expanded)) = stack.pop() {
            if expanded {
                if let Some(v) = own.get(&n) {
                    order.extend_from_slice(v);
                }
                continue;
            }
            stack.push((n, true));
            if let Some(c) = kids.get_mut(&n) {
                c.sort_by_key(|&x| (std::cmp::Reverse(weight[&x]), x));
                for &x in c.iter().rev() {
                    stack.push((x, false));
                }
            }
        }
        *w = order;
    }

    fn reserved_for_running(&self, rank: usize) -> u64 {
        let clip = self.cfg.env.clip_max_new_tokens_estimation;
        let ratio = self.ranks[rank].new_token_ratio;
        self.ranks[rank]
            .running
            .iter()
            .map(|&s| {
                let r = &self.reqs[s as usize];
                let left = r.remaining_new().min(clip) as f64;
                if r.ignore_eos { left } else { left * ratio }
            })
            .sum::<f64>() as u64
    }

    /// `--enable-mixed-chunk` (off under speculative decoding, as in SGLang).
    fn mixed_chunk(&self) -> bool {
        self.cfg.enable_mixed_chunk && self.limits.speculative.is_none()
    }

    /// Builds this rank's prefill batch (SGLang PrefillAdder); true if non-empty.
    fn build_prefill(&mut self, rank: usize, now: Time) -> bool {
        let page = self.limits.page_size as u64;
        let clip = self.cfg.env.clip_max_new_tokens_estimation;
        let max_run = self.limits.max_running_requests_per_dp as usize;
        {
            let rk = &self.ranks[rank];
            if rk.chunked.is_none() && (rk.waiting.is_empty() || rk.running.len() >= max_run) {
                return false;
            }
        }
        let chunk_budget = self.limits.chunked_prefill_size_per_dp;
        let mut rem_chunk = chunk_budget.unwrap_or(u64::MAX);
        if self.mixed_chunk() {
            // The running requests' decode rows ride in the same batch.
            rem_chunk = rem_chunk.saturating_sub(self.ranks[rank].running.len() as u64);
        }
        let mut rem_input = self.limits.max_prefill_tokens;
        let mut reserved = self.reserved_for_running(rank);
        let mut batch: Vec<(u32, u64)> = Vec::new();

        // A chunked request resumes first.
        if let Some(c) = self.ranks[rank].chunked {
            if self.reqs[c as usize].aborted {
                self.ranks[rank].chunked = None;
                self.release(c);
                return self.build_prefill(rank, now);
            }
            let r = &self.reqs[c as usize];
            let left = r.target - r.kv;
            let future = r.remaining_new().min(clip);
            let take = if left > rem_chunk { rem_chunk / page * page } else { left };
            let take = take.max(page.min(left));
            batch.push((c, take));
            rem_chunk = rem_chunk.saturating_sub(round_up(take, page));
            rem_input = rem_input.saturating_sub(take);
            if take < left {
                self.ranks[rank].batch.prefill = batch;
                return self.allocate_prefill(rank);
            }
            reserved += take + future;
            self.ranks[rank].chunked = None;
        }

        self.order_waiting(rank);
        let waiting = std::mem::take(&mut self.ranks[rank].waiting);
        let mut admitted = 0usize;
        let mut stop_at = waiting.len();
        let running_now = self.ranks[rank].running.len();
        for (idx, &slot) in waiting.iter().enumerate() {
            if running_now + batch.len() >= max_run {
                stop_at = idx;
                break;
            }
            if let Some(m) = self.cfg.prefill_max_requests
                && batch.len() >= m as usize
            {
                stop_at = idx;
                break;
            }
            if rem_chunk == 0 || rem_input == 0 {
                stop_at = idx;
                break;
            }
            self.refresh_match(slot);
            let (target, prefix, need) = {
                let r = &self.reqs[slot as usize];
                let prefix = r.match_tokens.min(r.target.saturating_sub(1)) / self.unit_tokens * self.unit_tokens;
                let extend = r.target - prefix;
                (r.target, prefix, extend + r.remaining_new().min(clip))
            };
            let extend = target - prefix;
            let remaining = (self.free_tokens(rank) + self.evictable_tokens(rank)).saturating_sub(reserved);
            // With nothing else in flight on this rank, only the prompt must fit
            // (otherwise a prompt near the pool size could never start).
            let alone = running_now == 0 && batch.is_empty();
            let need = if alone { extend.min(need) } else { need };
            if (alone && need > remaining) || (!alone && need + page >= remaining) {
                stop_at = idx;
                break;
            }
            let chunked = chunk_budget.is_some() && extend > rem_chunk;
            let take = if chunked {
                let t = rem_chunk / page * page;
                if t == 0 {
                    stop_at = idx;
                    break;
                }
                t
            } else {
                if extend > rem_input && !batch.is_empty() {
                    stop_at = idx;
                    break;
                }
                extend
            };
            // Admit: lock the matched prefix.
            let key = self.reqs[slot as usize].key.clone();
            if prefix > 0 {
                let hint = {
                    let r = &self.reqs[slot as usize];
                    crate::kv::Match { units: (r.match_tokens / self.unit_tokens) as u32, node: r.match_node }
                };
                let m = self.ranks[rank].tree.match_prefix_hinted(&key, (prefix / self.unit_tokens) as u32, hint, true);
                self.ranks[rank].tree.lock(m.node);
                // Locking takes the prefix out of the evictable budget: check again
                // (SGLang PrefillAdder re-checks under `_lock_node`).
                let remaining = (self.free_tokens(rank) + self.evictable_tokens(rank)).saturating_sub(reserved);
                if (alone && need > remaining) || (!alone && need + page >= remaining) {
                    self.ranks[rank].tree.unlock(m.node);
                    stop_at = idx;
                    break;
                }
                let r = &mut self.reqs[slot as usize];
                r.lock = Some(m.node);
                r.prefix_tokens = m.units as u64 * self.unit_tokens;
            } else {
                let r = &mut self.reqs[slot as usize];
                r.lock = None;
                r.prefix_tokens = 0;
            }
            let first = self.reqs[slot as usize].cached.is_none();
            {
                let r = &mut self.reqs[slot as usize];
                r.kv = r.prefix_tokens;
                r.phase = Phase::Prefill;
                if first {
                    r.cached = Some(r.prefix_tokens);
                    r.queue_time = now - r.arrival;
                    self.batch_hit += r.prefix_tokens;
                    self.batch_computed += r.target - r.prefix_tokens;
                }
            }
            self.note_admission(slot);
            batch.push((slot, take));
            admitted = idx + 1;
            rem_chunk = rem_chunk.saturating_sub(round_up(take, page));
            rem_input = rem_input.saturating_sub(take);
            if chunked {
                self.ranks[rank].chunked = Some(slot);
                stop_at = idx + 1;
                break;
            }
            reserved += extend + self.reqs[slot as usize].remaining_new().min(clip);
            stop_at = idx + 1;
        }
        let _ = admitted;
        let mut rest: Vec<u32> = waiting[stop_at.min(waiting.len())..].to_vec();
        // Keep queue order: unadmitted requests before `stop_at` cannot exist
        // (admission stops at the first failure).
        rest.append(&mut self.ranks[rank].waiting);
        self.ranks[rank].waiting = rest;
        if batch.is_empty() {
            return false;
        }
        self.ranks[rank].batch.prefill = batch;
        self.allocate_prefill(rank)
    }

    /// Allocates KV for the admitted extends (evicting cache as needed).
    fn allocate_prefill(&mut self, rank: usize) -> bool {
        let batch = std::mem::take(&mut self.ranks[rank].batch.prefill);
        let mut kept = Vec::with_capacity(batch.len());
        for (slot, take) in batch {
            let page = self.limits.page_size as u64;
            let (kv_after, prefix, own) = {
                let r = &self.reqs[slot as usize];
                (r.kv + take, r.prefix_tokens, r.own)
            };
            let need = round_up(kv_after - prefix, page).saturating_sub(own);
            if self.ensure_free(rank, need) {
                self.set_own(slot, kv_after);
                self.reqs[slot as usize].kv = kv_after;
                kept.push((slot, take));
            } else {
                // Should not happen after the admission check; requeue at the front.
                self.unadmit(slot);
                self.ranks[rank].waiting.insert(0, slot);
                if self.ranks[rank].chunked == Some(slot) {
                    self.ranks[rank].chunked = None;
                }
            }
        }
        let ok = !kept.is_empty();
        self.commit_admissions(&kept);
        self.ranks[rank].batch.prefill = kept;
        ok
    }

    fn unadmit(&mut self, slot: u32) {
        let (rank, lock) = {
            let r = &self.reqs[slot as usize];
            (r.rank as usize, r.lock)
        };
        if let Some(n) = lock {
            self.ranks[rank].tree.unlock(n);
        }
        let r = &mut self.reqs[slot as usize];
        r.lock = None;
        r.prefix_tokens = 0;
        r.kv = 0;
        r.phase = Phase::Waiting;
        self.set_own(slot, 0);
    }

    /// Prepares a decode (or verify) step: KV for the next tokens, retracting the
    /// least-progressed requests if the pool cannot hold them.
    fn build_decode(&mut self, rank: usize) -> bool {
        if self.ranks[rank].running.is_empty() {
            return false;
        }
        let page = self.limits.page_size as u64;
        let window = self.limits.speculative.as_ref().map_or(1, |s| s.kv_window as u64);
        let need_of = |e: &Engine, s: u32| {
            let r = &e.reqs[s as usize];
            round_up((r.kv + window).saturating_sub(r.prefix_tokens), page).saturating_sub(r.own)
        };
        let mut need: u64 = self.ranks[rank].running.iter().map(|&s| need_of(self, s)).sum();
        let mut retracted = 0u32;
        while need > self.free_tokens(rank) + self.evictable_tokens(rank) {
            if self.ranks[rank].running.len() <= 1 && (self.ranks[rank].chunked.is_some() || !self.ranks[rank].batch.prefill.is_empty()) {
                // A chunked prefill holds the pages: the last running request waits for it to
                // finish (it then joins the batch and the usual retraction applies).
                return false;
            }
            if self.ranks[rank].running.len() <= 1 {
                // Even one request cannot continue: abort it.
                let s = self.ranks[rank].running.pop().expect("non-empty");
                let now = self.now;
                self.finish(s, now, FinishReason::Abort, Some(RequestError::OutOfMemory), true);
                self.stats.num_aborted_requests_total += 1;
                need = 0;
                break;
            }
            // Victim: fewest generated tokens, then longest prompt.
            let reqs = &self.reqs;
            let (vi, _) = self.ranks[rank]
                .running
                .iter()
                .enumerate()
                .min_by_key(|&(_, &s)| {
                    let r = &reqs[s as usize];
                    (r.generated, std::cmp::Reverse(r.prompt_len), std::cmp::Reverse(r.seq))
                })
                .expect("non-empty");
            let s = self.ranks[rank].running.swap_remove(vi);
            need -= need_of(self, s);
            self.retract(s);
            retracted += 1;
        }
        if retracted > 0 {
            let (mut gen_sum, mut maxn) = (0u64, 0u64);
            let n = self.ranks[rank].running.len() as u64;
            for &s in &self.ranks[rank].running {
                gen_sum += self.reqs[s as usize].generated as u64;
                maxn += self.reqs[s as usize].max_new as u64;
            }
            let steps = self.cfg.env.retract_decode_steps as u64;
            self.ranks[rank].new_token_ratio = ((gen_sum + steps * n) as f64 / (maxn + 1) as f64).min(1.0);
        } else {
            let init = (self.cfg.env.init_new_token_ratio * self.cfg.schedule_conservativeness).min(1.0);
            let min = init * self.cfg.env.min_new_token_ratio_factor;
            let decay = (init - min) / self.cfg.env.new_token_ratio_decay_steps as f64;
            let r = &mut self.ranks[rank];
            r.new_token_ratio = (r.new_token_ratio - decay).max(min);
        }
        self.ranks[rank].retracted_last = retracted;
        if self.ranks[rank].running.is_empty() {
            return false;
        }
        self.ensure_free(rank, need);
        let running = std::mem::take(&mut self.ranks[rank].running);
        for &s in &running {
            let kv = self.reqs[s as usize].kv + window;
            self.set_own(s, kv);
        }
        self.ranks[rank].running = running;
        self.ranks[rank].batch.decode = true;
        true
    }

    fn retract(&mut self, slot: u32) {
        let (rank, lock, generated, plen) = {
            let r = &self.reqs[slot as usize];
            (r.rank as usize, r.lock, r.generated, r.prompt_len)
        };
        if let Some(n) = lock {
            self.ranks[rank].tree.unlock(n);
        }
        {
            let r = &mut self.reqs[slot as usize];
            r.lock = None;
            r.prefix_tokens = 0;
            r.kv = 0;
            r.target = plen + generated as u64;
            r.phase = Phase::Waiting;
            r.retractions += 1;
        }
        self.set_own(slot, 0);
        self.stats.num_retracted_requests_total += 1;
        self.stats.num_retracted_input_tokens_total += plen;
        self.stats.num_retracted_output_tokens_total += generated as u64;
        self.ranks[rank].waiting.push(slot);
    }

    // ----- step launch / completion -------------------------------------------

    fn launch(&mut self, t: Time) {
        debug_assert!(self.in_flight.is_none());
        self.now = self.now.max(t);
        let n = self.ranks.len();
        for r in &mut self.ranks {
            r.batch = RankBatch::default();
        }
        // Prefill-decode interval: decode-only rounds after a prefill while the
        // running batches are large enough.
        let min_bs = self.cfg.prefill_decode_interval_min_bs.max(1) as usize;
        let hold_prefill = self.decode_interval_left > 0 && self.ranks.iter().any(|r| r.running.len() >= min_bs);
        if !hold_prefill {
            self.decode_interval_left = 0;
        }
        let mut any_prefill = false;
        if !hold_prefill {
            for i in 0..n {
                if self.build_prefill(i, t) {
                    any_prefill = true;
                }
            }
        }
        // With speculation + DP attention, prefill and decode steps are global.
        let spec_dp = self.limits.speculative.is_some() && n > 1;
        let mut any_decode = false;
        for i in 0..n {
            if !self.ranks[i].batch.prefill.is_empty() && !self.mixed_chunk() {
                continue;
            }
            if spec_dp && any_prefill {
                continue;
            }
            if self.build_decode(i) {
                any_decode = true;
            }
        }
        self.note_kv_peak();
        if !any_prefill && !any_decode && hold_prefill {
            // The held decode rounds had nothing to run (e.g. the batch was
            // retracted away): prefill may go now.
            self.decode_interval_left = 0;
            return self.launch(t);
        }
        if !any_prefill && !any_decode {
            // Idle: reset the new-token ratio (SGLang's idle housekeeping).
            let init = (self.cfg.env.init_new_token_ratio * self.cfg.schedule_conservativeness).min(1.0);
            for r in &mut self.ranks {
                if r.running.is_empty() {
                    r.new_token_ratio = init;
                }
            }
            // Nothing runs anywhere, so nothing will free KV: a request that still
            // cannot start never will. End it instead of hanging the shell.
            for i in 0..n {
                if self.ranks[i].running.is_empty() && self.ranks[i].chunked.is_none() {
                    let stuck = std::mem::take(&mut self.ranks[i].waiting);
                    for s in stuck {
                        self.finish(s, t, FinishReason::Abort, Some(RequestError::OutOfMemory), true);
                        self.stats.num_aborted_requests_total += 1;
                    }
                }
            }
            return;
        }
        if hold_prefill && any_decode {
            self.decode_interval_left -= 1;
        } else if any_prefill && self.cfg.prefill_decode_interval > 0 {
            self.decode_interval_left = self.cfg.prefill_decode_interval;
        }
        // Cost.
        let spec = self.limits.speculative.clone();
        let mut loads = std::mem::take(&mut self.loads);
        let mut graph_all = true;
        for (i, load) in loads.iter_mut().enumerate() {
            *load = RankLoad { graph: true, ..RankLoad::default() };
            let rk = &self.ranks[i];
            if !rk.batch.prefill.is_empty() {
                let mut l = RankLoad::default();
                for &(s, take) in &rk.batch.prefill {
                    let r = &self.reqs[s as usize];
                    let end = r.kv; // already includes `take`
                    l.tokens += take;
                    if end >= r.target {
                        l.logits += 1;
                    }
                    l.kv_read_bytes += self.cost.kv_read_bytes(end);
                    l.attn_flops += self.cost.attn_flops(take, end, true);
                    l.prefix += end - take;
                }
                if rk.batch.decode {
                    // Mixed chunk: one decode row per running request, unpadded.
                    for &s in &rk.running {
                        let r = &self.reqs[s as usize];
                        let c = r.prompt_len + r.generated as u64;
                        l.tokens += 1;
                        l.logits += 1;
                        l.kv_read_bytes += self.cost.kv_read_bytes(c);
                        l.attn_flops += self.cost.attn_flops(1, c + 1, false);
                    }
                }
                l.graph = false;
                graph_all = false;
                *load = l;
            } else if rk.batch.decode {
                let b = rk.running.len() as u32;
                let (bs, graph) = self.limits.padded_decode_bs(b);
                let width = spec.as_ref().map_or(1, |s| s.num_draft_tokens) as u64;
                let mut kv_read = 0.0;
                let mut attn = 0.0;
                for &s in &rk.running {
                    let r = &self.reqs[s as usize];
                    let c = r.prompt_len + r.generated as u64;
                    kv_read += self.cost.kv_read_bytes(c);
                    attn += self.cost.attn_flops(width, c + width, false);
                }
                let draft = spec.as_ref().map(|s| match s.dspark_block_size {
                    Some(g) => DraftLoad { passes: 1, tokens: bs as u64 * g as u64 },
                    None => DraftLoad { passes: s.num_steps + 1, tokens: bs as u64 * s.eagle_topk as u64 },
                });
                graph_all &= graph;
                *load = RankLoad {
                    tokens: bs as u64 * width,
                    logits: bs as u64 * width,
                    kv_read_bytes: kv_read,
                    attn_flops: attn,
                    prefix: 0,
                    graph,
                    draft,
                };
            }
        }
        let cost = self.cost.step(&loads);
        self.loads = loads;
        if graph_all {
            self.stats.cuda_graph_passes += 1;
        } else {
            self.stats.eager_passes += 1;
        }
        self.last_graph = graph_all;
        let dur = cost.total.max(Time(1));
        self.stats.busy_time += dur;
        self.stats.last_step = Some(cost);
        // Speculative accept length: one draw per rank's verify step.
        if let Some(s) = &spec {
            for i in 0..n {
                if self.ranks[i].batch.decode {
                    let a = s.accept.sample(&mut self.rng);
                    self.ranks[i].batch.accept = a;
                }
            }
        }
        self.in_flight = Some(InFlight { start: t, end: t + dur, prefill: any_prefill });
    }

    fn complete(&mut self, t: Time, prefill: bool, start: Time, out: &mut Vec<Output>) {
        let n = self.ranks.len();
        let interval = self.cfg.stream_interval.max(1);
        let mut step_gen = 0u64;
        let (hit, computed) = (self.batch_hit, self.batch_computed);
        self.batch_hit = 0;
        self.batch_computed = 0;
        for i in 0..n {
            let batch = std::mem::take(&mut self.ranks[i].batch);
            if batch.decode {
                let a = if self.limits.speculative.is_some() {
                    self.accept_window.push((batch.accept, self.ranks[i].running.len() as u32));
                    self.stats.spec_verify_calls_total += 1;
                    self.accept_total += batch.accept as u64;
                    batch.accept
                } else {
                    1
                };
                let running = std::mem::take(&mut self.ranks[i].running);
                let mut keep = Vec::with_capacity(running.len());
                for s in running {
                    if self.reqs[s as usize].aborted {
                        self.release(s);
                        continue;
                    }
                    let k = {
                        let r = &mut self.reqs[s as usize];
                        if self.limits.speculative.is_some() {
                            r.verify_ct += 1;
                        }
                        (a as u64).min(r.remaining_new()) as u32
                    };
                    step_gen += k as u64;
                    if self.emit(s, k, t, interval, out) {
                        keep.push(s);
                    }
                }
                // Requests that finished were removed by `emit`.
                self.ranks[i].running = keep;
            }
            if !batch.prefill.is_empty() {
                for &(s, take) in &batch.prefill {
                    self.ranks[i].prefill_tokens_done += take;
                    let (aborted, done) = {
                        let r = &self.reqs[s as usize];
                        (r.aborted, r.kv >= r.target)
                    };
                    if aborted {
                        if self.ranks[i].chunked == Some(s) {
                            self.ranks[i].chunked = None;
                        }
                        self.release(s);
                        continue;
                    }
                    let kv = self.reqs[s as usize].kv;
                    self.cache_prefix(s, kv, true);
                    if !done {
                        continue; // still chunked
                    }
                    // Last chunk: sample a token, join the running batch.
                    self.reqs[s as usize].phase = Phase::Running;
                    step_gen += 1;
                    if self.emit(s, 1, t, interval, out) {
                        self.ranks[i].running.push(s);
                    }
                }
            }
        }
        if prefill {
            self.stats.prefill_batches += 1;
            self.stats.last_cache_hit_rate = if hit + computed > 0 { hit as f64 / (hit + computed) as f64 } else { 0.0 };
        } else {
            self.stats.decode_iterations += 1;
        }
        self.gen_window.push((step_gen, t - start));
        let w = self.cfg.decode_log_interval.max(1) as usize;
        if self.gen_window.len() > w {
            self.gen_window.remove(0);
        }
        if self.accept_window.len() > w {
            let drop = self.accept_window.len() - w;
            self.accept_window.drain(..drop);
        }
        if prefill || self.stats.decode_iterations.is_multiple_of(w as u64) {
            self.sample_gauges();
        }
        self.now = self.now.max(t);
    }

    /// Adds `k` tokens to a running request, streams them per the interval and
    /// finishes it when done. Returns true if it keeps running.
    fn emit(&mut self, slot: u32, k: u32, t: Time, interval: u32, out: &mut Vec<Output>) -> bool {
        let (finished, reason) = {
            let r = &mut self.reqs[slot as usize];
            r.generated += k;
            // The newest token has no KV yet (written by the next step).
            r.kv = r.prompt_len + r.generated as u64 - 1;
            r.unsent += k;
            let stop = r.eos_after.is_some_and(|e| r.generated >= e);
            if stop {
                (true, FinishReason::Stop)
            } else if r.generated >= r.max_new {
                (true, FinishReason::Length)
            } else {
                (false, FinishReason::Length)
            }
        };
        {
            let r = &mut self.reqs[slot as usize];
            if r.eos_after.is_some_and(|e| r.generated > e) {
                // A speculative step can overshoot EOS: stop at the EOS token.
                let extra = r.generated - r.eos_after.unwrap_or(0);
                r.generated -= extra;
                r.unsent -= extra.min(r.unsent);
                r.kv = r.prompt_len + r.generated as u64 - 1;
            }
            if r.unsent > 0 && (!r.sent_first || r.unsent >= interval || finished) {
                out.push(Output::Tokens { id: r.id, time: t, count: r.unsent, first: !r.sent_first, generated: r.generated });
                r.sent_first = true;
                r.unsent = 0;
            }
        }
        if finished {
            self.finish(slot, t, reason, None, false);
            out.append(&mut self.pending);
            return false;
        }
        let kv = self.reqs[slot as usize].kv;
        self.set_own(slot, kv);
        true
    }

    fn usage(&self, slot: u32) -> Usage {
        let r = &self.reqs[slot as usize];
        Usage {
            prompt_tokens: r.prompt_len,
            cached_tokens: r.cached.unwrap_or(0),
            completion_tokens: r.generated as u64,
            num_retractions: r.retractions,
            spec_verify_ct: r.verify_ct,
            queue_time: r.queue_time,
        }
    }

    /// Ends a request: caches its KV (unless aborted), frees it, reports it
    /// (through `pending`; the caller moves it to the output).
    fn finish(&mut self, slot: u32, t: Time, reason: FinishReason, error: Option<RequestError>, to_pending: bool) {
        let usage = self.usage(slot);
        let id = self.reqs[slot as usize].id;
        if reason != FinishReason::Abort {
            let kv = self.reqs[slot as usize].kv;
            self.cache_prefix(slot, kv, false);
            self.stats.num_requests_total += 1;
            self.stats.prompt_tokens_total += usage.prompt_tokens;
            self.stats.cached_tokens_total += usage.cached_tokens;
            self.stats.generation_tokens_total += usage.completion_tokens;
        } else if error == Some(RequestError::Aborted) {
            self.stats.num_aborted_requests_total += 1;
        }
        self.release(slot);
        let o = Output::Finished { id, time: t, reason, usage, error };
        let _ = to_pending;
        self.pending.push(o);
    }

    /// Frees a request's KV and slot.
    fn release(&mut self, slot: u32) {
        let (rank, lock, id, plen, phase) = {
            let r = &self.reqs[slot as usize];
            (r.rank as usize, r.lock, r.id, r.prompt_len, r.phase)
        };
        if phase == Phase::Done {
            return;
        }
        if let Some(n) = lock {
            self.ranks[rank].tree.unlock(n);
        }
        {
            let r = &mut self.reqs[slot as usize];
            r.lock = None;
            r.prefix_tokens = 0;
        }
        self.set_own(slot, 0);
        let r = &mut self.reqs[slot as usize];
        r.phase = Phase::Done;
        // Drop the key's hashes now rather than when the slot is reused.
        r.key = UnitKey::new(Arc::from(Vec::<u64>::new()), None, 1);
        let rk = &mut self.ranks[rank];
        rk.assigned_reqs -= 1;
        rk.assigned_tokens -= plen;
        if rk.chunked == Some(slot) {
            rk.chunked = None;
        }
        self.by_id.remove(&id);
        self.free_slots.push(slot);
    }

    fn sample_gauges(&mut self) {
        let s = self.stats_snapshot_inner();
        let (acc_sum, acc_n) = self.accept_window.iter().fold((0u64, 0u64), |(a, n), &(x, _)| (a + x as u64, n + 1));
        let accept = if acc_n > 0 { acc_sum as f64 / acc_n as f64 } else { 0.0 };
        let drafts = self.limits.speculative.as_ref().map_or(0, |sp| sp.accept.max_accept - 1);
        let (gen_sum, dur) = self.gen_window.iter().fold((0u64, Time::ZERO), |(g, d), &(x, t)| (g + x, d + t));
        self.stats.sampled = SampledGauges {
            num_running_reqs: s.num_running,
            num_queue_reqs: s.num_queued,
            num_used_tokens: s.ranks.iter().map(|r| r.used_tokens).sum(),
            token_usage: (s.token_usage * 100.0).round() / 100.0,
            gen_throughput: if dur > Time::ZERO { gen_sum as f64 / dur.as_secs_f64() } else { 0.0 },
            cache_hit_rate: self.stats.last_cache_hit_rate,
            spec_accept_length: accept,
            spec_accept_rate: if drafts > 0 && acc_n > 0 { (accept - 1.0) / drafts as f64 } else { 0.0 },
            num_retracted_reqs: self.ranks.iter().map(|r| r.retracted_last).sum(),
            is_cuda_graph: self.last_graph,
            new_token_ratio: self.ranks.first().map_or(0.0, |r| r.new_token_ratio),
        };
    }

    fn stats_snapshot_inner(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.now = self.now;
        s.ranks = (0..self.ranks.len())
            .map(|i| {
                let r = &self.ranks[i];
                let cap = self.limits.max_total_num_tokens;
                let used = r.tree.total_units() * self.unit_tokens + r.own_used;
                let evictable = self.evictable_tokens(i);
                RankStats {
                    running: r.running.len() as u32,
                    queued: r.waiting.len() as u32 + u32::from(r.chunked.is_some()),
                    chunked: r.chunked.is_some(),
                    capacity_tokens: cap,
                    used_tokens: used - evictable,
                    evictable_tokens: evictable,
                    token_usage: (used - evictable) as f64 / cap as f64,
                    new_token_ratio: r.new_token_ratio,
                    cached_nodes: r.tree.node_count(),
                }
            })
            .collect();
        s.kv = self.kv_stats();
        s.num_running = s.ranks.iter().map(|r| r.running).sum();
        s.num_queued = s.ranks.iter().map(|r| r.queued).sum();
        s.token_usage = s.ranks.iter().map(|r| r.token_usage).fold(0.0, f64::max);
        s.cache_hit_rate = if s.prompt_tokens_total > 0 { s.cached_tokens_total as f64 / s.prompt_tokens_total as f64 } else { 0.0 };
        let (a, n) = self.accept_window.iter().fold((0u64, 0u64), |(a, n), &(x, _)| (a + x as u64, n + 1));
        s.spec_accept_length = if n > 0 { a as f64 / n as f64 } else { 0.0 };
        s.avg_spec_accept_length = if s.spec_verify_calls_total > 0 {
            let tot: u64 = self.total_accepted();
            tot as f64 / s.spec_verify_calls_total as f64
        } else {
            0.0
        };
        s
    }

    fn total_accepted(&self) -> u64 {
        self.accept_total
    }

    /// A consistent snapshot of queues, KV use, cache and speculation figures.
    pub fn stats(&self) -> EngineStats {
        self.stats_snapshot_inner()
    }

    /// Internal consistency checks (tests): KV within capacity, caps respected.
    pub fn check_invariants(&self) {
        for (i, r) in self.ranks.iter().enumerate() {
            r.tree.check_invariants();
            let used = r.tree.total_units() * self.unit_tokens + r.own_used;
            assert!(used <= self.limits.max_total_num_tokens, "rank {i}: KV {used} > capacity {}", self.limits.max_total_num_tokens);
            assert!(
                r.running.len() <= self.limits.max_running_requests_per_dp as usize,
                "rank {i}: {} running > cap {}",
                r.running.len(),
                self.limits.max_running_requests_per_dp
            );
            let own: u64 = self.reqs.iter().filter(|q| q.phase != Phase::Done && q.rank as usize == i).map(|q| q.own).sum();
            assert_eq!(own, r.own_used, "rank {i}: own allocation drift");
        }
    }
}

/// The engine as `/server_info` and reports describe it.
#[derive(Clone, Debug, Serialize)]
pub struct EngineInfo {
    /// Always `predicted`: timings come from the cost model.
    pub result_kind: &'static str,
    pub model_profile: String,
    pub hardware_profile: String,
    pub model_path: Option<String>,
    pub served_model_name: String,
    pub limits: Limits,
    pub cost_params: crate::profiles::CostParams,
    pub cost_calibrated: bool,
    pub unconfirmed_model_facts: Vec<String>,
    pub tp_size: u32,
    pub attn_dp_size: u32,
    pub ep_size: u32,
    pub schedule_policy: &'static str,
    pub modelled_flags: Vec<String>,
    pub front_end_flags: Vec<String>,
    pub accepted_not_modelled_flags: Vec<String>,
    pub unknown_flags: Vec<String>,
    pub router: Option<crate::args::RouterConfig>,
    pub warnings: Vec<String>,
    pub launch_command: String,
}

impl Engine {
    /// Static description for `/server_info`, reports and result labels.
    pub fn info(&self) -> EngineInfo {
        use crate::args::FlagStatus;
        let split = self.cfg.flag_split();
        let get = |s: FlagStatus| split.get(&s).cloned().unwrap_or_default();
        EngineInfo {
            result_kind: "predicted",
            model_profile: self.model.name.clone(),
            hardware_profile: self.gpu.name.clone(),
            model_path: self.cfg.model_path.clone(),
            served_model_name: self
                .cfg
                .served_model_name
                .clone()
                .or_else(|| self.cfg.model_path.clone())
                .unwrap_or_else(|| self.model.name.clone()),
            limits: self.limits.clone(),
            cost_params: self.gpu.cost.clone(),
            cost_calibrated: self.gpu.cost.calibrated,
            unconfirmed_model_facts: self.model.unconfirmed.clone(),
            tp_size: self.cfg.tp_size,
            attn_dp_size: self.cfg.attn_dp_size,
            ep_size: self.cfg.ep_size,
            schedule_policy: self.cfg.schedule_policy.as_str(),
            modelled_flags: get(FlagStatus::Modelled),
            front_end_flags: get(FlagStatus::FrontEnd),
            accepted_not_modelled_flags: get(FlagStatus::AcceptedNotModelled),
            unknown_flags: get(FlagStatus::Unknown),
            router: self.cfg.router.clone(),
            warnings: self.cfg.warnings.clone(),
            launch_command: self.cfg.launch_command.clone(),
        }
    }
}
