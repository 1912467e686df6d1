//! The local launcher with real server processes: `sweep engine serve` standing in for the
//! recipe's server (`local:engine`), and the recipe's own commands (`local`) including the real
//! sglang-router in front of the worker.

mod common;
use common::*;

use serde_json::Value;

const TP4_C1: &str = "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1";
const DEP2_C64: &str = "dsv41flash-fp4-gb300-sglang-agentic-dspark/dep2-c64";

#[test]
fn local_engine_serves_the_point_on_the_rows_hardware_and_labels_it_predicted() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let o = sweep(
        &[
            "run",
            "full-sweep-fail-fast",
            "--configs",
            "dsv41flash-*",
            "--only",
            TP4_C1,
            "--target",
            "local:engine",
            "--duration",
            "20",
            "--out",
            dir.to_str().unwrap(),
        ],
        &workspace_root(),
    );
    let (so, se) = text(&o);
    let s = summary_json(&dir);
    let p = &s["points"][0];
    assert_eq!(p["status"]["state"], "done", "{so}\n{se}\n{p}");
    // The cluster:gb300-nv runner selects GB300, and the engine serves the best profile for the
    // model there (the one fitted to its published points); latencies come from the cost model.
    assert_eq!(p["result_kind"], "predicted", "{p}");
    assert_eq!(p["profiles"]["hardware_profile"], "gb300-fitted-dsv41flash", "{}", p["profiles"]);
    assert_eq!(p["profiles"]["engine"], "sweep reference engine (sweep engine serve)");
    let pd = harness::results::point_dir(&dir, TP4_C1);
    let log = std::fs::read_to_string(pd.join("server.log")).unwrap();
    assert!(log.contains("sweep engine: serving"), "{log}");
    assert!(!export_text(&pd).is_empty());
    // A launched server is on this host, so the monitor runs where a tool exists; either way
    // the point's power is labelled measured and says why it is what it is (no tool here, or
    // that the reference engine runs on none of this host's GPUs).
    let agg: Value = serde_json::from_slice(&std::fs::read(pd.join("agg.json")).unwrap()).unwrap();
    assert_eq!(agg["power_source"], "measured", "{agg}");
    assert!(agg["power_monitor"]["note"].as_str().is_some_and(|n| !n.is_empty()), "{}", agg["power_monitor"]);
}

fn have_sglang_router() -> bool {
    std::process::Command::new("python3").args(["-c", "import sglang_router"]).output().map(|o| o.status.success()).unwrap_or(false)
}

/// Needs the real router (`pip install sglang-router==0.3.2`); `.ci/run` installs it.
#[test]
#[ignore]
fn local_target_starts_the_recipes_router_in_front_of_the_worker() {
    assert!(have_sglang_router(), "python3 -m sglang_router is not installed: pip install sglang-router==0.3.2");
    let repo = repo_copy();
    // The worker: the reference engine as a real server (GB300 profile, engine time 20x faster),
    // launched from the recipe's own command line; the router: the recipe's real sglang-router.
    let exe = env!("CARGO_BIN_EXE_sweep");
    edit(
        &repo.path().join("recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml"),
        "command: python3 -m sglang.launch_server",
        &format!("command: \"{exe} engine serve --hardware gb300 --time-scale 20\""),
    );
    // PyPI's sglang-router 0.3.2 lacks the image build's `--connect-timeout-secs`.
    edit(&repo.path().join("recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml"), "--connect-timeout-secs, \"900\", ", "");
    let dir = repo.path().join("out");
    // The router fetches the served model's tokenizer from the Hugging Face Hub when it can; the
    // test keeps it off the network (an endpoint that refuses at once) so that the machine's
    // network cannot change what the router does.
    let o = sweep_run_env(
        repo.path(),
        &dir,
        &["--configs", "dsv41flash-*", "--only", DEP2_C64, "--target", "local", "--duration", "20", "--server-timeout", "120"],
        &[("HF_ENDPOINT", "http://127.0.0.1:9"), ("HF_HUB_OFFLINE", "1")],
    );
    let (so, se) = text(&o);
    let s = summary_json(&dir);
    let p = &s["points"][0];
    let pd = harness::results::point_dir(&dir, DEP2_C64);
    if p["status"]["state"] != "done" {
        // What failed, from the point's own files: its failed records and both servers' logs.
        let recs = export_text(&pd);
        let failed: Vec<&str> = recs.lines().filter(|l| l.contains("\"error\":{")).take(3).collect();
        let tail = |f: &str| {
            let t = std::fs::read_to_string(pd.join(f)).unwrap_or_default();
            let lines: Vec<&str> = t.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        panic!(
            "point not done: {}\n{so}\n{se}\nfailed records:\n{}\nrouter.log:\n{}\nserver.log:\n{}",
            p["status"],
            failed.join("\n"),
            tail("router.log"),
            tail("server.log")
        );
    }
    let router_log = std::fs::read_to_string(pd.join("router.log")).expect("router.log kept");
    // Every request went through the router (its access log names the chat endpoint).
    assert!(router_log.contains("/v1/chat/completions"), "{}", &router_log[..router_log.len().min(2000)]);
    let recs = export_text(&pd);
    let n_ok = recs.lines().filter(|l| !l.contains("\"error\":{")).count();
    assert!(n_ok > 64, "{n_ok} successful records");
}

#[test]
fn live_targets_replay_only_traces_that_fit_the_servers_context() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let id = "dsv3-fp8-h200-sglang-agentic/tp8-c1";
    let o = sweep(
        &[
            "run",
            "full-sweep-fail-fast",
            "--configs",
            "dsv3-*",
            "--only",
            id,
            "--target",
            "local:engine",
            "--duration",
            "20",
            "--out",
            dir.to_str().unwrap(),
        ],
        &workspace_root(),
    );
    let pd = harness::results::point_dir(&dir, id);
    let agg: Value = serde_json::from_slice(&std::fs::read(pd.join("agg.json")).unwrap_or_default()).unwrap_or(Value::Null);
    // DeepSeek-V3's 163,840-token context: the server reports it and longer traces are left out.
    let ts = agg["trace_set"].as_str().unwrap_or_default();
    assert!(ts.contains("whole-trace filter at the context length 163840"), "{ts}\n{:?}", text(&o));
    let recs = export_text(&pd);
    assert!(!recs.is_empty() && !recs.contains("context_overflow"));
}
