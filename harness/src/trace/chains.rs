//! Flattened-agent detection: splitting a conversation's requests into per-agent chains by hash-id
//! prefix evidence, as agentx-harness 1.0.12 does (`weka_agent_chains.py`, applied by its Weka
//! loader at the top level and inside every subagent).
//!
//! Recordings flatten untagged agent fan-outs (workflow agents, headerless subagents) into one
//! list of requests. A request that extends a finished chain's last prompt (same model) continues
//! that chain; any other request forks a new chain from the chain it shares the longest prefix
//! with. A fork off a tail that nothing else ever extends is the same agent after a context edit
//! (compaction): a join seam, spliced back. Worker chains are then named: one-shot sidecars
//! (`aux`), members of a concurrent fan-out off one fork point (`wg`), other agents (`fa`).
//!
//! Every rule, tie-break and threshold here is the reference's (with InferenceX's defaults), so
//! both replays send the same conversations.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use super::Request;
use super::stats::lcp;

/// Tolerance of time comparisons (the reference's `_EPSILON_SECONDS`).
pub const EPS: f64 = 1e-6;
/// A seam continuation further than this past the tail's end…
const SEAM_MAX_GAP_S: f64 = 3600.0;
/// …that shares less than this share of the tail's blocks is a new session, not a seam.
const SEAM_MIN_OVERLAP: f64 = 0.5;
/// Sidecar rule: at most this many requests…
const AUX_MAX_REQUESTS: usize = 1;
/// …and a first input below max(floor, ratio × the main chain's peak input), or another model.
const AUX_ISL_RATIO: f64 = 0.10;
const AUX_ISL_FLOOR: u64 = 16_384;
/// Reduction sidecar: one request, output in (0, this), input ≥ the floor and > ratio × output.
const REDUCTION_OSL_MAX: u64 = 4000;
const REDUCTION_RATIO: f64 = 20.0;
/// A concurrent fan-out off one fork point needs at least this many workers to be a group.
const WORKER_GROUP_MIN: usize = 3;
/// A leading prefix-disjoint request with at most this output is a title-generation preamble.
const TITLE_GEN_MAX_OUTPUT: u64 = 64;

/// One request to classify: its key (outer index in the trace, or inner index in a subagent;
/// ties in time break on it) and the request.
pub type Item<'a> = (u32, &'a Request);

/// End of a request's recorded interval (a missing api time counts as zero).
pub fn req_end(r: &Request) -> f64 {
    r.t + r.api_time.filter(|a| a.is_finite()).unwrap_or(0.0).max(0.0)
}

#[derive(Debug, Clone)]
struct Fork {
    parent: Option<usize>,
    fork_key: Option<u32>,
    depth: usize,
    fork_time: f64,
}

#[derive(Debug, Clone)]
struct Chain<'a> {
    items: Vec<Item<'a>>,
    fork: Option<Fork>,
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

/// How a worker chain is replayed and named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerKind {
    /// A one-shot sidecar (`aux:NNN`): another model, a small fresh context, or a reduction.
    Aux,
    /// Member `member` of concurrent fan-out group `group` (`wg:GGG_MMM`).
    Group { group: usize, member: usize },
    /// Another agent (`fa:NNN`).
    Agent,
}

/// A detected worker chain.
#[derive(Debug, Clone)]
pub struct Worker<'a> {
    /// Requests in chain order.
    pub items: Vec<Item<'a>>,
    pub kind: WorkerKind,
    /// The session-id suffix (`fa:000`, `aux:001`, `wg:000_002`); `n` is the dense worker index.
    pub suffix: String,
    /// Turn-0 (tool, system) tokens: the declared counts when the chain provably starts with the
    /// main chain's declared prefix, else none (the system role is never invented).
    pub init_tokens: (u64, u64),
}

/// A conversation split into its main chain and workers.
#[derive(Debug, Clone)]
pub struct Split<'a> {
    /// The main chain (with a peeled preamble re-attached), in replay order.
    pub main: Vec<Item<'a>>,
    /// Workers, ordered by their first request (time, key).
    pub workers: Vec<Worker<'a>>,
    /// Join seams spliced back onto their chain.
    pub seams: usize,
}

/// Split `items` (in key order) into chains; `declared` is the conversation's declared (tool,
/// system) tokens and `block_size` its block size (for turn-0 prefix attribution). A list that
/// splits into one chain comes back unchanged as `main`.
pub fn split<'a>(items: &[Item<'a>], declared: (u64, u64), block_size: u32) -> Split<'a> {
    let (preamble, rest) = split_off_preamble(items);
    let det = detect(&rest);
    if det.workers.is_empty() {
        return Split { main: items.to_vec(), workers: Vec::new(), seams: det.seams };
    }
    let main_chain = &det.chains[det.main];
    let main_first_hash: &[u64] = main_chain.items.iter().map(|(_, r)| r.hash_ids.as_slice()).find(|h| !h.is_empty()).unwrap_or(&[]);
    let main_peak = main_chain.items.iter().map(|(_, r)| r.input_tokens).max().unwrap_or(0);
    let main_model = main_chain.items.first().map(|(_, r)| r.model.as_str());
    let groups = worker_groups(&det);
    let mut workers = Vec::with_capacity(det.workers.len());
    for (n, &ci) in det.workers.iter().enumerate() {
        let chain = &det.chains[ci];
        let reqs: Vec<&Request> = chain.items.iter().map(|&(_, r)| r).collect();
        let kind = if is_aux(&reqs, main_peak, main_model) || is_reduction(&reqs) {
            WorkerKind::Aux
        } else if let Some(&(group, member)) = groups.get(&ci) {
            WorkerKind::Group { group, member }
        } else {
            WorkerKind::Agent
        };
        let suffix = match kind {
            WorkerKind::Aux => format!("aux:{n:03}"),
            WorkerKind::Group { group, member } => format!("wg:{group:03}_{member:03}"),
            WorkerKind::Agent => format!("fa:{n:03}"),
        };
        let init_tokens = init_tokens(declared, block_size, main_first_hash, &chain.items[0].1.hash_ids);
        workers.push(Worker { items: chain.items.clone(), kind, suffix, init_tokens });
    }
    let mut main = main_chain.items.clone();
    if let Some(p) = preamble {
        main.push(p);
        main.sort_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)));
    }
    Split { main, workers, seams: det.seams }
}

/// Peels a leading title-generation / one-shot call off before detection so that it cannot found
/// the main chain: only the earliest request, only when it shares no prefix with any other, and
/// (when its output is over 64 tokens) none of its blocks reappear. Returns it and the rest in key
/// order.
fn split_off_preamble<'a>(items: &[Item<'a>]) -> (Option<Item<'a>>, Vec<Item<'a>>) {
    if items.len() < 2 {
        return (None, items.to_vec());
    }
    let mut ordered = items.to_vec();
    ordered.sort_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)));
    let first = ordered[0];
    let h = &first.1.hash_ids;
    if h.is_empty() {
        return (None, items.to_vec());
    }
    let rest = &ordered[1..];
    if rest.iter().any(|(_, o)| !o.hash_ids.is_empty() && lcp(h, &o.hash_ids) > 0) {
        return (None, items.to_vec());
    }
    if first.1.output_tokens > TITLE_GEN_MAX_OUTPUT {
        let others: HashSet<u64> = rest.iter().flat_map(|(_, o)| o.hash_ids.iter().copied()).collect();
        if h.iter().any(|b| others.contains(b)) {
            return (None, items.to_vec());
        }
    }
    let mut rest = rest.to_vec();
    rest.sort_by_key(|&(k, _)| k);
    (Some(first), rest)
}

struct Detection<'a> {
    chains: Vec<Chain<'a>>,
    main: usize,
    workers: Vec<usize>,
    seams: usize,
}

fn detect<'a>(items: &[Item<'a>]) -> Detection<'a> {
    if items.is_empty() {
        return Detection { chains: Vec::new(), main: 0, workers: Vec::new(), seams: 0 };
    }
    let mut ordered = items.to_vec();
    ordered.sort_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)));
    let mut chains: Vec<Chain<'a>> = Vec::new();
    let mut chain_of: HashMap<u32, usize> = HashMap::new();
    let mut req_of: HashMap<u32, &'a Request> = HashMap::new();
    let mut forks_by_tail: BTreeMap<u32, Vec<usize>> = BTreeMap::new();

    // Phase 1: greedy forward pass, forking on every request that extends no finished tail.
    for &(key, r) in &ordered {
        req_of.insert(key, r);
        if r.hash_ids.is_empty() {
            // No prefix evidence: rides the main chain, invisible to tails and forks.
            if chains.is_empty() {
                chains.push(Chain::new(None));
            }
            chains[0].items.push((key, r));
            chain_of.insert(key, 0);
            continue;
        }
        if chains.is_empty() {
            chains.push(Chain::new(None));
            chains[0].append((key, r));
            chain_of.insert(key, 0);
            continue;
        }
        if let Some(target) = extension_target(&chains, r) {
            chains[target].append((key, r));
            chain_of.insert(key, target);
            continue;
        }
        let (parent, depth) = max_lcp_chain(&chains, &r.hash_ids);
        if parent.is_none() && chains.iter().all(|c| c.tail.is_empty()) {
            // The first request with prefix evidence is the main agent.
            chains[0].append((key, r));
            chain_of.insert(key, 0);
            continue;
        }
        let fork_key = parent.map(|p| chains[p].tail_key);
        let idx = chains.len();
        chains.push(Chain::new(Some(Fork { parent, fork_key, depth, fork_time: r.t })));
        chains[idx].append((key, r));
        chain_of.insert(key, idx);
        if let Some(fk) = fork_key
            && depth > 0
        {
            forks_by_tail.entry(fk).or_default().push(idx);
        }
    }

    // Phase 2: splice join seams onto tails that nothing extended, in tail-key order.
    let mut alias: HashMap<usize, usize> = HashMap::new();
    let resolve = |alias: &HashMap<usize, usize>, mut i: usize| {
        while let Some(&j) = alias.get(&i) {
            i = j;
        }
        i
    };
    let mut seams = 0;
    let mut heap: BinaryHeap<Reverse<u32>> = forks_by_tail.keys().map(|&k| Reverse(k)).collect();
    let mut processed: HashSet<u32> = HashSet::new();
    while let Some(Reverse(fk)) = heap.pop() {
        if !processed.insert(fk) {
            continue;
        }
        let owner = resolve(&alias, chain_of[&fk]);
        if chains[owner].last_hash_key() != Some(fk) {
            continue; // the longer state was extended: every fork off it is a spawn
        }
        let registered: Vec<usize> =
            forks_by_tail.get(&fk).map(|v| v.iter().copied().filter(|&ci| chains[ci].spliced_into.is_none()).collect()).unwrap_or_default();
        let tail_req = req_of[&fk];
        let Some(elected) = elect(&chains, &registered, tail_req) else { continue };
        let moved = std::mem::take(&mut chains[elected].items);
        for &(k, _) in &moved {
            chain_of.insert(k, owner);
        }
        chains[owner].items.extend(moved);
        chains[elected].spliced_into = Some(owner);
        alias.insert(elected, owner);
        seams += 1;
        let Some(new_tail) = chains[owner].last_hash_key() else { continue };
        // Re-key the other forks of the consumed tail against the merged chain's new tail.
        let new_hash: &[u64] = &req_of[&new_tail].hash_ids;
        let mut rekeyed = false;
        for &ci in &registered {
            if ci == elected || chains[ci].spliced_into.is_some() || chains[ci].fork.is_none() {
                continue;
            }
            let d = lcp(new_hash, &chains[ci].items[0].1.hash_ids);
            if d == 0 {
                continue;
            }
            let f = chains[ci].fork.as_mut().expect("checked");
            (f.fork_key, f.depth, f.parent) = (Some(new_tail), d, Some(owner));
            forks_by_tail.entry(new_tail).or_default().push(ci);
            rekeyed = true;
        }
        if rekeyed {
            processed.remove(&new_tail);
            heap.push(Reverse(new_tail));
        }
    }
    for c in chains.iter_mut() {
        if c.spliced_into.is_none()
            && let Some(f) = c.fork.as_mut()
            && let Some(p) = f.parent
        {
            f.parent = Some(resolve(&alias, p));
        }
    }
    let main = resolve(&alias, chain_of[&ordered[0].0]);
    let mut workers: Vec<usize> = (0..chains.len()).filter(|&i| chains[i].spliced_into.is_none() && i != main).collect();
    workers.sort_by(|&a, &b| {
        let (ka, ra) = chains[a].items[0];
        let (kb, rb) = chains[b].items[0];
        ra.t.total_cmp(&rb.t).then(ka.cmp(&kb))
    });
    Detection { chains, main, workers, seams }
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

/// A one-shot sidecar: at most one request, on another model than the main chain's or starting
/// from a small fresh context.
fn is_aux(reqs: &[&Request], main_peak: u64, main_model: Option<&str>) -> bool {
    let Some(first) = reqs.first() else { return false };
    if reqs.len() > AUX_MAX_REQUESTS {
        return false;
    }
    if main_model.is_some_and(|m| first.model != m) {
        return true;
    }
    let threshold = AUX_ISL_FLOOR.max((AUX_ISL_RATIO * main_peak as f64) as u64);
    first.input_tokens < threshold
}

/// A reduction: one large-input, short-output call (a compaction or summary).
fn is_reduction(reqs: &[&Request]) -> bool {
    let [r] = reqs else { return false };
    let osl = r.output_tokens;
    osl > 0 && osl < REDUCTION_OSL_MAX && r.input_tokens >= AUX_ISL_FLOOR && r.input_tokens as f64 > REDUCTION_RATIO * osl as f64
}

/// A worker's interval: (first start, latest end, first key, chain index).
type Cand = (f64, f64, u32, usize);

/// Workers forked off one parent request that run concurrently, in groups of at least three:
/// chain index → (group, member).
fn worker_groups(det: &Detection) -> HashMap<usize, (usize, usize)> {
    // Bucketed by fork point in first-seen order.
    let mut buckets: Vec<((usize, u32), Vec<Cand>)> = Vec::new();
    for &ci in &det.workers {
        let c = &det.chains[ci];
        let Some(f) = &c.fork else { continue };
        let (Some(parent), Some(fk)) = (f.parent, f.fork_key) else { continue };
        if f.depth == 0 || c.items.is_empty() {
            continue;
        }
        let t0 = c.items[0].1.t;
        let t1 = c.items.iter().map(|(_, r)| req_end(r)).fold(f64::NEG_INFINITY, f64::max);
        let cand = (t0, t1, c.items[0].0, ci);
        match buckets.iter_mut().find(|(k, _)| *k == (parent, fk)) {
            Some((_, v)) => v.push(cand),
            None => buckets.push(((parent, fk), vec![cand])),
        }
    }
    let mut groups: Vec<Vec<Cand>> = Vec::new();
    for (_, cands) in buckets {
        groups.extend(overlap_components(&cands).into_iter().filter(|g| g.len() >= WORKER_GROUP_MIN));
    }
    let first = |g: &[Cand]| g.iter().map(|c| (c.0, c.2)).min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))).expect("nonempty");
    groups.sort_by(|a, b| {
        let (x, y) = (first(a), first(b));
        x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
    });
    let mut out = HashMap::new();
    for (g, mut comp) in groups.into_iter().enumerate() {
        comp.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
        for (m, c) in comp.iter().enumerate() {
            out.insert(c.3, (g, m));
        }
    }
    out
}

/// Connected components of `[t0, t1)` overlap (touching intervals do not overlap).
fn overlap_components(cands: &[Cand]) -> Vec<Vec<Cand>> {
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by(|&a, &b| cands[a].0.total_cmp(&cands[b].0).then(cands[a].2.cmp(&cands[b].2)));
    let mut parent: Vec<usize> = (0..cands.len()).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    // Active intervals (end, index), the earliest end first.
    let mut active: Vec<(f64, usize)> = Vec::new();
    for &i in &order {
        let t0 = cands[i].0;
        active.retain(|&(end, _)| end > t0);
        if let Some(&(_, j)) = active.iter().min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))) {
            let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
            parent[ri] = rj;
        }
        active.push((cands[i].1, i));
    }
    let mut comps: Vec<(usize, Vec<Cand>)> = Vec::new();
    for (i, &c) in cands.iter().enumerate() {
        let r = find(&mut parent, i);
        match comps.iter_mut().find(|(k, _)| *k == r) {
            Some((_, v)) => v.push(c),
            None => comps.push((r, vec![c])),
        }
    }
    comps.into_iter().map(|(_, v)| v).collect()
}

/// Turn-0 (tool, system) tokens of a derived chain: the declared counts only when its first
/// prompt starts with the same declared-prefix blocks as the main chain's.
pub fn init_tokens(declared: (u64, u64), block_size: u32, base_first: &[u64], chain_first: &[u64]) -> (u64, u64) {
    let blocks = (declared.0 + declared.1).div_ceil(u64::from(block_size.max(1))) as usize;
    let covered = blocks > 0 && chain_first.len() >= blocks && base_first.len() >= blocks && chain_first[..blocks] == base_first[..blocks];
    if covered { declared } else { (0, 0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rq(t: f64, api: f64, input: u64, out: u64, ids: &[u64]) -> Request {
        Request {
            t,
            model: "opus".into(),
            input_tokens: input,
            output_tokens: out,
            hash_ids: ids.to_vec(),
            api_time: Some(api),
            think_time: None,
            ttft: None,
            input_types: None,
            output_types: None,
            stop: None,
        }
    }

    fn items(reqs: &[Request]) -> Vec<Item<'_>> {
        reqs.iter().enumerate().map(|(i, r)| (i as u32, r)).collect()
    }

    fn keys(v: &[Item]) -> Vec<u32> {
        v.iter().map(|(k, _)| *k).collect()
    }

    #[test]
    fn a_growing_conversation_is_one_chain() {
        let reqs = [rq(0.0, 1.0, 64_000, 10, &[1, 2]), rq(2.0, 1.0, 64_000, 10, &[1, 2, 3]), rq(4.0, 1.0, 64_000, 10, &[1, 2, 3, 4])];
        let s = split(&items(&reqs), (0, 0), 64);
        assert_eq!(keys(&s.main), vec![0, 1, 2]);
        assert!(s.workers.is_empty());
    }

    #[test]
    fn interleaved_agents_off_a_shared_prefix_split_and_are_named() {
        // Main 1,2 → 1,2,3 → 1,2,3,4; a worker forks off 1,2 at t=1.5, while the main's first
        // request is still running (so it cannot be its continuation) → an agent chain `fa:000`;
        // a tiny fresh one-shot on another model → `aux:001`.
        let mut reqs = vec![
            rq(0.0, 2.0, 100_000, 500, &[1, 2]),
            rq(1.5, 5.0, 100_000, 500, &[1, 2, 50]),
            rq(2.0, 1.0, 100_000, 500, &[1, 2, 3]),
            rq(7.0, 1.0, 100_000, 500, &[1, 2, 50, 51]),
            rq(8.0, 1.0, 100_000, 500, &[1, 2, 3, 4]),
            rq(9.0, 0.5, 800, 20, &[900]),
        ];
        reqs[5].model = "haiku".into();
        let s = split(&items(&reqs), (0, 0), 64);
        assert_eq!(keys(&s.main), vec![0, 2, 4]);
        assert_eq!(s.workers.len(), 2);
        assert_eq!(keys(&s.workers[0].items), vec![1, 3]);
        assert_eq!((s.workers[0].suffix.as_str(), s.workers[0].kind), ("fa:000", WorkerKind::Agent));
        assert_eq!((s.workers[1].suffix.as_str(), s.workers[1].kind), ("aux:001", WorkerKind::Aux));
    }

    #[test]
    fn a_compaction_is_a_join_seam_not_a_new_agent() {
        // 1,2,3,4 is compacted to 1,2,9 and the conversation goes on from there; nothing ever
        // returns to 1,2,3,4: the fork is spliced back (one chain, one seam).
        let reqs = [
            rq(0.0, 1.0, 64_000, 10, &[1, 2, 3]),
            rq(2.0, 1.0, 64_000, 10, &[1, 2, 3, 4]),
            rq(4.0, 1.0, 64_000, 10, &[1, 2, 9]),
            rq(6.0, 1.0, 64_000, 10, &[1, 2, 9, 10]),
        ];
        let s = split(&items(&reqs), (0, 0), 64);
        assert_eq!(keys(&s.main), vec![0, 1, 2, 3]);
        assert!(s.workers.is_empty());
        assert_eq!(s.seams, 1);
    }

    #[test]
    fn a_pullback_to_the_longer_state_makes_the_shrink_a_spawn() {
        // Same shrink, but the longer state is extended later: the shrink is another agent.
        let reqs = [
            rq(0.0, 1.0, 64_000, 10, &[1, 2, 3]),
            rq(2.0, 1.0, 64_000, 10, &[1, 2, 3, 4]),
            rq(4.0, 1.0, 64_000, 10, &[1, 2, 9]),
            rq(6.0, 1.0, 64_000, 10, &[1, 2, 3, 4, 5]),
            rq(7.0, 1.0, 64_000, 10, &[1, 2, 9, 10]),
        ];
        let s = split(&items(&reqs), (0, 0), 64);
        assert_eq!(keys(&s.main), vec![0, 1, 3]);
        assert_eq!(keys(&s.workers[0].items), vec![2, 4]);
        assert_eq!(s.seams, 0);
    }

    #[test]
    fn three_concurrent_forks_off_one_request_are_a_worker_group() {
        // Three workers fork off the main's first request while it runs and overlap each other.
        // (Their prompts are shorter than the main's, so each forks off the main, not a sibling;
        // long outputs keep them from being reductions.)
        let mut reqs = vec![rq(0.0, 2.0, 100_000, 500, &[1, 2, 3, 4])];
        for w in 0..3u64 {
            reqs.push(rq(1.0 + w as f64 * 0.1, 5.0, 100_000, 10_000, &[1, 2, 100 + w]));
        }
        reqs.push(rq(10.0, 1.0, 100_000, 500, &[1, 2, 3, 4, 5]));
        let s = split(&items(&reqs), (0, 0), 64);
        assert_eq!(keys(&s.main), vec![0, 4]);
        let names: Vec<&str> = s.workers.iter().map(|w| w.suffix.as_str()).collect();
        assert_eq!(names, vec!["wg:000_000", "wg:000_001", "wg:000_002"]);
    }

    #[test]
    fn a_title_generation_preamble_does_not_found_the_main_chain() {
        // A disjoint 20-token call first, then the conversation: the preamble rides the main chain.
        let reqs = [rq(0.0, 0.5, 500, 20, &[77]), rq(1.0, 1.0, 64_000, 10, &[1, 2]), rq(3.0, 1.0, 64_000, 10, &[1, 2, 3])];
        let s = split(&items(&reqs), (0, 0), 64);
        assert_eq!(keys(&s.main), vec![0, 1, 2]);
        assert!(s.workers.is_empty());
    }

    #[test]
    fn another_model_never_extends_a_chain() {
        let mut reqs =
            vec![rq(0.0, 1.0, 64_000, 10, &[1, 2]), rq(2.0, 1.0, 64_000, 10, &[1, 2, 3]), rq(3.0, 1.0, 64_000, 10, &[1, 2, 3, 4])];
        reqs[1].model = "sonnet".into();
        let s = split(&items(&reqs), (0, 0), 64);
        // Request 1 forks (another model); request 2 extends request 1's prefix but it is on
        // opus, the main chain's tail is [1, 2], so it extends the main chain.
        assert_eq!(keys(&s.main), vec![0, 2]);
        assert_eq!(keys(&s.workers[0].items), vec![1]);
        assert_eq!(s.workers[0].kind, WorkerKind::Aux);
    }

    #[test]
    fn turn_zero_prefix_is_kept_only_when_provably_shared() {
        assert_eq!(init_tokens((100, 28), 64, &[1, 2, 3], &[1, 2, 9]), (100, 28));
        assert_eq!(init_tokens((100, 28), 64, &[1, 2, 3], &[1, 7, 9]), (0, 0));
        assert_eq!(init_tokens((0, 0), 64, &[1], &[1]), (0, 0));
    }
}
