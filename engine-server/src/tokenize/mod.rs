//! Tokenization for the engine's HTTP shell: the built-in vocabulary, real
//! `tokenizer.json` backends (`fastokens`, HuggingFace `tokenizers`), chat templates
//! per model family, and incremental chat encoding.
//!
//! - [`Tokenizer`]: one vocabulary behind one API (`encode`, `decode`, marker ids,
//!   the alphabet generated tokens are drawn from).
//! - [`template`]: how messages become marker ids and text pieces.
//! - [`ChatEncoder`]: messages → prompt ids, memoising each rendered message so a
//!   conversation whose earlier messages were seen costs only its new messages.
//! - [`Detokenizer`]: generated ids → text deltas that never split a character.

pub mod builtin;
mod incremental;
pub mod sample;
pub mod template;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use incremental::{ChatEncoder, EncodedChat, EncoderStats};
pub use template::{ChatMessage, ChatOptions, Role, TemplateFamily, ToolCall};

/// Errors from loading or using a tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    #[error("cannot read tokenizer file {path}: {source}; pass --tokenizer-path <dir or tokenizer.json> of a HuggingFace tokenizer")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot load tokenizer {path} with the {backend} backend: {message}")]
    Load { path: PathBuf, backend: Backend, message: String },
    #[error("the {backend} tokenizer failed to encode: {message}")]
    Encode { backend: Backend, message: String },
    #[error(
        "chat template {family} needs the marker token {marker:?}, which the tokenizer ({source_name}) does not define; choose another --chat-template (deepseek-v4, deepseek-v3, chatml)"
    )]
    MissingMarker { family: TemplateFamily, marker: String, source_name: String },
    #[error("unknown tokenizer backend {0:?}; expected one of: huggingface, fastokens (or builtin)")]
    UnknownBackend(String),
    #[error("unknown chat template {0:?}; expected deepseek-v4, deepseek-v3 or chatml")]
    UnknownTemplate(String),
}

/// Which implementation encodes text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The deterministic built-in vocabulary ([`builtin`]); needs no file.
    Builtin,
    /// The `fastokens` crate on a `tokenizer.json`.
    Fastokens,
    /// HuggingFace `tokenizers` on a `tokenizer.json` (SGLang's default backend).
    HuggingFace,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Builtin => "builtin",
            Backend::Fastokens => "fastokens",
            Backend::HuggingFace => "huggingface",
        })
    }
}

impl FromStr for Backend {
    type Err = TokenizeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "builtin" => Ok(Backend::Builtin),
            "fastokens" => Ok(Backend::Fastokens),
            "huggingface" | "hf" => Ok(Backend::HuggingFace),
            _ => Err(TokenizeError::UnknownBackend(s.to_string())),
        }
    }
}

enum Inner {
    Builtin,
    Fast(Box<fastokens::Tokenizer>),
    Hf(Box<tokenizers::Tokenizer>),
}

/// A vocabulary with encode / decode and the ids of its marker tokens.
pub struct Tokenizer {
    inner: Inner,
    backend: Backend,
    source: String,
    vocab_size: u32,
    eos: Option<u32>,
    /// Ids generated tokens are drawn from: tokens whose text is `" "` + ASCII
    /// letters and that encode back to themselves, so generated text round-trips.
    alphabet: Vec<u32>,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("backend", &self.backend)
            .field("source", &self.source)
            .field("vocab_size", &self.vocab_size)
            .finish()
    }
}

/// How many alphabet tokens to collect from a real vocabulary (enough variety for
/// generated text; bounded so start-up stays fast).
const ALPHABET_MAX: usize = 8192;

impl Tokenizer {
    /// The built-in vocabulary (the default; no files).
    pub fn builtin() -> Tokenizer {
        Tokenizer {
            inner: Inner::Builtin,
            backend: Backend::Builtin,
            source: "builtin".into(),
            vocab_size: builtin::VOCAB_SIZE,
            eos: Some(builtin::EOS),
            alphabet: builtin::SPACE_WORDS.collect(),
        }
    }

    /// Loads `tokenizer.json` (or a directory holding it) with a real backend. Never
    /// touches the network.
    pub fn from_path(path: &Path, backend: Backend) -> Result<Tokenizer, TokenizeError> {
        if backend == Backend::Builtin {
            return Ok(Tokenizer::builtin());
        }
        let file = if path.is_dir() { path.join("tokenizer.json") } else { path.to_path_buf() };
        let bytes = std::fs::read(&file).map_err(|source| TokenizeError::Read { path: file.clone(), source })?;
        let load_err = |message: String| TokenizeError::Load { path: file.clone(), backend, message };
        let inner = match backend {
            Backend::Fastokens => {
                let json: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| load_err(e.to_string()))?;
                Inner::Fast(Box::new(fastokens::Tokenizer::from_json(json).map_err(|e| load_err(e.to_string()))?))
            }
            Backend::HuggingFace => Inner::Hf(Box::new(tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| load_err(e.to_string()))?)),
            Backend::Builtin => unreachable!(),
        };
        let mut tok = Tokenizer { inner, backend, source: file.display().to_string(), vocab_size: 0, eos: None, alphabet: Vec::new() };
        tok.vocab_size = match &tok.inner {
            Inner::Hf(t) => t.get_vocab_size(true) as u32,
            Inner::Fast(t) => {
                let base = t.model().vocab_size() as u32;
                let added = t.added_token_configs().iter().map(|c| c.id + 1).max().unwrap_or(0);
                base.max(added)
            }
            Inner::Builtin => unreachable!(),
        };
        // EOS: the usual names, first found.
        tok.eos = ["<｜end▁of▁sentence｜>", "<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>"].iter().find_map(|m| tok.marker_id(m));
        tok.alphabet = tok.collect_alphabet();
        if tok.alphabet.is_empty() {
            return Err(load_err(
                "no vocabulary token of the form \" \" + ASCII letters encodes back to itself; \
                 generated text needs some"
                    .into(),
            ));
        }
        Ok(tok)
    }

    fn collect_alphabet(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for id in 0..self.vocab_size {
            if out.len() >= ALPHABET_MAX {
                break;
            }
            let text = self.decode(&[id]);
            let b = text.as_bytes();
            if b.len() < 2 || b[0] != b' ' || !b[1..].iter().all(u8::is_ascii_alphabetic) {
                continue;
            }
            if self.encode(&text).ok().as_deref() == Some(&[id][..]) {
                out.push(id);
            }
        }
        out
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Where the vocabulary came from (`builtin` or the file path).
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn vocab_size(&self) -> u32 {
        self.vocab_size
    }

    /// The end-of-sequence id, when the vocabulary has one.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// Ids generated tokens are drawn from (any sequence of them round-trips).
    pub fn alphabet(&self) -> &[u32] {
        &self.alphabet
    }

    /// Encodes text as SGLang does after applying a chat template: added / marker
    /// tokens in the text are recognised, and no BOS/EOS is added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        match &self.inner {
            Inner::Builtin => Ok(builtin::encode(text)),
            Inner::Fast(t) => t.encode(text).map_err(|e| TokenizeError::Encode { backend: self.backend, message: e.to_string() }),
            Inner::Hf(t) => t
                .encode_fast(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| TokenizeError::Encode { backend: self.backend, message: e.to_string() }),
        }
    }

    /// Decodes ids to text, markers included (unknown ids are skipped).
    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.inner {
            Inner::Builtin => builtin::decode(ids),
            Inner::Fast(t) => t.decode(ids, false).unwrap_or_default(),
            Inner::Hf(t) => t.decode(ids, false).unwrap_or_default(),
        }
    }

    /// The id of a marker / added token given by its exact text.
    pub fn marker_id(&self, text: &str) -> Option<u32> {
        match &self.inner {
            Inner::Builtin => builtin::marker_id(text),
            Inner::Fast(t) => t.token_to_id(text),
            Inner::Hf(t) => t.token_to_id(text),
        }
    }
}

/// Turns generated ids into text deltas without splitting a multi-byte character:
/// text is held back while the decoded tail is an incomplete character.
#[derive(Debug, Default)]
pub struct Detokenizer {
    ids: Vec<u32>,
    /// Start of the window re-decoded each step (a few tokens of context keep
    /// byte-level merges and leading-space rules right).
    prefix: usize,
    /// Ids before this index have been emitted as text.
    read: usize,
}

impl Detokenizer {
    pub fn new() -> Detokenizer {
        Detokenizer::default()
    }

    /// Adds ids and returns the text they complete (possibly empty).
    pub fn push(&mut self, tok: &Tokenizer, ids: &[u32]) -> String {
        self.ids.extend_from_slice(ids);
        if let Inner::Builtin = tok.inner {
            // Built-in tokens are whole bytes of ASCII or markers, except the raw byte
            // fallback; decode the unread ids directly when they form valid UTF-8.
            let mut bytes = Vec::new();
            for &id in &self.ids[self.read..] {
                bytes.extend_from_slice(builtin::token(id));
            }
            return match String::from_utf8(bytes) {
                Ok(s) => {
                    self.read = self.ids.len();
                    s
                }
                Err(_) => String::new(),
            };
        }
        let prefix_text = tok.decode(&self.ids[self.prefix..self.read]);
        let full = tok.decode(&self.ids[self.prefix..]);
        if full.len() > prefix_text.len() && !full.ends_with('\u{FFFD}') {
            let delta = full.get(prefix_text.len()..).map(str::to_string).unwrap_or_default();
            self.prefix = self.read;
            self.read = self.ids.len();
            delta
        } else {
            String::new()
        }
    }

    /// Text still held back at the end of generation (lossy).
    pub fn finish(&mut self, tok: &Tokenizer) -> String {
        if self.read == self.ids.len() {
            return String::new();
        }
        let prefix_text = tok.decode(&self.ids[self.prefix..self.read]);
        let full = tok.decode(&self.ids[self.prefix..]);
        self.read = self.ids.len();
        full.get(prefix_text.len()..).map(str::to_string).unwrap_or_default()
    }
}

/// Where the shared data lives for real-data tests and benchmarks
/// (`SWEEP_SHARED_DATA`, default `../shared/data` from the workspace root).
pub fn shared_data_dir() -> PathBuf {
    std::env::var_os("SWEEP_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..").join("shared").join("data"))
}

/// The DeepSeek-V4 `tokenizer.json` in the shared data, if present.
pub fn deepseek_v4_tokenizer_path() -> Option<PathBuf> {
    let p = shared_data_dir().join("tokenizers").join("deepseek-v4").join("tokenizer.json");
    p.is_file().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_parse() {
        assert_eq!("fastokens".parse::<Backend>().unwrap(), Backend::Fastokens);
        assert_eq!("HuggingFace".parse::<Backend>().unwrap(), Backend::HuggingFace);
        let err = "sentencepiece".parse::<Backend>().unwrap_err().to_string();
        assert!(err.contains("huggingface, fastokens"), "{err}");
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = Tokenizer::from_path(Path::new("/nonexistent/tok.json"), Backend::Fastokens).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/tok.json"), "{err}");
    }

    #[test]
    fn malformed_file_is_a_load_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, "{\"not\": \"a tokenizer\"}").unwrap();
        for backend in [Backend::Fastokens, Backend::HuggingFace] {
            let err = Tokenizer::from_path(&p, backend).unwrap_err();
            assert!(matches!(err, TokenizeError::Load { .. }), "{err}");
        }
    }

    #[test]
    fn builtin_detokenizer_streams_exact_text() {
        let tok = Tokenizer::builtin();
        let ids = tok.encode("Hello, wörld — naïve café!").unwrap();
        let mut d = Detokenizer::new();
        let mut text = String::new();
        for id in &ids {
            text.push_str(&d.push(&tok, &[*id]));
        }
        text.push_str(&d.finish(&tok));
        assert_eq!(text, "Hello, wörld — naïve café!");
    }

    fn real(backend: Backend) -> Option<Tokenizer> {
        match deepseek_v4_tokenizer_path() {
            Some(p) => Some(Tokenizer::from_path(&p, backend).unwrap()),
            None => {
                eprintln!("shared data absent: no DeepSeek-V4 tokenizer under {}; skipping", shared_data_dir().display());
                None
            }
        }
    }

    #[test]
    #[ignore = "needs the shared DeepSeek-V4 tokenizer (SWEEP_SHARED_DATA)"]
    fn real_backends_agree_and_round_trip() {
        let (Some(fast), Some(hf)) = (real(Backend::Fastokens), real(Backend::HuggingFace)) else {
            return;
        };
        assert_eq!(fast.vocab_size(), hf.vocab_size());
        assert_eq!(fast.eos_id(), Some(1));
        assert_eq!(fast.marker_id("<｜User｜>"), Some(128803));
        assert_eq!(hf.marker_id("<｜Assistant｜>"), Some(128804));
        let text = "fn main() {\n    println!(\"héllo, 世界 {}\", 12345);\n}\n<｜User｜>next  turn\t\r\n";
        let a = fast.encode(text).unwrap();
        let b = hf.encode(text).unwrap();
        assert_eq!(a, b);
        assert!(a.contains(&128803), "markers in text are recognised");
        assert_eq!(hf.decode(&b), text);
        assert_eq!(fast.decode(&a), text);
        assert!(fast.alphabet().len() > 1000);
        assert_eq!(fast.alphabet(), hf.alphabet());
        // A sequence of alphabet tokens round-trips exactly.
        let ids: Vec<u32> = fast.alphabet().iter().step_by(7).take(500).copied().collect();
        assert_eq!(fast.encode(&fast.decode(&ids)).unwrap(), ids);
        // Streaming detokenisation of multi-byte text equals the whole decode.
        let mut d = Detokenizer::new();
        let mut s = String::new();
        for id in &b {
            s.push_str(&d.push(&hf, &[*id]));
        }
        s.push_str(&d.finish(&hf));
        assert_eq!(s, text);
    }
}
