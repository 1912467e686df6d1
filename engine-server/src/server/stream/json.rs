//! The non-streaming answer: the reply run to its end, then one JSON completion.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::wire::{Choice, Completion, Message};
use super::{Gen, core_error};
use crate::server::api::ApiError;
use crate::server::driver::ReqEvent;

/// Runs the reply to its end and answers once.
pub(super) async fn respond(mut g: Gen) -> Result<Response, ApiError> {
    loop {
        let ev = tokio::select! {
            biased;
            _ = Gen::cut(&mut g.phase) => {
                g.abort();
                return Err(super::cut_error());
            }
            ev = g.events.recv() => ev,
        };
        match ev {
            Some(ReqEvent::Tokens { n, at }) => {
                let at = g.st.driver.seen(at);
                g.observe_output(n, at);
                g.first = false;
                g.tokens(n);
                if g.finish.is_some() {
                    g.st.driver.abort(g.guard.id);
                    break;
                }
            }
            Some(ReqEvent::Finished { reason, cached_tokens, queue_time, at }) => {
                g.cached_tokens = cached_tokens;
                g.queue_time = Some(queue_time);
                g.last_t = g.st.driver.seen(at);
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
    Ok(if g.text { super::text::completion(&g) } else { completion(&g) })
}

/// The chat completion of a finished reply.
fn completion(g: &Gen) -> Response {
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
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], serde_json::to_string(&body).expect("response serialises"))
        .into_response()
}
