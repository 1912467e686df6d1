//! `POST /v1/completions` over loopback: InferenceX's fixed-length benchmark body streamed in
//! SGLang's `text_completion` shape, token-id prompts, the non-streaming answer, bad inputs, and
//! a dropped stream aborting its request.

use std::time::Duration;

use engine_server::server::engine_core::EngineCore;
use engine_server::server::{ServeConfig, Server};
use engine_server::tokenize::Tokenizer;
use serde_json::{Value, json};
#[path = "common/http.rs"]
mod http;
use http::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const JSON: (&str, &str) = ("Content-Type", "application/json");

async fn complete(addr: std::net::SocketAddr, body: &Value) -> Resp {
    http(addr, "POST", "/v1/completions", &[JSON], body.to_string().as_bytes()).await
}

/// The engine as `sweep engine serve` builds it: DeepSeek-V4-Flash, TP8, H200, in real time.
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

/// Exactly what InferenceX's `async_request_openai_completions` sends with `ignore_eos`.
fn inferencex_body(prompt: &str, max_tokens: u64) -> Value {
    json!({
        "model": "deepseek-ai/DeepSeek-V4-Flash",
        "prompt": prompt,
        "temperature": 0.0,
        "best_of": 1,
        "max_tokens": max_tokens,
        "logprobs": null,
        "stream": true,
        "stream_options": {"include_usage": true},
        "ignore_eos": true,
    })
}

fn count(text: &str) -> u64 {
    Tokenizer::builtin().encode(text).unwrap().len() as u64
}

/// Both endpoints still answer.
async fn assert_serving(addr: std::net::SocketAddr) {
    let r = complete(addr, &json!({"prompt": "still there?", "max_tokens": 3, "ignore_eos": true})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["usage"]["completion_tokens"], 3);
    let chat = json!({"messages": [{"role": "user", "content": "and chat?"}], "max_tokens": 2, "ignore_eos": true});
    let r = http(addr, "POST", "/v1/chat/completions", &[JSON], chat.to_string().as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["object"], "chat.completion");
}

/// The stream's JSON chunks (all but `[DONE]`), checking what every chunk shares.
fn chunks(r: &Resp) -> Vec<Value> {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let ev = r.data_events();
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = ev[..ev.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let id = chunks[0]["id"].as_str().unwrap();
    assert_eq!(id.len(), 32);
    for c in &chunks {
        assert_eq!(c["id"], id);
        assert_eq!(c["object"], "text_completion");
        assert_eq!(c["created"], chunks[0]["created"]);
        assert_eq!(c["model"], chunks[0]["model"]);
    }
    chunks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inferencex_stream_has_sglang_shape_and_exact_usage() {
    let s = start("--enable-metrics").await;
    let prompt = "The quick brown fox jumps over the lazy dog. ".repeat(20);
    let r = complete(s.addr, &inferencex_body(&prompt, 64)).await;
    let chunks = chunks(&r);
    assert_eq!(chunks[0]["model"], "deepseek-ai/DeepSeek-V4-Flash");
    let ev = r.data_events();
    // SGLang's key order; `usage` is written as null on content chunks.
    assert!(ev[0].starts_with(r#"{"id":""#), "{}", ev[0]);
    assert!(ev[0].contains(r#","object":"text_completion","created":"#), "{}", ev[0]);
    assert!(ev[0].ends_with(r#","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#), "{}", ev[0]);
    // The first chunk with choices (InferenceX's TTFT) already carries text.
    assert!(!chunks[0]["choices"][0]["text"].as_str().unwrap().is_empty(), "{}", ev[0]);
    let n = chunks.len();
    let content = &chunks[..n - 1];
    let last = &content[content.len() - 1]["choices"][0];
    assert_eq!(last["finish_reason"], "length");
    assert_eq!(last["matched_stop"], Value::Null);
    assert!(!last["text"].as_str().unwrap().is_empty(), "the finish rides on the last text");
    let mut text = String::new();
    for (i, c) in content.iter().enumerate() {
        let choices = c["choices"].as_array().unwrap();
        assert_eq!(choices.len(), 1);
        assert_eq!(choices[0]["index"], 0);
        assert_eq!(choices[0]["logprobs"], Value::Null);
        assert!(c.as_object().unwrap().contains_key("usage") && c["usage"].is_null());
        if i + 1 < content.len() {
            assert_eq!(choices[0]["finish_reason"], Value::Null);
        }
        text.push_str(choices[0]["text"].as_str().unwrap());
    }
    assert_eq!(count(&text), 64, "the text is the generated tokens");
    let usage = &chunks[n - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 64);
    // No chat template: the prompt's own tokens only.
    let prompt_tokens = count(&prompt);
    assert_eq!(usage["usage"]["prompt_tokens"], prompt_tokens);
    assert_eq!(usage["usage"]["total_tokens"], prompt_tokens + 64);
    assert_eq!(usage["usage"]["prompt_tokens_details"], Value::Null);
    let m = http(s.addr, "GET", "/metrics", &[], b"").await.text();
    assert!(m.contains(
        "sglang:generation_tokens_total{model_name=\"deepseek-ai/DeepSeek-V4-Flash\",engine_type=\"unified\",is_streaming=\"true\"} 64"
    ));
    assert!(
        m.contains(&format!(
            "sglang:prompt_tokens_total{{model_name=\"deepseek-ai/DeepSeek-V4-Flash\",engine_type=\"unified\",is_streaming=\"true\"}} {prompt_tokens}.0"
        )),
        "{m}"
    );
    assert_serving(s.addr).await;
    s.shutdown().await;
}

/// `--stream-interval` groups tokens into chunks; the engine-time stamps precede each event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_interval_and_engine_time_stamps() {
    let s = start("--stream-interval 8 --enable-cache-report").await;
    let body = inferencex_body("Count to thirty-two.", 32).to_string();
    let r = http(s.addr, "POST", "/v1/completions", &[JSON, (engine_server::server::ENGINE_TIME_HEADER, "1")], body.as_bytes()).await;
    let chunks = chunks(&r);
    let arrival: u64 = r.header(engine_server::server::ARRIVAL_HEADER).expect("arrival header").parse().unwrap();
    let content = &chunks[..chunks.len() - 1];
    // Each text chunk is stamped with the engine time of its output (the usage chunk and
    // `[DONE]` follow the last one unstamped, as on the chat path).
    let text = r.text();
    let stamps: Vec<u64> = text.lines().filter_map(|l| l.strip_prefix(": t=")).map(|t| t.parse().unwrap()).collect();
    assert_eq!(stamps.len(), content.len(), "{text}");
    assert!(stamps[0] > arrival && stamps.windows(2).all(|w| w[0] <= w[1]), "{arrival} {stamps:?}");
    // The first token alone, then groups of 8 (the last group ends the reply).
    assert!(content.len() >= 2 && content.len() <= 5, "{} chunks", content.len());
    let text: String = content.iter().map(|c| c["choices"][0]["text"].as_str().unwrap()).collect();
    assert_eq!(count(&text), 32);
    let usage = &chunks[chunks.len() - 1]["usage"];
    assert_eq!(usage["completion_tokens"], 32);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_id_and_list_prompts() {
    let s = start("").await;
    let ids: Vec<u32> = Tokenizer::builtin().encode("Once upon a time").unwrap();
    for prompt in [json!(ids), json!([ids]), json!(["Once upon a time"])] {
        let r = complete(s.addr, &json!({"prompt": prompt, "max_tokens": 5, "ignore_eos": true})).await;
        assert_eq!(r.status, 200, "{prompt}: {}", r.text());
        let v = r.json();
        assert_eq!(v["usage"]["prompt_tokens"], ids.len(), "{prompt}");
        assert_eq!(v["usage"]["completion_tokens"], 5, "{prompt}");
    }
    // Ids are taken as they are, markers included (no template is added around them).
    let r = complete(s.addr, &json!({"prompt": [0, 1, 2, 3, 4, 5, 6], "max_tokens": 2, "ignore_eos": true, "stream": true})).await;
    let chunks = chunks(&r);
    assert_eq!(chunks.last().unwrap()["usage"], Value::Null, "no usage chunk unless asked");
    let r = complete(s.addr, &json!({"prompt": [0, 1, 2, 3, 4, 5, 6], "max_tokens": 2, "ignore_eos": true})).await;
    assert_eq!(r.json()["usage"]["prompt_tokens"], 7);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_completion() {
    let s = start("--mean-output-tokens 4").await;
    let r = complete(s.addr, &json!({"model": "m", "prompt": "Write a poem.", "max_tokens": 20, "ignore_eos": true})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.text().starts_with(r#"{"id":""#), "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["model"], "m");
    assert_eq!(v["metadata"]["weight_version"], "default");
    let c = &v["choices"][0];
    assert_eq!(v["choices"].as_array().unwrap().len(), 1);
    assert_eq!(c["index"], 0);
    assert_eq!(c["finish_reason"], "length");
    assert_eq!(c["matched_stop"], Value::Null);
    assert_eq!(c["logprobs"], Value::Null);
    assert_eq!(count(c["text"].as_str().unwrap()), 20);
    assert_eq!(v["usage"]["completion_tokens"], 20);
    assert_eq!(v["usage"]["prompt_tokens"], count("Write a poem."));
    // max_tokens defaults to 16.
    let r = complete(s.addr, &json!({"prompt": "Write a poem.", "ignore_eos": true})).await;
    assert_eq!(r.json()["usage"]["completion_tokens"], 16);
    // Without ignore_eos the reply ends on its own: "stop" at the EOS id, streamed or not.
    let r = complete(s.addr, &json!({"prompt": "hi", "max_tokens": 5000})).await;
    let v = r.json();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][0]["matched_stop"], 1, "EOS id of the built-in vocabulary");
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() < 5000);
    let r = complete(s.addr, &json!({"prompt": "hi", "max_tokens": 5000, "stream": true})).await;
    let chunks = chunks(&r);
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
    // A stop string ends the reply with the text before it.
    let r = complete(s.addr, &json!({"prompt": "hi", "max_tokens": 50, "ignore_eos": true, "stop": [" "]})).await;
    let v = r.json();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][0]["matched_stop"], " ");
    assert_eq!(v["choices"][0]["text"], "");
    assert_serving(s.addr).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_400_and_the_server_keeps_serving() {
    let s = start("--context-length 4096").await;
    let a = s.addr;
    let long = " wor".repeat(5000);
    let with = |extra: Value| {
        let mut v = inferencex_body("Hello", 8);
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        ("best_of 2", with(json!({"best_of": 2})), "BadRequestError", "best_of must be 1"),
        ("logprobs 5", with(json!({"logprobs": 5})), "BadRequestError", "logprobs are not supported by the reference engine"),
        ("missing prompt", json!({"model": "m", "max_tokens": 4}), "Bad Request", "missing field `prompt`"),
        (
            "prompt over context",
            with(json!({"prompt": long})),
            "BadRequestError",
            "The input (5000 tokens) is longer than the model's context length (4096 tokens).",
        ),
        (
            "prompt plus max_tokens over context",
            with(json!({"max_tokens": 4095})),
            "BadRequestError",
            "Requested token count exceeds the model's maximum context length of 4096 tokens.",
        ),
        ("empty prompt", with(json!({"prompt": ""})), "BadRequestError", "Prompt cannot be empty"),
        ("batch of prompts", with(json!({"prompt": ["a", "b"]})), "BadRequestError", "send 2 requests instead"),
        ("prompt of wrong type", with(json!({"prompt": 7})), "Bad Request", "prompt: expected a string"),
        ("token id out of vocabulary", with(json!({"prompt": [1, 4000000000u32]})), "BadRequestError", "out of range"),
        ("n 2", with(json!({"n": 2})), "BadRequestError", "n must be 1"),
        ("max_tokens 0", with(json!({"max_tokens": 0})), "BadRequestError", "max_tokens must be at least 1"),
        ("echo", with(json!({"echo": true})), "BadRequestError", "echo is not supported"),
    ];
    for (what, body, kind, msg) in cases {
        let r = complete(a, &body).await;
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        let v = r.json();
        assert_eq!(v["object"], "error", "{what}");
        assert_eq!(v["type"], kind, "{what}: {v}");
        assert_eq!(v["code"], 400, "{what}");
        assert_eq!(v["param"], Value::Null, "{what}");
        assert!(v["message"].as_str().unwrap().contains(msg), "{what}: {v}");
        assert_serving(a).await;
    }
    let r = http(a, "POST", "/v1/completions", &[JSON], b"{\"prompt\": ").await;
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().starts_with("JSON decode error"));
    let r = http(a, "POST", "/v1/completions", &[("Content-Type", "text/plain")], b"hi").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "Unsupported Media Type: Only 'application/json' is allowed");
    assert_serving(a).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_stream_aborts_the_request() {
    // Real time: a 100K-token reply streams for minutes unless aborted.
    let s = start_at("--enable-metrics").await;
    let body = inferencex_body("long one", 100_000).to_string();
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    sock.write_all(&request_bytes("POST", "/v1/completions", &[JSON], body.as_bytes())).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("\"text_completion\"") {
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
    let m = http(s.addr, "GET", "/metrics", &[], b"").await.text();
    assert!(m.contains("sglang:num_aborted_requests_total{model_name=\"deepseek-ai/DeepSeek-V4-Flash\",engine_type=\"unified\"} 1"), "{m}");
    assert_serving(s.addr).await;
    s.shutdown().await;
}
