//! The live client's request bodies, built from reusable pieces.
//!
//! Every AgentX request carries its whole conversation, so a session's turns resend the same
//! messages with one or two new ones at the end (a prompt of 100K tokens is about 400 KB of
//! JSON). Synthesizing and escaping all of it every turn was the largest share of the client's
//! CPU per request; a [`MessageCache`] keeps each message's serialized JSON under its content
//! identity ([`crate::prompt::MessagePlan::key`]) and a body is a list of shared [`Bytes`] pieces,
//! so an unchanged message is neither synthesized nor copied again. The bytes on the wire are the
//! same as serializing the whole body at once (a unit test holds them equal).

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};

use super::dialect::Dialect;
use crate::prompt::{MixHasher, TokenText, TurnPrompt};
use crate::workload::RequestSpec;

/// Serialized messages by content key, bounded in bytes: two generations, the older dropped
/// whole when the newer fills half the budget (a message used since moves to the newer one), so
/// what live conversations keep using stays and finished ones age out.
pub struct MessageCache {
    budget: usize,
    state: Mutex<Generations>,
}

#[derive(Default)]
struct Generations {
    current: HashMap<u64, Bytes, std::hash::BuildHasherDefault<MixHasher>>,
    current_bytes: usize,
    previous: HashMap<u64, Bytes, std::hash::BuildHasherDefault<MixHasher>>,
    hits: u64,
    misses: u64,
}

impl Generations {
    fn insert(&mut self, key: u64, text: Bytes, budget: usize) {
        self.current_bytes += text.len();
        self.current.insert(key, text);
        if self.current_bytes > budget / 2 {
            self.previous = std::mem::take(&mut self.current);
            self.current_bytes = 0;
        }
    }
}

/// Messages larger than this travel as their own piece; smaller ones are copied into their
/// neighbours' (fewer pieces for the writer, and a copy of a few KB is cheaper than a piece).
const OWN_PIECE_BYTES: usize = 16 << 10;

impl MessageCache {
    /// A cache holding at most about `budget` bytes of serialized messages.
    pub fn new(budget: usize) -> Self {
        Self { budget, state: Mutex::new(Generations::default()) }
    }

    fn get(&self, key: u64) -> Option<Bytes> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = g.current.get(&key) {
            let b = b.clone();
            g.hits += 1;
            return Some(b);
        }
        match g.previous.remove(&key) {
            Some(b) => {
                g.hits += 1;
                g.insert(key, b.clone(), self.budget);
                Some(b)
            }
            None => {
                g.misses += 1;
                None
            }
        }
    }

    fn put(&self, key: u64, text: Bytes) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.insert(key, text, self.budget);
    }

    /// (messages reused, messages synthesized) so far.
    pub fn counts(&self) -> (u64, u64) {
        let g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (g.hits, g.misses)
    }
}

impl Default for MessageCache {
    /// 256 MiB: about 600 conversations of 100K tokens; a miss costs only a re-synthesis.
    fn default() -> Self {
        Self::new(256 << 20)
    }
}

/// A request body as shared pieces, in order, and its length in bytes.
#[derive(Debug, Clone, Default)]
pub struct BodyPieces {
    pub parts: Vec<Bytes>,
    pub len: usize,
}

impl BodyPieces {
    fn push_small(&mut self, small: &mut BytesMut, text: &[u8]) {
        small.extend_from_slice(text);
        self.len += text.len();
    }

    fn push_shared(&mut self, small: &mut BytesMut, piece: Bytes) {
        if piece.len() < OWN_PIECE_BYTES {
            return self.push_small(small, &piece);
        }
        if !small.is_empty() {
            self.parts.push(small.split().freeze());
        }
        self.len += piece.len();
        self.parts.push(piece);
    }

    /// The whole body in one buffer.
    pub fn concat(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for p in &self.parts {
            out.extend_from_slice(p);
        }
        out
    }
}

impl BodyPieces {
    /// The body of [`RequestSpec::http_body`] without extra keys, as pieces: messages already in
    /// `cache` are reused, the others synthesized and added to it.
    pub fn of(spec: &RequestSpec, model: &str, vocab: &dyn TokenText, cache: &MessageCache, dialect: &Dialect) -> BodyPieces {
        BodyPieces::build(model, &spec.prompt, spec.max_tokens, vocab, cache, dialect)
    }

    /// The `/v1/chat/completions` body of `prompt` with an output budget of `max_tokens`, in
    /// `dialect` (see [`BodyPieces::of`]).
    pub fn build(
        model: &str,
        prompt: &TurnPrompt,
        max_tokens: u64,
        vocab: &dyn TokenText,
        cache: &MessageCache,
        dialect: &Dialect,
    ) -> BodyPieces {
        let mut out = BodyPieces::default();
        let mut small = BytesMut::with_capacity(256 + model.len());
        let head = format!(r#"{{"model":{},"messages":["#, serde_json::to_string(model).expect("a string serializes"));
        out.push_small(&mut small, head.as_bytes());
        let ids = prompt.conversation.block_ids(prompt.turn as usize);
        for (i, m) in prompt.message_plans(&ids).iter().enumerate() {
            if i > 0 {
                out.push_small(&mut small, b",");
            }
            let piece = match cache.get(m.key) {
                Some(p) => p,
                None => {
                    let piece = Bytes::from(prompt.message_json(m, &ids, vocab));
                    cache.put(m.key, piece.clone());
                    piece
                }
            };
            out.push_shared(&mut small, piece);
        }
        // The rest of the object after `"messages":[...]`.
        let mut tail = Vec::with_capacity(128);
        tail.push(b']');
        dialect.write_tail(&mut tail, max_tokens);
        out.push_small(&mut small, &tail);
        if !small.is_empty() {
            out.parts.push(small.freeze());
        }
        out
    }
}

/// The body of a fixed-length request as `benchmark_serving` writes it: for `/v1/completions`
/// (`--backend vllm`) `model`, `prompt` (the prompt's text), `temperature` 0, `best_of` 1,
/// `max_tokens`, `logprobs` null, `stream`, `stream_options.include_usage`, `ignore_eos`; for
/// chat (`--backend openai-chat`) one user message and `max_completion_tokens`. `dialect`'s extra
/// keys are merged in last, as `extra_body` is there.
pub fn fixed_body(spec: &RequestSpec, model: &str, vocab: &dyn TokenText, dialect: &Dialect) -> Vec<u8> {
    let text = vocab.decode(&spec.prompt.token_ids(vocab));
    let mut body = match spec.api {
        crate::workload::fixed::Api::Completions => serde_json::json!({
            "model": model, "prompt": text, "temperature": 0.0, "best_of": 1, "max_tokens": spec.max_tokens,
            "logprobs": null, "stream": true, "stream_options": {"include_usage": true},
        }),
        crate::workload::fixed::Api::Chat => serde_json::json!({
            "model": model, "messages": [{"role": "user", "content": text}], "temperature": 0.0,
            "max_completion_tokens": spec.max_tokens, "stream": true, "stream_options": {"include_usage": true},
        }),
    };
    if dialect.ignore_eos {
        body["ignore_eos"] = true.into();
    }
    for (k, v) in &dialect.extra_body {
        body[k] = v.clone();
    }
    serde_json::to_vec(&body).expect("a JSON value serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::ChatMessage;

    #[derive(serde::Serialize)]
    struct Whole<'a> {
        model: &'a str,
        messages: &'a [ChatMessage],
        stream: bool,
        max_completion_tokens: u64,
        ignore_eos: bool,
        stream_options: serde_json::Value,
    }

    /// The pieces, with or without reused messages, are byte for byte the body serialized whole:
    /// with a vocabulary that decodes (word list) and one written straight into JSON (the
    /// reference engine's).
    #[test]
    fn pieces_are_the_whole_body_and_reuse_earlier_turns() {
        let words = crate::prompt::WordVocab::default();
        assert!(!words.write_escaped_content(1, 1, &mut Vec::new()));
        pieces_match_the_whole_body(&words);
        let builtin = crate::prompt::TokenizerVocab::builtin();
        let mut probe = Vec::new();
        assert!(builtin.write_escaped_content(7, 64, &mut probe), "the built-in vocabulary is concatenative");
        assert!(!probe.is_empty());
        pieces_match_the_whole_body(&builtin);
    }

    fn pieces_match_the_whole_body(vocab: &dyn TokenText) {
        use crate::workload::{TracePlan, Workload, WorkloadConfig, driver};
        let traces = crate::trace::synth::generate(6, 3);
        let plans: Vec<_> = traces.iter().map(|t| std::sync::Arc::new(TracePlan::build(t, 1).unwrap())).collect();
        let cfg = WorkloadConfig { concurrency: 3, duration_ns: 1_200 * 1_000_000_000, warmup: false, ..Default::default() };
        let mut wl = Workload::new(cfg, plans).unwrap();
        let log = driver::drive(&mut wl, 0, |_| driver::Service { duration_ns: 2_000_000_000, failure: None }, |_, _| {});
        let (cache, tiny) = (MessageCache::default(), MessageCache::new(1));
        for (n, r) in log.records.iter().take(80).enumerate() {
            let messages = r.spec.prompt.messages(vocab);
            let whole = Whole {
                model: "m\"odel",
                messages: &messages,
                stream: true,
                max_completion_tokens: r.spec.max_tokens,
                ignore_eos: true,
                stream_options: serde_json::json!({"include_usage": true}),
            };
            let expect = serde_json::to_vec(&whole).unwrap();
            let pieces = BodyPieces::of(&r.spec, "m\"odel", vocab, &cache, &Dialect::default());
            assert_eq!(pieces.len, expect.len(), "request {n}");
            assert_eq!(pieces.concat(), expect, "request {n}");
            // A cache that keeps almost nothing gives the same bytes.
            assert_eq!(BodyPieces::of(&r.spec, "m\"odel", vocab, &tiny, &Dialect::default()).concat(), expect, "request {n}");
        }
        assert!(log.records.len() >= 40, "only {} requests", log.records.len());
        let (hits, misses) = cache.counts();
        // Later turns resend earlier messages: most are reused.
        assert!(hits > 2 * misses, "reused {hits}, synthesized {misses}");
        assert!(tiny.counts().1 > misses, "the small cache evicts: {:?}", tiny.counts());
    }
}
