//! TTFT of a 500K-token chat request on the live server at time scale 1, per
//! tokenizer backend, side by side: a cold request (the whole conversation is
//! tokenised) and a warm one (the same conversation plus one new ~2K-token message,
//! through the incremental path).
//!
//! `cargo bench -p engine-server --bench server_ttft` (needs the DeepSeek-V4 tokenizer in
//! `SWEEP_SHARED_DATA`, default `../shared/data`; says so and exits when absent).

use std::time::Instant;

use engine_server::server::driver::{Core, CoreEvent, CoreRequest};
use engine_server::server::engine_core::EngineCore;
use engine_server::server::{ServeConfig, Server};
use std::sync::Arc;

use engine_server::tokenize::{
    Backend, ChatEncoder, ChatMessage, Role, TemplateFamily, Tokenizer, deepseek_v4_tokenizer_path, sample, shared_data_dir,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn body(messages: &[ChatMessage]) -> Vec<u8> {
    let msgs: Vec<serde_json::Value> =
        messages.iter().map(|m| serde_json::json!({"role": m.role.as_str(), "content": m.content})).collect();
    serde_json::json!({"model": "m", "messages": msgs, "stream": true, "ignore_eos": true,
                       "max_completion_tokens": 1})
    .to_string()
    .into_bytes()
}

/// Seconds from sending the request to the first SSE event.
async fn ttft(addr: std::net::SocketAddr, body: &[u8]) -> f64 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let t0 = Instant::now();
    s.write_all(&req).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        if seen.windows(6).any(|w| w == b"data: ") {
            let t = t0.elapsed().as_secs_f64();
            assert!(seen.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
            // Drain so the request finishes normally.
            let _ = s.read_to_end(&mut seen).await;
            return t;
        }
    }
}

/// DeepSeek-V4.1-Flash, Agg TP4 arm of the GB300 recipe (conc-4 point), on GB300.
const RECIPE: &[&str] = &[
    "--model-path",
    "deepseek-ai/DeepSeek-V4.1-Flash",
    "--tensor-parallel-size",
    "4",
    "--expert-parallel-size",
    "1",
    "--chunked-prefill-size",
    "16384",
    "--mem-fraction-static",
    "0.8",
    "--max-running-requests",
    "128",
    "--cuda-graph-max-bs-decode",
    "128",
];

fn engine_core() -> EngineCore {
    let argv: Vec<String> = RECIPE.iter().map(|s| s.to_string()).collect();
    EngineCore::from_args(&argv, &[], &Default::default(), None, "gb300", 42).unwrap()
}

fn main() {
    let Some(path) = deepseek_v4_tokenizer_path() else {
        eprintln!("shared data absent: no DeepSeek-V4 tokenizer under {}; nothing to measure", shared_data_dir().display());
        return;
    };
    let reference = Tokenizer::from_path(&path, Backend::Fastokens).unwrap();
    let convo = sample::conversation_of(7, 501_000, 8000, |t| reference.encode(t).unwrap().len());
    let mut warm = convo.clone();
    warm.push(ChatMessage::new(Role::User, sample::text(99, 6000)));
    let (cold_body, warm_body) = (body(&convo), body(&warm));
    // The engine's own first-token time for the last prompt after the earlier ones
    // ran to completion (so a warm prompt hits the prefix cache as on the server),
    // from the same engine on a virtual clock: TTFT minus this is the front end's cost.
    let enc = ChatEncoder::new(Arc::new(reference), TemplateFamily::DeepSeekV4, 1 << 30).unwrap();
    let ids = |m: &[ChatMessage]| enc.encode(m, &Default::default()).unwrap().ids;
    let (cold_ids, warm_ids) = (ids(&convo), ids(&warm));
    let (prompt, warm_prompt) = (cold_ids.len(), warm_ids.len());
    let engine_ttft = |prompts: &[&Vec<u32>]| -> f64 {
        let mut core = engine_core();
        let mut now = 0;
        let mut last = 0.0;
        for (i, p) in prompts.iter().enumerate() {
            let start = now;
            core.submit(
                now,
                CoreRequest {
                    id: i as u64 + 1,
                    input_ids: (*p).clone(),
                    max_new_tokens: Some(1),
                    ignore_eos: true,
                    eos_after: None,
                    dp_rank: None,
                    continuation_output: Vec::new(),
                },
            )
            .unwrap();
            let mut first = None;
            while let Some(t) = core.next_event_time() {
                now = t;
                for e in core.advance(t) {
                    if matches!(e, CoreEvent::Tokens { .. }) && first.is_none() {
                        first = Some(t);
                    }
                }
            }
            last = (first.expect("first token") - start) as f64 * 1e-9;
        }
        last
    };
    let (cold_engine, warm_engine) = (engine_ttft(&[&cold_ids]), engine_ttft(&[&cold_ids, &warm_ids]));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    assert!(prompt >= 500_000, "prompt has only {prompt} tokens");
    println!(
        "prompt: {prompt} tokens ({} bytes of JSON); engine first-token time {:.3} s (DSV4.1-Flash TP4 on GB300, predicted) at time scale 1",
        cold_body.len(),
        cold_engine
    );
    println!("warm prompt: {warm_prompt} tokens; engine first-token time {warm_engine:.3} s (prefix cached)");
    println!("| backend | cold TTFT (s) | cold TTFT − engine (s) | warm TTFT (s) | warm TTFT − engine (s) |");
    println!("|---|---|---|---|---|");
    for backend in [Backend::Fastokens, Backend::HuggingFace] {
        rt.block_on(async {
            let argv: Vec<String> = RECIPE
                .iter()
                .copied()
                .chain(["--port", "0", "--tokenizer-path", path.to_str().unwrap(), "--tokenizer-backend", &backend.to_string()])
                .map(|s| s.to_string())
                .collect();
            let (cfg, _) = ServeConfig::from_argv(&argv, |_| None).unwrap();
            let server = Server::start(cfg, engine_core()).await.unwrap();
            let cold = ttft(server.addr, &cold_body).await;
            let warm_t = ttft(server.addr, &warm_body).await;
            println!("| {backend} | {cold:.3} | {:.3} | {warm_t:.3} | {:.3} |", cold - cold_engine, warm_t - warm_engine);
            server.shutdown().await;
        });
    }
}
