//! The bookkeeping both drivers share: what the workload's actions mean for the point's records,
//! the requests open, progress, the profiling window, the wake-up and the outcome. A driver hands
//! each batch of actions to [`Ledger::apply`], carries out the [`Command`]s it gets back on its
//! transport (the engine in process, or HTTP), reports each request's end with [`Ledger::end`],
//! and closes the point with [`Ledger::finish`]. So a request counts, is cancelled and is closed
//! the same way on the virtual clock and in real time; each driver keeps only its clock and
//! transport.

use std::collections::HashMap;

use crate::records::{Record, RecordError};
use crate::workload::{Action, Outcome, RequestId, RequestSpec};

/// Live view of a run (for progress bars).
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub now_ns: u64,
    pub profiling: bool,
    pub sent: u64,
    pub done: u64,
    pub errors: u64,
    pub output_tokens: u64,
}

/// Plain progress lines for logs (CI, batch jobs): a live point otherwise prints nothing until
/// it ends. One line per `every`, at most.
pub struct ProgressLines {
    label: String,
    every: std::time::Duration,
    last: std::time::Instant,
}

impl ProgressLines {
    pub fn new(label: impl Into<String>, every: std::time::Duration) -> Self {
        ProgressLines { label: label.into(), every, last: std::time::Instant::now() }
    }

    /// Prints `p` when a line is due (and says whether it did); `secs` is the point's time so
    /// far on its clock.
    pub fn update(&mut self, p: &Progress, secs: f64) -> bool {
        if self.last.elapsed() < self.every {
            return false;
        }
        self.last = std::time::Instant::now();
        tracing::info!(target: crate::PROGRESS, "{}", self.line(p, secs));
        true
    }

    pub fn line(&self, p: &Progress, secs: f64) -> String {
        let tps = if secs > 0.0 { p.output_tokens as f64 / secs } else { 0.0 };
        format!(
            "{}: {} {secs:.0} s, {} sent, {} done, {} errors, {tps:.0} output tok/s",
            self.label,
            if p.profiling { "profiling" } else { "warmup/drain" },
            p.sent,
            p.done,
            p.errors
        )
    }
}

/// What the transport must do.
#[derive(Debug)]
pub enum Command {
    /// Start this request (its record is open).
    Send(Box<RequestSpec>),
    /// Stop this request; its record is closed as cancelled, and its end is not reported.
    Cancel(RequestId),
}

/// How the requests still open at the end are closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// The run ended (deadline, interruption): they are cancelled.
    Cancelled,
    /// The server went away: they are dropped connections.
    ServerGone,
}

/// Records and state of one point's replay.
#[derive(Debug, Default)]
pub struct Ledger {
    records: Vec<Record>,
    open: HashMap<RequestId, usize>,
    pub progress: Progress,
    /// (profiling start, deadline) on the driver's clock, ns.
    pub profiling: Option<(u64, u64)>,
    /// How the workload ended (set by its `Finished` action).
    pub outcome: Option<Outcome>,
    wake: Option<u64>,
}

impl Ledger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the workload's `actions` taken at `now` and appends what the transport must do.
    pub fn apply(&mut self, now: u64, actions: &mut Vec<Action>, out: &mut Vec<Command>) {
        for a in actions.drain(..) {
            match a {
                Action::Send(spec) => {
                    self.open.insert(spec.id, self.records.len());
                    self.records.push(super::record_for(&spec, now));
                    self.progress.sent += 1;
                    out.push(Command::Send(spec));
                }
                Action::Cancel(id) => {
                    if let Some(idx) = self.open.remove(&id) {
                        let r = &mut self.records[idx];
                        r.was_cancelled = true;
                        r.end_ns = now;
                        out.push(Command::Cancel(id));
                    }
                }
                Action::Wake(t) => self.wake = Some(t),
                Action::ProfilingStarted { at, deadline } => {
                    self.profiling = Some((at, deadline));
                    self.progress.profiling = true;
                }
                Action::ProfilingEnded { at } => {
                    // An open window (fixed-length: it lasts until the last request ends) closes here.
                    if let Some((start, crate::workload::fixed::OPEN_DEADLINE)) = self.profiling {
                        self.profiling = Some((start, at.max(start)));
                    }
                    self.progress.profiling = false
                }
                Action::Finished(o) => self.outcome = Some(o),
            }
        }
    }

    /// The profiling window as it stands at `now`: a window still open (a fixed-length run
    /// stopped before its last request) ends at `now`.
    pub fn window_at(&self, now: u64) -> Option<(u64, u64)> {
        self.profiling.map(|(a, d)| (a, if d == crate::workload::fixed::OPEN_DEADLINE { now.max(a) } else { d }))
    }

    /// When the workload wants to be woken next (until [`Ledger::woke`]).
    pub fn wake(&self) -> Option<u64> {
        self.wake
    }

    /// The wake-up was delivered.
    pub fn woke(&mut self) {
        self.wake = None;
    }

    pub fn is_finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// Records so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The record of an open request (none once it ended or was cancelled).
    pub fn open_record(&mut self, id: RequestId) -> Option<&mut Record> {
        let idx = *self.open.get(&id)?;
        Some(&mut self.records[idx])
    }

    /// The request ended; `record`, when given, replaces what was recorded so far. Counts it and
    /// returns its final record, or `None` when it is not open (cancelled before, or unknown): its
    /// end must not reach the workload then.
    pub fn end(&mut self, id: RequestId, record: Option<Record>) -> Option<&Record> {
        let idx = self.open.remove(&id)?;
        if let Some(r) = record {
            self.records[idx] = r;
        }
        let r = &self.records[idx];
        self.progress.done += 1;
        self.progress.output_tokens += r.output_tokens.unwrap_or(0);
        if r.error.is_some() {
            self.progress.errors += 1;
        }
        Some(r)
    }

    /// Closes the requests still open at `now` and hands over every record, in the order sent.
    pub fn finish(mut self, now: u64, close: Close) -> Vec<Record> {
        for &idx in self.open.values() {
            let r = &mut self.records[idx];
            match close {
                Close::ServerGone => {
                    r.error = Some(RecordError { kind: "connection_dropped".into(), message: "server died".into(), status: None });
                }
                Close::Cancelled => r.was_cancelled = true,
            }
            r.end_ns = now;
        }
        self.progress.now_ns = now;
        self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Event, Workload, WorkloadConfig, default_pool};

    /// A real workload's first actions.
    fn started() -> (Ledger, Vec<Command>) {
        let cfg = WorkloadConfig { concurrency: 2, duration_ns: 60_000_000_000, ..WorkloadConfig::default() };
        let mut wl = Workload::new(cfg, default_pool(1)).unwrap();
        let mut actions = Vec::new();
        wl.handle(0, Event::Start, &mut actions);
        let mut l = Ledger::new();
        let mut out = Vec::new();
        l.apply(0, &mut actions, &mut out);
        (l, out)
    }

    #[test]
    fn sends_open_records_and_ends_close_them_once() {
        let (mut l, out) = started();
        let ids: Vec<RequestId> = out
            .iter()
            .map(|c| match c {
                Command::Send(s) => s.id,
                Command::Cancel(_) => panic!("nothing to cancel yet"),
            })
            .collect();
        assert!(!ids.is_empty());
        assert_eq!((l.len(), l.progress.sent), (ids.len(), ids.len() as u64));
        assert!(l.open_record(ids[0]).is_some());
        let mut rec = l.open_record(ids[0]).unwrap().clone();
        rec.output_tokens = Some(7);
        rec.end_ns = 5;
        assert_eq!(l.end(ids[0], Some(rec)).map(|r| r.end_ns), Some(5));
        // Ended: not open any more, and a second end is not reported.
        assert!(l.open_record(ids[0]).is_none());
        assert!(l.end(ids[0], None).is_none());
        assert_eq!((l.progress.done, l.progress.output_tokens), (1, 7));
    }

    #[test]
    fn cancel_closes_the_record_and_hides_its_end() {
        let (mut l, out) = started();
        let Command::Send(s) = &out[0] else { panic!() };
        let id = s.id;
        let mut out = Vec::new();
        l.apply(9, &mut vec![Action::Cancel(id), Action::Cancel(id)], &mut out);
        assert_eq!(out.len(), 1, "a cancel is carried out once");
        assert!(l.end(id, None).is_none());
        let recs = l.finish(10, Close::Cancelled);
        assert!(recs[0].was_cancelled);
        assert_eq!(recs[0].end_ns, 9);
    }

    #[test]
    fn finish_closes_what_is_open_as_the_ending_says() {
        let (l, _) = started();
        let recs = l.finish(42, Close::Cancelled);
        assert!(recs.iter().all(|r| r.was_cancelled && r.end_ns == 42 && r.error.is_none()));
        let (l, _) = started();
        let recs = l.finish(42, Close::ServerGone);
        assert!(recs.iter().all(|r| !r.was_cancelled && r.error.as_ref().is_some_and(|e| e.kind == "connection_dropped")));
    }

    #[test]
    fn progress_lines_are_plain_and_throttled() {
        let p = Progress { now_ns: 0, profiling: true, sent: 12, done: 10, errors: 1, output_tokens: 5000 };
        let mut l = ProgressLines::new("cfg/tp4-c4", std::time::Duration::from_secs(3600));
        assert_eq!(l.line(&p, 100.0), "cfg/tp4-c4: profiling 100 s, 12 sent, 10 done, 1 errors, 50 output tok/s");
        assert!(!l.update(&p, 1.0), "a line before it is due");
        let mut l = ProgressLines::new("x", std::time::Duration::ZERO);
        assert!(l.update(&p, 1.0) && l.update(&p, 2.0));
    }

    /// A fixed-length run's window is open until its last request ends: stopped before that, it
    /// ends where the run stopped, not at the end of time; closed, it is the machine's.
    #[test]
    fn an_open_window_ends_where_the_run_stopped() {
        use crate::workload::Machine;
        use crate::workload::fixed::{FixedConfig, FixedWorkload, OPEN_DEADLINE};
        let mut wl = FixedWorkload::new(FixedConfig { num_warmups: 0, ..FixedConfig::inferencex(64, 8, 2) }).unwrap();
        let (mut l, mut actions, mut cmds) = (Ledger::new(), Vec::new(), Vec::new());
        wl.handle(5, Event::Start, &mut actions);
        l.apply(5, &mut actions, &mut cmds);
        assert_eq!(l.profiling, Some((5, OPEN_DEADLINE)));
        assert_eq!(l.window_at(905), Some((5, 905)));
        l.apply(1000, &mut vec![Action::ProfilingEnded { at: 1000 }], &mut cmds);
        assert_eq!(l.window_at(2000), Some((5, 1000)));
    }
}
