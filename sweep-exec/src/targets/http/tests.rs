//! The HTTP target against the reference engine's real server, through both transports.

use super::clock::Clock;
use super::*;

/// The reference engine's real HTTP server in process (time-scaled), ready.
async fn engine_server() -> engine_server::server::Server {
    use engine_server::server::engine_core::EngineCore;
    let flags: Vec<String> =
        ["--model-path", "deepseek-ai/DeepSeek-V4.1-Flash", "--tp", "4", "--hardware", "gb300", "--port", "0", "--time-scale", "100"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let (cfg, rest) = engine_server::server::ServeConfig::from_argv(&flags, |_| None).unwrap();
    let core =
        EngineCore::from_args(&rest, &cfg.router_args, &Default::default(), cfg.engine_model.as_deref(), &cfg.hardware, cfg.seed).unwrap();
    let server = engine_server::server::Server::start(cfg, core).await.unwrap();
    let health = format!("http://{}/health", server.addr);
    for _ in 0..600 {
        if reqwest::get(&health).await.is_ok_and(|r| r.status().is_success()) {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the engine server did not become ready");
}

/// The same requests through this client's own HTTP/1.1 connections and through reqwest
/// (what `https://` targets use), bodies ready and built while the head is out: the same
/// records, and the connections are kept alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_transports_record_the_same_streams_from_the_engine_server() {
    use crate::workload::{TracePlan, Workload, WorkloadConfig, driver};
    let server = engine_server().await;
    let url = format!("http://{}", server.addr);
    let mut own = HttpTarget::new(&url, "").unwrap();
    let mut ctx = PointContext::default();
    own.identify(&mut ctx, None, &url).await.unwrap();
    assert!(own.h1.is_some(), "an http:// target has its own connections");
    let mut via_reqwest = own.clone();
    via_reqwest.h1 = None;
    let traces = crate::trace::synth::generate(3, 9);
    let plans: Vec<_> = traces.iter().map(|t| Arc::new(TracePlan::build(t, 1).unwrap())).collect();
    let cfg = WorkloadConfig { concurrency: 2, duration_ns: 600 * 1_000_000_000, warmup: false, ..Default::default() };
    let mut wl = Workload::new(cfg, plans).unwrap();
    let log = driver::drive(&mut wl, 0, |_| driver::Service { duration_ns: 1_000_000_000, failure: None }, |_, _| {});
    let clock = Clock::new(own.time_scale);
    for (n, r) in log.records.iter().take(6).enumerate() {
        let mut spec = r.spec.clone();
        spec.max_tokens = spec.max_tokens.min(40);
        let mut got = Vec::new();
        for t in [&own, &via_reqwest] {
            for later in [false, true] {
                let parts = t.body(&spec).parts;
                let body = if later { h1::Body::Later(Box::pin(async move { Ok(parts) })) } else { h1::Body::Ready(parts) };
                let touched = std::sync::atomic::AtomicU64::new(0);
                let (rec, f, uncounted) = t.send_body(&spec, body, crate::targets::record_for(&spec, 0), &touched, || clock.now()).await;
                assert!(f.is_none() && rec.error.is_none(), "request {n}: {:?}", rec.error);
                assert!(uncounted.is_none(), "the engine sends usage");
                assert!(touched.load(std::sync::atomic::Ordering::Relaxed) > 0, "each run of bytes is noted");
                assert!(rec.first_token_ns.is_some() && rec.server_ttft_ns.is_some(), "request {n}");
                got.push((rec.input_tokens, rec.output_tokens, rec.chunks));
            }
        }
        assert_eq!(got[0].1, Some(spec.max_tokens), "request {n}: ignore_eos runs to max_completion_tokens");
        assert!(got[0].0.unwrap() > 0 && got[0].2 > 0, "request {n}: {got:?}");
        assert!(got.iter().all(|g| *g == got[0]), "request {n}: {got:?}");
    }
    assert_eq!(own.h1.as_ref().unwrap().idle_connections(), 1, "one keep-alive connection served every request in turn");
    server.shutdown().await;
}
