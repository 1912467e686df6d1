//! Workload tests: trace fixtures and a reference drive shared by the topic files.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::driver::{DriveLog, SentRecord, Service, drive};
use super::*;
use crate::trace::{Entry, InnerRequest, Request, Subagent, Trace};

const S: u64 = SEC;

fn rq(t: f64, api: f64, input: u64, out: u64, ids: std::ops::Range<u64>) -> Request {
    Request {
        t,
        model: "m".into(),
        input_tokens: input,
        output_tokens: out,
        hash_ids: ids.collect(),
        api_time: Some(api),
        think_time: None,
        ttft: None,
        input_types: None,
        output_types: None,
        stop: None,
    }
}

/// A trace with main turns `(t, api)` and subagent groups `(after main turn, [(t, api)])`.
fn mk(id: &str, main: &[(f64, f64)], subs: &[(usize, Vec<(f64, f64)>)]) -> Trace {
    let mut entries = Vec::new();
    let mut next = 0u64;
    for (k, &(t, api)) in main.iter().enumerate() {
        entries.push(Entry::Streaming(rq(t, api, 640 + 64 * k as u64, 50, 0..10 + k as u64)));
        for (j, (after, inner)) in subs.iter().enumerate() {
            if *after == k {
                let reqs = inner
                    .iter()
                    .enumerate()
                    .map(|(i, &(t, api))| {
                        next += 1;
                        InnerRequest::NonStreaming(rq(
                            t,
                            api,
                            1280 + 64 * i as u64,
                            30,
                            1000 * (j as u64 + 1)..1000 * (j as u64 + 1) + 20 + i as u64,
                        ))
                    })
                    .collect();
                entries.push(Entry::Subagent(Subagent {
                    t: inner[0].0,
                    agent_id: format!("agent_{j}"),
                    subagent_type: "Subagent".into(),
                    duration_ms: None,
                    total_tokens: None,
                    tool_use_count: None,
                    status: None,
                    models: vec![],
                    requests: reqs,
                    tool_tokens: 0,
                    system_tokens: 0,
                }));
            }
        }
    }
    let _ = next;
    Trace {
        id: id.into(),
        models: vec!["m".into()],
        block_size: 64,
        hash_id_scope: "local".into(),
        tool_tokens: 128,
        system_tokens: 0,
        requests: entries,
        totals: None,
    }
}

fn pool(traces: &[Trace]) -> Vec<Arc<TracePlan>> {
    traces.iter().map(|t| Arc::new(TracePlan::build(t, 42).unwrap())).collect()
}

/// Evenly spaced main turns: `n` turns, `gap` s apart, each `api` s long.
fn linear(id: &str, n: usize, gap: f64, api: f64) -> Trace {
    let main: Vec<(f64, f64)> = (0..n).map(|k| (k as f64 * gap, api)).collect();
    mk(id, &main, &[])
}

fn cfg(c: u32) -> WorkloadConfig {
    WorkloadConfig { concurrency: c, duration_ns: 2000 * S, ..WorkloadConfig::default() }
}

fn fixed(d: u64) -> impl FnMut(&RequestSpec) -> Service {
    move |_| Service { duration_ns: d, failure: None }
}

fn run(c: WorkloadConfig, p: Vec<Arc<TracePlan>>, svc: impl FnMut(&RequestSpec) -> Service) -> DriveLog {
    let mut wl = Workload::new(c, p).unwrap();
    drive(&mut wl, 0, svc, |_, _| {})
}

fn key(r: &SentRecord) -> (u64, u16, u32) {
    (r.spec.play, r.spec.stream, r.spec.turn_index)
}

mod failures;
mod properties;
mod requests;
mod start;
mod timing;
mod trees;
