//! What `/v1/completions` answers differently from chat (SGLang's `serving_completions.py`):
//! `text_completion` chunks carrying `text` (no role chunk, no reasoning split), the finish on
//! the reply's last text chunk rather than in a chunk of its own, and the non-streaming
//! `text_completion` body.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::Gen;
use super::wire::{Usage, frame};
use crate::server::driver::Nanos;

#[derive(Serialize)]
struct TextChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: Option<()>,
    finish_reason: Option<&'a str>,
    matched_stop: Value,
}

/// A streamed chunk; `usage` is always written (null unless set), as SGLang's
/// `model_dump_json()` writes it.
#[derive(Serialize)]
struct TextChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<TextChoice<'a>>,
    usage: Option<&'a Usage>,
}

#[derive(Serialize)]
struct TextCompletion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<TextChoice<'a>>,
    usage: Usage,
    metadata: Value,
}

impl Gen {
    pub(super) fn text_chunk(&self, text: &str, finish: Option<(&str, Value)>, usage: Option<&Usage>) -> Bytes {
        let (finish_reason, matched_stop) = match finish {
            Some((r, m)) => (Some(r), m),
            None => (None, Value::Null),
        };
        frame(&TextChunk {
            id: &self.rid,
            object: "text_completion",
            created: self.st.created,
            model: &self.model,
            choices: vec![TextChoice { index: 0, text, logprobs: None, finish_reason, matched_stop }],
            usage,
        })
    }

    /// The frames of one core output of a streamed text completion: a chunk per output (empty
    /// text included, as SGLang sends one per output), except the reply's last, which waits.
    pub(super) fn text_frames(&mut self, n: u32, at: Nanos) -> Vec<Bytes> {
        self.first = false;
        let step = self.tokens(n);
        if self.finish.is_some() {
            // A stop string or stop id ended the reply early: the core keeps going unless told.
            self.st.driver.abort(self.guard.id);
            self.held = Some(step.content);
            let mut out: Vec<Bytes> = self.stamp(at).into_iter().collect();
            out.extend(self.end_frames());
            return out;
        }
        if self.produced >= self.max_new {
            // The core's finish follows at the same engine time; the text goes out with it.
            self.held = Some(step.content);
            return Vec::new();
        }
        let usage = self.continuous_usage.then(|| self.usage());
        let mut out: Vec<Bytes> = self.stamp(at).into_iter().collect();
        out.push(self.text_chunk(&step.content, None, usage.as_ref()));
        out
    }
}

/// The non-streaming answer of a finished text completion.
pub(super) fn completion(g: &Gen) -> Response {
    let (reason, matched) = g.finish.clone().expect("finished");
    let body = TextCompletion {
        id: &g.rid,
        object: "text_completion",
        created: g.st.created,
        model: &g.model,
        choices: vec![TextChoice { index: 0, text: &g.content, logprobs: None, finish_reason: Some(&reason), matched_stop: matched }],
        usage: g.usage(),
        metadata: serde_json::json!({"weight_version": "default"}),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], serde_json::to_string(&body).expect("response serialises"))
        .into_response()
}
