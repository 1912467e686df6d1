//! Incremental chat encoding: each rendered message's ids are memoised, so
//! re-encoding a conversation whose earlier messages were seen costs a hash and a
//! compare of the old messages plus the encoding of the new ones.
//!
//! Messages are keyed by a hash of their role, length and ends (O(1) each); correctness
//! does not rest on the key: a hit is used only when the stored message equals the
//! request's message byte for byte, and a message's ids depend on that
//! message alone (see [`super::template`]). A truncated conversation hits on the
//! messages it keeps; a diverging one misses from the first changed message on and
//! re-encodes exactly those. Memory is bounded by a byte budget with least-recently
//! used eviction.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use super::template::{ChatMessage, ChatOptions, Piece, Role, TemplateFamily};
use super::{TokenizeError, Tokenizer};

/// Ids of a templated conversation and how much of it came from the memo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedChat {
    pub ids: Vec<u32>,
    /// Messages (and the tools prefix) served from the memo.
    pub reused: usize,
    /// Messages (and the tools prefix) encoded by this call.
    pub encoded: usize,
}

/// Memo counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncoderStats {
    pub entries: usize,
    pub bytes: usize,
    pub budget_bytes: usize,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

/// Keys are already hashes; do not hash them again.
#[derive(Default)]
struct IdentityHasher(u64);
impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    ToolsPrefix,
}

struct Entry {
    kind: Kind,
    msg: Arc<ChatMessage>,
    ids: Arc<[u32]>,
    tick: u64,
    bytes: usize,
}

#[derive(Default)]
struct Memo {
    map: HashMap<u64, Entry, BuildHasherDefault<IdentityHasher>>,
    bytes: usize,
    tick: u64,
    hits: u64,
    misses: u64,
    evictions: u64,
}

/// Per-entry bookkeeping beyond the text and ids (map slot, Arc headers).
const ENTRY_OVERHEAD: usize = 128;

/// Messages → prompt ids through a model family's template, with the memo.
pub struct ChatEncoder {
    tok: Arc<Tokenizer>,
    family: TemplateFamily,
    markers: HashMap<&'static str, u32>,
    budget: usize,
    memo: Mutex<Memo>,
}

impl std::fmt::Debug for ChatEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatEncoder").field("tokenizer", &self.tok).field("family", &self.family).field("budget", &self.budget).finish()
    }
}

/// A fast 64-bit hash (four independent multiply-rotate lanes).
fn hash_bytes(seed: u64, b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut lanes =
        [seed ^ 0x243F_6A88_85A3_08D3, seed ^ 0x1319_8A2E_0370_7344, seed ^ 0xA409_3822_299F_31D0, seed ^ 0x082E_FA98_EC4E_6C89];
    let mut chunks = b.chunks_exact(32);
    for c in &mut chunks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let v = u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
            *lane = (*lane ^ v).wrapping_mul(K).rotate_left(31);
        }
    }
    let mut h = lanes[0] ^ lanes[1].rotate_left(17) ^ lanes[2].rotate_left(34) ^ lanes[3].rotate_left(51);
    let rest = chunks.remainder();
    let mut words = rest.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(K).rotate_left(31);
    }
    let mut tail = 0u64;
    for (i, &x) in words.remainder().iter().enumerate() {
        tail |= (x as u64) << (8 * i);
    }
    h = (h ^ tail ^ (b.len() as u64).rotate_left(48)).wrapping_mul(K);
    // SplitMix64 finaliser.
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// Bytes of each end of a long text that go into its key.
const SAMPLE: usize = 512;

/// Hash of a text's length and its first and last [`SAMPLE`] bytes: O(1) per message,
/// so a hit costs one pass over the text (the equality check), not two. Texts that
/// differ only in the middle share a key; the equality check turns that into a miss.
fn sampled(seed: u64, b: &[u8]) -> u64 {
    let seed = seed ^ (b.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    if b.len() <= 2 * SAMPLE {
        hash_bytes(seed, b)
    } else {
        let h = hash_bytes(seed, &b[..SAMPLE]);
        hash_bytes(h, &b[b.len() - SAMPLE..])
    }
}

fn message_key(kind: Kind, m: &ChatMessage) -> u64 {
    let tag = match kind {
        Kind::Message => 1 + m.role as u64,
        Kind::ToolsPrefix => 100,
    };
    let mut h = sampled(tag, m.content.as_bytes());
    if let Some(r) = &m.reasoning_content {
        h = sampled(h ^ 0x5555, r.as_bytes());
    }
    for c in &m.tool_calls {
        h = sampled(h ^ 0x7777, c.name.as_bytes());
        h = sampled(h, c.arguments.as_bytes());
    }
    h
}

impl ChatEncoder {
    /// An encoder for `family` over `tok`, memoising up to `budget_bytes` of messages
    /// and ids. Fails if the vocabulary lacks a marker the template needs.
    pub fn new(tok: Arc<Tokenizer>, family: TemplateFamily, budget_bytes: usize) -> Result<ChatEncoder, TokenizeError> {
        let mut markers = HashMap::new();
        for &m in family.markers() {
            let id = tok.marker_id(m).ok_or_else(|| TokenizeError::MissingMarker {
                family,
                marker: m.to_string(),
                source_name: tok.source().to_string(),
            })?;
            markers.insert(m, id);
        }
        Ok(ChatEncoder { tok, family, markers, budget: budget_bytes, memo: Mutex::new(Memo::default()) })
    }

    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        &self.tok
    }

    pub fn family(&self) -> TemplateFamily {
        self.family
    }

    fn encode_pieces(&self, pieces: &[Piece<'_>], out: &mut Vec<u32>) -> Result<(), TokenizeError> {
        for p in pieces {
            match p {
                Piece::Marker(m) => out.push(self.markers[m]),
                Piece::Text(t) => out.extend(self.tok.encode(t)?),
            }
        }
        Ok(())
    }

    fn render_one(&self, kind: Kind, m: &ChatMessage) -> Result<Vec<u32>, TokenizeError> {
        let mut ids = Vec::new();
        match kind {
            Kind::Message => self.encode_pieces(&self.family.message(m), &mut ids)?,
            Kind::ToolsPrefix => {
                let opts = ChatOptions { thinking: false, tools: Some(m.content.clone()) };
                self.encode_pieces(&self.family.prefix(&opts), &mut ids)?
            }
        }
        Ok(ids)
    }

    /// Encodes without the memo: the reference the memoised path must equal.
    pub fn encode_uncached(&self, messages: &[ChatMessage], opts: &ChatOptions) -> Result<Vec<u32>, TokenizeError> {
        let mut ids = Vec::new();
        self.encode_pieces(&self.family.prefix(opts), &mut ids)?;
        for m in messages {
            self.encode_pieces(&self.family.message(m), &mut ids)?;
        }
        self.encode_pieces(&self.family.generation_prompt(opts), &mut ids)?;
        Ok(ids)
    }

    /// Encodes a conversation, reusing memoised messages.
    pub fn encode(&self, messages: &[ChatMessage], opts: &ChatOptions) -> Result<EncodedChat, TokenizeError> {
        // The tools prefix is memoised like a message (agent tool schemas are large).
        let tools_msg = opts.tools.as_ref().filter(|t| !t.is_empty()).map(|t| ChatMessage::new(Role::System, t.clone()));
        let items: Vec<(Kind, &ChatMessage)> =
            tools_msg.iter().map(|m| (Kind::ToolsPrefix, m)).chain(messages.iter().map(|m| (Kind::Message, m))).collect();
        let keys: Vec<u64> = items.iter().map(|(k, m)| message_key(*k, m)).collect();

        let mut parts: Vec<Option<Arc<[u32]>>> = vec![None; items.len()];
        {
            let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            memo.tick += 1;
            let tick = memo.tick;
            let mut hits = 0;
            for (i, ((kind, m), key)) in items.iter().zip(&keys).enumerate() {
                if let Some(e) = memo.map.get_mut(key)
                    && e.kind == *kind
                    && *e.msg == **m
                {
                    e.tick = tick;
                    parts[i] = Some(e.ids.clone());
                    hits += 1;
                }
            }
            memo.hits += hits as u64;
            memo.misses += (items.len() - hits) as u64;
        }

        let mut fresh = Vec::new();
        for (i, (kind, m)) in items.iter().enumerate() {
            if parts[i].is_none() {
                let ids: Arc<[u32]> = self.render_one(*kind, m)?.into();
                parts[i] = Some(ids.clone());
                fresh.push((i, ids));
            }
        }
        let encoded = fresh.len();
        if !fresh.is_empty() {
            let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            let tick = memo.tick;
            for (i, ids) in fresh {
                let (kind, m) = items[i];
                let bytes = ids.len() * 4 + m.text_len() + ENTRY_OVERHEAD;
                if bytes > self.budget / 2 {
                    continue;
                }
                let entry = Entry { kind, msg: Arc::new(m.clone()), ids, tick, bytes };
                if let Some(old) = memo.map.insert(keys[i], entry) {
                    memo.bytes -= old.bytes;
                }
                memo.bytes += bytes;
            }
            if memo.bytes > self.budget {
                self.evict(&mut memo);
            }
        }

        let prefix_ids = if tools_msg.is_some() {
            Vec::new()
        } else {
            let mut v = Vec::new();
            self.encode_pieces(&self.family.prefix(opts), &mut v)?;
            v
        };
        let mut tail = Vec::new();
        self.encode_pieces(&self.family.generation_prompt(opts), &mut tail)?;
        let total = prefix_ids.len() + tail.len() + parts.iter().map(|p| p.as_ref().map_or(0, |p| p.len())).sum::<usize>();
        let mut ids = Vec::with_capacity(total);
        ids.extend_from_slice(&prefix_ids);
        for p in parts.iter().flatten() {
            ids.extend_from_slice(p);
        }
        ids.extend_from_slice(&tail);
        Ok(EncodedChat { ids, reused: items.len() - encoded, encoded })
    }

    /// Drops least-recently-used entries down to 3/4 of the budget (hysteresis so
    /// a full memo does not sort on every request).
    fn evict(&self, memo: &mut Memo) {
        let target = self.budget / 4 * 3;
        let mut order: Vec<(u64, u64)> = memo.map.iter().map(|(k, e)| (e.tick, *k)).collect();
        order.sort_unstable();
        for (_, key) in order {
            if memo.bytes <= target {
                break;
            }
            if let Some(e) = memo.map.remove(&key) {
                memo.bytes -= e.bytes;
                memo.evictions += 1;
            }
        }
    }

    pub fn stats(&self) -> EncoderStats {
        let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        EncoderStats {
            entries: memo.map.len(),
            bytes: memo.bytes,
            budget_bytes: self.budget,
            hits: memo.hits,
            misses: memo.misses,
            evictions: memo.evictions,
        }
    }

    /// Empties the memo.
    pub fn clear(&self) {
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        memo.map.clear();
        memo.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::builtin;
    use crate::tokenize::{Backend, deepseek_v4_tokenizer_path, shared_data_dir};
    use proptest::prelude::*;

    fn enc(budget: usize) -> ChatEncoder {
        ChatEncoder::new(Arc::new(Tokenizer::builtin()), TemplateFamily::DeepSeekV4, budget).unwrap()
    }

    fn convo(n: usize, seed: u64) -> Vec<ChatMessage> {
        let mut x = seed;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 17
        };
        (0..n)
            .map(|i| {
                let role = [Role::User, Role::Assistant, Role::Tool][i % 3];
                let len = 20 + (next() % 200) as usize;
                let (text, _) = builtin::synthesize(len, &mut next);
                ChatMessage::new(role, format!("msg {i}:{text}"))
            })
            .collect()
    }

    #[test]
    fn memoised_equals_uncached_and_reuses() {
        let e = enc(64 << 20);
        let opts = ChatOptions { thinking: true, tools: Some("[{\"name\":\"read\"}]".into()) };
        let mut msgs = convo(30, 1);
        let first = e.encode(&msgs, &opts).unwrap();
        assert_eq!(first.ids, e.encode_uncached(&msgs, &opts).unwrap());
        assert_eq!((first.reused, first.encoded), (0, 31));
        msgs.push(ChatMessage::new(Role::User, "one more"));
        let second = e.encode(&msgs, &opts).unwrap();
        assert_eq!(second.ids, e.encode_uncached(&msgs, &opts).unwrap());
        assert_eq!((second.reused, second.encoded), (31, 1));
        // The previous prompt is a prefix of the new one minus the generation prompt.
        assert_eq!(&second.ids[..first.ids.len() - 2], &first.ids[..first.ids.len() - 2]);
    }

    #[test]
    fn truncation_and_divergence_are_correct() {
        let e = enc(64 << 20);
        let opts = ChatOptions::default();
        let msgs = convo(20, 2);
        e.encode(&msgs, &opts).unwrap();
        // Truncated: all kept messages hit.
        let short = &msgs[..7];
        let r = e.encode(short, &opts).unwrap();
        assert_eq!(r.ids, e.encode_uncached(short, &opts).unwrap());
        assert_eq!((r.reused, r.encoded), (7, 0));
        // Diverged at message 10 (one byte changed): exactly that message re-encodes.
        let mut div = msgs.clone();
        div[10].content.push('!');
        let r = e.encode(&div, &opts).unwrap();
        assert_eq!(r.ids, e.encode_uncached(&div, &opts).unwrap());
        assert_eq!(r.encoded, 1);
        // A change in the middle of a long message (same length, same ends) misses.
        let mut mid = msgs.clone();
        let long = "x".repeat(5000);
        mid[4].content = format!("{long}a{long}");
        e.encode(&mid, &opts).unwrap();
        mid[4].content = format!("{long}b{long}");
        let r = e.encode(&mid, &opts).unwrap();
        assert_eq!(r.ids, e.encode_uncached(&mid, &opts).unwrap());
        assert_eq!(r.encoded, 1);
        // Same content under another role is a different message.
        let mut swapped = msgs.clone();
        swapped[3].role = Role::System;
        let r = e.encode(&swapped, &opts).unwrap();
        assert_eq!(r.ids, e.encode_uncached(&swapped, &opts).unwrap());
        assert_eq!(r.encoded, 1);
    }

    #[test]
    fn memory_stays_within_budget() {
        let budget = 256 << 10;
        let e = enc(budget);
        for s in 0..40 {
            let msgs = convo(30, 100 + s);
            let r = e.encode(&msgs, &ChatOptions::default()).unwrap();
            assert_eq!(r.ids, e.encode_uncached(&msgs, &ChatOptions::default()).unwrap());
            assert!(e.stats().bytes <= budget, "{:?}", e.stats());
        }
        assert!(e.stats().evictions > 0);
    }

    #[test]
    fn missing_markers_are_reported() {
        // The built-in vocabulary has every family's markers.
        for f in [TemplateFamily::DeepSeekV4, TemplateFamily::DeepSeekV3, TemplateFamily::ChatMl] {
            ChatEncoder::new(Arc::new(Tokenizer::builtin()), f, 1 << 20).unwrap();
        }
    }

    #[test]
    fn hash_depends_on_every_byte() {
        let base = vec![7u8; 100];
        let h = hash_bytes(0, &base);
        for i in 0..base.len() {
            let mut b = base.clone();
            b[i] ^= 1;
            assert_ne!(hash_bytes(0, &b), h, "byte {i}");
        }
        assert_ne!(hash_bytes(0, &base[..99]), h);
    }

    proptest! {
        #[test]
        fn any_edit_sequence_matches_uncached(
            edits in proptest::collection::vec((0usize..12, 0u8..4), 1..12)
        ) {
            let e = enc(1 << 16);
            let mut msgs = convo(12, 9);
            for (at, op) in edits {
                match op {
                    0 => msgs.truncate(at.max(1)),
                    1 => msgs.push(ChatMessage::new(Role::User, format!("new {at}"))),
                    2 => if let Some(m) = msgs.get_mut(at) { m.content.insert(0, 'x') },
                    _ => if let Some(m) = msgs.get_mut(at) { m.reasoning_content = Some("r".into()) },
                }
                let opts = ChatOptions { thinking: op % 2 == 0, tools: None };
                let r = e.encode(&msgs, &opts).unwrap();
                prop_assert_eq!(r.ids, e.encode_uncached(&msgs, &opts).unwrap());
            }
        }
    }

    #[test]
    #[ignore = "needs the shared DeepSeek-V4 tokenizer (SWEEP_SHARED_DATA)"]
    fn real_tokenizer_piecewise_equals_whole_string() {
        let Some(path) = deepseek_v4_tokenizer_path() else {
            eprintln!("shared data absent: no DeepSeek-V4 tokenizer under {}; skipping", shared_data_dir().display());
            return;
        };
        for backend in [Backend::Fastokens, Backend::HuggingFace] {
            let tok = Arc::new(Tokenizer::from_path(&path, backend).unwrap());
            let e = ChatEncoder::new(tok.clone(), TemplateFamily::DeepSeekV4, 64 << 20).unwrap();
            let mut call = ChatMessage::new(Role::Assistant, "Let me look.\n");
            call.tool_calls.push(super::super::ToolCall { name: "read_file".into(), arguments: "{\"path\": \"src/main.rs\"}".into() });
            let msgs = vec![
                ChatMessage::new(Role::System, "You are a coding agent. Use tools.\n\n"),
                ChatMessage::new(Role::User, "Fix the bug in main.rs — it panics on 日本語 input!"),
                call,
                ChatMessage::new(Role::Tool, "fn main() {\n    let x: Vec<u8> = vec![1, 2, 3];\n}\n"),
                ChatMessage::new(Role::Assistant, " Done.  \n\n"),
                ChatMessage::new(Role::User, "   thanks\r\n"),
            ];
            for thinking in [false, true] {
                let opts = ChatOptions { thinking, tools: Some("## Tools\n[{\"name\": \"read_file\"}]\n".into()) };
                let whole = tok.encode(&TemplateFamily::DeepSeekV4.render(&msgs, &opts)).unwrap();
                assert_eq!(e.encode(&msgs, &opts).unwrap().ids, whole, "{backend}");
            }
        }
    }
}
