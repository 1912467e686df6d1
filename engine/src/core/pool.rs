//! KV accounting: free and evictable tokens per rank, a request's own pages, and
//! moving a request's KV into the radix cache.

use super::{Engine, round_up};
use crate::kv::{Match, radix::ROOT};

impl Engine {
    pub(super) fn free_tokens(&self, rank: usize) -> u64 {
        let r = &self.ranks[rank];
        let used = r.tree.total_units() * self.unit_tokens + r.own_used;
        self.limits.max_total_num_tokens.saturating_sub(used)
    }
    pub(super) fn evictable_tokens(&self, rank: usize) -> u64 {
        self.ranks[rank].tree.evictable_units() * self.unit_tokens
    }
    /// Makes `tokens` free, evicting cached leaves; false if impossible.
    pub(super) fn ensure_free(&mut self, rank: usize, tokens: u64) -> bool {
        let free = self.free_tokens(rank);
        if free >= tokens {
            return true;
        }
        let need_units = (tokens - free).div_ceil(self.unit_tokens);
        let got = self.ranks[rank].tree.evict(need_units);
        self.stats.evicted_tokens_total += got * self.unit_tokens;
        self.free_tokens(rank) >= tokens
    }
    /// Sets a request's own allocation for `kv` tokens; returns the growth.
    pub(super) fn set_own(&mut self, slot: u32, kv: u64) -> i64 {
        let page = self.limits.page_size as u64;
        let r = &mut self.reqs[slot as usize];
        let new = round_up(kv.saturating_sub(r.prefix_tokens), page);
        let delta = new as i64 - r.own as i64;
        r.own = new;
        let rank = &mut self.ranks[r.rank as usize];
        rank.own_used = (rank.own_used as i64 + delta) as u64;
        delta
    }
    /// Inserts the request's first `kv` tokens into the tree and moves its lock to
    /// the new end (SGLang `cache_unfinished_req` / `cache_finished_req`).
    pub(super) fn cache_prefix(&mut self, slot: u32, kv: u64, relock: bool) {
        if self.cfg.disable_radix_cache {
            return;
        }
        let unit = self.unit_tokens;
        let (rank, key, old_lock, prefix) = {
            let r = &self.reqs[slot as usize];
            (r.rank as usize, r.key.clone(), r.lock, r.prefix_tokens)
        };
        let units = ((kv / unit) as u32).min(key.units());
        let hint = Match { units: (prefix / unit) as u32, node: old_lock.unwrap_or(ROOT) };
        let m = self.ranks[rank].tree.insert_hinted(&key, units, hint);
        self.ranks[rank].ideal.insert(&key, units);
        let end_units = m.units.max(units);
        let tree = &mut self.ranks[rank].tree;
        if relock {
            tree.lock(m.node);
        } else {
            // A finished sequence keeps its last window's KV.
            tree.mark_tail(m.node);
        }
        if let Some(n) = old_lock {
            tree.unlock(n);
        }
        let r = &mut self.reqs[slot as usize];
        r.lock = if relock { Some(m.node) } else { None };
        r.prefix_tokens = if relock { end_units as u64 * unit } else { 0 };
        let kv_now = r.kv;
        self.set_own(slot, kv_now);
    }
}
