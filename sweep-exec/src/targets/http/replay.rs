//! The live replay loop: the workload driven in real time against a server, each request on its
//! own task, `/metrics` scraped every second, timeouts, cancellation and server death checked
//! every 200 ms.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;

use super::clock::Clock;
use super::{HttpTarget, h1};
use crate::metrics::PointContext;
use crate::records::{Record, RecordError};
use crate::run::launcher::LaunchError;
use crate::targets::ledger::{Close, Command, Ledger, Progress};
use crate::targets::scrape::{CpuSampler, Scrapes};
use crate::workload::{Action, Event, Failure, Machine, Outcome as WlOutcome, RequestId, RequestSpec};

/// The error of a request that ran past the request timeout.
fn timed_out(after: Duration) -> RecordError {
    RecordError { kind: "timeout".into(), message: format!("no complete answer within {:.1} s", after.as_secs_f64()), status: None }
}

/// The error of a stream that sent nothing for the stall timeout.
fn stalled(after: Duration) -> RecordError {
    RecordError {
        kind: "stall".into(),
        message: format!("the stream sent nothing for {:.1} s (--stall-timeout)", after.as_secs_f64()),
        status: None,
    }
}

/// A request in flight: its task, when it was sent (wall clock), and when its reply last
/// delivered bytes (the client's clock, nanoseconds).
struct InFlight {
    task: tokio::task::JoinHandle<()>,
    sent: Instant,
    touched: Arc<AtomicU64>,
}

/// What a live run produced.
pub struct LiveRun {
    pub records: Vec<Record>,
    pub outcome: Option<WlOutcome>,
    pub profiling: Option<(u64, u64)>,
    pub interrupted: bool,
    /// Why the run stopped early (server death), if it did.
    pub stopped: Option<String>,
    /// Every `/metrics` scrape of the point.
    pub scrapes: Scrapes,
    /// The harness's CPU seconds during the replay, its peak busy share of the cores, and the
    /// wall seconds.
    pub client_cpu_seconds: f64,
    pub client_cpu_max: f64,
    pub wall_seconds: f64,
}

impl LiveRun {
    /// `server_metrics_export.json` for the profiling window, and its summary for the aggregate;
    /// `None` when nothing was scraped.
    pub fn server_metrics(&self) -> Option<(Value, Value)> {
        if self.scrapes.scrapes.is_empty() {
            return None;
        }
        // From profiling start to the last scrape (drained requests finish after the deadline).
        let from = self.profiling.map(|p| p.0).unwrap_or(0);
        let export = self.scrapes.export(from, u64::MAX);
        let summary = crate::targets::scrape::summary(&export);
        Some((export, summary))
    }

    /// Copies the client measurements and server metrics into a point's context.
    pub fn fill(&self, ctx: &mut PointContext) -> Option<Value> {
        ctx.profile_duration_s = self.profiling.map(|(a, d)| (d - a) as f64 / 1e9).unwrap_or(0.0);
        ctx.profile_start_ns = self.profiling.map(|p| p.0);
        ctx.client_cpu_max = Some(self.client_cpu_max);
        ctx.client_cpu_seconds = Some(self.client_cpu_seconds);
        ctx.client_loop_cpu_seconds = Some(self.client_cpu_seconds);
        let (export, summary) = self.server_metrics()?;
        ctx.server_metrics = Some(summary);
        Some(export)
    }
}

/// What the replay loop feeds the workload next.
enum Next {
    Event(Event),
    Done { id: RequestId, failure: Option<Failure>, ended: u64 },
}

/// A request's end as its task reports it.
type Ended = (RequestId, Record, Option<Failure>);

/// Drives `wl` against `target` in real time until it finishes, `cancel` is set, or `alive`
/// reports the server gone (checked every 200 ms).
pub async fn replay(
    target: &HttpTarget,
    wl: &mut dyn Machine,
    cancel: &AtomicBool,
    mut alive: impl FnMut() -> Result<(), LaunchError>,
    mut progress: impl FnMut(&Progress),
) -> LiveRun {
    let clock = Clock::new(target.time_scale);
    let mut cpu = CpuSampler::new();
    let scrapes = Arc::new(Mutex::new(Scrapes::default()));
    let scraper = spawn_scraper(target, clock, scrapes.clone());
    let (tx, mut rx) = mpsc::unbounded_channel::<Ended>();
    let mut live = Live {
        target,
        clock,
        ledger: Ledger::new(),
        inflight: HashMap::new(),
        tx,
        actions: Vec::new(),
        commands: Vec::new(),
        unreachable_checked: 0,
        interrupted: false,
        stopped: None,
    };
    let mut event = Some(Next::Event(Event::Start));
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        if let Some(next) = event.take()
            && live.deliver(wl, next)
        {
            break;
        }
        let wake = live.ledger.wake();
        let sleep_to = wake.map(|w| clock.instant(w)).unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            Some((id, rec, f)) = rx.recv() => match live.ended(id, rec, f).await {
                ControlFlow::Continue(next) => event = next,
                ControlFlow::Break(()) => break,
            },
            _ = tokio::time::sleep_until(sleep_to.into()), if wake.is_some() => {
                live.ledger.woke();
                event = Some(Next::Event(Event::Wake));
            }
            _ = tick.tick() => {
                if live.tick(&mut cpu, cancel, &mut alive, &mut progress).is_break() {
                    break;
                }
            }
        }
    }
    live.finish(scraper, &scrapes, cpu).await
}

/// Counts a reply's tokens on the blocking pool (tokenizing an output is CPU work the streams
/// must not wait behind); the record unchanged if that fails.
async fn count_off_loop(t: &HttpTarget, spec: Box<RequestSpec>, rec: Record, u: super::Uncounted) -> Record {
    let (t2, kept) = (t.clone(), rec.clone());
    tokio::task::spawn_blocking(move || {
        let mut rec = rec;
        t2.count_tokens(&spec, &mut rec, u);
        rec
    })
    .await
    .unwrap_or(kept)
}

/// Scrapes every `/metrics` URL of `target` every second of wall time until aborted; a server
/// without `/metrics` is tried a few times, then left alone.
fn spawn_scraper(target: &HttpTarget, clock: Clock, scrapes: Arc<Mutex<Scrapes>>) -> tokio::task::JoinHandle<()> {
    let t = target.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        let mut misses = 0;
        loop {
            every.tick().await;
            if t.scrape_once(&clock, &scrapes).await {
                misses = 0;
            } else {
                misses += 1;
                if misses >= 5 && scrapes.lock().expect("scrape lock").scrapes.is_empty() {
                    break;
                }
            }
        }
    })
}

/// The replay between events: the ledger, the requests in flight, and why it stopped.
struct Live<'t> {
    target: &'t HttpTarget,
    clock: Clock,
    ledger: Ledger,
    inflight: HashMap<RequestId, InFlight>,
    /// Where request tasks report their end.
    tx: mpsc::UnboundedSender<Ended>,
    actions: Vec<Action>,
    commands: Vec<Command>,
    /// Wall milliseconds (+20) of the last check that the server still accepts connections.
    unreachable_checked: u64,
    interrupted: bool,
    stopped: Option<String>,
}

impl Live<'_> {
    /// Hands `next` to the workload and carries out what it asks; `true` once the ledger is
    /// finished.
    fn deliver(&mut self, wl: &mut dyn Machine, next: Next) -> bool {
        let now = self.clock.now();
        self.actions.clear();
        match next {
            Next::Event(ev) => wl.handle(now, ev, &mut self.actions),
            Next::Done { id, failure, ended } => wl.handle_done_at(now, ended, id, failure, &mut self.actions),
        }
        self.ledger.apply(now, &mut self.actions, &mut self.commands);
        let mut commands = std::mem::take(&mut self.commands);
        for c in commands.drain(..) {
            match c {
                Command::Send(spec) => self.send(spec),
                Command::Cancel(id) => {
                    if let Some(f) = self.inflight.remove(&id) {
                        f.task.abort();
                    }
                }
            }
        }
        self.commands = commands;
        self.ledger.is_finished()
    }

    /// Starts a request on its own task, which reports its end on the channel.
    fn send(&mut self, spec: Box<RequestSpec>) {
        let id = spec.id;
        let rec = self.ledger.open_record(id).expect("a sent request is open").clone();
        let (t, tx, clock) = (self.target.clone(), self.tx.clone(), self.clock);
        let touched = Arc::new(AtomicU64::new(clock.now()));
        let seen = touched.clone();
        let task = tokio::spawn(async move {
            // Synthesis off the I/O threads, so no stream's chunks wait behind it.
            let (t2, s2) = (t.clone(), spec.clone());
            let build = tokio::task::spawn_blocking(move || t2.body(&s2));
            let body = if t.time_scale != 1.0 {
                // The head now, the body when built: on the scaled clock the
                // synthesis would otherwise delay the session K-fold.
                h1::Body::Later(Box::pin(async move { build.await.map(|b| b.parts) }))
            } else {
                h1::Body::Ready(build.await.unwrap_or_else(|_| t.body(&spec)).parts)
            };
            let (mut rec, f, uncounted) = t.send_body(&spec, body, rec, &seen, move || clock.now()).await;
            let f = t.classify_overflow(&spec, &mut rec, f);
            match uncounted {
                Some(u) => rec = count_off_loop(&t, spec, rec, u).await,
                None if rec.output_tokens.is_some() => {
                    rec.token_source = Some("usage".into());
                    t.note_usage();
                }
                None => {}
            }
            let _ = tx.send((id, rec, f));
        });
        self.inflight.insert(id, InFlight { task, sent: Instant::now(), touched });
    }

    /// A request's end: the next event for the workload (none for a request no longer in
    /// flight), or a stop when the server has gone.
    async fn ended(&mut self, id: RequestId, rec: Record, failure: Option<Failure>) -> ControlFlow<(), Option<Next>> {
        if self.inflight.remove(&id).is_none() {
            return ControlFlow::Continue(None);
        }
        // A refused or dropped connection may mean the server is gone: check (at most every 20 ms
        // of wall time: a dying server drops streams a moment before its listener closes) and stop
        // before the failure reaches the workload, rather than failing every session into a live
        // abort.
        let conn = rec.error.as_ref().is_some_and(|e| e.kind == "connection_error" || e.kind == "connection_dropped");
        let Some(ended) = self.ledger.end(id, Some(rec)).map(|r| r.end_ns) else { return ControlFlow::Continue(None) };
        let wall_ms = self.clock.t0.elapsed().as_millis() as u64 + 20;
        if conn && wall_ms >= self.unreachable_checked + 20 {
            self.unreachable_checked = wall_ms;
            if !self.target.reachable().await {
                self.stopped = Some(format!(
                    "the server at {} stopped accepting connections mid-point; the {} records so far are kept",
                    self.target.base_url,
                    self.ledger.len()
                ));
                return ControlFlow::Break(());
            }
        }
        // Its stream's delays count from when it ended on the server's clock (stamped under a
        // time scale), not from when the end reached this client.
        ControlFlow::Continue(Some(Next::Done { id, failure, ended }))
    }

    /// The 200-ms tick: request timeouts, progress, then cancellation and the server's health.
    fn tick(
        &mut self,
        cpu: &mut CpuSampler,
        cancel: &AtomicBool,
        alive: &mut impl FnMut() -> Result<(), LaunchError>,
        progress: &mut impl FnMut(&Progress),
    ) -> ControlFlow<()> {
        let now = self.clock.now();
        self.ledger.progress.now_ns = now;
        cpu.tick();
        self.time_out(now);
        progress(&self.ledger.progress);
        if cancel.load(Ordering::Relaxed) {
            self.interrupted = true;
            return ControlFlow::Break(());
        }
        if let Err(e) = alive() {
            self.stopped = Some(format!("server died mid-point ({e}); the {} records so far are kept", self.ledger.len()));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// Ends the requests running longer than the target's `request_timeout` as timeouts, and
    /// those whose stream sent nothing for its `stall_timeout` as stalls.
    fn time_out(&mut self, now: u64) {
        let (after, stall) = (self.target.request_timeout, self.target.stall_timeout);
        // The client's clock runs `time_scale` times faster than the wall.
        let stall_ns = (stall.as_nanos() as f64 * self.target.time_scale) as u64;
        for (id, f) in self.inflight.iter_mut() {
            let error = if f.sent.elapsed() >= after {
                timed_out(after)
            } else if now.saturating_sub(f.touched.load(Ordering::Relaxed)) >= stall_ns {
                stalled(stall)
            } else {
                continue;
            };
            f.task.abort();
            let Some(open) = self.ledger.open_record(*id) else { continue };
            let mut rec = open.clone();
            rec.error = Some(error);
            rec.end_ns = now;
            // Answered through the channel like any end; not again before then.
            f.sent = Instant::now();
            f.touched.store(u64::MAX / 2, Ordering::Relaxed);
            let _ = self.tx.send((*id, rec, Some(Failure::Error)));
        }
    }

    /// Closes the point: stops what is in flight, closes the records, takes a last scrape (so
    /// the window's counters include the drained requests) and the client's CPU figures.
    async fn finish(mut self, scraper: tokio::task::JoinHandle<()>, scrapes: &Mutex<Scrapes>, mut cpu: CpuSampler) -> LiveRun {
        let now = self.clock.now();
        for (_, f) in self.inflight.drain() {
            f.task.abort();
        }
        let profiling = self.ledger.window_at(now);
        let outcome = self.ledger.outcome.take();
        let records = self.ledger.finish(now, if self.stopped.is_some() { Close::ServerGone } else { Close::Cancelled });
        scraper.abort();
        if self.stopped.is_none() {
            self.target.scrape_once(&self.clock, scrapes).await;
        }
        cpu.tick();
        LiveRun {
            records,
            outcome,
            profiling,
            interrupted: self.interrupted,
            stopped: self.stopped,
            scrapes: std::mem::take(&mut *scrapes.lock().expect("scrape lock")),
            client_cpu_seconds: cpu.cpu_seconds(),
            client_cpu_max: cpu.max_busy,
            wall_seconds: cpu.wall_seconds(),
        }
    }
}
