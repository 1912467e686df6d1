//! A lane's session tree: taking the sampler's next trace with a fresh cache-bust marker and
//! correlation ids, spawning a root turn's children, and recycling a drained tree.

use std::sync::Arc;

use super::{Action, SState, Stream, TracePlan, Tree, Workload};
use crate::prompt::{Marker, sha_key};

impl Workload {
    pub(super) fn next_trace(&mut self) -> Arc<TracePlan> {
        let p = self.pool[self.sampler % self.pool.len()].clone();
        self.sampler += 1;
        p
    }

    pub(super) fn new_tree(&mut self, lane: u32, pass: u64, plan: Arc<TracePlan>) -> Tree {
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

    /// Spawns the children of root turn `turn` that are dispatched when it is sent (`at_issue`)
    /// or when it completes, each on a timer at its first request's recorded offset from `at`.
    pub(super) fn spawn_children(&mut self, at: u64, lane: u32, turn: u32, at_issue: bool) {
        let plan = self.lanes[lane as usize].tree.plan.clone();
        for c in plan.spawned_by(turn, at_issue) {
            let st = &mut self.lanes[lane as usize].tree.streams[c as usize];
            if !st.spawned {
                st.spawned = true;
                self.schedule(at, lane, c);
            }
        }
    }

    /// The lane's tree is over: it takes the sampler's next trace from its first turn.
    pub(super) fn replace_tree(&mut self, lane: u32) {
        let pass = self.lanes[lane as usize].tree.pass + 1;
        let plan = self.next_trace();
        let tree = self.new_tree(lane, pass, plan);
        let l = &mut self.lanes[lane as usize];
        l.tree = tree;
        l.origin_ms = None;
    }

    pub(super) fn recycle(&mut self, now: u64, lane: u32, out: &mut Vec<Action>) {
        self.replace_tree(lane);
        self.schedule(now, lane, 0);
        self.release_timers(now, lane);
        self.try_send_lane(now, lane, out);
    }
}
