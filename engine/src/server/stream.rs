//! One chat request from submission to the last byte: generated ids, text deltas,
//! the reasoning split, stop conditions, SSE chunks in SGLang 0.5.23's shape, the
//! non-streaming response, usage and metrics.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use super::api::{ApiError, ChatRequest, GenParams, Stop};
use super::driver::{CoreFinish, CoreRequest, Nanos, ReqEvent, ReqId};
use super::metrics::FinishedRequest;
use super::{AppState, sse_body};
use crate::tokenize::{ChatEncoder, Detokenizer};

#[derive(Serialize)]
struct Delta<'a> {
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'a str>,
    matched_stop: Value,
}

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<ChunkChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
}

/// The 0.5.5 chunk shape (`--sglang-compat 0.5.5`).
#[derive(Serialize)]
struct CompatChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<CompatChoice<'a>>,
    usage: Option<&'a Usage>,
}

#[derive(Serialize)]
struct CompatDelta<'a> {
    role: Option<&'a str>,
    content: Option<&'a str>,
    reasoning_content: Option<&'a str>,
}

#[derive(Serialize)]
struct CompatChoice<'a> {
    index: u32,
    delta: CompatDelta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'a str>,
    matched_stop: Value,
}

#[derive(Clone, Debug, Serialize)]
struct CachedDetails {
    cached_tokens: u64,
}

#[derive(Clone, Debug, Serialize)]
struct ReasoningDetails {
    reasoning_tokens: u64,
}

#[derive(Clone, Debug, Serialize)]
struct Usage {
    prompt_tokens: u64,
    total_tokens: u64,
    completion_tokens: u64,
    prompt_tokens_details: Option<CachedDetails>,
    reasoning_tokens: u64,
    completion_tokens_details: Option<ReasoningDetails>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
    reasoning_content: Option<&'a str>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    message: Message<'a>,
    logprobs: Option<()>,
    finish_reason: &'a str,
    matched_stop: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    meta_info: Option<Value>,
}

#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<Choice<'a>>,
    usage: Usage,
    metadata: Value,
}

fn frame(json: &impl Serialize) -> Bytes {
    let mut v = b"data: ".to_vec();
    serde_json::to_writer(&mut v, json).expect("chunk serialises");
    v.extend_from_slice(b"\n\n");
    Bytes::from(v)
}

/// Reply ids drawn at submission (beyond this, drawn as they stream).
const PLANNED_MAX: u64 = 65_536;

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Aborts the core request if the response is dropped before it finished (client
/// disconnected mid-stream).
struct AbortGuard {
    st: Arc<AppState>,
    id: ReqId,
    armed: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if self.armed {
            self.st.driver.abort(self.id);
            if let Some(m) = &self.st.metrics {
                m.finish(&FinishedRequest { streaming: true, aborted: true, ..FinishedRequest::default() });
            }
        }
    }
}

/// The state of one request.
struct Gen {
    st: Arc<AppState>,
    enc: Arc<ChatEncoder>,
    rid: String,
    model: String,
    events: UnboundedReceiver<ReqEvent>,
    guard: AbortGuard,
    streaming: bool,
    include_usage: bool,
    continuous_usage: bool,
    return_meta: bool,
    prompt_tokens: u64,
    max_new: u64,
    /// The reply ends on its own (EOS) at `max_new` rather than by the cap.
    natural_stop: bool,
    reasoning_budget: u64,
    stops: Vec<String>,
    stop_ids: Vec<u32>,
    /// The reply's first ids, drawn at submission so the engine can cache the output
    /// under the hashes the next turn's prompt will have.
    planned: Vec<u32>,
    rng: u64,
    produced: u64,
    reasoning_tokens: u64,
    detok_reasoning: Detokenizer,
    detok_content: Detokenizer,
    content: String,
    reasoning: String,
    arrived: Instant,
    last_chunk: Instant,
    /// Engine times of the arrival and of the last output (see [`ENGINE_TIME_HEADER`]).
    arrival_t: Nanos,
    last_t: Nanos,
    /// Precede each SSE event with `: t=<engine ns>`.
    stamps: bool,
    first: bool,
    finish: Option<(String, Value)>,
    cached_tokens: u64,
    queue_time: f64,
}

/// Text produced by one core output.
struct Step {
    reasoning: String,
    content: String,
}

impl Gen {
    fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            total_tokens: self.prompt_tokens + self.produced,
            completion_tokens: self.produced,
            prompt_tokens_details: self.st.cfg.enable_cache_report.then_some(CachedDetails { cached_tokens: self.cached_tokens }),
            reasoning_tokens: self.reasoning_tokens,
            completion_tokens_details: (self.reasoning_tokens > 0).then_some(ReasoningDetails { reasoning_tokens: self.reasoning_tokens }),
        }
    }

    fn chunk(&self, delta: Delta<'_>, finish: Option<(&str, Value)>, usage: Option<&Usage>) -> Bytes {
        let (finish_reason, matched_stop) = match finish {
            Some((r, m)) => (Some(r), m),
            None => (None, Value::Null),
        };
        if self.st.cfg.compat_055 {
            // SGLang 0.5.5: every chunk carries `usage` (null unless set), and the delta
            // always has role, content and reasoning_content.
            return frame(&CompatChunk {
                id: &self.rid,
                object: "chat.completion.chunk",
                created: self.st.created,
                model: &self.model,
                choices: vec![CompatChoice {
                    index: 0,
                    delta: CompatDelta { role: delta.role, content: delta.content, reasoning_content: delta.reasoning_content },
                    logprobs: None,
                    finish_reason,
                    matched_stop,
                }],
                usage,
            });
        }
        frame(&Chunk {
            id: &self.rid,
            object: "chat.completion.chunk",
            created: self.st.created,
            model: &self.model,
            choices: vec![ChunkChoice { index: 0, delta, logprobs: None, finish_reason, matched_stop }],
            usage,
        })
    }

    /// Generates `n` ids, updates counters and returns their text.
    fn tokens(&mut self, n: u32) -> Step {
        let tok = self.enc.tokenizer().clone();
        let alphabet = tok.alphabet();
        let mut r_ids = Vec::new();
        let mut c_ids = Vec::new();
        for _ in 0..n {
            let k = self.produced;
            self.produced += 1;
            let last = self.produced == self.max_new;
            let id = match self.planned.get(k as usize) {
                Some(&id) => id,
                None if last && self.natural_stop => tok.eos_id().unwrap_or(0),
                None => alphabet[(splitmix(&mut self.rng) % alphabet.len() as u64) as usize],
            };
            if self.stop_ids.contains(&id) && self.finish.is_none() {
                self.finish = Some(("stop".into(), Value::from(id)));
                break;
            }
            if last && self.natural_stop {
                // EOS ends the reply and has no text.
                continue;
            }
            if k < self.reasoning_budget {
                self.reasoning_tokens += 1;
                r_ids.push(id);
            } else {
                c_ids.push(id);
            }
        }
        let mut step = Step { reasoning: self.detok_reasoning.push(&tok, &r_ids), content: self.detok_content.push(&tok, &c_ids) };
        if self.produced == self.max_new || self.finish.is_some() {
            step.reasoning.push_str(&self.detok_reasoning.finish(&tok));
            step.content.push_str(&self.detok_content.finish(&tok));
        }
        // Stop strings apply to the content; the text after the match is dropped.
        if !self.stops.is_empty() && self.finish.is_none() && !step.content.is_empty() {
            let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
            let mut from = self.content.len().saturating_sub(longest);
            while !self.content.is_char_boundary(from) {
                from -= 1;
            }
            let window = format!("{}{}", &self.content[from..], step.content);
            if let Some((pos, s)) =
                self.stops.iter().filter_map(|s| window.find(s.as_str()).map(|p| (p, s.clone()))).min_by_key(|(p, _)| *p)
            {
                let keep = (from + pos).saturating_sub(self.content.len());
                step.content.truncate(keep.min(step.content.len()));
                self.finish = Some(("stop".into(), Value::from(s)));
            }
        }
        self.reasoning.push_str(&step.reasoning);
        self.content.push_str(&step.content);
        step
    }

    fn finished(&mut self, reason: CoreFinish) {
        if self.finish.is_none() {
            self.finish = Some(match reason {
                CoreFinish::Stop | CoreFinish::Length if self.natural_stop => {
                    ("stop".into(), self.enc.tokenizer().eos_id().map(Value::from).unwrap_or(Value::Null))
                }
                CoreFinish::Length => ("length".into(), Value::Null),
                CoreFinish::Stop => ("stop".into(), self.enc.tokenizer().eos_id().map(Value::from).unwrap_or(Value::Null)),
                CoreFinish::Abort => ("abort".into(), Value::Null),
            });
        }
    }

    fn record(&self, aborted: bool) {
        if let Some(m) = &self.st.metrics {
            m.finish(&FinishedRequest {
                streaming: self.streaming,
                aborted,
                prompt_tokens: self.prompt_tokens,
                completion_tokens: self.produced,
                cached_tokens: self.cached_tokens,
                e2e: if self.st.cfg.time_scale == 1.0 {
                    self.arrived.elapsed().as_secs_f64()
                } else {
                    self.last_t.saturating_sub(self.arrival_t) as f64 / 1e9
                },
                queue_time: self.queue_time,
            });
        }
    }

    fn observe_output(&mut self, n: u32, at: Nanos) {
        let now = Instant::now();
        if let Some(m) = &self.st.metrics {
            // Real time: when the output reached the front end, as SGLang measures. Under a time
            // scale, engine time: wall-clock delays in delivering it would count K times over.
            let (ttft, gap) = if self.st.cfg.time_scale == 1.0 {
                ((now - self.arrived).as_secs_f64(), (now - self.last_chunk).as_secs_f64())
            } else {
                (at.saturating_sub(self.arrival_t) as f64 / 1e9, at.saturating_sub(self.last_t) as f64 / 1e9)
            };
            if self.first {
                m.observe_ttft(ttft);
            } else {
                m.observe_chunk(gap, n);
            }
        }
        self.last_chunk = now;
        self.last_t = at;
    }

    /// The SSE comment stamping the event that follows with its engine time.
    fn stamp(&self, at: Nanos) -> Option<Bytes> {
        self.stamps.then(|| Bytes::from(format!(": t={at}\n")))
    }

    /// Next SSE frames; `None` at the end of the stream.
    async fn next_frames(&mut self) -> Option<Vec<Bytes>> {
        if self.finish.is_some() && !self.guard.armed {
            return None;
        }
        let ev = self.events.recv().await;
        let mut out = Vec::new();
        match ev {
            Some(ReqEvent::Tokens { n, at }) => {
                self.observe_output(n, at);
                out.extend(self.stamp(at));
                let step = self.tokens(n);
                if self.first {
                    self.first = false;
                    out.push(self.chunk(Delta { reasoning_content: None, role: Some("assistant"), content: Some("") }, None, None));
                }
                let usage = self.continuous_usage.then(|| self.usage());
                if !step.reasoning.is_empty() {
                    out.push(self.chunk(
                        Delta { reasoning_content: Some(&step.reasoning), role: None, content: None },
                        None,
                        usage.as_ref(),
                    ));
                }
                if !step.content.is_empty() {
                    out.push(self.chunk(Delta { reasoning_content: None, role: None, content: Some(&step.content) }, None, usage.as_ref()));
                }
                if self.finish.is_some() {
                    // A stop string or stop id ended the reply early.
                    self.st.driver.abort(self.guard.id);
                    out.extend(self.end_frames());
                }
            }
            Some(ReqEvent::Finished { reason, cached_tokens, queue_time, at }) => {
                self.cached_tokens = cached_tokens;
                self.queue_time = queue_time;
                self.last_t = at;
                out.extend(self.stamp(at));
                self.finished(reason);
                out.extend(self.end_frames());
            }
            Some(ReqEvent::Failed(e)) => {
                out.push(Bytes::from(format!("data: {}\n\n", core_error(&e).stream_body())));
                out.push(Bytes::from_static(b"data: [DONE]\n\n"));
                self.guard.armed = false;
                self.finish = Some(("abort".into(), Value::Null));
                self.record(true);
            }
            None => {
                let e = ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The engine stopped.");
                out.push(Bytes::from(format!("data: {}\n\n", e.stream_body())));
                out.push(Bytes::from_static(b"data: [DONE]\n\n"));
                self.guard.armed = false;
                self.finish = Some(("abort".into(), Value::Null));
            }
        }
        Some(out)
    }

    fn end_frames(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        let (reason, matched) = self.finish.clone().expect("finish set");
        out.push(self.chunk(Delta { reasoning_content: None, role: None, content: None }, Some((&reason, matched)), None));
        if self.include_usage {
            let usage = self.usage();
            out.push(frame(&Chunk {
                id: &self.rid,
                object: "chat.completion.chunk",
                created: self.st.created,
                model: &self.model,
                choices: Vec::new(),
                usage: Some(&usage),
            }));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        self.guard.armed = false;
        self.record(false);
        out
    }
}

fn core_error(e: &super::driver::CoreError) -> ApiError {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status == StatusCode::BAD_REQUEST { ApiError::bad_request(e.message.clone()) } else { ApiError::status(status, e.message.clone()) }
}

/// Request header asking for engine times (any value): the response then carries
/// [`ARRIVAL_HEADER`] and every SSE event is preceded by the comment `: t=<engine ns>`, the engine
/// time its output became visible. SSE clients ignore comments; sweep's client uses them under a
/// time scale (where wall-clock delays would count K times over) and to measure its added latency.
pub const ENGINE_TIME_HEADER: &str = "x-sweep-engine-time";
/// Response header: engine nanoseconds at the request's arrival (see [`super::driver::Submitted`]).
pub const ARRIVAL_HEADER: &str = "x-sweep-arrival-ns";

/// Submits the request and answers it (SSE or JSON).
#[allow(clippy::too_many_arguments)] // one request's parts, all needed to stream it
pub(crate) async fn run(
    st: Arc<AppState>,
    req: ChatRequest,
    params: GenParams,
    input_ids: Vec<u32>,
    enc: Arc<ChatEncoder>,
    thinking: bool,
    arrived: Instant,
    hold: Option<Arc<super::driver::Hold>>,
    stamps: bool,
) -> Result<Response, ApiError> {
    let id = st.next_id();
    let prompt_tokens = input_ids.len() as u64;
    let mut rng = st.cfg.seed ^ req.seed.unwrap_or(id).wrapping_mul(0xA24B_AED4_963E_E407);
    splitmix(&mut rng);
    // Room left in the context bounds the reply (SGLang clamps max_new_tokens).
    let room = st.context_length().saturating_sub(prompt_tokens + 1).max(1);
    let cap = params.max_tokens.unwrap_or(room).min(room);
    // A reply that ends on its own (no ignore_eos): geometric length with the
    // configured mean, never below min_tokens; the core emits EOS there.
    let eos_after = (!req.ignore_eos).then(|| {
        let p = 1.0 / st.cfg.mean_output_tokens.max(1) as f64;
        let u = (splitmix(&mut rng) >> 11) as f64 / (1u64 << 53) as f64;
        let natural = ((1.0 - u).ln() / (1.0 - p).ln()).ceil().max(1.0) as u64;
        natural.max(params.min_tokens).max(1)
    });
    let (max_new, natural_stop) = match eos_after {
        Some(n) if n < cap => (n, true),
        _ => (cap, false),
    };
    let reasoning_budget = if thinking && st.cfg.reasoning_parser.is_some() { max_new / 2 } else { 0 };
    let stream = req.stream;
    let include_usage = req.stream_options.as_ref().map(|o| o.include_usage).unwrap_or(false) || st.cfg.stream_default_usage;
    let continuous_usage = req.stream_options.as_ref().is_some_and(|o| o.continuous_usage_stats);
    let stops = match &req.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) => v.clone(),
    }
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect();
    // Draw the reply's ids up front (bounded): the same ids it will stream. Without a
    // reasoning split the next turn's template renders exactly these ids (plus EOS)
    // after this prompt, so the engine can cache them for the next turn.
    let planned: Vec<u32> = {
        let tok = enc.tokenizer();
        let alphabet = tok.alphabet();
        let n = max_new.min(PLANNED_MAX);
        (0..n)
            .map(|k| {
                if natural_stop && k + 1 == max_new {
                    tok.eos_id().unwrap_or(0)
                } else {
                    alphabet[(splitmix(&mut rng) % alphabet.len() as u64) as usize]
                }
            })
            .collect()
    };
    let continuation_output = if reasoning_budget == 0 { planned.clone() } else { Vec::new() };
    let core_req = CoreRequest {
        id,
        continuation_output,
        input_ids,
        max_new_tokens: params.max_tokens,
        ignore_eos: req.ignore_eos,
        eos_after: if natural_stop { eos_after } else { None },
        dp_rank: req.data_parallel_rank.and_then(|r| u32::try_from(r).ok()),
    };
    let submitted = st.driver.submit_arrived(core_req, arrived, hold.as_deref()).await.map_err(|e| core_error(&e))?;
    drop(hold);
    let mut rid_rng = id ^ st.cfg.seed.rotate_left(32) ^ st.created;
    let rid = format!("{:016x}{:016x}", splitmix(&mut rid_rng), splitmix(&mut rid_rng));
    let mut g = Gen {
        guard: AbortGuard { st: st.clone(), id, armed: true },
        st,
        enc,
        rid,
        model: req.model.clone(),
        events: submitted.events,
        streaming: stream,
        include_usage,
        continuous_usage,
        return_meta: req.return_meta_info,
        prompt_tokens,
        max_new,
        natural_stop,
        reasoning_budget,
        stops,
        stop_ids: req.stop_token_ids.clone().unwrap_or_default(),
        planned,
        rng,
        produced: 0,
        reasoning_tokens: 0,
        detok_reasoning: Detokenizer::new(),
        detok_content: Detokenizer::new(),
        content: String::new(),
        reasoning: String::new(),
        arrived,
        last_chunk: arrived,
        arrival_t: submitted.arrival,
        last_t: submitted.arrival,
        stamps: stamps && stream,
        first: true,
        finish: None,
        cached_tokens: 0,
        queue_time: 0.0,
    };
    if stream {
        let s = futures_util::stream::unfold(g, |mut g| async move { g.next_frames().await.map(|frames| (frames, g)) });
        let s = futures_util::StreamExt::flat_map(s, |frames| futures_util::stream::iter(frames.into_iter().map(Ok)));
        let mut r = (StatusCode::OK, [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], sse_body(s))
            .into_response();
        if stamps {
            r.headers_mut().insert(ARRIVAL_HEADER, header::HeaderValue::from(submitted.arrival));
        }
        return Ok(r);
    }
    // Non-streaming: run to the end, then answer once.
    loop {
        match g.events.recv().await {
            Some(ReqEvent::Tokens { n, at }) => {
                g.observe_output(n, at);
                g.first = false;
                g.tokens(n);
                if g.finish.is_some() {
                    g.st.driver.abort(id);
                    break;
                }
            }
            Some(ReqEvent::Finished { reason, cached_tokens, queue_time, at }) => {
                g.cached_tokens = cached_tokens;
                g.queue_time = queue_time;
                g.last_t = at;
                g.finished(reason);
                break;
            }
            Some(ReqEvent::Failed(e)) => {
                g.guard.armed = false;
                g.record(true);
                return Err(core_error(&e));
            }
            None => {
                g.guard.armed = false;
                return Err(ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The engine stopped."));
            }
        }
    }
    g.guard.armed = false;
    g.record(false);
    let (reason, matched) = g.finish.clone().expect("finished");
    let usage = g.usage();
    let meta = g.return_meta.then(|| {
        serde_json::json!({
            "id": g.rid,
            "finish_reason": {"type": reason},
            "prompt_tokens": g.prompt_tokens,
            "completion_tokens": g.produced,
            "cached_tokens": g.cached_tokens,
            "e2e_latency": if g.st.cfg.time_scale == 1.0 {
                g.arrived.elapsed().as_secs_f64()
            } else {
                g.last_t.saturating_sub(g.arrival_t) as f64 / 1e9
            },
        })
    });
    let body = Completion {
        id: &g.rid,
        object: "chat.completion",
        created: g.st.created,
        model: &g.model,
        choices: vec![Choice {
            index: 0,
            message: Message {
                role: "assistant",
                content: &g.content,
                reasoning_content: (!g.reasoning.is_empty()).then_some(g.reasoning.as_str()),
            },
            logprobs: None,
            finish_reason: &reason,
            matched_stop: matched,
            meta_info: meta,
        }],
        usage,
        metadata: serde_json::json!({"weight_version": "default"}),
    };
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], serde_json::to_string(&body).expect("response serialises"))
        .into_response())
}
