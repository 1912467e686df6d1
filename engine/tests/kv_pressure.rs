//! KV pressure: LRU eviction, re-prefill of evicted prefixes, retraction, the
//! host-resident Engram table and `--swa-prefix-tails`, on the real engine.

mod common;
use common::*;
use engine::{Engine, EngineConfig, FinishReason, GpuSpec, Limits, ModelSpec, Output, Prompt, Request, Time};
use std::collections::BTreeMap;

const LLAMA: &str = "llama-3.1-8b";

/// A prompt of `blocks` 16-token blocks: `base` blocks shared by everything with the
/// same `base`, then `own` blocks unique to `salt`.
fn prompt(base: u64, shared: usize, salt: u64, own: usize) -> Prompt {
    let mut ids: Vec<u64> = (0..shared as u64).map(|i| base * 1_000_000 + i).collect();
    ids.extend((0..own as u64).map(|i| 900_000_000 + salt * 1_000 + i));
    Prompt::from_block_ids(&ids, 16, ids.len() as u64 * 16).unwrap()
}

fn ms(x: u64) -> Time {
    Time::from_millis(x)
}

/// Phase 1 of the eviction scenario (pool 8,448 tokens, page 16):
/// A caches PA; C extends PA and keeps decoding (PA locked, and the oldest entry);
/// B caches PB; E caches PE; D needs more than the free pool, so one leaf must go.
fn eviction_scenario() -> (Engine, Vec<Output>) {
    let mut e = engine(&["--max-total-tokens", "8448", "--page-size", "16"], &[], LLAMA, "h200");
    let out = run(
        &mut e,
        vec![
            (ms(0), Request::new(1, prompt(1, 64, 0, 0), 1)),     // A: PA
            (ms(500), Request::new(3, prompt(1, 64, 3, 4), 600)), // C: PA + 64 tokens, long decode
            (ms(600), Request::new(2, prompt(2, 64, 0, 0), 1)),   // B: PB
            (ms(700), Request::new(5, prompt(5, 64, 0, 0), 1)),   // E: PE
            (ms(800), Request::new(4, prompt(4, 0, 4, 338), 1)),  // D: 5,408 tokens
        ],
    );
    (e, out)
}

#[test]
fn eviction_takes_the_least_recent_unlocked_leaf_never_a_locked_prefix() {
    let (mut e, out) = eviction_scenario();
    for id in 1..=5 {
        assert_eq!(finish_of(&out, id).unwrap().1, FinishReason::Length, "request {id}");
    }
    assert_eq!(finish_of(&out, 3).unwrap().2.cached_tokens, 1024, "C reuses PA");
    // D's allocation evicted exactly one 1,024-token leaf.
    assert_eq!(e.stats().evicted_tokens_total, 1024);
    assert_eq!(e.stats().kv.evicted_tokens, 1024);
    // Which one: PE and PA (older than PB, but locked by C then) survive, PB is gone.
    let t = e.now() + Time::from_secs(1);
    let out2 = run(
        &mut e,
        vec![
            (t, Request::new(15, prompt(5, 64, 0, 0), 1)),
            (t + ms(500), Request::new(11, prompt(1, 64, 0, 0), 1)),
            (t + ms(1000), Request::new(12, prompt(2, 64, 0, 0), 1)),
        ],
    );
    assert_eq!(finish_of(&out2, 15).unwrap().2.cached_tokens, 1008, "PE cached (one page left to compute)");
    assert_eq!(finish_of(&out2, 11).unwrap().2.cached_tokens, 1008, "PA was locked while D evicted");
    assert_eq!(finish_of(&out2, 12).unwrap().2.cached_tokens, 0, "PB, the LRU unlocked leaf, was evicted");
}

#[test]
fn an_evicted_prefix_is_prefilled_again_and_counted_against_the_ideal_hit() {
    let (mut e, _) = eviction_scenario();
    let before = e.stats().kv;
    // Nothing was evicted before a later request wanted it: real hits equal ideal ones.
    assert_eq!(before.reprefill_evicted_tokens, 0);
    assert_eq!(before.cached_tokens, before.ideal_cached_tokens);
    assert_eq!(before.cached_tokens, 1024);
    let t = e.now() + Time::from_secs(1);
    let out = run(&mut e, vec![(t, Request::new(12, prompt(2, 64, 0, 0), 1))]);
    let u = finish_of(&out, 12).unwrap().2;
    assert_eq!(u.cached_tokens, 0);
    let after = e.stats().kv;
    // An infinite cache would have served 1,008 of PB's 1,024 tokens; all are prefilled again.
    assert_eq!(after.prompt_tokens - before.prompt_tokens, 1024);
    assert_eq!(after.cached_tokens - before.cached_tokens, 0);
    assert_eq!(after.ideal_cached_tokens - before.ideal_cached_tokens, 1008);
    assert_eq!(after.reprefill_evicted_tokens, 1008);
    assert!(after.prefix_hit_rate < after.ideal_prefix_hit_rate);
    assert_eq!(after.pool_tokens, 8448);
    assert!(after.peak_occupied_tokens > 8448 - 1024 && after.peak_occupied_tokens <= 8448, "{after:?}");
    assert!(after.peak_used_tokens <= after.peak_occupied_tokens);
}

/// Three requests admitted in one batch (the reservation clip is tiny), then decode
/// outgrows a 3,000-token pool.
fn retraction_run(retract_steps: &str) -> (Engine, Vec<Output>, f64, [u64; 3]) {
    let mut e = engine(
        &["--max-total-tokens", "3000", "--page-size", "16"],
        &[("SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", "16"), ("SGLANG_RETRACT_DECODE_STEPS", retract_steps)],
        LLAMA,
        "h200",
    );
    let lens = [600u64, 900, 752];
    for (i, &n) in lens.iter().enumerate() {
        e.submit(Time::ZERO, Request::new(i as u64, Prompt::unique(i as u64, 16, n), 1000)).unwrap();
    }
    let mut out = Vec::new();
    let mut ratio_at_first = None;
    let mut gen_at_first = [0u64; 3];
    let mut generated = [0u64; 3];
    while let Some(t) = e.next_event_time() {
        let mut o = Vec::new();
        e.advance(t, &mut o);
        for x in &o {
            if let Output::Tokens { id, count, .. } = x {
                generated[*id as usize] += *count as u64;
            }
        }
        out.extend(o);
        e.check_invariants();
        if ratio_at_first.is_none() && e.stats().num_retracted_requests_total > 0 {
            ratio_at_first = Some(e.stats().ranks[0].new_token_ratio);
            gen_at_first = generated;
        }
    }
    (e, out, ratio_at_first.expect("a retraction happened"), gen_at_first)
}

#[test]
fn decode_out_of_pages_retracts_longest_prompt_first_and_everything_completes() {
    for steps in ["20", "50"] {
        let (e, out, ratio, g) = retraction_run(steps);
        let u: Vec<_> = (0..3).map(|i| finish_of(&out, i).unwrap()).collect();
        for (i, (_, reason, usage)) in u.iter().enumerate() {
            assert_eq!(*reason, FinishReason::Length, "request {i}");
            assert_eq!(usage.completion_tokens, 1000, "request {i}");
        }
        // Equal progress: the longest prompt (900) goes first, the shortest (600) never.
        assert!(u[1].2.num_retractions >= 1);
        assert_eq!(u[0].2.num_retractions, 0);
        // Ratio re-estimated over the two survivors: (Σ generated + steps·n) / (Σ max_new + 1).
        let k: f64 = steps.parse().unwrap();
        let want = ((g[0] + g[2]) as f64 + k * 2.0) / 2001.0;
        assert!((ratio - want.min(1.0)).abs() < 1e-9, "ratio {ratio}, want {want} (steps {steps})");
        // Re-admission recomputes prompt + output minus what of the prompt is still cached
        // (the prompt went into the tree after its prefill; the output never did).
        let s = e.stats();
        let (input, output) = (s.num_retracted_input_tokens_total, s.num_retracted_output_tokens_total);
        assert!(s.kv.retraction_recompute_tokens >= output, "{:?}", s.kv);
        assert!(s.kv.retraction_recompute_tokens < input + output, "{:?}", s.kv);
        assert_eq!(s.kv.retractions, s.num_retracted_requests_total);
        assert!(s.kv.peak_occupied_tokens <= 3000);
    }
}

fn limits(args: &[&str], env: &[(&str, &str)]) -> Result<Limits, engine::ConfigError> {
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let cfg = EngineConfig::from_args(args, &env).unwrap();
    Limits::resolve(&cfg, &ModelSpec::lookup("deepseek-v4.1-flash").unwrap(), &GpuSpec::lookup("gb300").unwrap()).map(|(l, _)| l)
}

#[test]
fn host_engram_table_frees_its_device_share_for_kv() {
    const ENGRAM_BYTES: f64 = 200e9; // engine spec §5.2, profile `extra_weights`
    let on = [("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE", "1")];
    for tp in [4u32, 8] {
        let tps = tp.to_string();
        let args = ["--tp-size", tps.as_str(), "--mem-fraction-static", "0.8"];
        let off = limits(&args, &[]).unwrap();
        let host = limits(&args, &on).unwrap();
        let freed = ENGRAM_BYTES / tp as f64;
        assert!((off.weight_bytes_per_gpu - host.weight_bytes_per_gpu - freed).abs() < 1.0, "tp {tp}");
        let gained = (host.max_total_num_tokens - off.max_total_num_tokens) as f64;
        let want = freed / host.kv_bytes_per_token_per_gpu;
        assert!((gained - want).abs() <= 256.0, "tp {tp}: gained {gained}, want {want}");
    }
    // The recipe's two-GPU arms only fit with the table on the host.
    let args = ["--tp-size", "2", "--ep-size", "2", "--mem-fraction-static", "0.8"];
    assert!(matches!(limits(&args, &[]), Err(engine::ConfigError::NoKvMemory { .. })));
    assert!(limits(&args, &on).unwrap().max_total_num_tokens > 10_000_000);
}

#[test]
fn swa_prefix_tails_is_modelled_and_a_short_answer_reuses_the_prompt_either_way() {
    // The window (128 tokens) still covers the prompt's end after a 50-token answer, so the
    // next turn reuses the prompt with or without prefix tails (tests/mechanisms.rs has a long one).
    let go = |extra: &[&str]| {
        let mut args = vec!["--tp", "8", "--max-total-tokens", "300000"];
        args.extend_from_slice(extra);
        let mut e = engine(&args, &[], "deepseek-v4-flash", "h200");
        let base: Vec<u64> = (0..400).collect();
        let mut next = base.clone();
        next.extend(1000..1100);
        let out = run(
            &mut e,
            vec![
                (Time::ZERO, Request::new(1, Prompt::from_block_ids(&base, 256, 102_400).unwrap(), 50)),
                (Time::from_secs(5), Request::new(2, Prompt::from_block_ids(&next, 256, 128_000).unwrap(), 50)),
            ],
        );
        (e.info(), e.limits().clone(), format!("{out:?}"), e.stats().kv)
    };
    let (i0, l0, o0, k0) = go(&[]);
    let (i1, l1, o1, k1) = go(&["--swa-prefix-tails", "4096", "--enable-decoder-swa-bounded-replay"]);
    assert!(i1.modelled_flags.iter().any(|f| f.contains("swa-prefix-tails")), "{:?}", i1.modelled_flags);
    assert!(i1.modelled_flags.iter().any(|f| f.contains("enable-decoder-swa-bounded-replay")));
    assert!(!i0.modelled_flags.iter().any(|f| f.contains("swa")));
    assert_eq!(l0, l1);
    assert_eq!(o0, o1);
    assert_eq!(k0, k1);
    assert_eq!(k1.cached_tokens, 102_400, "the second turn reuses the whole first prompt");
}
