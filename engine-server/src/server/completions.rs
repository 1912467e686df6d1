//! SGLang's OpenAI text-completions endpoint, `POST /v1/completions`: a prompt (text or token
//! ids) taken without a chat template, then the chat path's machinery (submission, the
//! time-scale hold, SSE and `--stream-interval` chunks, usage, errors, metrics, aborts) answering
//! `text_completion` bodies.
//!
//! The request is parsed and checked here, then turned into a [`ChatRequest`] without messages,
//! so that the sampling fields are validated and honoured exactly as the chat path does.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::api::{self, ApiError, ChatRequest, Stop, StreamOptions};
use super::{AppState, Arrived, admit, driver, error_response, json_body, stream};

/// `max_tokens` when absent, as in OpenAI's API and SGLang's `CompletionRequest`.
pub const DEFAULT_MAX_TOKENS: i64 = 16;

/// The fields of SGLang's `CompletionRequest` the engine reads; the others are accepted with
/// their types checked and otherwise ignored (sampling does not change a simulated engine's
/// timing).
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    /// A string, a list of one string, or a list of token ids (see [`prompt`]).
    pub prompt: Value,
    #[serde(default = "default_model")]
    pub model: String,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default)]
    pub min_p: Option<f64>,
    #[serde(default)]
    pub n: Option<i64>,
    #[serde(default)]
    pub best_of: Option<i64>,
    #[serde(default)]
    pub logprobs: Option<i64>,
    #[serde(default)]
    pub echo: bool,
    #[serde(default)]
    pub stop: Option<Stop>,
    #[serde(default)]
    pub stop_token_ids: Option<Vec<u32>>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub presence_penalty: Option<f64>,
    #[serde(default)]
    pub frequency_penalty: Option<f64>,
    #[serde(default)]
    pub repetition_penalty: Option<f64>,
    #[serde(default)]
    pub ignore_eos: bool,
    #[serde(default)]
    pub min_tokens: Option<i64>,
    #[serde(default)]
    pub no_stop_trim: bool,
    #[serde(default)]
    pub skip_special_tokens: Option<bool>,
    #[serde(default)]
    pub rid: Option<String>,
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub extra_key: Option<String>,
    #[serde(default)]
    pub cache_salt: Option<String>,
    #[serde(default)]
    pub data_parallel_rank: Option<i64>,
}

fn default_model() -> String {
    "default".into()
}

/// A prompt as the engine takes it: one text, or one sequence of token ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptIn {
    Text(String),
    Ids(Vec<u32>),
}

/// Parses a body, mapping JSON and type errors to SGLang's 400 `Bad Request` (as the chat path).
pub fn parse(body: &[u8]) -> Result<CompletionRequest, ApiError> {
    serde_json::from_slice::<CompletionRequest>(body).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() { "JSON decode error" } else { "Request validation error" };
        ApiError::schema(format!("{what}: {e}"))
    })
}

/// The request's one prompt. SGLang also takes a batch (several strings or id lists); the engine
/// answers one completion per request, so a batch is refused with a message saying so.
pub fn prompt(v: &Value) -> Result<PromptIn, ApiError> {
    let empty = || ApiError::bad_request("Prompt cannot be empty");
    let shape = || ApiError::schema("Request validation error: prompt: expected a string, a list of strings or a list of token ids");
    let batch = |n: usize| {
        ApiError::bad_request(format!(
            "prompt holds {n} prompts; the reference engine takes one prompt per request: send {n} requests instead."
        ))
    };
    match v {
        Value::String(s) if s.is_empty() => Err(empty()),
        Value::String(s) => Ok(PromptIn::Text(s.clone())),
        Value::Array(a) if a.is_empty() => Err(empty()),
        Value::Array(a) if a.iter().all(Value::is_string) => match a.as_slice() {
            [one] => prompt(one),
            _ => Err(batch(a.len())),
        },
        Value::Array(a) if a.iter().all(Value::is_number) => token_ids(a).map(PromptIn::Ids),
        Value::Array(a) if a.iter().all(Value::is_array) => match a.as_slice() {
            [Value::Array(one)] if one.is_empty() => Err(empty()),
            [Value::Array(one)] if one.iter().all(Value::is_number) => token_ids(one).map(PromptIn::Ids),
            [_] => Err(shape()),
            _ => Err(batch(a.len())),
        },
        _ => Err(shape()),
    }
}

fn token_ids(a: &[Value]) -> Result<Vec<u32>, ApiError> {
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_u64().and_then(|x| u32::try_from(x).ok()).ok_or_else(|| {
                ApiError::schema(format!("Request validation error: prompt[{i}]: {x} is not a token id (an integer from 0 to 2^32 - 1)"))
            })
        })
        .collect()
}

impl CompletionRequest {
    /// Refuses what the reference engine cannot answer faithfully, before any work.
    pub fn check_supported(&self) -> Result<(), ApiError> {
        if let Some(b) = self.best_of
            && b != 1
        {
            return Err(ApiError::bad_request(format!(
                "best_of must be 1 on this engine (got {b}): the reference engine generates one completion per request."
            )));
        }
        if self.logprobs.is_some() {
            return Err(ApiError::bad_request("logprobs are not supported by the reference engine"));
        }
        if self.echo {
            return Err(ApiError::bad_request("echo is not supported by the reference engine"));
        }
        Ok(())
    }

    /// The same request as the chat path's (no messages), so that its sampling fields are
    /// validated and honoured as there; `max_tokens` gets its completions default.
    pub fn into_chat(self) -> ChatRequest {
        ChatRequest {
            model: self.model,
            stream: self.stream,
            stream_options: self.stream_options,
            max_tokens: Some(self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            min_p: self.min_p,
            n: self.n,
            stop: self.stop,
            stop_token_ids: self.stop_token_ids,
            seed: self.seed,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repetition_penalty: self.repetition_penalty,
            ignore_eos: self.ignore_eos,
            min_tokens: self.min_tokens,
            no_stop_trim: self.no_stop_trim,
            skip_special_tokens: self.skip_special_tokens,
            rid: self.rid,
            priority: self.priority,
            extra_key: self.extra_key,
            cache_salt: self.cache_salt,
            data_parallel_rank: self.data_parallel_rank,
            ..ChatRequest::default()
        }
    }
}

/// `POST /v1/completions`.
pub(super) async fn completions(
    State(st): State<Arc<AppState>>,
    arrived: Option<axum::Extension<Arrived>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (arrived, hold) = arrived.map(|a| (a.0.0, a.0.1)).unwrap_or_else(|| (Instant::now(), None));
    completions_inner(st, headers, body, arrived, hold).await.unwrap_or_else(error_response)
}

async fn completions_inner(
    st: Arc<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    arrived: Instant,
    hold: Option<Arc<driver::Hold>>,
) -> Result<Response, ApiError> {
    admit(&st)?;
    let body = json_body(&st, &headers, body)?;
    let encoder = st.encoder.get().expect("ready implies encoder").clone();
    // Parsing a multi-megabyte body is CPU work too: do it on the tokenizer pool.
    let (req, prompt) = st
        .pool
        .run(move || -> Result<_, ApiError> {
            let req = parse(&body)?;
            let prompt = prompt(&req.prompt)?;
            Ok((req, prompt))
        })
        .await
        .ok_or_else(|| ApiError::internal("tokenizer worker failed"))??;
    // Latencies start here, as on the chat path (see `chat_inner`).
    let arrived = if st.cfg.time_scale == 1.0 { Instant::now() } else { arrived };
    req.check_supported()?;
    let req = req.into_chat();
    let limits = api::Limits { context_length: st.context_length(), context_length_set: st.cfg.context_length.is_some() };
    let params = api::validate_params(&req, limits)?;
    let ids = match prompt {
        PromptIn::Ids(ids) => {
            let vocab = encoder.tokenizer().vocab_size();
            if let Some(&bad) = ids.iter().find(|&&id| id >= vocab) {
                return Err(ApiError::bad_request(format!("prompt token id {bad} is out of range: the vocabulary has {vocab} tokens.")));
            }
            ids
        }
        // The text alone, as the chat path encodes a message's content: no template, no BOS.
        PromptIn::Text(text) => {
            let enc = encoder.clone();
            st.pool
                .run(move || enc.tokenizer().encode(&text))
                .await
                .ok_or_else(|| ApiError::internal("tokenizer worker failed"))?
                .map_err(ApiError::internal)?
        }
    };
    if ids.is_empty() {
        return Err(ApiError::bad_request("Prompt cannot be empty"));
    }
    api::validate_length(ids.len() as u64, &params, limits)?;
    let stamps = headers.contains_key(stream::ENGINE_TIME_HEADER);
    stream::run(st, req, params, ids, encoder, stream::Api::Text, arrived, hold, stamps).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_shapes() {
        let p = |s: &str| prompt(&serde_json::from_str(s).unwrap());
        assert_eq!(p(r#""hi""#).unwrap(), PromptIn::Text("hi".into()));
        assert_eq!(p(r#"["hi"]"#).unwrap(), PromptIn::Text("hi".into()));
        assert_eq!(p("[1, 2, 3]").unwrap(), PromptIn::Ids(vec![1, 2, 3]));
        assert_eq!(p("[[4, 5]]").unwrap(), PromptIn::Ids(vec![4, 5]));
        for empty in [r#""""#, "[]", r#"[""]"#, "[[]]"] {
            assert_eq!(p(empty).unwrap_err().message, "Prompt cannot be empty", "{empty}");
        }
        assert!(p(r#"["a", "b"]"#).unwrap_err().message.contains("2 prompts"));
        assert!(p("[[1], [2]]").unwrap_err().message.contains("2 prompts"));
        for bad in ["null", "3", r#"[1, "a"]"#, "[-1]", "[1.5]", "[4294967296]", r#"[["a"]]"#, r#"{"a": 1}"#] {
            let e = p(bad).unwrap_err();
            assert_eq!(e.kind, "Bad Request", "{bad}: {e:?}");
        }
    }

    #[test]
    fn unsupported_fields_and_defaults() {
        let r = parse(br#"{"prompt": "x", "best_of": 2}"#).unwrap();
        assert!(r.check_supported().unwrap_err().message.starts_with("best_of must be 1"));
        let r = parse(br#"{"prompt": "x", "logprobs": 5}"#).unwrap();
        assert_eq!(r.check_supported().unwrap_err().message, "logprobs are not supported by the reference engine");
        let r = parse(br#"{"prompt": "x", "best_of": 1, "logprobs": null}"#).unwrap();
        assert!(r.check_supported().is_ok());
        let c = r.into_chat();
        assert_eq!(c.max_tokens, Some(DEFAULT_MAX_TOKENS));
        assert_eq!(c.model, "default");
        assert!(c.messages.is_empty());
        let e = parse(br#"{"model": "m"}"#).unwrap_err();
        assert!(e.message.contains("missing field `prompt`"), "{}", e.message);
        assert_eq!(e.kind, "Bad Request");
    }
}
