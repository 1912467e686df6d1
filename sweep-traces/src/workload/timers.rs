//! Turn delay timers and the idle caps: the per-tree watchdog and the global cap (with its
//! stall breaker).

use std::cmp::Reverse;

use super::{Action, Phase, RequestKind, SState, TimerEntry, Workload};

impl Workload {
    /// Put stream `s`'s next turn on its delay timer.
    pub(super) fn schedule(&mut self, now: u64, lane: u32, s: u16) {
        let tree = &self.lanes[lane as usize].tree;
        let su = s as usize;
        let next = tree.streams[su].next as usize;
        if let Some(turn) = tree.plan.streams[su].turns.get(next) {
            self.schedule_at(lane, s, now.saturating_add(turn.delay_ns));
        }
    }

    /// Put stream `s`'s next turn on a timer firing at `at`.
    pub(super) fn schedule_at(&mut self, lane: u32, s: u16, at: u64) {
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

    pub(super) fn peek_timer(&mut self) -> Option<u64> {
        while let Some(Reverse(e)) = self.timers.peek() {
            if self.timer_valid(e) {
                return Some(e.0 - self.shift);
            }
            self.timers.pop();
        }
        None
    }

    /// Zero-delay timers of a lane become Due right away.
    pub(super) fn release_timers(&mut self, now: u64, lane: u32) {
        for st in self.lanes[lane as usize].tree.streams.iter_mut() {
            if st.state == SState::Timer && st.timer_at <= now {
                st.state = SState::Due;
            }
        }
    }

    /// Per-tree idle cap (the reference's `ReplayBarrierCoordinator`): once a tree has had
    /// nothing in flight for the cap, measured on the driver's clock from `idle_since`, its pending
    /// timers advance together so the earliest fires then.
    pub(super) fn arm_watchdog(&mut self, idle_since: u64, lane: u32) {
        let cap = self.cfg.trace_idle_cap_ns;
        let tree = &mut self.lanes[lane as usize].tree;
        if tree.in_flight > 0 || cap == 0 {
            return;
        }
        self.seq += 1;
        tree.watch_seq = self.seq;
        self.watchdogs.push(Reverse((idle_since.saturating_add(cap), self.seq, lane, tree.play)));
    }

    pub(super) fn peek_watchdog(&mut self) -> Option<u64> {
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
    pub(super) fn fire_watchdogs(&mut self, now: u64) {
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

    /// Global idle cap: nothing in flight or sendable and the next timer is beyond the cap ⇒ shift
    /// every pending timer earlier by the same amount. Also breaks a stall (nothing in flight, no
    /// timers, a turn blocked on prerequisites) by releasing the earliest blocked turn.
    pub(super) fn global_idle(&mut self, now: u64, out: &mut Vec<Action>) {
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
