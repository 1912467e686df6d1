//! The AgentX session-tree workload as a sans-IO state machine (AgentX §3).
//!
//! [`Workload::handle`] takes `(now, event)` and appends [`Action`]s: requests to send, requests to
//! cancel, the next instant it wants to be woken, phase changes and the end of the run. It owns no
//! clock, socket or thread: a virtual-clock loop and a real-time HTTP client drive the same machine.
//! Times are `u64` nanoseconds on the driver's clock.
//!
//! Semantics (defaults are InferenceX's `inferencex-agentx-mvp` settings):
//! - exactly C lanes, each holding one live session tree (root conversation + subagent streams);
//!   a lane is released only when its whole tree drains, then immediately takes the next trace of
//!   the sequential sampler (wrapping) and plays it from turn 0 with a fresh cache-bust marker;
//! - end-to-start delays `max(0, t_k − (t_{k−1} + api_{k−1}))` from the predecessor's completion;
//!   a branch of children (a subagent's conversations, flattened agents) starts when its root turn
//!   completes, at each child's recorded offset from the branch start, or — when it began before
//!   that turn's recorded end — when the turn is sent, at the offset from the turn's start; the
//!   joining turn waits for every child; recorded-interval predecessors within each agent scope
//!   (the root and its flattened agents; each subagent's conversations); background children hold
//!   the lane until they finish;
//! - start (agentx-harness 1.0.12's `TrajectorySource`): each lane takes the sampler's next trace
//!   and a wall-clock snapshot of it at t* ∈ [start + 0.25·D, start + 0.75·D] of the span of the
//!   root and all its subagents, drawn with numpy's PCG64 seeded from sha256("{seed}:{trace}:{lane}")
//!   ([`snapshot`]); every conversation alive at t* (root and subagents) is primed with its last
//!   turn before t*;
//! - warmup (its `AgenticReplayStrategy`): every warmup request has `max_tokens` 1; primers are
//!   spread so each lane's t* lands at one instant (a primer's lead before its t* capped at the
//!   system idle cap); when all primers are back, the live trees play on with no delays, through a
//!   tree's end into the sampler's next trace, until each lane has sent
//!   `warmup_requests_per_lane` more requests; at the hand-off every live stream is placed at its
//!   next recorded start minus its tree's t* (trees begun in warmup: its end-to-start delay), and
//!   one phase-wide minimum is subtracted so the earliest starts at once (see [`warmup`]);
//! - global idle cap (10 s) and, while profiling, a per-tree idle cap (300 s); no request starts
//!   after the profiling
//!   deadline; in-flight requests get a 30 s grace, then are cancelled;
//! - a context overflow ends that conversation (its descendants still drain); other errors do not;
//!   a root-conversation warmup failure cancels the run; the live abort fires when failed/total
//!   profiling records exceeds 10 % after max(C, 10) records.

pub mod driver;
pub mod pcg64;
pub mod plan;
pub mod snapshot;
mod warmup;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

pub use plan::{SourceKind, StreamPlan, TracePlan, TurnRef, TurnTiming};
pub use snapshot::{LiveStream, Snapshot, legacy_split, snapshot_at, t_star_ms};

use crate::prompt::{Marker, Prompt, sha_key};

const SEC: u64 = 1_000_000_000;

/// Output length of primer requests (the reference replay sends 1 token, like every warmup
/// request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrimerOutput {
    /// The recorded `out` of the primer turn.
    Recorded,
    /// One token.
    One,
}

/// Replay parameters; defaults are the AgentX ones.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadConfig {
    /// Lanes: live session trees.
    pub concurrency: u32,
    /// Seeds t* draws (with trace id and lane).
    pub seed: u64,
    /// Benchmark id mixed into every cache-bust marker: random per live run (as the reference
    /// replay's), so a second run against the same server does not hit the first run's cache.
    pub run_id: String,
    pub duration_ns: u64,
    pub grace_ns: u64,
    pub start_min_ratio: f64,
    pub start_max_ratio: f64,
    /// Start lanes mid-trace at t* with primers and per-lane warmup requests; off: every lane
    /// starts its trace at turn 0 and profiling starts at once.
    pub warmup: bool,
    pub warmup_requests_per_lane: u32,
    pub warmup_grace_ns: u64,
    pub primer_output: PrimerOutput,
    pub system_idle_cap_ns: u64,
    pub trace_idle_cap_ns: u64,
    pub failed_request_threshold: f64,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        Self {
            concurrency: 1,
            seed: 42,
            run_id: "sweep".into(),
            duration_ns: 3600 * SEC,
            grace_ns: 30 * SEC,
            start_min_ratio: 0.25,
            start_max_ratio: 0.75,
            warmup: true,
            warmup_requests_per_lane: 10,
            warmup_grace_ns: 1800 * SEC,
            primer_output: PrimerOutput::One,
            system_idle_cap_ns: 10 * SEC,
            trace_idle_cap_ns: 300 * SEC,
            failed_request_threshold: 0.10,
        }
    }
}

/// A fresh benchmark id for a live run: 12 hex digits from the OS's randomness, as the reference
/// replay's `uuid4().hex[:12]`. Live runs need one each, or a second run against the same server
/// would reuse the first run's cache-bust markers and hit its prefix cache.
pub fn random_benchmark_id() -> String {
    format!("{:012x}", rand::random::<u64>() >> 16)
}

pub type RequestId = u64;

/// Benchmark phase of a request (`metadata.benchmark_phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Warmup,
    Profiling,
}

/// Why a request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A live conversation's last turn before t*, with full history (warmup).
    Primer,
    /// One of a lane's one-token warmup requests played after the primers.
    LaneWarmup,
    /// A replayed turn (profiling).
    Turn,
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub id: RequestId,
    pub lane: u32,
    /// Play id: unique per (lane, pass).
    pub play: u64,
    /// Recycle pass of the lane (0 for its first play).
    pub pass: u64,
    pub phase: Phase,
    pub kind: RequestKind,
    pub conversation_id: Arc<str>,
    /// `X-Correlation-ID`: constant within a conversation of a play.
    pub correlation_id: Arc<str>,
    pub root_correlation_id: Arc<str>,
    pub turn_index: u32,
    /// Stream index within the trace (0 = root).
    pub stream: u16,
    /// `max_completion_tokens`.
    pub max_tokens: u64,
    /// The recorded output length of this turn.
    pub recorded_output_tokens: u64,
    pub prompt: Prompt,
    pub source_trace_id: Arc<str>,
    pub source_outer_idx: u32,
    pub source_kind: SourceKind,
}

impl RequestSpec {
    /// Theoretical prefix-cache hit of this request: (hit blocks, total blocks).
    pub fn theoretical_hit(&self) -> (u32, u32) {
        self.prompt.theoretical_hit()
    }

    /// The `/v1/chat/completions` body (AgentX §4.2): the full accumulated conversation as text,
    /// `stream`, `ignore_eos`, `stream_options.include_usage` and `max_completion_tokens`; never
    /// `temperature`, `tools` or `min_tokens`. `extra` keys are merged in (they cannot override
    /// the locked fields). The reference form the tests hold the HTTP client's pieced body
    /// (`targets::body::BodyPieces`) to.
    #[cfg(test)]
    pub fn http_body(
        &self,
        model: &str,
        vocab: &dyn crate::prompt::TokenText,
        extra: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        if let Some(extra) = extra {
            for (k, v) in extra {
                body.insert(k.clone(), v.clone());
            }
        }
        body.insert("model".into(), model.into());
        body.insert("messages".into(), serde_json::to_value(self.prompt.messages(vocab)).expect("messages serialize"));
        body.insert("stream".into(), true.into());
        body.insert("max_completion_tokens".into(), self.max_tokens.into());
        body.insert("ignore_eos".into(), true.into());
        body.insert("stream_options".into(), serde_json::json!({"include_usage": true}));
        for locked_out in ["temperature", "tools", "min_tokens"] {
            body.remove(locked_out);
        }
        serde_json::Value::Object(body)
    }
}

/// How a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The prompt exceeded the server's context: ends that conversation.
    ContextOverflow,
    /// Anything else (HTTP 500, timeout, …): the conversation continues.
    Error,
}

/// Inputs to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Begin the run.
    Start,
    /// The instant from the latest [`Action::Wake`] has come (early or spurious wakes are harmless).
    /// The driver then forgets that wake; the machine answers with the next one.
    Wake,
    Completed(RequestId),
    Failed(RequestId, Failure),
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Profiling ran to its deadline and drained.
    Completed,
    /// The live abort fired.
    Aborted { failed: u64, total: u64 },
    /// A root conversation's warmup request failed (`run_cancelled`).
    Cancelled { reason: String },
}

/// Outputs of the machine.
#[derive(Debug, Clone)]
pub enum Action {
    Send(Box<RequestSpec>),
    /// Cancel an in-flight request (record it with `was_cancelled: true`); send no event for it.
    Cancel(RequestId),
    /// Call [`Workload::handle`] with [`Event::Wake`] at this instant; replaces earlier wakes.
    Wake(u64),
    /// Profiling starts now; it ends at `deadline`.
    ProfilingStarted {
        at: u64,
        deadline: u64,
    },
    /// No request starts from now on.
    ProfilingEnded {
        at: u64,
    },
    Finished(Outcome),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SState {
    /// Nothing pending (not spawned yet, or between events).
    Idle,
    /// Next turn waits for its delay timer.
    Timer,
    /// Delay elapsed; waits for prerequisites (or the phase) to send.
    Due,
    InFlight,
}

#[derive(Debug)]
struct Stream {
    next: u32,
    done: u32,
    state: SState,
    spawned: bool,
    terminated: bool,
    timer_at: u64,
    timer_seq: u64,
    corr: Arc<str>,
}

#[derive(Debug)]
struct Tree {
    plan: Arc<TracePlan>,
    play: u64,
    pass: u64,
    marker: Marker,
    streams: Vec<Stream>,
    in_flight: u32,
    /// The armed per-tree idle watchdog (its sequence number; 0: none).
    watch_seq: u64,
}

impl Tree {
    fn stream_finished(&self, s: usize) -> bool {
        let st = &self.streams[s];
        st.terminated || st.done as usize >= self.plan.streams[s].turns.len()
    }
    fn turn_done(&self, (s, i): TurnRef) -> bool {
        let st = &self.streams[s as usize];
        st.terminated || st.done > i || (!st.spawned && self.stream_finished(0))
    }
    fn drained(&self) -> bool {
        (0..self.streams.len()).all(|s| self.stream_finished(s) || (!self.streams[s].spawned && self.stream_finished(0)))
    }
}

#[derive(Debug)]
struct Lane {
    tree: Tree,
    /// Primers sent and not back yet.
    primers: u32,
    /// Warmup requests after the primers (the per-lane quota).
    warm_used: u32,
    /// t* (ms) of the tree's snapshot (a tree begun during warmup: its first recorded start): the
    /// hand-off places its streams on this clock. `None` for a root-only split: its streams keep
    /// their delays.
    origin_ms: Option<f64>,
}

#[derive(Debug, Clone, Copy)]
struct Flight {
    lane: u32,
    play: u64,
    stream: u16,
    turn: u32,
    phase: Phase,
    kind: RequestKind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum RunPhase {
    NotStarted,
    Warmup { until: u64 },
    Profiling { deadline: u64 },
    Draining { cancel_at: u64 },
    Done,
}

/// Counters of a run so far.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorkloadStats {
    pub sent: u64,
    pub warmup_sent: u64,
    pub primers_sent: u64,
    pub profiling_completed: u64,
    pub profiling_failed: u64,
    pub context_overflows: u64,
    pub cancelled: u64,
    pub plays_started: u64,
    pub global_idle_shifts: u64,
    pub tree_idle_shifts: u64,
    /// Prerequisites released by the stall breaker (0 unless the trace data is inconsistent).
    pub forced_releases: u64,
    /// Lanes that sent fewer than `warmup_requests_per_lane` warmup requests after their primers.
    pub short_warmup_lanes: u64,
    /// Trees played to their end during warmup (the lane took the sampler's next trace).
    pub warmup_recycles: u64,
    /// Lanes started with the root-only split (no stream alive at t*).
    pub legacy_starts: u64,
}

/// Compile a trace set into a replay pool (in order). `seed` namespaces prompt contents. Traces
/// with no main-agent request cannot be replayed: they are skipped and reported in `warnings`.
pub fn compile_pool(
    source: &crate::trace::TraceSource,
    opts: &crate::trace::ReadOptions,
    seed: u64,
    warnings: &mut Vec<String>,
) -> Result<Vec<Arc<TracePlan>>, crate::trace::TraceError> {
    let mut pool = Vec::new();
    let mut skipped = Vec::new();
    source.for_each(opts, warnings, |t| {
        match TracePlan::build(&t, seed) {
            Ok(p) => pool.push(Arc::new(p)),
            Err(e) => skipped.push(format!("skipped: {e}")),
        }
        Ok(())
    })?;
    warnings.extend(skipped);
    Ok(pool)
}

/// The embedded default pool: the default synthetic trace set (works with no data on disk).
pub fn default_pool(seed: u64) -> Vec<Arc<TracePlan>> {
    let source = crate::trace::TraceSource::Synthetic { traces: crate::trace::DEFAULT_SYNTHETIC_TRACES, seed };
    let mut w = Vec::new();
    compile_pool(&source, &crate::trace::ReadOptions::default(), seed, &mut w).expect("synthetic traces always compile")
}

/// A pending turn timer: (raw time, seq, lane, play, stream).
type TimerEntry = (u64, u64, u32, u64, u16);

/// The replay state machine.
pub struct Workload {
    cfg: WorkloadConfig,
    pool: Vec<Arc<TracePlan>>,
    lanes: Vec<Lane>,
    inflight: HashMap<RequestId, Flight>,
    /// (raw time, seq, lane, play, stream); actual time = raw − `shift`.
    timers: BinaryHeap<Reverse<TimerEntry>>,
    shift: u64,
    seq: u64,
    next_id: RequestId,
    next_play: u64,
    sampler: usize,
    phase: RunPhase,
    last_wake: Option<u64>,
    stats: WorkloadStats,
    /// Primers waiting for their spread instant: (time, lane, stream, turn), by time.
    primer_queue: VecDeque<(u64, u32, u16, u32)>,
    /// Warmup has moved from the primers to the delay-free play.
    pressure: bool,
    /// Cache-bust passes minted per trace (the reference replay counts them per trace, not lane).
    marker_passes: HashMap<Arc<str>, u64>,
    /// Per-tree idle watchdogs: (time, seq, lane, play), on the driver's clock — never moved by
    /// the global idle cap, as the reference's run on wall time beside its shifted timers.
    watchdogs: BinaryHeap<Reverse<(u64, u64, u32, u64)>>,
}

/// Errors building a workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("the trace pool is empty: give at least one trace with a main-agent request")]
    EmptyPool,
    #[error("concurrency must be at least 1")]
    NoLanes,
    #[error("invalid start ratios {0}..{1}: need 0 ≤ min ≤ max ≤ 1")]
    Ratios(f64, f64),
}

impl Workload {
    /// A workload over a pool of compiled traces (sampled in order, wrapping).
    pub fn new(cfg: WorkloadConfig, pool: Vec<Arc<TracePlan>>) -> Result<Self, WorkloadError> {
        if pool.is_empty() {
            return Err(WorkloadError::EmptyPool);
        }
        if cfg.concurrency == 0 {
            return Err(WorkloadError::NoLanes);
        }
        if !(0.0..=1.0).contains(&cfg.start_min_ratio)
            || !(0.0..=1.0).contains(&cfg.start_max_ratio)
            || cfg.start_min_ratio > cfg.start_max_ratio
        {
            return Err(WorkloadError::Ratios(cfg.start_min_ratio, cfg.start_max_ratio));
        }
        Ok(Self {
            cfg,
            pool,
            lanes: Vec::new(),
            inflight: HashMap::new(),
            timers: BinaryHeap::new(),
            shift: 0,
            seq: 0,
            next_id: 1,
            next_play: 0,
            sampler: 0,
            phase: RunPhase::NotStarted,
            last_wake: None,
            stats: WorkloadStats::default(),
            primer_queue: VecDeque::new(),
            pressure: false,
            marker_passes: HashMap::new(),
            watchdogs: BinaryHeap::new(),
        })
    }

    pub fn config(&self) -> &WorkloadConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &WorkloadStats {
        &self.stats
    }

    /// Requests currently in flight.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Lanes whose tree still has work (before the deadline this is always C).
    pub fn live_trees(&self) -> usize {
        self.lanes.iter().filter(|l| !l.tree.drained()).count()
    }

    /// Whether profiling has started (and not yet ended).
    pub fn is_profiling(&self) -> bool {
        matches!(self.phase, RunPhase::Profiling { .. })
    }

    /// The next instant the machine needs a [`Event::Wake`], if any.
    pub fn next_wake(&mut self) -> Option<u64> {
        let timer = match self.phase {
            RunPhase::Profiling { .. } => match (self.peek_timer(), self.peek_watchdog()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            RunPhase::Warmup { .. } => self.primer_queue.front().map(|p| p.0),
            _ => None,
        };
        let phase = match self.phase {
            RunPhase::Warmup { until } => Some(until),
            RunPhase::Profiling { deadline } => Some(deadline),
            RunPhase::Draining { cancel_at } => Some(cancel_at),
            _ => None,
        };
        match (timer, phase) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Feed one event; actions are appended to `out`.
    pub fn handle(&mut self, now: u64, event: Event, out: &mut Vec<Action>) {
        if self.phase == RunPhase::Done {
            return;
        }
        match event {
            Event::Start => {
                if self.phase == RunPhase::NotStarted {
                    self.start(now, out);
                }
            }
            // The driver forgets its wake once delivered: always tell it the next one.
            Event::Wake => self.last_wake = None,
            Event::Completed(id) => self.on_done(now, now, id, None, out),
            Event::Failed(id, f) => self.on_done(now, now, id, Some(f), out),
        }
        self.after_event(now, out);
    }

    /// A request that ended at `at` (≤ `now`) on the target's clock, learnt of at `now`: its
    /// stream's next turn (and spawned children) wait their delays from `at`, so a late delivery
    /// does not shift the session. For targets whose clock and delivery differ (a time-scaled
    /// server stamps its events with engine time; see `docs/replay.md`).
    pub fn handle_done_at(&mut self, now: u64, at: u64, id: RequestId, failure: Option<Failure>, out: &mut Vec<Action>) {
        if self.phase == RunPhase::Done {
            return;
        }
        self.on_done(now, at.min(now), id, failure, out);
        self.after_event(now, out);
    }

    fn after_event(&mut self, now: u64, out: &mut Vec<Action>) {
        self.advance(now, out);
        if self.phase != RunPhase::Done {
            let w = self.next_wake();
            if w != self.last_wake {
                if let Some(w) = w {
                    out.push(Action::Wake(w));
                }
                self.last_wake = w;
            }
        }
    }

    /// Convenience wrapper returning the actions.
    pub fn step(&mut self, now: u64, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle(now, event, &mut out);
        out
    }

    // -----------------------------------------------------------------------------------------

    fn next_trace(&mut self) -> Arc<TracePlan> {
        let p = self.pool[self.sampler % self.pool.len()].clone();
        self.sampler += 1;
        p
    }

    fn new_tree(&mut self, lane: u32, pass: u64, plan: Arc<TracePlan>) -> Tree {
        let marker_pass = self.marker_passes.entry(plan.id.clone()).or_insert(0);
        let marker = Marker::new(&self.cfg.run_id, *marker_pass, lane, &plan.id);
        *marker_pass += 1;
        let play = self.next_play;
        self.next_play += 1;
        self.stats.plays_started += 1;
        let streams = plan
            .streams
            .iter()
            .enumerate()
            .map(|(s, _)| {
                let k = sha_key(&[b"corr", &marker.digest, &(s as u64).to_le_bytes()]);
                Stream {
                    next: 0,
                    done: 0,
                    state: SState::Idle,
                    spawned: s == 0,
                    terminated: false,
                    timer_at: 0,
                    timer_seq: 0,
                    corr: Arc::from(format!("{k:016x}")),
                }
            })
            .collect();
        Tree { plan, play, pass, marker, streams, in_flight: 0, watch_seq: 0 }
    }

    /// Put stream `s`'s next turn on its delay timer.
    fn schedule(&mut self, now: u64, lane: u32, s: u16) {
        let tree = &self.lanes[lane as usize].tree;
        let su = s as usize;
        let next = tree.streams[su].next as usize;
        if let Some(turn) = tree.plan.streams[su].turns.get(next) {
            self.schedule_at(lane, s, now.saturating_add(turn.delay_ns));
        }
    }

    /// Put stream `s`'s next turn on a timer firing at `at`.
    fn schedule_at(&mut self, lane: u32, s: u16, at: u64) {
        let tree = &mut self.lanes[lane as usize].tree;
        let su = s as usize;
        if tree.streams[su].terminated || tree.streams[su].next as usize >= tree.plan.streams[su].turns.len() {
            return;
        }
        let st = &mut tree.streams[su];
        st.state = SState::Timer;
        st.timer_at = at;
        self.seq += 1;
        st.timer_seq = self.seq;
        let play = tree.play;
        self.timers.push(Reverse((at + self.shift, self.seq, lane, play, s)));
    }

    fn timer_valid(&self, e: &TimerEntry) -> bool {
        let tree = &self.lanes[e.2 as usize].tree;
        tree.play == e.3 && {
            let st = &tree.streams[e.4 as usize];
            st.state == SState::Timer && st.timer_seq == e.1
        }
    }

    fn peek_timer(&mut self) -> Option<u64> {
        while let Some(Reverse(e)) = self.timers.peek() {
            if self.timer_valid(e) {
                return Some(e.0 - self.shift);
            }
            self.timers.pop();
        }
        None
    }

    fn prereqs_met(&self, lane: u32, s: u16) -> bool {
        let tree = &self.lanes[lane as usize].tree;
        let st = &tree.streams[s as usize];
        let turn = &tree.plan.streams[s as usize].turns[st.next as usize];
        turn.preds.iter().all(|&p| tree.turn_done(p))
    }

    /// Send every Due stream of a lane whose prerequisites are met (profiling only).
    fn try_send_lane(&mut self, now: u64, lane: u32, out: &mut Vec<Action>) {
        if !matches!(self.phase, RunPhase::Profiling { deadline } if now < deadline) {
            return;
        }
        let n = self.lanes[lane as usize].tree.streams.len();
        for s in 0..n as u16 {
            if self.lanes[lane as usize].tree.streams[s as usize].state == SState::Due && self.prereqs_met(lane, s) {
                let i = self.lanes[lane as usize].tree.streams[s as usize].next;
                let out_tokens = self.lanes[lane as usize].tree.plan.streams[s as usize].prompts.turns[i as usize].output_tokens;
                self.send(now, lane, s, i, Phase::Profiling, RequestKind::Turn, out_tokens, out);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send(&mut self, now: u64, lane: u32, s: u16, i: u32, phase: Phase, kind: RequestKind, max_tokens: u64, out: &mut Vec<Action>) {
        let id = self.next_id;
        self.next_id += 1;
        let tree = &mut self.lanes[lane as usize].tree;
        let sp = &tree.plan.streams[s as usize];
        let st = &mut tree.streams[s as usize];
        st.state = SState::InFlight;
        st.next = i + 1;
        tree.in_flight += 1;
        tree.watch_seq = 0;
        let spec = RequestSpec {
            id,
            lane,
            play: tree.play,
            pass: tree.pass,
            phase,
            kind,
            conversation_id: sp.conversation_id.clone(),
            correlation_id: st.corr.clone(),
            root_correlation_id: tree.streams[0].corr.clone(),
            turn_index: i,
            stream: s,
            max_tokens: max_tokens.max(1),
            recorded_output_tokens: sp.prompts.turns[i as usize].output_tokens,
            prompt: Prompt { conversation: sp.prompts.clone(), turn: i, marker: Some(tree.marker) },
            source_trace_id: tree.plan.id.clone(),
            source_outer_idx: sp.turns[i as usize].outer_idx,
            source_kind: sp.kind,
        };
        self.inflight.insert(id, Flight { lane, play: tree.play, stream: s, turn: i, phase, kind });
        // Branches that began before this root turn's recorded end start with it.
        if s == 0 && kind != RequestKind::Primer {
            match phase {
                Phase::Profiling => self.spawn_children(now, lane, i, true),
                Phase::Warmup => {
                    let plan = self.lanes[lane as usize].tree.plan.clone();
                    for c in plan.spawned_by(i, true) {
                        self.lanes[lane as usize].tree.streams[c as usize].spawned = true;
                    }
                }
            }
        }
        self.stats.sent += 1;
        match kind {
            RequestKind::Primer => self.stats.primers_sent += 1,
            RequestKind::LaneWarmup => self.stats.warmup_sent += 1,
            RequestKind::Turn => {}
        }
        out.push(Action::Send(Box::new(spec)));
    }

    /// `ended`: when the request ended (≤ `now`); the stream's delays count from it.
    fn on_done(&mut self, now: u64, ended: u64, id: RequestId, failure: Option<Failure>, out: &mut Vec<Action>) {
        let Some(f) = self.inflight.remove(&id) else {
            return; // unknown or already cancelled
        };
        let lane = f.lane;
        {
            let tree = &mut self.lanes[lane as usize].tree;
            if tree.play != f.play {
                return;
            }
            tree.in_flight -= 1;
            let st = &mut tree.streams[f.stream as usize];
            st.done = st.done.max(f.turn + 1);
            st.state = SState::Idle;
            if failure == Some(Failure::ContextOverflow) {
                st.terminated = true;
                self.stats.context_overflows += 1;
            }
        }
        match f.phase {
            Phase::Warmup => {
                if failure.is_some() && f.stream == 0 {
                    self.cancel_all(out);
                    self.finish(Outcome::Cancelled { reason: "run_cancelled".into() }, out);
                    return;
                }
                self.on_warmup_done(now, lane, f, out);
                return;
            }
            Phase::Profiling => {
                if failure.is_some() {
                    self.stats.profiling_failed += 1;
                } else {
                    self.stats.profiling_completed += 1;
                }
                let total = self.stats.profiling_completed + self.stats.profiling_failed;
                let armed = total >= u64::from(self.cfg.concurrency.max(10));
                if armed && self.stats.profiling_failed as f64 / total as f64 > self.cfg.failed_request_threshold {
                    let failed = self.stats.profiling_failed;
                    self.cancel_all(out);
                    self.finish(Outcome::Aborted { failed, total }, out);
                    return;
                }
            }
        }
        if !matches!(self.phase, RunPhase::Profiling { .. }) {
            return;
        }
        // Spawn the children a completed root turn dispatches on return (at their offsets from
        // the branch start); schedule the stream's next turn.
        let terminated = self.lanes[lane as usize].tree.streams[f.stream as usize].terminated;
        if f.stream == 0 {
            self.spawn_children(ended, lane, f.turn, false);
        }
        if !terminated {
            self.schedule(ended, lane, f.stream);
        }
        self.release_timers(now, lane);
        self.try_send_lane(now, lane, out);
        if self.lanes[lane as usize].tree.drained() {
            self.recycle(now, lane, out);
        } else if self.lanes[lane as usize].tree.in_flight == 0 {
            self.arm_watchdog(ended, lane);
        }
    }

    /// Spawns the children of root turn `turn` that are dispatched when it is sent (`at_issue`)
    /// or when it completes, each on a timer at its first request's recorded offset from `at`.
    fn spawn_children(&mut self, at: u64, lane: u32, turn: u32, at_issue: bool) {
        let plan = self.lanes[lane as usize].tree.plan.clone();
        for c in plan.spawned_by(turn, at_issue) {
            let st = &mut self.lanes[lane as usize].tree.streams[c as usize];
            if !st.spawned {
                st.spawned = true;
                self.schedule(at, lane, c);
            }
        }
    }

    /// Zero-delay timers of a lane become Due right away.
    fn release_timers(&mut self, now: u64, lane: u32) {
        for st in self.lanes[lane as usize].tree.streams.iter_mut() {
            if st.state == SState::Timer && st.timer_at <= now {
                st.state = SState::Due;
            }
        }
    }

    /// The lane's tree is over: it takes the sampler's next trace from its first turn.
    fn replace_tree(&mut self, lane: u32) {
        let pass = self.lanes[lane as usize].tree.pass + 1;
        let plan = self.next_trace();
        let tree = self.new_tree(lane, pass, plan);
        let l = &mut self.lanes[lane as usize];
        l.tree = tree;
        l.origin_ms = None;
    }

    fn recycle(&mut self, now: u64, lane: u32, out: &mut Vec<Action>) {
        self.replace_tree(lane);
        self.schedule(now, lane, 0);
        self.release_timers(now, lane);
        self.try_send_lane(now, lane, out);
    }

    /// Per-tree idle cap (the reference's `ReplayBarrierCoordinator`): once a tree has had
    /// nothing in flight for the cap, measured on the driver's clock from `idle_since`, its pending
    /// timers advance together so the earliest fires then.
    fn arm_watchdog(&mut self, idle_since: u64, lane: u32) {
        let cap = self.cfg.trace_idle_cap_ns;
        let tree = &mut self.lanes[lane as usize].tree;
        if tree.in_flight > 0 || cap == 0 {
            return;
        }
        self.seq += 1;
        tree.watch_seq = self.seq;
        self.watchdogs.push(Reverse((idle_since.saturating_add(cap), self.seq, lane, tree.play)));
    }

    fn peek_watchdog(&mut self) -> Option<u64> {
        while let Some(&Reverse((at, seq, lane, play))) = self.watchdogs.peek() {
            let tree = &self.lanes[lane as usize].tree;
            if tree.play == play && tree.watch_seq == seq {
                return Some(at);
            }
            self.watchdogs.pop();
        }
        None
    }

    /// Fires the due watchdogs: each idle tree's timers advance so its earliest fires `now`.
    fn fire_watchdogs(&mut self, now: u64) {
        while let Some(at) = self.peek_watchdog() {
            if at > now {
                break;
            }
            let Reverse((_, _, lane, play)) = self.watchdogs.pop().expect("peeked");
            let tree = &mut self.lanes[lane as usize].tree;
            tree.watch_seq = 0;
            let earliest = tree.streams.iter().filter(|s| s.state == SState::Timer).map(|s| s.timer_at).min();
            let Some(e) = earliest.filter(|&e| e > now) else { continue };
            let delta = e - now;
            self.stats.tree_idle_shifts += 1;
            for (s, st) in tree.streams.iter_mut().enumerate() {
                if st.state == SState::Timer {
                    st.timer_at -= delta;
                    self.seq += 1;
                    st.timer_seq = self.seq;
                    self.timers.push(Reverse((st.timer_at + self.shift, self.seq, lane, play, s as u16)));
                }
            }
        }
    }

    fn cancel_all(&mut self, out: &mut Vec<Action>) {
        let mut ids: Vec<RequestId> = self.inflight.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let f = self.inflight.remove(&id).expect("present");
            let tree = &mut self.lanes[f.lane as usize].tree;
            if tree.play == f.play {
                tree.in_flight -= 1;
                let st = &mut tree.streams[f.stream as usize];
                st.state = SState::Idle;
                st.done = st.done.max(f.turn + 1);
            }
            self.stats.cancelled += 1;
            out.push(Action::Cancel(id));
        }
    }

    fn finish(&mut self, outcome: Outcome, out: &mut Vec<Action>) {
        self.phase = RunPhase::Done;
        self.last_wake = None;
        out.push(Action::Finished(outcome));
    }

    /// Time-driven transitions: warmup grace, deadline, drain, timers, idle caps.
    fn advance(&mut self, now: u64, out: &mut Vec<Action>) {
        loop {
            match self.phase {
                RunPhase::Warmup { until } if now >= until => self.expire_warmup(now, out),
                RunPhase::Warmup { .. } => {
                    self.send_due_primers(now, out);
                    return;
                }
                RunPhase::Profiling { deadline } if now >= deadline => {
                    out.push(Action::ProfilingEnded { at: deadline });
                    if self.inflight.is_empty() {
                        self.finish(Outcome::Completed, out);
                        return;
                    }
                    self.phase = RunPhase::Draining { cancel_at: deadline.saturating_add(self.cfg.grace_ns) };
                }
                RunPhase::Draining { cancel_at } => {
                    if now >= cancel_at {
                        self.cancel_all(out);
                    }
                    if self.inflight.is_empty() {
                        self.finish(Outcome::Completed, out);
                    }
                    return;
                }
                RunPhase::Profiling { .. } => {
                    self.fire_watchdogs(now);
                    // Fire due timers.
                    let mut touched: Vec<u32> = Vec::new();
                    while let Some(t) = self.peek_timer() {
                        if t > now {
                            break;
                        }
                        let Reverse(e) = self.timers.pop().expect("peeked");
                        self.lanes[e.2 as usize].tree.streams[e.4 as usize].state = SState::Due;
                        touched.push(e.2);
                    }
                    touched.sort_unstable();
                    touched.dedup();
                    for lane in touched {
                        self.try_send_lane(now, lane, out);
                    }
                    if self.phase != RunPhase::Done {
                        self.global_idle(now, out);
                    }
                    return;
                }
                _ => return,
            }
        }
    }

    /// Global idle cap: nothing in flight or sendable and the next timer is beyond the cap ⇒ shift
    /// every pending timer earlier by the same amount. Also breaks a stall (nothing in flight, no
    /// timers, a turn blocked on prerequisites) by releasing the earliest blocked turn.
    fn global_idle(&mut self, now: u64, out: &mut Vec<Action>) {
        if !self.inflight.is_empty() {
            return;
        }
        match self.peek_timer() {
            Some(t) => {
                let limit = now.saturating_add(self.cfg.system_idle_cap_ns);
                if t > limit {
                    self.shift += t - limit;
                    self.stats.global_idle_shifts += 1;
                    for l in &mut self.lanes {
                        for st in &mut l.tree.streams {
                            if st.state == SState::Timer {
                                st.timer_at -= t - limit;
                            }
                        }
                    }
                }
            }
            None => {
                // Stall: release the blocked turn that comes first in recorded order.
                let mut best: Option<(u32, u32, u16)> = None;
                for (li, l) in self.lanes.iter().enumerate() {
                    for (s, st) in l.tree.streams.iter().enumerate() {
                        if st.state == SState::Due {
                            let o = l.tree.plan.streams[s].turns[st.next as usize].order;
                            if best.is_none_or(|b| o < b.0) {
                                best = Some((o, li as u32, s as u16));
                            }
                        }
                    }
                }
                if let Some((_, lane, s)) = best {
                    self.stats.forced_releases += 1;
                    let i = self.lanes[lane as usize].tree.streams[s as usize].next;
                    let max = self.lanes[lane as usize].tree.plan.streams[s as usize].prompts.turns[i as usize].output_tokens;
                    self.send(now, lane, s, i, Phase::Profiling, RequestKind::Turn, max, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
