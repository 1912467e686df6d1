//! Synthesis with the target's own tokenizer: content tokens from its self-encoding alphabet,
//! joined (or written straight into JSON) from per-id pieces when its decoder is concatenative.

use super::mix64;
use super::vocab::{EncodeError, TokenText};

/// Synthesis with the target's own tokenizer (AgentX §2: the target model's tokenizer): content
/// tokens are drawn from its alphabet (`" "` + letters tokens that encode back to themselves), so
/// a prompt of N content ids is N tokens on the server too. The reference engine's built-in
/// vocabulary and `tokenizer.json` files both work.
pub struct TokenizerVocab {
    tok: engine_server::tokenize::Tokenizer,
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
    pub fn new(tok: engine_server::tokenize::Tokenizer) -> Self {
        let pieces = Self::piece_table(&tok);
        let escaped = pieces.as_ref().map(|p| Escaped::new(p, tok.alphabet()));
        // The built-in vocabulary's decoder is a table lookup already.
        let pieces = pieces.filter(|_| tok.source() != "builtin");
        Self { tok, pieces, escaped, markers: Default::default() }
    }

    /// Per-id text, if joining it reproduces the decoder on a sample mixing alphabet ids with a
    /// marker (decoders that strip, merge or add spaces are not concatenative).
    fn piece_table(tok: &engine_server::tokenize::Tokenizer) -> Option<Pieces> {
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
        Self::new(engine_server::tokenize::Tokenizer::builtin())
    }
    /// A `tokenizer.json` (or a directory holding one), read with HuggingFace `tokenizers`: the
    /// client only encodes short markers, where fastokens (built for long prompts) pays a
    /// per-call cache of megabytes, measured as a third of the client's CPU.
    pub fn from_path(path: &std::path::Path) -> Result<Self, engine_server::tokenize::TokenizeError> {
        engine_server::tokenize::Tokenizer::from_path(path, engine_server::tokenize::Backend::HuggingFace).map(Self::new)
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
    fn encode(&self, text: &str) -> Result<Vec<u32>, EncodeError> {
        Ok(self.tok.encode(text)?)
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
    fn new(tok: &engine_server::tokenize::Tokenizer) -> Option<Pieces> {
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
    fn join(&self, tok: &engine_server::tokenize::Tokenizer, ids: &[u32]) -> String {
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
