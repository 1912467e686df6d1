//! A conversation's turns as compact shapes: hash-id blocks delta-encoded against the previous
//! turn (dense per-trace ids), and the segmentation of each turn's blocks into chat messages.

use std::collections::HashMap;

use super::{DEFAULT_SYSTEM_TOKENS, MixHasher};
use crate::trace::Request;

/// Chat roles of synthesized messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One chat message as text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// A message segment: blocks `[start, end)` of the prompt's block list with a role; the request's
/// last segment also carries the partial tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub role: Role,
    pub start: u32,
    pub end: u32,
}

/// Static shape of one turn of a conversation.
#[derive(Debug, Clone)]
pub struct TurnShape {
    /// Recorded input length (`in`).
    pub input_tokens: u64,
    /// Recorded output length (`out`).
    pub output_tokens: u64,
    /// Full blocks in the prompt (named + filler).
    pub blocks: u32,
    /// Of which named by `hash_ids` (the rest are filler).
    pub named: u32,
    /// Tokens after the full blocks (`in mod block_size`, or more when ids ran short of `in`).
    pub tail_tokens: u32,
    /// Whether the partial tail is the named partial block `hash_ids[blocks]` (else filler).
    pub tail_named: bool,
    /// Longest common prefix (blocks) with the previous turn's named blocks.
    pub lcp_prev: u32,
    /// The previous turn's history was cut (compaction, edit): the message list is re-emitted.
    pub reset_context: bool,
    /// Block where the first user message starts (the marker goes there).
    pub first_user_block: u32,
    /// Theoretical prefix-cache hit: blocks already seen in the trace (global recorded order).
    pub hit_blocks: u32,
    /// Blocks counted for the theoretical hit rate (the named blocks).
    pub total_blocks: u32,
    /// Delta-encoded named ids: positions `lcp_prev..named` (the rest come from earlier turns).
    new_ids: std::ops::Range<u32>,
}

/// Every turn of one conversation (root or child stream) of a trace, with delta-encoded block ids.
#[derive(Debug)]
pub struct ConversationPlan {
    /// Namespace of block contents: (seed, trace id).
    pub trace_key: u64,
    /// Key of this conversation (filler content).
    pub conv_key: u64,
    pub block_size: u32,
    /// System prefix blocks of turn 0.
    pub system_blocks: u32,
    pub turns: Vec<TurnShape>,
    /// Concatenated new ids of every turn (dense per-trace ids).
    ids: Vec<u32>,
}

/// Dense per-trace id remapping shared by a trace's conversations (first-seen order), and the
/// trace's seen-set for the theoretical hit rate.
#[derive(Debug, Default)]
pub struct TraceIds {
    map: HashMap<u64, u32, std::hash::BuildHasherDefault<MixHasher>>,
}

impl TraceIds {
    /// The dense id of `id` (assigned in first-seen order).
    pub fn dense(&mut self, id: u64) -> u32 {
        let n = self.map.len() as u32;
        *self.map.entry(id).or_insert(n)
    }
    /// Ids assigned so far.
    pub fn len(&self) -> u32 {
        self.map.len() as u32
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl ConversationPlan {
    /// Build the plan of one conversation from its requests in order. `hits` gives each request's
    /// (hit blocks, total blocks) for the theoretical hit rate; `system_tokens` is the turn-0 setup
    /// prefix (tools + system) as the trace declares it (0: all user content; `None`: unknown).
    pub fn build(
        trace_key: u64,
        conv_key: u64,
        block_size: u32,
        system_tokens: Option<u64>,
        requests: &[&Request],
        hits: &[(u32, u32)],
        ids: &mut TraceIds,
    ) -> Self {
        let bs = u64::from(block_size.max(1));
        let sys_tokens = system_tokens.unwrap_or(DEFAULT_SYSTEM_TOKENS);
        let system_blocks = sys_tokens.div_ceil(bs) as u32;
        let mut turns = Vec::with_capacity(requests.len());
        let mut store: Vec<u32> = Vec::new();
        let mut prev_named: &[u64] = &[];
        let mut history: Vec<Segment> = Vec::new();
        let mut prev_blocks = 0u32;
        let mut prev_out = 0u64;
        for (k, r) in requests.iter().enumerate() {
            let input = r.input_tokens;
            let full = input / bs;
            // Named full blocks: at most the whole blocks of `in`; an extra id names the partial tail.
            let named = (r.hash_ids.len() as u64).min(full) as u32;
            let blocks = full as u32;
            let tail_tokens = (input - full * bs) as u32;
            let tail_named = tail_tokens > 0 && r.hash_ids.len() as u64 > full;
            // Compare raw ids (cheap), then map only the new ones to dense ids.
            let lcp = if k == 0 { 0 } else { crate::trace::stats::lcp(prev_named, &r.hash_ids[..named as usize]) as u32 };
            let start = store.len() as u32;
            for &h in &r.hash_ids[lcp as usize..(named as usize + usize::from(tail_named))] {
                store.push(ids.dense(h));
            }
            let new_ids = start..store.len() as u32;

            let reset = segment_step(&mut history, k, system_blocks, blocks, tail_tokens, lcp, prev_blocks, prev_out, bs);
            let first_user_block = history.iter().find(|s| s.role == Role::User).map(|s| s.start).unwrap_or(0);
            let (hit_blocks, total_blocks) = hits.get(k).copied().unwrap_or((0, named));
            turns.push(TurnShape {
                input_tokens: input,
                output_tokens: r.output_tokens,
                blocks,
                named,
                tail_tokens,
                tail_named,
                lcp_prev: lcp,
                reset_context: reset,
                first_user_block,
                hit_blocks,
                total_blocks,
                new_ids,
            });
            prev_named = &r.hash_ids[..named as usize];
            prev_blocks = blocks;
            prev_out = r.output_tokens;
        }
        Self { trace_key, conv_key, block_size: block_size.max(1), system_blocks, turns, ids: store }
    }

    /// Named block ids of a turn (dense per-trace ids), reconstructed from the deltas; includes the
    /// named partial tail block when there is one.
    pub fn block_ids(&self, turn: usize) -> Vec<u32> {
        self.block_ids_from(turn, 0)
    }

    /// As [`ConversationPlan::block_ids`], positions `from..` only (walks back only as far as needed).
    pub fn block_ids_from(&self, turn: usize, from: usize) -> Vec<u32> {
        let t = &self.turns[turn];
        let len = (t.named + u32::from(t.tail_named)) as usize;
        if from >= len {
            return Vec::new();
        }
        let mut out = vec![0u32; len - from];
        // Walk back: positions ≥ lcp come from this turn; below, from the turn before, and so on.
        let mut limit = len;
        let mut k = turn;
        loop {
            let tk = &self.turns[k];
            let base = tk.lcp_prev as usize;
            let src = &self.ids[tk.new_ids.start as usize..tk.new_ids.end as usize];
            let lo = base.max(from);
            let hi = limit.min(base + src.len());
            if hi > lo {
                out[lo - from..hi - from].copy_from_slice(&src[lo - base..hi - base]);
            }
            limit = limit.min(base);
            if limit <= from || k == 0 {
                break;
            }
            k -= 1;
        }
        out
    }

    /// Message segments of a turn (replays the segmentation; O(turns), for the text path).
    pub fn segments(&self, turn: usize) -> Vec<Segment> {
        // Rebuilding needs only the shapes, not ids.
        let mut history: Vec<Segment> = Vec::new();
        let bs = u64::from(self.block_size);
        let mut prev_out = 0u64;
        let mut prev_blocks = 0u32;
        for (k, t) in self.turns[..=turn].iter().enumerate() {
            segment_step(&mut history, k, self.system_blocks, t.blocks, t.tail_tokens, t.lcp_prev, prev_blocks, prev_out, bs);
            prev_out = t.output_tokens;
            prev_blocks = t.blocks;
        }
        history
    }
}

/// One step of role segmentation (§2.3): update `history` for turn `k`; returns whether an
/// already-sent segment was cut (the request must re-emit its whole message list).
#[allow(clippy::too_many_arguments)]
fn segment_step(
    history: &mut Vec<Segment>,
    k: usize,
    system_blocks: u32,
    blocks: u32,
    tail_tokens: u32,
    lcp: u32,
    prev_blocks: u32,
    prev_out: u64,
    bs: u64,
) -> bool {
    let mut reset = false;
    if k == 0 {
        history.clear();
        let mut s = system_blocks.min(blocks);
        if s == blocks && tail_tokens == 0 {
            s = blocks.saturating_sub(1);
        }
        if s > 0 {
            history.push(Segment { role: Role::System, start: 0, end: s });
        }
        history.push(Segment { role: Role::User, start: s, end: blocks });
        return false;
    }
    // The previous turn's filler and tail never match: anything below its block count is a cut.
    if lcp < prev_blocks {
        reset = true;
        while history.last().is_some_and(|s| s.start >= lcp) {
            history.pop();
        }
        if let Some(last) = history.last_mut() {
            last.end = last.end.min(lcp);
        }
    }
    let new = blocks.saturating_sub(lcp);
    if new == 0 && tail_tokens == 0 {
        // Nothing new: relabel the last block as the user turn.
        match history.last_mut() {
            Some(last) if last.role != Role::User && last.end > last.start => {
                last.end -= 1;
                let e = last.end;
                if last.start == last.end {
                    history.pop();
                }
                history.push(Segment { role: Role::User, start: e, end: blocks });
                reset = true;
            }
            Some(_) => {}
            None => history.push(Segment { role: Role::User, start: 0, end: blocks }),
        }
        return reset;
    }
    let reserve = u32::from(tail_tokens == 0);
    let a = (prev_out.div_ceil(bs) as u32).min(new.saturating_sub(reserve));
    if a > 0 {
        history.push(Segment { role: Role::Assistant, start: lcp, end: lcp + a });
    }
    history.push(Segment { role: Role::User, start: lcp + a, end: blocks });
    reset
}
