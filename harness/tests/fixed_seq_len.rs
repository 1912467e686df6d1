//! InferenceX's fixed-sequence-length scenario end to end: `sweep replay --isl/--osl` against a
//! real `sweep engine serve` process (its `/v1/completions`) and on the virtual clock, and the
//! checks made before anything is sent.

mod common;
use common::engine_server::*;
use common::*;

use harness::workload::fixed::{FixedConfig, sample};
use serde_json::Value;

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap_or_else(|| panic!("not a list: {v}")).iter().map(|x| x.as_u64().unwrap()).collect()
}

/// The live client sends benchmark_serving's workload: the numpy-drawn lengths request by
/// request, 2·C warmups of request 0, C in flight, and writes benchmark_serving's result shape.
#[test]
fn a_live_fixed_length_point_is_benchmark_servings() {
    let server = EngineServer::start(&["--time-scale", "20"]);
    let (o, out) = replay(&["--url", &server.url, "--isl", "512", "--osl", "48", "--concurrency", "4", "--gpus", "4"]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    assert!(so.contains("Serving Benchmark Result") && so.contains("Successful requests:"), "{so}");
    let dir = out.path().join("point");
    let bs = read_json(&dir.join("benchmark_serving.json"));
    let drawn = sample(&FixedConfig::inferencex(512, 48, 4));
    assert_eq!(bs["completed"], 40);
    assert_eq!(bs["num_prompts"], 40);
    assert_eq!(bs["max_concurrency"], 4);
    assert_eq!(bs["request_rate"], "inf");
    assert_eq!(bs["backend"], "vllm");
    assert_eq!(u64s(&bs["output_lens"]), drawn.iter().map(|d| u64::from(d.output_len)).collect::<Vec<_>>());
    assert_eq!(u64s(&bs["input_lens"]), drawn.iter().map(|d| u64::from(d.input_len)).collect::<Vec<_>>());
    for k in ["mean_ttft_ms", "median_tpot_ms", "p99_itl_ms", "std_e2el_ms", "total_token_throughput"] {
        assert!(bs[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {}", bs[k]);
    }
    let recs = records(&dir);
    let warm: Vec<&Value> = recs.iter().filter(|r| r["metadata"]["benchmark_phase"] == "warmup").collect();
    let prof: Vec<&Value> = recs.iter().filter(|r| r["metadata"]["benchmark_phase"] == "profiling").collect();
    assert_eq!(warm.len(), 8);
    assert!(warm.iter().all(|r| r["metadata"]["source_outer_idx"] == 0));
    assert_eq!(prof.len(), 40);
    for (i, r) in prof.iter().enumerate() {
        // The server counted exactly the prompt the client built, and generated its whole budget.
        let m = &r["metrics"];
        assert_eq!(m["input_sequence_length"]["value"].as_f64(), Some(f64::from(drawn[i].input_len)), "{r}");
        assert_eq!(m["output_sequence_length"]["value"].as_f64(), Some(f64::from(drawn[i].output_len)), "{r}");
        assert!(m["inter_chunk_latency"]["value"].as_array().is_some_and(|a| !a.is_empty()), "{r}");
    }
    let agg = read_json(&dir.join("agg.json"));
    assert_eq!(agg["scenario_type"], "fixed-seq-len");
    // Served by the reference engine: a prediction even over HTTP, never labelled a measurement.
    assert_eq!(agg["result_kind"], "predicted");
    let per_gpu = bs["total_token_throughput"].as_f64().unwrap() / 4.0;
    assert!((agg["tput_per_gpu"].as_f64().unwrap() - per_gpu).abs() < 1e-6 * per_gpu.max(1.0), "{}", agg["tput_per_gpu"]);
    assert_eq!(agg["validity"]["valid"], true, "{}", agg["validity"]);
}

/// On the virtual clock the same workload runs in milliseconds; bad lengths and ratios are
/// refused naming the flag; a prompt that cannot fit the context is refused before sending; a
/// concurrency above the server's running requests is warned about.
#[test]
fn fixed_length_on_the_virtual_clock_and_its_refusals() {
    let engine = ["--engine", TP4_FLAGS, "--hardware", "gb300", "--gpus", "4"];
    let run = |extra: &[&str]| {
        let mut a: Vec<&str> = engine.to_vec();
        a.extend_from_slice(extra);
        replay(&a)
    };
    let (o, out) = run(&["--isl", "1024", "--osl", "128", "--concurrency", "8"]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    let bs = read_json(&out.path().join("point/benchmark_serving.json"));
    assert_eq!(bs["completed"], 80);
    assert_eq!(bs["date"], "virtual-clock");
    assert_eq!(read_json(&out.path().join("point/agg.json"))["result_kind"], "predicted");

    for (args, want) in [
        (vec!["--isl", "0", "--osl", "8"], "--isl 0: must be at least 1 token"),
        (vec!["--isl", "64", "--osl", "-3"], "--osl -3: must be at least 1 token"),
        (vec!["--isl", "64", "--osl", "8", "--random-range-ratio", "1.5"], "--random-range-ratio: 1.5 is outside (0, 1]"),
    ] {
        let mut a = args.clone();
        a.extend(["--concurrency", "1"]);
        let (o, _) = run(&a);
        let (so, se) = text(&o);
        assert!(!o.status.success() && se.contains(want), "{args:?}: {so}\n{se}");
    }
    let (o, _) = run(&["--isl", "9000000", "--osl", "8", "--concurrency", "1", "--num-prompts", "2"]);
    let (so, se) = text(&o);
    assert!(!o.status.success() && so.contains("exceed the server's context length"), "{so}\n{se}");
    let (o, _) = run(&["--isl", "64", "--osl", "8", "--concurrency", "200", "--num-prompts", "20", "--num-warmups", "0"]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    assert!(se.contains("concurrency 200 is above the server's --max-running-requests 128"), "{se}");
}
