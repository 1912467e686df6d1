//! The engine's OpenAI-compatible HTTP shell (axum), in real time, answering with
//! SGLang 0.5.23's bytes: `/v1/chat/completions` and `/v1/completions` (SSE and JSON),
//! `/v1/models`, `/health`, `/server_info`, `/model_info`, `/metrics`, `/flush_cache`.
//!
//! Layout: [`args`] reads the front-end flags, [`driver`] owns the sans-IO core on a
//! thread and maps wall time to engine time, [`pool`] runs tokenisation off the event
//! loop, [`api`] parses and validates requests, [`completions`] is the text-completions
//! endpoint over the chat path's machinery, [`metrics`] is the `sglang:` set;
//! `listen` accepts connections under a cap and `conn` serves one with its timeouts,
//! [`drain`] stops the server on a signal, `sys` holds the OS settings (open-file limit,
//! heap trim).

pub mod api;
pub mod args;
pub mod completions;
mod conn;
pub mod drain;
pub mod driver;
pub mod engine_core;
mod listen;
pub mod metrics;
mod pool;
mod stream;
mod sys;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use api::ApiError;
pub use args::ServeConfig;
pub use drain::{DrainReport, shutdown_signal};
pub use driver::{Core, CoreError, CoreEvent, CoreFinish, CoreRequest, CoreStats, Driver};
pub use stream::{ARRIVAL_HEADER, ENGINE_TIME_HEADER};

use crate::tokenize::{ChatEncoder, Tokenizer};
use listen::{Conns, Phase};
use metrics::Metrics;
use pool::Pool;

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot bind {addr}: {source}; pick another --port or --host")]
    Bind { addr: String, source: std::io::Error },
    #[error(transparent)]
    Tokenizer(#[from] crate::tokenize::TokenizeError),
    #[error("server I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Shared state of all handlers.
pub struct AppState {
    pub(crate) cfg: ServeConfig,
    ready: AtomicBool,
    encoder: OnceLock<Arc<ChatEncoder>>,
    pool: Pool,
    pub(crate) driver: Driver,
    pub(crate) metrics: Option<Metrics>,
    next_id: AtomicU64,
    /// Chat and text-completion requests seen, for `--fail-fraction`.
    fault_seq: AtomicU64,
    pub(crate) created: u64,
    started: Instant,
    startup_secs: OnceLock<f64>,
    /// Chat and text-completion requests being answered (the streams a drain waits for).
    pub(crate) active: AtomicUsize,
    pub(crate) phase: watch::Sender<Phase>,
    conns: Arc<Conns>,
}

impl AppState {
    pub(crate) fn context_length(&self) -> u64 {
        let core = self.driver.stats().context_length;
        match (self.cfg.context_length, core) {
            (Some(c), 0) => c,
            (Some(c), k) => c.min(k),
            (None, 0) => 1_048_576,
            (None, k) => k,
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    state: Arc<AppState>,
    /// The accept loop; it ends when the server starts draining.
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds, starts serving (health answers 503 until ready), loads the tokenizer on
    /// a worker, then marks the server ready.
    pub async fn start<C: Core>(cfg: ServeConfig, core: C) -> Result<Server, ServeError> {
        let addr = format!("{}:{}", cfg.host, cfg.port);
        let listener = TcpListener::bind(&addr).await.map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener.local_addr()?;
        let nofile = sys::raise_nofile_limit();
        let max_connections = cfg.max_connections.unwrap_or_else(|| listen::default_max_connections(nofile));
        let timeouts =
            conn::Timeouts { header_read: cfg.header_read_timeout, body_read: cfg.body_read_timeout, keep_alive: cfg.keep_alive_timeout };
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let driver = Driver::start(core, cfg.time_scale);
        let metrics = cfg.enable_metrics.then(|| {
            let m = Metrics::new(&cfg.served_model_name);
            m.init(&driver.stats());
            m
        });
        let state = Arc::new(AppState {
            pool: Pool::new(cfg.tokenizer_worker_num),
            cfg,
            ready: AtomicBool::new(false),
            encoder: OnceLock::new(),
            driver,
            metrics,
            next_id: AtomicU64::new(1),
            fault_seq: AtomicU64::new(0),
            created,
            started: Instant::now(),
            startup_secs: OnceLock::new(),
            active: AtomicUsize::new(0),
            phase: watch::Sender::new(Phase::Serving),
            conns: Arc::new(Conns::default()),
        });
        let app = router(state.clone());
        let task =
            tokio::spawn(listen::accept_loop(listener, app, timeouts, max_connections, state.conns.clone(), state.phase.subscribe()));
        let server = Server { addr, state: state.clone(), task };
        let cfg = state.cfg.clone();
        let encoder = state
            .pool
            .run(move || -> Result<ChatEncoder, crate::tokenize::TokenizeError> {
                let tok = match &cfg.tokenizer_path {
                    Some(p) => Tokenizer::from_path(p, cfg.tokenizer_backend)?,
                    None => Tokenizer::builtin(),
                };
                ChatEncoder::new(Arc::new(tok), cfg.chat_template, cfg.tokenizer_cache_bytes)
            })
            .await
            .expect("tokenizer worker alive")?;
        let _ = state.encoder.set(Arc::new(encoder));
        let _ = state.startup_secs.set(state.started.elapsed().as_secs_f64());
        state.ready.store(true, Ordering::Release);
        Ok(server)
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Stops accepting, lets open responses finish for the drain timeout, stops the engine
    /// thread (see [`Server::drain`]).
    pub async fn shutdown(self) {
        let grace = self.drain_timeout();
        self.drain(grace).await;
    }
}

fn router(state: Arc<AppState>) -> Router {
    let limit = state.cfg.max_body_bytes;
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions::completions))
        .route("/v1/models", get(models))
        .route("/v1/models/{*id}", get(model_card))
        .route("/health", get(health))
        .route("/health_generate", get(health))
        .route("/ready", get(ready))
        .route("/server_info", get(server_info))
        .route("/get_server_info", get(server_info))
        .route("/model_info", get(model_info))
        .route("/get_model_info", get(model_info))
        .route("/flush_cache", get(flush_cache).post(flush_cache))
        .route("/metrics", get(metrics_endpoint))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

/// When a request's head arrived, before its body was read: under a time scale the start of the
/// server's latency, and the hold that keeps the engine at that instant until it is submitted.
#[derive(Clone)]
struct Arrived(Instant, Option<Arc<driver::Hold>>);

async fn auth(State(st): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let now = Instant::now();
    let generates = matches!(req.uri().path(), "/v1/chat/completions" | "/v1/completions");
    let hold = (st.cfg.time_scale != 1.0 && generates).then(|| Arc::new(st.driver.hold(now)));
    req.extensions_mut().insert(Arrived(now, hold));
    if let Some(key) = &st.cfg.api_key {
        let path = req.uri().path();
        // SGLang leaves health and metrics open to probes.
        let open = path.starts_with("/health") || path.starts_with("/metrics");
        let ok = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).is_some_and(|v| v == format!("Bearer {key}"));
        if !open && !ok {
            return (StatusCode::UNAUTHORIZED, [(header::CONTENT_TYPE, "application/json")], r#"{"error":"Unauthorized"}"#).into_response();
        }
    }
    next.run(req).await
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], r#"{"detail":"Not Found"}"#).into_response()
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

#[derive(serde::Serialize)]
struct ModelCard<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'static str,
    root: &'a str,
    parent: Option<()>,
    max_model_len: u64,
}

#[derive(serde::Serialize)]
struct ModelList<'a> {
    object: &'static str,
    data: Vec<ModelCard<'a>>,
}

async fn models(State(st): State<Arc<AppState>>) -> Response {
    let body = ModelList { object: "list", data: vec![card(&st)] };
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], serde_json::to_string(&body).unwrap_or_default()).into_response()
}

fn card(st: &AppState) -> ModelCard<'_> {
    ModelCard {
        id: &st.cfg.served_model_name,
        object: "model",
        created: st.created,
        owned_by: "sglang",
        root: &st.cfg.served_model_name,
        parent: None,
        max_model_len: st.context_length(),
    }
}

async fn model_card(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    if id == st.cfg.served_model_name {
        return (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], serde_json::to_string(&card(&st)).unwrap_or_default())
            .into_response();
    }
    json_response(
        StatusCode::NOT_FOUND,
        &json!({"error": {
            "message": format!("The model '{id}' does not exist"),
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }}),
    )
}

async fn ready(State(st): State<Arc<AppState>>) -> StatusCode {
    if st.ready.load(Ordering::Acquire) { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }
}

async fn health(State(st): State<Arc<AppState>>) -> StatusCode {
    if !st.ready.load(Ordering::Acquire) {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let generate = std::env::var("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION")
        .map(|v| !matches!(v.to_ascii_lowercase().as_str(), "0" | "false"))
        .unwrap_or(true);
    if !generate {
        return StatusCode::OK;
    }
    let timeout = std::env::var("SGLANG_HEALTH_CHECK_TIMEOUT").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(20.0);
    // A one-token generation from input id 0, as SGLang's health check does.
    let id = st.next_id();
    let req = CoreRequest {
        id,
        input_ids: vec![0],
        max_new_tokens: Some(1),
        ignore_eos: true,
        eos_after: None,
        dp_rank: None,
        continuation_output: Vec::new(),
    };
    let Ok(mut rx) = st.driver.submit(req).await else {
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    match tokio::time::timeout(Duration::from_secs_f64(timeout), rx.recv()).await {
        Ok(Some(driver::ReqEvent::Failed(_))) | Ok(None) => StatusCode::SERVICE_UNAVAILABLE,
        Ok(Some(_)) => {
            st.driver.abort(id);
            StatusCode::OK
        }
        Err(_) => {
            st.driver.abort(id);
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

async fn server_info(State(st): State<Arc<AppState>>) -> Response {
    let core = st.driver.server_info().await;
    let stats = st.driver.stats();
    let c = &st.cfg;
    let mut v = json!({
        "model_path": c.model_path,
        "served_model_name": c.served_model_name,
        "host": c.host,
        "port": c.port,
        "tokenizer_path": c.tokenizer_path.as_ref().map(|p| p.display().to_string()),
        "tokenizer_backend": c.tokenizer_backend.to_string(),
        "tokenizer_worker_num": c.tokenizer_worker_num,
        "chat_template": c.chat_template.to_string(),
        "context_length": st.context_length(),
        "enable_metrics": c.enable_metrics,
        "enable_cache_report": c.enable_cache_report,
        "stream_response_default_include_usage": c.stream_default_usage,
        "reasoning_parser": c.reasoning_parser,
        "random_seed": c.seed,
        "time_scale": c.time_scale,
        "time_scale_note": format!(
            "engine time runs {}x faster than wall time; latencies seen by clients are scaled down by that factor",
            c.time_scale
        ),
        // Shell-quoted, so it can be pasted back into a shell.
        "launch_command": shlex::try_join(c.launch_command.iter().map(String::as_str)).unwrap_or_else(|_| c.launch_command.join(" ")),
        "status": if st.ready.load(Ordering::Acquire) { "ready" } else { "starting" },
        "max_total_num_tokens": stats.max_total_num_tokens,
        "max_req_input_len": stats.max_req_input_len,
        "startup_time": st.startup_secs.get().copied(),
        "version": "0.5.23",
        "frontend": "python",
        "engine": "sweep reference engine (simulated: timings are predicted, not measured)",
    });
    if let (Some(obj), Value::Object(core)) = (v.as_object_mut(), core) {
        for (k, val) in core {
            obj.entry(k).or_insert(val);
        }
        if !obj.contains_key("internal_states") {
            obj.insert(
                "internal_states".into(),
                json!([{
                    "last_gen_throughput": stats.gen_throughput,
                    "avg_spec_accept_length": stats.spec_accept_length,
                    "max_total_num_tokens": stats.max_total_num_tokens,
                }]),
            );
        }
        if let Some(enc) = st.encoder.get() {
            let s = enc.stats();
            obj.insert(
                "tokenizer_memo".into(),
                json!({"entries": s.entries, "bytes": s.bytes, "budget_bytes": s.budget_bytes,
                       "hits": s.hits, "misses": s.misses, "evictions": s.evictions}),
            );
        }
    }
    let mut body = v.to_string();
    // The launch command and flag records would echo the API key.
    if let Some(key) = st.cfg.api_key.as_deref().filter(|k| !k.is_empty()) {
        // Replace the key as it appears inside JSON strings (escaped).
        let escaped = serde_json::to_string(key).unwrap_or_default();
        let inner = &escaped[1..escaped.len().saturating_sub(1).max(1)];
        body = body.replace(inner, "<redacted>");
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn model_info(State(st): State<Arc<AppState>>) -> Response {
    let c = &st.cfg;
    json_response(
        StatusCode::OK,
        &json!({
            "model_path": c.model_path,
            "served_model_name": c.served_model_name,
            "tokenizer_path": c.tokenizer_path.as_ref().map(|p| p.display().to_string()),
            "is_generation": true,
            "weight_version": "default",
            "reasoning_parser": c.reasoning_parser,
            "tool_call_parser": null,
            "model_type": if c.chat_template == crate::tokenize::TemplateFamily::ChatMl { "chatml" } else { "deepseek_v4" },
            "architectures": ["DeepseekV4ForCausalLM"],
        }),
    )
}

async fn flush_cache(State(st): State<Arc<AppState>>) -> Response {
    if st.driver.flush_cache().await {
        if let Some(e) = st.encoder.get() {
            e.clear();
        }
        (StatusCode::OK, "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n").into_response()
    } else {
        (StatusCode::BAD_REQUEST, "Cache not flushed: there are running or waiting requests.\n").into_response()
    }
}

async fn metrics_endpoint(State(st): State<Arc<AppState>>) -> Response {
    match &st.metrics {
        None => not_found().await,
        Some(m) => {
            m.set_core(&st.driver.stats());
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], m.render())
                .into_response()
        }
    }
}

async fn chat(
    State(st): State<Arc<AppState>>,
    arrived: Option<axum::Extension<Arrived>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (arrived, hold) = arrived.map(|a| (a.0.0, a.0.1)).unwrap_or_else(|| (Instant::now(), None));
    chat_inner(st, headers, body, arrived, hold).await.unwrap_or_else(error_response)
}

/// A generation request's error as a response.
fn error_response(e: ApiError) -> Response {
    let mut r = e.into_response();
    // The rest of a body that timed out may never come: the connection cannot be reused.
    if r.status() == StatusCode::REQUEST_TIMEOUT {
        r.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    r
}

/// Whether the server takes a generation request now: not while starting or draining, and not when
/// `--fail-fraction` picks it for an injected fault.
fn admit(st: &AppState) -> Result<(), ApiError> {
    if *st.phase.borrow() != Phase::Serving {
        return Err(ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The server is shutting down."));
    }
    if !st.ready.load(Ordering::Acquire) {
        return Err(ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The server is starting; retry when /health returns 200."));
    }
    let f = st.cfg.fail_fraction;
    if f > 0.0 {
        let n = st.fault_seq.fetch_add(1, Ordering::Relaxed);
        let n = n.checked_sub(st.cfg.fail_after).map(|n| n as f64);
        if let Some(n) = n
            && ((n + 1.0) * f).floor() > (n * f).floor()
        {
            return Err(ApiError::internal("injected fault (--fail-fraction)"));
        }
    }
    Ok(())
}

async fn chat_inner(
    st: Arc<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    arrived: Instant,
    hold: Option<Arc<driver::Hold>>,
) -> Result<Response, ApiError> {
    admit(&st)?;
    let body = json_body(&st, &headers, body)?;
    let encoder = st.encoder.get().expect("ready implies encoder").clone();
    // Parsing a multi-megabyte body is CPU work too: do it on the tokenizer pool.
    let parsed = st
        .pool
        .run(move || -> Result<_, ApiError> {
            let req = api::parse_chat(&body)?;
            let messages = api::convert_messages(&req)?;
            Ok((req, messages))
        })
        .await
        .ok_or_else(|| ApiError::internal("tokenizer worker failed"))??;
    let (req, messages) = parsed;
    // In real time the request's latencies start here, where SGLang's handler stamps its
    // `received_time`: after the body is read and parsed, before the template and tokenization.
    // Under a time scale the engine keeps the head's arrival (the front end takes no engine time).
    let arrived = if st.cfg.time_scale == 1.0 { Instant::now() } else { arrived };
    let limits = api::Limits { context_length: st.context_length(), context_length_set: st.cfg.context_length.is_some() };
    let params = api::validate_params(&req, limits)?;
    let thinking = req
        .chat_template_kwargs
        .as_ref()
        .and_then(|k| k.get("thinking").or_else(|| k.get("enable_thinking")))
        .and_then(Value::as_bool)
        .unwrap_or(st.cfg.default_thinking);
    let tools = req.tools.as_ref().filter(|t| !t.is_empty()).map(|t| {
        let mut s = String::from("## Tools\n\n");
        for tool in t {
            s.push_str(&tool.to_string());
            s.push('\n');
        }
        s
    });
    let opts = crate::tokenize::ChatOptions { thinking, tools };
    let enc = encoder.clone();
    let encoded = st
        .pool
        .run(move || enc.encode(&messages, &opts))
        .await
        .ok_or_else(|| ApiError::internal("tokenizer worker failed"))?
        .map_err(ApiError::internal)?;
    let prompt_tokens = encoded.ids.len() as u64;
    api::validate_length(prompt_tokens, &params, limits)?;
    let stamps = headers.contains_key(stream::ENGINE_TIME_HEADER);
    stream::run(st, req, params, encoded.ids, encoder, stream::Api::Chat { thinking }, arrived, hold, stamps).await
}

/// A generation request's JSON body, or the error SGLang gives for a wrong content type, a body
/// that is too large or one that did not arrive in time.
fn json_body(st: &AppState, headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/json"));
    if !is_json {
        return Err(ApiError::schema("Unsupported Media Type: Only 'application/json' is allowed"));
    }
    body.map_err(|e| {
        if conn::is_body_timeout(&e) {
            let secs = st.cfg.body_read_timeout.as_secs_f64();
            ApiError::status(StatusCode::REQUEST_TIMEOUT, format!("The request body did not arrive within {secs} s (--body-read-timeout)."))
        } else if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::status(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Request body too large: the limit is {} bytes (raise it with --max-request-body-mb).", st.cfg.max_body_bytes),
            )
        } else {
            ApiError::schema(format!("Cannot read the request body: {e}"))
        }
    })
}

/// `Body` from a stream of SSE frames (used by [`stream`]).
pub(crate) fn sse_body<S>(s: S) -> Body
where
    S: futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
{
    Body::from_stream(s)
}
