//! The first request of every play against a real `sweep engine serve` in real time: the time
//! the path between client and engine adds to its TTFT (client-observed TTFT minus the engine's
//! stamped TTFT) stays small, as on later turns.
//!
//! A play's first turn follows the previous play's end at once, on a pooled keep-alive
//! connection. While the server's sockets had Nagle's algorithm on, its first chunk waited
//! behind the unacknowledged response head for the client's delayed ACK (about 40 ms), and every
//! such request got 20–30 ms added (docs/PERFORMANCE.md). In its own test binary so that no other
//! test competes for the cores while it measures.

mod common;
use common::engine_server::*;

use serde_json::{Value, json};

/// `n` three-turn traces of 640 to 1,152 tokens, turns 0.5 s apart: plays end quickly, so many
/// requests are the first of a play, and the engine's TTFT stays near its floor (17 ms), well
/// under the 40 ms of a delayed ACK, so a stalled first chunk shows in full. Small prompts also
/// keep synthesis and tokenization cheap in an unoptimised build.
fn short_plays(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let requests: Vec<Value> = (0..3u64)
            .map(|k| {
                let blocks = 10 + 4 * k;
                json!({"t": k as f64 * 0.5, "type": "n", "model": "m", "in": blocks * 64, "out": 16,
                    "hash_ids": (1..=blocks).collect::<Vec<_>>(), "input_types": ["text"], "output_types": ["text"],
                    "stop": "end_turn", "api_time": 0.2, "think_time": 0.0})
            })
            .collect();
        let t = json!({"id": format!("trace_{i:04}"), "models": ["m"], "block_size": 64, "hash_id_scope": "local",
            "tool_tokens": 0, "system_tokens": 0, "requests": requests});
        out.push_str(&t.to_string());
        out.push('\n');
    }
    out
}

/// numpy's `linear` percentile of `v` (sorted here).
fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = (v.len() - 1) as f64 * q;
    let (lo, hi) = (i.floor() as usize, i.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (i - lo as f64)
}

/// The added latency (wall ms) of every first turn of a play in one 20-s point, warmup included
/// (its requests follow each other just as closely).
fn first_turn_added_latency(traces: &std::path::Path) -> Vec<f64> {
    // Real time (the server's default time scale): added latency is wall time.
    let s = EngineServer::start(&[]);
    let (o, out) =
        replay(&["--url", &s.url, "--concurrency", "2", "--duration", "20", "--gpus", "4", "--traces", traces.to_str().unwrap()]);
    let (so, se) = common::text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    let recs = records(&out.path().join("point"));
    let added: Vec<f64> = recs
        .iter()
        .filter(|r| r["error"].is_null() && r["metadata"]["turn_index"] == 0)
        .filter_map(|r| r["metrics"]["client_added_latency"]["value"].as_f64())
        .collect();
    assert!(added.len() >= 30, "{} first turns with an added latency", added.len());
    added
}

#[test]
fn first_turns_of_plays_get_their_first_token_without_a_transport_delay() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("short-plays.jsonl");
    std::fs::write(&traces, short_plays(40)).unwrap();
    let mut last = String::new();
    // A stalled first chunk added 20-30 ms to nearly every first turn, at any load: the median
    // says so at once (p50 26 ms; about 1 ms without the stall). The p99 bound catches a stall of
    // a few requests in 100; it sits above the tail a concurrent build gives this 2-core machine
    // (up to 17 ms), and a point over it is measured again, up to three times.
    for attempt in 1..=3 {
        let mut added = first_turn_added_latency(&traces);
        let (p50, p99) = (percentile(&mut added, 0.5), percentile(&mut added, 0.99));
        let over: Vec<f64> = added.iter().copied().filter(|a| *a > 10.0).collect();
        last = format!("first-turn added latency p50 {p50:.2} ms, p99 {p99:.2} ms over {} requests; above 10 ms: {over:?}", added.len());
        eprintln!("attempt {attempt}: {last}");
        assert!(p50 <= 5.0, "{last}");
        if p99 <= 20.0 {
            return;
        }
    }
    panic!("{last}");
}
