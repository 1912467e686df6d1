//! OpenAI chat request parsing and validation, and SGLang's error shapes.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tokenize::{ChatMessage, Role, ToolCall};

/// An error answered with SGLang's legacy JSON shape:
/// `{"object":"error","message":…,"type":…,"param":null,"code":…}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: String,
    pub message: String,
}

#[derive(Serialize)]
pub(crate) struct ErrorBody<'a> {
    pub object: &'static str,
    pub message: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub param: Option<()>,
    pub code: u16,
}

impl ApiError {
    /// 400 with `type: "BadRequestError"` (semantic validation).
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::BAD_REQUEST, kind: "BadRequestError".into(), message: message.into() }
    }

    /// 400 with `type: "Bad Request"` (schema validation: FastAPI's 422 remapped).
    pub fn schema(message: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::BAD_REQUEST, kind: "Bad Request".into(), message: message.into() }
    }

    /// An error whose `type` is the status number as a string (queue full, OOM).
    pub fn status(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, kind: status.as_u16().to_string(), message: message.into() }
    }

    pub fn internal(message: impl std::fmt::Display) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "InternalServerError".into(),
            message: format!("Internal server error: {message}"),
        }
    }

    pub fn body(&self) -> String {
        serde_json::to_string(&ErrorBody {
            object: "error",
            message: &self.message,
            kind: &self.kind,
            param: None,
            code: self.status.as_u16(),
        })
        .expect("error body serialises")
    }

    /// The in-stream form after a 200 was sent: `{"error": {...}}`, with the
    /// status name as `type` (e.g. `SERVICE_UNAVAILABLE`) as SGLang does for aborts.
    pub fn stream_body(&self) -> String {
        let kind = self.status.canonical_reason().unwrap_or("ERROR").to_ascii_uppercase().replace(' ', "_");
        let kind = if self.kind == "BadRequestError" { self.kind.clone() } else { kind };
        format!(
            "{{\"error\":{}}}",
            serde_json::to_string(&ErrorBody {
                object: "error",
                message: &self.message,
                kind: &kind,
                param: None,
                code: self.status.as_u16(),
            })
            .expect("error body serialises")
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, [(axum::http::header::CONTENT_TYPE, "application/json")], self.body()).into_response()
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
    #[serde(default)]
    pub continuous_usage_stats: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct FunctionIn {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub struct ToolCallIn {
    pub function: FunctionIn,
}

#[derive(Debug, Deserialize)]
pub struct MessageIn {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallIn>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// The fields of SGLang's `ChatCompletionRequest` the engine reads; the others are
/// accepted with their types checked and otherwise ignored (sampling does not change
/// a simulated engine's timing). `Default` lets `/v1/completions` build one (no messages).
#[derive(Debug, Default, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<MessageIn>,
    #[serde(default = "default_model")]
    pub model: String,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub max_completion_tokens: Option<i64>,
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
    pub logprobs: Option<bool>,
    #[serde(default)]
    pub top_logprobs: Option<i64>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub ignore_eos: bool,
    #[serde(default)]
    pub min_tokens: Option<i64>,
    #[serde(default)]
    pub no_stop_trim: bool,
    #[serde(default)]
    pub skip_special_tokens: Option<bool>,
    #[serde(default)]
    pub separate_reasoning: Option<bool>,
    #[serde(default)]
    pub stream_reasoning: Option<bool>,
    #[serde(default)]
    pub chat_template_kwargs: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub return_meta_info: bool,
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

/// Parses a body, mapping JSON and type errors to SGLang's 400 `Bad Request`.
pub fn parse_chat(body: &[u8]) -> Result<ChatRequest, ApiError> {
    serde_json::from_slice::<ChatRequest>(body).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() { "JSON decode error" } else { "Request validation error" };
        ApiError::schema(format!("{what}: {e}"))
    })
}

/// The messages in the tokenizer's form, or the validation error SGLang gives.
pub fn convert_messages(req: &ChatRequest) -> Result<Vec<ChatMessage>, ApiError> {
    if req.messages.is_empty() {
        return Err(ApiError::bad_request("Messages cannot be empty."));
    }
    req.messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let role = Role::parse(&m.role).ok_or_else(|| {
                ApiError::schema(format!(
                    "messages[{i}].role: unknown role {:?}; expected system, developer, user, assistant or tool",
                    m.role
                ))
            })?;
            let content = match &m.content {
                None => String::new(),
                Some(Content::Text(s)) => s.clone(),
                Some(Content::Parts(parts)) => {
                    let mut s = String::new();
                    for (j, p) in parts.iter().enumerate() {
                        match (p.kind.as_str(), &p.text) {
                            ("text", Some(t)) => s.push_str(t),
                            ("text", None) => {
                                return Err(ApiError::schema(format!("messages[{i}].content[{j}].text: field required")));
                            }
                            (other, _) => {
                                return Err(ApiError::bad_request(format!(
                                    "messages[{i}].content[{j}]: content type {other:?} is not supported by this text-only model"
                                )));
                            }
                        }
                    }
                    s
                }
            };
            let tool_calls = m
                .tool_calls
                .iter()
                .flatten()
                .map(|c| ToolCall {
                    name: c.function.name.clone(),
                    arguments: match &c.function.arguments {
                        None => String::new(),
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                    },
                })
                .collect();
            Ok(ChatMessage { role, content, reasoning_content: m.reasoning_content.clone(), tool_calls })
        })
        .collect()
}

/// Limits the request's token budget must respect.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub context_length: u64,
    /// Whether `--context-length` was given explicitly.
    pub context_length_set: bool,
}

/// Validated generation parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenParams {
    /// Requested cap (`max_completion_tokens` or `max_tokens`), if any.
    pub max_tokens: Option<u64>,
    pub min_tokens: u64,
}

/// Checks the numeric fields before tokenisation.
pub fn validate_params(req: &ChatRequest, limits: Limits) -> Result<GenParams, ApiError> {
    let (field, max) = match (req.max_completion_tokens, req.max_tokens) {
        (Some(m), _) => ("max_completion_tokens", Some(m)),
        (None, Some(m)) => ("max_tokens", Some(m)),
        (None, None) => ("max_completion_tokens", None),
    };
    if let Some(m) = max
        && m < 1
    {
        return Err(ApiError::bad_request(format!("{field} must be at least 1, got {m}.")));
    }
    if let Some(m) = max
        && limits.context_length_set
        && m as u64 > limits.context_length
    {
        return Err(ApiError::bad_request(format!(
            "max_completion_tokens is too large: {m}. This model supports at most {} completion tokens.",
            limits.context_length
        )));
    }
    let min_tokens = match req.min_tokens {
        Some(m) if m < 0 => {
            return Err(ApiError::bad_request(format!("min_tokens must be non-negative, got {m}.")));
        }
        Some(m) => m as u64,
        None => 0,
    };
    if let Some(m) = max
        && min_tokens > m as u64
    {
        return Err(ApiError::bad_request(format!("min_tokens ({min_tokens}) must be less than or equal to {field} ({m}).")));
    }
    if let Some(n) = req.n
        && n != 1
    {
        return Err(ApiError::bad_request(format!("n must be 1 on this engine (got {n}); send {n} separate requests instead.")));
    }
    if let Some(t) = req.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(ApiError::bad_request(format!("temperature must be in [0, 2], got {t}.")));
    }
    if let Some(p) = req.top_p
        && !(p > 0.0 && p <= 1.0)
    {
        return Err(ApiError::bad_request(format!("top_p must be in (0, 1], got {p}.")));
    }
    Ok(GenParams { max_tokens: max.map(|m| m as u64), min_tokens })
}

/// Checks the tokenised prompt against the context length (SGLang's messages).
pub fn validate_length(prompt_tokens: u64, params: &GenParams, limits: Limits) -> Result<(), ApiError> {
    let c = limits.context_length;
    if prompt_tokens >= c {
        return Err(ApiError::bad_request(format!(
            "The input ({prompt_tokens} tokens) is longer than the model's context length ({c} tokens)."
        )));
    }
    if let Some(m) = params.max_tokens
        && prompt_tokens + m > c
    {
        return Err(ApiError::bad_request(format!(
            "Requested token count exceeds the model's maximum context length of {c} tokens. \
             You requested a total of {} tokens: {prompt_tokens} tokens from the input messages and \
             {m} tokens for the completion. Please reduce the number of tokens in the input \
             messages or the completion to fit within the limit.",
            prompt_tokens + m
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { context_length: 1000, context_length_set: false };

    #[test]
    fn error_body_shape() {
        let e = ApiError::bad_request("Messages cannot be empty.");
        assert_eq!(
            e.body(),
            r#"{"object":"error","message":"Messages cannot be empty.","type":"BadRequestError","param":null,"code":400}"#
        );
        let q = ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The request queue is full.");
        assert!(q.body().contains(r#""type":"503""#));
        assert!(q.stream_body().starts_with(r#"{"error":{"object":"error""#));
        assert!(q.stream_body().contains("SERVICE_UNAVAILABLE"));
    }

    #[test]
    fn wrong_types_and_bad_json_are_schema_errors() {
        let e = parse_chat(br#"{"messages": "hi"}"#).unwrap_err();
        assert_eq!(e.kind, "Bad Request");
        let e = parse_chat(br#"{"messages": [{"role":"user","content":"x"}], "max_tokens": "ten"}"#).unwrap_err();
        assert!(e.message.contains("invalid type"), "{}", e.message);
        let e = parse_chat(b"{not json").unwrap_err();
        assert!(e.message.starts_with("JSON decode error"), "{}", e.message);
        let e = parse_chat(br#"{"model": "m"}"#).unwrap_err();
        assert!(e.message.contains("messages"), "{}", e.message);
    }

    #[test]
    fn content_parts_and_roles() {
        let r = parse_chat(
            br#"{"messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                {"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}"#,
        )
        .unwrap();
        let m = convert_messages(&r).unwrap();
        assert_eq!(m[0].role, Role::System);
        assert_eq!(m[0].content, "ab");
        assert_eq!(m[1].tool_calls[0].name, "f");
        let r = parse_chat(br#"{"messages":[]}"#).unwrap();
        assert_eq!(convert_messages(&r).unwrap_err().message, "Messages cannot be empty.");
        let r = parse_chat(br#"{"messages":[{"role":"wizard","content":"x"}]}"#).unwrap();
        assert!(convert_messages(&r).is_err());
    }

    #[test]
    fn numeric_validation() {
        let r = parse_chat(br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-3}"#).unwrap();
        assert!(validate_params(&r, LIMITS).unwrap_err().message.contains("at least 1"));
        let r = parse_chat(br#"{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":28,"max_tokens":5}"#).unwrap();
        assert_eq!(validate_params(&r, LIMITS).unwrap().max_tokens, Some(28));
        let p = GenParams { max_tokens: Some(10), min_tokens: 0 };
        assert!(validate_length(989, &p, LIMITS).is_ok());
        let e = validate_length(1000, &p, LIMITS).unwrap_err();
        assert_eq!(e.message, "The input (1000 tokens) is longer than the model's context length (1000 tokens).");
        let e = validate_length(995, &p, LIMITS).unwrap_err();
        assert!(e.message.starts_with("Requested token count exceeds"), "{}", e.message);
        let r = parse_chat(br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":5000}"#).unwrap();
        let set = Limits { context_length_set: true, ..LIMITS };
        assert!(validate_params(&r, set).unwrap_err().message.starts_with("max_completion_tokens is too large"));
    }
}
