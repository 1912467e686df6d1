//! The streaming answer: SSE frames for each core output, the closing frames, the response.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::wire::{Chunk, ChunkChoice, CompatChoice, CompatChunk, CompatDelta, Delta, Usage, frame};
use super::{ARRIVAL_HEADER, Gen, core_error};
use crate::server::api::ApiError;
use crate::server::driver::{Nanos, ReqEvent};
use crate::server::sse_body;

/// The SSE response; frames are produced as the core's outputs arrive.
pub(super) fn respond(g: Gen, stamps: bool, arrival: Nanos) -> Response {
    let s = futures_util::stream::unfold(g, |mut g| async move { g.next_frames().await.map(|frames| (frames, g)) });
    let s = futures_util::StreamExt::flat_map(s, |frames| futures_util::stream::iter(frames.into_iter().map(Ok)));
    let mut r =
        (StatusCode::OK, [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], sse_body(s)).into_response();
    if stamps {
        r.headers_mut().insert(ARRIVAL_HEADER, header::HeaderValue::from(arrival));
    }
    r
}

impl Gen {
    /// The SSE comment stamping the event that follows with its engine time.
    pub(super) fn stamp(&self, at: Nanos) -> Option<Bytes> {
        self.stamps.then(|| Bytes::from(format!(": t={at}\n")))
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

    /// Next SSE frames; `None` at the end of the stream.
    async fn next_frames(&mut self) -> Option<Vec<Bytes>> {
        if self.finish.is_some() && !self.guard.armed {
            return None;
        }
        let ev = tokio::select! {
            biased;
            _ = Gen::cut(&mut self.phase) => {
                self.abort();
                return Some(vec![
                    Bytes::from(format!("data: {}\n\n", super::cut_error().stream_body())),
                    Bytes::from_static(b"data: [DONE]\n\n"),
                ]);
            }
            ev = self.events.recv() => ev,
        };
        let mut out = Vec::new();
        match ev {
            Some(ReqEvent::Tokens { n, at }) => {
                let at = self.st.driver.seen(at);
                self.observe_output(n, at);
                if self.text {
                    return Some(self.text_frames(n, at));
                }
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
                let at = self.st.driver.seen(at);
                self.cached_tokens = cached_tokens;
                self.queue_time = Some(queue_time);
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

    /// The finish chunk (a chat one, or a text completion's last text), usage, `[DONE]`.
    pub(super) fn end_frames(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        let (reason, matched) = self.finish.clone().expect("finish set");
        if self.text {
            let text = self.held.take().unwrap_or_default();
            out.push(self.text_chunk(&text, Some((&reason, matched)), None));
        } else {
            out.push(self.chunk(Delta { reasoning_content: None, role: None, content: None }, Some((&reason, matched)), None));
        }
        if self.include_usage {
            let usage = self.usage();
            out.push(frame(&Chunk {
                id: &self.rid,
                object: if self.text { "text_completion" } else { "chat.completion.chunk" },
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
