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
//! both replays send the same conversations. The chains are built in `detect.rs`; here they are
//! split off, classified and named.

mod detect;

use std::collections::{HashMap, HashSet};

use super::Request;
use super::stats::lcp;
use detect::{Detection, detect};

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
mod tests;
