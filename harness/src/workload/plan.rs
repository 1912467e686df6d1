//! A trace compiled for replay: its conversations (root + subagent streams), per-turn end-to-start
//! delays, spawn anchors, join and replay-predecessor prerequisites, and compact prompt plans.

use std::sync::Arc;

use crate::prompt::{ConversationPlan, TraceIds, sha_key};
use crate::trace::{Entry, Request, Trace};

/// What kind of conversation a stream is (`source_kind` in records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Main,
    Subagent,
}

/// A turn's position: (stream index, turn index within the stream).
pub type TurnRef = (u16, u32);

/// One turn's timing and prerequisites.
#[derive(Debug, Clone)]
pub struct TurnTiming {
    /// Recorded start, seconds (absolute root-trace time).
    pub t: f64,
    /// Recorded end (`t + api_time`; api time derived from the next think time when absent).
    pub end: f64,
    /// End-to-start delay from the completion of the stream's previous turn (for a child's first
    /// turn: from its anchor's completion), nanoseconds.
    pub delay_ns: u64,
    /// Turns of other streams that must have finished first (join children, replay predecessors).
    pub preds: Vec<TurnRef>,
    /// Index of the entry in the trace's `requests` list (`source_outer_idx`).
    pub outer_idx: u32,
    /// Position in the trace's global recorded order.
    pub order: u32,
}

/// One conversation of a trace.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// `<trace id>` for the root, `<trace id>::sa:<agent id>` for a subagent.
    pub conversation_id: Arc<str>,
    pub kind: SourceKind,
    pub prompts: Arc<ConversationPlan>,
    pub turns: Vec<TurnTiming>,
    /// Root turn whose completion spawns this child stream.
    pub anchor: Option<u32>,
    /// Root turn that joins this child (None: background subagent).
    pub join: Option<u32>,
}

/// A trace ready for replay.
#[derive(Debug)]
pub struct TracePlan {
    pub id: Arc<str>,
    /// Recorded span of request start times.
    pub t_min: f64,
    pub t_max: f64,
    /// Stream 0 is the root conversation.
    pub streams: Vec<StreamPlan>,
    /// For each root turn, the child streams it spawns.
    pub spawns: Vec<Vec<u16>>,
    /// Every turn in global recorded order (start time, then file order).
    pub order: Vec<TurnRef>,
    /// Subagent entries dropped because no main turn precedes them.
    pub orphans: usize,
}

fn secs_to_ns(s: f64) -> u64 {
    if s.is_finite() && s > 0.0 { (s * 1e9).round() as u64 } else { 0 }
}

/// The recorded end of a request; when `api_time` is missing, derive it from the next request's
/// `think_time` (think = next start − this end), else assume the request took no time.
fn recorded_end(r: &Request, next: Option<&Request>) -> f64 {
    match (r.api_time, next.and_then(|n| n.think_time.map(|th| (n.t, th)))) {
        (Some(a), _) => r.t + a,
        (None, Some((nt, th))) => (nt - th).max(r.t),
        (None, None) => r.t,
    }
}

impl TracePlan {
    /// Compile a trace. `seed` namespaces block contents (same seed ⇒ same prompts). A trace
    /// needs at least one main-agent request.
    pub fn build(trace: &Trace, seed: u64) -> Result<Self, String> {
        if trace.main_requests().next().is_none() {
            return Err(format!("trace {}: no main-agent request to replay", trace.id));
        }
        let id: Arc<str> = Arc::from(trace.id.as_str());
        let trace_key = sha_key(&[b"blocks", &seed.to_le_bytes(), trace.id.as_bytes()]);
        // Collect streams: root requests and subagent groups (orphans dropped).
        struct Raw<'a> {
            reqs: Vec<(&'a Request, u32)>,
            agent: Option<&'a str>,
            anchor: Option<u32>,
            join: Option<u32>,
            system: u64,
        }
        let mut root = Raw { reqs: Vec::new(), agent: None, anchor: None, join: None, system: trace.tool_tokens + trace.system_tokens };
        let mut children: Vec<Raw> = Vec::new();
        let mut orphans = 0;
        let mut pending_join: Vec<usize> = Vec::new();
        for (i, e) in trace.requests.iter().enumerate() {
            match e {
                Entry::NonStreaming(r) | Entry::Streaming(r) => {
                    let idx = root.reqs.len() as u32;
                    for c in pending_join.drain(..) {
                        children[c].join = Some(idx);
                    }
                    root.reqs.push((r, i as u32));
                }
                Entry::Subagent(s) => {
                    if root.reqs.is_empty() {
                        orphans += 1;
                        continue;
                    }
                    pending_join.push(children.len());
                    children.push(Raw {
                        reqs: s.inner().map(|r| (r, i as u32)).collect(),
                        agent: Some(&s.agent_id),
                        anchor: Some(root.reqs.len() as u32 - 1),
                        join: None,
                        system: s.tool_tokens + s.system_tokens,
                    });
                }
            }
        }
        let mut raws = vec![root];
        raws.extend(children);

        // Global recorded order: by start time, then file order.
        let mut order: Vec<(f64, u32, u16, u32)> = Vec::new();
        let mut seq = 0u32;
        for (s, raw) in raws.iter().enumerate() {
            for (k, (r, _)) in raw.reqs.iter().enumerate() {
                order.push((r.t, seq, s as u16, k as u32));
                seq += 1;
            }
        }
        // File order for ties: root turns and children interleave by outer index.
        order.sort_by(|a, b| {
            a.0.total_cmp(&b.0).then_with(|| {
                let oa = raws[a.2 as usize].reqs[a.3 as usize].1;
                let ob = raws[b.2 as usize].reqs[b.3 as usize].1;
                oa.cmp(&ob).then(a.1.cmp(&b.1))
            })
        });
        let mut order_of: Vec<Vec<u32>> = raws.iter().map(|r| vec![0; r.reqs.len()]).collect();
        for (pos, o) in order.iter().enumerate() {
            order_of[o.2 as usize][o.3 as usize] = pos as u32;
        }

        // Theoretical prefix-cache hits: walk every request in global order over one seen-set.
        // Dense ids are assigned in that same order, so "seen" ⇔ id < ids assigned so far. Blocks
        // in the common prefix with the stream's previous request were seen: only the rest is
        // looked up.
        let mut ids = TraceIds::default();
        let mut hits: Vec<Vec<(u32, u32)>> = raws.iter().map(|r| vec![(0, 0); r.reqs.len()]).collect();
        let mut prev: Vec<&[u64]> = vec![&[]; raws.len()];
        for o in &order {
            let r = raws[o.2 as usize].reqs[o.3 as usize].0;
            let l = crate::trace::stats::lcp(prev[o.2 as usize], &r.hash_ids);
            let mut hit = l as u32;
            for &h in &r.hash_ids[l..] {
                let assigned = ids.len();
                if ids.dense(h) < assigned {
                    hit += 1;
                }
            }
            hits[o.2 as usize][o.3 as usize] = (hit, r.hash_ids.len() as u32);
            prev[o.2 as usize] = &r.hash_ids;
        }

        // Ends and delays.
        let ends: Vec<Vec<f64>> = raws
            .iter()
            .map(|raw| (0..raw.reqs.len()).map(|k| recorded_end(raw.reqs[k].0, raw.reqs.get(k + 1).map(|x| x.0))).collect())
            .collect();

        let mut streams = Vec::with_capacity(raws.len());
        for (s, raw) in raws.iter().enumerate() {
            let reqs: Vec<&Request> = raw.reqs.iter().map(|x| x.0).collect();
            let conversation_id: Arc<str> = match raw.agent {
                None => id.clone(),
                Some(a) => Arc::from(format!("{}::sa:{a}", trace.id)),
            };
            let conv_key = sha_key(&[b"conv", &seed.to_le_bytes(), conversation_id.as_bytes()]);
            let prompts =
                Arc::new(ConversationPlan::build(trace_key, conv_key, trace.block_size, Some(raw.system), &reqs, &hits[s], &mut ids));
            let mut turns = Vec::with_capacity(reqs.len());
            for (k, r) in reqs.iter().enumerate() {
                let prev_end = if k > 0 { Some(ends[s][k - 1]) } else { raw.anchor.map(|a| ends[0][a as usize]) };
                let delay_ns = prev_end.map(|pe| secs_to_ns(r.t - pe)).unwrap_or(0);
                turns.push(TurnTiming {
                    t: r.t,
                    end: ends[s][k],
                    delay_ns,
                    preds: Vec::new(),
                    outer_idx: raw.reqs[k].1,
                    order: order_of[s][k],
                });
            }
            streams.push(StreamPlan {
                conversation_id,
                kind: if s == 0 { SourceKind::Main } else { SourceKind::Subagent },
                prompts,
                turns,
                anchor: raw.anchor,
                join: raw.join,
            });
        }

        // Prerequisites. Join: the joining root turn waits for each child's last turn. Replay
        // predecessors (root ↔ child only; siblings run in parallel): turn B waits for the latest
        // turn A of the other stream that ended (recorded) by B's start and precedes B in global
        // order; a root turn only waits on children spawned before it. Every edge points to an
        // earlier turn in global order, so prerequisites cannot form a cycle.
        let n_streams = streams.len();
        for c in 1..n_streams {
            let last = streams[c].turns.len() as u32 - 1;
            if let Some(j) = streams[c].join {
                let jo = streams[0].turns[j as usize].order;
                let lo = streams[c].turns[last as usize].order;
                if lo < jo {
                    streams[0].turns[j as usize].preds.push((c as u16, last));
                }
            }
        }
        for c in 1..n_streams {
            let anchor = streams[c].anchor.unwrap_or(0);
            // Root turn B ← child c.
            for b in (anchor + 1) as usize..streams[0].turns.len() {
                let (tb, ob) = (streams[0].turns[b].t, streams[0].turns[b].order);
                if let Some(a) = latest_before(&streams[c].turns, tb, ob)
                    && !streams[0].turns[b].preds.contains(&(c as u16, a))
                {
                    streams[0].turns[b].preds.push((c as u16, a));
                }
            }
            // Child turn B ← root (turns after the anchor).
            for b in 0..streams[c].turns.len() {
                let (tb, ob) = (streams[c].turns[b].t, streams[c].turns[b].order);
                if let Some(a) = latest_before(&streams[0].turns, tb, ob)
                    && a > anchor
                {
                    streams[c].turns[b].preds.push((0, a));
                }
            }
        }

        let mut spawns = vec![Vec::new(); streams[0].turns.len()];
        for (c, s) in streams.iter().enumerate().skip(1) {
            if let Some(a) = s.anchor {
                spawns[a as usize].push(c as u16);
            }
        }
        let (t_min, t_max) = trace.time_span();
        Ok(TracePlan { id, t_min, t_max, streams, spawns, order: order.iter().map(|o| (o.2, o.3)).collect(), orphans })
    }

    pub fn root_turns(&self) -> usize {
        self.streams[0].turns.len()
    }

    /// Total turns over all streams.
    pub fn total_turns(&self) -> usize {
        self.streams.iter().map(|s| s.turns.len()).sum()
    }
}

/// Index of the last turn that ended (recorded) by `t` and precedes `order` globally.
fn latest_before(turns: &[TurnTiming], t: f64, order: u32) -> Option<u32> {
    turns.iter().enumerate().rev().find(|(_, a)| a.end <= t && a.order < order).map(|(i, _)| i as u32)
}
