//! Property tests over random workloads and configurations.

mod common;
use engine::{Engine, FinishReason, Output, Prompt, Request, Time};
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Clone, Debug)]
struct Spec {
    arrival_ms: u64,
    group: u64,
    shared_blocks: usize,
    own_len: u64,
    max_new: u32,
    ignore_eos: bool,
    eos_after: u32,
    abort_after_ms: Option<u64>,
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    (0u64..3000, 0u64..3, 0usize..20, 1u64..800, 1u32..200, any::<bool>(), 1u32..250, prop::option::weighted(0.15, 0u64..400)).prop_map(
        |(arrival_ms, group, shared_blocks, own_len, max_new, ignore_eos, eos_after, abort)| Spec {
            arrival_ms,
            group,
            shared_blocks,
            own_len,
            max_new,
            ignore_eos,
            eos_after,
            abort_after_ms: abort,
        },
    )
}

#[derive(Clone, Debug)]
struct Conf {
    args: Vec<String>,
    env: Vec<(String, String)>,
    block: u32,
}

fn conf_strategy() -> impl Strategy<Value = Conf> {
    (
        prop::sample::select(vec![1u32, 16, 64]),
        2500u64..12_000,
        1u32..12,
        prop::sample::select(vec![256i64, 1024, -1]),
        prop::sample::select(vec!["fcfs", "lpm", "shortest-prefill-first", "lof", "random", "hrrn", "dfs-weight"]),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec!["0.7", "0.05"]),
        prop::sample::select(vec![1u32, 3]),
        any::<bool>(),
    )
        .prop_map(|(page, total, run, chunk, policy, spec, dp, ratio, interval, mixed)| {
            let mut args: Vec<String> = vec![
                "--page-size".into(),
                page.to_string(),
                "--max-total-tokens".into(),
                total.to_string(),
                "--max-running-requests".into(),
                (run * if dp { 2 } else { 1 }).to_string(),
                "--chunked-prefill-size".into(),
                chunk.to_string(),
                "--schedule-policy".into(),
                policy.into(),
                "--stream-interval".into(),
                interval.to_string(),
            ];
            let mut env = vec![("SGLANG_INIT_NEW_TOKEN_RATIO".to_string(), ratio.to_string())];
            if spec {
                args.extend(["--speculative-algorithm", "EAGLE"].map(String::from));
                env.push(("SGLANG_SIMULATE_ACC_LEN".into(), "2.6".into()));
            }
            if dp {
                args.extend(["--tp", "2", "--attn-dp-size", "2"].map(String::from));
            }
            if mixed {
                args.push("--enable-mixed-chunk".into());
            }
            Conf { args, env, block: if page == 1 { 16 } else { page } }
        })
}

fn build(conf: &Conf) -> Engine {
    let args: Vec<&str> = conf.args.iter().map(|s| s.as_str()).collect();
    let env: Vec<(&str, &str)> = conf.env.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    common::engine(&args, &env, "llama-3.1-8b", "h200")
}

/// Accepted request id -> (max_new_tokens, EOS position unless ignore_eos).
type Accepted = HashMap<u64, (u32, Option<u32>)>;

/// Runs the workload; returns outputs and the ids that were accepted.
fn drive(conf: &Conf, specs: &[Spec]) -> (Vec<Output>, Accepted) {
    let mut e = build(conf);
    let cap = e.limits().max_total_num_tokens;
    let bt = conf.block;
    let mut events: Vec<(Time, u64, bool)> = Vec::new(); // (time, id, is_abort)
    let mut reqs: HashMap<u64, Request> = HashMap::new();
    for (i, s) in specs.iter().enumerate() {
        let id = i as u64;
        // group prefix + own blocks; keep prompt + output well inside the pool
        let mut blocks: Vec<u64> = (0..s.shared_blocks as u64).map(|b| s.group * 1000 + b).collect();
        let own_blocks = s.own_len / bt as u64;
        blocks.extend((0..own_blocks).map(|b| 1_000_000 + id * 10_000 + b));
        let len = (blocks.len() as u64 * bt as u64 + s.own_len % bt as u64).max(1);
        let len = len.min(cap / 2);
        let n_full = (len / bt as u64) as usize;
        blocks.truncate(n_full);
        let p = Prompt::from_block_ids(&blocks, bt, len).unwrap();
        let max_new = s.max_new.min((cap / 4) as u32).max(1);
        let mut r = Request::new(id, p, max_new);
        r.ignore_eos = s.ignore_eos;
        r.eos_after = Some(s.eos_after);
        reqs.insert(id, r);
        let at = Time::from_millis(s.arrival_ms);
        events.push((at, id, false));
        if let Some(a) = s.abort_after_ms {
            events.push((at + Time::from_millis(a), id, true));
        }
    }
    events.sort();
    let mut accepted = HashMap::new();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let next_ev = events.get(i).map(|e| e.0);
        let t = match (next_ev, e.next_event_time()) {
            (None, None) => break,
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (Some(a), Some(b)) => a.min(b),
        };
        e.advance(t, &mut out);
        while i < events.len() && events[i].0 <= t {
            let (at, id, is_abort) = events[i];
            i += 1;
            if is_abort {
                e.abort(at, id);
            } else {
                let r = reqs.remove(&id).unwrap();
                let want = (r.max_new_tokens.unwrap(), if r.ignore_eos { None } else { r.eos_after });
                if e.submit(at, r).is_ok() {
                    accepted.insert(id, want);
                }
            }
        }
        e.advance(t, &mut out);
        e.check_invariants();
    }
    assert!(e.is_idle(), "engine must drain");
    (out, accepted)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48), .. ProptestConfig::default() })]

    #[test]
    fn no_request_lost_or_finished_twice(conf in conf_strategy(), specs in prop::collection::vec(spec_strategy(), 1..40)) {
        let (out, accepted) = drive(&conf, &specs);
        let mut finished: HashMap<u64, usize> = HashMap::new();
        let mut tokens: HashMap<u64, u64> = HashMap::new();
        let mut last_time = Time::ZERO;
        for o in &out {
            match o {
                Output::Tokens { id, count, time, .. } => {
                    prop_assert!(!finished.contains_key(id), "tokens after finish for {}", id);
                    prop_assert!(*count >= 1);
                    *tokens.entry(*id).or_default() += *count as u64;
                    prop_assert!(*time >= last_time);
                    last_time = *time;
                }
                Output::Finished { id, reason, usage, error, time } => {
                    *finished.entry(*id).or_default() += 1;
                    prop_assert!(*time >= last_time || *reason == FinishReason::Abort);
                    let (max_new, eos) = accepted[id];
                    prop_assert!(error.is_none() || *reason == FinishReason::Abort);
                    prop_assert!(!matches!(error, Some(engine::RequestError::OutOfMemory)), "OOM with a pool that fits every request");
                    if *reason != FinishReason::Abort {
                        prop_assert_eq!(tokens.get(id).copied().unwrap_or(0), usage.completion_tokens);
                        let want = match eos { Some(e) => (e.min(max_new)) as u64, None => max_new as u64 };
                        prop_assert_eq!(usage.completion_tokens, want, "request {}", id);
                        let want_reason = match eos { Some(e) if e <= max_new => FinishReason::Stop, _ => FinishReason::Length };
                        prop_assert_eq!(*reason, want_reason);
                        prop_assert!(usage.cached_tokens < usage.prompt_tokens);
                    }
                }
            }
        }
        for id in accepted.keys() {
            prop_assert_eq!(finished.get(id).copied(), Some(1), "request {} finished {:?} times", id, finished.get(id));
        }
        prop_assert_eq!(finished.len(), accepted.len());
    }

    #[test]
    fn same_inputs_and_seed_give_identical_outputs(conf in conf_strategy(), specs in prop::collection::vec(spec_strategy(), 1..25)) {
        let a = drive(&conf, &specs).0;
        let b = drive(&conf, &specs).0;
        prop_assert_eq!(a, b);
    }
}
