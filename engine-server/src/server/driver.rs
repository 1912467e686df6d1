//! The real-time shell around a sans-IO engine core: one thread owns the core,
//! maps wall time to engine time (`--time-scale`), feeds it submissions and aborts,
//! advances it when its next event is due, and routes its outputs to the request
//! tasks.

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

/// Request id inside the server.
pub type ReqId = u64;

/// Engine time in nanoseconds since the server started (scaled by `--time-scale`).
pub type Nanos = u64;

/// What the shell submits.
#[derive(Clone, Debug)]
pub struct CoreRequest {
    pub id: ReqId,
    pub input_ids: Vec<u32>,
    /// The request's cap (`None`: bounded by the context).
    pub max_new_tokens: Option<u64>,
    pub ignore_eos: bool,
    /// The simulated model ends its reply (EOS) after this many tokens, unless
    /// `ignore_eos`; `None` = never.
    pub eos_after: Option<u64>,
    /// Pin to an attention-DP rank (`data_parallel_rank`).
    pub dp_rank: Option<u32>,
    /// The reply's ids as far as they are known in advance (may be empty): lets the
    /// core cache the output under the hashes the next turn's prompt will have.
    pub continuation_output: Vec<u32>,
}

/// Why a request finished inside the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreFinish {
    /// Produced `max_new_tokens`.
    Length,
    /// The reply ended on its own (EOS after `eos_after` tokens).
    Stop,
    /// Aborted (by the shell or by the core, e.g. out of memory).
    Abort,
}

/// A refusal or failure, with SGLang's status and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreError {
    pub status: u16,
    pub message: String,
}

/// Outputs of one `advance`.
#[derive(Clone, Debug, PartialEq)]
pub enum CoreEvent {
    /// `n` new tokens for `id` (one scheduler output: one SSE chunk), visible at engine time `at`.
    Tokens { id: ReqId, n: u32, at: Nanos },
    /// The request left the core.
    Finished {
        id: ReqId,
        reason: CoreFinish,
        cached_tokens: u64,
        /// Seconds (engine time) spent waiting before the first prefill.
        queue_time: f64,
        /// Engine time of the finish.
        at: Nanos,
    },
    /// The core failed the request after accepting it.
    Failed { id: ReqId, error: CoreError },
}

/// Scheduler-side gauges.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoreStats {
    pub num_running_reqs: u64,
    pub num_queue_reqs: u64,
    pub num_used_tokens: u64,
    pub token_usage: f64,
    pub gen_throughput: f64,
    pub cache_hit_rate: f64,
    pub spec_accept_length: f64,
    pub spec_accept_rate: f64,
    pub num_retracted_reqs: u64,
    pub is_cuda_graph: bool,
    pub max_total_num_tokens: u64,
    pub context_length: u64,
    pub max_req_input_len: u64,
    /// Requests queued, running or finishing inside the core.
    pub live_requests: u64,
    /// Running totals behind the KV-pressure counters.
    pub evicted_tokens_total: u64,
    pub num_retracted_requests_total: u64,
    pub num_retracted_input_tokens_total: u64,
    pub num_retracted_output_tokens_total: u64,
}

/// The engine core as the shell drives it (sans-IO: no clocks, no threads).
pub trait Core: Send + 'static {
    /// Accepts a request at `now`, or refuses it (queue full, too long for the pool).
    fn submit(&mut self, now: Nanos, req: CoreRequest) -> Result<(), CoreError>;
    /// Drops a request (client went away, stop string matched). Unknown ids are ignored.
    fn abort(&mut self, now: Nanos, id: ReqId);
    /// When the core next has something to do, if anything.
    fn next_event_time(&self) -> Option<Nanos>;
    /// Runs every iteration due by `now`.
    fn advance(&mut self, now: Nanos) -> Vec<CoreEvent>;
    /// Empties the prefix cache; false while requests are running or waiting.
    fn flush_cache(&mut self) -> bool;
    /// The core has had nothing to do for a while: refresh the gauges SGLang refreshes when
    /// idle (running and queued requests, KV use, throughput 0).
    fn refresh_idle(&mut self) {}
    fn stats(&self) -> CoreStats;
    /// Resolved configuration and model facts for `/server_info`.
    fn server_info(&self) -> serde_json::Value;
}

/// What a request task receives.
#[derive(Clone, Debug, PartialEq)]
pub enum ReqEvent {
    /// `n` tokens, visible at engine time `at`.
    Tokens {
        n: u32,
        at: Nanos,
    },
    Finished {
        reason: CoreFinish,
        cached_tokens: u64,
        queue_time: f64,
        at: Nanos,
    },
    Failed(CoreError),
}

enum Cmd {
    Submit {
        req: CoreRequest,
        /// When the HTTP request arrived (wall clock).
        arrived: Instant,
        /// The hold its arrival placed (see [`Driver::hold`]).
        hold: Option<u64>,
        events: mpsc::UnboundedSender<ReqEvent>,
        accepted: oneshot::Sender<Result<Nanos, CoreError>>,
    },
    Abort(ReqId),
    Hold {
        id: u64,
        arrived: Instant,
    },
    Release(u64),
    Flush(oneshot::Sender<bool>),
    Info(oneshot::Sender<serde_json::Value>),
    Stop,
}

/// Handle to the driver thread.
#[derive(Clone)]
pub struct Driver {
    tx: std_mpsc::Sender<Cmd>,
    stats: Arc<Mutex<CoreStats>>,
    next_hold: Arc<std::sync::atomic::AtomicU64>,
    /// Engine time zero (wall clock) and the time scale, shared with the core's thread.
    start: Instant,
    time_scale: f64,
}

/// An accepted request.
pub struct Submitted {
    pub events: mpsc::UnboundedReceiver<ReqEvent>,
    /// Engine time of the request's arrival: where the engine placed it under a time scale; in
    /// real time when its body had been read and parsed (SGLang's `received_time`: its latencies
    /// include the chat template and tokenization, not the body's transfer).
    pub arrival: Nanos,
}

/// Keeps the engine's clock at a request's arrival until the request is submitted or dropped.
pub struct Hold {
    id: u64,
    tx: std_mpsc::Sender<Cmd>,
}

impl Hold {
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.tx.send(Cmd::Release(self.id));
    }
}

impl Driver {
    /// Starts the thread owning `core`; engine time runs `time_scale` times faster
    /// than wall time.
    pub fn start<C: Core>(core: C, time_scale: f64) -> Driver {
        let (tx, rx) = std_mpsc::channel();
        let stats = Arc::new(Mutex::new(core.stats()));
        let s2 = stats.clone();
        let start = Instant::now();
        std::thread::Builder::new()
            .name("engine-core".into())
            .spawn(move || run(core, rx, time_scale, start, s2))
            .expect("spawn engine thread");
        Driver { tx, stats, next_hold: Arc::new(std::sync::atomic::AtomicU64::new(1)), start, time_scale }
    }

    /// When the front end sees an output the core made visible at engine time `at`: in real time
    /// the engine time now, as SGLang stamps an output when its tokenizer manager receives it (a
    /// late core thread or request task is the server's latency, not the path to the client);
    /// under a time scale `at` itself, since wall-clock lateness would count K times over.
    pub fn seen(&self, at: Nanos) -> Nanos {
        if self.time_scale == 1.0 { (self.start.elapsed().as_nanos() as Nanos).max(at) } else { at }
    }

    /// Under `--time-scale K ≠ 1`: a request's head arrived at `arrived`; the engine does not
    /// advance past that instant until the request is submitted (with this hold's id) or the
    /// hold is dropped. Its front end (body, JSON, tokenization) takes wall time the engine's
    /// cost model and the virtual clock do not have; without the hold the engine would run ahead
    /// K times that and schedule the request late.
    pub fn hold(&self, arrived: Instant) -> Hold {
        let id = self.next_hold.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = self.tx.send(Cmd::Hold { id, arrived });
        Hold { id, tx: self.tx.clone() }
    }

    /// Submits; resolves once the core accepted or refused the request.
    pub async fn submit(&self, req: CoreRequest) -> Result<mpsc::UnboundedReceiver<ReqEvent>, CoreError> {
        self.submit_arrived(req, Instant::now(), None).await.map(|s| s.events)
    }

    /// Submits a request whose HTTP request arrived at `arrived`. Under `--time-scale K ≠ 1` the
    /// engine sees it arrive then: the front end's wall time (body, JSON, tokenization) would
    /// otherwise count K times over in engine time, and the engine's cost model (like the virtual
    /// clock) has no front end. In real time (K = 1) it arrives when the front end is done.
    pub async fn submit_arrived(&self, req: CoreRequest, arrived: Instant, hold: Option<&Hold>) -> Result<Submitted, CoreError> {
        let (etx, erx) = mpsc::unbounded_channel();
        let (atx, arx) = oneshot::channel();
        let gone = || CoreError { status: 503, message: "The engine is shutting down.".into() };
        self.tx.send(Cmd::Submit { req, arrived, hold: hold.map(Hold::id), events: etx, accepted: atx }).map_err(|_| gone())?;
        let arrival = arx.await.map_err(|_| gone())??;
        Ok(Submitted { events: erx, arrival })
    }

    pub fn abort(&self, id: ReqId) {
        let _ = self.tx.send(Cmd::Abort(id));
    }

    pub async fn flush_cache(&self) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Flush(tx)).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    pub fn stats(&self) -> CoreStats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub async fn server_info(&self) -> serde_json::Value {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Cmd::Info(tx)).is_err() {
            return serde_json::Value::Null;
        }
        rx.await.unwrap_or(serde_json::Value::Null)
    }

    /// Stops the thread (outstanding requests get no further events).
    pub fn stop(&self) {
        let _ = self.tx.send(Cmd::Stop);
    }
}

/// How long the core must have been idle before its gauges are refreshed. SGLang refreshes them
/// every 30 s while idle; a scrape one second after the last request already reads 0 here.
const IDLE_REFRESH: Duration = Duration::from_secs(1);

fn run<C: Core>(core: C, rx: std_mpsc::Receiver<Cmd>, time_scale: f64, start: Instant, stats: Arc<Mutex<CoreStats>>) {
    let mut l = CoreLoop {
        core,
        start,
        time_scale,
        last_t: 0,
        holds: HashMap::new(),
        routes: HashMap::new(),
        out: Vec::new(),
        idle_refreshed: true,
    };
    loop {
        let first = match rx.recv_timeout(l.timeout()) {
            Ok(c) => Some(c),
            Err(std_mpsc::RecvTimeoutError::Timeout) => None,
            Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
        };
        if first.is_none() && !l.idle_refreshed && l.core.next_event_time().is_none() {
            l.idle_refreshed = true;
            l.core.refresh_idle();
            *stats.lock().unwrap_or_else(|e| e.into_inner()) = l.core.stats();
            continue;
        }
        // Drain everything queued so a burst of arrivals is seen at once.
        let mut cmds: Vec<Cmd> = first.into_iter().collect();
        cmds.extend(rx.try_iter());
        // Holds first: the engine must not run past an arrival that is already known.
        for c in &cmds {
            if let Cmd::Hold { id, arrived } = c {
                let at = l.engine_of(*arrived).max(l.last_t);
                l.holds.insert(*id, at);
            }
        }
        let t = l.now();
        let mut changed = false;
        for cmd in cmds {
            let Some(c) = l.handle(cmd, t) else { return };
            changed |= c;
        }
        // Bring the core up to `t` and work what the commands made due (e.g. a prefill starting now).
        if l.core.next_event_time().is_some_and(|due| due <= t) {
            changed = true;
        }
        l.advance_to(t);
        if changed {
            l.idle_refreshed = false;
            *stats.lock().unwrap_or_else(|e| e.into_inner()) = l.core.stats();
        }
        // Outputs are routed after the stats are refreshed, so a client that reacts
        // to a token sees gauges that already include it.
        for ev in std::mem::take(&mut l.out) {
            dispatch(&mut l.routes, ev);
        }
    }
}

/// The core thread's state: the core, its clock against wall time, the arrivals still
/// in the front end, and where each request's events go.
struct CoreLoop<C> {
    core: C,
    start: Instant,
    time_scale: f64,
    /// The core's clock never goes back: submissions are placed at or after the last time it saw.
    last_t: Nanos,
    /// Arrivals whose requests are still in the front end: the engine waits at the earliest.
    holds: HashMap<u64, Nanos>,
    routes: HashMap<ReqId, mpsc::UnboundedSender<ReqEvent>>,
    /// Outputs of this round, routed once the stats are refreshed.
    out: Vec<CoreEvent>,
    /// The gauges were refreshed since the core last changed (see [`Core::refresh_idle`]).
    idle_refreshed: bool,
}

impl<C: Core> CoreLoop<C> {
    fn now(&self) -> Nanos {
        (self.start.elapsed().as_nanos() as f64 * self.time_scale) as Nanos
    }

    fn wall_of(&self, t: Nanos) -> Instant {
        self.start + Duration::from_nanos((t as f64 / self.time_scale) as u64)
    }

    fn engine_of(&self, w: Instant) -> Nanos {
        (w.saturating_duration_since(self.start).as_nanos() as f64 * self.time_scale) as Nanos
    }

    /// How long to wait for a command before the core's next event is due.
    fn timeout(&self) -> Duration {
        let limit = self.holds.values().min().copied();
        match self.core.next_event_time() {
            // Held: wait for the submission (or release) that lifts it; re-check now and then.
            Some(t) if limit.is_some_and(|l| t > l) => Duration::from_millis(100),
            Some(t) => self.wall_of(t).saturating_duration_since(Instant::now()),
            None if !self.idle_refreshed => IDLE_REFRESH,
            None => Duration::from_secs(3600),
        }
    }

    /// Advances the core to `to`, or to the earliest held arrival before it, never back.
    fn advance_to(&mut self, to: Nanos) {
        let to = self.holds.values().min().map_or(to, |l| to.min(*l)).max(self.last_t);
        if self.core.next_event_time().is_some_and(|due| due <= to) {
            self.out.extend(self.core.advance(to));
        }
        self.last_t = to;
    }

    /// Carries out one command at wall-derived time `t`; whether the core changed, or
    /// `None` to stop.
    fn handle(&mut self, cmd: Cmd, t: Nanos) -> Option<bool> {
        match cmd {
            Cmd::Hold { .. } => {}
            Cmd::Release(id) => {
                self.holds.remove(&id);
            }
            Cmd::Submit { req, arrived, hold, events, accepted } => {
                let id = req.id;
                let held = hold.and_then(|h| self.holds.remove(&h));
                let at = match held {
                    Some(h) => h,
                    None if self.time_scale == 1.0 => t,
                    None => self.engine_of(arrived),
                };
                let at = at.clamp(self.last_t, t.max(self.last_t));
                // An earlier arrival still in the front end holds the engine short of `at`:
                // the request then arrives where the engine is.
                self.advance_to(at);
                let at = self.last_t;
                let r = self.core.submit(at, req);
                if r.is_ok() {
                    self.routes.insert(id, events);
                }
                let _ = accepted.send(r.map(|()| self.engine_of(arrived).min(at)));
                return Some(true);
            }
            Cmd::Abort(id) => {
                if self.routes.remove(&id).is_some() {
                    self.advance_to(t);
                    self.core.abort(self.last_t, id);
                    return Some(true);
                }
            }
            Cmd::Flush(reply) => {
                let _ = reply.send(self.core.flush_cache());
                return Some(true);
            }
            Cmd::Info(reply) => {
                let _ = reply.send(self.core.server_info());
            }
            Cmd::Stop => return None,
        }
        Some(false)
    }
}

fn dispatch(routes: &mut HashMap<ReqId, mpsc::UnboundedSender<ReqEvent>>, ev: CoreEvent) {
    match ev {
        CoreEvent::Tokens { id, n, at } => {
            if let Some(tx) = routes.get(&id) {
                let _ = tx.send(ReqEvent::Tokens { n, at });
            }
        }
        CoreEvent::Finished { id, reason, cached_tokens, queue_time, at } => {
            if let Some(tx) = routes.remove(&id) {
                let _ = tx.send(ReqEvent::Finished { reason, cached_tokens, queue_time, at });
            }
        }
        CoreEvent::Failed { id, error } => {
            if let Some(tx) = routes.remove(&id) {
                let _ = tx.send(ReqEvent::Failed(error));
            }
        }
    }
}
