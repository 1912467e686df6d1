//! The virtual-clock target and `sweep run` as a user runs them: the repository's recipes, the
//! bundled synthetic traces, the reference engine.

mod common;
use common::*;

use harness::plan::{self, Inputs, Labels, PlanRequest};
use harness::repo::Repo;
use harness::run::{Job, PointRunner};
use harness::targets::sim::SimRunner;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn plan() -> harness::plan::Plan {
    let repo = Repo::at(&workspace_root());
    let inputs = Inputs::load(&repo).expect("repository config loads");
    plan::build(&repo, &inputs, &PlanRequest { labels: Labels::parse(&["full-sweep-fail-fast"]).unwrap(), base: None, no_evals: false })
        .expect("plan")
}

fn run_point(id: &str, seed: u64, duration_s: f64) -> harness::run::Outcome {
    let plan = plan();
    let point = plan.points().find(|p| p.id == id).unwrap_or_else(|| panic!("no point {id}")).clone();
    let pool = harness::workload::default_pool(seed);
    let mut r = SimRunner::new(pool, "synthetic".into());
    r.duration_s = Some(duration_s);
    let dir = tempfile::tempdir().unwrap();
    r.run(&Job { point, dir: dir.path().to_path_buf(), cancel: Arc::new(AtomicBool::new(false)), seed, turn: None })
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
    // The best profile there is for the model on GB300: the one fitted to its published points.
    assert_eq!(a.ctx.profiles["hardware_profile"], "gb300-fitted-dsv41flash");
    assert_eq!(a.ctx.profiles["hardware_profile_kind"], "fitted");
    assert!(a.ctx.profiles["modelled_flags"].as_array().is_some_and(|f| !f.is_empty()));
    let sm = a.ctx.server_metrics.as_ref().unwrap();
    assert!(sm["cache_hit_rate"].as_f64().unwrap() > 0.0, "{sm}");
}

#[test]
fn records_carry_usage_timing_and_cache_hits_from_the_engine() {
    let out = run_point("dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c4", 42, 120.0);
    let ok: Vec<_> = out.records.iter().filter(|r| r.ok() && r.phase == harness::records::RecordPhase::Profiling).collect();
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
fn h200_recipe_maps_to_the_jointly_fitted_h200_profile() {
    // No fit of DeepSeek-V3 on H200 alone: the H200's joint fit (its parameters are the GPU's,
    // for every model) beats the measured curves and the datasheet, and says what it rests on.
    let out = run_point("dsv3-fp8-h200-sglang-agentic/tp8-c1", 42, 60.0);
    assert_eq!(out.ctx.profiles["hardware_profile"], "h200-fitted");
    assert_eq!(out.ctx.profiles["hardware_profile_kind"], "fitted");
    let standing = out.ctx.profiles["hardware_profile_standing"].as_str().unwrap();
    assert!(standing.starts_with("fitted to 5 published point(s) of dsr1-fp8-h200-sglang"), "{standing}");
    assert_eq!(out.ctx.profiles["model_profile"], "deepseek-v3");
}

#[test]
fn a_set_cancel_flag_stops_the_point_and_keeps_its_records() {
    let plan = plan();
    let point = plan.canary.clone().unwrap();
    let r = SimRunner::new(harness::workload::default_pool(42), "synthetic".into());
    let dir = tempfile::tempdir().unwrap();
    let out = r.run(&Job { point, dir: dir.path().to_path_buf(), cancel: Arc::new(AtomicBool::new(true)), seed: 42, turn: None });
    assert_eq!(out.status, harness::results::Status::Interrupted { reason: harness::targets::STOPPED.into() });
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
    let (kept, note) = harness::targets::sim::fit_pool(&pool, 163_840).unwrap();
    assert!(!kept.is_empty() && kept.len() < pool.len(), "{} of {}", kept.len(), pool.len());
    assert!(kept.iter().all(|t| harness::targets::sim::trace_max_tokens(t) <= 163_840));
    assert!(note.unwrap().contains("163840"));
    let (all, none) = harness::targets::sim::fit_pool(&pool, 10_000_000).unwrap();
    assert_eq!((all.len(), none), (pool.len(), None));
    assert!(harness::targets::sim::fit_pool(&pool, 10).is_err());
}

#[test]
fn local_target_canary_whose_server_exits_at_start_stops_the_sweep() {
    let repo = repo_copy();
    // The canary is InferenceX's: the minimum-concurrency 1k/1k point (DeepSeek-R1 on B200, c1).
    edit(&repo.path().join("recipes/dsr1-fp8-b200-sglang.yaml"), "command: python3 -m sglang.launch_server", "command: \"false\"");
    let dir = repo.path().join("out");
    let o = sweep_run(repo.path(), &dir, &["--target", "local", "--server-timeout", "30"]);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{so}\n{se}");
    let summary = summary_json(&dir);
    let pts = summary["points"].as_array().unwrap();
    // 13 agentic and 26 fixed-seq-len points.
    assert_eq!(pts.len(), 39);
    let canary = &pts[0];
    assert_eq!(canary["id"], "dsr1-fp8-b200-sglang/1k1k-tp8-c1");
    assert_eq!(canary["status"]["state"], "failed", "{canary}");
    assert!(canary["status"]["reason"].as_str().unwrap().contains("exited during start-up"), "{canary}");
    for p in &pts[1..] {
        assert_eq!(p["status"]["state"], "cancelled", "{p}");
        assert!(export_text(&harness::results::point_dir(&dir, p["id"].as_str().unwrap())).is_empty());
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
        &[
            "run",
            "full-sweep-fail-fast",
            "--configs",
            "dsv41flash-*",
            "--duration",
            "300",
            "--traces",
            "synthetic",
            "--out",
            d,
            "--only",
            canary,
            first,
        ],
        &workspace_root(),
    );
    let partial = harness::results::RunSummary::load(&dir).unwrap();
    assert!(partial.points.iter().any(|p| p.id == first && p.ok()), "{}\n{}", text(&o).0, text(&o).1);
    let before = (status_mtime(&dir, canary), status_mtime(&dir, first));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let o = sweep(
        &["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "300", "--traces", "synthetic", "--out", d, "--resume"],
        &workspace_root(),
    );
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    assert_eq!((status_mtime(&dir, canary), status_mtime(&dir, first)), before, "finished points were run again");
    let summary = harness::results::RunSummary::load(&dir).unwrap();
    assert_eq!(summary.points.len(), 8);
    assert!(summary.points.iter().all(|p| p.ok()));

    // Another seed or duration is another run: resuming into it is refused, naming the option,
    // and nothing in the run changes.
    let summary_before = std::fs::read(dir.join("summary.json")).unwrap();
    for (flag, value, named) in [("--seed", "7", "--seed 42, this invocation has 7"), ("--duration", "600", "--duration Some(300.0)")] {
        let mut a = vec!["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "300", "--traces", "synthetic"];
        if flag == "--duration" {
            a[5] = value;
        } else {
            a.extend([flag, value]);
        }
        a.extend(["--out", d, "--resume"]);
        let o = sweep(&a, &workspace_root());
        let (so, se) = text(&o);
        assert!(!o.status.success() && se.contains(named), "{flag}: {so}\n{se}");
    }
    assert_eq!(std::fs::read(dir.join("summary.json")).unwrap(), summary_before, "a refused resume touched the run");

    // A new run (no --resume) into the finished run would overwrite it: refused, saying how to go
    // on; `--overwrite` replaces it.
    let new_run = ["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "300", "--traces", "synthetic", "--out", d];
    let o = sweep(&[&new_run[..], &["--only", canary]].concat(), &workspace_root());
    let (so, se) = text(&o);
    assert!(!o.status.success() && se.contains("holds a finished run") && se.contains("--resume --out"), "{so}\n{se}");
    assert_eq!(std::fs::read(dir.join("summary.json")).unwrap(), summary_before, "a refused run touched the folder");
    let o = sweep(&[&new_run[..], &["--only", canary, "--overwrite"]].concat(), &workspace_root());
    let (so, se) = text(&o);
    // One point: its gate fails on Pareto coverage, but the run is made.
    assert!(se.contains("--overwrite: removed the finished run") && so.contains("1/1 point(s) finished"), "{so}\n{se}");
    assert!(!harness::results::point_dir(&dir, first).exists(), "the overwritten run's points were left behind");
    let replaced = harness::results::RunSummary::load(&dir).unwrap();
    assert_eq!(replaced.points.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), [canary], "--overwrite made a new run");
}

#[test]
fn resume_without_out_finds_the_latest_matching_run_or_says_there_is_none() {
    let repo = repo_copy();
    let root = repo.path().to_str().unwrap();
    let args = |seed: &str| {
        vec![
            "run".to_string(),
            "full-sweep-fail-fast".into(),
            "--only".into(),
            "dsv3-fp8-h200-sglang-agentic/tp8-c1".into(),
            "--duration".into(),
            "60".into(),
            "--traces".into(),
            "synthetic:20".into(),
            "--seed-replicates".into(),
            "0".into(),
            "--seed".into(),
            seed.into(),
            "--root".into(),
            root.into(),
        ]
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        sweep(&a, repo.path())
    };
    let mut resume = args("42");
    resume.push("--resume".into());
    let o = run(resume.clone());
    let (so, se) = text(&o);
    assert!(!o.status.success() && se.contains("--resume: no run under"), "{so}\n{se}");
    // One point: the gate fails on coverage (exit 1), but the run is made.
    let finished = |o: &std::process::Output| o.status.code().is_some_and(|c| c <= 1) && text(o).0.contains("1/1 point(s) finished");
    assert!(finished(&run(args("42"))));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(finished(&run(args("7"))), "a newer run with another seed");
    let o = run(resume);
    let (so, se) = text(&o);
    assert!(finished(&o), "{so}\n{se}");
    let resumed = se.lines().find_map(|l| l.strip_prefix("sweep run: resuming ")).unwrap_or_else(|| panic!("{se}")).to_string();
    let id = harness::run::identity::RunIdentity::load(std::path::Path::new(&resumed)).unwrap().unwrap();
    assert_eq!(id.seed, 42, "resumed {resumed}, not the seed-42 run");
}

#[test]
fn append_changelog_records_a_passing_run_and_only_a_passing_one() {
    let repo = repo_copy();
    let root = repo.path().to_str().unwrap();
    let changelog = repo.path().join("perf-changelog.yaml");
    let before = std::fs::read(&changelog).unwrap();
    let run = |out: &str, extra: &[&str], link: &str| {
        let dir = repo.path().join(out);
        let mut a =
            vec!["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "300", "--traces", "synthetic", "--root", root];
        a.extend_from_slice(&[
            "--out",
            dir.to_str().unwrap(),
            "--append-changelog",
            "--description",
            "DSpark K=5, fastokens",
            "--pr-link",
            link,
        ]);
        a.extend_from_slice(extra);
        (sweep(&a, repo.path()), dir)
    };
    // A malformed link is refused before any point runs.
    let (o, dir) = run("bad-link", &[], "https://github.com/o/r/pull/XXXX");
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    assert!(text(&o).1.contains("--pr-link"), "{}", text(&o).1);
    assert!(!dir.exists());
    // A failing gate (one point cannot cover the frontier) appends nothing.
    let (o, _) = run("one-point", &["--only", "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1"], "https://github.com/o/r/pull/7");
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).0.contains("changelog: not appended"), "{}", text(&o).0);
    assert_eq!(std::fs::read(&changelog).unwrap(), before);
    // A passing run appends one entry at the end, and the file is still a valid append.
    let (o, _) = run("pass", &[], "https://github.com/o/r/pull/7");
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    assert!(so.contains("changelog: appended entry for dsv41flash-fp4-gb300-sglang-agentic-dspark"), "{so}");
    let after = std::fs::read_to_string(&changelog).unwrap();
    assert!(after.as_bytes().starts_with(&before));
    let added = &after[before.len()..];
    assert!(added.contains("- dsv41flash-fp4-gb300-sglang-agentic-dspark") && added.contains("pull/7"), "{added}");
    assert!(added.contains("DSpark K=5, fastokens"), "{added}");
    let o = sweep(&["changelog", "check", "--root", root], repo.path());
    assert!(o.status.success(), "{:?}", text(&o));
}

#[test]
fn a_failing_point_cancels_the_rest_of_its_own_matrix_only() {
    // The repository's plan with its agentic matrix split per config (as two buckets would be;
    // its fixed-seq-len canary, matrices and evals left out), and a DeepSeek-V3 point whose
    // command the engine cannot build.
    let mut plan = plan();
    plan.canary = None;
    plan.evals.retain(|m| m.name == "agentic_evals");
    let at = plan.matrices.iter().position(|m| m.name == "single_node.agentic").expect("the agentic matrix");
    let all = plan.matrices.remove(at);
    assert_eq!(all.points.len(), 13);
    let (v3, v41): (Vec<_>, Vec<_>) = all.points.into_iter().partition(|p| p.config_key.starts_with("dsv3"));
    let mut v3 = harness::plan::Matrix { name: "single_node.agentic.dsv3".into(), fail_fast: true, points: v3 };
    let v41 = harness::plan::Matrix { name: "single_node.agentic.dsv41".into(), fail_fast: true, points: v41 };
    let bad = &mut v3.points[1];
    let launch = bad.launch.as_mut().unwrap();
    let tp = launch.worker_argv.iter().position(|a| a == "--tp-size").unwrap();
    launch.worker_argv[tp + 1] = "3".into();
    let bad_id = bad.id.clone();
    plan.matrices = vec![v3, v41];
    let out = tempfile::tempdir().unwrap();
    let opts = harness::run::RunOptions {
        run_id: "split".into(),
        labels: vec!["full-sweep-fail-fast".into()],
        target: "sim".into(),
        out: out.path().join("run"),
        resume: false,
        only: Vec::new(),
        seed: 42,
        replicates: 50,
        seed_replicates: 0,
        identity: None,
        verbose: false,
        eval_limit: None,
    };
    let mut runner = SimRunner::new(harness::workload::default_pool(42), "synthetic".into());
    runner.duration_s = Some(120.0);
    runner.jobs = 1;
    let summary = harness::run::execute(&plan, &opts, &runner, &Arc::new(AtomicBool::new(false))).unwrap();
    let state = |id: &str| summary.points.iter().find(|p| p.id == id).map(|p| p.status.clone()).unwrap();
    let v3_ids: Vec<String> = plan.matrices[0].points.iter().map(|p| p.id.clone()).collect();
    assert!(matches!(state(&v3_ids[0]), harness::results::Status::Done), "{:?}", state(&v3_ids[0]));
    assert!(matches!(state(&bad_id), harness::results::Status::Failed { .. }), "{:?}", state(&bad_id));
    for id in &v3_ids[2..] {
        assert!(matches!(state(id), harness::results::Status::Cancelled { .. }), "{id}: {:?}", state(id));
    }
    for p in &plan.matrices[1].points {
        assert!(matches!(state(&p.id), harness::results::Status::Done), "{}: {:?}", p.id, state(&p.id));
    }
}

/// A fixed-seq-len block added to an agentic config runs beside its agentic rows, each point
/// from the recipe point of its sequence length: the TP8 arm's c4 (no `seq-len`: every length)
/// and a c8 that only 1k/1k has.
#[test]
fn a_fixed_seq_len_block_of_an_agentic_config_runs_its_recipe_points() {
    let repo = repo_copy();
    edit(
        &repo.path().join("recipes/master.yaml"),
        "    agentic-coding:\n    - search-space:\n      - { tp: 8, ep: 1,",
        "    fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n      search-space:\n      - { tp: 8, conc-start: 4, conc-end: 8 }\n    agentic-coding:\n    - search-space:\n      - { tp: 8, ep: 1,",
    );
    edit(
        &repo.path().join("recipes/dsv3-fp8-h200-sglang-agentic.yaml"),
        "      - conc: 16\n",
        "      - conc: 16\n      - conc: 8\n        seq-len: 1k1k\n        args: [--max-running-requests, \"32\"]\n",
    );
    let dir = repo.path().join("out");
    let (c4, c8) = ("dsv3-fp8-h200-sglang-agentic/1k1k-tp8-c4", "dsv3-fp8-h200-sglang-agentic/1k1k-tp8-c8");
    let o = sweep_run(repo.path(), &dir, &["--configs", "dsv3-*", "--only", c4, "--only", c8, "--no-evals", "--seed-replicates", "0"]);
    let (so, se) = text(&o);
    let summary = harness::results::RunSummary::load(&dir).unwrap_or_else(|e| panic!("{e}\n{so}\n{se}"));
    let ids: Vec<&str> = summary.points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, [c4, c8], "{so}\n{se}");
    assert!(summary.points.iter().all(|p| matches!(p.status, harness::results::Status::Done)), "{so}\n{se}");
    let plan: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    let argv = |id: &str| -> String {
        // The lowest concurrency is the narrowed sweep's canary.
        let p = plan["matrices"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["points"].as_array().unwrap())
            .chain(std::iter::once(&plan["canary"]))
            .find(|p| p["id"] == id)
            .unwrap();
        p["launch"]["worker_argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect::<Vec<_>>().join(" ")
    };
    assert!(argv(c4).contains("--max-running-requests 64 "), "{}", argv(c4));
    assert!(argv(c8).contains("--max-running-requests 32 "), "{}", argv(c8));
}
