//! What an eval reads from a chat-completions reply, and what it refuses to read: InferenceX's
//! lm-eval raises on a reply it cannot parse, so such a reply is a failed request (retried, then
//! an infrastructure failure), never a wrong answer; and no reply is buffered past what its
//! `max_tokens` allows.

use serde_json::Value;

/// A reply's answer: its text, whether it came from `reasoning_content`, the finish reason and
/// the completion tokens the server reported.
pub type Reply = (String, bool, Option<String>, Option<u64>);

/// Why lm-eval cannot read a reply (each quotes an excerpt of at most 200 characters of it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("the server answered with an error object: {excerpt}")]
    ErrorObject { excerpt: String },
    #[error("the reply has no choices: {excerpt}")]
    NoChoices { excerpt: String },
    #[error("the reply's first choice has no message: {excerpt}")]
    NoMessage { excerpt: String },
    #[error("the reply's content is null and it has no reasoning_content")]
    NullContent,
    #[error("the reply's content is not text: {excerpt}")]
    NotText { excerpt: String },
}

/// The answer text of a chat-completions reply as InferenceX's lm-eval reads it: `content`, or
/// `reasoning_content` when `content` is empty. A reply lm-eval cannot read (an error object
/// with status 200, no choices, no message, a `content` that is not text, `null` with no
/// reasoning) is a failed request, never a wrong answer: it is retried and, past the retries,
/// makes the eval an infrastructure failure.
pub fn reply_text(v: &Value) -> Result<Reply, ReplyError> {
    let excerpt = |x: &Value| x.to_string().chars().take(200).collect::<String>();
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        return Err(ReplyError::ErrorObject { excerpt: excerpt(e) });
    }
    let Some(choice) = v["choices"].as_array().and_then(|c| c.first()) else {
        return Err(ReplyError::NoChoices { excerpt: excerpt(v) });
    };
    let msg = &choice["message"];
    if !msg.is_object() {
        return Err(ReplyError::NoMessage { excerpt: excerpt(choice) });
    }
    let finish = choice["finish_reason"].as_str().map(str::to_string);
    let tokens = v["usage"]["completion_tokens"].as_u64();
    let reasoning = msg["reasoning_content"].as_str().filter(|s| !s.is_empty());
    match (&msg["content"], reasoning) {
        (Value::String(c), _) if !c.is_empty() => Ok((c.clone(), false, finish, tokens)),
        (Value::String(_) | Value::Null, Some(r)) => Ok((r.to_string(), true, finish, tokens)),
        // The model ended at once: an empty answer, scored as such.
        (Value::String(_), None) => Ok((String::new(), false, finish, tokens)),
        (Value::Null, None) => Err(ReplyError::NullContent),
        (other, _) => Err(ReplyError::NotText { excerpt: excerpt(other) }),
    }
}

/// The most bytes one reply may take: `max_tokens` tokens of answer and as many of reasoning,
/// at up to 64 bytes each once JSON-escaped, and 256 KiB for the envelope. A server that sends
/// more is broken; the reply is cut there, never buffered whole.
pub fn reply_limit(max_tokens: u64) -> usize {
    (256 << 10) + (max_tokens as usize).saturating_mul(2 * 64)
}

/// What `samples.jsonl` keeps of an answer: the first 64 KiB (an answer is scored whole first).
pub const SAMPLE_EXCERPT: usize = 64 << 10;

pub fn excerpt_of(text: String) -> String {
    if text.len() <= SAMPLE_EXCERPT {
        return text;
    }
    let mut cut = SAMPLE_EXCERPT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} more bytes not kept]", &text[..cut], text.len() - cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_are_read_as_inferencexs_lm_eval_reads_them() {
        let r = json!({"choices": [{"index": 0, "message": {"content": "#### 3"}, "finish_reason": "stop"}], "usage": {"completion_tokens": 4}});
        assert_eq!(reply_text(&r), Ok(("#### 3".into(), false, Some("stop".into()), Some(4))));
        let r = json!({"choices": [{"message": {"content": "", "reasoning_content": "so #### 3"}}]});
        assert_eq!(reply_text(&r).unwrap().0, "so #### 3");
        assert!(reply_text(&r).unwrap().1);
        let r = json!({"choices": [{"message": {"content": null, "reasoning_content": "#### 4"}}]});
        assert_eq!(reply_text(&r).unwrap().0, "#### 4");
        assert_eq!(reply_text(&json!({"choices": [{"message": {"content": ""}}]})).unwrap().0, "");
    }

    #[test]
    fn replies_lm_eval_cannot_read_are_failures_not_wrong_answers() {
        for (r, says) in [
            (json!({"error": {"message": "boom"}}), "error object"),
            (json!({"error": "x", "choices": [{"message": {"content": "#### 3"}}]}), "error object"),
            (json!({"choices": []}), "no choices"),
            (json!({"object": "chat.completion"}), "no choices"),
            (json!({"choices": [{"text": "#### 3"}]}), "no message"),
            (json!({"choices": [{"message": {"content": null}}]}), "null"),
            (json!({"choices": [{"message": {"content": 3}}]}), "not text"),
            (json!({"choices": [{"message": {"content": ["#### 3"]}}]}), "not text"),
        ] {
            let e = reply_text(&r).unwrap_err().to_string();
            assert!(e.contains(says), "{r}: {e}");
        }
    }

    #[test]
    fn a_kept_answer_is_an_excerpt_cut_on_a_character() {
        let long = "é".repeat(SAMPLE_EXCERPT);
        let kept = excerpt_of(long.clone());
        assert!(kept.len() < SAMPLE_EXCERPT + 64 && kept.ends_with("more bytes not kept]"), "{}", kept.len());
        assert_eq!(excerpt_of("#### 3".into()), "#### 3");
        assert!(reply_limit(16_384) >= 16_384 * 64 && reply_limit(0) > 0);
    }
}
