//! Where a lane starts: the reference replay's wall-clock snapshot of a session tree at t*.
//!
//! agentx-harness 1.0.12 (`TrajectorySource`) draws t* per (trace, lane) uniformly in
//! `[start + lo·D, start + hi·D]` of the span of the root *and all its descendants*, in float
//! milliseconds (`t · 1000`), with numpy's `default_rng(sha256 seed).uniform`. It then takes every
//! conversation alive at t*: the root from its first turn at or after t*, each child of a branch
//! that had begun (or whose spawning root turn was sent) by t* from its first turn at or after t*. Each live stream with an earlier turn is primed with that turn;
//! a root whose next turn is the join of a live subagent waits for it. Times here are the trace's
//! recorded seconds; comparisons are made in milliseconds exactly as the harness makes them.

use super::pcg64::{Pcg64, trace_lane_seed};
use super::plan::TracePlan;

/// One stream's position at t*.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveStream {
    pub stream: u16,
    /// First turn at or after t* (the first profiled turn unless warmup plays past it).
    pub next: u32,
    /// Recorded start of `next` minus t*, ms (≥ 0): the stream's offset on the tree's clock.
    pub offset_ms: f64,
    /// A root whose next turn joins a live subagent: dispatched when the subagent finishes.
    pub waiting: bool,
}

/// A lane's starting state in a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// t*, ms of trace time.
    pub t_star_ms: f64,
    /// Live streams: the root first (when it has a turn at or after t*), then subagents.
    pub live: Vec<LiveStream>,
    /// Streams that are over at t* (every turn before t*): they count as finished.
    pub finished: Vec<u16>,
}

impl Snapshot {
    /// The primers: each live stream's last turn before t* (a stream that had not started has
    /// none).
    pub fn primers(&self) -> impl Iterator<Item = (u16, u32)> + '_ {
        self.live.iter().filter(|l| l.next > 0).map(|l| (l.stream, l.next - 1))
    }
}

fn ms(t: f64) -> f64 {
    t * 1000.0
}

/// t* in ms for (base seed, trace, lane), as the harness draws it.
pub fn t_star_ms(plan: &TracePlan, base_seed: u64, lane: u32, lo_ratio: f64, hi_ratio: f64) -> f64 {
    let (start, end) = (ms(plan.t_min), ms(plan.t_max));
    let d = end - start;
    let lo = start + lo_ratio * d;
    let hi = (start + hi_ratio * d).max(lo);
    if hi == lo {
        return lo;
    }
    Pcg64::from_seed(u128::from(trace_lane_seed(base_seed, &plan.id, lane))).uniform(lo, hi)
}

fn next_at_or_after(plan: &TracePlan, s: usize, t_star: f64) -> Option<u32> {
    plan.streams[s].turns.iter().position(|t| ms(t.t) >= t_star).map(|i| i as u32)
}

/// The snapshot of `plan` at t* (ms), or `None` when nothing would be dispatchable at t* (no live
/// stream, or only a root waiting on a join).
pub fn snapshot_at(plan: &TracePlan, t_star: f64) -> Option<Snapshot> {
    let root_next = next_at_or_after(plan, 0, t_star);
    let mut live = Vec::new();
    let mut finished = Vec::new();
    let mut join_targets = Vec::new();
    for b in &plan.branches {
        if t_star < ms(b.start) {
            // Not begun at t*: live only if its spawning root turn was already sent.
            let spawn_ts = ms(plan.streams[0].turns[b.spawn_turn as usize].t);
            let not_sent = t_star < spawn_ts || root_next.is_some_and(|n| n <= b.spawn_turn);
            if not_sent {
                continue;
            }
        }
        let mut any = false;
        for &c in &b.children {
            let s = &plan.streams[c as usize];
            match next_at_or_after(plan, c as usize, t_star) {
                Some(next) => {
                    let ts = ms(s.turns[next as usize].t);
                    live.push(LiveStream { stream: c, next, offset_ms: (ts - t_star).max(0.0), waiting: false });
                    any = true;
                }
                None => finished.push(c),
            }
        }
        if any && let Some(j) = b.join_turn {
            join_targets.push(j);
        }
    }
    match root_next {
        Some(next) => {
            let ts = ms(plan.streams[0].turns[next as usize].t);
            let waiting = join_targets.contains(&next);
            live.insert(0, LiveStream { stream: 0, next, offset_ms: (ts - t_star).max(0.0), waiting });
        }
        None => finished.insert(0, 0),
    }
    if live.iter().all(|l| l.waiting) {
        return None;
    }
    Some(Snapshot { t_star_ms: t_star, live, finished })
}

/// The harness's fallback for a trace with no usable snapshot: a root-only split at a turn k in
/// `[⌊lo·n⌋, ⌊hi·n⌋]` (capped at n − 2), drawn with `rng.choice`; turn k is primed and k + 1 is
/// the first profiled turn. `None` when the root has fewer than 2 turns.
pub fn legacy_split(plan: &TracePlan, base_seed: u64, lane: u32, lo_ratio: f64, hi_ratio: f64) -> Option<Snapshot> {
    let n = plan.streams[0].turns.len();
    if n <= 1 {
        return None;
    }
    let k = if n == 2 {
        0
    } else {
        let k_max = ((hi_ratio * n as f64) as usize).min(n - 2);
        let k_min = ((lo_ratio * n as f64) as usize).min(n - 2).min(k_max);
        let mut rng = Pcg64::from_seed(u128::from(trace_lane_seed(base_seed, &plan.id, lane)));
        k_min + rng.bounded_u32((k_max - k_min) as u32) as usize
    };
    let next = k as u32 + 1;
    let live = vec![LiveStream { stream: 0, next, offset_ms: 0.0, waiting: false }];
    // Subagents spawned before the split are over; later ones spawn as the root reaches them.
    let finished = plan.branches.iter().filter(|b| b.spawn_turn < next).flat_map(|b| b.children.iter().copied()).collect();
    Some(Snapshot { t_star_ms: f64::NAN, live, finished })
}
