//! Mechanisms the published points of other GPUs and models show (docs/calibration.md, "What the
//! published points show"): when a request is received, what an eager step costs on a deep
//! model, when a sliding-window model can reuse a cached prefix, and what DeepSeek-V4's
//! lightning indexer costs over a long context.

mod common;
use common::*;
use engine::{GpuSpec, ModelSpec, Prompt, Request, Time};

const LLAMA: &str = "llama-3.1-8b";
const V4: &str = "deepseek-v4-flash";

/// Mean wait, in decode steps, between an arrival mid-decode and its first token's step, over
/// arrivals spread across the decode steps of four running requests.
fn mean_wait_steps(args: &[&str], env: &[(&str, &str)]) -> f64 {
    let mut waits = Vec::new();
    for k in 0..24u64 {
        let mut e = engine(args, env, LLAMA, "h200");
        let at = Time::from_millis(400 + 7 * k);
        let mut arrivals: Vec<(Time, Request)> = (0..4).map(|i| (Time::ZERO, Request::new(i, Prompt::unique(i, 16, 512), 4000))).collect();
        arrivals.push((at, Request::new(99, Prompt::unique(99, 16, 64), 4)));
        let out = run(&mut e, arrivals);
        let first = first_token_time(&out, 99).unwrap();
        // The running requests' token times are the decode step ends.
        let steps = token_times(&out, 0).iter().filter(|(t, _)| *t > at && *t < first).count();
        waits.push(steps as f64);
    }
    waits.iter().sum::<f64>() / waits.len() as f64
}

#[test]
fn recv_interval_makes_arrivals_wait_for_the_next_poll() {
    // SGLang polls for new requests every `--scheduler-recv-interval` decode steps: an arrival
    // mid-decode waits half the interval on average before it is even queued.
    let polled_every_step = mean_wait_steps(&[], &[]);
    let every_30 = mean_wait_steps(&["--scheduler-recv-interval", "30"], &[]);
    assert!(polled_every_step <= 1.0, "interval 1: {polled_every_step} decode steps before the prefill");
    assert!((10.0..=20.0).contains(&every_30), "interval 30: {every_30} decode steps (about 15 expected)");
    // A decode step weighing the whole interval polls every step again.
    let weighted = mean_wait_steps(&["--scheduler-recv-interval", "30"], &[("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE", "30")]);
    assert!(weighted <= 1.0, "decode weight 30: {weighted}");
}

#[test]
fn an_idle_server_receives_at_once_whatever_the_interval() {
    let ttft = |args: &[&str]| {
        let mut e = engine(args, &[], LLAMA, "h200");
        let out = run(&mut e, vec![(Time::from_millis(10), Request::new(1, Prompt::unique(1, 16, 2000), 4))]);
        first_token_time(&out, 1).unwrap()
    };
    assert_eq!(ttft(&[]), ttft(&["--scheduler-recv-interval", "30"]));
}

#[test]
fn eager_steps_pay_the_host_cost_of_every_layer() {
    // The same prefill with a per-layer eager host cost: slower by layers x cost.
    let ttft = |per_layer: f64| {
        let mut gpu = GpuSpec::lookup("h200").unwrap();
        gpu.cost.eager_layer_us = per_layer;
        let cfg = engine::EngineConfig::from_args(&["--tp", "8"], &Default::default()).unwrap();
        let model = ModelSpec::lookup("deepseek-v3").unwrap();
        let layers = model.layers as f64;
        let mut e = engine::Engine::new(cfg, model, gpu, 42).unwrap();
        let out = run(&mut e, vec![(Time::ZERO, Request::new(1, Prompt::unique(1, 16, 1024), 2))]);
        (first_token_time(&out, 1).unwrap(), layers)
    };
    let (base, layers) = ttft(0.0);
    let (slow, _) = ttft(2000.0);
    let extra_ms = (slow - base).as_millis_f64();
    assert!((extra_ms - layers * 2.0).abs() < 0.01, "{extra_ms} ms extra for {layers} layers at 2 ms");
}

/// Prefix tokens the second request finds cached: the first ran `first_out` output tokens on a
/// 51,200-token prompt; the second shares that prompt and goes on with other text (as an
/// agentic turn does after the previous answer).
fn second_turn_hit(args: &[&str], first_out: u32) -> u64 {
    let mut e = engine(args, &[], V4, "h200");
    let shared: Vec<u64> = (0..800).map(|i| 7_000_000 + i).collect();
    let p1 = Prompt::from_block_ids(&shared, 64, 51_200).unwrap();
    let mut b2 = shared.clone();
    b2.extend((0..20).map(|i| 8_000_000 + i));
    let p2 = Prompt::from_block_ids(&b2, 64, 52_480).unwrap();
    let out = run(&mut e, vec![(Time::ZERO, Request::new(1, p1, first_out)), (Time::from_secs(60), Request::new(2, p2, 5))]);
    finish_of(&out, 2).unwrap().2.cached_tokens
}

#[test]
fn a_sliding_window_model_reuses_a_prefix_only_where_its_window_kv_survives() {
    // A short answer leaves the prompt's end inside the window: the prompt is reused.
    assert_eq!(second_turn_hit(&["--tp", "8"], 5), 51_200);
    // A long answer slides the window past the prompt's end; SGLang's SWA cache keeps window KV
    // only at the sequence's tail, so the next turn, which branches at the prompt's end,
    // recomputes the whole prompt.
    assert_eq!(second_turn_hit(&["--tp", "8"], 600), 0);
    // Prefix tails keep the window at each prompt's end; bounded replay recomputes only a tail.
    assert_eq!(second_turn_hit(&["--tp", "8", "--swa-prefix-tails", "4096"], 600), 51_200);
    assert_eq!(second_turn_hit(&["--tp", "8", "--enable-decoder-swa-bounded-replay"], 600), 51_200);
}

#[test]
fn full_attention_models_reuse_any_cached_prefix() {
    let mut e = engine(&[], &[], LLAMA, "h200");
    let shared: Vec<u64> = (0..200).map(|i| 7_000_000 + i).collect();
    let p1 = Prompt::from_block_ids(&shared, 16, 3_200).unwrap();
    let mut b2 = shared.clone();
    b2.extend((0..20).map(|i| 8_000_000 + i));
    let p2 = Prompt::from_block_ids(&b2, 16, 3_520).unwrap();
    let out = run(&mut e, vec![(Time::ZERO, Request::new(1, p1, 600)), (Time::from_secs(60), Request::new(2, p2, 5))]);
    assert_eq!(finish_of(&out, 2).unwrap().2.cached_tokens, 3_200);
}

/// TTFT of one 131,072-token prompt on DeepSeek-V4-Flash (H200) at `tp`, with the lightning
/// indexer's heads as in the model or removed.
fn long_prefill_ttft(tp: &str, indexer: bool) -> f64 {
    let mut model = ModelSpec::lookup(V4).unwrap();
    if let (false, engine::profiles::KvLayout::Dsv4 { indexer_heads, .. }) = (indexer, &mut model.kv) {
        *indexer_heads = 0;
    }
    let cfg = engine::EngineConfig::from_args(&["--tp", tp], &Default::default()).unwrap();
    let mut e = engine::Engine::new(cfg, model, GpuSpec::lookup("h200").unwrap(), 42).unwrap();
    let out = run(&mut e, vec![(Time::ZERO, Request::new(1, Prompt::unique(1, 64, 131_072), 2))]);
    first_token_time(&out, 1).unwrap().as_secs_f64()
}

#[test]
fn the_lightning_indexer_scores_the_whole_context_on_every_gpu_in_fp8() {
    // Every query token scores every compressed row (context / 4) of every CSA layer with all
    // 64 index heads of 128 dims. SGLang's indexer is built from replicated linears: each GPU of
    // the TP group runs all heads, so TP does not shorten it, and its logits run in FP8.
    let model = ModelSpec::lookup(V4).unwrap();
    let gpu = GpuSpec::lookup("h200").unwrap();
    let engine::profiles::KvLayout::Dsv4 { csa_layers, csa_ratio, indexer_heads, indexer_dim, .. } = model.kv else {
        panic!("V4-Flash has the dsv4 KV layout")
    };
    let l = 131_072f64;
    // Σ over query positions of the compressed rows before them (causal).
    let rows = l * l / 2.0 / csa_ratio as f64;
    let flops = rows * csa_layers as f64 * 2.0 * (indexer_heads * indexer_dim) as f64;
    let expected = flops / (gpu.datasheet.flops.fp8 * gpu.cost.eta_flops);
    for tp in ["4", "8"] {
        let extra = long_prefill_ttft(tp, true) - long_prefill_ttft(tp, false);
        assert!((extra / expected - 1.0).abs() < 0.05, "TP{tp}: the indexer adds {extra:.3} s, {expected:.3} s expected");
    }
}
