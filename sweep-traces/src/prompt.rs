//! Prompt synthesis from hash ids (AgentX §2), without materialising tokens on the hot path.
//!
//! A [`TurnPrompt`] is a compact description — a conversation plan shared by every request of that
//! conversation, a turn index and the play's cache-bust marker — from which one can produce, on
//! demand:
//! - [`TurnPrompt::page_hashes`]: chained content hashes of each full 64-token page (what a simulated
//!   engine's prefix cache needs), in O(pages) with no token vector;
//! - [`TurnPrompt::token_ids`]: the exact token ids (for an engine that wants them);
//! - [`TurnPrompt::messages`]: chat messages as text for HTTP, through a [`TokenText`] vocabulary.
//!
//! Token stream of one request: the system blocks, then the marker (`[rid:<12 hex>]\n\n`, on the
//! first user message), then the remaining blocks named by `hash_ids`, then deterministic filler
//! blocks when `hash_ids` is shorter than the input, then a partial tail of `in mod block_size`
//! tokens. Blocks, filler and tail total exactly the recorded `in`; the marker adds
//! [`MARKER_TOKENS`] in the token-id form (a server counts whatever its tokenizer makes of it).
//!
//! Every block's content is a pure function of (seed, trace id, hash id): identical hash ids give
//! identical tokens and bytes, so prefix sharing on the wire matches the recording.

mod conversation;
mod marker;
mod messages;
mod pages;
mod tokenizer_vocab;
mod turn;
mod vocab;

use sha2::{Digest, Sha256};

pub use conversation::{ChatMessage, ConversationPlan, Role, Segment, TraceIds, TurnShape};
pub use marker::Marker;
pub use messages::MessagePlan;
pub use pages::PageHashCache;
pub use tokenizer_vocab::TokenizerVocab;
pub use turn::TurnPrompt;
pub use vocab::{EncodeError, TokenText, WordVocab};

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

#[cfg(test)]
mod tests;
