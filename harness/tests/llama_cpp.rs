//! `sweep replay` against a real engine nobody here wrote: llama.cpp's Python server
//! (llama-cpp-python 0.3.36) serving a tiny random-weight GGUF with the DeepSeek-V4 tokenizer
//! (`scripts/llama/make_tiny_gguf.py`). It reads only `max_tokens`, sends no `usage` chunk, has
//! no `/health` and drops the stream of a prompt past its context. `.ci/run` sets it up
//! (`scripts/llama/setup.sh`) and runs these with `SWEEP_LLAMA_PYTHON` and `SWEEP_LLAMA_GGUF`.

mod common;
use common::engine_server::{read_json, records};
use common::*;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

const N_CTX: u64 = 8192;

fn env_path(k: &str) -> PathBuf {
    let v = std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set: run scripts/llama/setup.sh (as .ci/run does)"));
    PathBuf::from(v)
}

fn tokenizer() -> PathBuf {
    shared_data().join("tokenizers/deepseek-v4/tokenizer.json")
}

/// A llama-cpp-python server on a free port; killed on drop.
struct Llama {
    child: Child,
    url: String,
}

impl Llama {
    fn start(log: &Path) -> Llama {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new(env_path("SWEEP_LLAMA_PYTHON"))
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(env_path("SWEEP_LLAMA_GGUF"))
            .args([
                "--n_ctx",
                &N_CTX.to_string(),
                "--n_threads",
                "2",
                "--interrupt_requests",
                "False",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start llama_cpp.server");
        Llama { child, url: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` small AgentX traces (Weka JSONL): each a session of 5 turns whose context grows from
/// about 1,000 to 4,000 tokens over a shared prefix, with 24-token outputs.
fn small_traces(path: &Path, n: usize) {
    let mut f = std::fs::File::create(path).unwrap();
    for k in 0..n {
        let requests: Vec<Value> = (0..5)
            .map(|i| {
                let input = 1_000 + 700 * i + 13 * k;
                let blocks = input.div_ceil(64);
                json!({"t": 3.0 * i as f64, "type": "n", "model": "m", "in": input, "out": 24, "hash_ids": (1..=blocks).collect::<Vec<_>>()})
            })
            .collect();
        let t = json!({"id": format!("small_{k:02}"), "models": ["m"], "block_size": 64, "hash_id_scope": "local", "requests": requests});
        writeln!(f, "{t}").unwrap();
    }
}

fn replay(url: &str, traces: &Path, out: &Path, extra: &[&str]) -> Output {
    let tok = tokenizer();
    Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["replay", "--url", url, "--traces", traces.to_str().unwrap(), "--tokenizer", tok.to_str().unwrap()])
        .args(["--max-tokens-field", "max_tokens", "--context-length", &N_CTX.to_string(), "--ready-timeout", "300"])
        .args(["--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .expect("run sweep replay")
}

#[test]
#[ignore = "needs llama-cpp-python and a GGUF (scripts/llama/setup.sh; .ci/run)"]
fn llama_replays_at_c1_and_c4_count_tokens_the_server_does_not_report() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Llama::start(&tmp.path().join("llama.log"));
    let traces = tmp.path().join("small.jsonl");
    small_traces(&traces, 20);
    for conc in ["1", "4"] {
        let out = tmp.path().join(format!("c{conc}"));
        let o = replay(&server.url, &traces, &out, &["--concurrency", conc, "--duration", "40", "--warmup-per-lane", "1"]);
        let (so, se) = text(&o);
        assert!(o.status.success(), "c{conc}:\n{so}\n{se}");
        let agg = read_json(&out.join("agg.json"));
        assert_eq!(agg["validity"]["valid"], true, "c{conc}: {}", agg["validity"]);
        assert_eq!(agg["result_kind"], "measured");
        let counts = &agg["token_counts"];
        // No usage from this server: every count is the client's, none unknown.
        assert_eq!((counts["usage"].as_u64(), counts["unknown"].as_u64()), (Some(0), Some(0)), "c{conc}: {counts}");
        let prof: Vec<Value> = records(&out).into_iter().filter(|r| r["metadata"]["benchmark_phase"] == "profiling").collect();
        let ok: Vec<&Value> = prof.iter().filter(|r| r["error"].is_null()).collect();
        assert!(ok.len() >= 5, "c{conc}: {} successful profiling requests", ok.len());
        for r in &ok {
            let osl = r["metrics"]["output_sequence_length"]["value"].as_f64().unwrap();
            match r["metadata"]["token_source"].as_str() {
                // The server honoured the budget sent as `max_tokens`.
                Some("budget") => assert_eq!(Some(osl as u64), r["metadata"]["expected_output_sequence_length"].as_u64(), "{r}"),
                Some("tokenized") => assert!(osl >= 1.0, "{r}"),
                other => panic!("c{conc}: token source {other:?}: {r}"),
            }
        }
        // No zero-metric valid point.
        assert!(agg["tput_per_gpu"].as_f64().unwrap() > 0.0, "c{conc}: {agg}");
        assert!(so.contains("tok/s/GPU") && !so.contains(" 0.000 tok/s/GPU"), "c{conc}: {so}");
    }
}

#[test]
#[ignore = "needs llama-cpp-python and a GGUF (scripts/llama/setup.sh; .ci/run)"]
fn llama_synthesized_prompts_have_the_servers_token_counts() {
    use harness::prompt::TokenizerVocab;
    use harness::targets::body::{BodyPieces, MessageCache};
    use harness::workload::{Workload, WorkloadConfig, driver};
    let tmp = tempfile::tempdir().unwrap();
    let server = Llama::start(&tmp.path().join("llama.log"));
    let traces = tmp.path().join("small.jsonl");
    small_traces(&traces, 4);
    let loaded = harness::targets::pools::load(traces.to_str().unwrap(), 1).unwrap();
    let cfg = WorkloadConfig { concurrency: 1, duration_ns: 600 * 1_000_000_000, warmup: false, ..Default::default() };
    let mut wl = Workload::new(cfg, loaded.clone()).unwrap();
    let log = driver::drive(&mut wl, 0, |_| driver::Service { duration_ns: 1_000_000_000, failure: None }, |_, _| {});
    let vocab = TokenizerVocab::from_path(&tokenizer()).unwrap();
    // This server reads only `max_tokens`.
    let dialect =
        harness::targets::dialect::Dialect { max_tokens_field: harness::targets::dialect::MaxTokensField::MaxTokens, ..Default::default() };
    wait_until_up(&server.url);
    let mut compared = 0;
    for r in log.records.iter().take(8) {
        let body = BodyPieces::build("m", &r.spec.prompt, 1, &vocab, &MessageCache::default(), &dialect).concat();
        let body = String::from_utf8(body).unwrap().replace(r#""stream":true"#, r#""stream":false"#);
        let v: Value = serde_json::from_str(&http(&server.url, "POST", "/v1/chat/completions", &body).1).unwrap();
        let server_count = v["usage"]["prompt_tokens"].as_u64().unwrap_or_else(|| panic!("{v}"));
        // What the client records when the server sends no usage.
        let ours = harness::targets::http::templated_prompt_tokens(&r.spec.prompt, ::engine_server::tokenize::TemplateFamily::DeepSeekV4);
        let diff = (server_count as f64 - ours as f64).abs();
        assert!(diff / server_count as f64 <= 0.01, "synthesized {ours} tokens, the server counts {server_count}");
        compared += 1;
    }
    assert!(compared >= 5);
}

/// A plain HTTP/1.1 exchange (`Connection: close`): status and body.
fn http(url: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::Read;
    let addr = url.trim_start_matches("http://");
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return (0, String::new()) };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let status = resp.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, resp.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

fn wait_until_up(url: &str) {
    let t = std::time::Instant::now();
    while http(url, "GET", "/v1/models", "").0 != 200 {
        assert!(t.elapsed().as_secs() < 300, "llama_cpp.server did not come up at {url}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[test]
#[ignore = "needs llama-cpp-python and a GGUF (scripts/llama/setup.sh; .ci/run)"]
fn llama_prompt_past_the_context_is_a_context_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Llama::start(&tmp.path().join("llama.log"));
    // A session whose last prompt fits the context by the trace's count but not once the
    // server's chat template is added: llama.cpp sends its SSE head, then drops the stream.
    let turn = |t: f64, input: u64, out: u64| json!({"t": t, "type": "n", "model": "m", "in": input, "out": out, "hash_ids": (1..=input.div_ceil(64)).collect::<Vec<_>>()});
    let t = json!({"id": "long", "models": ["m"], "block_size": 64, "hash_id_scope": "local",
        "requests": [turn(0.0, 1_000, 4), turn(1.0, 2_000, 4), turn(2.0, N_CTX - 6 - 2, 1)]});
    let traces = tmp.path().join("long.jsonl");
    std::fs::write(&traces, format!("{t}\n")).unwrap();
    let out = tmp.path().join("point");
    let o = replay(&server.url, &traces, &out, &["--concurrency", "1", "--duration", "20", "--warmup-per-lane", "0"]);
    let (so, se) = text(&o);
    let recs = records(&out);
    let overflow: Vec<&Value> = recs.iter().filter(|r| r["error"]["type"] == "context_overflow").collect();
    assert!(!overflow.is_empty(), "{recs:?}\n{so}\n{se}");
    assert!(overflow[0]["error"]["message"].as_str().unwrap().contains("does not fit the server's context (8192)"), "{}", overflow[0]);
}

/// `sweep eval` against the llama.cpp server: 20 questions with a 128-token budget
/// (`--max-model-len 256`), two at a time.
fn eval_cmd(url: &str, out: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sweep"));
    c.args(["eval", "--url", url, "--limit", "20", "--max-model-len", "256", "--concurrency", "2", "--ready-timeout", "300"])
        .args(["--out", out.to_str().unwrap()]);
    c
}

fn sample_lines(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("samples.jsonl")).unwrap_or_default().lines().map(str::to_string).collect()
}

#[test]
#[ignore = "needs llama-cpp-python and a GGUF (scripts/llama/setup.sh; .ci/run)"]
fn llama_eval_asks_scores_and_resumes_after_a_kill_without_asking_again() {
    use harness::eval::{data, score};
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("llama.log");
    let server = Llama::start(&log);
    wait_until_up(&server.url);
    let out = tmp.path().join("eval");

    // The first run is killed (SIGKILL: no chance to clean up) once 5 answers are logged.
    let mut child = eval_cmd(&server.url, &out).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let t = std::time::Instant::now();
    while sample_lines(&out).len() < 5 {
        assert!(child.try_wait().unwrap().is_none(), "the eval ended before it was killed");
        assert!(t.elapsed().as_secs() < 600, "no 5 answers in 600 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = sample_lines(&out);
    assert!((5..20).contains(&before.len()), "{} answers logged before the kill", before.len());
    assert_eq!(read_json(&out.join("eval.json"))["status"], "interrupted");
    // A kill in the middle of a write leaves a torn last line.
    let mut f = std::fs::OpenOptions::new().append(true).open(out.join("samples.jsonl")).unwrap();
    f.write_all(&before[0].as_bytes()[..40]).unwrap();
    drop(f);

    let o = eval_cmd(&server.url, &out).output().unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    let after = sample_lines(&out);
    assert_eq!(after.len(), 20, "{so}\n{se}");
    assert_eq!(after[..before.len()], before[..], "the logged answers are kept as they were, the torn line dropped");
    let samples: Vec<Value> = after.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut ids: Vec<u64> = samples.iter().map(|s| s["doc_id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..20).collect::<Vec<_>>(), "each question answered once");
    // Every question went to the server once: two readiness requests, the 20 questions, and at
    // most the two in flight when the first run was killed (asked again by the second).
    let posts = std::fs::read_to_string(&log).unwrap().matches("\"POST /v1/chat/completions").count();
    assert!((22..=24).contains(&posts), "{posts} chat requests reached the server");

    // Real completions, scored as the scorer scores the logged responses.
    let d = data::embedded();
    let (mut strict, mut flexible) = (0.0, 0.0);
    for s in &samples {
        assert!(s["error"].is_null(), "{s}");
        assert!(s["completion_tokens"].as_u64().unwrap() > 0 && s["finish_reason"].is_string(), "{s}");
        let gold = &d.test[s["doc_id"].as_u64().unwrap() as usize].answer;
        let sc = score::score(s["response"].as_str().unwrap(), gold);
        assert_eq!(s["filtered_resps"]["strict-match"], sc.strict.as_str(), "{s}");
        assert_eq!(s["filtered_resps"]["flexible-extract"], sc.flexible.as_str(), "{s}");
        assert_eq!(
            (s["exact_match"]["strict-match"].as_f64(), s["exact_match"]["flexible-extract"].as_f64()),
            (Some(sc.strict_match), Some(sc.flexible_match))
        );
        strict += sc.strict_match;
        flexible += sc.flexible_match;
    }
    let rec = read_json(&out.join("eval.json"));
    assert_eq!((rec["status"].as_str(), rec["infrastructure_success"].as_bool()), (Some("done"), Some(true)), "{rec}");
    assert_eq!((rec["n"].as_u64(), rec["limit"].as_u64(), rec["n_total"].as_u64()), (Some(20), Some(20), Some(1319)));
    assert_eq!(rec["result_kind"], "measured");
    assert!(
        (rec["em_strict"].as_f64().unwrap() - strict / 20.0).abs() < 1e-12
            && (rec["em_flexible"].as_f64().unwrap() - flexible / 20.0).abs() < 1e-12
    );
    let results = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("results_"))
        .unwrap();
    let r = read_json(&results);
    assert_eq!(r["n-samples"]["gsm8k"], json!({"original": 1319, "effective": 20}));
    assert_eq!(r["config"]["limit"], 20.0, "a limited run says so, as lm-eval does");
    assert_eq!(r["results"]["gsm8k"]["exact_match,strict-match"].as_f64(), rec["em_strict"].as_f64());
    // A limited run is never a full-n pass.
    assert!(so.contains("gate FAIL: partial n: 20 of 1319"), "{so}");
}
