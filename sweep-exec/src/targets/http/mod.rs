//! The HTTP target: the same [`Workload`] driven in real time against an OpenAI-compatible
//! `/v1/chat/completions` endpoint with a streaming reqwest client.
//!
//! Each request carries the full conversation, `stream: true`, `max_completion_tokens`,
//! `ignore_eos`, `stream_options.include_usage` and `X-Correlation-ID` (built by
//! [`RequestSpec::http_body`]). Timestamps are Unix nanoseconds: start, response headers (ack),
//! first non-empty content or reasoning chunk, last output chunk, end of body. Token counts come
//! from the final `usage` object only, never from chunks. HTTP errors, `error` events inside the
//! stream, dropped connections and timeouts become record errors; an overflow message becomes
//! `context_overflow` (terminal for the session, as AgentX defines it).

mod chunk;
mod clock;
mod connect;
mod count;
pub use count::templated_prompt_tokens;
pub mod h1;
mod info;
mod replay;
mod runner;
mod send;
mod stream;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::body::{BodyPieces, MessageCache};
use super::dialect::Dialect;
use crate::metrics::PointContext;
use crate::prompt::{TokenText, WordVocab};
use crate::targets::pools::PoolError;
use crate::targets::sim::SimError;
use crate::workload::{RequestSpec, TracePlan, Workload, WorkloadError};

pub use connect::{ClientOptions, READY_TIMEOUT, STALL_TIMEOUT};
pub use replay::{LiveRun, replay};
pub use runner::HttpRunner;
pub use stream::{Answer, Uncounted};

/// Why a live replay could not start against a server.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// A small request (`/v1/models`) failed.
    #[error("{url}: {}", describe(.source))]
    Info { url: String, source: reqwest::Error },
    #[error("{url}: no model listed")]
    NoModel { url: String },
    #[error("the server at {url} was not ready within {secs:.0} s (last: {last}); check its log, or raise --ready-timeout")]
    NotReady { url: String, secs: f64, last: String },
    #[error("synthesis tokenizer {}: {message}", .path.display())]
    Tokenizer { path: PathBuf, message: String },
    /// No trace fits the server's context length.
    #[error(transparent)]
    Context(#[from] SimError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Fixed(#[from] crate::targets::fixed::FixedPointError),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// A request error a user can act on: what failed at the bottom of the chain, and the likely fix
/// for the common cases (nothing listening, no answer).
pub fn describe(e: &reqwest::Error) -> String {
    let mut chain = vec![e.to_string()];
    let mut src = std::error::Error::source(e);
    let mut refused = false;
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        chain.push(s.to_string());
        src = s.source();
    }
    chain.dedup();
    if refused {
        return "connection refused: nothing listens there; start the server, or check the URL and port".into();
    }
    if e.is_timeout() {
        return format!("{}: the server did not answer in time; is it still starting, or overloaded?", chain.join(": "));
    }
    chain.join(": ")
}

/// An OpenAI-compatible server.
#[derive(Clone)]
pub struct HttpTarget {
    client: reqwest::Client,
    /// `http://host:port` (no trailing slash).
    pub base_url: String,
    pub model: String,
    /// Synthesis vocabulary (set by [`HttpTarget::identify`]).
    pub vocab: Arc<dyn TokenText>,
    /// The server's engine time runs this many times faster than wall time (its
    /// `/server_info.time_scale`; 1 for a real engine).
    pub time_scale: f64,
    /// Base URLs whose `/metrics` are scraped every second during the point (default: this server).
    pub metrics_urls: Vec<String>,
    /// The server's context length (`/server_info` `context_length` / `max_req_input_len`), set by
    /// [`HttpTarget::identify`]: traces that do not fit are left out, as on the virtual clock.
    pub context_length: Option<u64>,
    /// Serialized messages of recent turns, reused by the next turns of their conversations.
    messages: Arc<MessageCache>,
    /// The chat requests' own HTTP/1.1 connections for an `http://` target (see [`h1`]); `None`:
    /// through reqwest (`https://`).
    h1: Option<Arc<h1::Client>>,
    /// A chat request running longer (wall time) ends as a `timeout` error. [`replay`] enforces
    /// it from its 200-ms tick rather than with a client-wide timeout, which polls a timer on
    /// every streamed chunk.
    pub request_timeout: Duration,
    /// A stream silent for this long ends as a `stall` error (checked from the same tick).
    pub stall_timeout: Duration,
    /// How request bodies are written for this server.
    pub dialect: Arc<Dialect>,
    /// The server's tokenizer, to count outputs it sends no `usage` for (set by
    /// [`HttpTarget::identify`] from a `tokenizer.json` or the reference engine's vocabulary).
    pub counter: Option<Arc<dyn TokenText>>,
    /// The server has sent `usage`: replies stop keeping their text for counting.
    usage_seen: Arc<std::sync::atomic::AtomicBool>,
}

/// How long one chat request may run (wall time) by default before it is recorded as a `timeout`:
/// agentic turns can run for many minutes.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// How long a new connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Timeout of the small requests (`/v1/models`, `/server_info`).
const INFO_TIMEOUT: Duration = Duration::from_secs(60);

impl HttpTarget {
    /// A pooled keep-alive client (no client-wide timeout: see [`REQUEST_TIMEOUT`]).
    pub fn new(base_url: &str, model: &str) -> Result<Self, HttpError> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(4096)
            .tcp_nodelay(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(HttpError::Client)?;
        let base_url = base_url.trim_end_matches('/').to_string();
        let h1 = h1::Client::for_url(&base_url, CONNECT_TIMEOUT).map(Arc::new);
        Ok(HttpTarget {
            client,
            metrics_urls: vec![base_url.clone()],
            base_url,
            model: model.to_string(),
            vocab: Arc::new(WordVocab::default()),
            time_scale: 1.0,
            context_length: None,
            messages: Arc::new(MessageCache::default()),
            h1,
            request_timeout: REQUEST_TIMEOUT,
            stall_timeout: STALL_TIMEOUT,
            dialect: Arc::new(Dialect::default()),
            counter: None,
            usage_seen: Arc::default(),
        })
    }

    /// A workload over the traces that fit the server's context (AgentX `--max-context-length`,
    /// the whole-trace filter the virtual clock applies too); the note goes into `ctx.trace_set`.
    pub fn workload(
        &self,
        cfg: crate::workload::WorkloadConfig,
        pool: &[Arc<TracePlan>],
        ctx: &mut PointContext,
    ) -> Result<Workload, HttpError> {
        let pool = match self.context_length {
            Some(c) => {
                let (fit, note) = crate::targets::sim::fit_pool(pool, c)?;
                if let Some(n) = note {
                    ctx.trace_set = format!("{} ({n})", ctx.trace_set);
                }
                fit
            }
            None => pool.to_vec(),
        };
        Ok(Workload::new(cfg, pool)?)
    }

    /// The request body (prompt synthesis of the messages not sent before: CPU work of
    /// milliseconds for a long new message).
    pub fn body(&self, spec: &RequestSpec) -> BodyPieces {
        match spec.source_kind {
            crate::workload::SourceKind::Random => {
                let body = crate::targets::body::fixed_body(spec, &self.model, self.vocab.as_ref(), &self.dialect);
                BodyPieces { len: body.len(), parts: vec![body.into()] }
            }
            _ => crate::targets::body::BodyPieces::of(spec, &self.model, self.vocab.as_ref(), &self.messages, &self.dialect),
        }
    }

    /// The fixed-length workload against this server: refused before anything is sent when its
    /// longest request cannot fit the server's context; the aggregate's parameters into `ctx`.
    pub fn fixed_workload(
        &self,
        cfg: crate::workload::fixed::FixedConfig,
        ctx: &mut PointContext,
    ) -> Result<crate::workload::fixed::FixedWorkload, HttpError> {
        if let Some(w) = crate::targets::fixed::check_limits(&cfg, self.context_length, None)? {
            tracing::warn!("{w}");
        }
        ctx.trace_set = crate::targets::fixed::trace_set(&cfg);
        let wl = crate::workload::fixed::FixedWorkload::new(cfg).map_err(|e| HttpError::Fixed(e.into()))?;
        ctx.fixed = Some(crate::targets::fixed::meta(&wl, &self.model));
        Ok(wl)
    }
}
