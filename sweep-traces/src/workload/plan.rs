//! A trace compiled for replay, as agentx-harness 1.0.12's Weka loader builds it: the root
//! conversation, each subagent's conversations and the flattened agents found in the root's
//! requests ([`crate::trace::chains`]); the branches that spawn and join them; per-turn
//! end-to-start delays and recorded-interval predecessors; compact prompt plans.

use std::sync::Arc;

use crate::prompt::{ConversationPlan, TraceIds, sha_key};
use crate::trace::chains::{self, EPS, Item, req_end};
use crate::trace::{Entry, Request, Subagent, Trace};

/// What kind of conversation a stream is (`source_kind` in records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Main,
    Subagent,
    /// An agent found among the root's requests (`<trace>::fa:NNN`, `::aux:NNN`, `::wg:G_M`).
    Flat,
    /// A request of the fixed-length random dataset (no trace).
    Random,
}

/// A turn's position: (stream index, turn index within the stream).
pub type TurnRef = (u16, u32);

/// One turn's timing and prerequisites.
#[derive(Debug, Clone)]
pub struct TurnTiming {
    /// Recorded start, seconds (absolute root-trace time).
    pub t: f64,
    /// Recorded end (`t + api_time`; a missing api time counts as zero, as the reference's).
    pub end: f64,
    /// End-to-start delay from the completion of the stream's previous turn; for a child's first
    /// turn, its offset from the spawn (see [`BranchPlan::at_issue`]), nanoseconds.
    pub delay_ns: u64,
    /// Turns of other streams that must have finished first (the join's children, and the latest
    /// turn of each other stream of the same agent scope that had ended by this turn's start).
    pub preds: Vec<TurnRef>,
    /// Index of the entry in the trace's `requests` list (`source_outer_idx`).
    pub outer_idx: u32,
    /// Index within the subagent entry's `requests` (`source_inner_idx`; none for root requests).
    pub inner_idx: Option<u32>,
    /// Position in the trace's global recorded order.
    pub order: u32,
}

/// One conversation of a trace.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// `<trace>` for the root; `<trace>::sa:<agent>[:fa:NNN|:aux:NNN|:wg:G_M]` for a subagent's
    /// conversations; `<trace>::fa:NNN` (or `aux`, `wg`) for a flattened agent.
    pub conversation_id: Arc<str>,
    pub kind: SourceKind,
    pub prompts: Arc<ConversationPlan>,
    pub turns: Vec<TurnTiming>,
    /// The branch that spawns this stream (none for the root).
    pub branch: Option<u16>,
}

/// Children spawned together by one root turn and joined (or not) by one later root turn.
#[derive(Debug, Clone)]
pub struct BranchPlan {
    /// Root turn that spawns the children.
    pub spawn_turn: u32,
    /// Root turn that waits for every child (none: the children run in the background).
    pub join_turn: Option<u32>,
    /// Recorded spawn time, seconds (the earliest subagent start, or the earliest first request).
    pub start: f64,
    /// The branch began before the spawning turn's recorded end: its children are dispatched when
    /// that turn is sent, each at its first request's offset from the turn's start; otherwise when
    /// the turn completes, at the offset from the branch's start.
    pub at_issue: bool,
    pub children: Vec<u16>,
}

/// A trace ready for replay.
#[derive(Debug)]
pub struct TracePlan {
    pub id: Arc<str>,
    /// Recorded span of request start times over every replayed conversation.
    pub t_min: f64,
    pub t_max: f64,
    /// Stream 0 is the root conversation; then each subagent's conversations; then flattened agents.
    pub streams: Vec<StreamPlan>,
    pub branches: Vec<BranchPlan>,
    /// For each root turn, the branches it spawns.
    pub spawns: Vec<Vec<u16>>,
    /// Every turn in global recorded order.
    pub order: Vec<TurnRef>,
    /// Subagent entries dropped because no root turn precedes them.
    pub orphans: usize,
    /// Flattened agents found among the root's requests, and inside subagents.
    pub flat_agents: usize,
}

/// End-to-start delay: the previous request's recorded idle gap, `t_k − (t_{k−1} + api_{k−1})`,
/// in float ms as the reference computes it.
fn gap_ns(prev: &Request, next: &Request) -> u64 {
    let api_ms = prev.api_time.filter(|a| a.is_finite()).map_or(0.0, |a| a * 1000.0);
    let ms = (next.t * 1000.0 - prev.t * 1000.0 - api_ms).max(0.0);
    (ms * 1e6).round() as u64
}

/// Recorded end of a subagent: `t + duration_ms`, else its latest inner request end, else `t`.
fn subagent_end(s: &Subagent) -> f64 {
    if let Some(d) = s.duration_ms {
        let d = if d.is_finite() && d > 0.0 { d / 1000.0 } else { 0.0 };
        return s.t + d;
    }
    s.inner().map(req_end).reduce(f64::max).unwrap_or(s.t)
}

/// Children grouped into one branch: ((spawning turn, joining turn), start, children).
type Group = ((u32, Option<u32>), f64, Vec<u16>);

/// A stream under construction.
struct Raw<'a> {
    id: String,
    kind: SourceKind,
    reqs: Vec<&'a Request>,
    outer: Vec<u32>,
    inner: Vec<Option<u32>>,
    /// Sort key of the global order: (outer index of the entry, chain index) per request.
    order_key: (u32, u32),
    system: u64,
    /// Scope of recorded-interval predecessors: 0 the root and its flattened agents, k + 1 the
    /// k-th subagent's conversations.
    scope: usize,
    branch: Option<u16>,
}

impl TracePlan {
    /// Compile a trace. `seed` namespaces block contents (same seed ⇒ same prompts). A trace
    /// needs at least one main-agent request.
    pub fn build(trace: &Trace, seed: u64) -> Result<Self, super::WorkloadError> {
        if trace.main_requests().next().is_none() {
            return Err(super::WorkloadError::NoMainRequest { trace: trace.id.clone() });
        }
        let id: Arc<str> = Arc::from(trace.id.as_str());
        let convs = Conversations::load(trace);
        let (order, order_of) = recorded_order(&convs.raws);
        let mut ids = TraceIds::default();
        let hits = prefix_hits(&convs.raws, &order, &mut ids);
        let mut streams = compile_streams(trace, seed, &id, &convs, &order_of, &hits, &mut ids);
        add_joins(&mut streams, &convs.branches);
        add_interval_predecessors(&mut streams, &convs.raws);

        let mut spawns = vec![Vec::new(); streams[0].turns.len()];
        for (b, br) in convs.branches.iter().enumerate() {
            spawns[br.spawn_turn as usize].push(b as u16);
        }
        let (mut t_min, mut t_max) = (f64::INFINITY, f64::NEG_INFINITY);
        for t in streams.iter().flat_map(|s| &s.turns) {
            t_min = t_min.min(t.t);
            t_max = t_max.max(t.t);
        }
        let Conversations { branches, orphans, flat_agents, .. } = convs;
        Ok(TracePlan { id, t_min, t_max, streams, branches, spawns, order, orphans, flat_agents })
    }

    pub fn root_turns(&self) -> usize {
        self.streams[0].turns.len()
    }

    /// Total turns over all streams.
    pub fn total_turns(&self) -> usize {
        self.streams.iter().map(|s| s.turns.len()).sum()
    }

    /// The children root turn `turn` spawns: when it is sent (`at_issue`) or when it completes.
    pub fn spawned_by(&self, turn: u32, at_issue: bool) -> impl Iterator<Item = u16> + '_ {
        self.spawns[turn as usize]
            .iter()
            .map(|&b| &self.branches[b as usize])
            .filter(move |b| b.at_issue == at_issue)
            .flat_map(|b| b.children.iter().copied())
    }
}

/// The root conversation's turns, for placing children: the last root turn before an entry
/// spawns it; the first later root turn that starts at or after its end joins it.
struct RootTurns<'a> {
    outer: Vec<u32>,
    reqs: Vec<&'a Request>,
    /// Root turns in outer order (the join scan's order).
    by_outer: Vec<usize>,
}

impl<'a> RootTurns<'a> {
    fn new(root: &Raw<'a>) -> Self {
        let (outer, reqs) = (root.outer.clone(), root.reqs.clone());
        let mut by_outer: Vec<usize> = (0..outer.len()).collect();
        by_outer.sort_by_key(|&p| outer[p]);
        RootTurns { outer, reqs, by_outer }
    }

    fn preceding(&self, outer: u32) -> Option<usize> {
        (0..self.outer.len()).filter(|&p| self.outer[p] < outer).max()
    }

    fn join_after(&self, outer: u32, end: f64) -> Option<u32> {
        self.by_outer.iter().copied().find(|&p| self.outer[p] > outer && self.reqs[p].t + EPS >= end).map(|p| p as u32)
    }
}

/// Every conversation of a trace and the branches that spawn and join them, before compiling.
struct Conversations<'a> {
    /// The root first, then each subagent's conversations, then the root's flattened agents.
    raws: Vec<Raw<'a>>,
    branches: Vec<BranchPlan>,
    orphans: usize,
    flat_agents: usize,
}

impl<'a> Conversations<'a> {
    /// The loader's passes: the root (split into its main chain and flattened agents), the
    /// subagents, the flattened agents, then the branches grouping them.
    fn load(trace: &'a Trace) -> Self {
        let (root, split) = root_conversation(trace);
        let flat_agents = split.as_ref().map_or(0, |s| s.workers.len());
        let mut c = Conversations { raws: vec![root], branches: Vec::new(), orphans: 0, flat_agents };
        let turns = RootTurns::new(&c.raws[0]);
        let groups = c.add_subagents(trace, &turns);
        let flat_groups = match &split {
            Some(s) => c.add_flattened(trace, s, &turns),
            None => Vec::new(),
        };
        c.add_branches(groups.into_iter().chain(flat_groups), &turns.reqs);
        c
    }

    /// Subagents: each one's conversations (its main chain and the agents flattened inside it)
    /// are children of one branch, grouped by (spawning turn, joining turn). A subagent that no
    /// root turn precedes is an orphan and is dropped.
    fn add_subagents(&mut self, trace: &'a Trace, root: &RootTurns) -> Vec<Group> {
        let mut groups: Vec<Group> = Vec::new();
        let mut scope = 0;
        for (i, e) in trace.requests.iter().enumerate() {
            let Entry::Subagent(sa) = e else { continue };
            let outer = i as u32;
            let Some(spawn) = root.preceding(outer) else {
                self.orphans += 1;
                continue;
            };
            scope += 1;
            let key = (spawn as u32, root.join_after(outer, subagent_end(sa)));
            let inner: Vec<Item> = sa.inner().enumerate().map(|(j, r)| (j as u32, r)).collect();
            let sa_declared = (sa.tool_tokens, sa.system_tokens);
            let nested = chains::split(&inner, sa_declared, trace.block_size);
            self.flat_agents += nested.workers.len();
            let base = format!("{}::sa:{}", trace.id, sa.agent_id);
            let mut children = Vec::new();
            let chain_sets = std::iter::once((base.clone(), nested.main.clone(), sa_declared))
                .chain(nested.workers.iter().map(|w| (format!("{base}:{}", w.suffix), w.items.clone(), w.init_tokens)));
            for (ci, (cid, items, init)) in chain_sets.enumerate() {
                children.push(self.raws.len() as u16);
                self.raws.push(Raw {
                    id: cid,
                    kind: SourceKind::Subagent,
                    reqs: items.iter().map(|&(_, r)| r).collect(),
                    outer: vec![outer; items.len()],
                    inner: items.iter().map(|&(j, _)| Some(j)).collect(),
                    order_key: (outer, ci as u32),
                    system: init.0 + init.1,
                    scope,
                    branch: None,
                });
            }
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => {
                    g.1 = g.1.min(sa.t);
                    g.2.extend(children);
                }
                None => groups.push((key, sa.t, children)),
            }
        }
        groups
    }

    /// Flattened agents: spawned by the last root turn before their first request (turn 0 when
    /// none), joined by the first later root turn at or after their end.
    fn add_flattened(&mut self, trace: &Trace, split: &chains::Split<'a>, root: &RootTurns) -> Vec<Group> {
        let mut flat_groups: Vec<Group> = Vec::new();
        for w in &split.workers {
            let first = w.items[0].0;
            let end = w.items.iter().map(|&(_, r)| req_end(r)).fold(f64::NEG_INFINITY, f64::max);
            let key = (root.preceding(first).unwrap_or(0) as u32, root.join_after(first, end));
            let c = self.raws.len() as u16;
            self.raws.push(Raw {
                id: format!("{}::{}", trace.id, w.suffix),
                kind: SourceKind::Flat,
                reqs: w.items.iter().map(|&(_, r)| r).collect(),
                outer: w.items.iter().map(|&(k, _)| k).collect(),
                inner: vec![None; w.items.len()],
                order_key: (0, 0),
                system: w.init_tokens.0 + w.init_tokens.1,
                scope: 0,
                branch: None,
            });
            match flat_groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => {
                    g.1 = g.1.min(w.items[0].1.t);
                    g.2.push(c);
                }
                None => flat_groups.push((key, w.items[0].1.t, vec![c])),
            }
        }
        flat_groups
    }

    /// One branch per group, marked at issue when it began before its spawning turn's recorded end.
    fn add_branches(&mut self, groups: impl Iterator<Item = Group>, root_reqs: &[&Request]) {
        for ((spawn, join), start, children) in groups {
            let parent = root_reqs[spawn as usize];
            let at_issue = parent.api_time.is_some_and(|a| a.is_finite() && a > 0.0)
                && start * 1000.0 < (parent.t * 1000.0 + parent.api_time.unwrap_or(0.0) * 1000.0);
            let b = self.branches.len() as u16;
            for &c in &children {
                self.raws[c as usize].branch = Some(b);
            }
            self.branches.push(BranchPlan { spawn_turn: spawn, join_turn: join, start, at_issue, children });
        }
    }
}

/// The root's requests, split into the main chain and the flattened agents found among them
/// (none to find with a single request).
fn root_conversation(trace: &Trace) -> (Raw<'_>, Option<chains::Split<'_>>) {
    let declared = (trace.tool_tokens, trace.system_tokens);
    let normals: Vec<Item> = trace.requests.iter().enumerate().filter_map(|(i, e)| e.request().map(|r| (i as u32, r))).collect();
    let split = if normals.len() > 1 { Some(chains::split(&normals, declared, trace.block_size)) } else { None };
    let main: Vec<Item> = split.as_ref().map_or_else(|| normals.clone(), |s| s.main.clone());
    let root = Raw {
        id: trace.id.clone(),
        kind: SourceKind::Main,
        reqs: main.iter().map(|&(_, r)| r).collect(),
        outer: main.iter().map(|&(k, _)| k).collect(),
        inner: vec![None; main.len()],
        order_key: (0, 0),
        system: trace.tool_tokens + trace.system_tokens,
        scope: 0,
        branch: None,
    };
    (root, split)
}

/// Global recorded order: (t, outer index, chain index, turn), ties in emission order (the root,
/// then subagents, then flattened agents, as the reference's stable sort). Returns every turn in
/// that order and each turn's position in it.
fn recorded_order(raws: &[Raw]) -> (Vec<TurnRef>, Vec<Vec<u32>>) {
    let mut order: Vec<(f64, u32, u32, u32, usize, u16)> = Vec::new();
    for kind_rank in [SourceKind::Main, SourceKind::Flat, SourceKind::Subagent] {
        for (s, raw) in raws.iter().enumerate().filter(|(_, r)| r.kind == kind_rank) {
            for (k, r) in raw.reqs.iter().enumerate() {
                let (o, c, kk) = match raw.kind {
                    SourceKind::Subagent => (raw.order_key.0, raw.order_key.1, k as u32),
                    _ => (raw.outer[k], 0, 0),
                };
                order.push((r.t, o, c, kk, order.len(), s as u16));
            }
        }
    }
    // Stream-local turn index of each entry.
    let mut turn_of = Vec::with_capacity(order.len());
    {
        let mut next = vec![0u32; raws.len()];
        for o in &order {
            turn_of.push(next[o.5 as usize]);
            next[o.5 as usize] += 1;
        }
    }
    let mut idx: Vec<usize> = (0..order.len()).collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (&order[a], &order[b]);
        x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)).then(x.3.cmp(&y.3)).then(x.4.cmp(&y.4))
    });
    let sorted: Vec<TurnRef> = idx.iter().map(|&i| (order[i].5, turn_of[i])).collect();
    let mut order_of: Vec<Vec<u32>> = raws.iter().map(|r| vec![0; r.reqs.len()]).collect();
    for (pos, &(s, k)) in sorted.iter().enumerate() {
        order_of[s as usize][k as usize] = pos as u32;
    }
    (sorted, order_of)
}

/// Theoretical prefix-cache hits, (hit blocks, total blocks) per turn: one seen-set per trace,
/// walked in global order; a request's hit is the run of its leading blocks already seen. Dense
/// ids are assigned in that same order, so "seen" ⇔ id < ids assigned before this request. The
/// prefix shared with the last request of the same conversation walked so far is seen (and in
/// the set) already: only the rest is looked up.
fn prefix_hits(raws: &[Raw], sorted: &[TurnRef], ids: &mut TraceIds) -> Vec<Vec<(u32, u32)>> {
    let mut hits: Vec<Vec<(u32, u32)>> = raws.iter().map(|r| vec![(0, 0); r.reqs.len()]).collect();
    let mut last: Vec<&[u64]> = vec![&[]; raws.len()];
    for &(s, k) in sorted {
        let r = raws[s as usize].reqs[k as usize];
        let shared = crate::trace::stats::lcp(last[s as usize], &r.hash_ids);
        let assigned = ids.len();
        let mut hit = shared as u32;
        let mut leading = true;
        for &h in &r.hash_ids[shared..] {
            if ids.dense(h) < assigned && leading {
                hit += 1;
            } else {
                leading = false;
            }
        }
        hits[s as usize][k as usize] = (hit, r.hash_ids.len() as u32);
        last[s as usize] = &r.hash_ids;
    }
    hits
}

/// Each conversation's prompt plan and turn timings: end-to-start delays within a stream; a
/// child's first turn at its offset from its branch's start (or, begun at issue, from its
/// spawning turn's start).
fn compile_streams(
    trace: &Trace,
    seed: u64,
    id: &Arc<str>,
    convs: &Conversations,
    order_of: &[Vec<u32>],
    hits: &[Vec<(u32, u32)>],
    ids: &mut TraceIds,
) -> Vec<StreamPlan> {
    let trace_key = sha_key(&[b"blocks", &seed.to_le_bytes(), trace.id.as_bytes()]);
    let root_reqs = &convs.raws[0].reqs;
    let mut streams = Vec::with_capacity(convs.raws.len());
    for (s, raw) in convs.raws.iter().enumerate() {
        let conversation_id: Arc<str> = if s == 0 { id.clone() } else { Arc::from(raw.id.as_str()) };
        let conv_key = sha_key(&[b"conv", &seed.to_le_bytes(), conversation_id.as_bytes()]);
        let prompts = Arc::new(ConversationPlan::build(trace_key, conv_key, trace.block_size, Some(raw.system), &raw.reqs, &hits[s], ids));
        let mut turns = Vec::with_capacity(raw.reqs.len());
        for (k, r) in raw.reqs.iter().enumerate() {
            let delay_ns = if k > 0 {
                gap_ns(raw.reqs[k - 1], r)
            } else if let Some(b) = raw.branch {
                let b = &convs.branches[b as usize];
                let origin = if b.at_issue { root_reqs[b.spawn_turn as usize].t } else { b.start };
                let ms = (r.t * 1000.0 - origin * 1000.0).max(0.0);
                (ms * 1e6).round() as u64
            } else {
                0
            };
            turns.push(TurnTiming {
                t: r.t,
                end: req_end(r),
                delay_ns,
                preds: Vec::new(),
                outer_idx: raw.outer[k],
                inner_idx: raw.inner[k],
                order: order_of[s][k],
            });
        }
        streams.push(StreamPlan { conversation_id, kind: raw.kind, prompts, turns, branch: raw.branch });
    }
    streams
}

/// Joins: the joining root turn waits for every child of its branch.
fn add_joins(streams: &mut [StreamPlan], branches: &[BranchPlan]) {
    for b in branches {
        if let Some(j) = b.join_turn {
            for &c in &b.children {
                let last = streams[c as usize].turns.len() as u32 - 1;
                streams[0].turns[j as usize].preds.push((c, last));
            }
        }
    }
}

/// Recorded-interval predecessors within each agent scope (the reference's
/// `infer_cross_stream_predecessors`): a turn waits for the latest turn of each other stream of
/// its scope that had ended by its start, less the dominated ones (ended before another of them
/// began), as the reference drops them.
fn add_interval_predecessors(streams: &mut [StreamPlan], raws: &[Raw]) {
    let n_scopes = raws.iter().map(|r| r.scope).max().unwrap_or(0) + 1;
    for sc in 0..n_scopes {
        let members: Vec<usize> = (0..raws.len()).filter(|&s| raws[s].scope == sc).collect();
        if members.len() < 2 {
            continue;
        }
        let iv = |s: usize, k: usize| {
            let r = raws[s].reqs[k];
            let start = r.t * 1000.0;
            (start, start + r.api_time.filter(|a| a.is_finite()).unwrap_or(0.0).max(0.0) * 1000.0)
        };
        for &s in &members {
            for k in 0..raws[s].reqs.len() {
                let (ts, _) = iv(s, k);
                let mut frontier: Vec<(f64, f64, u16, u32)> = Vec::new();
                for &o in &members {
                    if o == s {
                        continue;
                    }
                    let latest = (0..raws[o].reqs.len())
                        .map(|j| (iv(o, j), j))
                        .filter(|&((st, en), _)| st < ts && en <= ts)
                        .max_by(|a, b| a.0.1.total_cmp(&b.0.1).then(a.0.0.total_cmp(&b.0.0)).then(a.1.cmp(&b.1)));
                    if let Some(((st, en), j)) = latest {
                        frontier.push((st, en, o as u16, j as u32));
                    }
                }
                for (i, c) in frontier.iter().enumerate() {
                    let dominated = frontier.iter().enumerate().any(|(m, l)| m != i && c.0 < l.0 && c.1 <= l.0);
                    let p = (c.2, c.3);
                    if !dominated && !streams[s].turns[k].preds.contains(&p) {
                        streams[s].turns[k].preds.push(p);
                    }
                }
            }
        }
    }
}
