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
        let ours = harness::targets::http::templated_prompt_tokens(&r.spec.prompt, engine::tokenize::TemplateFamily::DeepSeekV4);
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
