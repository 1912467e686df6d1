//! TTFT of a 500K-token chat request on the live server at time scale 1, per
//! tokenizer backend, side by side: a cold request (the whole conversation is
//! tokenised) and a warm one (the same conversation plus one new ~2K-token message,
//! through the incremental path).
//!
//! `cargo bench -p engine --bench server_ttft` (needs the DeepSeek-V4 tokenizer in
//! `SWEEP_SHARED_DATA`, default `../shared/data`; says so and exits when absent).

use std::time::Instant;

use engine::server::simple_core::{SimpleConfig, SimpleCore};
use engine::server::{ServeConfig, Server};
use engine::tokenize::{
    Backend, ChatMessage, Role, TemplateFamily, Tokenizer, deepseek_v4_tokenizer_path, sample,
    shared_data_dir,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn body(messages: &[ChatMessage]) -> Vec<u8> {
    let msgs: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| serde_json::json!({"role": m.role.as_str(), "content": m.content}))
        .collect();
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
            assert!(
                seen.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&seen)
            );
            // Drain so the request finishes normally.
            let _ = s.read_to_end(&mut seen).await;
            return t;
        }
    }
}

fn main() {
    let Some(path) = deepseek_v4_tokenizer_path() else {
        eprintln!(
            "shared data absent: no DeepSeek-V4 tokenizer under {}; nothing to measure",
            shared_data_dir().display()
        );
        return;
    };
    let reference = Tokenizer::from_path(&path, Backend::Fastokens).unwrap();
    let convo = sample::conversation_of(7, 501_000, 8000, |t| reference.encode(t).unwrap().len());
    let prompt = reference
        .encode(&TemplateFamily::DeepSeekV4.render(&convo, &Default::default()))
        .unwrap()
        .len();
    let mut warm = convo.clone();
    warm.push(ChatMessage::new(Role::User, sample::text(99, 6000)));
    let warm_prompt = reference
        .encode(&TemplateFamily::DeepSeekV4.render(&warm, &Default::default()))
        .unwrap()
        .len();
    let (cold_body, warm_body) = (body(&convo), body(&warm));
    let core = SimpleConfig::default();
    let prefill = |tokens: usize| {
        (core.prefill_ns_fixed + tokens as u64 * core.prefill_ns_per_token) as f64 * 1e-9
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "prompt: {prompt} tokens ({} bytes of JSON); simulated prefill {:.3} s (cold) at time scale 1",
        cold_body.len(),
        prefill(prompt)
    );
    println!("| backend | cold TTFT (s) | cold TTFT − prefill (s) | warm TTFT (s) | warm TTFT − prefill (s) |");
    println!("|---|---|---|---|---|");
    for backend in [Backend::Fastokens, Backend::HuggingFace] {
        rt.block_on(async {
            let argv: Vec<String> = [
                "--port",
                "0",
                "--tokenizer-path",
                path.to_str().unwrap(),
                "--tokenizer-backend",
                &backend.to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let (cfg, _) = ServeConfig::from_argv(&argv, |_| None).unwrap();
            let server = Server::start(cfg, SimpleCore::new(core.clone()))
                .await
                .unwrap();
            let cold = ttft(server.addr, &cold_body).await;
            let warm_t = ttft(server.addr, &warm_body).await;
            println!(
                "| {backend} | {cold:.3} | {:.3} | {warm_t:.3} | {:.3} |",
                cold - prefill(prompt),
                warm_t - prefill(warm_prompt)
            );
            server.shutdown().await;
        });
    }
}
