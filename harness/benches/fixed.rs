//! The fixed-sequence-length scenario on the virtual clock: drawing InferenceX's lengths
//! (numpy's generator) and a whole 8k/1k point at concurrency 64 on the DeepSeek-R1 FP8 H200
//! recipe (640 requests after 128 warmups, the reference engine's H200 profile). Target: the point
//! in ≤ 0.2 s. See docs/PERFORMANCE.md ("Fixed-seq-len").

use std::hint::black_box;
use std::sync::atomic::AtomicBool;

use criterion::{Criterion, criterion_group, criterion_main};
use harness::metrics::PointContext;
use harness::recipe::serving::Launch;
use harness::targets::sim::{ProfileChoice, build_engine};
use harness::workload::fixed::{FixedConfig, sample};

/// The H200 recipe's 8k/1k server flags (InferenceX's dsr1_fp8_h200.sh).
const FLAGS: &str = "--model-path deepseek-ai/DeepSeek-R1-0528 --trust-remote-code --tensor-parallel-size 8 \
    --data-parallel-size 1 --disable-radix-cache --max-running-requests 256 --cuda-graph-max-bs 256 \
    --chunked-prefill-size 32768 --max-prefill-tokens 32768 --mem-fraction-static 0.82 \
    --attention-backend flashinfer --stream-interval 10 --decode-log-interval 1";

fn launch() -> Launch {
    Launch {
        arm: "TP8".into(),
        conc: 64,
        worker_argv: FLAGS.split_whitespace().map(str::to_string).collect(),
        env: Default::default(),
        router_argv: None,
        router_env: Default::default(),
        golden_al: None,
        client_args: Vec::new(),
    }
}

fn fixed(c: &mut Criterion) {
    let mut g = c.benchmark_group("fixed_seq_len");
    g.sample_size(10);
    let cfg = FixedConfig::inferencex(8192, 1024, 64);
    g.bench_function("draw_640_lengths", |b| b.iter(|| black_box(sample(&cfg).len())));
    let choice = ProfileChoice { model: None, hardware: Some("h200".into()) };
    g.bench_function("point_8k1k_c64_h200_dsr1", |b| {
        b.iter(|| {
            let mut engine = build_engine(&launch(), None, None, &choice, 0).expect("the recipe builds");
            let ctx = PointContext { num_gpus: 8, concurrency: 64, ..Default::default() };
            let o = harness::targets::fixed::run_point(&mut engine, cfg.clone(), ctx, &AtomicBool::new(false), |_| {});
            assert_eq!(o.records.len(), 640 + 128);
            black_box(o.records.len())
        })
    });
    g.finish();
}

criterion_group!(benches, fixed);
criterion_main!(benches);
