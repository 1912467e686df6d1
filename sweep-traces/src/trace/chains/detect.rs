//! Building the chains: a greedy forward pass that forks on every request extending no finished
//! tail, then join seams spliced back (the reference's two phases).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use super::{EPS, Item, SEAM_MAX_GAP_S, SEAM_MIN_OVERLAP, req_end};
use crate::trace::Request;
use crate::trace::stats::lcp;

/// Where a chain forked off: the parent chain, its tail key then, the shared depth and when.
#[derive(Debug, Clone)]
pub(super) struct Fork {
    pub(super) parent: Option<usize>,
    pub(super) fork_key: Option<u32>,
    pub(super) depth: usize,
    fork_time: f64,
}

/// One agent's requests in chain order, with its fork and its last prompt (the tail).
#[derive(Debug, Clone)]
pub(super) struct Chain<'a> {
    pub(super) items: Vec<Item<'a>>,
    pub(super) fork: Option<Fork>,
    spliced_into: Option<usize>,
    tail_key: u32,
    tail: &'a [u64],
    tail_end: f64,
    tail_model: &'a str,
}

impl<'a> Chain<'a> {
    fn new(fork: Option<Fork>) -> Self {
        Chain { items: Vec::new(), fork, spliced_into: None, tail_key: 0, tail: &[], tail_end: 0.0, tail_model: "" }
    }
    fn append(&mut self, (key, r): Item<'a>) {
        self.items.push((key, r));
        if !r.hash_ids.is_empty() {
            self.tail_key = key;
            self.tail = &r.hash_ids;
            self.tail_end = req_end(r);
            self.tail_model = &r.model;
        }
    }
    fn last_hash_key(&self) -> Option<u32> {
        self.items.iter().rev().find(|(_, r)| !r.hash_ids.is_empty()).map(|&(k, _)| k)
    }
}

/// The chains of a conversation: the main chain and the unspliced workers (ordered by their
/// first request), and how many join seams were spliced.
pub(super) struct Detection<'a> {
    pub(super) chains: Vec<Chain<'a>>,
    pub(super) main: usize,
    pub(super) workers: Vec<usize>,
    pub(super) seams: usize,
}

/// Splits `items` into chains.
pub(super) fn detect<'a>(items: &[Item<'a>]) -> Detection<'a> {
    if items.is_empty() {
        return Detection { chains: Vec::new(), main: 0, workers: Vec::new(), seams: 0 };
    }
    let mut ordered = items.to_vec();
    ordered.sort_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)));
    let mut b = Builder { chains: Vec::new(), chain_of: HashMap::new(), req_of: HashMap::new(), forks_by_tail: BTreeMap::new() };
    // Phase 1: greedy forward pass, forking on every request that extends no finished tail.
    for &(key, r) in &ordered {
        b.place(key, r);
    }
    // Phase 2: splice join seams onto tails that nothing extended, in tail-key order.
    let mut alias: HashMap<usize, usize> = HashMap::new();
    let seams = b.splice_seams(&mut alias);
    b.finish(&alias, ordered[0].0, seams)
}

/// The chains being built, each request's chain and request by key, and the forks registered
/// on each tail key.
struct Builder<'a> {
    chains: Vec<Chain<'a>>,
    chain_of: HashMap<u32, usize>,
    req_of: HashMap<u32, &'a Request>,
    forks_by_tail: BTreeMap<u32, Vec<usize>>,
}

/// The chain `i` was spliced into, followed to the end.
fn resolve(alias: &HashMap<usize, usize>, mut i: usize) -> usize {
    while let Some(&j) = alias.get(&i) {
        i = j;
    }
    i
}

impl<'a> Builder<'a> {
    /// Phase 1 for one request (in time order): it extends a chain, joins the main chain, or
    /// forks a new one off the chain it shares the longest prefix with.
    fn place(&mut self, key: u32, r: &'a Request) {
        let chains = &mut self.chains;
        self.req_of.insert(key, r);
        if r.hash_ids.is_empty() {
            // No prefix evidence: rides the main chain, invisible to tails and forks.
            if chains.is_empty() {
                chains.push(Chain::new(None));
            }
            chains[0].items.push((key, r));
            self.chain_of.insert(key, 0);
            return;
        }
        if chains.is_empty() {
            chains.push(Chain::new(None));
            chains[0].append((key, r));
            self.chain_of.insert(key, 0);
            return;
        }
        if let Some(target) = extension_target(chains, r) {
            chains[target].append((key, r));
            self.chain_of.insert(key, target);
            return;
        }
        let (parent, depth) = max_lcp_chain(chains, &r.hash_ids);
        if parent.is_none() && chains.iter().all(|c| c.tail.is_empty()) {
            // The first request with prefix evidence is the main agent.
            chains[0].append((key, r));
            self.chain_of.insert(key, 0);
            return;
        }
        let fork_key = parent.map(|p| chains[p].tail_key);
        let idx = chains.len();
        chains.push(Chain::new(Some(Fork { parent, fork_key, depth, fork_time: r.t })));
        chains[idx].append((key, r));
        self.chain_of.insert(key, idx);
        if let Some(fk) = fork_key
            && depth > 0
        {
            self.forks_by_tail.entry(fk).or_default().push(idx);
        }
    }

    /// Phase 2: every tail key with forks, lowest first; a tail nothing extended takes back its
    /// elected continuation. Returns the seams spliced.
    fn splice_seams(&mut self, alias: &mut HashMap<usize, usize>) -> usize {
        let mut seams = 0;
        let mut heap: BinaryHeap<Reverse<u32>> = self.forks_by_tail.keys().map(|&k| Reverse(k)).collect();
        let mut processed: HashSet<u32> = HashSet::new();
        while let Some(Reverse(fk)) = heap.pop() {
            if !processed.insert(fk) {
                continue;
            }
            let owner = resolve(alias, self.chain_of[&fk]);
            if self.chains[owner].last_hash_key() != Some(fk) {
                continue; // the longer state was extended: every fork off it is a spawn
            }
            let registered: Vec<usize> = self
                .forks_by_tail
                .get(&fk)
                .map(|v| v.iter().copied().filter(|&ci| self.chains[ci].spliced_into.is_none()).collect())
                .unwrap_or_default();
            let tail_req = self.req_of[&fk];
            let Some(elected) = elect(&self.chains, &registered, tail_req) else { continue };
            let moved = std::mem::take(&mut self.chains[elected].items);
            for &(k, _) in &moved {
                self.chain_of.insert(k, owner);
            }
            self.chains[owner].items.extend(moved);
            self.chains[elected].spliced_into = Some(owner);
            alias.insert(elected, owner);
            seams += 1;
            let Some(new_tail) = self.chains[owner].last_hash_key() else { continue };
            if self.rekey(&registered, elected, owner, new_tail) {
                processed.remove(&new_tail);
                heap.push(Reverse(new_tail));
            }
        }
        seams
    }

    /// Re-keys the other forks of a consumed tail against the merged chain's new tail (those
    /// that share a prefix with it); whether any was.
    fn rekey(&mut self, registered: &[usize], elected: usize, owner: usize, new_tail: u32) -> bool {
        let new_hash: &[u64] = &self.req_of[&new_tail].hash_ids;
        let mut rekeyed = false;
        for &ci in registered {
            if ci == elected || self.chains[ci].spliced_into.is_some() || self.chains[ci].fork.is_none() {
                continue;
            }
            let d = lcp(new_hash, &self.chains[ci].items[0].1.hash_ids);
            if d == 0 {
                continue;
            }
            let f = self.chains[ci].fork.as_mut().expect("checked");
            (f.fork_key, f.depth, f.parent) = (Some(new_tail), d, Some(owner));
            self.forks_by_tail.entry(new_tail).or_default().push(ci);
            rekeyed = true;
        }
        rekeyed
    }

    /// Forks point at the chains their parents were spliced into; the main chain is the first
    /// request's; workers are the other unspliced chains by first request (time, key).
    fn finish(mut self, alias: &HashMap<usize, usize>, first_key: u32, seams: usize) -> Detection<'a> {
        for c in self.chains.iter_mut() {
            if c.spliced_into.is_none()
                && let Some(f) = c.fork.as_mut()
                && let Some(p) = f.parent
            {
                f.parent = Some(resolve(alias, p));
            }
        }
        let chains = self.chains;
        let main = resolve(alias, self.chain_of[&first_key]);
        let mut workers: Vec<usize> = (0..chains.len()).filter(|&i| chains[i].spliced_into.is_none() && i != main).collect();
        workers.sort_by(|&a, &b| {
            let (ka, ra) = chains[a].items[0];
            let (kb, rb) = chains[b].items[0];
            ra.t.total_cmp(&rb.t).then(ka.cmp(&kb))
        });
        Detection { chains, main, workers, seams }
    }
}

/// The finished, same-model chain whose tail is a whole prefix of `r`'s ids (deepest; ties: lowest
/// index).
fn extension_target(chains: &[Chain], r: &Request) -> Option<usize> {
    let h = &r.hash_ids;
    let mut best = None;
    let mut best_len = 0usize;
    for (i, c) in chains.iter().enumerate() {
        let tl = c.tail.len();
        if tl == 0 || tl > h.len() || (best.is_some() && tl <= best_len) {
            continue;
        }
        if c.tail_model != r.model || c.tail_end > r.t + EPS {
            continue;
        }
        if c.tail[tl - 1] == h[tl - 1] && c.tail == &h[..tl] {
            (best, best_len) = (Some(i), tl);
        }
    }
    best
}

/// The chain tail sharing the longest prefix with `h` (ties: the longer tail, then the lower index).
fn max_lcp_chain(chains: &[Chain], h: &[u64]) -> (Option<usize>, usize) {
    let mut best = None;
    let mut key = (0usize, 0usize);
    for (i, c) in chains.iter().enumerate() {
        if c.tail.is_empty() {
            continue;
        }
        let d = lcp(c.tail, h);
        if d == 0 {
            continue;
        }
        if (d, c.tail.len()) > key {
            (best, key) = (Some(i), (d, c.tail.len()));
        }
    }
    (best, key.0)
}

/// The seam continuation among the forks of a dead tail: starts after the tail ended, same model,
/// not a distant low-overlap session; the deepest wins (then the earliest, then the lowest index).
fn elect(chains: &[Chain], registered: &[usize], tail: &Request) -> Option<usize> {
    let t_end = req_end(tail);
    let tail_blocks = tail.hash_ids.len();
    registered
        .iter()
        .copied()
        .filter(|&ci| {
            let Some(f) = &chains[ci].fork else { return false };
            let first = chains[ci].items[0].1;
            let blocked = tail_blocks > 0 && first.t - t_end > SEAM_MAX_GAP_S && (f.depth as f64 / tail_blocks as f64) < SEAM_MIN_OVERLAP;
            f.depth > 0 && t_end <= first.t + EPS && first.model == tail.model && !blocked
        })
        .max_by(|&a, &b| {
            let (fa, fb) = (chains[a].fork.as_ref().expect("filtered"), chains[b].fork.as_ref().expect("filtered"));
            fa.depth.cmp(&fb.depth).then(fb.fork_time.total_cmp(&fa.fork_time)).then(b.cmp(&a))
        })
}
