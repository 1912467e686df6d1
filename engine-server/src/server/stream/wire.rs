//! The JSON bodies as SGLang sends them: SSE chunks (0.5.23 and 0.5.5 shapes), the
//! non-streaming completion, usage.

use axum::body::Bytes;
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
pub(super) struct Delta<'a> {
    pub(super) reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) role: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) content: Option<&'a str>,
}

#[derive(Serialize)]
pub(super) struct ChunkChoice<'a> {
    pub(super) index: u32,
    pub(super) delta: Delta<'a>,
    pub(super) logprobs: Option<()>,
    pub(super) finish_reason: Option<&'a str>,
    pub(super) matched_stop: Value,
}

#[derive(Serialize)]
pub(super) struct Chunk<'a> {
    pub(super) id: &'a str,
    pub(super) object: &'static str,
    pub(super) created: u64,
    pub(super) model: &'a str,
    pub(super) choices: Vec<ChunkChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) usage: Option<&'a Usage>,
}

/// The 0.5.5 chunk shape (`--sglang-compat 0.5.5`).
#[derive(Serialize)]
pub(super) struct CompatChunk<'a> {
    pub(super) id: &'a str,
    pub(super) object: &'static str,
    pub(super) created: u64,
    pub(super) model: &'a str,
    pub(super) choices: Vec<CompatChoice<'a>>,
    pub(super) usage: Option<&'a Usage>,
}

#[derive(Serialize)]
pub(super) struct CompatDelta<'a> {
    pub(super) role: Option<&'a str>,
    pub(super) content: Option<&'a str>,
    pub(super) reasoning_content: Option<&'a str>,
}

#[derive(Serialize)]
pub(super) struct CompatChoice<'a> {
    pub(super) index: u32,
    pub(super) delta: CompatDelta<'a>,
    pub(super) logprobs: Option<()>,
    pub(super) finish_reason: Option<&'a str>,
    pub(super) matched_stop: Value,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct CachedDetails {
    pub(super) cached_tokens: u64,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct ReasoningDetails {
    pub(super) reasoning_tokens: u64,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Usage {
    pub(super) prompt_tokens: u64,
    pub(super) total_tokens: u64,
    pub(super) completion_tokens: u64,
    pub(super) prompt_tokens_details: Option<CachedDetails>,
    pub(super) reasoning_tokens: u64,
    pub(super) completion_tokens_details: Option<ReasoningDetails>,
}

#[derive(Serialize)]
pub(super) struct Message<'a> {
    pub(super) role: &'static str,
    pub(super) content: &'a str,
    pub(super) reasoning_content: Option<&'a str>,
}

#[derive(Serialize)]
pub(super) struct Choice<'a> {
    pub(super) index: u32,
    pub(super) message: Message<'a>,
    pub(super) logprobs: Option<()>,
    pub(super) finish_reason: &'a str,
    pub(super) matched_stop: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) meta_info: Option<Value>,
}

#[derive(Serialize)]
pub(super) struct Completion<'a> {
    pub(super) id: &'a str,
    pub(super) object: &'static str,
    pub(super) created: u64,
    pub(super) model: &'a str,
    pub(super) choices: Vec<Choice<'a>>,
    pub(super) usage: Usage,
    pub(super) metadata: Value,
}

pub(super) fn frame(json: &impl Serialize) -> Bytes {
    let mut v = b"data: ".to_vec();
    serde_json::to_writer(&mut v, json).expect("chunk serialises");
    v.extend_from_slice(b"\n\n");
    Bytes::from(v)
}
