//! The live replay loop: the workload driven in real time against a server, each request on its
//! own task, `/metrics` scraped every second, timeouts, cancellation and server death checked
//! every 200 ms.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;

use super::clock::Clock;
use super::{HttpTarget, h1};
use crate::metrics::PointContext;
use crate::records::{Record, RecordError};
use crate::targets::ledger::{Close, Command, Ledger};
use crate::workload::{Event, Failure, Outcome as WlOutcome, RequestId, Workload};

fn timed_out(after: Duration) -> RecordError {
    RecordError { kind: "timeout".into(), message: format!("no complete answer within {:.1} s", after.as_secs_f64()), status: None }
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
    pub scrapes: crate::targets::scrape::Scrapes,
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

/// Drives `wl` against `target` in real time until it finishes, `cancel` is set, or `alive`
/// reports the server gone (checked every 200 ms).
pub async fn replay(
    target: &HttpTarget,
    wl: &mut Workload,
    cancel: &AtomicBool,
    mut alive: impl FnMut() -> Result<(), String>,
    mut progress: impl FnMut(&crate::targets::ledger::Progress),
) -> LiveRun {
    let clock = Clock::new(target.time_scale);
    let mut cpu = crate::targets::scrape::CpuSampler::new();
    let scrapes = Arc::new(std::sync::Mutex::new(crate::targets::scrape::Scrapes::default()));
    let scraper = {
        let (t, s) = (target.clone(), scrapes.clone());
        tokio::spawn(async move {
            // Every second of wall time; a server without /metrics is tried a few times, then left alone.
            let mut every = tokio::time::interval(Duration::from_secs(1));
            let mut misses = 0;
            loop {
                every.tick().await;
                if t.scrape_once(&clock, &s).await {
                    misses = 0;
                } else {
                    misses += 1;
                    if misses >= 5 && s.lock().expect("scrape lock").scrapes.is_empty() {
                        break;
                    }
                }
            }
        })
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<(RequestId, Record, Option<Failure>)>();
    let mut ledger = Ledger::new();
    // Task and wall-clock start of each request in flight.
    let mut inflight: HashMap<RequestId, (tokio::task::JoinHandle<()>, Instant)> = HashMap::new();
    let mut actions = Vec::new();
    let mut commands = Vec::new();
    let mut run = LiveRun {
        records: Vec::new(),
        outcome: None,
        profiling: None,
        interrupted: false,
        stopped: None,
        scrapes: Default::default(),
        client_cpu_seconds: 0.0,
        client_cpu_max: 0.0,
        wall_seconds: 0.0,
    };
    let mut unreachable_checked = 0u64;
    let mut event = Some(Next::Event(Event::Start));
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        if let Some(next) = event.take() {
            let now = clock.now();
            actions.clear();
            match next {
                Next::Event(ev) => wl.handle(now, ev, &mut actions),
                Next::Done { id, failure, ended } => wl.handle_done_at(now, ended, id, failure, &mut actions),
            }
            ledger.apply(now, &mut actions, &mut commands);
            for c in commands.drain(..) {
                match c {
                    Command::Send(spec) => {
                        let id = spec.id;
                        let rec = ledger.open_record(id).expect("a sent request is open").clone();
                        let (t, tx) = (target.clone(), tx.clone());
                        let h = tokio::spawn(async move {
                            // Synthesis off the I/O threads, so no stream's chunks wait behind it.
                            let (t2, s2) = (t.clone(), spec.clone());
                            let build = tokio::task::spawn_blocking(move || t2.body(&s2));
                            let body = if t.time_scale != 1.0 {
                                // The head now, the body when built: on the scaled clock the
                                // synthesis would otherwise delay the session K-fold.
                                h1::Body::Later(Box::pin(async move { build.await.map(|b| b.parts).map_err(|e| e.to_string()) }))
                            } else {
                                h1::Body::Ready(build.await.unwrap_or_else(|_| t.body(&spec)).parts)
                            };
                            let (rec, f) = t.send_body(&spec, body, rec, move || clock.now()).await;
                            let _ = tx.send((id, rec, f));
                        });
                        inflight.insert(id, (h, Instant::now()));
                    }
                    Command::Cancel(id) => {
                        if let Some((h, _)) = inflight.remove(&id) {
                            h.abort();
                        }
                    }
                }
            }
            if ledger.is_finished() {
                break;
            }
        }
        let wake = ledger.wake();
        let sleep_to = wake.map(|w| clock.instant(w)).unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            Some((id, rec, f)) = rx.recv() => {
                if inflight.remove(&id).is_some() {
                    // A refused or dropped connection may mean the server is gone: check (at most
                    // every 20 ms of wall time: a dying server drops streams a moment before its
                    // listener closes) and stop before the failure reaches the workload, rather
                    // than failing every session into a live abort.
                    let conn = rec.error.as_ref().is_some_and(|e| e.kind == "connection_error" || e.kind == "connection_dropped");
                    let Some(ended) = ledger.end(id, Some(rec)).map(|r| r.end_ns) else { continue };
                    let wall_ms = clock.t0.elapsed().as_millis() as u64 + 20;
                    if conn && wall_ms >= unreachable_checked + 20 {
                        unreachable_checked = wall_ms;
                        if !target.reachable().await {
                            run.stopped = Some(format!(
                                "the server at {} stopped accepting connections mid-point; the {} records so far are kept",
                                target.base_url,
                                ledger.len()
                            ));
                            break;
                        }
                    }
                    // Its stream's delays count from when it ended on the server's clock (stamped
                    // under a time scale), not from when the end reached this client.
                    event = Some(Next::Done { id, failure: f, ended });
                }
            }
            _ = tokio::time::sleep_until(sleep_to.into()), if wake.is_some() => {
                ledger.woke();
                event = Some(Next::Event(Event::Wake));
            }
            _ = tick.tick() => {
                let now = clock.now();
                ledger.progress.now_ns = now;
                cpu.tick();
                for (id, (h, sent)) in inflight.iter_mut() {
                    if sent.elapsed() >= target.request_timeout {
                        h.abort();
                        let Some(open) = ledger.open_record(*id) else { continue };
                        let mut rec = open.clone();
                        rec.error = Some(timed_out(target.request_timeout));
                        rec.end_ns = now;
                        // Answered through the channel like any end; not again before then.
                        *sent = Instant::now();
                        let _ = tx.send((*id, rec, Some(Failure::Error)));
                    }
                }
                progress(&ledger.progress);
                if cancel.load(Ordering::Relaxed) {
                    run.interrupted = true;
                    break;
                }
                if let Err(e) = alive() {
                    run.stopped = Some(format!("server died mid-point ({e}); the {} records so far are kept", ledger.len()));
                    break;
                }
            }
        }
    }
    let now = clock.now();
    for (_, (h, _)) in inflight.drain() {
        h.abort();
    }
    run.profiling = ledger.profiling;
    run.outcome = ledger.outcome.take();
    let records = ledger.finish(now, if run.stopped.is_some() { Close::ServerGone } else { Close::Cancelled });
    // One last scrape so the window's counters include the drained requests.
    scraper.abort();
    if run.stopped.is_none() {
        target.scrape_once(&clock, &scrapes).await;
    }
    cpu.tick();
    run.scrapes = std::mem::take(&mut *scrapes.lock().expect("scrape lock"));
    run.client_cpu_seconds = cpu.cpu_seconds();
    run.client_cpu_max = cpu.max_busy;
    run.wall_seconds = cpu.wall_seconds();
    run.records = records;
    run
}
