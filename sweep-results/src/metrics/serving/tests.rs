use super::*;
use crate::records::RecordError;
use crate::records::tests::rec;

fn random(start_ms: u64, ttft_ms: u64, e2el_ms: u64, osl: u64, idx: u32, gaps_ms: &[u64]) -> Record {
    let mut r = rec(start_ms, ttft_ms, e2el_ms, 999, osl);
    r.source_kind = "random".into();
    r.source_outer_idx = idx;
    r.chunk_gaps_ns = gaps_ms.iter().map(|g| g * 1_000_000).collect();
    r
}

fn meta() -> FixedMeta {
    FixedMeta {
        isl: 32,
        osl: 16,
        range_ratio: 0.8,
        num_prompts: 3,
        backend: "vllm".into(),
        model_id: "m".into(),
        input_lens: vec![10, 20, 30],
        percentiles: vec![99.0, 99.9],
        ..Default::default()
    }
}

/// Hand-computed as benchmark_serving's calculate_metrics computes them: two successful requests
/// (TPOT 100 and 500 ms, ITL gaps 500, 500 and 2000 ms), one failed; input counted from the
/// client's prompts, failed requests' outputs as 0.
#[test]
fn metrics_are_calculate_metrics() {
    let mut failed = random(0, 0, 0, 0, 2, &[]);
    failed.error = Some(RecordError { kind: "http_500".into(), message: "x".into(), status: Some(500) });
    let records = vec![random(0, 100, 1100, 11, 0, &[500, 500]), random(0, 200, 2200, 5, 1, &[2000]), failed];
    let mut m = meta();
    m.goodput.insert("ttft".into(), 150.0);
    let v = result_json(&records, &m, 2, 4.0, 100.0, "20261204-050000");
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {}", v[k]));
    let close = |k: &str, want: f64| assert!((f(k) - want).abs() < 1e-9, "{k}: {} != {want}", f(k));
    assert_eq!(v["completed"], 2);
    assert_eq!(v["total_input_tokens"], 30);
    assert_eq!(v["total_output_tokens"], 16);
    close("request_throughput", 0.5);
    close("output_throughput", 4.0);
    close("total_token_throughput", 11.5);
    close("request_goodput:", 0.25);
    close("mean_ttft_ms", 150.0);
    close("median_ttft_ms", 150.0);
    close("std_ttft_ms", 50.0);
    close("p99_ttft_ms", 199.0);
    close("p99.9_ttft_ms", 199.9);
    close("mean_tpot_ms", 300.0);
    close("std_tpot_ms", 200.0);
    close("mean_itl_ms", 1000.0);
    close("median_itl_ms", 500.0);
    close("std_itl_ms", 500_000f64.sqrt());
    close("mean_e2el_ms", 1650.0);
    close("benchmark_end_time_unix", 104.0);
    assert_eq!(v["input_lens"], json!([10, 20, 30]));
    assert_eq!(v["output_lens"], json!([11, 5, 0]));
    assert_eq!(v["request_rate"], "inf");
    assert_eq!(v["max_concurrency"], 2);
    assert_eq!(v["backend"], "vllm");
}

/// No successful request: numpy's `np.mean(0)` gives zeros, not a crash; no goodput key value.
#[test]
fn nothing_completed_gives_zeros() {
    let v = result_json(&[], &meta(), 1, 0.0, 0.0, "d");
    assert_eq!(v["completed"], 0);
    assert_eq!(v["mean_ttft_ms"], 0.0);
    assert_eq!(v["p99_e2el_ms"], 0.0);
    assert!(v["request_goodput:"].is_null());
}

/// InferenceX runs benchmark_serving with its default `--metric-percentiles`: every metric has
/// p90, p99 and p99.9 keys, as in its result files.
#[test]
fn default_percentiles_are_benchmark_serving_defaults() {
    let records = vec![random(0, 100, 1100, 11, 0, &[500, 500]), random(0, 200, 2200, 5, 1, &[2000])];
    let m = FixedMeta { percentiles: DEFAULT_PERCENTILES.to_vec(), ..meta() };
    let v = result_json(&records, &m, 2, 4.0, 100.0, "d");
    for metric in ["ttft", "tpot", "itl", "e2el"] {
        for p in ["p90", "p99", "p99.9"] {
            assert!(v[format!("{p}_{metric}_ms")].is_f64(), "{p}_{metric}_ms missing");
        }
    }
    assert!((v["p90_ttft_ms"].as_f64().unwrap() - 190.0).abs() < 1e-9);
}
