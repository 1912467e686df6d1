//! `sweep trace gen|stats|dry-run` end to end through the binary.

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
