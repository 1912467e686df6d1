//! Records and runs made up for tests here and in the crates that render or store them
//! (`test-support` feature).

use crate::metrics::{Stats, Summary};
use crate::pareto::{Samples, View, analyse, points_with_uncertainty};
use crate::results::{PointResult, RunSummary, Status};

pub use crate::records::testing::rec;

/// Samples of a point at concurrency `c` (step `i` of a ladder): throughput rises and
/// interactivity falls with it.
fn samples(i: usize, c: u32, scale: f64) -> Samples {
    Samples {
        tokens: (0..100).map(|k| scale * (10_000.0 * c as f64 + k as f64)).collect(),
        itl: (0..100).map(|k| 0.005 * (1.0 + i as f64) + k as f64 * 1e-5).collect(),
        e2el: (0..100).map(|k| 2.0 + i as f64 + k as f64 * 0.01).collect(),
        e2e_per_token: (0..100).map(|k| 0.01 * (1.0 + i as f64) + k as f64 * 1e-5).collect(),
        duration_s: 100.0,
        gpus: 4.0,
        output: (0..100).map(|k| scale * (100.0 * c as f64 + k as f64)).collect(),
    }
}

/// A run over `curves`: (config key, points, throughput scale).
pub fn fake_run_of(curves: &[(&str, usize, f64)]) -> RunSummary {
    let mut inputs = Vec::new();
    for (cfg, n, scale) in curves {
        for i in 0..*n {
            let c = 1u32 << i;
            inputs.push((format!("{cfg}/tp4-c{c}"), cfg.to_string(), "Agg TP4".to_string(), c, true, samples(i, c, *scale)));
        }
    }
    let pts = points_with_uncertainty(&inputs, 50, 42);
    let points = pts
        .iter()
        .map(|p| PointResult {
            id: p.id.clone(),
            config_key: p.curve.clone(),
            arm: p.arm.clone(),
            conc: p.conc,
            gpus: 4,
            matrix: "single_node.agentic".into(),
            seq: None,
            status: Status::Done,
            result_kind: "predicted".into(),
            profiles: serde_json::json!({"engine": "deepseek-v4.1-flash", "hardware": "gb300"}),
            trace_set: "synthetic".into(),
            summary: Some(Summary {
                requests_ok: 100,
                tput_per_gpu: p.y,
                output_tput_per_gpu: p.y_out,
                intvty_p90: p.x[&View::IntvtyP90],
                e2e_norm_intvty_p90: p.x[&View::E2eNormIntvtyP90],
                ttft: Stats { p50: 0.2, p90: 0.3, p99: 1.0, ..Default::default() },
                e2el: Stats { p75: 3.0, p90: p.x[&View::E2elP90], ..Default::default() },
                valid: true,
                submission_valid: true,
                ..Default::default()
            }),
            pareto: Some(p.clone()),
            seeds: Vec::new(),
            launch: None,
            wall_s: 1.0,
        })
        .collect();
    RunSummary {
        run_id: "test-run".into(),
        labels: vec!["full-sweep-fail-fast".into()],
        target: "sim".into(),
        created_unix: 0,
        seed: 42,
        replicates: 50,
        points,
        curves: analyse(&pts),
        evals: Vec::new(),
    }
}

/// A run with one curve of `n` points whose throughput rises and interactivity falls with conc.
pub fn fake_run(n: usize) -> RunSummary {
    fake_run_of(&[("cfg", n, 1.0)])
}
