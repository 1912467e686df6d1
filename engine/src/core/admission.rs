//! Submission: validation against the limits, the request's state, and the
//! attention-DP rank it goes to (load balancing or the router's policies).

use super::{Engine, Phase, Req, Request, SubmitError};
use crate::args::{LoadBalanceMethod, RouterConfig, RouterPolicy};
use crate::kv::{UnitKey, radix::ROOT};
use crate::prompt::chain_hash;
use crate::time::Time;
use std::sync::Arc;

/// The hashes of the output's blocks: given by the caller, or unique hashes that match
/// nothing.
fn output_tail(req: &Request, max_new: u32, seq: u64) -> Arc<[u64]> {
    if let Some(c) = &req.continuation {
        return c.clone();
    }
    let bt = req.prompt.block_tokens();
    // Capped: unbounded requests would otherwise hash a whole context.
    let total = (req.prompt.len() + (max_new as u64).min(32_768)) / bt as u64;
    let extra = total.saturating_sub(req.prompt.full_blocks() as u64) as usize;
    let mut h = chain_hash(req.prompt.blocks().last().copied().unwrap_or(0), req.id ^ 0x0u64.wrapping_sub(seq + 1));
    (0..extra)
        .map(|i| {
            h = chain_hash(h, i as u64 ^ 0xD00D);
            h
        })
        .collect::<Vec<_>>()
        .into()
}

impl Req {
    /// A request as it enters the queue.
    fn queued(req: &Request, key: UnitKey, max_new: u32, rank: u32, now: Time, seq: u64, hrrn_mark: u64) -> Req {
        Req {
            id: req.id,
            prompt_len: req.prompt.len(),
            key,
            max_new,
            ignore_eos: req.ignore_eos,
            // EOS is itself a generated token: it ends the output at position >= 1.
            eos_after: if req.ignore_eos { None } else { req.eos_after.map(|e| e.max(1)) },
            rank,
            arrival: now,
            seq,
            phase: Phase::Waiting,
            generated: 0,
            target: req.prompt.len(),
            kv: 0,
            prefix_tokens: 0,
            lock: None,
            own: 0,
            cached: None,
            queue_time: Time::ZERO,
            retractions: 0,
            verify_ct: 0,
            unsent: 0,
            sent_first: false,
            aborted: false,
            hrrn_mark,
            match_tokens: 0,
            match_node: ROOT,
            deprioritized: false,
        }
    }
}

impl Engine {
    fn validate(&mut self, r: &Request) -> Result<(u32, u32), SubmitError> {
        let input = r.prompt.len();
        if input == 0 {
            return Err(SubmitError::EmptyPrompt);
        }
        let l = &self.limits;
        if input >= l.context_length {
            return Err(SubmitError::PromptTooLong { input, context: l.context_length });
        }
        if let Some(m) = r.max_new_tokens
            && input + m as u64 > l.context_length
        {
            return Err(SubmitError::ContextExceeded { input, max_new: m as u64, total: input + m as u64, context: l.context_length });
        }
        if input >= l.max_req_input_len {
            return Err(SubmitError::ExceedsKvPool { input, max: l.max_req_input_len });
        }
        if self.by_id.contains_key(&r.id) {
            return Err(SubmitError::DuplicateId(r.id));
        }
        let bt = r.prompt.block_tokens();
        let page = l.page_size;
        match self.block_tokens {
            Some(b) if b != bt => {
                return Err(SubmitError::BlockSize { got: bt, page, expected: b });
            }
            _ => {}
        }
        if !(page.is_multiple_of(bt) || bt.is_multiple_of(page)) {
            return Err(SubmitError::BlockSize { got: bt, page, expected: bt });
        }
        if let Some(q) = self.cfg.max_queued_requests {
            let queued: usize = self.ranks.iter().map(|r| r.waiting.len()).sum();
            if queued >= q as usize {
                return Err(SubmitError::QueueFull);
            }
        }
        if let Some(d) = r.dp_rank
            && d >= self.ranks.len() as u32
        {
            return Err(SubmitError::BadDpRank { rank: d, size: self.ranks.len() as u32 });
        }
        let mut max_new = (l.max_req_len - input - 1).min(u32::MAX as u64) as u32;
        if let Some(m) = r.max_new_tokens {
            max_new = max_new.min(m);
        }
        if let Some(lim) = self.cfg.env.max_new_tokens_limit {
            max_new = max_new.min(lim.min(u32::MAX as u64) as u32);
        }
        let stride = if bt < page { page / bt } else { 1 };
        Ok((max_new.max(1), stride))
    }

    /// Queues a request arriving at `now`. `now` must not be earlier than the last
    /// `advance`, and events due before `now` must have been processed.
    pub fn submit(&mut self, now: Time, req: Request) -> Result<(), SubmitError> {
        if let Some(p) = self.next_event_time()
            && p < now
            && self.pending.is_empty()
        {
            return Err(SubmitError::NotAdvanced { now, pending: p });
        }
        let now = now.max(self.now);
        let (max_new, stride) = self.validate(&req)?;
        let bt = req.prompt.block_tokens();
        if self.block_tokens.is_none() {
            self.block_tokens = Some(bt);
            self.unit_tokens = (self.limits.page_size as u64).max(bt as u64);
        }
        let rank = self.dispatch(now, &req);
        let seq = self.seq;
        self.seq += 1;
        let tail = output_tail(&req, max_new, seq);
        let key = UnitKey::new(req.prompt.blocks().clone(), Some(tail), stride);
        let hrrn_mark = self.ranks[rank as usize].prefill_tokens_done;
        let slot = self.store(Req::queued(&req, key, max_new, rank, now, seq, hrrn_mark));
        self.by_id.insert(req.id, slot);
        if self.recv.skips() {
            self.recv.inbox.push(slot);
        } else {
            self.ranks[rank as usize].waiting.push(slot);
        }
        let rk = &mut self.ranks[rank as usize];
        rk.assigned_reqs += 1;
        rk.assigned_tokens += req.prompt.len();
        if self.in_flight.is_none() && self.wake_at.is_none() {
            self.wake_at = Some(now);
        }
        Ok(())
    }

    /// Puts a request in a free slot (or a new one) and returns the slot.
    fn store(&mut self, r: Req) -> u32 {
        match self.free_slots.pop() {
            Some(s) => {
                self.reqs[s as usize] = r;
                s
            }
            None => {
                self.reqs.push(r);
                (self.reqs.len() - 1) as u32
            }
        }
    }

    /// Picks the attention-DP rank (router, load-balance method or pin).
    fn dispatch(&mut self, now: Time, req: &Request) -> u32 {
        let n = self.ranks.len() as u32;
        if n == 1 {
            return 0;
        }
        if let Some(d) = req.dp_rank {
            return d;
        }
        if let Some(router) = self.cfg.router.clone()
            && router.dp_aware
        {
            return self.route(now, req, &router);
        }
        match self.cfg.load_balance_method {
            LoadBalanceMethod::RoundRobin | LoadBalanceMethod::FollowBootstrapRoom => {
                let r = self.rr_next % n;
                self.rr_next = self.rr_next.wrapping_add(1);
                r
            }
            LoadBalanceMethod::TotalRequests => (0..n).min_by_key(|&i| (self.ranks[i as usize].assigned_reqs, i)).unwrap_or(0),
            LoadBalanceMethod::TotalTokens => (0..n)
                .min_by_key(|&i| {
                    let r = &self.ranks[i as usize];
                    (r.assigned_tokens, r.assigned_reqs, i)
                })
                .unwrap_or(0),
        }
    }

    /// sglang-router policies with `--dp-aware`: cache_aware keeps an approximate
    /// prefix tree per rank of what it routed there.
    fn route(&mut self, now: Time, req: &Request, router: &RouterConfig) -> u32 {
        let n = self.ranks.len() as u32;
        match router.policy {
            RouterPolicy::RoundRobin => {
                let r = self.rr_next % n;
                self.rr_next = self.rr_next.wrapping_add(1);
                r
            }
            RouterPolicy::Random => self.rng.below(n as u64) as u32,
            RouterPolicy::PowerOfTwo => {
                let a = self.rng.below(n as u64) as u32;
                let b = self.rng.below(n as u64) as u32;
                if self.ranks[b as usize].assigned_reqs < self.ranks[a as usize].assigned_reqs { b } else { a }
            }
            RouterPolicy::CacheAware => {
                let bt = req.prompt.block_tokens() as u64;
                let key = UnitKey::new(req.prompt.blocks().clone(), None, 1);
                // Periodic LRU eviction down to max_tree_size (tokens here).
                if now.saturating_sub(self.router_last_evict) >= Time::from_secs(router.eviction_interval_secs) {
                    self.router_last_evict = now;
                    for r in &mut self.ranks {
                        let size = r.router_tree.total_units() * bt;
                        if size > router.max_tree_size {
                            r.router_tree.evict((size - router.max_tree_size) / bt);
                        }
                    }
                }
                let loads: Vec<u64> = self.ranks.iter().map(|r| r.assigned_reqs).collect();
                let (max_l, min_l) = (*loads.iter().max().unwrap_or(&0), *loads.iter().min().unwrap_or(&0));
                let imbalanced = max_l.saturating_sub(min_l) > router.balance_abs_threshold
                    && max_l as f64 > router.balance_rel_threshold * min_l as f64;
                let chosen = if imbalanced {
                    (0..n).min_by_key(|&i| (loads[i as usize], i)).unwrap_or(0)
                } else {
                    let mut best = (0u32, 0u32);
                    for i in 0..n {
                        let m = self.ranks[i as usize].router_tree.match_prefix(&key, u32::MAX, false).units;
                        if m > best.1 {
                            best = (i, m);
                        }
                    }
                    let rate = best.1 as f64 * bt as f64 / req.prompt.len().max(1) as f64;
                    if rate > router.cache_threshold {
                        best.0
                    } else {
                        (0..n).min_by_key(|&i| (self.ranks[i as usize].router_tree.total_units(), i)).unwrap_or(0)
                    }
                };
                self.ranks[chosen as usize].router_tree.insert(&key, key.units());
                chosen
            }
        }
    }
}
