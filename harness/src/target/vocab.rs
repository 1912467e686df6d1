//! The synthesis tokenizer of the HTTP target: the server's own vocabulary when it is known, so
//! a block of N synthesized tokens is N tokens on the server too (spec `agentx.md` checklist 6)
//! and live ISLs match the virtual clock's. Without it the harness's [`WordVocab`] is used,
//! whose words a foreign tokenizer may split.

use crate::prompt::{TokenText, WordVocab};
use engine::tokenize::{Backend, Tokenizer};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Content tokens drawn from the tokenizer's round-trip alphabet (`" "` + letters), the marker
/// written as text and encoded by the same tokenizer.
pub struct EngineVocab {
    tok: Tokenizer,
}

impl EngineVocab {
    pub fn new(tok: Tokenizer) -> Self {
        EngineVocab { tok }
    }
}

impl TokenText for EngineVocab {
    fn content_vocab(&self) -> u32 {
        self.tok.alphabet().len() as u32
    }
    fn content_token(&self, r: u64) -> u32 {
        let a = self.tok.alphabet();
        a[(r % a.len() as u64) as usize]
    }
    fn marker_ids(&self, hex12: &str) -> Vec<u32> {
        self.tok.encode(&format!("[rid:{hex12}]\n\n")).unwrap_or_default()
    }
    fn decode(&self, ids: &[u32]) -> String {
        self.tok.decode(ids)
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tok.encode(text).map_err(|e| e.to_string())
    }
}

/// The synthesis vocabulary for a server: an explicit `tokenizer.json` path, else the reference
/// engine's built-in vocabulary when `/server_info` says the server uses it, else the server's
/// `tokenizer_path` when that file exists here, else [`WordVocab`]. Returns it and its name.
pub fn for_server(explicit: Option<&Path>, info: Option<&Value>) -> Result<(Arc<dyn TokenText>, String), String> {
    let load = |p: &Path| -> Result<(Arc<dyn TokenText>, String), String> {
        let t = Tokenizer::from_path(p, Backend::Fastokens).map_err(|e| format!("--tokenizer {}: {e}", p.display()))?;
        Ok((Arc::new(EngineVocab::new(t)), p.display().to_string()))
    };
    if let Some(p) = explicit {
        return load(p);
    }
    if let Some(i) = info {
        if i["tokenizer_backend"].as_str() == Some("builtin") {
            return Ok((Arc::new(EngineVocab::new(Tokenizer::builtin())), "builtin (the reference engine's)".into()));
        }
        if let Some(p) = i["tokenizer_path"].as_str().map(Path::new).filter(|p| p.exists()) {
            return load(p);
        }
    }
    Ok((Arc::new(WordVocab::default()), "sweep word vocabulary".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_synthesis_round_trips_token_for_token() {
        let v = EngineVocab::new(Tokenizer::builtin());
        let ids: Vec<u32> = (0..500u64).map(|r| v.content_token(r.wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect();
        let mut all = v.marker_ids("0a1b2c3d4e5f");
        assert!(!all.is_empty());
        all.extend(&ids);
        assert_eq!(v.encode(&v.decode(&all)).unwrap(), all);
        assert!(v.decode(&all).starts_with("[rid:0a1b2c3d4e5f]\n\n"));
    }
}
