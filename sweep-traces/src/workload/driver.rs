//! A minimal virtual-clock driver: it runs a [`Machine`] (the AgentX [`super::Workload`] or the
//! fixed-length loop) against a service-time function instead
//! of an engine. It shows the contract every driver follows (deliver completions and wakes in
//! time order, honour `Cancel`, stop at `Finished`) and serves tests and workload benchmarks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use super::{Action, Event, Failure, Machine, Outcome, RequestId, RequestSpec};

/// What the service does with one request: how long it takes and whether it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    pub duration_ns: u64,
    pub failure: Option<Failure>,
}

/// One sent request and what became of it.
#[derive(Debug, Clone)]
pub struct SentRecord {
    pub sent_at: u64,
    pub spec: RequestSpec,
    /// Completion (or failure) time; `None` if cancelled.
    pub done_at: Option<u64>,
    pub failure: Option<Failure>,
    pub cancelled: bool,
}

/// The log of a driven run.
#[derive(Debug, Default)]
pub struct DriveLog {
    pub records: Vec<SentRecord>,
    pub outcome: Option<Outcome>,
    pub profiling_start: Option<u64>,
    pub profiling_deadline: Option<u64>,
    /// When the machine said profiling ended.
    pub profiling_end: Option<u64>,
    /// Events delivered.
    pub events: u64,
}

/// Run `wl` to completion from `start`, serving each request with `service`. `check` is called
/// after every event (for invariant checks).
pub fn drive<M: Machine>(
    wl: &mut M,
    start: u64,
    mut service: impl FnMut(&RequestSpec) -> Service,
    mut check: impl FnMut(&M, u64),
) -> DriveLog {
    let mut log = DriveLog::default();
    let mut q = Queue::default();
    let mut actions = Vec::new();
    let mut now = start;
    let mut event = Event::Start;
    loop {
        actions.clear();
        wl.handle(now, event, &mut actions);
        log.events += 1;
        for a in actions.drain(..) {
            q.take(a, now, &mut service, &mut log);
        }
        check(wl, now);
        if log.outcome.is_some() {
            break;
        }
        match q.next_event(now, &mut log) {
            Some((t, e)) => (now, event) = (t, e),
            None => break,
        }
    }
    q.mark_cancelled(&mut log);
    log
}

/// What the driver waits for: the service's completions (by time) and the machine's wake.
#[derive(Default)]
struct Queue {
    /// (completion time, request, index in the log).
    pending: BinaryHeap<Reverse<(u64, RequestId, usize)>>,
    cancelled: HashSet<RequestId>,
    wake: Option<u64>,
}

impl Queue {
    /// Carries out one action at `now`.
    fn take(&mut self, a: Action, now: u64, service: &mut impl FnMut(&RequestSpec) -> Service, log: &mut DriveLog) {
        match a {
            Action::Send(spec) => {
                let s = service(&spec);
                let idx = log.records.len();
                self.pending.push(Reverse((now + s.duration_ns, spec.id, idx)));
                log.records.push(SentRecord { sent_at: now, spec: *spec, done_at: None, failure: s.failure, cancelled: false });
            }
            Action::Cancel(id) => {
                self.cancelled.insert(id);
            }
            Action::Wake(t) => self.wake = Some(t),
            Action::ProfilingStarted { at, deadline } => {
                log.profiling_start = Some(at);
                log.profiling_deadline = Some(deadline);
            }
            Action::ProfilingEnded { at } => log.profiling_end = Some(at),
            Action::Finished(o) => log.outcome = Some(o),
        }
    }

    /// The next event and its time: the earliest live completion, else the wake; `None` when
    /// there is neither.
    fn next_event(&mut self, now: u64, log: &mut DriveLog) -> Option<(u64, Event)> {
        while let Some(Reverse((_, id, idx))) = self.pending.peek().copied() {
            if self.cancelled.contains(&id) {
                self.pending.pop();
                log.records[idx].cancelled = true;
                log.records[idx].failure = None;
            } else {
                break;
            }
        }
        let next_done = self.pending.peek().map(|Reverse(e)| e.0);
        let take_done = match (next_done, self.wake) {
            (Some(d), Some(w)) => d <= w,
            (Some(_), None) => true,
            (None, _) => false,
        };
        match (take_done, self.wake) {
            (true, _) => {
                let Reverse((t, id, idx)) = self.pending.pop().expect("peeked");
                let now = t.max(now);
                log.records[idx].done_at = Some(now);
                let event = match log.records[idx].failure {
                    Some(f) => Event::Failed(id, f),
                    None => Event::Completed(id),
                };
                Some((now, event))
            }
            (false, Some(w)) => {
                self.wake = None;
                Some((w.max(now), Event::Wake))
            }
            (false, None) => None,
        }
    }

    /// Requests still pending at the end that were cancelled are logged as such.
    fn mark_cancelled(self, log: &mut DriveLog) {
        for Reverse((_, id, idx)) in self.pending {
            if self.cancelled.contains(&id) {
                log.records[idx].cancelled = true;
                log.records[idx].failure = None;
            }
        }
    }
}
