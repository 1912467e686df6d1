//! The HTTP shell over loopback with raw sockets, under faults: the `sglang:` gauges once the
//! engine is idle.

use std::time::{Duration, Instant};

use engine::server::engine_core::EngineCore;
use engine::server::{ServeConfig, Server};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// DeepSeek-V4-Flash, TP8, H200, with `flags`.
async fn start(flags: &str) -> Server {
    let argv: Vec<String> =
        format!("--port 0 --model-path deepseek-ai/DeepSeek-V4-Flash --tp 8 {flags}").split_whitespace().map(String::from).collect();
    let (cfg, rest) = ServeConfig::from_argv(&argv, |_| None).unwrap();
    let core =
        EngineCore::from_args(&rest, &cfg.router_args, &Default::default(), cfg.engine_model.as_deref(), &cfg.hardware, cfg.seed).unwrap();
    Server::start(cfg, core).await.unwrap()
}

fn request(method: &str, path: &str, body: &str, close: bool) -> Vec<u8> {
    let conn = if close { "Connection: close\r\n" } else { "" };
    format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{conn}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response with a `Content-Length` body; returns its head and body.
async fn read_response(s: &mut TcpStream) -> (String, String) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length: ")).map_or(0, |v| v.trim().parse().unwrap());
            if raw.len() >= end + 4 + len {
                return (head, String::from_utf8_lossy(&raw[end + 4..end + 4 + len]).into_owned());
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await.expect("a response within 30 s").unwrap();
        assert!(n > 0, "closed before a full response: {:?}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
    }
}

async fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&request("GET", path, "", true)).await.unwrap();
    read_response(&mut s).await
}

fn chat(extra: Value) -> String {
    let mut v = json!({"model": "m", "messages": [{"role": "user", "content": "hello there"}]});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

/// The value of the metric line starting with `prefix` (name and labels).
fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gauges_fall_to_zero_once_the_engine_is_idle() {
    let s = start("--enable-metrics --time-scale 20").await;
    let a = s.addr;
    // Busy long enough for decode samples with running requests and throughput.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        tasks.push(tokio::spawn(async move {
            let mut c = TcpStream::connect(a).await.unwrap();
            let body = chat(json!({"max_tokens": 400, "ignore_eos": true}));
            c.write_all(&request("POST", "/v1/chat/completions", &body, true)).await.unwrap();
            read_response(&mut c).await.0
        }));
    }
    for t in tasks {
        assert!(t.await.unwrap().starts_with("http/1.1 200"));
    }
    let sched = "engine_type=\"unified\",model_name=\"deepseek-ai/DeepSeek-V4-Flash\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, m) = get(a, "/metrics").await;
        let vals: Vec<f64> = ["num_running_reqs", "num_queue_reqs", "gen_throughput", "token_usage", "num_used_tokens"]
            .iter()
            .map(|g| metric(&m, &format!("sglang:{g}{{{sched}}}")))
            .collect();
        if vals.iter().all(|v| *v == 0.0) {
            break;
        }
        assert!(Instant::now() < deadline, "gauges still {vals:?} 30 s after the last request");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.shutdown().await;
}
