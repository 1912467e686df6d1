//! One chat or text-completion request from submission to the last byte: generated ids,
//! text deltas, the reasoning split, stop conditions, SSE chunks in SGLang 0.5.23's shape,
//! the non-streaming response, usage and metrics.
//!
//! This file submits the request and holds its state; generating the reply is
//! `reply.rs`, the answer `sse.rs` (streaming) or `json.rs`, their bodies `wire.rs`;
//! `text.rs` is what `/v1/completions` answers differently.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use super::AppState;
use super::api::{ApiError, ChatRequest, GenParams, Stop};
use super::driver::{CoreRequest, Nanos, ReqEvent, ReqId};
use super::listen::Phase;
use crate::tokenize::{ChatEncoder, Detokenizer};
use reply::{Plan, splitmix};

mod json;
mod reply;
mod sse;
mod text;
mod wire;

/// Which OpenAI API the request came through: it decides the bodies, not the generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Api {
    /// `/v1/chat/completions`; `thinking` turns on the reasoning split.
    Chat { thinking: bool },
    /// `/v1/completions`: `text_completion` bodies, no role chunk, no reasoning split.
    Text,
}

/// The core request while it runs: armed until the reply is complete, so that a response
/// dropped before (the client disconnected) aborts it (see `Drop for Gen`).
struct AbortGuard {
    id: ReqId,
    armed: bool,
}

impl Drop for Gen {
    fn drop(&mut self) {
        self.st.active.fetch_sub(1, Ordering::AcqRel);
        if self.guard.armed {
            self.abort();
        }
    }
}

/// The state of one request.
struct Gen {
    st: Arc<AppState>,
    enc: Arc<ChatEncoder>,
    /// A text completion (`/v1/completions`) rather than a chat one.
    text: bool,
    /// Text completions: the reply's last text, held until the core's finish (which follows it
    /// at the same engine time) so that it goes out in one chunk with `finish_reason`, as in SGLang.
    held: Option<String>,
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
    /// Seconds waiting before the first prefill, once the core has said.
    queue_time: Option<f64>,
    /// The server's phase: at [`Phase::Cut`] the reply ends with an error.
    phase: watch::Receiver<Phase>,
}

impl Gen {
    /// Ends the request early (the client went away, or the drain cut it): the core drops it, and
    /// it is recorded as SGLang records an abort, as a finished request with the tokens produced
    /// so far and its real latency, plus one in `num_aborted_requests_total`.
    fn abort(&mut self) {
        self.guard.armed = false;
        self.st.driver.abort(self.guard.id);
        if self.finish.is_none() {
            self.finish = Some(("abort".into(), Value::Null));
        }
        self.record(true);
    }

    /// Resolves when the drain cuts open streams.
    async fn cut(phase: &mut watch::Receiver<Phase>) {
        if phase.wait_for(|p| *p >= Phase::Cut).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The error a cut stream ends with.
fn cut_error() -> ApiError {
    ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The server is shutting down; the request was aborted.")
}

pub(super) fn core_error(e: &super::driver::CoreError) -> ApiError {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status == StatusCode::BAD_REQUEST { ApiError::bad_request(e.message.clone()) } else { ApiError::status(status, e.message.clone()) }
}

/// Request header asking for engine times (any value): the response then carries
/// [`ARRIVAL_HEADER`] and every SSE event is preceded by the comment `: t=<engine ns>`, the engine
/// time its output became visible (see [`super::driver::Driver::seen`]). SSE clients ignore
/// comments; sweep's client uses them under a time scale (where wall-clock delays would count K
/// times over) and to measure its added latency.
pub const ENGINE_TIME_HEADER: &str = "x-sweep-engine-time";
/// Response header: engine nanoseconds at the request's arrival (see [`super::driver::Submitted`]).
pub const ARRIVAL_HEADER: &str = "x-sweep-arrival-ns";

/// The request's non-empty stop strings.
fn stop_strings(req: &ChatRequest) -> Vec<String> {
    match &req.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) => v.clone(),
    }
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect()
}

/// `data_parallel_rank`: negative or huge ranks are refused here; a rank at or above the
/// attention-DP size, by the core.
fn dp_rank(req: &ChatRequest) -> Result<Option<u32>, ApiError> {
    req.data_parallel_rank
        .map(|r| {
            u32::try_from(r).map_err(|_| {
                ApiError::bad_request(format!(
                    "data_parallel_rank {r} is out of range: it must be 0 or more and below the server's attention-DP size"
                ))
            })
        })
        .transpose()
}

/// Submits the request and answers it (SSE or JSON).
#[allow(clippy::too_many_arguments)] // one request's parts, all needed to stream it
pub(crate) async fn run(
    st: Arc<AppState>,
    req: ChatRequest,
    params: GenParams,
    input_ids: Vec<u32>,
    enc: Arc<ChatEncoder>,
    api: Api,
    arrived: Instant,
    hold: Option<Arc<super::driver::Hold>>,
    stamps: bool,
) -> Result<Response, ApiError> {
    let id = st.next_id();
    let prompt_tokens = input_ids.len() as u64;
    let thinking = matches!(api, Api::Chat { thinking: true });
    let plan = Plan::new(&st, &req, &params, id, prompt_tokens, thinking, &enc);
    let stream = req.stream;
    let include_usage = req.stream_options.as_ref().map(|o| o.include_usage).unwrap_or(false) || st.cfg.stream_default_usage;
    let continuous_usage = req.stream_options.as_ref().is_some_and(|o| o.continuous_usage_stats);
    let stops = stop_strings(&req);
    let dp_rank = dp_rank(&req)?;
    let continuation_output = if plan.reasoning_budget == 0 { plan.planned.clone() } else { Vec::new() };
    let core_req = CoreRequest {
        id,
        continuation_output,
        input_ids,
        max_new_tokens: params.max_tokens,
        ignore_eos: req.ignore_eos,
        eos_after: if plan.natural_stop { plan.eos_after } else { None },
        dp_rank,
    };
    let submitted = st.driver.submit_arrived(core_req, arrived, hold.as_deref()).await.map_err(|e| core_error(&e))?;
    drop(hold);
    let mut rid_rng = id ^ st.cfg.seed.rotate_left(32) ^ st.created;
    let rid = format!("{:016x}{:016x}", splitmix(&mut rid_rng), splitmix(&mut rid_rng));
    st.active.fetch_add(1, Ordering::AcqRel);
    let g = Gen {
        guard: AbortGuard { id, armed: true },
        phase: st.phase.subscribe(),
        st,
        enc,
        text: api == Api::Text,
        held: None,
        rid,
        model: req.model.clone(),
        events: submitted.events,
        streaming: stream,
        include_usage,
        continuous_usage,
        return_meta: req.return_meta_info,
        prompt_tokens,
        max_new: plan.max_new,
        natural_stop: plan.natural_stop,
        reasoning_budget: plan.reasoning_budget,
        stops,
        stop_ids: req.stop_token_ids.clone().unwrap_or_default(),
        planned: plan.planned,
        rng: plan.rng,
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
        queue_time: None,
    };
    if stream { Ok(sse::respond(g, stamps, submitted.arrival)) } else { json::respond(g).await }
}
