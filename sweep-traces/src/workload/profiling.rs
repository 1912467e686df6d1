//! Time-driven run phases: warmup's grace, the profiling window and its deadline, the drain
//! and its grace, and the end of the run.

use std::cmp::Reverse;

use super::{Action, Outcome, RunPhase, SState, Workload};

impl Workload {
    pub(super) fn finish(&mut self, outcome: Outcome, out: &mut Vec<Action>) {
        self.phase = RunPhase::Done;
        self.last_wake = None;
        out.push(Action::Finished(outcome));
    }

    /// Time-driven transitions: warmup grace, deadline, drain, timers, idle caps.
    pub(super) fn advance(&mut self, now: u64, out: &mut Vec<Action>) {
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
}
