//! Prompt representation: chained block hashes instead of token ids.
//!
//! A prompt of N tokens is stored as one `u64` per *full* block of `block_tokens`
//! tokens, where block i's hash mixes block i's content with block i−1's hash. Equal
//! hash at position i therefore means an equal whole prefix through block i, which is
//! what lets the radix cache match 100K–1M-token prompts by comparing a handful of
//! hashes instead of millions of token ids. The trailing partial block (if any) is
//! counted in `len` but never cached (SGLang caches whole pages only).

use std::sync::Arc;

/// Mixes a parent chain hash with one block's content hash (a 64-bit finaliser;
/// collisions are astronomically unlikely at the sizes a run produces).
#[inline]
pub fn chain_hash(parent: u64, block: u64) -> u64 {
    let mut z = parent.rotate_left(29).wrapping_add(block.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_add(0x632B_E59B_D9B4_E019);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-style content hash of one block of token ids (before chaining).
#[inline]
pub fn block_content_hash(tokens: &[u32]) -> u64 {
    let mut c: u64 = 0xCBF2_9CE4_8422_2325;
    for &t in tokens {
        c = (c ^ t as u64).wrapping_mul(0x0000_0100_0000_01B3);
    }
    c
}

/// Seed of every chain, so that the first block's hash is never the raw block id.
pub const CHAIN_ROOT: u64 = 0x5157_4545_505F_4B56;

/// A request's prompt: chained hashes of its full blocks plus its exact token count.
///
/// Cloning is cheap (the hashes are shared behind an `Arc`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    blocks: Arc<[u64]>,
    block_tokens: u32,
    len: u64,
}

/// Why a prompt could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error("block_tokens must be > 0")]
    ZeroBlockTokens,
    #[error(
        "prompt of {len} tokens needs {needed} full blocks of {block_tokens} tokens but {given} block hashes were given; pass one hash per full block (a trailing partial block's hash may be included and is ignored)"
    )]
    BlockCountMismatch { len: u64, block_tokens: u32, needed: usize, given: usize },
}

impl Prompt {
    /// Hashes real token ids in blocks of `block_tokens` (use the engine's page size,
    /// or the block size of the trace the prompt came from).
    pub fn from_tokens(tokens: &[u32], block_tokens: u32) -> Result<Prompt, PromptError> {
        if block_tokens == 0 {
            return Err(PromptError::ZeroBlockTokens);
        }
        let bt = block_tokens as usize;
        let mut blocks = Vec::with_capacity(tokens.len() / bt);
        let mut h = CHAIN_ROOT;
        for chunk in tokens.chunks_exact(bt) {
            h = chain_hash(h, block_content_hash(chunk));
            blocks.push(h);
        }
        Ok(Prompt { blocks: blocks.into(), block_tokens, len: tokens.len() as u64 })
    }

    /// Builds a prompt from per-block content ids (e.g. AgentX `hash_ids`, one per
    /// 64-token block) and the exact token count. The ids are chained here, so ids
    /// that are only unique per position still give prefix-unique hashes.
    pub fn from_block_ids(block_ids: &[u64], block_tokens: u32, len: u64) -> Result<Prompt, PromptError> {
        if block_tokens == 0 {
            return Err(PromptError::ZeroBlockTokens);
        }
        let needed = (len / block_tokens as u64) as usize;
        if block_ids.len() < needed || block_ids.len() > needed + 1 {
            return Err(PromptError::BlockCountMismatch { len, block_tokens, needed, given: block_ids.len() });
        }
        let mut h = CHAIN_ROOT;
        let blocks: Vec<u64> = block_ids[..needed]
            .iter()
            .map(|&b| {
                h = chain_hash(h, b);
                h
            })
            .collect();
        Ok(Prompt { blocks: blocks.into(), block_tokens, len })
    }

    /// Wraps hashes that are already chained (e.g. kept by a caller that extends a
    /// conversation turn by turn with [`chain_hash`]). No copy is made.
    pub fn from_chained(blocks: Arc<[u64]>, block_tokens: u32, len: u64) -> Result<Prompt, PromptError> {
        if block_tokens == 0 {
            return Err(PromptError::ZeroBlockTokens);
        }
        let needed = (len / block_tokens as u64) as usize;
        if blocks.len() != needed {
            return Err(PromptError::BlockCountMismatch { len, block_tokens, needed, given: blocks.len() });
        }
        Ok(Prompt { blocks, block_tokens, len })
    }

    /// A prompt of `len` tokens that shares no prefix with anything else built
    /// from a different `salt` (for synthetic loads and tests).
    pub fn unique(salt: u64, block_tokens: u32, len: u64) -> Prompt {
        let n = (len / block_tokens.max(1) as u64) as usize;
        let ids: Vec<u64> = (0..n as u64).map(|i| chain_hash(salt, i ^ 0xA5A5_0000_0000_0000)).collect();
        Prompt::from_block_ids(&ids, block_tokens.max(1), len).expect("consistent by construction")
    }

    /// Chained hashes of the full blocks that follow this prompt's full blocks once
    /// `output` tokens are appended (for [`crate::Request::continuation`]).
    /// `prompt_tokens` are the ids this prompt was built from (only its trailing
    /// partial block is read), so a finished turn's cached output matches the next
    /// turn's prompt when that prompt is built from the same ids.
    pub fn continuation_from_tokens(&self, prompt_tokens: &[u32], output: &[u32]) -> Arc<[u64]> {
        let bt = self.block_tokens as usize;
        let start = self.blocks.len() * bt;
        let tail = prompt_tokens.get(start..).unwrap_or(&[]);
        let mut h = self.blocks.last().copied().unwrap_or(CHAIN_ROOT);
        let joined: Vec<u32> = tail.iter().chain(output.iter()).copied().collect();
        joined
            .chunks_exact(bt)
            .map(|c| {
                h = chain_hash(h, block_content_hash(c));
                h
            })
            .collect()
    }

    /// Chains further per-block ids after this prompt's full blocks (the
    /// [`from_block_ids`](Self::from_block_ids) counterpart of
    /// [`continuation_from_tokens`](Self::continuation_from_tokens)).
    pub fn continuation_from_block_ids(&self, block_ids: &[u64]) -> Arc<[u64]> {
        let mut h = self.blocks.last().copied().unwrap_or(CHAIN_ROOT);
        block_ids
            .iter()
            .map(|&b| {
                h = chain_hash(h, b);
                h
            })
            .collect()
    }

    /// Total tokens.
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn block_tokens(&self) -> u32 {
        self.block_tokens
    }
    /// Chained hashes of the full blocks.
    pub fn blocks(&self) -> &Arc<[u64]> {
        &self.blocks
    }
    /// Number of full blocks.
    pub fn full_blocks(&self) -> usize {
        self.blocks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_prefixes_give_equal_hashes_and_divergence_propagates() {
        let a: Vec<u32> = (0..1000).collect();
        let mut b = a.clone();
        b[300] = 7;
        let pa = Prompt::from_tokens(&a, 64).unwrap();
        let pb = Prompt::from_tokens(&b, 64).unwrap();
        assert_eq!(pa.len(), 1000);
        assert_eq!(pa.full_blocks(), 15);
        // blocks 0..4 cover tokens 0..320; token 300 is in block 4
        assert_eq!(pa.blocks()[..4], pb.blocks()[..4]);
        for i in 4..15 {
            assert_ne!(pa.blocks()[i], pb.blocks()[i]);
        }
    }

    #[test]
    fn continuations_match_the_next_turn() {
        let turn1: Vec<u32> = (0..1000).collect();
        let output: Vec<u32> = (5000..5300).collect();
        let p1 = Prompt::from_tokens(&turn1, 64).unwrap();
        let cont = p1.continuation_from_tokens(&turn1, &output);
        let mut turn2 = turn1.clone();
        turn2.extend(&output);
        turn2.extend(9000..9500);
        let p2 = Prompt::from_tokens(&turn2, 64).unwrap();
        // 1300 tokens = 20 full blocks; the prompt had 15
        assert_eq!(cont.len(), 5);
        assert_eq!(&p2.blocks()[15..20], &cont[..]);
        let q1 = Prompt::from_block_ids(&[1, 2, 3], 64, 192).unwrap();
        let qc = q1.continuation_from_block_ids(&[4, 5]);
        let q2 = Prompt::from_block_ids(&[1, 2, 3, 4, 5], 64, 320).unwrap();
        assert_eq!(&q2.blocks()[3..], &qc[..]);
    }

    #[test]
    fn block_ids_are_chained_and_validated() {
        let p = Prompt::from_block_ids(&[1, 2, 3], 64, 150).unwrap();
        assert_eq!(p.full_blocks(), 2);
        let q = Prompt::from_block_ids(&[9, 2], 64, 128).unwrap();
        assert_ne!(p.blocks()[1], q.blocks()[1], "same id after different parent");
        let err = Prompt::from_block_ids(&[1], 64, 200).unwrap_err();
        assert!(matches!(err, PromptError::BlockCountMismatch { needed: 3, .. }));
        assert!(err.to_string().contains("one hash per full block"));
    }
}
