//! KV pressure accounting: pool size, peak use, eviction and what it cost.
//!
//! Eviction (LRU over unlocked radix leaves) and retraction themselves live with the
//! scheduler; this block only measures them, so a point's results can say how much
//! prefill was paid again because the pool was too small: prefixes evicted before a
//! later turn could reuse them, and retracted requests recomputing prompt + output.
//! The reference for "could reuse" is [`IdealCache`](crate::kv::IdealCache): the hit the
//! same request would get on the same rank if nothing had ever been evicted.

use super::Engine;
use serde::Serialize;

/// KV figures over a run (all ranks together unless named per rank).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KvStats {
    /// Attention-DP ranks, each with its own pool and cache.
    pub ranks: u32,
    /// Pool per rank, tokens (`max_total_num_tokens`).
    pub pool_tokens_per_rank: u64,
    /// Pool over all ranks, tokens.
    pub pool_tokens: u64,
    /// Highest Σ over ranks of tokens held by requests (cached-but-idle excluded).
    pub peak_used_tokens: u64,
    /// Highest Σ over ranks of occupied tokens, idle cache included.
    pub peak_occupied_tokens: u64,
    /// Highest per-rank `token_usage` (used / pool).
    pub peak_token_usage: f64,
    /// Tokens removed from the radix cache by LRU eviction.
    pub evicted_tokens: u64,
    /// Prefill tokens at first admissions that an infinite cache would have served.
    pub reprefill_evicted_tokens: u64,
    /// Prompt + output tokens recomputed on re-admission after retraction.
    pub retraction_recompute_tokens: u64,
    pub retractions: u64,
    /// First admissions: prompt tokens, tokens served from cache, and what an
    /// infinite cache would have served.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub ideal_cached_tokens: u64,
    pub prefix_hit_rate: f64,
    pub ideal_prefix_hit_rate: f64,
}

impl KvStats {
    /// Re-prefilled tokens of both kinds.
    pub fn reprefilled_tokens(&self) -> u64 {
        self.reprefill_evicted_tokens + self.retraction_recompute_tokens
    }
}

/// Running totals kept by the engine (rates are derived in snapshots).
#[derive(Clone, Debug, Default)]
pub(super) struct KvTally {
    peak_used: u64,
    peak_occupied: u64,
    peak_usage: f64,
    reprefill_evicted: u64,
    retraction_recompute: u64,
    prompt: u64,
    cached: u64,
    ideal_cached: u64,
    /// Admissions of the batch being built, counted once their KV is allocated.
    pending: Vec<Admission>,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Admission {
    slot: u32,
    /// First admission (else a re-admission after retraction).
    first: bool,
    target: u64,
    cached: u64,
    ideal: u64,
}

impl Engine {
    /// Notes an admission's prefix hit and, for a first admission, the hit an
    /// infinite cache would give; counted when its KV is allocated.
    pub(super) fn note_admission(&mut self, slot: u32) {
        let r = &self.reqs[slot as usize];
        let first = r.retractions == 0;
        let ideal = if !first || self.cfg.disable_radix_cache || self.cfg.env.radix_force_miss {
            r.prefix_tokens
        } else {
            let max = self.max_prefix_units(r);
            (self.ranks[r.rank as usize].ideal.matched(&r.key, max) as u64 * self.unit_tokens).max(r.prefix_tokens)
        };
        let a = Admission { slot, first, target: r.target, cached: r.prefix_tokens, ideal };
        self.kv_tally.pending.push(a);
    }

    /// Counts the admissions that got their KV (the others go back to the queue).
    pub(super) fn commit_admissions(&mut self, kept: &[(u32, u64)]) {
        let t = &mut self.kv_tally;
        for a in std::mem::take(&mut t.pending) {
            if !kept.iter().any(|&(s, _)| s == a.slot) {
                continue;
            }
            if a.first {
                t.prompt += a.target;
                t.cached += a.cached;
                t.ideal_cached += a.ideal;
                t.reprefill_evicted += a.ideal - a.cached;
            } else {
                t.retraction_recompute += a.target - a.cached;
            }
        }
    }

    /// Updates the peaks after a step's allocations.
    pub(super) fn note_kv_peak(&mut self) {
        let cap = self.limits.max_total_num_tokens.max(1);
        let (mut used, mut occupied, mut usage) = (0u64, 0u64, 0.0f64);
        for i in 0..self.ranks.len() {
            let r = &self.ranks[i];
            let occ = r.tree.total_units() * self.unit_tokens + r.own_used;
            let u = occ - self.evictable_tokens(i);
            occupied += occ;
            used += u;
            usage = usage.max(u as f64 / cap as f64);
        }
        let t = &mut self.kv_tally;
        t.peak_used = t.peak_used.max(used);
        t.peak_occupied = t.peak_occupied.max(occupied);
        t.peak_usage = t.peak_usage.max(usage);
    }

    pub(super) fn kv_stats(&self) -> KvStats {
        let t = &self.kv_tally;
        let ranks = self.ranks.len() as u32;
        let rate = |x: u64| if t.prompt > 0 { x as f64 / t.prompt as f64 } else { 0.0 };
        KvStats {
            ranks,
            pool_tokens_per_rank: self.limits.max_total_num_tokens,
            pool_tokens: self.limits.max_total_num_tokens * ranks as u64,
            peak_used_tokens: t.peak_used,
            peak_occupied_tokens: t.peak_occupied,
            peak_token_usage: t.peak_usage,
            evicted_tokens: self.stats.evicted_tokens_total,
            reprefill_evicted_tokens: t.reprefill_evicted,
            retraction_recompute_tokens: t.retraction_recompute,
            retractions: self.stats.num_retracted_requests_total,
            prompt_tokens: t.prompt,
            cached_tokens: t.cached,
            ideal_cached_tokens: t.ideal_cached,
            prefix_hit_rate: rate(t.cached),
            ideal_prefix_hit_rate: rate(t.ideal_cached),
        }
    }
}
