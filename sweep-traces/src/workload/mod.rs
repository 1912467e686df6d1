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
pub mod fixed;
pub mod pcg64;
pub mod plan;
pub mod snapshot;

mod lanes;
mod profiling;
mod requests;
mod timers;
mod types;
mod warmup;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

pub use plan::{SourceKind, StreamPlan, TracePlan, TurnRef, TurnTiming};
pub use snapshot::{LiveStream, Snapshot, legacy_split, snapshot_at, t_star_ms};
pub use types::{
    Action, Event, Failure, Outcome, Phase, PrimerOutput, RequestId, RequestKind, RequestSpec, WorkloadConfig, WorkloadStats,
    random_benchmark_id,
};

use crate::prompt::Marker;

const SEC: u64 = 1_000_000_000;

// The run's state: lanes each hold one session tree of streams; requests in flight; the phase.

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
/// What the drivers move: the AgentX replay ([`Workload`]) or the fixed-length closed loop
/// ([`fixed::FixedWorkload`]). Both take `(now, event)` and append [`Action`]s.
pub trait Machine {
    /// The most requests in flight at once (sizes the driver's caches).
    fn concurrency(&self) -> u32;
    /// Feed one event; actions are appended to `out`.
    fn handle(&mut self, now: u64, event: Event, out: &mut Vec<Action>);
    /// A request that ended at `at` (≤ `now`) on the target's clock, learnt of at `now`.
    fn handle_done_at(&mut self, now: u64, at: u64, id: RequestId, failure: Option<Failure>, out: &mut Vec<Action>);
}

impl Machine for Workload {
    fn concurrency(&self) -> u32 {
        self.cfg.concurrency
    }
    fn handle(&mut self, now: u64, event: Event, out: &mut Vec<Action>) {
        Workload::handle(self, now, event, out)
    }
    fn handle_done_at(&mut self, now: u64, at: u64, id: RequestId, failure: Option<Failure>, out: &mut Vec<Action>) {
        Workload::handle_done_at(self, now, at, id, failure, out)
    }
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
    /// A trace that does not compile into a replay plan ([`TracePlan::build`]).
    #[error("trace {trace}: no main-agent request to replay")]
    NoMainRequest { trace: String },
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
}

#[cfg(test)]
mod tests;
