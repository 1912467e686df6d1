//! The prefill batch (SGLang PrefillAdder): a chunked request resumes, queued requests
//! are admitted while the chunk, input and KV budgets allow, and their KV is allocated.

use super::{Engine, Phase, round_up};
use crate::kv::Match;
use crate::time::Time;

/// What is left of a prefill batch's budgets while it is built.
struct Budget {
    /// Chunk tokens (`--chunked-prefill-size`; unlimited without it).
    chunk: u64,
    /// Input tokens (`--max-prefill-tokens`).
    input: u64,
    /// KV tokens held for the future output of the running and admitted requests.
    reserved: u64,
}

impl Budget {
    fn spend(&mut self, take: u64, page: u64) {
        self.chunk = self.chunk.saturating_sub(round_up(take, page));
        self.input = self.input.saturating_sub(take);
    }
}

/// The outcome of one admission attempt.
enum Admit {
    /// Does not fit: it and the requests after it wait.
    Stop,
    /// Admitted whole; more may follow.
    Whole,
    /// Admitted as the rank's chunked request, which ends the batch.
    Chunked,
}

impl Engine {
    fn reserved_for_running(&self, rank: usize) -> u64 {
        let clip = self.cfg.env.clip_max_new_tokens_estimation;
        let ratio = self.ranks[rank].new_token_ratio;
        self.ranks[rank]
            .running
            .iter()
            .map(|&s| {
                let r = &self.reqs[s as usize];
                let left = r.remaining_new().min(clip) as f64;
                if r.ignore_eos { left } else { left * ratio }
            })
            .sum::<f64>() as u64
    }

    /// `--enable-mixed-chunk` (off under speculative decoding, as in SGLang).
    pub(super) fn mixed_chunk(&self) -> bool {
        self.cfg.enable_mixed_chunk && self.limits.speculative.is_none()
    }

    /// Builds this rank's prefill batch (SGLang PrefillAdder); true if non-empty.
    pub(super) fn build_prefill(&mut self, rank: usize, now: Time) -> bool {
        {
            let rk = &self.ranks[rank];
            let max_run = self.limits.max_running_requests_per_dp as usize;
            if rk.chunked.is_none() && (rk.waiting.is_empty() || rk.running.len() >= max_run) {
                return false;
            }
        }
        let mut budget = self.prefill_budget(rank);
        let mut batch: Vec<(u32, u64)> = Vec::new();

        // A chunked request resumes first.
        if let Some(c) = self.ranks[rank].chunked {
            if self.reqs[c as usize].aborted {
                self.ranks[rank].chunked = None;
                self.release(c);
                return self.build_prefill(rank, now);
            }
            if !self.resume_chunked(rank, c, &mut budget, &mut batch) {
                self.ranks[rank].batch.prefill = batch;
                return self.allocate_prefill(rank);
            }
        }

        self.order_waiting(rank);
        let waiting = std::mem::take(&mut self.ranks[rank].waiting);
        let mut stop_at = waiting.len();
        let running_now = self.ranks[rank].running.len();
        for (idx, &slot) in waiting.iter().enumerate() {
            if self.batch_full(running_now, batch.len(), &budget) {
                stop_at = idx;
                break;
            }
            match self.admit(rank, slot, now, running_now, &mut budget, &mut batch) {
                Admit::Stop => {
                    stop_at = idx;
                    break;
                }
                Admit::Chunked => {
                    stop_at = idx + 1;
                    break;
                }
                Admit::Whole => {}
            }
        }
        let mut rest: Vec<u32> = waiting[stop_at.min(waiting.len())..].to_vec();
        // Keep queue order: unadmitted requests before `stop_at` cannot exist
        // (admission stops at the first failure).
        rest.append(&mut self.ranks[rank].waiting);
        self.ranks[rank].waiting = rest;
        if batch.is_empty() {
            return false;
        }
        self.ranks[rank].batch.prefill = batch;
        self.allocate_prefill(rank)
    }

    /// The budgets a new prefill batch starts with.
    fn prefill_budget(&self, rank: usize) -> Budget {
        let mut chunk = self.limits.chunked_prefill_size_per_dp.unwrap_or(u64::MAX);
        if self.mixed_chunk() {
            // The running requests' decode rows ride in the same batch.
            chunk = chunk.saturating_sub(self.ranks[rank].running.len() as u64);
        }
        Budget { chunk, input: self.limits.max_prefill_tokens, reserved: self.reserved_for_running(rank) }
    }

    /// Adds the next chunk of the rank's chunked request to the batch; true when that
    /// was its last chunk, so queued requests may follow it.
    fn resume_chunked(&mut self, rank: usize, c: u32, budget: &mut Budget, batch: &mut Vec<(u32, u64)>) -> bool {
        let page = self.limits.page_size as u64;
        let r = &self.reqs[c as usize];
        let left = r.target - r.kv;
        let future = r.remaining_new().min(self.cfg.env.clip_max_new_tokens_estimation);
        let take = if left > budget.chunk { budget.chunk / page * page } else { left };
        let take = take.max(page.min(left));
        batch.push((c, take));
        budget.spend(take, page);
        if take < left {
            return false;
        }
        budget.reserved += take + future;
        self.ranks[rank].chunked = None;
        true
    }

    /// No more requests fit the batch: running-request cap, `--prefill-max-requests`,
    /// or a spent chunk or input budget.
    fn batch_full(&self, running_now: usize, in_batch: usize, budget: &Budget) -> bool {
        running_now + in_batch >= self.limits.max_running_requests_per_dp as usize
            || self.cfg.prefill_max_requests.is_some_and(|m| in_batch >= m as usize)
            || budget.chunk == 0
            || budget.input == 0
    }

    /// Tries to admit one queued request into the batch.
    fn admit(&mut self, rank: usize, slot: u32, now: Time, running_now: usize, budget: &mut Budget, batch: &mut Vec<(u32, u64)>) -> Admit {
        let page = self.limits.page_size as u64;
        let clip = self.cfg.env.clip_max_new_tokens_estimation;
        self.refresh_match(slot);
        let (target, prefix, need) = {
            let r = &self.reqs[slot as usize];
            let prefix = r.match_tokens.min(r.target.saturating_sub(1)) / self.unit_tokens * self.unit_tokens;
            let extend = r.target - prefix;
            (r.target, prefix, extend + r.remaining_new().min(clip))
        };
        let extend = target - prefix;
        // With nothing else in flight on this rank, only the prompt must fit
        // (otherwise a prompt near the pool size could never start).
        let alone = running_now == 0 && batch.is_empty();
        let need = if alone { extend.min(need) } else { need };
        if !self.kv_fits(rank, need, alone, budget.reserved) {
            return Admit::Stop;
        }
        let chunked = self.limits.chunked_prefill_size_per_dp.is_some() && extend > budget.chunk;
        let take = if chunked { budget.chunk / page * page } else { extend };
        if (chunked && take == 0) || (!chunked && extend > budget.input && !batch.is_empty()) {
            return Admit::Stop;
        }
        if !self.lock_prefix(rank, slot, prefix, need, alone, budget.reserved) {
            return Admit::Stop;
        }
        self.mark_admitted(slot, now);
        self.note_admission(slot);
        batch.push((slot, take));
        budget.spend(take, page);
        if chunked {
            self.ranks[rank].chunked = Some(slot);
            return Admit::Chunked;
        }
        budget.reserved += extend + self.reqs[slot as usize].remaining_new().min(clip);
        Admit::Whole
    }

    /// Whether `need` tokens fit the rank's free and evictable KV beyond `reserved`
    /// (a request alone on its rank needs no page of slack).
    fn kv_fits(&self, rank: usize, need: u64, alone: bool, reserved: u64) -> bool {
        let page = self.limits.page_size as u64;
        let remaining = (self.free_tokens(rank) + self.evictable_tokens(rank)).saturating_sub(reserved);
        if alone { need <= remaining } else { need + page < remaining }
    }

    /// Locks the request's matched prefix (`prefix` tokens) in the cache; false (and
    /// nothing locked) when the KV no longer fits once the prefix cannot be evicted.
    fn lock_prefix(&mut self, rank: usize, slot: u32, prefix: u64, need: u64, alone: bool, reserved: u64) -> bool {
        if prefix == 0 {
            let r = &mut self.reqs[slot as usize];
            r.lock = None;
            r.prefix_tokens = 0;
            return true;
        }
        let (key, hint) = {
            let r = &self.reqs[slot as usize];
            (r.key.clone(), Match { units: (r.match_tokens / self.unit_tokens) as u32, node: r.match_node })
        };
        let max = (prefix / self.unit_tokens) as u32;
        let tree = &mut self.ranks[rank].tree;
        let m = if self.swa_tails_only {
            tree.match_tail_hinted(&key, max, hint, true)
        } else {
            tree.match_prefix_hinted(&key, max, hint, true)
        };
        tree.lock(m.node);
        // Locking takes the prefix out of the evictable budget: check again
        // (SGLang PrefillAdder re-checks under `_lock_node`).
        if !self.kv_fits(rank, need, alone, reserved) {
            self.ranks[rank].tree.unlock(m.node);
            return false;
        }
        let r = &mut self.reqs[slot as usize];
        r.lock = Some(m.node);
        r.prefix_tokens = m.units as u64 * self.unit_tokens;
        true
    }

    /// Moves an admitted request to prefill; a first admission records its cache hit
    /// and queue time.
    fn mark_admitted(&mut self, slot: u32, now: Time) {
        let r = &mut self.reqs[slot as usize];
        r.kv = r.prefix_tokens;
        r.phase = Phase::Prefill;
        if r.cached.is_none() {
            r.cached = Some(r.prefix_tokens);
            r.queue_time = now - r.arrival;
            self.batch_hit += r.prefix_tokens;
            self.batch_computed += r.target - r.prefix_tokens;
        }
    }

    /// Allocates KV for the admitted extends (evicting cache as needed).
    fn allocate_prefill(&mut self, rank: usize) -> bool {
        let batch = std::mem::take(&mut self.ranks[rank].batch.prefill);
        let mut kept = Vec::with_capacity(batch.len());
        for (slot, take) in batch {
            let page = self.limits.page_size as u64;
            let (kv_after, prefix, own) = {
                let r = &self.reqs[slot as usize];
                (r.kv + take, r.prefix_tokens, r.own)
            };
            let need = round_up(kv_after - prefix, page).saturating_sub(own);
            if self.ensure_free(rank, need) {
                self.set_own(slot, kv_after);
                self.reqs[slot as usize].kv = kv_after;
                kept.push((slot, take));
            } else {
                // Should not happen after the admission check; requeue at the front.
                self.unadmit(slot);
                self.ranks[rank].waiting.insert(0, slot);
                if self.ranks[rank].chunked == Some(slot) {
                    self.ranks[rank].chunked = None;
                }
            }
        }
        let ok = !kept.is_empty();
        self.commit_admissions(&kept);
        self.ranks[rank].batch.prefill = kept;
        ok
    }

    /// Back to waiting with no KV: its prefix lock released, its pages returned.
    pub(super) fn unadmit(&mut self, slot: u32) {
        let (rank, lock) = {
            let r = &self.reqs[slot as usize];
            (r.rank as usize, r.lock)
        };
        if let Some(n) = lock {
            self.ranks[rank].tree.unlock(n);
        }
        let r = &mut self.reqs[slot as usize];
        r.lock = None;
        r.prefix_tokens = 0;
        r.kv = 0;
        r.phase = Phase::Waiting;
        self.set_own(slot, 0);
    }
}
