//! The live client against a real `sweep engine serve` process: it waits for a server that is
//! not ready yet, writes the request dialect it is given, counts tokens the server does not
//! report, and ends streams that stall.

mod common;
use common::engine_server::*;
use common::*;

use serde_json::Value;
use std::process::Command;

fn profiling(recs: &[Value]) -> Vec<&Value> {
    recs.iter().filter(|r| r["metadata"]["benchmark_phase"] == "profiling").collect()
}

#[test]
fn a_replay_waits_for_a_late_server_and_writes_its_dialect() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("point");
    let mut replay = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["replay", "--url", &url, "--concurrency", "2", "--duration", "120", "--gpus", "4", "--ready-timeout", "120"])
        .args(["--max-tokens-field", "max_tokens", "--extra-body", r#"{"temperature": 0, "top_p": 1}"#])
        .args(["--out", dir.to_str().unwrap()])
        .envs(TP4_ENV.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Nothing listens yet: the replay says it waits (instead of failing its primers); the server
    // starts once it has.
    use std::io::{BufRead, Read};
    let mut err = std::io::BufReader::new(replay.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains(&format!("waiting for {url} to be ready")), "{first}");
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).map(|_| s)
    });
    let _server = EngineServer::start_on(port, &["--time-scale", "20"]);
    let o = replay.wait_with_output().unwrap();
    let (so, se) = (text(&o).0, rest.join().unwrap().unwrap());
    assert!(o.status.success(), "{so}\n{se}");
    let agg = read_json(&dir.join("agg.json"));
    assert_eq!(agg["request_dialect"]["max_tokens_field"], "max_tokens", "{}", agg["request_dialect"]);
    assert_eq!(agg["request_dialect"]["extra_body"], serde_json::json!({"temperature": 0, "top_p": 1}));
    assert_eq!(agg["request_dialect"]["ignore_eos"], true);
    // The engine read the budget from `max_tokens`: every output ran to it.
    let recs = records(&dir);
    let prof = profiling(&recs);
    assert!(prof.len() > 5, "{} profiling records", prof.len());
    for r in prof.iter().filter(|r| r["error"].is_null()) {
        let osl = r["metrics"]["output_sequence_length"]["value"].as_f64().unwrap();
        assert_eq!(Some(osl as u64), r["metadata"]["expected_output_sequence_length"].as_u64(), "{r}");
        assert_eq!(r["metadata"]["token_source"], "usage", "{r}");
    }
    assert_eq!(agg["token_counts"]["usage"].as_u64(), Some(agg["num_requests_successful"].as_u64().unwrap()));
}

#[test]
fn a_server_that_sends_no_usage_has_its_tokens_counted_by_the_client() {
    let s = EngineServer::start(&["--time-scale", "20"]);
    // SGLang honours `include_usage: false`: the stream then carries no usage at all.
    let no_usage = r#"{"stream_options": {"include_usage": false}}"#;
    let (o, tmp) = replay(&["--url", &s.url, "--concurrency", "2", "--duration", "120", "--gpus", "4", "--extra-body", no_usage]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    let dir = tmp.path().join("point");
    let agg = read_json(&dir.join("agg.json"));
    assert_eq!(agg["validity"]["valid"], true, "{}", agg["validity"]);
    let counts = &agg["token_counts"];
    assert_eq!((counts["usage"].as_u64(), counts["unknown"].as_u64()), (Some(0), Some(0)), "{counts}");
    // `ignore_eos` runs every output to its budget: a `length` finish counts as exactly that.
    assert!(counts["budget"].as_u64().unwrap() > 5, "{counts}");
    for r in profiling(&records(&dir)).iter().filter(|r| r["error"].is_null()) {
        assert_eq!(r["metadata"]["token_source"], "budget", "{r}");
        let (osl, want) = (
            r["metrics"]["output_sequence_length"]["value"].as_f64().unwrap(),
            r["metadata"]["expected_output_sequence_length"].as_f64().unwrap(),
        );
        assert_eq!(osl, want, "{r}");
        assert!(r["metrics"]["input_sequence_length"]["value"].as_f64().unwrap() > 1000.0, "{r}");
    }
    assert!(
        agg["request_metrics"]["throughput"]["output_tokens_per_second"].as_f64().unwrap_or(0.0) > 0.0
            || agg["tput_per_gpu"].as_f64().unwrap() > 0.0
    );

    // Without ignore_eos the engine stops on its own: outputs are counted by tokenizing the text
    // with the server's vocabulary.
    let (o, tmp) =
        replay(&["--url", &s.url, "--concurrency", "2", "--duration", "120", "--gpus", "4", "--extra-body", no_usage, "--no-ignore-eos"]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    let agg = read_json(&tmp.path().join("point").join("agg.json"));
    let counts = &agg["token_counts"];
    assert!(counts["tokenized"].as_u64().unwrap() > 0, "{counts}");
    assert_eq!(counts["unknown"].as_u64(), Some(0), "{counts}");
    assert_eq!(agg["request_dialect"]["ignore_eos"], false);
}

#[test]
fn a_stream_that_sends_nothing_is_a_stall() {
    // Engine time 500x slower than wall time: a long prefill sends nothing for many seconds.
    let s = EngineServer::start(&["--time-scale", "0.002"]);
    let t0 = std::time::Instant::now();
    let (o, tmp) = replay(&[
        "--url",
        &s.url,
        "--concurrency",
        "1",
        "--duration",
        "60",
        "--gpus",
        "4",
        "--stall-timeout",
        "1",
        "--warmup-per-lane",
        "1",
    ]);
    let (so, se) = text(&o);
    assert!(!o.status.success(), "{so}\n{se}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(120), "the stall did not end the request");
    let recs = records(&tmp.path().join("point"));
    let stall = recs.iter().find(|r| r["error"]["type"] == "stall").unwrap_or_else(|| panic!("no stall: {recs:?}\n{so}\n{se}"));
    assert!(stall["error"]["message"].as_str().unwrap().contains("sent nothing for 1.0 s"), "{stall}");
}
