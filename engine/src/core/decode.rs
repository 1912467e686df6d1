//! The decode (or verify) batch: KV for the next tokens, retraction when the pool
//! cannot hold them, and the new-token ratio that follows.

use super::{Engine, FinishReason, RequestError, round_up};

impl Engine {
    /// Prepares a decode (or verify) step: KV for the next tokens, retracting the
    /// least-progressed requests if the pool cannot hold them.
    pub(super) fn build_decode(&mut self, rank: usize) -> bool {
        if self.ranks[rank].running.is_empty() {
            return false;
        }
        let page = self.limits.page_size as u64;
        let window = self.limits.speculative.as_ref().map_or(1, |s| s.kv_window as u64);
        let need_of = |e: &Engine, s: u32| {
            let r = &e.reqs[s as usize];
            round_up((r.kv + window).saturating_sub(r.prefix_tokens), page).saturating_sub(r.own)
        };
        let mut need: u64 = self.ranks[rank].running.iter().map(|&s| need_of(self, s)).sum();
        let mut retracted = 0u32;
        while need > self.free_tokens(rank) + self.evictable_tokens(rank) {
            if self.ranks[rank].running.len() <= 1 && (self.ranks[rank].chunked.is_some() || !self.ranks[rank].batch.prefill.is_empty()) {
                // A chunked prefill holds the pages: the last running request waits for it to
                // finish (it then joins the batch and the usual retraction applies).
                return false;
            }
            if self.ranks[rank].running.len() <= 1 {
                // Even one request cannot continue: abort it.
                let s = self.ranks[rank].running.pop().expect("non-empty");
                let now = self.now;
                self.finish(s, now, FinishReason::Abort, Some(RequestError::OutOfMemory), true);
                self.stats.num_aborted_requests_total += 1;
                need = 0;
                break;
            }
            // Victim: fewest generated tokens, then longest prompt.
            let reqs = &self.reqs;
            let (vi, _) = self.ranks[rank]
                .running
                .iter()
                .enumerate()
                .min_by_key(|&(_, &s)| {
                    let r = &reqs[s as usize];
                    (r.generated, std::cmp::Reverse(r.prompt_len), std::cmp::Reverse(r.seq))
                })
                .expect("non-empty");
            let s = self.ranks[rank].running.swap_remove(vi);
            need -= need_of(self, s);
            self.retract(s);
            retracted += 1;
        }
        if retracted > 0 {
            let (mut gen_sum, mut maxn) = (0u64, 0u64);
            let n = self.ranks[rank].running.len() as u64;
            for &s in &self.ranks[rank].running {
                gen_sum += self.reqs[s as usize].generated as u64;
                maxn += self.reqs[s as usize].max_new as u64;
            }
            let steps = self.cfg.env.retract_decode_steps as u64;
            self.ranks[rank].new_token_ratio = ((gen_sum + steps * n) as f64 / (maxn + 1) as f64).min(1.0);
        } else {
            let init = (self.cfg.env.init_new_token_ratio * self.cfg.schedule_conservativeness).min(1.0);
            let min = init * self.cfg.env.min_new_token_ratio_factor;
            let decay = (init - min) / self.cfg.env.new_token_ratio_decay_steps as f64;
            let r = &mut self.ranks[rank];
            r.new_token_ratio = (r.new_token_ratio - decay).max(min);
        }
        self.ranks[rank].retracted_last = retracted;
        if self.ranks[rank].running.is_empty() {
            return false;
        }
        self.ensure_free(rank, need);
        let running = std::mem::take(&mut self.ranks[rank].running);
        for &s in &running {
            let kv = self.reqs[s as usize].kv + window;
            self.set_own(s, kv);
        }
        self.ranks[rank].running = running;
        self.ranks[rank].batch.decode = true;
        true
    }

    fn retract(&mut self, slot: u32) {
        // Its KV and prefix lock go as for an unadmitted request; it recomputes what it generated.
        self.unadmit(slot);
        let (rank, generated, plen) = {
            let r = &mut self.reqs[slot as usize];
            r.target = r.prompt_len + r.generated as u64;
            r.retractions += 1;
            (r.rank as usize, r.generated, r.prompt_len)
        };
        self.stats.num_retracted_requests_total += 1;
        self.stats.num_retracted_input_tokens_total += plen;
        self.stats.num_retracted_output_tokens_total += generated as u64;
        self.ranks[rank].waiting.push(slot);
    }
}
