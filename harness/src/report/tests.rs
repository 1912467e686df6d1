use std::collections::BTreeMap;

use super::*;
use crate::metrics::{Stats, Summary};
use crate::pareto::{Samples, analyse, points_with_uncertainty};
use crate::results::PointResult;

/// A run with one curve of `n` points whose throughput rises and interactivity falls with conc.
pub fn fake_run(n: usize) -> RunSummary {
    let mut inputs = Vec::new();
    for i in 0..n {
        let c = 1u32 << i;
        let s = Samples {
            tokens: (0..100).map(|k| 10_000.0 * c as f64 + k as f64).collect(),
            itl: (0..100).map(|k| 0.005 * (1.0 + i as f64) + k as f64 * 1e-5).collect(),
            e2el: (0..100).map(|k| 2.0 + i as f64 + k as f64 * 0.01).collect(),
            e2e_per_token: (0..100).map(|k| 0.01 * (1.0 + i as f64) + k as f64 * 1e-5).collect(),
            duration_s: 100.0,
            gpus: 4.0,
        };
        inputs.push((format!("cfg/tp4-c{c}"), "cfg".to_string(), "Agg TP4".to_string(), c, true, s));
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
            status: Status::Done,
            result_kind: "predicted".into(),
            profiles: serde_json::json!({"engine": "deepseek-v4.1-flash", "hardware": "gb300"}),
            trace_set: "synthetic".into(),
            summary: Some(Summary {
                requests_ok: 100,
                tput_per_gpu: p.y,
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

#[test]
fn writes_charts_and_reports() {
    let run = fake_run(5);
    let d = tempfile::tempdir().unwrap();
    let files = write_all(&run, d.path()).unwrap();
    // Keep the output for a look (e.g. scripts/check-report.sh on it).
    if let Ok(keep) = std::env::var("SWEEP_KEEP_TEST_REPORT") {
        std::fs::create_dir_all(&keep).unwrap();
        for e in std::fs::read_dir(d.path()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), std::path::Path::new(&keep).join(e.file_name())).unwrap();
        }
    }
    assert_eq!(files.len(), 2);
    let png = std::fs::read(d.path().join("pareto_e2e_norm_intvty_p90.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.len() > 10_000, "a drawn chart, not an empty image: {} bytes", png.len());
    let html = std::fs::read_to_string(d.path().join("report.html")).unwrap();
    assert!(html.contains("<table id=\"summary\">") && html.contains("<svg") && html.contains("predicted"));
    assert!(!html.contains("src=\"http"), "self-contained");
    let md = std::fs::read_to_string(d.path().join("report.md")).unwrap();
    assert_eq!(md.lines().filter(|l| l.starts_with("| cfg/")).count(), 5);
    assert!(md.contains("`cfg` PASS"));
    assert!(!md.contains("KV cache per point"), "no KV figures, no KV table");
}

#[test]
fn kv_table_lists_the_points_that_report_kv() {
    let mut run = fake_run(3);
    let kv = crate::kv::KvSummary {
        source: "engine".into(),
        pool_tokens: Some(33_554_432),
        peak_used_tokens: Some(30_000_000),
        peak_token_usage: Some(0.95),
        evicted_tokens: Some(1_200_000),
        reprefilled_tokens: Some(800_000),
        retractions: Some(7),
        prefix_hit_rate: Some(0.90),
        ideal_prefix_hit_rate: Some(0.95),
    };
    run.points[1].summary.as_mut().unwrap().kv = Some(kv);
    let md = markdown(&run);
    let rows: Vec<&str> = md.lines().filter(|l| l.contains("| engine |")).collect();
    assert_eq!(rows.len(), 1, "{md}");
    assert!(rows[0].starts_with(&format!("| {} |", run.points[1].id)));
    assert!(rows[0].contains("33.55M") && rows[0].contains("95.0 %") && rows[0].contains("| 7 |") && rows[0].contains("90.0 % / 95.0 %"));
    let html = html(&run, &BTreeMap::new());
    assert!(html.contains("<table id=\"kv\">") && html.contains("1.20M"));
}
