//! The HTTP shell against hostile clients and faults, over loopback with raw sockets: slow-loris
//! heads and bodies, idle keep-alive connections, the connection cap's 503, a thousand idle
//! connections, clients that disconnect mid-reply (and how the `sglang:` metrics record it), and
//! the gauges once the engine is idle. Timeouts are set short through the server's flags; every
//! time bound asserted is many times the configured one.

use std::time::{Duration, Instant};

use engine_server::server::engine_core::EngineCore;
use engine_server::server::{ServeConfig, Server};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// DeepSeek-V4-Flash, TP8, H200, with `flags`.
async fn start(flags: &str) -> Server {
    start_with_env(flags, &[]).await
}

/// As [`start`], with `env` as the server's `SGLANG_*` environment.
async fn start_with_env(flags: &str, env: &[(&str, &str)]) -> Server {
    let argv: Vec<String> =
        format!("--port 0 --model-path deepseek-ai/DeepSeek-V4-Flash --tp 8 {flags}").split_whitespace().map(String::from).collect();
    let (cfg, rest) = ServeConfig::from_argv(&argv, |k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())).unwrap();
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

/// Waits until the server closes `s` (EOF or reset), reading and discarding; the time it took,
/// or `None` if it stayed open for `limit`.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let mut buf = [0u8; 4096];
    while t0.elapsed() < limit {
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(t0.elapsed()),
            Ok(Ok(_)) | Err(_) => {}
        }
    }
    None
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

async fn assert_serving(addr: std::net::SocketAddr) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&request("POST", "/v1/chat/completions", &chat(json!({"max_tokens": 3, "ignore_eos": true})), true)).await.unwrap();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("http/1.1 200"), "{head}\n{body}");
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
async fn a_head_sent_byte_by_byte_is_cut_off_at_the_header_read_timeout() {
    let s = start("--header-read-timeout 1 --keep-alive-timeout 60").await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"GET /v1/models HTTP/1.1\r\nX-Slow: ").await.unwrap();
    let t0 = Instant::now();
    let mut closed = false;
    // One byte of a header value every 100 ms, for 30 s: only the header timeout can end this.
    for _ in 0..300 {
        if c.write_all(b"x").await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 256];
        match tokio::time::timeout(Duration::from_millis(100), c.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            _ => {}
        }
    }
    assert!(closed, "a 1 s header timeout left a dripping head open for {:?}", t0.elapsed());
    assert_serving(s.addr).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_gets_408_and_the_connection_closes() {
    let s = start("--body-read-timeout 1 --keep-alive-timeout 60").await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    let head = "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n";
    c.write_all(head.as_bytes()).await.unwrap();
    c.write_all(br#"{"messages": ["#).await.unwrap();
    let (head, body) = read_response(&mut c).await;
    assert!(head.starts_with("http/1.1 408"), "{head}\n{body}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(body.contains("--body-read-timeout"), "{body}");
    assert!(closed_within(&mut c, Duration::from_secs(20)).await.is_some(), "the connection stayed open after the 408");
    assert_serving(s.addr).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let s = start("--keep-alive-timeout 3").await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    // Requests on one connection, a pause well inside the timeout between them: it is kept alive.
    for _ in 0..3 {
        c.write_all(&request("GET", "/v1/models", "", false)).await.unwrap();
        let (head, _) = read_response(&mut c).await;
        assert!(head.starts_with("http/1.1 200"), "{head}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(closed_within(&mut c, Duration::from_secs(30)).await.is_some(), "an idle keep-alive connection stayed open for 30 s");
    // A connection that never sends anything is idle too.
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(30)).await.is_some(), "a silent connection stayed open for 30 s");
    assert_serving(s.addr).await;
    s.shutdown().await;
}

/// Recipes raise SGLang's keep-alive (`SGLANG_TIMEOUT_KEEP_ALIVE`) so that a router's pooled
/// connection is never closed under it; the default (5 s) would close this one, and so would a
/// header read timeout that also ran between requests (2 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_timeout_keep_alive_keeps_an_idle_connection_past_the_default() {
    let s = start_with_env("--header-read-timeout 2", &[("SGLANG_TIMEOUT_KEEP_ALIVE", "900")]).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(&request("GET", "/v1/models", "", false)).await.unwrap();
    let (head, _) = read_response(&mut c).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(closed_within(&mut c, Duration::from_secs(7)).await, None, "closed before the 900 s keep-alive");
    c.write_all(&request("GET", "/v1/models", "", false)).await.unwrap();
    let (head, _) = read_response(&mut c).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_get_503_while_the_open_ones_keep_serving() {
    let s = start("--max-connections 4 --keep-alive-timeout 60").await;
    let mut open = Vec::new();
    for _ in 0..4 {
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        // A full exchange: the server has certainly counted this connection.
        c.write_all(&request("GET", "/v1/models", "", false)).await.unwrap();
        assert!(read_response(&mut c).await.0.starts_with("http/1.1 200"));
        open.push(c);
    }
    let mut extra = TcpStream::connect(s.addr).await.unwrap();
    let _ = extra.write_all(&request("GET", "/v1/models", "", false)).await;
    let (head, body) = read_response(&mut extra).await;
    assert!(head.starts_with("http/1.1 503 service unavailable"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["code"], 503);
    assert!(err["message"].as_str().unwrap().contains("--max-connections"), "{body}");
    assert!(closed_within(&mut extra, Duration::from_secs(20)).await.is_some(), "the refused connection stayed open");
    // The open connections are still served.
    for c in &mut open {
        c.write_all(&request("POST", "/v1/chat/completions", &chat(json!({"max_tokens": 2, "ignore_eos": true})), false)).await.unwrap();
        let (head, body) = read_response(c).await;
        assert!(head.starts_with("http/1.1 200"), "{head}\n{body}");
    }
    // Once one closes, a new connection is served again.
    drop(open.pop());
    let t0 = Instant::now();
    loop {
        let (head, _) = get(s.addr, "/v1/models").await;
        if head.starts_with("http/1.1 200") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "still refused 20 s after a connection closed: {head}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_connections_do_not_block_new_requests() {
    let s = start("--keep-alive-timeout 120 --time-scale 20").await;
    // The server raised this process's soft open-file limit as far as SGLang does.
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    assert_eq!(lim.rlim_cur, lim.rlim_max.min(65_535));
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(TcpStream::connect(s.addr).await.unwrap());
    }
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(&request("POST", "/v1/chat/completions", &chat(json!({"max_tokens": 8, "ignore_eos": true})), true)).await.unwrap();
    let (head, body) = read_response(&mut c).await;
    assert!(head.starts_with("http/1.1 200"), "{head}\n{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 8);
    drop(idle);
    s.shutdown().await;
}

/// A long streamed reply read until `tokens` tokens have arrived, then the client holds the
/// connection for `hold` and disconnects; returns the tokens it saw and the time from the first
/// response bytes to the disconnect (which the request's server-side latency contains).
async fn stream_then_disconnect(addr: std::net::SocketAddr, tokens: u64, hold: Duration) -> (u64, Duration) {
    let body = chat(json!({"stream": true, "ignore_eos": true, "max_tokens": 100000,
                           "stream_options": {"include_usage": true, "continuous_usage_stats": true}}));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(&request("POST", "/v1/chat/completions", &body, true)).await.unwrap();
    let (mut seen, mut text, mut buf, mut first) = (0u64, String::new(), [0u8; 8192], None);
    while seen < tokens {
        let n = tokio::time::timeout(Duration::from_secs(60), c.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0);
        first.get_or_insert_with(Instant::now);
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        for part in text.split("\"completion_tokens\":").skip(1) {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            seen = seen.max(digits.parse().unwrap_or(0));
        }
    }
    tokio::time::sleep(hold).await;
    drop(c);
    (seen, first.unwrap().elapsed())
}

/// The metrics once an abort is recorded. A scrape is no snapshot (it may read a counter before
/// a request's record and a later one after it): the abort counter is written last, and the
/// scrape after the one that shows it has the whole record.
async fn after_abort(addr: std::net::SocketAddr, labels: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, m) = get(addr, "/metrics").await;
        if metric(&m, &format!("sglang:num_aborted_requests_total{{{labels}}}")) >= 1.0 {
            return get(addr, "/metrics").await.1;
        }
        assert!(Instant::now() < deadline, "no abort recorded 30 s after the disconnect:\n{m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_stream_is_an_abort_with_its_tokens_and_latency() {
    // Real time: the 100K-token reply would stream for minutes unless aborted.
    let s = start("--enable-metrics").await;
    let (seen, held) = stream_then_disconnect(s.addr, 20, Duration::from_millis(500)).await;
    let held = held.as_secs_f64();
    let labels = "model_name=\"deepseek-ai/DeepSeek-V4-Flash\",engine_type=\"unified\"";
    let m = after_abort(s.addr, labels).await;
    assert_eq!(metric(&m, &format!("sglang:num_aborted_requests_total{{{labels}}}")), 1.0);
    // A finished request like any other, under its own streaming label.
    assert_eq!(metric(&m, &format!("sglang:num_requests_total{{{labels},is_streaming=\"true\"}}")), 1.0);
    assert_eq!(metric(&m, &format!("sglang:num_requests_total{{{labels},is_streaming=\"false\"}}")), 0.0);
    let generated = metric(&m, &format!("sglang:generation_tokens_total{{{labels},is_streaming=\"true\"}}"));
    assert!(generated >= seen as f64 && seen >= 20, "generation tokens {generated}, the client saw {seen}");
    assert_eq!(metric(&m, &format!("sglang:generation_tokens_histogram_sum{{{labels}}}")), generated);
    // Its latency runs until the abort: at least as long as the client held the connection.
    let e2e = metric(&m, &format!("sglang:e2e_request_latency_seconds_sum{{{labels}}}"));
    assert!(e2e >= held, "e2e {e2e} s, but the client read the stream for {held} s");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_before_a_json_reply_is_an_abort_under_is_streaming_false() {
    let s = start("--enable-metrics").await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(&request("POST", "/v1/chat/completions", &chat(json!({"ignore_eos": true, "max_tokens": 100000})), true)).await.unwrap();
    // The engine runs it once the cache cannot be flushed.
    let t0 = Instant::now();
    while get(s.addr, "/flush_cache").await.0.starts_with("http/1.1 200") {
        assert!(t0.elapsed() < Duration::from_secs(30), "the request never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(c);
    let labels = "model_name=\"deepseek-ai/DeepSeek-V4-Flash\",engine_type=\"unified\"";
    let m = after_abort(s.addr, labels).await;
    assert_eq!(metric(&m, &format!("sglang:num_requests_total{{{labels},is_streaming=\"false\"}}")), 1.0);
    assert_eq!(metric(&m, &format!("sglang:num_requests_total{{{labels},is_streaming=\"true\"}}")), 0.0);
    assert!(metric(&m, &format!("sglang:generation_tokens_total{{{labels},is_streaming=\"false\"}}")) > 0.0, "{m}");
    assert_serving(s.addr).await;
    s.shutdown().await;
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
