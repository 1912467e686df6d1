//! `--scheduler-recv-interval`: how often the scheduler takes new requests off its socket.
//!
//! SGLang's `SchedulerRecvSkipper` adds the weight of the last batch's forward mode to a
//! counter on every loop iteration and polls only when the counter reaches the interval:
//! decode and verify steps weigh 1 (so a request that arrives mid-decode waits up to
//! `interval` decode steps before it is even queued, a direct TTFT cost), an extend step
//! weighs 1000 (the next iteration polls), and an idle loop spins through its weight-1
//! iterations in microseconds (polls at once). The weights are `SGLANG_SCHEDULER_RECV_
//! SKIPPER_WEIGHT_*`.

use super::Engine;

/// What the scheduler's previous iteration ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LastMode {
    /// Nothing (idle loop, or the first iteration).
    Idle,
    /// A prefill (extend) or mixed batch.
    Extend,
    Decode,
    /// A speculative verify step.
    Verify,
}

/// Requests that arrived but the scheduler has not received yet, and the skipper's counter.
#[derive(Debug)]
pub(super) struct RecvSkipper {
    threshold: u32,
    counter: u32,
    pub(super) inbox: Vec<u32>,
    pub(super) last_mode: LastMode,
}

impl RecvSkipper {
    pub(super) fn new(interval: u32) -> RecvSkipper {
        // Starts full: the first iteration polls.
        RecvSkipper { threshold: interval.max(1), counter: interval.max(1), inbox: Vec::new(), last_mode: LastMode::Idle }
    }

    /// Whether arrivals wait for a poll at all (`--scheduler-recv-interval` > 1).
    pub(super) fn skips(&self) -> bool {
        self.threshold > 1
    }
}

impl Engine {
    /// One scheduler iteration's poll: moves the inbox onto the ranks' waiting queues when
    /// the counter reaches the interval.
    pub(super) fn poll_inbox(&mut self) {
        let e = &self.cfg.env;
        let r = &mut self.recv;
        if !r.skips() {
            return;
        }
        let w = match r.last_mode {
            LastMode::Idle => r.threshold,
            LastMode::Extend => e.recv_skipper_weight_default,
            LastMode::Decode => e.recv_skipper_weight_decode,
            LastMode::Verify => e.recv_skipper_weight_target_verify,
        };
        r.counter = r.counter.saturating_add(w);
        if r.counter < r.threshold {
            return;
        }
        r.counter = 0;
        for s in std::mem::take(&mut r.inbox) {
            let rank = self.reqs[s as usize].rank as usize;
            self.ranks[rank].waiting.push(s);
        }
    }
}
