//! Connecting to a server before a point: wait until it is ready (health, a listed model, one
//! answered one-token request), identify it, and apply the client's options. Both `sweep replay
//! --url` and every live target of `sweep run` go through [`HttpTarget::connect`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The most bytes the readiness check's one-token reply may take.
pub const ONE_TOKEN_REPLY_CAP: usize = 1 << 20;

use super::{HttpError, HttpTarget, REQUEST_TIMEOUT, describe};
use crate::metrics::PointContext;
use crate::targets::dialect::{Dialect, DialectArgs, DialectError};

/// A stream that sends nothing for this long is a `stall` error: a hung server otherwise holds
/// the point until the request timeout (hours).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a server may take to become ready (a real engine loads weights and captures
/// graphs before it answers).
pub const READY_TIMEOUT: Duration = Duration::from_secs(600);

/// The client's settings for one server: the command line's, over the point recipe's.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Synthesis tokenizer (`tokenizer.json`); default: what the server reports.
    pub tokenizer: Option<PathBuf>,
    pub request_timeout: Duration,
    pub stall_timeout: Duration,
    pub ready_timeout: Duration,
    /// The command line's dialect flags, kept to merge over each point recipe's `client-args`.
    pub flags: DialectArgs,
    /// The server's context length when it does not say it.
    pub context_length: Option<u64>,
    pub dialect: Dialect,
    /// GPU power sampling during a point.
    pub gpu_monitor: crate::targets::gpu_monitor::MonitorChoice,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            tokenizer: None,
            request_timeout: REQUEST_TIMEOUT,
            stall_timeout: STALL_TIMEOUT,
            ready_timeout: READY_TIMEOUT,
            flags: DialectArgs::default(),
            context_length: None,
            dialect: Dialect::default(),
            gpu_monitor: crate::targets::gpu_monitor::MonitorChoice::default(),
        }
    }
}

/// Why a server is not ready yet; the last reason is what a wait that runs out reports.
#[derive(Debug, thiserror::Error)]
enum Unready {
    #[error("GET {path}: HTTP {status}")]
    Status { path: &'static str, status: u16 },
    #[error("GET {path}: {why}")]
    Unreachable { path: &'static str, why: String },
    /// No model listed (the listing's own message).
    #[error("{0}")]
    Model(String),
    #[error("a one-token request: {0}")]
    OneToken(String),
    #[error(
        "a one-token request: the reply passed {ONE_TOKEN_REPLY_CAP} bytes without ending (a one-token answer is a few hundred); the server is misbehaving"
    )]
    OneTokenOverflow,
    #[error("a one-token request: HTTP {status}: {excerpt}")]
    OneTokenStatus { status: u16, excerpt: String },
}

impl ClientOptions {
    /// These options with `flags` (the command line's dialect flags) over a recipe's
    /// `client-args`: a flag given on the command line wins.
    pub fn with_flags(mut self, flags: DialectArgs, recipe_args: &[String]) -> Result<ClientOptions, DialectError> {
        let recipe = DialectArgs::parse_list(recipe_args)?;
        let merged = flags.over(&recipe)?;
        self.dialect = merged.dialect()?;
        self.context_length = merged.context_length;
        self.flags = flags;
        Ok(self)
    }

    /// The options for a point whose recipe gives `recipe_args`.
    pub fn for_point(&self, recipe_args: &[String]) -> Result<ClientOptions, DialectError> {
        self.clone().with_flags(self.flags.clone(), recipe_args)
    }
}

impl HttpTarget {
    /// A target for `base_url` once the server is ready, identified (`info_url`: where its
    /// `/server_info` is, the worker behind a router), with `opts` applied and recorded in `ctx`.
    pub async fn connect(base_url: &str, info_url: &str, opts: &ClientOptions, ctx: &mut PointContext) -> Result<HttpTarget, HttpError> {
        let mut t = HttpTarget::new(base_url, "")?;
        t.dialect = std::sync::Arc::new(opts.dialect.clone());
        t.wait_ready(opts.ready_timeout).await?;
        t.identify(ctx, opts.tokenizer.as_deref(), info_url).await?;
        if opts.context_length.is_some() {
            t.context_length = opts.context_length;
        }
        t.request_timeout = opts.request_timeout;
        t.stall_timeout = opts.stall_timeout;
        ctx.request_dialect = Some(serde_json::to_value(&opts.dialect).unwrap_or_default());
        Ok(t)
    }

    /// Waits until `/health` answers 200 (a server without one: `/v1/models`), a model is
    /// listed, and a one-token chat request in the target's dialect succeeds; polls every
    /// second up to `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), HttpError> {
        let t0 = Instant::now();
        let mut said = false;
        loop {
            let last = match self.ready_once().await {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            if !said && timeout > Duration::from_secs(2) {
                tracing::info!(
                    target: crate::PROGRESS,
                    "waiting for {} to be ready ({last}; up to {:.0} s, --ready-timeout)",
                    self.base_url,
                    timeout.as_secs_f64()
                );
                said = true;
            }
            if t0.elapsed() >= timeout {
                return Err(HttpError::NotReady { url: self.base_url.clone(), secs: timeout.as_secs_f64(), last: last.to_string() });
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// One readiness check; the reason it is not ready yet.
    async fn ready_once(&self) -> Result<(), Unready> {
        let health = self.status_of("/health").await?;
        if health == 404 {
            // No health endpoint: listing models stands in for it.
            let models = self.status_of("/v1/models").await?;
            if models != 200 {
                return Err(Unready::Status { path: "/v1/models", status: models });
            }
        } else if health != 200 {
            return Err(Unready::Status { path: "/health", status: health });
        }
        let model = self.discover_model().await.map_err(|e| Unready::Model(e.to_string()))?;
        self.one_token(&model).await
    }

    async fn status_of(&self, path: &'static str) -> Result<u16, Unready> {
        let url = format!("{}{path}", self.base_url);
        match self.client.get(&url).timeout(Duration::from_secs(10)).send().await {
            Ok(r) => Ok(r.status().as_u16()),
            Err(e) => Err(Unready::Unreachable { path, why: describe(&e) }),
        }
    }

    /// A one-token chat request, read to its end (at most [`ONE_TOKEN_REPLY_CAP`] bytes).
    async fn one_token(&self, model: &str) -> Result<(), Unready> {
        let mut body =
            format!(r#"{{"model":{},"messages":[{{"role":"user","content":"Hi"}}]"#, serde_json::Value::from(model)).into_bytes();
        self.dialect.write_tail(&mut body, 1);
        let url = format!("{}/v1/chat/completions", self.base_url);
        let r = self
            .client
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .map_err(|e| Unready::OneToken(describe(&e)))?;
        let status = r.status().as_u16();
        // Read to its end without keeping it: a one-token answer is a few hundred bytes, so a
        // reply past the cap is a broken server, not one to buffer until memory runs out.
        let (mut head, mut total) = (Vec::new(), 0usize);
        let mut r = r;
        while let Some(chunk) = r.chunk().await.map_err(|e| Unready::OneToken(describe(&e)))? {
            total += chunk.len();
            head.extend_from_slice(&chunk[..chunk.len().min(512usize.saturating_sub(head.len()))]);
            if total > ONE_TOKEN_REPLY_CAP {
                return Err(Unready::OneTokenOverflow);
            }
        }
        if !(200..300).contains(&status) {
            let excerpt: String = String::from_utf8_lossy(&head).chars().take(200).collect();
            return Err(Unready::OneTokenStatus { status, excerpt });
        }
        Ok(())
    }
}
