//! The virtual-clock target and `sweep run` as a user runs them: the repository's recipes, the
//! bundled synthetic traces, the reference engine.

mod common;
use common::*;

use harness::plan::{self, Inputs, Labels, PlanRequest};
use harness::repo::Repo;
use harness::run::{Job, PointRunner};
use harness::target::sim::SimRunner;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn plan() -> harness::plan::Plan {
    let repo = Repo::at(&workspace_root());
    let inputs = Inputs::load(&repo).expect("repository config loads");
    plan::build(&repo, &inputs, &PlanRequest { labels: Labels::parse(&["full-sweep-fail-fast"]).unwrap(), base: None }).expect("plan")
}

fn run_point(id: &str, seed: u64, duration_s: f64) -> harness::run::Outcome {
    let plan = plan();
    let point = plan.points().find(|p| p.id == id).unwrap_or_else(|| panic!("no point {id}")).clone();
    let pool = harness::workload::default_pool(seed);
    let mut r = SimRunner::new(pool, "synthetic".into());
    r.duration_s = Some(duration_s);
    let dir = tempfile::tempdir().unwrap();
    r.run(&Job { point, dir: dir.path().to_path_buf(), cancel: Arc::new(AtomicBool::new(false)), seed })
}

fn jsonl(recs: &[harness::records::Record]) -> Vec<u8> {
    let mut v = Vec::new();
    harness::records::append_jsonl(&mut v, recs).unwrap();
    v
}

#[test]
fn same_seed_gives_byte_identical_records_and_another_seed_differs() {
    let id = "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c4";
    let a = run_point(id, 42, 120.0);
    let b = run_point(id, 42, 120.0);
    let c = run_point(id, 7, 120.0);
    assert_eq!(a.status, harness::results::Status::Done, "{:?}", a.status);
    assert!(a.records.len() > 20, "only {} records", a.records.len());
    assert_eq!(jsonl(&a.records), jsonl(&b.records));
    assert_ne!(jsonl(&a.records), jsonl(&c.records));
    // Predicted, labelled with both profiles and the engine's flag split.
    assert_eq!(a.ctx.result_kind, "predicted");
    assert_eq!(a.ctx.profiles["model_profile"], "deepseek-v4.1-flash");
    assert_eq!(a.ctx.profiles["hardware_profile"], "gb300");
    assert!(a.ctx.profiles["modelled_flags"].as_array().is_some_and(|f| !f.is_empty()));
    let sm = a.ctx.server_metrics.as_ref().unwrap();
    assert!(sm["cache_hit_rate"].as_f64().unwrap() > 0.0, "{sm}");
}

#[test]
fn records_carry_usage_timing_and_cache_hits_from_the_engine() {
    let out = run_point("dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c4", 42, 120.0);
    let ok: Vec<_> = out.records.iter().filter(|r| r.ok() && r.phase == harness::records::Phase::Profiling).collect();
    assert!(!ok.is_empty());
    for r in &ok {
        let (f, l) = (r.first_token_ns.unwrap(), r.last_chunk_ns.unwrap());
        assert!(r.start_ns < f && f <= l && l <= r.end_ns, "{r:?}");
        // ignore_eos: the engine generates exactly what was asked.
        assert_eq!(r.output_tokens, r.expected_output_tokens, "{r:?}");
        assert!(r.input_tokens.unwrap() > 0 && r.cached_tokens.unwrap() <= r.input_tokens.unwrap());
    }
    // Later turns of a conversation hit the prefix cache.
    let cached: u64 = ok.iter().map(|r| r.cached_tokens.unwrap()).sum();
    let input: u64 = ok.iter().map(|r| r.input_tokens.unwrap()).sum();
    assert!(cached as f64 / input as f64 > 0.5, "cache hit {cached}/{input}");
}

#[test]
fn h200_recipe_maps_to_the_h200_profile() {
    let out = run_point("dsv3-fp8-h200-sglang-agentic/tp8-c1", 42, 60.0);
    assert_eq!(out.ctx.profiles["hardware_profile"], "h200");
    assert_eq!(out.ctx.profiles["model_profile"], "deepseek-v3");
}

#[test]
fn a_set_cancel_flag_stops_the_point_and_keeps_its_records() {
    let plan = plan();
    let point = plan.canary.clone().unwrap();
    let r = SimRunner::new(harness::workload::default_pool(42), "synthetic".into());
    let dir = tempfile::tempdir().unwrap();
    let out = r.run(&Job { point, dir: dir.path().to_path_buf(), cancel: Arc::new(AtomicBool::new(true)), seed: 42 });
    assert_eq!(out.status, harness::results::Status::Failed { reason: "cancelled".into() });
    assert!(out.ctx.cancelled);
}

#[test]
fn short_full_sweep_through_the_cli_passes_the_gate() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let o = sweep(
        &["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "300", "--out", dir.to_str().unwrap()],
        &workspace_root(),
    );
    let (so, se) = text(&o);
    assert!(o.status.success(), "exit {:?}\n{so}\n{se}", o.status);
    for f in ["report.html", "report.md", "gate.json", "summary.json", "results.parquet", "plan.json"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let gate: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("gate.json")).unwrap()).unwrap();
    assert_eq!(gate["passed"], true, "{gate}");
    assert!(so.contains("dsv41flash-fp4-gb300-sglang-agentic-dspark/dep2-c160"), "{so}");
    assert!(so.contains("gate PASSED"), "{so}");
    let agg_path = harness::results::point_dir(&dir, "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1").join("agg.json");
    let agg: serde_json::Value = serde_json::from_slice(&std::fs::read(agg_path).unwrap()).unwrap();
    assert!(agg["tput_per_gpu"].as_f64().unwrap() > 0.0, "{agg}");
}

#[test]
fn short_context_models_replay_only_traces_that_fit() {
    let pool = harness::workload::default_pool(42);
    let (kept, note) = harness::target::sim::fit_pool(&pool, 163_840).unwrap();
    assert!(!kept.is_empty() && kept.len() < pool.len(), "{} of {}", kept.len(), pool.len());
    assert!(kept.iter().all(|t| harness::target::sim::trace_max_tokens(t) <= 163_840));
    assert!(note.unwrap().contains("163840"));
    let (all, none) = harness::target::sim::fit_pool(&pool, 10_000_000).unwrap();
    assert_eq!((all.len(), none), (pool.len(), None));
    assert!(harness::target::sim::fit_pool(&pool, 10).is_err());
}

#[test]
fn local_target_canary_whose_server_exits_at_start_stops_the_sweep() {
    let repo = repo_copy();
    edit(
        &repo.path().join("recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml"),
        "command: python3 -m sglang.launch_server",
        "command: \"false\"",
    );
    let dir = repo.path().join("out");
    let o = sweep(
        &[
            "run",
            "full-sweep-fail-fast",
            "--target",
            "local",
            "--server-timeout",
            "30",
            "--out",
            dir.to_str().unwrap(),
            "--root",
            repo.path().to_str().unwrap(),
        ],
        repo.path(),
    );
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{so}\n{se}");
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let pts = summary["points"].as_array().unwrap();
    assert_eq!(pts.len(), 13);
    let canary = &pts[0];
    assert_eq!(canary["id"], "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1");
    assert_eq!(canary["status"]["state"], "failed", "{canary}");
    assert!(canary["status"]["reason"].as_str().unwrap().contains("exited during start-up"), "{canary}");
    for p in &pts[1..] {
        assert_eq!(p["status"]["state"], "cancelled", "{p}");
        assert!(!harness::results::point_dir(&dir, p["id"].as_str().unwrap()).join("profile_export.jsonl").exists());
    }
    assert!(dir.join("gate.json").is_file() && dir.join("report.md").is_file());
}

fn status_mtime(run: &std::path::Path, id: &str) -> std::time::SystemTime {
    std::fs::metadata(harness::results::point_dir(run, id).join("status.json")).unwrap().modified().unwrap()
}

#[test]
fn resume_runs_only_the_missing_points() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let d = dir.to_str().unwrap();
    let canary = "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1";
    let first = "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c4";
    // An interrupted run: only two points finished.
    let o = sweep(
        &["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "300", "--out", d, "--only", canary, first],
        &workspace_root(),
    );
    assert!(text(&o).0.contains(first), "{}", text(&o).1);
    let before = (status_mtime(&dir, canary), status_mtime(&dir, first));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let o = sweep(
        &["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "300", "--out", d, "--resume"],
        &workspace_root(),
    );
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    assert_eq!((status_mtime(&dir, canary), status_mtime(&dir, first)), before, "finished points were run again");
    let summary = harness::results::RunSummary::load(&dir).unwrap();
    assert_eq!(summary.points.len(), 8);
    assert!(summary.points.iter().all(|p| p.ok()));
}
