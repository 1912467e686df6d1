//! `sweep eval` and the gate on its results: against a real `sweep engine serve` (simulated, so
//! the eval is recorded as not applicable and never scored), with `--engine`, and the gate on
//! InferenceX eval artifacts. The eval against a real model server is `llama_eval_*` in
//! `llama_cpp.rs`; the real-data checks are in `conformance_eval.rs`.

mod common;
use common::engine_server::{EngineServer, read_json};
use common::*;
use std::path::Path;

fn results_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("results") && n.ends_with(".json"))
        .collect()
}

#[test]
fn eval_against_sweep_engine_serve_is_not_applicable_and_the_gate_says_so() {
    let server = EngineServer::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("eval");
    let o = sweep(
        &["eval", "--url", &server.url, "--limit", "50", "--out", out.to_str().unwrap(), "--model-prefix", "dsv4", "--gate"],
        tmp.path(),
    );
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    assert!(so.contains("gsm8k: not_applicable: simulated engine; no score"), "{so}");
    assert!(so.contains("gate N/A"), "{so}");
    let rec = read_json(&out.join("eval.json"));
    assert_eq!(rec["status"], "not_applicable");
    assert_eq!(rec["reason"], "simulated engine");
    assert_eq!(rec["result_kind"], "not_applicable");
    assert_eq!(rec["model"], "deepseek-ai/DeepSeek-V4.1-Flash");
    assert!(rec["server"]["engine"].as_str().unwrap().contains("simulated"), "{}", rec["server"]);
    for k in ["em_strict", "em_flexible", "em_strict_stderr", "em_flexible_stderr"] {
        assert!(rec[k].is_null(), "{k} must not be a number: {}", rec[k]);
    }
    assert_eq!(rec["limit"], 50);
    // No score anywhere: no lm-eval results file, no samples; the row says why.
    assert!(results_files(&out).is_empty(), "{:?}", results_files(&out));
    assert!(!out.join("samples.jsonl").exists());
    let row = &read_json(&out.join("agg_eval.json"))[0];
    assert!(row["score"].is_null() && row["em_strict"].is_null() && row["n_eff"].is_null(), "{row}");
    assert_eq!(row["status"], "not_applicable: simulated engine");
    assert_eq!(read_json(&out.join("meta_env.json"))["infmax_model_prefix"], "dsv4");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| not_applicable: simulated engine | - | - | - |"), "{md}");
    assert!(std::fs::read_to_string(out.join("report.html")).unwrap().contains("not_applicable: simulated engine"));

    // The gate: N/A, not a pass on a score and not a failure.
    let g = sweep(&["gate", out.to_str().unwrap()], tmp.path());
    let (go, ge) = text(&g);
    assert!(g.status.success(), "{go}\n{ge}");
    assert!(go.contains("1 not applicable") && go.contains("N/A   eval gsm8k"), "{go}");
    let v = read_json(&out.join("gate.json"));
    assert_eq!(v["passed"], true);
    assert_eq!(v["checks"].as_array().unwrap().len(), 0);
    assert!(v["not_applicable"][0]["detail"].as_str().unwrap().starts_with("N/A: not_applicable: simulated engine"), "{v}");
    let xml = std::fs::read_to_string(out.join("gate.xml")).unwrap();
    assert!(xml.contains("skipped=\"1\"") && xml.contains("<skipped message=\"N/A: not_applicable: simulated engine"), "{xml}");
}

#[test]
fn eval_with_engine_flags_records_not_applicable_without_a_server() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("e");
    let o = sweep(
        &["eval", "--engine", "--model-path deepseek-ai/DeepSeek-V4.1-Flash --tp 4", "--out", out.to_str().unwrap(), "--meta", "hw=gb300"],
        tmp.path(),
    );
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    let rec = read_json(&out.join("eval.json"));
    assert_eq!((rec["status"].as_str(), rec["reason"].as_str()), (Some("not_applicable"), Some("simulated engine")));
    assert_eq!(rec["model"], "deepseek-ai/DeepSeek-V4.1-Flash");
    assert_eq!(rec["meta"]["hw"], "gb300");
    assert!(rec["em_strict"].is_null());
    // A misspelled meta field is refused, naming the nearest one.
    let o = sweep(&["eval", "--engine", "--model-path m", "--out", out.to_str().unwrap(), "--meta", "precison=fp8"], tmp.path());
    let (_, se) = text(&o);
    assert!(!o.status.success() && se.contains("did you mean `precision`"), "{se}");
}

/// An lm-eval result as InferenceX stages it (`meta_env.json` beside `results_*.json`).
fn artifacts(dir: &Path, prefix: &str, strict: f64, flexible: f64, effective: u64, limit: Option<u64>) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("meta_env.json"),
        format!(r#"{{"is_multinode": false, "framework": "sglang", "precision": "fp8", "tp": 2, "ep": 2, "conc": 32, "dp_attention": false, "model": "m", "infmax_model_prefix": "{prefix}", "hw": "gb300", "isl": "0", "osl": "0"}}"#),
    )
    .unwrap();
    let limit = limit.map(|l| format!("{l}.0")).unwrap_or_else(|| "null".into());
    std::fs::write(
        dir.join("results_2026-10-01T00-00-00.000000.json"),
        format!(
            r#"{{"results": {{"gsm8k": {{"exact_match,strict-match": {strict}, "exact_match_stderr,strict-match": 0.004, "exact_match,flexible-extract": {flexible}, "exact_match_stderr,flexible-extract": 0.004}}}},
               "n-samples": {{"gsm8k": {{"original": 1319, "effective": {effective}}}}}, "config": {{"limit": {limit}}}, "lm_eval_version": "0.4.9"}}"#
        ),
    )
    .unwrap();
}

#[test]
fn the_gate_reads_inferencex_eval_artifacts_row_score_threshold_and_source() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("evals");
    artifacts(&root.join("eval_tp2"), "dsv4", 0.9750, 0.9760, 1319, None);
    artifacts(&root.join("eval_dep2"), "dsv4", 0.9050, 0.9742, 1319, None);
    artifacts(&root.join("eval_smoke"), "glm5", 0.99, 0.99, 50, Some(50));
    let g = sweep(&["gate", root.to_str().unwrap()], tmp.path());
    let (go, ge) = text(&g);
    assert_eq!(g.status.code(), Some(1), "{go}\n{ge}");
    assert!(go.starts_with("gate: FAIL (3 checks, 2 failed)"), "{go}");
    // The failing rows name the row, the score, the threshold and its source.
    assert!(go.contains("FAIL  eval gsm8k dsv4 GB300 sglang fp8 TP2 EP2 C32 (eval_dep2): em_strict 0.9050 < 0.91 (models.dsv4)"), "{go}");
    assert!(go.contains("(eval_smoke): partial n: 50 of 1319 (limited to the first 50 questions)"), "{go}");
    let v = read_json(&root.join("gate.json"));
    let pass = v["checks"].as_array().unwrap().iter().find(|c| c["name"].as_str().unwrap().contains("eval_tp2")).unwrap();
    assert_eq!(pass["passed"], true);
    assert_eq!(pass["detail"], "em_strict 0.9750, em_flexible 0.9760 ≥ 0.91 (models.dsv4), n=1319, infrastructure_success: true");
    // A thresholds file given on the command line wins over the embedded table.
    std::fs::write(tmp.path().join("t.yaml"), "default: {gsm8k: 0.5}\n").unwrap();
    std::fs::remove_dir_all(root.join("eval_smoke")).unwrap();
    let g = sweep(&["gate", root.to_str().unwrap(), "--thresholds", tmp.path().join("t.yaml").to_str().unwrap()], tmp.path());
    let (go, _) = text(&g);
    assert!(g.status.success(), "{go}");
    assert!(go.starts_with("gate: PASS (2 checks, 0 failed)"), "{go}");
}

/// A server on loopback that is healthy (`/health`, `/v1/models`, the one-token readiness
/// request) and answers every eval question the way `reply` says: a broken server (lm-eval
/// raises on all of these). Returns its URL.
fn misbehaving_server(reply: fn(&mut std::net::TcpStream)) -> String {
    misbehaving_server_with(
        |s| respond(s, r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"length"}]}"#),
        reply,
    )
}

/// [`misbehaving_server`] whose readiness request is answered by `probe`.
fn misbehaving_server_with(probe: fn(&mut std::net::TcpStream), reply: fn(&mut std::net::TcpStream)) -> String {
    use std::io::{BufRead, BufReader, Read};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let (mut first, mut len) = (String::new(), 0usize);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if first.is_empty() {
                        first = line.clone();
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                if first.starts_with("GET /v1/models") {
                    respond(&mut s, r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#);
                } else if first.starts_with("GET") {
                    respond(&mut s, "{}");
                } else if String::from_utf8_lossy(&body).contains(r#""content":"Hi"}"#) {
                    probe(&mut s);
                } else {
                    reply(&mut s);
                }
            });
        }
    });
    url
}

fn respond(s: &mut std::net::TcpStream, body: &str) {
    use std::io::Write;
    let _ =
        write!(s, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
}

/// 200, then an answer that never ends: it must be cut, not buffered until memory runs out.
fn endless_answer(s: &mut std::net::TcpStream) {
    use std::io::Write;
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{{\"choices\":[{{\"message\":{{\"content\":\""
    );
    let chunk = vec![b'a'; 1 << 16];
    while s.write_all(&chunk).is_ok() {}
}

#[test]
fn a_broken_server_is_an_infrastructure_failure_never_wrong_answers() {
    // The readiness request answered without end: cut at its cap and named, never buffered.
    let url = misbehaving_server_with(endless_answer, |s| respond(s, "{}"));
    let tmp = tempfile::tempdir().unwrap();
    let o = sweep(
        &["eval", "--url", &url, "--limit", "1", "--ready-timeout", "3", "--out", tmp.path().join("e").to_str().unwrap()],
        tmp.path(),
    );
    let err = text(&o).1;
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("the reply passed 1048576 bytes without ending"), "{err}");

    let endless: fn(&mut std::net::TcpStream) = endless_answer;
    type Reply = fn(&mut std::net::TcpStream);
    let cases: [(Reply, &str); 5] = [
        (|s| respond(s, r#"{"error":{"message":"overloaded","code":503}}"#), "error object"),
        (|s| respond(s, r#"{"id":"x","choices":[]}"#), "no choices"),
        (|s| respond(s, r#"{"choices":[{"message":{"content":null}}]}"#), "null"),
        (|s| respond(s, r#"{"choices":[{"message":{"content":{"text":"3"}}}]}"#), "not text"),
        (endless, "bytes"),
    ];
    for (reply, says) in cases {
        let url = misbehaving_server(reply);
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("eval");
        let o = sweep(
            &["eval", "--url", &url, "--limit", "1", "--concurrency", "1", "--max-model-len", "2048", "--out", out.to_str().unwrap()],
            tmp.path(),
        );
        let (so, se) = text(&o);
        assert!(!o.status.success(), "{says}: a broken server passed\n{so}\n{se}");
        let rec = read_json(&out.join("eval.json"));
        assert_eq!(rec["infrastructure_success"], false, "{says}: {rec}");
        assert_eq!(rec["requests_failed"], 1, "{says}: {rec}");
        let sample: serde_json::Value =
            serde_json::from_str(std::fs::read_to_string(out.join("samples.jsonl")).unwrap().lines().next().unwrap()).unwrap();
        assert!(sample["exact_match"].is_null(), "{says}: scored as an answer: {sample}");
        assert_eq!(sample["attempts"], 5, "{says}: retried as InferenceX retries: {sample}");
        assert!(sample["error"].as_str().unwrap().contains(says), "{says}: {sample}");
    }
}
