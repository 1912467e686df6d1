//! Token ids ↔ text: the vocabulary interface synthesis draws content tokens through, and the
//! built-in word vocabulary (every id a pronounceable word, so text re-encodes exactly).

use super::MARKER_TOKENS;

/// Why a message's text does not encode into token ids.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("unterminated [rid: marker")]
    UnterminatedMarker,
    #[error("bad marker digest {digest:?}")]
    BadMarker { digest: String },
    #[error("not a vocabulary word: {word:?}")]
    NotAWord { word: String },
    /// The target's tokenizer refused the text.
    #[error(transparent)]
    Tokenizer(#[from] engine_server::tokenize::TokenizeError),
}

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
    fn encode(&self, text: &str) -> Result<Vec<u32>, EncodeError>;
    /// Appends the JSON-escaped text of the `len` content tokens drawn from `key` (the tokens
    /// [`push_atom`] draws) to `out`, when this vocabulary's text is the concatenation of its
    /// tokens' texts; `false` (nothing written) when it is not, and the caller decodes.
    fn write_escaped_content(&self, key: u64, len: u32, out: &mut Vec<u8>) -> bool {
        let _ = (key, len, out);
        false
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
    fn encode(&self, text: &str) -> Result<Vec<u32>, EncodeError> {
        let mut out = Vec::new();
        let mut rest = text;
        if let Some(r) = rest.strip_prefix("[rid:") {
            let (hex, after) = r.split_once("]\n\n").ok_or(EncodeError::UnterminatedMarker)?;
            if hex.len() != 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(EncodeError::BadMarker { digest: hex.to_string() });
            }
            out.extend(self.marker_ids(hex));
            rest = after;
        }
        if rest.is_empty() {
            return Ok(out);
        }
        for w in rest.split(' ') {
            let id = Self::parse_word(w).filter(|&id| id < self.content).ok_or_else(|| EncodeError::NotAWord { word: w.to_string() })?;
            out.push(id);
        }
        Ok(out)
    }
}
