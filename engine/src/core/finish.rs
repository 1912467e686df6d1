//! A request's end: its usage, its KV cached (unless aborted) and its slot freed.

use super::{Engine, FinishReason, Output, Phase, RequestError, Usage};
use crate::kv::UnitKey;
use crate::time::Time;
use std::sync::Arc;

impl Engine {
    pub(super) fn usage(&self, slot: u32) -> Usage {
        let r = &self.reqs[slot as usize];
        Usage {
            prompt_tokens: r.prompt_len,
            cached_tokens: r.cached.unwrap_or(0),
            completion_tokens: r.generated as u64,
            num_retractions: r.retractions,
            spec_verify_ct: r.verify_ct,
            queue_time: r.queue_time,
        }
    }

    /// Ends a request: caches its KV (unless aborted), frees it, reports it
    /// (through `pending`; the caller moves it to the output).
    pub(super) fn finish(&mut self, slot: u32, t: Time, reason: FinishReason, error: Option<RequestError>, to_pending: bool) {
        let usage = self.usage(slot);
        let id = self.reqs[slot as usize].id;
        if reason != FinishReason::Abort {
            let kv = self.reqs[slot as usize].kv;
            self.cache_prefix(slot, kv, false);
            self.stats.num_requests_total += 1;
            self.stats.prompt_tokens_total += usage.prompt_tokens;
            self.stats.cached_tokens_total += usage.cached_tokens;
            self.stats.generation_tokens_total += usage.completion_tokens;
        } else if error == Some(RequestError::Aborted) {
            self.stats.num_aborted_requests_total += 1;
        }
        self.release(slot);
        let o = Output::Finished { id, time: t, reason, usage, error };
        let _ = to_pending;
        self.pending.push(o);
    }

    /// Frees a request's KV and slot.
    pub(super) fn release(&mut self, slot: u32) {
        let (rank, lock, id, plen, phase) = {
            let r = &self.reqs[slot as usize];
            (r.rank as usize, r.lock, r.id, r.prompt_len, r.phase)
        };
        if phase == Phase::Done {
            return;
        }
        if let Some(n) = lock {
            self.ranks[rank].tree.unlock(n);
        }
        {
            let r = &mut self.reqs[slot as usize];
            r.lock = None;
            r.prefix_tokens = 0;
        }
        self.set_own(slot, 0);
        let r = &mut self.reqs[slot as usize];
        r.phase = Phase::Done;
        // Drop the key's hashes now rather than when the slot is reused.
        r.key = UnitKey::new(Arc::from(Vec::<u64>::new()), None, 1);
        let rk = &mut self.ranks[rank];
        rk.assigned_reqs -= 1;
        rk.assigned_tokens -= plen;
        if rk.chunked == Some(slot) {
            rk.chunked = None;
        }
        self.by_id.remove(&id);
        self.free_slots.push(slot);
    }
}
