//! The results store as users meet it, on both backends: the real `sweep` binary recording runs
//! (concurrently), a run killed while it is being recorded, a store of a newer schema, imports of
//! run folders and InferenceX-style artifacts, `history`, and baselines resolved from the store.
//!
//! SQLite always; PostgreSQL when `SWEEP_TEST_POSTGRES` names a server (`eval
//! "$(scripts/pg/start.sh)"` starts one), each test in a schema of its own. Without it the
//! PostgreSQL parts are skipped with a notice.

mod common;
use common::*;

use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The stores a test runs against: a SQLite file in `dir`, and PostgreSQL when configured.
fn stores(dir: &Path, tag: &str) -> Vec<String> {
    let mut v = vec![dir.join(format!("{tag}.db")).to_string_lossy().into_owned()];
    v.extend(pg_store(tag));
    v
}

fn sweep_ok(args: &[&str]) -> String {
    let o = sweep(args, &workspace_root());
    let (out, err) = text(&o);
    assert!(o.status.success(), "sweep {args:?} failed:\n{out}\n{err}");
    out
}

/// A real run folder made once per test binary (seed 42), and one with seed 7.
fn base_run(seed: u64) -> &'static Path {
    static A: OnceLock<PathBuf> = OnceLock::new();
    static B: OnceLock<PathBuf> = OnceLock::new();
    let cell = if seed == 42 { &A } else { &B };
    cell.get_or_init(|| {
        let d = Box::leak(Box::new(tempfile::tempdir().unwrap()));
        let out = d.path().join(format!("base-{seed}"));
        let seed = seed.to_string();
        sweep_ok(&run_args(out.to_str().unwrap(), &seed, None));
        out
    })
}

/// A copy of a run folder under another run id, finished at `finished` (Unix seconds).
fn copy_run(from: &Path, to: &Path, run_id: &str, finished: u64) {
    copy_tree(from, to);
    let mut s = summary_json(to);
    s["run_id"] = Value::from(run_id);
    s["created_unix"] = Value::from(finished);
    std::fs::write(to.join("summary.json"), serde_json::to_vec_pretty(&s).unwrap()).unwrap();
    let mut g: Value = serde_json::from_slice(&std::fs::read(to.join("gate.json")).unwrap()).unwrap();
    g["run_id"] = Value::from(run_id);
    std::fs::write(to.join("gate.json"), serde_json::to_vec_pretty(&g).unwrap()).unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn history_json(store: &str, extra: &[&str]) -> Value {
    let mut a = vec!["history", "--json", "--limit", "0", "--store", store];
    a.extend_from_slice(extra);
    serde_json::from_str(&sweep_ok(&a)).unwrap()
}

fn run_ids(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = v.as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

/// A SQLite store `name` in `dir` holding the seed-42 base run.
fn imported_store(dir: &Path, name: &str) -> PathBuf {
    let store = dir.join(name);
    sweep_ok(&["import", base_run(42).to_str().unwrap(), "--store", store.to_str().unwrap()]);
    store
}

fn check_ok(store: &str) {
    let o = sweep(&["store", "check", "--store", store], &workspace_root());
    let (out, err) = text(&o);
    assert!(o.status.success() && out.trim_end().ends_with("ok"), "store check {store}:\n{out}\n{err}");
}

/// Starts `n` real `sweep run`s at once into `store`, each holding its recording transaction
/// open for `pause` seconds so that the writers overlap; every one must finish and be recorded.
fn concurrent_runs(store: &str, n: usize, pause: &str) {
    let d = tempfile::tempdir().unwrap();
    let outs: Vec<String> = (0..n).map(|i| d.path().join(format!("run-{i}")).to_string_lossy().into_owned()).collect();
    let seeds: Vec<String> = (0..n).map(|i| (100 + i).to_string()).collect();
    let children: Vec<_> = (0..n)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_sweep"))
                .args(run_args(&outs[i], &seeds[i], Some(store)))
                .env("SWEEP_STORE_PAUSE_IN_TX", pause)
                .current_dir(workspace_root())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "run {i}:\n{out}\n{err}");
        assert!(out.contains(&format!("(run run-{i} recorded, 5 point(s))")), "run {i} was not recorded:\n{out}\n{err}");
        assert!(!err.contains("not recorded"), "{err}");
    }
    let h = history_json(store, &[]);
    assert_eq!(run_ids(&h), (0..n).map(|i| format!("run-{i}")).collect::<Vec<_>>());
    for r in h.as_array().unwrap() {
        assert_eq!((r["points_total"].as_i64(), r["points_ok"].as_i64(), r["gate"].as_str()), (Some(5), Some(5), Some("pass")), "{r}");
    }
    // Every point of every run, with its files.
    for i in 0..n {
        let pts: Value = serde_json::from_str(&sweep_ok(&[
            "history",
            "--json",
            "--store",
            store,
            "--point",
            "dsv3-fp8-h200-sglang-agentic/tp8-c4",
            "--limit",
            "0",
        ]))
        .unwrap();
        assert_eq!(pts.as_array().unwrap().len(), n, "run {i}: {pts}");
    }
    check_ok(store);
}

#[test]
fn two_concurrent_runs_record_into_one_sqlite_store() {
    let d = tempfile::tempdir().unwrap();
    concurrent_runs(&d.path().join("shared.db").to_string_lossy(), 2, "1");
}

#[test]
fn eight_concurrent_runs_record_into_postgres() {
    let Some(store) = pg_store("eight") else { return };
    concurrent_runs(&store, 8, "0.5");
}

#[test]
fn a_run_killed_while_recording_leaves_its_earlier_record_whole() {
    let d = tempfile::tempdir().unwrap();
    for store in stores(d.path(), "kill") {
        let run = d.path().join("killed-run");
        let _ = std::fs::remove_dir_all(&run);
        copy_run(base_run(42), &run, "killed-run", 1_790_000_000);
        // First killed before anything was ever recorded: nothing is left.
        kill_while_recording(&run, &store);
        assert_eq!(run_ids(&history_json(&store, &[])), Vec::<String>::new(), "{store}");
        check_ok(&store);
        // Recorded whole, then a re-record of fewer points killed half-way: the first stays.
        sweep_ok(&["import", run.to_str().unwrap(), "--store", &store]);
        let mut s = summary_json(&run);
        s["points"].as_array_mut().unwrap().truncate(2);
        std::fs::write(run.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
        kill_while_recording(&run, &store);
        let h = history_json(&store, &[]);
        assert_eq!(run_ids(&h), vec!["killed-run"]);
        assert_eq!(h[0]["points_total"], 5, "{store}: the killed re-record left a partial run: {h}");
        let pts: Value =
            serde_json::from_str(&sweep_ok(&["history", "--json", "--store", &store, "--point", "dsv3-fp8-h200-sglang-agentic/dep8-c64"]))
                .unwrap();
        assert_eq!(pts.as_array().unwrap().len(), 1, "{store}: {pts}");
        check_ok(&store);
        // Recording it again completes (idempotent by run id: one run, the new points).
        sweep_ok(&["import", run.to_str().unwrap(), "--store", &store]);
        let h = history_json(&store, &[]);
        assert_eq!((run_ids(&h), h[0]["points_total"].as_i64()), (vec!["killed-run".to_string()], Some(2)), "{store}");
    }
}

/// `sweep import RUN` paused inside its recording transaction, then SIGKILLed.
fn kill_while_recording(run: &Path, store: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["import", run.to_str().unwrap(), "--store", store])
        .env("SWEEP_STORE_PAUSE_IN_TX", "120")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    loop {
        match lines.next() {
            Some(Ok(l)) => {
                seen.push_str(&l);
                seen.push('\n');
                if l.contains("paused inside the recording transaction") {
                    break;
                }
            }
            _ => panic!("sweep import ended before recording: {seen}"),
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Marks the store as written by a future sweep.
fn bump_schema(store: &str, version: i64) {
    if store.starts_with("postgres") {
        let mut c = postgres::Client::connect(store, postgres::NoTls).unwrap();
        c.execute("INSERT INTO schema_version (version, applied_unix, sweep_version) VALUES ($1, 0, '99.0')", &[&version]).unwrap();
    } else {
        let c = rusqlite::Connection::open(store).unwrap();
        c.execute("INSERT INTO schema_version (version, applied_unix, sweep_version) VALUES (?1, 0, '99.0')", [version]).unwrap();
    }
}

#[test]
fn a_store_of_a_newer_schema_is_refused_by_every_command() {
    let d = tempfile::tempdir().unwrap();
    for store in stores(d.path(), "newer") {
        sweep_ok(&["store", "migrate", "--store", &store]);
        bump_schema(&store, 9);
        for args in [
            vec!["history", "--store", &store],
            vec!["import", base_run(42).to_str().unwrap(), "--store", &store],
            vec!["store", "check", "--store", &store],
        ] {
            let o = sweep(&args, &workspace_root());
            let (_, err) = text(&o);
            assert!(!o.status.success(), "{args:?} accepted a newer store");
            assert!(
                err.lines().count() == 1
                    && err.contains("written by a newer sweep (schema version 9; this sweep reads versions up to 2): upgrade sweep"),
                "{args:?}: {err}"
            );
        }
        // A finished run is not lost for it: its folder is complete and the warning says how to record it later.
        let run = d.path().join("gated");
        let _ = std::fs::remove_dir_all(&run);
        copy_run(base_run(42), &run, "gated", 1_790_000_000);
        let gate = sweep(&["gate", run.to_str().unwrap(), "--store", &store], &workspace_root());
        let (_, err) = text(&gate);
        assert!(gate.status.success(), "{err}");
        assert!(err.contains("not recorded in the results store") && err.contains("sweep import"), "{err}");
    }
}

/// An InferenceX-style artifact folder per point of `run`: the aggregate without sweep's own
/// fields (and without p99, as InferenceX writes it) and, with `records`, the AIPerf records
/// under `aiperf_artifacts/`.
fn inferencex_artifacts(run: &Path, to: &Path, records: bool) {
    for p in summary_json(run)["points"].as_array().unwrap() {
        let id = p["id"].as_str().unwrap();
        let src = run.join(id);
        let mut agg: Value = serde_json::from_slice(&std::fs::read(src.join("agg.json")).unwrap()).unwrap();
        for k in
            ["point_id", "arm", "result_kind", "profiles", "target", "trace_set", "seed", "benchmark_id", "validity", "kv", "token_counts"]
        {
            agg.as_object_mut().unwrap().remove(k);
        }
        for m in ["ttft", "e2el", "itl", "tpot"] {
            agg["request_metrics"]["latency"][m].as_object_mut().unwrap().remove("p99");
        }
        let conc = agg["conc"].as_i64().unwrap();
        let dir = to.join(format!("bmk_agentic_dsv3_conc{conc}_{}", id.rsplit('/').next().unwrap()));
        std::fs::create_dir_all(dir.join("aiperf_artifacts")).unwrap();
        std::fs::write(dir.join(format!("agg_dsv3_conc{conc}.json")), serde_json::to_vec_pretty(&agg).unwrap()).unwrap();
        if records {
            // InferenceX's artifacts hold the plain export; sweep keeps it compressed.
            let mut plain = Vec::new();
            std::io::Read::read_to_end(
                &mut flate2::read::GzDecoder::new(std::fs::File::open(src.join("profile_export.jsonl.gz")).unwrap()),
                &mut plain,
            )
            .unwrap();
            std::fs::write(dir.join("aiperf_artifacts/profile_export.jsonl"), plain).unwrap();
        }
    }
}

#[test]
fn inferencex_artifacts_import_as_a_measured_run_with_intervals_from_their_records() {
    let d = tempfile::tempdir().unwrap();
    let run = base_run(42);
    let with = d.path().join("ix-with-records");
    let without = d.path().join("ix-aggregates-only");
    inferencex_artifacts(run, &with, true);
    inferencex_artifacts(run, &without, false);
    let key = "dsv3-fp8-h200-sglang-agentic";
    for store in stores(d.path(), "ix") {
        let out = sweep_ok(&["import", with.to_str().unwrap(), without.to_str().unwrap(), "--config", key, "--store", &store]);
        assert!(out.contains("imported run ix-with-records (5 point(s), measured) from") && out.contains("(5 result folder(s))"), "{out}");
        let h = history_json(&store, &["--kind", "measured"]);
        assert_eq!(run_ids(&h), vec!["ix-aggregates-only", "ix-with-records"]);
        assert!(history_json(&store, &["--kind", "predicted"]).as_array().unwrap().is_empty());
        // The published numbers as they are; the point ids are sweep's.
        let sim = summary_json(run);
        for p in sim["points"].as_array().unwrap() {
            let id = p["id"].as_str().unwrap();
            let rows: Value = serde_json::from_str(&sweep_ok(&["history", "--json", "--store", &store, "--point", id])).unwrap();
            let rows = rows.as_array().unwrap();
            assert_eq!(rows.len(), 2, "{id}: {rows:?}");
            let agg: Value = serde_json::from_slice(&std::fs::read(run.join(id).join("agg.json")).unwrap()).unwrap();
            for r in rows {
                let (pt, m) = (&r["point"], &r["point"]["metrics"]);
                assert_eq!(pt["result_kind"], "measured");
                assert_eq!(m["tput_per_gpu"]["value"], agg["tput_per_gpu"], "{id}");
                assert_eq!(m["e2el_p90"]["value"], agg["request_metrics"]["latency"]["e2el"]["p90"], "{id}");
                let with_records = r["run_id"] == "ix-with-records";
                // Intervals and frontier probabilities only where the records are.
                assert_eq!(m["tput_per_gpu"]["lo"].is_number(), with_records, "{id}: {m}");
                assert_eq!(pt["p_frontier"].is_number(), with_records, "{id}: {pt}");
                assert_eq!(m["ttft_p99"].is_number(), with_records, "p99 only from records: {m}");
                if with_records {
                    let (v, lo, hi) = (
                        m["tput_per_gpu"]["value"].as_f64().unwrap(),
                        m["tput_per_gpu"]["lo"].as_f64().unwrap(),
                        m["tput_per_gpu"]["hi"].as_f64().unwrap(),
                    );
                    assert!(lo <= v * 1.0001 && v <= hi * 1.0001 && lo < hi, "{id}: {lo} {v} {hi}");
                    // The bootstrap of a sweep run over the same records (its replicate streams
                    // follow the order of the points, so the figures differ within resampling noise).
                    let (mine, run_p) = (pt["p_frontier"].as_f64().unwrap(), p["pareto"]["p_frontier"].as_f64().unwrap());
                    assert!((mine - run_p).abs() <= 0.1, "{id}: p_frontier {mine} imported, {run_p} in the run");
                    assert!(pt["files"].as_array().unwrap().iter().any(|f| f["kind"] == "records"), "{pt}");
                }
                // Frontier membership as the run decided it on the same numbers.
                let on = sim["curves"][0]["views"]["e2e_norm_intvty_p90"]["frontier"].as_array().unwrap().iter().any(|f| f == id);
                assert_eq!(pt["frontier"]["e2e_norm_intvty_p90"]["on_frontier"], on, "{id}");
            }
        }
        // A second import of the same folders replaces, never duplicates.
        sweep_ok(&["import", with.to_str().unwrap(), "--config", key, "--store", &store]);
        assert_eq!(run_ids(&history_json(&store, &[])).len(), 2);
        check_ok(&store);
    }
}

#[test]
fn history_filters_runs_by_config_label_hardware_kind_and_date() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("20261101T100000Z-old");
    let b = d.path().join("20261120T100000Z-new");
    copy_run(base_run(42), &a, "20261101T100000Z-old", 1_793_527_200);
    copy_run(base_run(7), &b, "20261120T100000Z-new", 1_795_168_800);
    let mut s = summary_json(&b);
    s["labels"] = serde_json::json!(["full-sweep-enabled,agentx-fast"]);
    std::fs::write(b.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
    for store in stores(d.path(), "hist") {
        sweep_ok(&["import", a.to_str().unwrap(), b.to_str().unwrap(), "--store", &store]);
        let ids = |extra: &[&str]| run_ids(&history_json(&store, extra));
        let (old, new) = ("20261101T100000Z-old".to_string(), "20261120T100000Z-new".to_string());
        assert_eq!(ids(&[]), vec![old.clone(), new.clone()]);
        assert_eq!(ids(&["--config", "dsv3-fp8-h200-sglang-agentic"]), vec![old.clone(), new.clone()]);
        assert_eq!(ids(&["--config", "dsv3-*-h200-*"]), vec![old.clone(), new.clone()]);
        assert!(ids(&["--config", "dsv41flash-*"]).is_empty());
        assert_eq!(ids(&["--label", "agentx-fast"]), vec![new.clone()]);
        assert_eq!(ids(&["--label", "full-sweep-fail-fast"]), vec![old.clone()]);
        assert!(ids(&["--label", "full-sweep"]).is_empty(), "labels match whole");
        assert_eq!(ids(&["--hardware", "H200"]).len(), 2);
        assert_eq!(ids(&["--hardware", "h200-fitted"]).len(), 2);
        assert!(ids(&["--hardware", "gb300"]).is_empty());
        assert_eq!(ids(&["--since", "2026-11-10"]), vec![new.clone()]);
        assert_eq!(ids(&["--until", "2026-11-01"]), vec![old.clone()]);
        assert!(ids(&["--until", "2026-10-31"]).is_empty());
        assert_eq!(ids(&["--gate", "pass"]).len(), 2);
        // The table: newest first, columns aligned.
        let t = sweep_ok(&["history", "--store", &store, "--limit", "1"]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("finished (UTC)") && lines[1].starts_with("2026-11-20 10:00  20261120T100000Z-new"), "{t}");
        assert_eq!(lines[2], "… 1 more (--limit 0 shows all)");
        assert_eq!(lines[0].find("kind"), lines[1].find("predicted"), "{t}");
        // One point across runs: the metric the frontier uses is named, intervals shown.
        let t = sweep_ok(&["history", "--store", &store, "--config", "dsv3-fp8-h200-sglang-agentic", "--point", "tp8-c4"]);
        assert!(t.lines().next().unwrap().contains("E2E-norm intvty (frontier)") && t.lines().count() == 3, "{t}");
        assert!(t.contains(" [") && t.contains("(p = "), "{t}");
        // Energy follows the point across runs, labelled with how it was known.
        assert!(t.lines().next().unwrap().contains("J/out tok") && t.contains(" (predicted)"), "{t}");
        let e = sweep(&["history", "--store", &store, "--point", "tp8-c4"], &workspace_root());
        assert!(!e.status.success() && text(&e).1.contains("give the full point id"), "{:?}", text(&e));
    }
}

#[test]
fn gate_and_compare_take_the_last_passing_run_of_the_same_recipes_from_the_store() {
    let d = tempfile::tempdir().unwrap();
    for store in stores(d.path(), "base") {
        let dir = d.path().join(if store.starts_with("postgres") { "pg" } else { "sqlite" });
        let (a, failed, other, b) = (dir.join("a"), dir.join("failed"), dir.join("other"), dir.join("b"));
        copy_run(base_run(42), &a, "a", 1_790_000_000);
        // Later, but its gate failed: never a baseline.
        copy_run(base_run(42), &failed, "failed", 1_790_000_100);
        let mut g: Value = serde_json::from_slice(&std::fs::read(failed.join("gate.json")).unwrap()).unwrap();
        g["passed"] = Value::Bool(false);
        g["checks"][0]["passed"] = Value::Bool(false);
        std::fs::write(failed.join("gate.json"), serde_json::to_vec(&g).unwrap()).unwrap();
        // Later and passing, but another recipe (its fingerprints differ): not a baseline either.
        copy_run(base_run(42), &other, "other", 1_790_000_200);
        let plan = std::fs::read_to_string(other.join("plan.json")).unwrap();
        let fp = summary_fingerprint(&a);
        std::fs::write(other.join("plan.json"), plan.replace(&fp, "0000")).unwrap();
        copy_run(base_run(7), &b, "b", 1_790_000_300);
        // The first gate of b: no earlier passing run of its recipes yet.
        let out = sweep_ok(&["gate", b.to_str().unwrap(), "--baseline", "last-pass", "--store", &store]);
        assert!(out.starts_with("baseline: none"), "{out}");
        let e = sweep(&["compare", b.to_str().unwrap(), "--baseline", "last-pass", "--store", &store], &workspace_root());
        assert!(!e.status.success() && text(&e).1.contains("passed its gate in the store"), "{:?}", text(&e));
        for r in [&a, &failed, &other] {
            sweep_ok(&["import", r.to_str().unwrap(), "--store", &store]);
        }
        let out = sweep_ok(&["gate", b.to_str().unwrap(), "--baseline", "last-pass", "--store", &store]);
        assert!(
            out.starts_with(&format!(
                "baseline: run a (the last passing run of the same recipe fingerprints, finished 2026-09-21 14:13 UTC; {})",
                a.display()
            )),
            "{out}"
        );
        let from_folder: Value = serde_json::from_slice(&std::fs::read(b.join("gate.json")).unwrap()).unwrap();
        assert_eq!(from_folder["baseline"], "a");
        assert_eq!(
            from_folder["checks"].as_array().unwrap().iter().filter(|c| c["name"].as_str().unwrap().starts_with("regression")).count(),
            20
        );
        // The verdict went into the store with the run.
        let h = history_json(&store, &["--gate", "pass"]);
        assert!(run_ids(&h).contains(&"b".to_string()));
        let compared = sweep_ok(&["compare", b.to_str().unwrap(), "--baseline", "last-pass", "--store", &store]);
        let by_folder = sweep_ok(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
        assert_eq!(compared.lines().skip(1).collect::<Vec<_>>(), by_folder.lines().collect::<Vec<_>>());
        // With the baseline's folder gone (recorded on another machine, say), the store rebuilds
        // it: the same checks, the same verdict.
        std::fs::remove_dir_all(&a).unwrap();
        let out = sweep_ok(&["gate", b.to_str().unwrap(), "--baseline", "last-pass", "--store", &store]);
        assert!(out.contains("rebuilt from the store"), "{out}");
        let from_store: Value = serde_json::from_slice(&std::fs::read(b.join("gate.json")).unwrap()).unwrap();
        assert_eq!(from_store["checks"], from_folder["checks"]);
        // By run id too.
        let out = sweep_ok(&["compare", b.to_str().unwrap(), "--baseline", "a", "--store", &store]);
        assert!(out.starts_with("baseline: run a (finished"), "{out}");
        // `store check` names the missing folder and fails until the run is removed.
        let o = sweep(&["store", "check", "--store", &store], &workspace_root());
        let (out, _) = text(&o);
        assert!(!o.status.success() && out.contains(&format!("run a: its folder {} is gone", a.display())), "{out}");
        sweep_ok(&["store", "remove", "a", "--store", &store]);
        check_ok(&store);
    }
}

/// The recipe fingerprint of a run's points (one config: one fingerprint).
fn summary_fingerprint(run: &Path) -> String {
    let plan: Value = serde_json::from_slice(&std::fs::read(run.join("plan.json")).unwrap()).unwrap();
    plan["matrices"][0]["points"][0]["row"]["recipe-fingerprint"].as_str().unwrap().to_string()
}

#[test]
fn an_eval_points_scores_are_stored_against_the_throughput_point_whose_server_it_ran_on() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("with-eval");
    copy_tree(base_run(42), &run);
    let s = summary_json(&run);
    let eval_id = s["evals"][0]["id"].as_str().expect("the dsv3 sweep plans an eval point").to_string();
    let twin = eval_id.trim_start_matches("eval:").to_string();
    // What a finished gsm8k eval leaves beside eval.json: lm-eval's results file.
    let edir = run.join(eval_id.replace(':', "_"));
    let results = serde_json::json!({"results": {"gsm8k": {"exact_match,strict-match": 0.975, "exact_match_stderr,strict-match": 0.004, "exact_match,flexible-extract": 0.97}}});
    std::fs::write(edir.join("results_2026-12-02T00-00-00.json"), serde_json::to_vec(&results).unwrap()).unwrap();
    let store = d.path().join("s.db");
    sweep_ok(&["import", run.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    let db = rusqlite::Connection::open(&store).unwrap();
    let mut q = db.prepare("SELECT point_id, file, metric, score FROM evals ORDER BY metric").unwrap();
    let rows: Vec<(String, String, String, f64)> =
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.0 == twin && r.1.starts_with(&eval_id.replace(':', "_"))), "{rows:?}");
    assert_eq!((rows[0].2.as_str(), rows[0].3), ("exact_match,flexible-extract", 0.97));
    assert_eq!((rows[1].2.as_str(), rows[1].3), ("exact_match,strict-match", 0.975));
}

#[test]
fn store_check_names_a_damaged_file_instead_of_saying_ok() {
    let dir = tempfile::tempdir().unwrap();
    let store = imported_store(dir.path(), "damaged.db");
    let store_s = store.to_str().unwrap();
    check_ok(store_s);
    // Scribble over the last pages (the tables' leaves), leaving the header and schema pages.
    let mut bytes = std::fs::read(&store).unwrap();
    let n = bytes.len();
    assert!(n > 16 * 4096, "{n} bytes");
    for b in &mut bytes[n - 8 * 4096..n - 4096] {
        *b = 0xA5;
    }
    std::fs::write(&store, &bytes).unwrap();
    let o = sweep(&["store", "check", "--store", store_s], &workspace_root());
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}\n{err}");
    assert!(!out.trim_end().ends_with("ok"), "{out}");
    assert!(format!("{out}{err}").contains("damaged") || err.contains("malformed"), "{out}\n{err}");
}

#[test]
fn a_store_path_that_is_a_folder_or_a_fifo_is_an_error_not_an_empty_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("stores");
    std::fs::create_dir(&folder).unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let run = base_run(42).to_str().unwrap();
    for (path, what) in [(&folder, "is a folder"), (&fifo, "not a regular file")] {
        let p = path.to_str().unwrap();
        for args in
            [vec!["gate", run, "--baseline", "last-pass", "--store", p], vec!["history", "--store", p], vec!["import", run, "--store", p]]
        {
            let o = sweep(&args, &workspace_root());
            let (out, err) = text(&o);
            assert!(!o.status.success(), "sweep {args:?} passed:\n{out}\n{err}");
            assert!(err.contains(what) && err.contains("sweep.db"), "sweep {args:?}:\n{err}");
        }
    }
}

#[test]
fn empty_padded_and_control_character_run_ids_are_refused_before_anything_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("ids.db");
    let store_s = store.to_str().unwrap();
    let run = base_run(42).to_str().unwrap();
    for (id, says) in
        [("", "empty"), ("  ", "empty"), (" r1", "white space"), ("r\u{1b}[31m1", "control character"), ("r\u{7}", "control character")]
    {
        let o = sweep(&["import", run, "--run-id", id, "--store", store_s], &workspace_root());
        let (out, err) = text(&o);
        assert!(!o.status.success(), "--run-id {id:?} accepted:\n{out}\n{err}");
        assert!(err.contains(says), "--run-id {id:?}:\n{err}");
        assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "the id reached the terminal raw: {err:?}");
    }
    // A run folder whose summary names an unusable id is refused by the store itself.
    let odd = dir.path().join("odd");
    copy_run(run.as_ref(), &odd, "r\u{7}x", 1_700_000_000);
    let o = sweep(&["import", odd.to_str().unwrap(), "--store", store_s], &workspace_root());
    let (out, err) = text(&o);
    assert!(!o.status.success() && err.contains("control character"), "{out}\n{err}");
    assert!(!store.exists() || history_json(store_s, &[]).as_array().unwrap().is_empty());
}

#[test]
fn a_store_without_its_version_row_is_named_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let store = imported_store(d.path(), "unversioned.db");
    let store_s = store.to_str().unwrap();
    rusqlite::Connection::open(&store).unwrap().execute("DELETE FROM schema_version", []).unwrap();
    for args in [vec!["import", base_run(42).to_str().unwrap(), "--store", store_s], vec!["store", "migrate", "--store", store_s]] {
        let o = sweep(&args, &workspace_root());
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{args:?} accepted it");
        assert!(err.lines().count() == 1 && err.contains("no schema version row") && !err.contains("CREATE TABLE"), "{args:?}: {err}");
    }
}
