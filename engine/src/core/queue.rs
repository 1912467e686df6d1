//! Queue order: the schedule policies (fcfs, lof, random, lpm, dfs-weight, hrrn,
//! shortest-prefill-first), prefix matches against the cache, in-batch prefix dedup.

use super::{Engine, Req};
use crate::args::SchedulePolicy;
use crate::kv::{Match, NodeId, RadixTree, radix::ROOT};
use std::collections::HashMap;

impl Engine {
    /// Orders the rank's queue by the schedule policy before admission.
    pub(super) fn order_waiting(&mut self, rank: usize) {
        let policy = if self.cfg.disable_radix_cache && self.cfg.schedule_policy.is_cache_aware() {
            SchedulePolicy::Fcfs
        } else {
            self.cfg.schedule_policy
        };
        let n = self.ranks[rank].waiting.len();
        if n <= 1 && policy != SchedulePolicy::Random {
            if policy.is_cache_aware() && n == 1 {
                let s = self.ranks[rank].waiting[0];
                self.refresh_match(s);
            }
            return;
        }
        match policy {
            // The native tree core matches (and touches) every queued request each
            // pass, so queued prefixes are the last to be evicted.
            SchedulePolicy::Fcfs | SchedulePolicy::RoutingKey => {
                let w = std::mem::take(&mut self.ranks[rank].waiting);
                for &s in &w {
                    self.refresh_match(s);
                }
                self.ranks[rank].waiting = w;
            }
            SchedulePolicy::Lof => {
                let reqs = &self.reqs;
                self.ranks[rank].waiting.sort_by_key(|&s| (std::cmp::Reverse(reqs[s as usize].max_new), reqs[s as usize].seq));
            }
            SchedulePolicy::Random => {
                let mut w = std::mem::take(&mut self.ranks[rank].waiting);
                self.rng.shuffle(&mut w);
                self.ranks[rank].waiting = w;
            }
            SchedulePolicy::Lpm | SchedulePolicy::DfsWeight | SchedulePolicy::Hrrn if n > 128 => {}
            SchedulePolicy::Lpm | SchedulePolicy::DfsWeight | SchedulePolicy::Hrrn | SchedulePolicy::ShortestPrefillFirst => {
                let mut w = std::mem::take(&mut self.ranks[rank].waiting);
                self.match_and_dedup(&w, policy);
                self.sort_by_match(rank, policy, &mut w);
                if policy == SchedulePolicy::DfsWeight {
                    self.order_dfs_weight(rank, &mut w);
                }
                self.ranks[rank].waiting = w;
            }
        }
    }

    /// Refreshes every queued request's prefix match and, under lpm and
    /// shortest-prefill-first, marks the ones sharing an uncached prefix with an
    /// earlier one (in-batch prefix dedup, SGLang's waiting-queue radix tree).
    fn match_and_dedup(&mut self, w: &[u32], policy: SchedulePolicy) {
        let check = self.cfg.env.in_batch_prefix_caching_check_threshold;
        let depri = self.cfg.env.in_batch_prefix_caching_deprioritize_threshold;
        let dedup = matches!(policy, SchedulePolicy::Lpm | SchedulePolicy::ShortestPrefillFirst);
        let mut wq = RadixTree::new();
        for &s in w {
            self.refresh_match(s);
            let r = &self.reqs[s as usize];
            let mut d = false;
            if dedup && r.match_tokens <= check {
                let max = self.max_prefix_units(r);
                let key = r.key.clone();
                let shared = wq.match_prefix(&key, max, false).units as u64 * self.unit_tokens;
                if shared >= depri.max(1) {
                    d = true;
                } else {
                    wq.insert(&key, max);
                }
            }
            self.reqs[s as usize].deprioritized = d;
        }
    }

    /// Sorts by the cache-aware policy's key, on the matches just refreshed.
    fn sort_by_match(&self, rank: usize, policy: SchedulePolicy, w: &mut [u32]) {
        let reqs = &self.reqs;
        let done = self.ranks[rank].prefill_tokens_done;
        match policy {
            SchedulePolicy::ShortestPrefillFirst => w.sort_by_key(|&s| {
                let r = &reqs[s as usize];
                (r.deprioritized, r.target - r.match_tokens.min(r.target), r.seq)
            }),
            SchedulePolicy::Hrrn => w.sort_by(|&a, &b| {
                let ratio = |s: u32| {
                    let r = &reqs[s as usize];
                    let unc = (r.target - r.match_tokens.min(r.target)).max(1) as f64;
                    (done - r.hrrn_mark.min(done)) as f64 / unc + 1.0
                };
                ratio(b).partial_cmp(&ratio(a)).unwrap_or(std::cmp::Ordering::Equal).then(reqs[a as usize].seq.cmp(&reqs[b as usize].seq))
            }),
            _ => w.sort_by_key(|&s| {
                let r = &reqs[s as usize];
                (r.deprioritized, std::cmp::Reverse(r.match_tokens), r.seq)
            }),
        }
    }

    pub(super) fn max_prefix_units(&self, r: &Req) -> u32 {
        // At least one token must be computed to sample from.
        (((r.target.saturating_sub(1)) / self.unit_tokens) as u32).min(r.key.units())
    }

    pub(super) fn refresh_match(&mut self, slot: u32) {
        if self.cfg.disable_radix_cache || self.cfg.env.radix_force_miss {
            self.reqs[slot as usize].match_tokens = 0;
            self.reqs[slot as usize].match_node = ROOT;
            return;
        }
        let r = &self.reqs[slot as usize];
        let max = self.max_prefix_units(r);
        let key = r.key.clone();
        let rank = r.rank as usize;
        let hint = Match { units: (r.match_tokens / self.unit_tokens) as u32, node: r.match_node };
        let tree = &mut self.ranks[rank].tree;
        let m = if self.swa_tails_only {
            tree.match_tail_hinted(&key, max, hint, true)
        } else {
            tree.match_prefix_hinted(&key, max, hint, true)
        };
        self.reqs[slot as usize].match_tokens = m.units as u64 * self.unit_tokens;
        self.reqs[slot as usize].match_node = m.node;
    }

    /// SGLang `dfs-weight`: depth-first over the radix tree, heavier subtrees (more
    /// waiting requests under them) first, a node's own requests after its children.
    /// Only the nodes on waiting requests' match paths are visited.
    fn order_dfs_weight(&mut self, rank: usize, w: &mut Vec<u32>) {
        let mut weight: HashMap<NodeId, u64> = HashMap::new();
        let mut kids: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
        let mut own: HashMap<NodeId, Vec<u32>> = HashMap::new();
        let tree = &self.ranks[rank].tree;
        for &s in w.iter() {
            let node = self.reqs[s as usize].match_node;
            own.entry(node).or_default().push(s);
            let mut n = node;
            loop {
                let e = weight.entry(n).or_insert(0);
                let first_visit = *e == 0;
                *e += 1;
                let Some(p) = tree.parent(n) else { break };
                if first_visit {
                    kids.entry(p).or_default().push(n);
                }
                n = p;
            }
        }
        let mut order = Vec::with_capacity(w.len());
        // Iterative post-order: children by descending weight (ties: node id).
        let mut stack: Vec<(NodeId, bool)> = vec![(ROOT, false)];
        while let Some((n, expanded)) = stack.pop() {
            if expanded {
                if let Some(v) = own.get(&n) {
                    order.extend_from_slice(v);
                }
                continue;
            }
            stack.push((n, true));
            if let Some(c) = kids.get_mut(&n) {
                c.sort_by_key(|&x| (std::cmp::Reverse(weight[&x]), x));
                for &x in c.iter().rev() {
                    stack.push((x, false));
                }
            }
        }
        *w = order;
    }
}
