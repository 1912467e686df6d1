//! Sending a stream's next turn once its prerequisites are met, and taking a request's
//! completion or failure: context overflow, the live abort, a failed root warmup, cancellation.

use super::{Action, Failure, Flight, Outcome, Phase, RequestId, RequestKind, RequestSpec, RunPhase, SState, Workload};
use crate::prompt::TurnPrompt;

impl Workload {
    pub(super) fn prereqs_met(&self, lane: u32, s: u16) -> bool {
        let tree = &self.lanes[lane as usize].tree;
        let st = &tree.streams[s as usize];
        let turn = &tree.plan.streams[s as usize].turns[st.next as usize];
        turn.preds.iter().all(|&p| tree.turn_done(p))
    }

    /// Send every Due stream of a lane whose prerequisites are met (profiling only).
    pub(super) fn try_send_lane(&mut self, now: u64, lane: u32, out: &mut Vec<Action>) {
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
    pub(super) fn send(
        &mut self,
        now: u64,
        lane: u32,
        s: u16,
        i: u32,
        phase: Phase,
        kind: RequestKind,
        max_tokens: u64,
        out: &mut Vec<Action>,
    ) {
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
            prompt: TurnPrompt { conversation: sp.prompts.clone(), turn: i, marker: Some(tree.marker) },
            source_trace_id: tree.plan.id.clone(),
            source_outer_idx: sp.turns[i as usize].outer_idx,
            source_kind: sp.kind,
            api: super::fixed::Api::Chat,
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
    pub(super) fn on_done(&mut self, now: u64, ended: u64, id: RequestId, failure: Option<Failure>, out: &mut Vec<Action>) {
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

    pub(super) fn cancel_all(&mut self, out: &mut Vec<Action>) {
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
}
