#![allow(dead_code)]
//! Shared helpers for the engine's integration tests: a minimal virtual-clock loop.

use engine::{Engine, EngineConfig, GpuSpec, ModelSpec, Output, Request, Time};
use std::collections::BTreeMap;

pub fn engine(args: &[&str], env: &[(&str, &str)], model: &str, gpu: &str) -> Engine {
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let cfg = EngineConfig::from_args(args, &env).expect("valid args");
    Engine::new(cfg, ModelSpec::lookup(model).unwrap(), GpuSpec::lookup(gpu).unwrap(), 42).expect("valid config")
}

/// Drives the engine through arrivals (sorted by time) until idle, checking the
/// engine's invariants after every event.
pub fn run(e: &mut Engine, mut arrivals: Vec<(Time, Request)>) -> Vec<Output> {
    arrivals.sort_by_key(|a| a.0);
    let mut arrivals = arrivals.into_iter().peekable();
    let mut out = Vec::new();
    loop {
        let next_arrival = arrivals.peek().map(|a| a.0);
        let next_engine = e.next_event_time();
        let t = match (next_arrival, next_engine) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (Some(a), Some(b)) => a.min(b),
        };
        e.advance(t, &mut out);
        while arrivals.peek().is_some_and(|a| a.0 <= t) {
            let (at, r) = arrivals.next().unwrap();
            e.submit(at, r).expect("accepted");
        }
        e.advance(t, &mut out);
        e.check_invariants();
    }
    out
}

pub fn first_token_time(out: &[Output], id: u64) -> Option<Time> {
    out.iter().find_map(|o| match o {
        Output::Tokens { id: i, time, first: true, .. } if *i == id => Some(*time),
        _ => None,
    })
}

pub fn finish_of(out: &[Output], id: u64) -> Option<(Time, engine::FinishReason, engine::Usage)> {
    out.iter().find_map(|o| match o {
        Output::Finished { id: i, time, reason, usage, .. } if *i == id => Some((*time, *reason, *usage)),
        _ => None,
    })
}

pub fn token_times(out: &[Output], id: u64) -> Vec<(Time, u32)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Tokens { id: i, time, count, .. } if *i == id => Some((*time, *count)),
            _ => None,
        })
        .collect()
}
