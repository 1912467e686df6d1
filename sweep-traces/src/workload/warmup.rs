//! The start of a run: lane placement, warmup and the hand-off to profiling, as agentx-harness
//! 1.0.12's `AgenticReplayStrategy` does them with InferenceX's settings (spread phase starts, a
//! per-lane warmup request count, the system idle cap).
//!
//! 1. **Primers.** Each live conversation of a lane's snapshot sends its last turn before t*
//!    with its full history and `max_tokens` 1. A primer that was recorded `lead` ms before its
//!    t* (capped at the system idle cap) is sent at `max_lead − lead`, so every lane's t* lands at
//!    the same instant.
//! 2. **Delay-free play.** When every primer is back, the live trees play on with no delays and
//!    `max_tokens` 1: a stream sends its next turn as soon as its previous one (and its
//!    prerequisites) are done, a root turn spawns its subagents at once, and a tree played to its
//!    end hands its lane the sampler's next trace. A lane stops after `warmup_requests_per_lane`
//!    such requests; warmup ends when nothing is in flight.
//! 3. **Hand-off.** Every live stream's next turn is placed at its recorded start minus its tree's
//!    t* (a tree begun during warmup: minus its first recorded start), one phase-wide minimum is
//!    subtracted so the earliest starts at once, and a root waiting on a join is released at the
//!    later of its place and its subagents' completion.

use std::sync::Arc;

use super::snapshot::{Snapshot, legacy_split, snapshot_at, t_star_ms};
use super::{Action, Flight, Lane, Phase, PrimerOutput, RequestKind, RunPhase, SState, TracePlan, Workload};

/// Milliseconds to nanoseconds, rounded (offsets are float ms, as the reference replay keeps them).
fn ms_to_ns(ms: f64) -> u64 {
    if ms.is_finite() && ms > 0.0 { (ms * 1e6).round() as u64 } else { 0 }
}

impl Workload {
    /// Takes the sampler's next trace with a usable start for `lane`, as the reference replay's
    /// `_build_trajectories` does (a trace with no live stream at t* falls back to the root-only
    /// split; one that has neither is skipped). `None` when no trace in the pool can start.
    fn place_lane(&mut self, lane: u32) -> Option<(Arc<TracePlan>, Snapshot)> {
        let cfg = &self.cfg;
        let (seed, lo, hi) = (cfg.seed, cfg.start_min_ratio, cfg.start_max_ratio);
        for _ in 0..(self.pool.len() * 2 + 1) {
            let plan = self.next_trace();
            let t = t_star_ms(&plan, seed, lane, lo, hi);
            if let Some(s) = snapshot_at(&plan, t) {
                return Some((plan, s));
            }
            if let Some(s) = legacy_split(&plan, seed, lane, lo, hi) {
                self.stats.legacy_starts += 1;
                return Some((plan, s));
            }
        }
        None
    }

    pub(super) fn start(&mut self, now: u64, out: &mut Vec<Action>) {
        let c = self.cfg.concurrency;
        if !self.cfg.warmup {
            for lane in 0..c {
                let plan = self.next_trace();
                let tree = self.new_tree(lane, 0, plan);
                self.lanes.push(Lane { tree, primers: 0, warm_used: 0, origin_ms: None });
            }
            self.begin_profiling(now, out);
            return;
        }
        self.phase = RunPhase::Warmup { until: now.saturating_add(self.cfg.warmup_grace_ns) };
        let cap_ms = self.cfg.system_idle_cap_ns as f64 / 1e6;
        // (lead ms or none, lane, stream, turn), in lane order then stream order.
        let mut primers: Vec<(Option<f64>, u32, u16, u32)> = Vec::new();
        for lane in 0..c {
            let Some((plan, snap)) = self.place_lane(lane) else {
                // Nothing in the pool can start mid-trace: play a trace from its first turn.
                let plan = self.next_trace();
                let tree = self.new_tree(lane, 0, plan);
                self.lanes.push(Lane { tree, primers: 0, warm_used: 0, origin_ms: None });
                continue;
            };
            let mut tree = self.new_tree(lane, 0, plan.clone());
            for st in tree.streams.iter_mut() {
                st.spawned = false;
            }
            for &f in &snap.finished {
                let st = &mut tree.streams[f as usize];
                let n = plan.streams[f as usize].turns.len() as u32;
                (st.spawned, st.next, st.done) = (true, n, n);
            }
            for l in &snap.live {
                let st = &mut tree.streams[l.stream as usize];
                (st.spawned, st.next, st.done) = (true, l.next, l.next);
            }
            let origin = snap.t_star_ms.is_finite().then_some(snap.t_star_ms);
            for (s, i) in snap.primers() {
                let lead = origin.map(|o| (o - plan.streams[s as usize].turns[i as usize].t * 1000.0).min(cap_ms));
                primers.push((lead, lane, s, i));
                // The primer is the stream's last turn before t*: sent, not yet done.
                let st = &mut tree.streams[s as usize];
                (st.next, st.done) = (i, i);
            }
            self.lanes.push(Lane { tree, primers: 0, warm_used: 0, origin_ms: origin });
        }
        let max_lead = primers.iter().filter_map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let mut queue: Vec<(u64, u32, u16, u32)> =
            primers.iter().map(|&(lead, l, s, i)| (now + lead.map_or(0, |d| ms_to_ns(max_lead - d)), l, s, i)).collect();
        queue.sort_by_key(|p| p.0);
        for &(_, l, _, _) in &queue {
            self.lanes[l as usize].primers += 1;
        }
        self.primer_queue = queue.into();
        self.send_due_primers(now, out);
        self.maybe_end_primers(now, out);
    }

    /// Sends the primers whose spread instant has come.
    pub(super) fn send_due_primers(&mut self, now: u64, out: &mut Vec<Action>) {
        while let Some(&(at, lane, s, i)) = self.primer_queue.front() {
            if at > now {
                break;
            }
            self.primer_queue.pop_front();
            let plan = self.lanes[lane as usize].tree.plan.clone();
            let max = match self.cfg.primer_output {
                PrimerOutput::Recorded => plan.streams[s as usize].prompts.turns[i as usize].output_tokens,
                PrimerOutput::One => 1,
            };
            self.send(now, lane, s, i, Phase::Warmup, RequestKind::Primer, max, out);
        }
    }

    /// Every primer is back: the delay-free play starts.
    fn maybe_end_primers(&mut self, now: u64, out: &mut Vec<Action>) {
        if self.pressure || !self.primer_queue.is_empty() || self.lanes.iter().any(|l| l.primers > 0) {
            return;
        }
        self.pressure = true;
        for lane in 0..self.lanes.len() as u32 {
            self.pump_warmup(now, lane, out);
        }
        self.maybe_end_warmup(now, out);
    }

    /// Sends every ready stream of a lane while the lane's warmup quota lasts.
    fn pump_warmup(&mut self, now: u64, lane: u32, out: &mut Vec<Action>) {
        let quota = self.cfg.warmup_requests_per_lane;
        let n = self.lanes[lane as usize].tree.streams.len();
        for s in 0..n as u16 {
            if self.lanes[lane as usize].warm_used >= quota {
                return;
            }
            let tree = &self.lanes[lane as usize].tree;
            let st = &tree.streams[s as usize];
            if !st.spawned || st.state != SState::Idle || tree.stream_finished(s as usize) || !self.prereqs_met(lane, s) {
                continue;
            }
            let i = st.next;
            self.lanes[lane as usize].warm_used += 1;
            self.send(now, lane, s, i, Phase::Warmup, RequestKind::LaneWarmup, 1, out);
        }
    }

    /// A warmup request finished (failures of root conversations were handled by the caller).
    pub(super) fn on_warmup_done(&mut self, now: u64, lane: u32, f: Flight, out: &mut Vec<Action>) {
        if f.kind == RequestKind::Primer {
            self.lanes[lane as usize].primers -= 1;
            self.maybe_end_primers(now, out);
            return;
        }
        if f.stream == 0 {
            let tree = &mut self.lanes[lane as usize].tree;
            let plan = tree.plan.clone();
            for c in plan.spawned_by(f.turn, false) {
                tree.streams[c as usize].spawned = true;
            }
        }
        if self.lanes[lane as usize].tree.drained() {
            self.stats.warmup_recycles += 1;
            self.replace_tree(lane);
            // The reference places a tree begun in warmup on the clock of its first recorded turn.
            let l = &mut self.lanes[lane as usize];
            l.origin_ms = l.tree.plan.streams[0].turns.first().map(|t| t.t * 1000.0);
        }
        self.pump_warmup(now, lane, out);
        self.maybe_end_warmup(now, out);
    }

    fn maybe_end_warmup(&mut self, now: u64, out: &mut Vec<Action>) {
        if matches!(self.phase, RunPhase::Warmup { .. }) && self.pressure && self.inflight.is_empty() {
            self.begin_profiling(now, out);
        }
    }

    /// The warmup grace ran out: what is left of warmup is cancelled and profiling starts.
    pub(super) fn expire_warmup(&mut self, now: u64, out: &mut Vec<Action>) {
        self.cancel_all(out);
        // Primers never sent count as played, like cancelled ones: the streams go on after them.
        for (_, lane, st, i) in std::mem::take(&mut self.primer_queue) {
            let st = &mut self.lanes[lane as usize].tree.streams[st as usize];
            (st.next, st.done) = (i + 1, i + 1);
        }
        for l in &mut self.lanes {
            l.primers = 0;
        }
        self.pressure = true;
        self.begin_profiling(now, out);
    }

    pub(super) fn begin_profiling(&mut self, now: u64, out: &mut Vec<Action>) {
        let deadline = now.saturating_add(self.cfg.duration_ns);
        self.phase = RunPhase::Profiling { deadline };
        out.push(Action::ProfilingStarted { at: now, deadline });
        let quota = self.cfg.warmup_requests_per_lane;
        if self.cfg.warmup {
            self.stats.short_warmup_lanes = self.lanes.iter().filter(|l| l.warm_used < quota).count() as u64;
        }
        // Each live stream's place (ms) on its tree's clock; a lane with nothing left takes a new
        // trace from its first turn.
        let mut places: Vec<(u32, u16, f64, bool)> = Vec::new();
        for lane in 0..self.lanes.len() as u32 {
            if self.lanes[lane as usize].tree.drained() {
                self.replace_tree(lane);
            }
            let l = &self.lanes[lane as usize];
            let tree = &l.tree;
            for s in 0..tree.streams.len() {
                let st = &tree.streams[s];
                if !st.spawned || tree.stream_finished(s) || st.state != SState::Idle {
                    continue;
                }
                let turn = &tree.plan.streams[s].turns[st.next as usize];
                let place = match (l.origin_ms, self.cfg.warmup) {
                    (Some(o), true) => (turn.t * 1000.0 - o).max(0.0),
                    _ => turn.delay_ns as f64 / 1e6,
                };
                places.push((lane, s as u16, place, !self.prereqs_met(lane, s as u16)));
            }
        }
        let t0 = places.iter().filter(|p| !p.3).map(|p| p.2).fold(f64::INFINITY, f64::min);
        let t0 = if t0.is_finite() { t0 } else { 0.0 };
        for &(lane, s, place, _) in &places {
            let at = now.saturating_add(ms_to_ns(place - t0));
            self.schedule_at(lane, s, at);
        }
        // Every tree starts profiling idle: its idle watchdog runs from now.
        for lane in 0..self.lanes.len() as u32 {
            self.arm_watchdog(now, lane);
        }
    }
}
