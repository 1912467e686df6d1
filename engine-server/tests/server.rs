//! The HTTP shell over loopback: SGLang's stream and error shapes, bad requests as a
//! new user would send them, dropped connections, auth, endpoints, metrics, and
//! 1,000 concurrent streams.

use std::time::Duration;

use engine_server::server::engine_core::EngineCore;
use engine_server::server::{ServeConfig, Server};
use engine_server::tokenize::Tokenizer;
use serde_json::Value;
#[path = "common/http.rs"]
mod http;
use http::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const JSON: (&str, &str) = ("Content-Type", "application/json");

async fn post(addr: std::net::SocketAddr, body: &Value) -> Resp {
    http(addr, "POST", "/v1/chat/completions", &[JSON], body.to_string().as_bytes()).await
}

/// The engine as `sweep engine serve` builds it: DeepSeek-V4-Flash, TP8, H200.
async fn start_at(flags: &str) -> Server {
    let argv: Vec<String> =
        format!("--port 0 --model-path deepseek-ai/DeepSeek-V4-Flash --tp 8 {flags}").split_whitespace().map(String::from).collect();
    let (cfg, rest) = ServeConfig::from_argv(&argv, |_| None).unwrap();
    let core =
        EngineCore::from_args(&rest, &cfg.router_args, &Default::default(), cfg.engine_model.as_deref(), &cfg.hardware, cfg.seed).unwrap();
    Server::start(cfg, core).await.unwrap()
}

async fn start(flags: &str) -> Server {
    start_at(&format!("--time-scale 50 {flags}")).await
}

fn chat(content: &str, extra: Value) -> Value {
    let mut v = serde_json::json!({
        "model": "any-name",
        "messages": [{"role": "user", "content": content}],
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

async fn assert_serving(addr: std::net::SocketAddr) {
    let r = post(addr, &chat("still there?", serde_json::json!({"max_tokens": 3, "ignore_eos": true}))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["usage"]["completion_tokens"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_has_sglang_shape_and_exact_usage() {
    let s = start("").await;
    let r = post(
        s.addr,
        &chat(
            "Write a poem.",
            serde_json::json!({"stream": true, "ignore_eos": true, "max_completion_tokens": 28,
                               "stream_options": {"include_usage": true}}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let ev = r.events();
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = ev[..ev.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert_eq!(id.len(), 32);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    for c in &chunks {
        assert_eq!(c["id"], id);
        assert_eq!(c["created"], chunks[0]["created"]);
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "any-name");
    }
    // Key order of SGLang's encoder.
    assert!(ev[0].starts_with(r#"{"id":""#), "{}", ev[0]);
    assert!(
        ev[0].ends_with(r#""choices":[{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"matched_stop":null}]}"#),
        "{}",
        ev[0]
    );
    let n = chunks.len();
    let finish = &chunks[n - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    assert_eq!(finish["choices"][0]["matched_stop"], Value::Null);
    assert_eq!(finish["choices"][0]["delta"], serde_json::json!({"reasoning_content": null}));
    let usage = &chunks[n - 1];
    assert_eq!(usage["choices"], serde_json::json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 28);
    assert_eq!(usage["usage"]["prompt_tokens_details"], Value::Null);
    assert!(ev[n - 1].contains(r#""usage":{"prompt_tokens":"#), "{}", ev[n - 1]);
    let content: String = chunks[1..n - 2]
        .iter()
        .map(|c| {
            let d = &c["choices"][0]["delta"];
            assert!(d.as_object().unwrap().contains_key("reasoning_content"));
            assert_eq!(c["choices"][0]["finish_reason"], Value::Null);
            d["content"].as_str().unwrap().to_string()
        })
        .collect();
    // The text is the generated tokens: it re-encodes to exactly completion_tokens.
    assert_eq!(Tokenizer::builtin().encode(&content).unwrap().len(), 28);
    // Prompt: BOS, <｜User｜>, "Write a poem." (Wri te " a" " po" em .), <｜Assistant｜>, </think>.
    assert_eq!(usage["usage"]["prompt_tokens"], 10);
    s.shutdown().await;
}

/// Asked for engine times, the stream stamps each event with the engine time of its output
/// (`: t=<ns>` comments, which SSE clients skip) and the response names the arrival's engine time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_time_stamps_on_request() {
    let s = start("--enable-metrics").await;
    let body = chat("Write a poem.", serde_json::json!({"stream": true, "ignore_eos": true, "max_completion_tokens": 12}));
    let r = http(
        s.addr,
        "POST",
        "/v1/chat/completions",
        &[JSON, (engine_server::server::ENGINE_TIME_HEADER, "1")],
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let arrival: u64 = r.header(engine_server::server::ARRIVAL_HEADER).expect("arrival header").parse().unwrap();
    let (mut stamps, mut data) = (Vec::new(), 0);
    for event in r.text().split("\n\n").filter(|e| !e.is_empty()) {
        for line in event.lines() {
            if let Some(t) = line.strip_prefix(": t=") {
                stamps.push(t.parse::<u64>().unwrap());
            } else {
                assert!(line.starts_with("data: "), "{line:?}");
                data += 1;
            }
        }
    }
    // One stamp per scheduler output (DeepSeek-V4-Flash decodes one token a step here) plus the finish.
    assert!(stamps.len() >= 2 && stamps.len() <= 13, "{stamps:?}");
    assert!(data > stamps.len(), "{data} data lines");
    // The prefill takes engine time; every later output comes a decode step later; the finish last.
    assert!(stamps[0] > arrival, "first output at {} ≤ arrival {arrival}", stamps[0]);
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    assert!(stamps[1..stamps.len() - 1].windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    // Without the request header the same request streams SGLang's frames only.
    let r = post(s.addr, &body).await;
    assert!(r.header(engine_server::server::ARRIVAL_HEADER).is_none());
    assert!(r.events().len() > 2);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_natural_stop_min_tokens_and_stop_strings() {
    let s = start("--mean-output-tokens 4 --enable-cache-report").await;
    let r = post(s.addr, &chat("hi", serde_json::json!({"max_tokens": 5000}))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    let c = &v["choices"][0];
    assert_eq!(c["finish_reason"], "stop");
    assert_eq!(c["matched_stop"], 1, "EOS id of the built-in vocabulary");
    assert_eq!(c["message"]["role"], "assistant");
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() < 5000);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(v["metadata"]["weight_version"], "default");
    // min_tokens holds the stop back.
    let r = post(s.addr, &chat("hi", serde_json::json!({"max_tokens": 500, "min_tokens": 60}))).await;
    assert!(r.json()["usage"]["completion_tokens"].as_u64().unwrap() >= 60);
    // A stop string: generated words are " xyz" pieces; stop on a space.
    let r = post(s.addr, &chat("hi", serde_json::json!({"max_tokens": 50, "ignore_eos": true, "stop": [" "]}))).await;
    let v = r.json();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][0]["matched_stop"], " ");
    assert_eq!(v["choices"][0]["message"]["content"], "");
    assert_serving(s.addr).await;
    s.shutdown().await;
}

/// A bad request, what SGLang answers it with: (what, reply, status, error type, message part).
type BadCase = (&'static str, Resp, u16, &'static str, &'static str);

/// Bodies SGLang cannot read as a chat request.
async fn shape_errors(a: std::net::SocketAddr) -> Vec<BadCase> {
    vec![
        (
            "invalid JSON",
            http(a, "POST", "/v1/chat/completions", &[JSON], b"{\"messages\": [").await,
            400,
            "Bad Request",
            "JSON decode error",
        ),
        (
            "wrong field type",
            post(a, &serde_json::json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"})).await,
            400,
            "Bad Request",
            "invalid type",
        ),
        ("messages not a list", post(a, &serde_json::json!({"messages": "hello"})).await, 400, "Bad Request", "invalid type"),
        ("missing messages", post(a, &serde_json::json!({"model": "m"})).await, 400, "Bad Request", "missing field `messages`"),
        ("empty messages", post(a, &serde_json::json!({"messages": []})).await, 400, "BadRequestError", "Messages cannot be empty."),
        (
            "negative max_tokens",
            post(a, &chat("x", serde_json::json!({"max_tokens": -1}))).await,
            400,
            "BadRequestError",
            "max_tokens must be at least 1",
        ),
    ]
}

/// Readable requests with values SGLang refuses (limits, ranges, media type, size).
async fn value_errors(a: std::net::SocketAddr) -> Vec<BadCase> {
    vec![
        (
            "huge max_tokens",
            post(a, &chat("x", serde_json::json!({"max_tokens": 100000000}))).await,
            400,
            "BadRequestError",
            "max_completion_tokens is too large",
        ),
        (
            "prompt plus completion over context",
            post(a, &chat("x", serde_json::json!({"max_completion_tokens": 4095}))).await,
            400,
            "BadRequestError",
            "Requested token count exceeds the model's maximum context length of 4096 tokens.",
        ),
        (
            "prompt over context",
            post(a, &chat(&" wor".repeat(5000), serde_json::json!({}))).await,
            400,
            "BadRequestError",
            "The input (5004 tokens) is longer than the model's context length (4096 tokens).",
        ),
        (
            "negative data_parallel_rank",
            post(a, &chat("x", serde_json::json!({"data_parallel_rank": -1}))).await,
            400,
            "BadRequestError",
            "data_parallel_rank -1 is out of range",
        ),
        (
            "data_parallel_rank beyond u32",
            post(a, &chat("x", serde_json::json!({"data_parallel_rank": 1u64 << 40}))).await,
            400,
            "BadRequestError",
            "data_parallel_rank 1099511627776 is out of range",
        ),
        (
            "form content type",
            http(a, "POST", "/v1/chat/completions", &[("Content-Type", "application/x-www-form-urlencoded")], b"a=b").await,
            400,
            "Bad Request",
            "Unsupported Media Type: Only 'application/json' is allowed",
        ),
        (
            "100 MB body",
            http(a, "POST", "/v1/chat/completions", &[JSON], &vec![b' '; 100 << 20]).await,
            413,
            "413",
            "Request body too large",
        ),
        ("unsupported n", post(a, &chat("x", serde_json::json!({"n": 3}))).await, 400, "BadRequestError", "n must be 1"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_sglang_errors_and_the_server_keeps_serving() {
    let s = start("--context-length 4096 --max-request-body-mb 8").await;
    let a = s.addr;
    let mut cases = shape_errors(a).await;
    cases.extend(value_errors(a).await);
    for (what, r, status, kind, msg) in cases {
        assert_eq!(r.status, status, "{what}: {}", r.text());
        let v = r.json();
        assert_eq!(v["object"], "error", "{what}");
        assert_eq!(v["type"], kind, "{what}: {v}");
        assert_eq!(v["code"], status, "{what}");
        assert_eq!(v["param"], Value::Null, "{what}");
        assert!(v["message"].as_str().unwrap().contains(msg), "{what}: {v}");
        assert_serving(a).await;
    }
    // A streaming request rejected before its first chunk gets a real status too.
    let r = post(a, &chat(&" wor".repeat(5000), serde_json::json!({"stream": true}))).await;
    assert_eq!(r.status, 400);
    // Unknown routes and models.
    let r = http(a, "GET", "/v1/models/nope", &[], b"").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    assert_eq!(r.json()["error"]["message"], "The model 'nope' does not exist");
    assert_serving(a).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_required_when_set() {
    let s = start("--api-key sekret").await;
    let body = chat("hi", serde_json::json!({"max_tokens": 2})).to_string();
    let r = http(s.addr, "POST", "/v1/chat/completions", &[JSON], body.as_bytes()).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"], "Unauthorized");
    let r = http(s.addr, "POST", "/v1/chat/completions", &[JSON, ("Authorization", "Bearer wrong")], body.as_bytes()).await;
    assert_eq!(r.status, 401);
    let r = http(s.addr, "POST", "/v1/chat/completions", &[JSON, ("Authorization", "Bearer sekret")], body.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // /server_info does not echo the key (launch command, flag records).
    assert_eq!(http(s.addr, "GET", "/server_info", &[], b"").await.status, 401);
    let info = http(s.addr, "GET", "/server_info", &[("Authorization", "Bearer sekret")], b"").await;
    assert_eq!(info.status, 200);
    assert!(!info.text().contains("sekret") && info.text().contains("<redacted>"), "{}", info.text());
    // Probes stay open.
    assert_eq!(http(s.addr, "GET", "/health", &[], b"").await.status, 200);
    assert_eq!(http(s.addr, "GET", "/v1/models", &[], b"").await.status, 401);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_stream_aborts_the_request() {
    // Real time: a 100K-token reply streams for minutes unless aborted.
    let s = start_at("--enable-metrics").await;
    let body = chat("long one", serde_json::json!({"stream": true, "ignore_eos": true, "max_tokens": 100000})).to_string();
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    sock.write_all(&request_bytes("POST", "/v1/chat/completions", &[JSON], body.as_bytes())).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("\"role\":\"assistant\"") {
        let n = sock.read(&mut buf).await.unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    // SGLang refuses to flush while a request runs: an observable "is it running".
    assert_eq!(http(s.addr, "POST", "/flush_cache", &[], b"").await.status, 400);
    drop(sock);
    let mut status = 400;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        status = http(s.addr, "POST", "/flush_cache", &[], b"").await.status;
        if status == 200 {
            break;
        }
    }
    assert_eq!(status, 200, "the engine still runs the dropped request");
    assert!(
        http(s.addr, "GET", "/metrics", &[], b"")
            .await
            .text()
            .contains("sglang:num_aborted_requests_total{model_name=\"deepseek-ai/DeepSeek-V4-Flash\",engine_type=\"unified\"} 1")
    );
    assert_serving(s.addr).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_full_is_503() {
    let s = start_at("--max-running-requests 1 --max-queued-requests 1").await;
    let long = chat("a", serde_json::json!({"ignore_eos": true, "max_tokens": 300}));
    let a = s.addr;
    let (l1, l2) = (long.clone(), long.clone());
    let h1 = tokio::spawn(async move { post(a, &l1).await.status });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let h2 = tokio::spawn(async move { post(a, &l2).await.status });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let r = post(a, &long).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["message"], "The request queue is full.");
    assert_eq!(r.json()["type"], "503");
    assert_eq!(h1.await.unwrap(), 200);
    assert_eq!(h2.await.unwrap(), 200);
    assert_serving(a).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_and_metrics() {
    let s = start("--enable-metrics --served-model-name my-model --time-scale 20").await;
    let a = s.addr;
    let r = http(a, "GET", "/v1/models", &[], b"").await;
    assert!(r.text().starts_with(r#"{"object":"list","data":[{"id":"my-model","object":"model","created":"#), "{}", r.text());
    assert_eq!(r.json()["data"][0]["owned_by"], "sglang");
    assert_eq!(r.json()["data"][0]["max_model_len"], 1048576);
    assert_eq!(http(a, "GET", "/v1/models/my-model", &[], b"").await.status, 200);
    assert_eq!(http(a, "GET", "/health", &[], b"").await.status, 200);
    assert_eq!(http(a, "GET", "/health_generate", &[], b"").await.status, 200);
    let info = http(a, "GET", "/server_info", &[], b"").await.json();
    assert_eq!(info["time_scale"], 20.0);
    assert_eq!(info["served_model_name"], "my-model");
    assert_eq!(info["status"], "ready");
    assert_eq!(info["tokenizer_backend"], "builtin");
    assert!(info["internal_states"].is_array());
    let alias = http(a, "GET", "/get_server_info", &[], b"").await.json();
    assert_eq!(alias["launch_command"], info["launch_command"]);
    assert_eq!(http(a, "POST", "/flush_cache", &[], b"").await.status, 200);
    let r = post(a, &chat("count me", serde_json::json!({"ignore_eos": true, "max_tokens": 7, "stream": true}))).await;
    assert_eq!(r.status, 200);
    let m = http(a, "GET", "/metrics", &[], b"").await.text();
    for name in [
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:num_used_tokens",
        "sglang:token_usage",
        "sglang:gen_throughput",
        "sglang:cache_hit_rate",
        "sglang:spec_accept_length",
        "sglang:spec_accept_rate",
        "sglang:num_retracted_reqs",
        "sglang:utilization",
        "sglang:is_cuda_graph",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:cached_tokens_total",
        "sglang:num_requests_total",
        "sglang:num_aborted_requests_total",
        "sglang:time_to_first_token_seconds_bucket",
        "sglang:inter_token_latency_seconds_bucket",
        "sglang:e2e_request_latency_seconds_bucket",
        "sglang:queue_time_seconds_bucket",
    ] {
        assert!(m.contains(name), "{name} missing in\n{m}");
    }
    assert!(m.contains("# TYPE sglang:time_to_first_token_seconds histogram"));
    assert!(m.contains("# TYPE sglang:num_running_reqs gauge"));
    assert!(m.contains("# TYPE sglang:prompt_tokens counter"));
    assert!(m.contains("sglang:generation_tokens_total{model_name=\"my-model\",engine_type=\"unified\",is_streaming=\"true\"} 7"));
    let ttft_bounds: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("sglang:time_to_first_token_seconds_bucket"))
        .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect();
    assert_eq!(ttft_bounds.len(), 19, "18 bounds + Inf: {ttft_bounds:?}");
    assert_eq!(ttft_bounds[0], "0.1");
    assert_eq!(ttft_bounds[18], "+Inf");
    assert!(m.contains("tp_rank=\"0\""));
    s.shutdown().await;

    // Without --enable-metrics there is no /metrics.
    let s = start("").await;
    assert_eq!(http(s.addr, "GET", "/metrics", &[], b"").await.status, 404);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_streams() {
    let s = start_at("--time-scale 20 --max-running-requests 1024").await;
    let a = s.addr;
    let mut tasks = Vec::new();
    for i in 0..1000 {
        tasks.push(tokio::spawn(async move {
            let r = post(
                a,
                &chat(
                    &format!("stream {i}"),
                    serde_json::json!({"stream": true, "ignore_eos": true, "max_tokens": 16,
                                       "stream_options": {"include_usage": true}}),
                ),
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.text());
            let ev = r.events();
            assert_eq!(ev.last().unwrap(), "[DONE]");
            let usage: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
            usage["usage"]["completion_tokens"].as_u64().unwrap()
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 16_000);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_turn_hits_the_cached_reply() {
    let s = start("--enable-cache-report").await;
    let question: String = " lorem ipsum dolor sit amet".repeat(120);
    let r1 = post(s.addr, &chat(&question, serde_json::json!({"max_tokens": 600, "ignore_eos": true}))).await.json();
    let p1 = r1["usage"]["prompt_tokens"].as_u64().unwrap();
    let reply = r1["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    let turn2 = serde_json::json!({
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "and then?"},
        ],
        "max_tokens": 4,
        "ignore_eos": true,
    });
    let r2 = post(s.addr, &turn2).await.json();
    let p2 = r2["usage"]["prompt_tokens"].as_u64().unwrap();
    let cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    // The reply re-encodes to the ids the engine produced, so the cache covers the
    // first turn's prompt *and* its output (page-aligned, 256 for DeepSeek-V4).
    // reply + EOS + <｜User｜> "and then?" (4) + <｜Assistant｜></think>
    assert_eq!(p2, p1 + 600 + 1 + 1 + 4 + 2);
    assert!(cached > p1, "cached {cached} <= first prompt {p1}");
    assert_eq!(cached, (p1 + 600) / 256 * 256);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_055_chunk_shape_on_request() {
    let s = start("--sglang-compat 0.5.5").await;
    let r = post(s.addr, &chat("hi", serde_json::json!({"stream": true, "ignore_eos": true, "max_tokens": 2}))).await;
    let ev = r.events();
    assert!(
        ev[0].ends_with(r#""choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#),
        "{}",
        ev[0]
    );
    for e in &ev[..ev.len() - 1] {
        let v: Value = serde_json::from_str(e).unwrap();
        assert!(v.as_object().unwrap().contains_key("usage"), "{e}");
        let d = v["choices"][0]["delta"].as_object().unwrap();
        assert!(d.contains_key("role") && d.contains_key("content") && d.contains_key("reasoning_content"), "{e}");
    }
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_command_is_shell_quoted_and_splits_back_to_the_argv() {
    let argv: Vec<String> =
        ["--port", "0", "--model-path", "deepseek-ai/DeepSeek-V4-Flash", "--tp", "8", "--served-model-name", "my model; rm -rf x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let (cfg, rest) = ServeConfig::from_argv(&argv, |_| None).unwrap();
    let core =
        EngineCore::from_args(&rest, &cfg.router_args, &Default::default(), cfg.engine_model.as_deref(), &cfg.hardware, cfg.seed).unwrap();
    let s = Server::start(cfg, core).await.unwrap();
    let info = http(s.addr, "GET", "/server_info", &[], b"").await.json();
    let cmd = info["launch_command"].as_str().unwrap();
    assert!(cmd.contains("'my model; rm -rf x'"), "{cmd}");
    assert_eq!(shlex::split(cmd).unwrap(), argv);
}
