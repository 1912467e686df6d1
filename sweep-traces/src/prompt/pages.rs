//! Chained page hashes of a prompt (what a simulated engine's prefix cache keys on), and a cache
//! that hashes only the pages a conversation's next turn adds.

use std::collections::HashMap;
use std::sync::Arc;

use super::{CHAIN_ROOT, ConversationPlan, MARKER_TOKENS, Marker, MixHasher, TurnPrompt, combine};

impl TurnPrompt {
    /// Chained content hashes of each full page of `page` tokens of the token-id form (the marker
    /// included). Page i's hash covers pages 0..=i, so equal hashes mean equal prefixes.
    pub fn page_hashes(&self, page: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.total_tokens() as usize / page);
        self.page_hashes_into(page, &mut out);
        out
    }

    /// As [`TurnPrompt::page_hashes`], appending to `out` (reuse a buffer on hot paths).
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
    /// [`TurnPrompt::shared_tokens_with_previous`]). Only the pages after the shared prefix are hashed.
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

    /// The chained page hashes of `p` (same result as [`TurnPrompt::page_hashes`]), shared: hand them
    /// to an engine as is (e.g. `engine::Prompt::from_chained(hashes, 64, p.total_tokens())`).
    pub fn page_hashes(&mut self, p: &TurnPrompt) -> Arc<[u64]> {
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
