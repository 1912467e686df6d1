//! `sweep trace gen|stats|dry-run|conversations` end to end through the binary.

use std::process::Command;

fn sweep(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sweep")).args(args).output().expect("run sweep")
}

#[test]
fn gen_then_stats_round_trips_a_synthetic_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.jsonl.gz");
    let o = sweep(&["trace", "gen", "--traces", "6", "--seed", "3", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = sweep(&["trace", "stats", "--json", out.to_str().unwrap(), "synthetic:6:3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sets = v.as_array().unwrap();
    assert_eq!(sets.len(), 2);
    // The file and the in-memory generation are the same traces.
    assert_eq!(sets[0]["rows"], sets[1]["rows"]);
    assert_eq!(sets[0]["traces"], 6);
    let o = sweep(&["trace", "stats", out.to_str().unwrap()]);
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(table.contains("| ISL (tokens) | p50 |"), "{table}");
}

#[test]
fn a_malformed_trace_is_named_and_skippable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.jsonl");
    let good = r#"{"id":"a","block_size":64,"hash_id_scope":"local","requests":[{"t":0,"type":"s","in":100,"out":5,"hash_ids":[1]}]}"#;
    let bad = r#"{"id":"b","block_size":64,"hash_id_scope":"global","requests":[{"t":0,"type":"s","in":100,"out":5,"hash_ids":[1]}]}"#;
    std::fs::write(&p, format!("{good}\n{bad}\n")).unwrap();
    let o = sweep(&["trace", "stats", p.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.jsonl:2") && err.contains("trace b") && err.contains("hash_id_scope"), "{err}");
    let o = sweep(&["trace", "stats", "--skip-invalid", p.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: skipped"));
}

#[test]
fn backwards_times_and_repeated_ids_are_named_and_skippable() {
    let dir = tempfile::tempdir().unwrap();
    let t = |id: &str, times: &str| {
        format!(r#"{{"id":"{id}","block_size":64,"hash_id_scope":"local","requests":[{times}]}}"#)
            .replace("T", r#""type":"s","in":100,"out":5,"hash_ids":[1]"#)
    };
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    std::fs::write(&a, format!("{}\n{}\n", t("x", r#"{"t":0,T}"#), t("y", r#"{"t":9,T},{"t":3,T}"#))).unwrap();
    std::fs::write(&b, format!("{}\n", t("x", r#"{"t":0,T}"#))).unwrap();
    let o = sweep(&["trace", "stats", a.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("a.jsonl:2: trace y: field `requests[1].t`") && err.contains("sort them by `t`"), "{err}");
    let o = sweep(&["trace", "stats", "--skip-invalid", "--json", dir.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("a.jsonl:2") && err.contains("b.jsonl:1: trace x: field `id`: repeats the id of the trace at"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["traces"], 1);
}

#[test]
fn a_device_and_a_gzip_bomb_are_refused_quickly() {
    let o = sweep(&["trace", "stats", "/dev/zero"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("/dev/zero: is a device, not a trace file"), "{err}");
    // 1 GiB of blank lines in 1 MB of gzip (1024 copies of one member).
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bomb.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &[b'\n'; 1 << 20]).unwrap();
    std::fs::write(&p, gz.finish().unwrap().repeat(1024)).unwrap();
    let o = sweep(&["trace", "stats", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("bomb.jsonl.gz:1: gzip stream expands more than 100×"), "{err}");
}

#[test]
fn dry_run_replays_a_point() {
    let o = sweep(&[
        "trace",
        "dry-run",
        "synthetic:12:5",
        "--concurrency",
        "4",
        "--benchmark-duration",
        "600",
        "--warmup-requests-per-lane",
        "2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8(o.stdout).unwrap();
    assert!(s.contains("outcome: Completed"), "{s}");
    assert!(s.contains("warmup: "), "{s}");
    assert!(s.contains("theoretical prefix-cache hit"), "{s}");
}

#[test]
fn gen_like_then_stats_against_verdicts_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("c.stats.yaml");
    std::fs::write(
        &stats,
        "counts: {traces: 8, main_turns: 400}\nfilters: {min_requests_per_session: 20}\ndistributions:\n  main_isl: {p50: 50000, p90: 120000}\n  main_osl: {p50: 300, p90: 1200}\n",
    )
    .unwrap();
    let out = dir.path().join("like.jsonl.gz");
    let o = sweep(&["trace", "gen", "--like", stats.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = sweep(&["trace", "stats", out.to_str().unwrap(), "--against", stats.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{table}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(table.contains("| counts.main_turns | 400 | 400 | +0.00 % | ± 2 % | ok |"), "{table}");
    assert!(table.contains("| main_osl.p90 | 1200 |"), "{table}");
    // A different trace count scales the counts: the counts rows now miss and the exit says so.
    let o = sweep(&["trace", "gen", "--like", stats.to_str().unwrap(), "--traces", "4", "-o", out.to_str().unwrap()]);
    assert!(o.status.success());
    let o = sweep(&["trace", "stats", "--json", out.to_str().unwrap(), "--against", stats.to_str().unwrap()]);
    assert!(!o.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let traces = rows.as_array().unwrap().iter().find(|r| r["row"] == "counts.traces").unwrap();
    assert_eq!((traces["measured"].as_f64(), traces["pass"].as_bool()), (Some(4.0), Some(false)));
    assert!(String::from_utf8_lossy(&o.stderr).contains("counts.traces"));
    // A bad stats file names file, line and field.
    std::fs::write(&stats, "counts:\n  traces: 8\n  main_turn: 400\n").unwrap();
    let o = sweep(&["trace", "gen", "--like", stats.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("c.stats.yaml:3") && err.contains("main_turn"), "{err}");
}

#[test]
fn conversations_lists_the_flattened_agents_of_a_trace_and_survives_a_closed_pipe() {
    // A main conversation and a worker that forks off its first prompt while it runs: two
    // conversations, the worker spawned by root turn 0 when it is sent.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.jsonl");
    let t = r#"{"id":"f","block_size":64,"hash_id_scope":"local","requests":[
        {"t":0,"type":"s","model":"m","in":640,"out":5,"hash_ids":[1,2,3],"api_time":6},
        {"t":5,"type":"s","model":"m","in":640,"out":5,"hash_ids":[1,2,3,50],"api_time":3},
        {"t":10,"type":"s","model":"m","in":640,"out":5,"hash_ids":[1,2,3,4],"api_time":1},
        {"t":12,"type":"s","model":"m","in":640,"out":5,"hash_ids":[1,2,3,50,51],"api_time":3},
        {"t":20,"type":"s","model":"m","in":640,"out":5,"hash_ids":[1,2,3,4,5],"api_time":1}]}"#;
    std::fs::write(&p, t.replace('\n', "") + "\n").unwrap();
    let o = sweep(&["trace", "conversations", "--json", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let convs: Vec<serde_json::Value> = String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(convs.len(), 2);
    assert_eq!((convs[0]["conversation"].as_str(), convs[0]["requests"].clone()), (Some("f"), serde_json::json!([0, 2, 4])));
    assert_eq!(convs[1]["conversation"], "f::fa:000");
    assert_eq!(convs[1]["kind"], "flat");
    assert_eq!(convs[1]["requests"], serde_json::json!([1, 3]));
    assert_eq!((convs[1]["spawn"].as_u64(), convs[1]["at_issue"].as_bool()), (Some(0), Some(true)));
    // A reader that stops early (`| head`) is not an error.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["trace", "conversations", "synthetic"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}
