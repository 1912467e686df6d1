use super::*;
use std::collections::BTreeMap;

fn model(name: &str, gpu: &str, par: Parallelism) -> CostModel {
    CostModel::new(&ModelSpec::lookup(name).unwrap(), &GpuSpec::lookup(gpu).unwrap(), par, &BTreeMap::new())
}

fn tp8() -> Parallelism {
    Parallelism { tp: 8, attn_dp: 1, ep: 8, moe_a2a: false, dp_lm_head: false }
}

fn decode(cm: &CostModel, b: u64, c: u64) -> RankLoad {
    RankLoad {
        tokens: b,
        logits: b,
        kv_read_bytes: b as f64 * cm.kv_read_bytes(c),
        attn_flops: b as f64 * cm.attn_flops(1, c, false),
        indexer_flops: b as f64 * cm.indexer_flops(1, c),
        prefix: 0,
        graph: true,
        draft: None,
    }
}

fn within(x: f64, target: f64, tol: f64) -> bool {
    (x - target).abs() <= tol * target
}

#[test]
fn v4_flash_kv_read_matches_spec() {
    let cm = model("deepseek-v4-flash", "h200", tp8());
    let a = cm.kv_read_bytes(4096) / 1e6;
    let b = cm.kv_read_bytes(32768) / 1e6;
    assert!((a - 12.7).abs() <= 0.1, "{a} MB at 4K");
    assert!((b - 35.0).abs() <= 0.5, "{b} MB at 32K");
    let pool = cm.kv_bytes_per_token_per_gpu();
    assert!((6000.0..6700.0).contains(&pool), "{pool} B/token (about 6.3 KB)");
}

/// Spec §7.6 worked examples, within 15 %.
#[test]
fn worked_examples_within_tolerance() {
    let cm = model("deepseek-v4-flash", "h200", tp8());
    let t = cm.step(&[decode(&cm, 64, 4096)]).total.as_millis_f64();
    assert!(within(t, 7.0, 0.15), "V4 TP8 b64 {t} ms");
    let t1 = cm.step(&[decode(&cm, 1, 4096)]).total.as_millis_f64();
    assert!(within(t1, 3.0, 0.15), "V4 TP8 b1 {t1} ms");
    let pre = RankLoad {
        tokens: 8192,
        logits: 1,
        kv_read_bytes: cm.kv_read_bytes(8192),
        attn_flops: cm.attn_flops(8192, 8192, true),
        indexer_flops: cm.indexer_flops(8192, 8192),
        prefix: 0,
        graph: false,
        draft: None,
    };
    let tp = cm.step(&[pre]).total.as_millis_f64();
    assert!((35.0 * 0.85..=40.0 * 1.15).contains(&tp), "V4 TP8 prefill 8K {tp} ms");
    assert!(tp > t, "prefill 8K exceeds decode b64");

    let dp = model("deepseek-v4-flash", "h200", Parallelism { tp: 8, attn_dp: 8, ep: 8, moe_a2a: false, dp_lm_head: false });
    let loads: Vec<RankLoad> = (0..8).map(|_| decode(&dp, 64, 4096)).collect();
    let tdp = dp.step(&loads).total.as_millis_f64();
    assert!(within(tdp, 9.0, 0.15), "V4 DP8 64/rank {tdp} ms");

    let v3 = model("deepseek-v3", "h200", tp8());
    let t3 = v3.step(&[decode(&v3, 64, 4096)]).total.as_millis_f64();
    assert!(within(t3, 24.0, 0.15), "V3 TP8 b64 {t3} ms");
}

#[test]
fn decode_time_monotone_in_batch_and_context() {
    let cm = model("deepseek-v4-flash", "h200", tp8());
    let mut prev = 0.0;
    for b in [1u64, 2, 4, 8, 16, 32, 64, 128, 256] {
        let t = cm.step(&[decode(&cm, b, 4096)]).total.as_secs_f64();
        assert!(t >= prev, "b={b}");
        prev = t;
    }
    let mut prev = 0.0;
    for c in [128u64, 1024, 4096, 32768, 262144, 1 << 20] {
        let t = cm.step(&[decode(&cm, 32, c)]).total.as_secs_f64();
        assert!(t >= prev, "c={c}");
        prev = t;
    }
}

#[test]
fn engram_table_counts_only_when_on_device() {
    let m = ModelSpec::lookup("deepseek-v4.1-flash").unwrap();
    let g = GpuSpec::lookup("gb300").unwrap();
    let par = Parallelism { tp: 4, attn_dp: 1, ep: 1, moe_a2a: false, dp_lm_head: false };
    let dev = CostModel::new(&m, &g, par, &BTreeMap::new());
    let mut env = BTreeMap::new();
    env.insert("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE".into(), "1".into());
    let host = CostModel::new(&m, &g, par, &env);
    let diff = dev.weight_bytes_per_gpu() - host.weight_bytes_per_gpu();
    assert!((diff - 50e9).abs() < 1e6, "{diff}");
}
