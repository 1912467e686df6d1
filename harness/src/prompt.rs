//! Prompt synthesis from hash ids (AgentX §2), without materialising tokens on the hot path.
//!
//! A [`Prompt`] is a compact description — a conversation plan shared by every request of that
//! conversation, a turn index and the play's cache-bust marker — from which one can produce, on
//! demand:
//! - [`Prompt::page_hashes`]: chained content hashes of each full 64-token page (what a simulated
//!   engine's prefix cache needs), in O(pages) with no token vector;
//! - [`Prompt::token_ids`]: the exact token ids (for an engine that wants them);
//! - [`Prompt::messages`]: chat messages as text for HTTP, through a [`TokenText`] vocabulary.
//!
//! Token stream of one request: the system blocks, then the marker (`[rid:<12 hex>]\n\n`, on the
//! first user message), then the remaining blocks named by `hash_ids`, then deterministic filler
//! blocks when `hash_ids` is shorter than the input, then a partial tail of `in mod block_size`
//! tokens. Blocks, filler and tail total exactly the recorded `in`; the marker adds
//! [`MARKER_TOKENS`] in the token-id form (a server counts whatever its tokenizer makes of it).
//!
//! Every block's content is a pure function of (seed, trace id, hash id): identical hash ids give
//! identical tokens and bytes, so prefix sharing on the wire matches the recording.

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::trace::Request;

/// Page size of the engines' KV cache (tokens); page hashes are computed at this granularity.
pub const PAGE_TOKENS: usize = 64;
/// Tokens the cache-bust marker occupies in the built-in vocabulary: `[rid:`, four 3-hex tokens, `]\n\n`.
pub const MARKER_TOKENS: usize = 6;
/// System prefix assumed when the caller does not know the setup prefix (`None`): the median
/// tools + system size of the real AgentX corpus (14,938 tokens), rounded down to whole blocks.
/// A trace that declares 0 / 0 (as the latest captures do) has no system message: the reference
/// replay never invents one.
pub const DEFAULT_SYSTEM_TOKENS: u64 = 14_912;

/// Root of every page-hash chain.
const CHAIN_ROOT: u64 = 0x5357_4545_505f_4b56;

/// splitmix64 finaliser: a fast, well-mixed 64-bit hash step.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline]
fn combine(a: u64, b: u64) -> u64 {
    mix64(a ^ b.rotate_left(17).wrapping_mul(0x2545_F491_4F6C_DD1D))
}

/// First 8 bytes of SHA-256 over the parts (stable keys from strings and numbers).
pub fn sha_key(parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

// ---------------------------------------------------------------------------------------------
// Vocabulary

/// Token ids ↔ text for one message. The built-in [`WordVocab`] is the default; an engine tokenizer
/// (built-in vocabulary, `tokenizer.json`) can implement this too.
pub trait TokenText: Send + Sync {
    /// Number of ids content tokens are drawn from.
    fn content_vocab(&self) -> u32;
    /// The content token for a uniformly random 64-bit value.
    fn content_token(&self, r: u64) -> u32 {
        (r % u64::from(self.content_vocab())) as u32
    }
    /// Token ids of the cache-bust marker `[rid:<hex12>]\n\n`.
    fn marker_ids(&self, hex12: &str) -> Vec<u32>;
    /// Text of a run of token ids (one message's content).
    fn decode(&self, ids: &[u32]) -> String;
    /// Token ids of a message's text (inverse of `decode` for text it produced).
    fn encode(&self, text: &str) -> Result<Vec<u32>, String>;
    /// Appends the JSON-escaped text of the `len` content tokens drawn from `key` (the tokens
    /// [`push_atom`] draws) to `out`, when this vocabulary's text is the concatenation of its
    /// tokens' texts; `false` (nothing written) when it is not, and the caller decodes.
    fn write_escaped_content(&self, key: u64, len: u32, out: &mut Vec<u8>) -> bool {
        let _ = (key, len, out);
        false
    }
}

/// Synthesis with the target's own tokenizer (AgentX §2: the target model's tokenizer): content
/// tokens are drawn from its alphabet (`" "` + letters tokens that encode back to themselves), so
/// a prompt of N content ids is N tokens on the server too. The reference engine's built-in
/// vocabulary and `tokenizer.json` files both work.
pub struct TokenizerVocab {
    tok: engine::tokenize::Tokenizer,
    /// The text of every alphabet id, indexed by id, when the decoder is concatenative (checked
    /// at construction): synthesis then joins pieces instead of running the decoder over every
    /// prompt token, which was most of the live client's CPU per request.
    pieces: Option<Pieces>,
    /// The JSON-escaped text of each alphabet token, by alphabet index, when the decoder is
    /// concatenative: a new message is then written straight into its JSON string, with no id
    /// vector, decoded string or escaping pass.
    escaped: Option<Escaped>,
    /// Marker ids by marker: every request of a play carries the same marker; encode it once.
    markers: std::sync::Mutex<std::collections::HashMap<String, Vec<u32>>>,
}

impl TokenizerVocab {
    pub fn new(tok: engine::tokenize::Tokenizer) -> Self {
        let pieces = Self::piece_table(&tok);
        let escaped = pieces.as_ref().map(|p| Escaped::new(p, tok.alphabet()));
        // The built-in vocabulary's decoder is a table lookup already.
        let pieces = pieces.filter(|_| tok.source() != "builtin");
        Self { tok, pieces, escaped, markers: Default::default() }
    }

    /// Per-id text, if joining it reproduces the decoder on a sample mixing alphabet ids with a
    /// marker (decoders that strip, merge or add spaces are not concatenative).
    fn piece_table(tok: &engine::tokenize::Tokenizer) -> Option<Pieces> {
        let pieces = Pieces::new(tok)?;
        let alphabet = tok.alphabet();
        let mut r = 0x5EED_u64;
        let mut sample: Vec<u32> = tok.encode("[rid:0a1b2c3d4e5f]\n\n").ok()?;
        sample.extend((0..512).map(|_| {
            r = mix64(r.wrapping_add(1));
            alphabet[(r % alphabet.len() as u64) as usize]
        }));
        (pieces.join(tok, &sample) == tok.decode(&sample)).then_some(pieces)
    }

    /// The reference engine's built-in vocabulary (what `sweep engine serve` uses without
    /// `--tokenizer-path`).
    pub fn builtin() -> Self {
        Self::new(engine::tokenize::Tokenizer::builtin())
    }
    /// A `tokenizer.json` (or a directory holding one), read with HuggingFace `tokenizers`: the
    /// client only encodes short markers, where fastokens (built for long prompts) pays a
    /// per-call cache of megabytes, measured as a third of the client's CPU.
    pub fn from_path(path: &std::path::Path) -> Result<Self, String> {
        engine::tokenize::Tokenizer::from_path(path, engine::tokenize::Backend::HuggingFace).map(Self::new).map_err(|e| e.to_string())
    }
    /// Where the vocabulary came from (`builtin` or the file).
    pub fn source(&self) -> &str {
        self.tok.source()
    }
    /// Whether synthesis joins per-id pieces rather than running the decoder.
    pub fn joins_pieces(&self) -> bool {
        self.pieces.is_some()
    }
    /// The tokenizer's own decoder (the reference for [`TokenText::decode`]).
    pub fn decode_with_decoder(&self, ids: &[u32]) -> String {
        self.tok.decode(ids)
    }
}

impl TokenText for TokenizerVocab {
    fn content_vocab(&self) -> u32 {
        self.tok.alphabet().len() as u32
    }
    fn content_token(&self, r: u64) -> u32 {
        let a = self.tok.alphabet();
        a[(r % a.len() as u64) as usize]
    }
    fn marker_ids(&self, hex12: &str) -> Vec<u32> {
        let mut memo = self.markers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ids) = memo.get(hex12) {
            return ids.clone();
        }
        // The server counts whatever its tokenizer makes of the marker; a few tokens, not always
        // exactly MARKER_TOKENS.
        let ids = self.tok.encode(&format!("[rid:{hex12}]\n\n")).unwrap_or_default();
        if memo.len() >= 65_536 {
            memo.clear();
        }
        memo.insert(hex12.to_string(), ids.clone());
        ids
    }
    fn decode(&self, ids: &[u32]) -> String {
        match &self.pieces {
            Some(p) => p.join(&self.tok, ids),
            None => self.tok.decode(ids),
        }
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tok.encode(text).map_err(|e| e.to_string())
    }
    fn write_escaped_content(&self, key: u64, len: u32, out: &mut Vec<u8>) -> bool {
        let Some(e) = &self.escaped else { return false };
        // As `push_atom` and `content_token` draw the token: alphabet index r mod n.
        let draw = |i: u32| (mix64(key ^ (u64::from(i) << 40) ^ 0xB10C) % e.n) as usize;
        // Room for whole slots: no regrowth (and copy) mid-message; the caller trims what is left.
        out.reserve(len as usize * SLOT + SLOT);
        for i in 0..len {
            let k = draw(i);
            let (bytes, l) = &e.slots[k];
            if *l as usize <= SLOT {
                // A whole slot (one 16-byte move), then back to the piece's end.
                let at = out.len();
                out.extend_from_slice(bytes);
                out.truncate(at + *l as usize);
            } else {
                let (start, l) = e.pieces.span[k];
                out.extend_from_slice(&e.pieces.text.as_bytes()[start as usize..(start + l) as usize]);
            }
        }
        true
    }
}

/// Per-id text of a vocabulary's alphabet, in one buffer (cache-friendly: synthesis looks up
/// every prompt token).
struct Pieces {
    text: String,
    /// (start, len) in `text` by id; len `u32::MAX` for ids outside the alphabet.
    span: Vec<(u32, u32)>,
}

impl Pieces {
    fn new(tok: &engine::tokenize::Tokenizer) -> Option<Pieces> {
        let alphabet = tok.alphabet();
        let max = *alphabet.iter().max()? as usize;
        let mut p = Pieces { text: String::new(), span: vec![(0, u32::MAX); max + 1] };
        for &id in alphabet {
            let t = tok.decode(&[id]);
            p.span[id as usize] = (p.text.len() as u32, t.len() as u32);
            p.text.push_str(&t);
        }
        Some(p)
    }

    fn get(&self, id: u32) -> Option<&str> {
        let &(start, len) = self.span.get(id as usize)?;
        (len != u32::MAX).then(|| &self.text[start as usize..(start + len) as usize])
    }

    /// `ids` as text: alphabet ids join their pieces; any other run (the marker) goes through the decoder.
    fn join(&self, tok: &engine::tokenize::Tokenizer, ids: &[u32]) -> String {
        // Sized exactly for the pieces (plus a little for a marker): regrowing a megabyte string
        // copies it into fresh memory.
        let len: usize = ids.iter().map(|&id| self.get(id).map_or(16, str::len)).sum();
        let mut out = String::with_capacity(len);
        let mut i = 0;
        while i < ids.len() {
            if let Some(p) = self.get(ids[i]) {
                out.push_str(p);
                i += 1;
                continue;
            }
            let j = ids[i..].iter().position(|&id| self.get(id).is_some()).map_or(ids.len(), |k| i + k);
            out.push_str(&tok.decode(&ids[i..j]));
            i = j;
        }
        out
    }
}

/// Bytes of a fixed slot of [`Escaped`].
const SLOT: usize = 16;

/// The JSON-escaped text (no quotes) of each alphabet token, indexed by its place in the alphabet,
/// also in a fixed 16-byte slot with its length when it fits one (copied with one move; longer
/// pieces, a few percent of the DeepSeek-V4 alphabet, are copied from `pieces`).
struct Escaped {
    n: u64,
    pieces: Pieces,
    slots: Vec<([u8; SLOT], u8)>,
}

impl Escaped {
    fn new(p: &Pieces, alphabet: &[u32]) -> Escaped {
        let mut e = Pieces { text: String::new(), span: Vec::with_capacity(alphabet.len()) };
        for &id in alphabet {
            let q = serde_json::to_string(p.get(id).unwrap_or_default()).expect("a string serializes");
            let t = &q[1..q.len() - 1];
            e.span.push((e.text.len() as u32, t.len() as u32));
            e.text.push_str(t);
        }
        let slots = e
            .span
            .iter()
            .map(|&(start, len)| {
                let t = &e.text.as_bytes()[start as usize..(start + len) as usize];
                let mut slot = [0u8; SLOT];
                if t.len() <= SLOT {
                    slot[..t.len()].copy_from_slice(t);
                }
                (slot, t.len().min(u8::MAX as usize) as u8)
            })
            .collect();
        Escaped { n: alphabet.len() as u64, pieces: e, slots }
    }
}

/// A deterministic vocabulary where each content id is a unique pronounceable word and text is
/// space-separated words, so decoded text re-encodes to exactly the same ids. The marker uses
/// reserved ids: `[rid:`, 4096 three-hex-digit pieces, `]\n\n`.
#[derive(Debug, Clone)]
pub struct WordVocab {
    content: u32,
}

const SYLLABLE_C: &[u8; 16] = b"bdfghjklmnprstvz";
const SYLLABLE_V: &[u8; 4] = b"aeio";

impl WordVocab {
    /// A vocabulary with `content` content words (ids `0..content`) plus the marker ids above them.
    pub fn new(content: u32) -> Self {
        assert!(content > 0);
        Self { content }
    }
    fn rid_open(&self) -> u32 {
        self.content
    }
    fn rid_hex(&self, v: u32) -> u32 {
        self.content + 1 + v
    }
    fn rid_close(&self) -> u32 {
        self.content + 1 + 4096
    }
    /// Total ids including the marker ids.
    pub fn size(&self) -> u32 {
        self.content + 2 + 4096
    }
    fn word(mut id: u32, out: &mut String) {
        // Base-64 syllables (consonant + vowel), least significant first; always ≥ 1 syllable.
        loop {
            let s = (id % 64) as usize;
            out.push(SYLLABLE_C[s / 4] as char);
            out.push(SYLLABLE_V[s % 4] as char);
            id /= 64;
            if id == 0 {
                break;
            }
            id -= 1;
        }
    }
    fn parse_word(w: &str) -> Option<u32> {
        let b = w.as_bytes();
        if b.is_empty() || !b.len().is_multiple_of(2) {
            return None;
        }
        let digit = |pair: &[u8]| -> Option<u64> {
            let c = SYLLABLE_C.iter().position(|&x| x == pair[0])? as u64;
            let v = SYLLABLE_V.iter().position(|&x| x == pair[1])? as u64;
            Some(c * 4 + v)
        };
        // Bijective base 64, least significant syllable first (see `word`).
        let mut pairs = b.chunks(2).rev();
        let mut acc = digit(pairs.next()?)?;
        for pair in pairs {
            acc = (acc + 1).checked_mul(64)? + digit(pair)?;
        }
        u32::try_from(acc).ok()
    }
}

impl Default for WordVocab {
    fn default() -> Self {
        Self::new(60_000)
    }
}

impl TokenText for WordVocab {
    fn content_vocab(&self) -> u32 {
        self.content
    }
    fn marker_ids(&self, hex12: &str) -> Vec<u32> {
        let mut v = Vec::with_capacity(MARKER_TOKENS);
        v.push(self.rid_open());
        for i in 0..4 {
            let piece = u32::from_str_radix(&hex12[i * 3..i * 3 + 3], 16).unwrap_or(0);
            v.push(self.rid_hex(piece));
        }
        v.push(self.rid_close());
        v
    }
    fn decode(&self, ids: &[u32]) -> String {
        let mut s = String::with_capacity(ids.len() * 5);
        let mut need_space = false;
        for &id in ids {
            if id < self.content {
                if need_space {
                    s.push(' ');
                }
                Self::word(id, &mut s);
                need_space = true;
            } else if id == self.rid_open() {
                s.push_str("[rid:");
                need_space = false;
            } else if id == self.rid_close() {
                s.push_str("]\n\n");
                need_space = false;
            } else {
                s.push_str(&format!("{:03x}", id - self.content - 1));
                need_space = false;
            }
        }
        s
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let mut out = Vec::new();
        let mut rest = text;
        if let Some(r) = rest.strip_prefix("[rid:") {
            let (hex, after) = r.split_once("]\n\n").ok_or("unterminated [rid: marker")?;
            if hex.len() != 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("bad marker digest {hex:?}"));
            }
            out.extend(self.marker_ids(hex));
            rest = after;
        }
        if rest.is_empty() {
            return Ok(out);
        }
        for w in rest.split(' ') {
            let id = Self::parse_word(w).filter(|&id| id < self.content).ok_or_else(|| format!("not a vocabulary word: {w:?}"))?;
            out.push(id);
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Conversation plans

/// Chat roles of synthesized messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One chat message as text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// A message segment: blocks `[start, end)` of the prompt's block list with a role; the request's
/// last segment also carries the partial tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub role: Role,
    pub start: u32,
    pub end: u32,
}

/// Static shape of one turn of a conversation.
#[derive(Debug, Clone)]
pub struct TurnShape {
    /// Recorded input length (`in`).
    pub input_tokens: u64,
    /// Recorded output length (`out`).
    pub output_tokens: u64,
    /// Full blocks in the prompt (named + filler).
    pub blocks: u32,
    /// Of which named by `hash_ids` (the rest are filler).
    pub named: u32,
    /// Tokens after the full blocks (`in mod block_size`, or more when ids ran short of `in`).
    pub tail_tokens: u32,
    /// Whether the partial tail is the named partial block `hash_ids[blocks]` (else filler).
    pub tail_named: bool,
    /// Longest common prefix (blocks) with the previous turn's named blocks.
    pub lcp_prev: u32,
    /// The previous turn's history was cut (compaction, edit): the message list is re-emitted.
    pub reset_context: bool,
    /// Block where the first user message starts (the marker goes there).
    pub first_user_block: u32,
    /// Theoretical prefix-cache hit: blocks already seen in the trace (global recorded order).
    pub hit_blocks: u32,
    /// Blocks counted for the theoretical hit rate (the named blocks).
    pub total_blocks: u32,
    /// Delta-encoded named ids: positions `lcp_prev..named` (the rest come from earlier turns).
    new_ids: std::ops::Range<u32>,
}

/// Every turn of one conversation (root or child stream) of a trace, with delta-encoded block ids.
#[derive(Debug)]
pub struct ConversationPlan {
    /// Namespace of block contents: (seed, trace id).
    pub trace_key: u64,
    /// Key of this conversation (filler content).
    pub conv_key: u64,
    pub block_size: u32,
    /// System prefix blocks of turn 0.
    pub system_blocks: u32,
    pub turns: Vec<TurnShape>,
    /// Concatenated new ids of every turn (dense per-trace ids).
    ids: Vec<u32>,
}

/// Dense per-trace id remapping shared by a trace's conversations (first-seen order), and the
/// trace's seen-set for the theoretical hit rate.
#[derive(Debug, Default)]
pub struct TraceIds {
    map: HashMap<u64, u32, std::hash::BuildHasherDefault<MixHasher>>,
}

impl TraceIds {
    /// The dense id of `id` (assigned in first-seen order).
    pub fn dense(&mut self, id: u64) -> u32 {
        let n = self.map.len() as u32;
        *self.map.entry(id).or_insert(n)
    }
    /// Ids assigned so far.
    pub fn len(&self) -> u32 {
        self.map.len() as u32
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// A fast hasher for integer keys (trace-local ids are not adversarial).
#[derive(Debug, Default, Clone, Copy)]
pub struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = mix64(self.0 ^ n);
    }
}

impl ConversationPlan {
    /// Build the plan of one conversation from its requests in order. `hits` gives each request's
    /// (hit blocks, total blocks) for the theoretical hit rate; `system_tokens` is the turn-0 setup
    /// prefix (tools + system) as the trace declares it (0: all user content; `None`: unknown).
    pub fn build(
        trace_key: u64,
        conv_key: u64,
        block_size: u32,
        system_tokens: Option<u64>,
        requests: &[&Request],
        hits: &[(u32, u32)],
        ids: &mut TraceIds,
    ) -> Self {
        let bs = u64::from(block_size.max(1));
        let sys_tokens = system_tokens.unwrap_or(DEFAULT_SYSTEM_TOKENS);
        let system_blocks = sys_tokens.div_ceil(bs) as u32;
        let mut turns = Vec::with_capacity(requests.len());
        let mut store: Vec<u32> = Vec::new();
        let mut prev_named: &[u64] = &[];
        let mut history: Vec<Segment> = Vec::new();
        let mut prev_blocks = 0u32;
        let mut prev_out = 0u64;
        for (k, r) in requests.iter().enumerate() {
            let input = r.input_tokens;
            let full = input / bs;
            // Named full blocks: at most the whole blocks of `in`; an extra id names the partial tail.
            let named = (r.hash_ids.len() as u64).min(full) as u32;
            let blocks = full as u32;
            let tail_tokens = (input - full * bs) as u32;
            let tail_named = tail_tokens > 0 && r.hash_ids.len() as u64 > full;
            // Compare raw ids (cheap), then map only the new ones to dense ids.
            let lcp = if k == 0 { 0 } else { crate::trace::stats::lcp(prev_named, &r.hash_ids[..named as usize]) as u32 };
            let start = store.len() as u32;
            for &h in &r.hash_ids[lcp as usize..(named as usize + usize::from(tail_named))] {
                store.push(ids.dense(h));
            }
            let new_ids = start..store.len() as u32;

            let reset = segment_step(&mut history, k, system_blocks, blocks, tail_tokens, lcp, prev_blocks, prev_out, bs);
            let first_user_block = history.iter().find(|s| s.role == Role::User).map(|s| s.start).unwrap_or(0);
            let (hit_blocks, total_blocks) = hits.get(k).copied().unwrap_or((0, named));
            turns.push(TurnShape {
                input_tokens: input,
                output_tokens: r.output_tokens,
                blocks,
                named,
                tail_tokens,
                tail_named,
                lcp_prev: lcp,
                reset_context: reset,
                first_user_block,
                hit_blocks,
                total_blocks,
                new_ids,
            });
            prev_named = &r.hash_ids[..named as usize];
            prev_blocks = blocks;
            prev_out = r.output_tokens;
        }
        Self { trace_key, conv_key, block_size: block_size.max(1), system_blocks, turns, ids: store }
    }

    /// Named block ids of a turn (dense per-trace ids), reconstructed from the deltas; includes the
    /// named partial tail block when there is one.
    pub fn block_ids(&self, turn: usize) -> Vec<u32> {
        self.block_ids_from(turn, 0)
    }

    /// As [`ConversationPlan::block_ids`], positions `from..` only (walks back only as far as needed).
    pub fn block_ids_from(&self, turn: usize, from: usize) -> Vec<u32> {
        let t = &self.turns[turn];
        let len = (t.named + u32::from(t.tail_named)) as usize;
        if from >= len {
            return Vec::new();
        }
        let mut out = vec![0u32; len - from];
        // Walk back: positions ≥ lcp come from this turn; below, from the turn before, and so on.
        let mut limit = len;
        let mut k = turn;
        loop {
            let tk = &self.turns[k];
            let base = tk.lcp_prev as usize;
            let src = &self.ids[tk.new_ids.start as usize..tk.new_ids.end as usize];
            let lo = base.max(from);
            let hi = limit.min(base + src.len());
            if hi > lo {
                out[lo - from..hi - from].copy_from_slice(&src[lo - base..hi - base]);
            }
            limit = limit.min(base);
            if limit <= from || k == 0 {
                break;
            }
            k -= 1;
        }
        out
    }

    /// Message segments of a turn (replays the segmentation; O(turns), for the text path).
    pub fn segments(&self, turn: usize) -> Vec<Segment> {
        // Rebuilding needs only the shapes, not ids.
        let mut history: Vec<Segment> = Vec::new();
        let bs = u64::from(self.block_size);
        let mut prev_out = 0u64;
        let mut prev_blocks = 0u32;
        for (k, t) in self.turns[..=turn].iter().enumerate() {
            segment_step(&mut history, k, self.system_blocks, t.blocks, t.tail_tokens, t.lcp_prev, prev_blocks, prev_out, bs);
            prev_out = t.output_tokens;
            prev_blocks = t.blocks;
        }
        history
    }
}

/// One step of role segmentation (§2.3): update `history` for turn `k`; returns whether an
/// already-sent segment was cut (the request must re-emit its whole message list).
#[allow(clippy::too_many_arguments)]
fn segment_step(
    history: &mut Vec<Segment>,
    k: usize,
    system_blocks: u32,
    blocks: u32,
    tail_tokens: u32,
    lcp: u32,
    prev_blocks: u32,
    prev_out: u64,
    bs: u64,
) -> bool {
    let mut reset = false;
    if k == 0 {
        history.clear();
        let mut s = system_blocks.min(blocks);
        if s == blocks && tail_tokens == 0 {
            s = blocks.saturating_sub(1);
        }
        if s > 0 {
            history.push(Segment { role: Role::System, start: 0, end: s });
        }
        history.push(Segment { role: Role::User, start: s, end: blocks });
        return false;
    }
    // The previous turn's filler and tail never match: anything below its block count is a cut.
    if lcp < prev_blocks {
        reset = true;
        while history.last().is_some_and(|s| s.start >= lcp) {
            history.pop();
        }
        if let Some(last) = history.last_mut() {
            last.end = last.end.min(lcp);
        }
    }
    let new = blocks.saturating_sub(lcp);
    if new == 0 && tail_tokens == 0 {
        // Nothing new: relabel the last block as the user turn.
        match history.last_mut() {
            Some(last) if last.role != Role::User && last.end > last.start => {
                last.end -= 1;
                let e = last.end;
                if last.start == last.end {
                    history.pop();
                }
                history.push(Segment { role: Role::User, start: e, end: blocks });
                reset = true;
            }
            Some(_) => {}
            None => history.push(Segment { role: Role::User, start: 0, end: blocks }),
        }
        return reset;
    }
    let reserve = u32::from(tail_tokens == 0);
    let a = (prev_out.div_ceil(bs) as u32).min(new.saturating_sub(reserve));
    if a > 0 {
        history.push(Segment { role: Role::Assistant, start: lcp, end: lcp + a });
    }
    history.push(Segment { role: Role::User, start: lcp + a, end: blocks });
    reset
}

// ---------------------------------------------------------------------------------------------
// Markers and prompts

/// The per-play cache-bust marker: the first 12 hex chars of SHA-256 over (run id, recycle pass,
/// lane, trace id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Marker {
    pub digest: [u8; 6],
}

impl Marker {
    /// The reference replay's marker (agentx-harness `build_cache_bust_marker`): the first 12 hex
    /// digits of `sha256("{benchmark id}:{pass}:{lane}:{trace id}")`, where `pass` counts the
    /// markers minted for that trace in the run.
    pub fn new(benchmark_id: &str, pass: u64, lane: u32, trace_id: &str) -> Self {
        let base = trace_id.split("::").next().unwrap_or(trace_id);
        let d = Sha256::digest(format!("{benchmark_id}:{pass}:{lane}:{base}").as_bytes());
        Self { digest: d[..6].try_into().expect("6 bytes") }
    }
    /// The 12 lowercase hex chars.
    pub fn hex(&self) -> String {
        hex::encode(self.digest)
    }
    /// The text prepended to the first user message.
    pub fn text(&self) -> String {
        format!("[rid:{}]\n\n", self.hex())
    }
    fn salt(&self) -> u64 {
        let mut b = [0u8; 8];
        b[..6].copy_from_slice(&self.digest);
        mix64(u64::from_le_bytes(b) ^ 0x5249_443a)
    }
}

/// A compact request prompt: conversation plan + turn + marker. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub conversation: Arc<ConversationPlan>,
    pub turn: u32,
    pub marker: Option<Marker>,
}

/// One run of tokens with a content identity (see module docs).
#[derive(Debug, Clone, Copy)]
struct Atom {
    /// Content identity: equal ids ⇒ equal tokens at equal offsets.
    key: u64,
    len: u32,
    /// Set for the marker (its tokens come from the vocabulary's marker ids).
    marker: bool,
}

impl Prompt {
    pub fn shape(&self) -> &TurnShape {
        &self.conversation.turns[self.turn as usize]
    }

    /// Recorded input tokens (blocks + filler + tail), without the marker.
    pub fn input_tokens(&self) -> u64 {
        self.shape().input_tokens
    }

    /// Tokens of the token-id form: `in` plus the marker.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens() + if self.marker.is_some() { MARKER_TOKENS as u64 } else { 0 }
    }

    /// (hit blocks, total blocks) of the theoretical prefix-cache hit rate.
    pub fn theoretical_hit(&self) -> (u32, u32) {
        let s = self.shape();
        (s.hit_blocks, s.total_blocks)
    }

    pub fn reset_context(&self) -> bool {
        self.shape().reset_context
    }

    fn block_key(&self, id: u32) -> u64 {
        combine(self.conversation.trace_key, u64::from(id))
    }

    fn filler_key(&self, pos: u32) -> u64 {
        combine(combine(self.conversation.conv_key, 0xF111_0000 | u64::from(self.turn)), u64::from(pos))
    }

    /// First token of block `pos` in the token-id form (the marker shifts blocks from the first
    /// user block on).
    fn block_token(&self, pos: u32) -> u64 {
        let s = self.shape();
        let shift = if self.marker.is_some() && pos >= s.first_user_block { MARKER_TOKENS as u64 } else { 0 };
        u64::from(pos) * u64::from(self.conversation.block_size) + shift
    }

    /// The token stream as atoms from the one holding token `start`; returns the atoms and the
    /// offset of `start` within the first.
    fn atoms_from(&self, start: u64) -> (Vec<Atom>, u32) {
        let s = self.shape();
        let bs = u64::from(self.conversation.block_size);
        let fu = s.first_user_block;
        let b0 = match self.marker {
            Some(_) if start >= u64::from(fu) * bs + MARKER_TOKENS as u64 => {
                u64::from(fu) + (start - u64::from(fu) * bs - MARKER_TOKENS as u64) / bs
            }
            Some(_) if start >= u64::from(fu) * bs => u64::from(fu),
            _ => start / bs,
        }
        .min(u64::from(s.blocks)) as u32;
        let ids = self.conversation.block_ids_from(self.turn as usize, b0 as usize);
        let id_at = |pos: u32| ids[(pos - b0) as usize];
        let mut out = Vec::with_capacity((s.blocks - b0) as usize + 3);
        // The marker (emitted before block `fu`) comes first when `b0 ≤ fu`: blocks before it are unshifted.
        let first_token = if self.marker.is_some() && b0 <= fu { u64::from(b0) * bs } else { self.block_token(b0) };
        for pos in b0..s.blocks {
            if pos == fu
                && let Some(m) = self.marker
            {
                out.push(Atom { key: m.salt(), len: MARKER_TOKENS as u32, marker: true });
            }
            let key = if pos < s.named { self.block_key(id_at(pos)) } else { self.filler_key(pos) };
            out.push(Atom { key, len: self.conversation.block_size, marker: false });
        }
        if fu >= s.blocks
            && let Some(m) = self.marker
        {
            out.push(Atom { key: m.salt(), len: MARKER_TOKENS as u32, marker: true });
        }
        if s.tail_tokens > 0 {
            let key = if s.tail_named { self.block_key(id_at(s.named)) } else { self.filler_key(u32::MAX) };
            out.push(Atom { key, len: s.tail_tokens, marker: false });
        }
        // When b0 == blocks and the marker precedes the tail, `first_token` is the marker's start.
        let first_token = if b0 == s.blocks && fu >= s.blocks { u64::from(s.blocks) * bs } else { first_token };
        (out, start.saturating_sub(first_token) as u32)
    }

    /// Chained content hashes of each full page of `page` tokens of the token-id form (the marker
    /// included). Page i's hash covers pages 0..=i, so equal hashes mean equal prefixes.
    pub fn page_hashes(&self, page: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.total_tokens() as usize / page);
        self.page_hashes_into(page, &mut out);
        out
    }

    /// As [`Prompt::page_hashes`], appending to `out` (reuse a buffer on hot paths).
    pub fn page_hashes_into(&self, page: usize, out: &mut Vec<u64>) {
        self.hash_pages_from(page, 0, CHAIN_ROOT, out);
    }

    /// Tokens this prompt shares with the previous turn of its conversation sent with the same
    /// marker (the same play): the common block prefix, plus the marker when both put it at the
    /// same block inside that prefix. `None` for turn 0.
    pub fn shared_tokens_with_previous(&self) -> Option<u64> {
        if self.turn == 0 {
            return None;
        }
        let s = self.shape();
        let prev = &self.conversation.turns[self.turn as usize - 1];
        let bs = u64::from(self.conversation.block_size);
        let l = u64::from(s.lcp_prev);
        Some(match self.marker {
            None => l * bs,
            Some(_) => {
                let (fu, pfu) = (u64::from(s.first_user_block), u64::from(prev.first_user_block));
                if fu == pfu && l >= fu { l * bs + MARKER_TOKENS as u64 } else { l.min(fu).min(pfu) * bs }
            }
        })
    }

    /// Page hashes reusing a previous prompt's: `prev` are the page hashes (same page size) of a
    /// prompt whose first `shared_tokens` tokens equal this one's (see
    /// [`Prompt::shared_tokens_with_previous`]). Only the pages after the shared prefix are hashed.
    pub fn page_hashes_after(&self, page: usize, prev: &[u64], shared_tokens: u64, out: &mut Vec<u64>) {
        let k = ((shared_tokens / page as u64) as usize).min(prev.len()).min(self.total_tokens() as usize / page);
        out.extend_from_slice(&prev[..k]);
        let chain = if k == 0 { CHAIN_ROOT } else { prev[k - 1] };
        self.hash_pages_from(page, k, chain, out);
    }

    fn hash_pages_from(&self, page: usize, start_page: usize, mut chain: u64, out: &mut Vec<u64>) {
        let start = (start_page * page) as u64;
        if start >= self.total_tokens() {
            return;
        }
        let (atoms, skip) = self.atoms_from(start);
        let page = page as u32;
        let mut content: u64 = 0;
        let mut filled: u32 = 0;
        let mut skip = skip;
        for a in &atoms {
            if skip >= a.len {
                skip -= a.len;
                continue;
            }
            let mut off = skip;
            skip = 0;
            while off < a.len {
                let take = (page - filled).min(a.len - off);
                if filled == 0 && off == 0 && take == a.len && take == page {
                    content = a.key; // whole aligned atom: its key is its content hash
                } else {
                    content =
                        combine(if filled == 0 { 0x7061_6765 } else { content }, combine(a.key, (u64::from(off) << 32) | u64::from(take)));
                }
                filled += take;
                off += take;
                if filled == page {
                    chain = combine(chain, content);
                    out.push(chain);
                    filled = 0;
                }
            }
        }
    }

    /// The token ids of this prompt (marker ids from `vocab`).
    pub fn token_ids(&self, vocab: &dyn TokenText) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.total_tokens() as usize);
        let hex = self.marker.map(|m| m.hex());
        for a in self.atoms_from(0).0 {
            push_atom(&mut out, &a, vocab, hex.as_deref());
        }
        out
    }

    /// The chat messages of this request as text: the full accumulated conversation, the marker at
    /// the start of the first user message, ending with a user message.
    pub fn messages(&self, vocab: &dyn TokenText) -> Vec<ChatMessage> {
        self.message_ids(vocab).into_iter().map(|(role, ids)| ChatMessage { role, content: vocab.decode(&ids) }).collect()
    }

    /// Messages as (role, token ids) — what `messages` decodes.
    pub fn message_ids(&self, vocab: &dyn TokenText) -> Vec<(Role, Vec<u32>)> {
        let ids = self.conversation.block_ids(self.turn as usize);
        self.message_plans(&ids).iter().map(|m| (m.role, self.message_tokens(m, &ids, vocab))).collect()
    }

    /// The messages before synthesis, each with a content identity (see [`MessagePlan`]).
    /// `ids`: the turn's block ids ([`ConversationPlan::block_ids`]), which synthesis needs too.
    pub fn message_plans(&self, ids: &[u32]) -> Vec<MessagePlan> {
        let s = self.shape();
        let segs = self.conversation.segments(self.turn as usize);
        let bs = self.conversation.block_size;
        let mut out = Vec::with_capacity(segs.len());
        let mut marked = false;
        let last = segs.len().saturating_sub(1);
        for (i, seg) in segs.iter().enumerate() {
            let marker = if seg.role == Role::User && !marked { self.marker } else { None };
            marked |= marker.is_some();
            let tail = i == last && s.tail_tokens > 0;
            // A zero-length segment (a turn that added no tokens of its own) would be an empty
            // message, which OpenAI-compatible front ends such as sglang-router reject.
            if seg.start == seg.end && marker.is_none() && i != last {
                continue;
            }
            let mut key = combine(0x4D53_4700 | seg.role as u64, u64::from(bs));
            if let Some(m) = marker {
                key = combine(key, m.salt());
            }
            for pos in seg.start..seg.end {
                key = combine(key, self.position_key(pos, ids));
            }
            if tail {
                key = combine(combine(key, self.tail_key(ids)), u64::from(s.tail_tokens));
            }
            out.push(MessagePlan { role: seg.role, seg: *seg, marker, tail, key });
        }
        out
    }

    /// The token ids of one planned message; `ids` are the turn's block ids
    /// ([`ConversationPlan::block_ids`]).
    pub fn message_tokens(&self, m: &MessagePlan, ids: &[u32], vocab: &dyn TokenText) -> Vec<u32> {
        let bs = self.conversation.block_size;
        let mut toks =
            Vec::with_capacity(((m.seg.end - m.seg.start) * bs) as usize + if m.tail { self.shape().tail_tokens as usize } else { 0 });
        if let Some(mk) = m.marker {
            toks.extend(vocab.marker_ids(&mk.hex()));
        }
        for pos in m.seg.start..m.seg.end {
            push_atom(&mut toks, &Atom { key: self.position_key(pos, ids), len: bs, marker: false }, vocab, None);
        }
        if m.tail {
            push_atom(&mut toks, &Atom { key: self.tail_key(ids), len: self.shape().tail_tokens, marker: false }, vocab, None);
        }
        toks
    }

    /// One planned message as the JSON object a chat request carries (`{"role":…,"content":…}`,
    /// as serde writes a [`ChatMessage`]). A concatenative vocabulary writes the content tokens
    /// straight into the string; any other decodes the message first.
    pub fn message_json(&self, m: &MessagePlan, ids: &[u32], vocab: &dyn TokenText) -> Vec<u8> {
        let ser = |content: String| serde_json::to_vec(&ChatMessage { role: m.role, content }).expect("a message of strings serializes");
        if !vocab.write_escaped_content(0, 0, &mut Vec::new()) {
            return ser(vocab.decode(&self.message_tokens(m, ids, vocab)));
        }
        // `{"role":"…","content":"` and `"}` around the content.
        let empty = ser(String::new());
        let (open, close) = empty.split_at(empty.len() - 2);
        let bs = self.conversation.block_size;
        let tail = if m.tail { self.shape().tail_tokens } else { 0 };
        let mut out = Vec::with_capacity(open.len() + 2 + 6 * ((m.seg.end - m.seg.start) * bs + tail) as usize);
        out.extend_from_slice(open);
        if let Some(mk) = m.marker {
            let text = serde_json::to_vec(&vocab.decode(&vocab.marker_ids(&mk.hex()))).expect("a string serializes");
            out.extend_from_slice(&text[1..text.len() - 1]);
        }
        let atoms = (m.seg.start..m.seg.end).map(|pos| (self.position_key(pos, ids), bs)).chain(m.tail.then(|| (self.tail_key(ids), tail)));
        for (key, len) in atoms {
            vocab.write_escaped_content(key, len, &mut out);
        }
        out.extend_from_slice(close);
        // The message is kept (cached) for the conversation's later turns: with at most as much
        // spare room again (trimming closer measured slower: a 793K-token body 2.8 -> 5.6 ms).
        if out.capacity() > 2 * out.len() {
            out.shrink_to_fit();
        }
        out
    }

    /// Content key of the block at `pos` (named, else this turn's filler).
    fn position_key(&self, pos: u32, ids: &[u32]) -> u64 {
        if pos < self.shape().named { self.block_key(ids[pos as usize]) } else { self.filler_key(pos) }
    }

    /// Content key of the partial tail (a named partial block, else filler).
    fn tail_key(&self, ids: &[u32]) -> u64 {
        let s = self.shape();
        if s.tail_named { self.block_key(ids[s.named as usize]) } else { self.filler_key(u32::MAX) }
    }
}

/// One message of a prompt before synthesis: its role, blocks, whether the play's marker opens it
/// and the partial tail closes it, and its content identity. Equal keys mean equal text (the key
/// chains every block's content key, so a block that changed changes it): consecutive turns of a
/// conversation share all but their newest messages, which a client can then reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagePlan {
    pub role: Role,
    seg: Segment,
    marker: Option<Marker>,
    tail: bool,
    pub key: u64,
}

/// Each conversation's latest page hashes, so the next turn of the same play hashes only its new
/// pages (consecutive turns share ≈ 97 % of their pages on AgentX traces). Bounded: the least
/// recently used conversation is dropped past `capacity`.
#[derive(Debug)]
pub struct PageHashCache {
    page: usize,
    capacity: usize,
    clock: u64,
    entries: HashMap<(usize, Option<Marker>), CacheEntry, std::hash::BuildHasherDefault<MixHasher>>,
}

#[derive(Debug)]
struct CacheEntry {
    /// Keeps the plan alive so its address stays a valid key.
    _conversation: Arc<ConversationPlan>,
    turn: u32,
    hashes: Arc<[u64]>,
    used: u64,
}

impl PageHashCache {
    pub fn new(page: usize, capacity: usize) -> Self {
        Self { page, capacity: capacity.max(1), clock: 0, entries: HashMap::default() }
    }

    /// The chained page hashes of `p` (same result as [`Prompt::page_hashes`]), shared: hand them
    /// to an engine as is (e.g. `engine::Prompt::from_chained(hashes, 64, p.total_tokens())`).
    pub fn page_hashes(&mut self, p: &Prompt) -> Arc<[u64]> {
        self.clock += 1;
        let key = (Arc::as_ptr(&p.conversation) as usize, p.marker);
        let mut hashes = Vec::with_capacity(p.total_tokens() as usize / self.page + 1);
        match self.entries.get(&key) {
            Some(e) if p.turn > 0 && e.turn + 1 == p.turn => {
                let shared = p.shared_tokens_with_previous().unwrap_or(0);
                p.page_hashes_after(self.page, &e.hashes, shared, &mut hashes);
            }
            Some(e) if e.turn == p.turn => {
                let h = e.hashes.clone();
                self.entries.get_mut(&key).expect("present").used = self.clock;
                return h;
            }
            _ => p.page_hashes_into(self.page, &mut hashes),
        }
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            let oldest = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
        let e = self.entries.entry(key).or_insert_with(|| CacheEntry {
            _conversation: p.conversation.clone(),
            turn: p.turn,
            hashes: Arc::from(Vec::new()),
            used: 0,
        });
        e.turn = p.turn;
        e.hashes = Arc::from(hashes);
        e.used = self.clock;
        e.hashes.clone()
    }

    /// Conversations held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn push_atom(out: &mut Vec<u32>, a: &Atom, vocab: &dyn TokenText, hex: Option<&str>) {
    if a.marker {
        if let Some(h) = hex {
            out.extend(vocab.marker_ids(h));
        }
        return;
    }
    // Token i of a block is a function of (block key, i): a partial block is a prefix of the full one.
    for i in 0..a.len {
        out.push(vocab.content_token(mix64(a.key ^ (u64::from(i) << 40) ^ 0xB10C)));
    }
}

#[cfg(test)]
mod tests;
