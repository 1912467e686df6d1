//! Virtual-clock throughput of the engine under an AgentX-like load: a one-hour,
//! concurrency-160 point of the DSV4.1-Flash GB300 DEP2 recipe (DSpark, DP
//! attention, cache-aware router), with 100K–600K-token conversations made of
//! 64-token hash blocks. Target: one simulated hour in ≤ 5 s on one core.
//!
//! The load generator is deliberately simple (the real trace reader lives in the
//! harness): each of `conc` lanes runs a session of growing turns; a turn's prompt
//! is the previous prompt + the previous output + new tool/user content, the
//! output's blocks are declared as the request's continuation so the next turn hits
//! the cache, and a session restarts with a fresh context once it passes 600K.

use criterion::{Criterion, criterion_group, criterion_main};
use engine::prompt::{CHAIN_ROOT, chain_hash};
use engine::rng::Rng;
use engine::{Engine, EngineConfig, GpuSpec, ModelSpec, Output, Prompt, Request, Time};
use std::collections::BTreeMap;
use std::sync::Arc;

const BLOCK: u64 = 64;

struct Lane {
    blocks: Vec<u64>,
    next_block_id: u64,
    ready_at: Time,
    in_flight: Option<(u64, u64)>, // (request id, output blocks)
}

fn push_blocks(lane: &mut Lane, n: u64) {
    let mut h = lane.blocks.last().copied().unwrap_or(CHAIN_ROOT);
    for _ in 0..n {
        lane.next_block_id += 1;
        h = chain_hash(h, lane.next_block_id);
        lane.blocks.push(h);
    }
}

fn new_session(lane: &mut Lane, rng: &mut Rng, salt: u64) {
    lane.blocks.clear();
    lane.next_block_id = salt << 32;
    // 100K–250K tokens of initial context
    push_blocks(lane, (100_000 + rng.below(150_000)) / BLOCK);
}

fn dep2_engine() -> Engine {
    let args: Vec<&str> = "--model-path deepseek-ai/DeepSeek-V4.1-Flash --trust-remote-code \
        --speculative-algorithm DSPARK --speculative-dspark-block-size 5 \
        --tensor-parallel-size 2 --data-parallel-size 2 --expert-parallel-size 2 \
        --enable-dp-attention --enable-dp-lm-head --enable-dp-attention-local-control-broadcast \
        --load-balance-method total_requests --moe-a2a-backend megamoe \
        --schedule-policy shortest-prefill-first --tokenizer-worker-num 4 \
        --chunked-prefill-size 16384 --swa-prefix-tails 4096 --enable-decoder-swa-bounded-replay \
        --prefill-decode-interval 8 --max-running-requests 256 --cuda-graph-max-bs-decode 128 \
        --mem-fraction-static 0.85 --tokenizer-backend huggingface"
        .split_whitespace()
        .collect();
    let env: BTreeMap<String, String> = [
        ("SGLANG_SIMULATE_ACC_LEN", "3.51"),
        ("SGLANG_SIMULATE_ACC_METHOD", "match-expected"),
        ("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE", "1"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let cfg = EngineConfig::from_args(&args, &env).unwrap().with_router_args(&["--policy", "cache_aware", "--dp-aware"]).unwrap();
    Engine::new(cfg, ModelSpec::lookup("deepseek-v4.1-flash").unwrap(), GpuSpec::lookup("gb300").unwrap(), 42).unwrap()
}

/// Runs `duration` of simulated time at concurrency `conc`; returns
/// (requests finished, tokens generated, output events).
pub fn simulate(conc: usize, duration: Time, seed: u64) -> (u64, u64, u64, engine::EngineStats) {
    let mut e = dep2_engine();
    let mut rng = Rng::new(seed);
    let mut lanes: Vec<Lane> = (0..conc)
        .map(|i| {
            let mut l = Lane { blocks: Vec::new(), next_block_id: 0, ready_at: Time::from_millis(rng.below(30_000)), in_flight: None };
            new_session(&mut l, &mut rng, i as u64 + 1);
            l
        })
        .collect();
    let mut sessions = conc as u64;
    let mut next_id = 0u64;
    let mut id_lane: BTreeMap<u64, usize> = BTreeMap::new();
    let mut out: Vec<Output> = Vec::with_capacity(4096);
    let (mut finished, mut generated, mut events) = (0u64, 0u64, 0u64);
    let mut now = Time::ZERO;
    while now < duration {
        let next_lane = lanes.iter().filter(|l| l.in_flight.is_none()).map(|l| l.ready_at).min();
        let t = match (next_lane, e.next_event_time()) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (Some(a), Some(b)) => a.min(b),
        };
        now = t;
        e.advance(t, &mut out);
        for (i, l) in lanes.iter_mut().enumerate() {
            if l.in_flight.is_some() || l.ready_at > t {
                continue;
            }
            if l.blocks.len() as u64 * BLOCK > 600_000 {
                sessions += 1;
                new_session(l, &mut rng, sessions);
            }
            // new tool/user content
            push_blocks(l, 1 + rng.below(60));
            let prompt_blocks: Arc<[u64]> = l.blocks.as_slice().into();
            let len = prompt_blocks.len() as u64 * BLOCK;
            let out_tokens = 100 + rng.below(1900);
            let out_blocks = out_tokens.div_ceil(BLOCK);
            push_blocks(l, out_blocks);
            let cont: Arc<[u64]> = l.blocks[prompt_blocks.len()..].into();
            let mut r = Request::new(next_id, Prompt::from_chained(prompt_blocks, BLOCK as u32, len).unwrap(), out_tokens as u32);
            r.continuation = Some(cont);
            e.submit(t, r).unwrap();
            l.in_flight = Some((next_id, out_blocks));
            id_lane.insert(next_id, i);
            next_id += 1;
        }
        e.advance(t, &mut out);
        for o in out.drain(..) {
            events += 1;
            if let Output::Finished { id, time, usage, .. } = o {
                finished += 1;
                generated += usage.completion_tokens;
                let lane = id_lane.remove(&id).unwrap();
                let l = &mut lanes[lane];
                l.in_flight = None;
                // tool time before the next turn
                l.ready_at = time + Time::from_millis(rng.below(5_000));
            }
        }
    }
    (finished, generated, events, e.stats())
}

/// Per-turn prefix-cache cost on a 600K-token conversation, next to the cost of
/// hashing the same prompt from token ids (what a real-token path pays first).
fn radix(c: &mut Criterion) {
    use engine::kv::{RadixTree, UnitKey};
    let mut g = c.benchmark_group("prefix_cache_600k");
    let tokens: Vec<u32> = (0..600_000u32).map(|i| i.wrapping_mul(2_654_435_761) >> 15).collect();
    let base = Prompt::from_tokens(&tokens[..590_000], 64).unwrap();
    let full = Prompt::from_tokens(&tokens, 64).unwrap();
    g.bench_function("match_and_insert_turn", |b| {
        b.iter_batched(
            || {
                let mut t = RadixTree::new();
                t.insert(&UnitKey::new(base.blocks().clone(), None, 4), u32::MAX);
                t
            },
            |mut t| {
                let k = UnitKey::new(full.blocks().clone(), None, 4);
                let m = t.match_prefix(&k, k.units(), true);
                t.lock(m.node);
                let ins = t.insert(&k, k.units());
                t.unlock(m.node);
                (m.units, ins.units)
            },
            criterion::BatchSize::SmallInput,
        )
    });
    g.bench_function("prompt_from_600k_token_ids", |b| b.iter(|| Prompt::from_tokens(&tokens, 64).unwrap().full_blocks()));
    g.finish();
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_virtual_clock");
    g.sample_size(10);
    g.bench_function("agentx_like_dep2_c160_10min", |b| b.iter(|| simulate(160, Time::from_secs(600), 42)));
    g.bench_function("agentx_like_dep2_c160_1h", |b| b.iter(|| simulate(160, Time::from_secs(3600), 42)));
    g.finish();
    let t0 = std::time::Instant::now();
    let (f, gtok, ev, st) = simulate(160, Time::from_secs(3600), 42);
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "cache hit rate {:.3}, prefill batches {}, decode iterations {}, avg accept {:.3}, retracted {}, busy {:.0} s",
        st.cache_hit_rate,
        st.prefill_batches,
        st.decode_iterations,
        st.avg_spec_accept_length,
        st.num_retracted_requests_total,
        st.busy_time.as_secs_f64()
    );
    println!(
        "one simulated hour at c160: {f} requests, {gtok} generated tokens, {ev} output events, {wall:.2} s wall, {:.0}x real time",
        3600.0 / wall
    );
}

criterion_group!(benches, radix, bench);
criterion_main!(benches);
