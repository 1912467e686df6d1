//! Prints predicted step times for the published recipe points (plausibility probe).
use engine::cost::{DraftLoad, RankLoad};
use engine::{Engine, EngineConfig, GpuSpec, ModelSpec};
use std::collections::BTreeMap;

fn main() {
    for (args, env_host, b, c) in [
        (
            "--tp-size 4 --ep-size 1 --chunked-prefill-size 16384 --mem-fraction-static 0.8 --max-running-requests 1 --cuda-graph-max-bs-decode 64",
            "0",
            1u64,
            300_000u64,
        ),
        (
            "--tp-size 2 --ep-size 2 --chunked-prefill-size 16384 --mem-fraction-static 0.8 --max-running-requests 64 --cuda-graph-max-bs-decode 64",
            "1",
            22,
            300_000,
        ),
        (
            "--tp-size 2 --dp-size 2 --ep-size 2 --enable-dp-attention --moe-a2a-backend megamoe --enable-dp-lm-head --max-running-requests 256 --cuda-graph-max-bs-decode 128 --mem-fraction-static 0.85",
            "1",
            46,
            300_000,
        ),
    ] {
        let mut env = BTreeMap::new();
        env.insert("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE".to_string(), env_host.to_string());
        env.insert("SGLANG_SIMULATE_ACC_LEN".to_string(), "3.51".to_string());
        let mut a: Vec<&str> = args.split_whitespace().collect();
        a.extend(["--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "5"]);
        let cfg = EngineConfig::from_args(&a, &env).unwrap();
        let e = Engine::new(cfg, ModelSpec::lookup("deepseek-v4.1-flash").unwrap(), GpuSpec::lookup("gb300").unwrap(), 42).unwrap();
        let cm = e.cost_model();
        let l = e.limits();
        let ranks = l.attn_dp_size as usize;
        let (bs, graph) = l.padded_decode_bs(b as u32);
        let load = RankLoad {
            tokens: bs as u64 * 6,
            logits: bs as u64 * 6,
            kv_read_bytes: b as f64 * cm.kv_read_bytes(c),
            attn_flops: b as f64 * cm.attn_flops(6, c, false),
            indexer_flops: b as f64 * cm.indexer_flops(6, c),
            prefix: 0,
            graph,
            draft: Some(DraftLoad { passes: 1, tokens: bs as u64 * 5 }),
        };
        let step = cm.step(&vec![load; ranks]);
        let pre = RankLoad {
            tokens: 16384 / ranks as u64,
            logits: 1,
            kv_read_bytes: cm.kv_read_bytes(c),
            attn_flops: cm.attn_flops(16384 / ranks as u64, c, true),
            indexer_flops: cm.indexer_flops(16384 / ranks as u64, c),
            prefix: c.saturating_sub(16384 / ranks as u64),
            graph: false,
            draft: None,
        };
        let p = cm.step(&vec![pre; ranks]);
        println!(
            "{args}\n  pool {} tokens/rank, weights {:.1} GB/GPU; decode b={b}/rank c={c}: {:.2} ms/step -> {:.0} tok/s/user at AL 3.51; prefill chunk: {:.1} ms  {:?}",
            l.max_total_num_tokens,
            l.weight_bytes_per_gpu / 1e9,
            step.total.as_millis_f64(),
            3.51 / step.total.as_secs_f64(),
            p.total.as_millis_f64(),
            step
        );
    }
}
