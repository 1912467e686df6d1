//! What the client reads from one streamed chat completion chunk, borrowed from its line.

use serde_json::Value;

/// What the client reads from one streamed chunk.
pub(super) struct ChunkInfo {
    /// Non-empty content or reasoning text.
    pub(super) has_text: bool,
    /// A choice, whatever its text (`choices` is not empty): what `benchmark_serving` counts as
    /// an output (a finish chunk with empty text, a role chunk, a held-back partial character).
    pub(super) has_choice: bool,
    /// The first choice finished on its output budget (`finish_reason: "length"`).
    pub(super) length_finish: bool,
    pub(super) usage: Option<UsageView>,
    /// A mid-stream error event: message and code.
    pub(super) error: Option<(String, Option<u16>)>,
}

/// The parts of a chat completion chunk the client reads, borrowed from the line (a long reply
/// is hundreds of chunks; a full JSON tree per chunk was a visible share of the client's CPU).
#[derive(serde::Deserialize)]
struct ChunkView<'a> {
    #[serde(default, borrow)]
    choices: Option<FirstChoice<'a>>,
    #[serde(default)]
    pub(super) usage: Option<UsageView>,
    #[serde(default)]
    error: Option<Value>,
}

/// The first of a chunk's `choices` (the client asks for one), the others skipped: no vector
/// allocated per streamed token.
struct FirstChoice<'a>(Option<ChoiceView<'a>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<ChoiceView<'a>>()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(FirstChoice(first))
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct ChoiceView<'a> {
    #[serde(default, borrow)]
    delta: Option<DeltaView<'a>>,
    /// A text completion's chunk (`/v1/completions`).
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct DeltaView<'a> {
    #[serde(default, borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
pub(super) struct UsageView {
    #[serde(default)]
    pub(super) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(super) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<DetailsView>,
}

#[derive(serde::Deserialize)]
pub(super) struct DetailsView {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

impl ChunkInfo {
    /// `None` for a line that is not JSON. Chunks of unexpected shapes (a number where text
    /// should be) are read leniently through a JSON tree.
    #[cfg(test)]
    pub(super) fn parse(data: impl AsRef<[u8]>) -> Option<ChunkInfo> {
        Self::parse_into(data, None)
    }

    /// [`ChunkInfo::parse`], appending the chunk's content and reasoning text to `text` when
    /// given (outputs to count when the server sends no usage).
    pub(super) fn parse_into(data: impl AsRef<[u8]>, mut text: Option<&mut String>) -> Option<ChunkInfo> {
        let data = data.as_ref();
        let error = |e: &Value| {
            let msg = e["message"].as_str().map(str::to_string).unwrap_or_else(|| e.to_string());
            (msg, e["code"].as_u64().map(|c| c as u16))
        };
        if let Ok(v) = serde_json::from_slice::<ChunkView>(data) {
            let nonempty = |s: &Option<std::borrow::Cow<str>>| s.as_deref().is_some_and(|s| !s.is_empty());
            let choice = v.choices.as_ref().and_then(|c| c.0.as_ref());
            let delta = choice.and_then(|c| c.delta.as_ref());
            let has_delta = delta.is_some_and(|d| nonempty(&d.content) || nonempty(&d.reasoning_content) || nonempty(&d.reasoning));
            let completion = choice.and_then(|c| c.text.as_ref()).filter(|t| !t.is_empty());
            let has_text = has_delta || completion.is_some();
            if let (Some(out), Some(d), true) = (text.as_deref_mut(), delta, has_delta) {
                for part in [&d.reasoning_content, &d.reasoning, &d.content].into_iter().flatten() {
                    out.push_str(part);
                }
            }
            if let (Some(out), Some(t)) = (text.as_deref_mut(), completion) {
                out.push_str(t);
            }
            let length_finish = choice.and_then(|c| c.finish_reason.as_deref()) == Some("length");
            return Some(ChunkInfo {
                has_text,
                has_choice: choice.is_some(),
                length_finish,
                usage: v.usage,
                error: v.error.as_ref().filter(|e| !e.is_null()).map(error),
            });
        }
        let v: Value = serde_json::from_slice(data).ok()?;
        let delta = &v["choices"][0]["delta"];
        let u = v.get("usage").filter(|u| u.is_object());
        let mut parts: Vec<&str> = ["reasoning_content", "reasoning", "content"].iter().filter_map(|k| delta[*k].as_str()).collect();
        parts.extend(v["choices"][0]["text"].as_str());
        if let Some(out) = text {
            parts.iter().for_each(|p| out.push_str(p));
        }
        Some(ChunkInfo {
            has_text: parts.iter().any(|s| !s.is_empty()),
            has_choice: v["choices"][0].is_object(),
            length_finish: v["choices"][0]["finish_reason"].as_str() == Some("length"),
            usage: u.map(|u| UsageView {
                prompt_tokens: u["prompt_tokens"].as_u64(),
                completion_tokens: u["completion_tokens"].as_u64(),
                prompt_tokens_details: Some(DetailsView { cached_tokens: u["prompt_tokens_details"]["cached_tokens"].as_u64() }),
            }),
            error: v.get("error").filter(|e| !e.is_null()).map(error),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_read_for_text_usage_and_errors() {
        let c = ChunkInfo::parse(
            r#"{"id":"a","choices":[{"index":0,"delta":{"reasoning_content":null,"content":"Hi \"x\"\n"},"finish_reason":null}]}"#,
        )
        .unwrap();
        assert!(c.has_text && c.usage.is_none() && c.error.is_none());
        let c = ChunkInfo::parse(r#"{"choices":[{"delta":{"reasoning_content":"think","content":null}}]}"#).unwrap();
        assert!(c.has_text);
        // The role chunk and the finish chunk carry no text.
        assert!(!ChunkInfo::parse(r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap().has_text);
        assert!(!ChunkInfo::parse(r#"{"choices":[{"delta":{},"finish_reason":"length"}],"usage":null}"#).unwrap().has_text);
        let c = ChunkInfo::parse(
            r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":7,"total_tokens":127,"prompt_tokens_details":{"cached_tokens":64}}}"#,
        )
        .unwrap();
        let u = c.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.prompt_tokens_details.and_then(|d| d.cached_tokens)),
            (Some(120), Some(7), Some(64))
        );
        let c = ChunkInfo::parse(r#"{"object":"error","error":{"message":"out of memory","code":503}}"#).unwrap();
        assert_eq!(c.error, Some(("out of memory".to_string(), Some(503))));
        // An odd shape is read leniently: a number for text is no text, the usage still counts.
        let c = ChunkInfo::parse(r#"{"choices":null,"usage":{"prompt_tokens":"12","completion_tokens":3}}"#).unwrap();
        assert!(!c.has_text);
        assert_eq!(c.usage.map(|u| (u.prompt_tokens, u.completion_tokens)), Some((None, Some(3))));
        assert!(ChunkInfo::parse("not json").is_none());
        // The first choice is read, later ones skipped; no choice is no text.
        assert!(
            ChunkInfo::parse(r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":""}},{"x":[1,{"y":2}]}]}"#).unwrap().has_text
        );
        assert!(!ChunkInfo::parse(r#"{"choices":[{"delta":{"content":""}},{"delta":{"content":"b"}}]}"#).unwrap().has_text);
        assert!(!ChunkInfo::parse(r#"{"choices":[],"usage":null}"#).unwrap().has_text);
    }

    /// A choice is an output for `benchmark_serving` whatever its text: llama.cpp's finish chunk
    /// (`"text": ""`), SGLang's role chunk; a usage chunk's empty `choices` is none.
    #[test]
    fn a_choice_is_seen_whatever_its_text() {
        for (line, text, choice) in [
            (r#"{"choices":[{"text":" toddler","finish_reason":null}]}"#, true, true),
            (r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}]}"#, false, true),
            (r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#, false, true),
            (r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":25}}"#, false, false),
            (r#"{"choices":null,"usage":null}"#, false, false),
            // The lenient reading: text of an odd type is no text, the choice is still one.
            (r#"{"choices":[{"text":7}],"usage":{"prompt_tokens":"3"}}"#, false, true),
            (r#"{"choices":"none","usage":{"prompt_tokens":"3"}}"#, false, false),
        ] {
            let c = ChunkInfo::parse(line).unwrap();
            assert_eq!((c.has_text, c.has_choice), (text, choice), "{line}");
        }
    }

    #[test]
    fn text_is_collected_on_request_and_a_length_finish_is_seen() {
        let mut text = String::new();
        for line in [
            r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"th"}}]}"#,
            r#"{"choices":[{"delta":{"content":"H\u00e9 "}}]}"#,
            r#"{"choices":[{"delta":{"content":7}}]}"#,
            r#"{"choices":[{"delta":{"content":"!"},"finish_reason":null}]}"#,
        ] {
            let c = ChunkInfo::parse_into(line, Some(&mut text)).unwrap();
            assert!(!c.length_finish);
        }
        assert_eq!(text, "thHé !");
        assert!(ChunkInfo::parse(r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#).unwrap().length_finish);
        assert!(!ChunkInfo::parse(r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#).unwrap().length_finish);
    }
}
