//! The web dashboard (`sweep serve`): runs from the results store, Pareto curves per config
//! across runs, a run against its baseline, and each run's own report served from its folder.
//!
//! It only reads: the store is opened read-only, every method but GET and HEAD is refused, and
//! the only files it serves are inside the folders of recorded runs. Pages are rendered on the
//! server with every stored string HTML-escaped (`pages.rs`); the charts are drawn in the
//! browser by `assets/dashboard.js` (SVG, compiled into the binary) from the JSON endpoints
//! (`api.rs`), which it writes into the page as text only. A strict Content-Security-Policy
//! allows this origin's script and style and nothing inline.
//!
//! Store calls block, so each request runs its reads on the blocking pool, on a connection
//! taken from a small pool of read-only connections.

mod api;
mod files;
pub mod flags;
mod pages;
pub mod payload;

use crate::recipe::serving::Recipe;
use crate::repo::Repo;
use crate::store::{Location, Mode, Store, StoreError};
use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The policy of every page: this origin's script, style and data; nothing inline, no frames.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                       base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Connections kept open between requests.
const POOL: usize = 8;

/// Why a request could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl DashboardError {
    fn status(&self) -> StatusCode {
        match self {
            DashboardError::NotFound(_) => StatusCode::NOT_FOUND,
            DashboardError::BadRequest(_) => StatusCode::BAD_REQUEST,
            DashboardError::Store(_) | DashboardError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A recipe base by config key, with the recipe file's modification time it was read at.
type CachedBase = (Option<SystemTime>, Option<flags::Base>);

/// What the server shares between requests.
pub struct App {
    location: Location,
    pool: Mutex<Vec<Store>>,
    /// The repository whose serving recipes give each config's base flags, when there is one.
    repo: Option<Repo>,
    bases: Mutex<HashMap<String, CachedBase>>,
    /// Host names a request may name (DNS rebinding): empty when any host is accepted.
    hosts: Vec<String>,
}

impl App {
    /// Opens the store once (so that a missing store or one of another schema version is
    /// reported before the server listens) and keeps that connection for the first request.
    /// `hosts`: the only `Host` names (any port) requests may carry, none for any; see
    /// [`loopback_hosts`].
    pub fn open(location: Location, repo: Option<Repo>, hosts: Vec<String>) -> Result<Arc<App>, StoreError> {
        let store = Store::open(&location, Mode::ReadOnly)?;
        Ok(Arc::new(App { location, pool: Mutex::new(vec![store]), repo, bases: Mutex::new(HashMap::new()), hosts }))
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Runs `f` on a pooled read-only connection on the blocking pool.
    async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Store, &App) -> Result<T, DashboardError> + Send + 'static,
    ) -> Result<T, DashboardError> {
        let app = self.clone();
        tokio::task::spawn_blocking(move || {
            let taken = app.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut store = match taken {
                Some(s) => s,
                None => Store::open(&app.location, Mode::ReadOnly)?,
            };
            let out = f(&mut store, &app);
            // A connection that failed may be broken: it is dropped rather than reused.
            if !matches!(out, Err(DashboardError::Store(_))) {
                let mut pool = app.pool.lock().unwrap_or_else(|e| e.into_inner());
                if pool.len() < POOL {
                    pool.push(store);
                }
            }
            out
        })
        .await
        .map_err(|e| DashboardError::Internal(e.to_string()))?
    }

    /// The base flags of a config's recipe in the repository, re-read when the file changes.
    fn recipe_base(&self, key: &str) -> Option<flags::Base> {
        let repo = self.repo.as_ref()?;
        let file = repo.recipes_dir.join(format!("{key}.yaml"));
        let mtime = std::fs::metadata(&file).and_then(|m| m.modified()).ok();
        let mut cache = self.bases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((t, b)) = cache.get(key)
            && *t == mtime
        {
            return b.clone();
        }
        // A recipe that no longer parses gives no base: the run's shared flags stand in.
        let base = mtime.and_then(|_| Recipe::load(&file).ok()).map(|r| {
            let shown = file.strip_prefix(&repo.root).unwrap_or(&file).display().to_string();
            flags::recipe_base(&r, &shown)
        });
        cache.insert(key.to_string(), (mtime, base.clone()));
        base
    }
}

/// The host names of a loopback server.
pub fn loopback_hosts() -> Vec<String> {
    ["localhost", "127.0.0.1", "[::1]"].iter().map(|s| s.to_string()).collect()
}

/// Every route of the dashboard.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(pages::runs))
        .route("/configs", get(pages::configs))
        .route("/config/{key}", get(pages::config))
        .route("/run/{id}", get(pages::run))
        .route("/compare", get(pages::compare))
        .route("/runs/{id}/files/{*path}", get(files::serve))
        .route("/assets/dashboard.js", get(pages::script))
        .route("/assets/dashboard.css", get(pages::style))
        .route("/api/facets", get(api::facets))
        .route("/api/runs", get(api::runs))
        .route("/api/configs", get(api::configs))
        .route("/api/config/{key}", get(api::config))
        .route("/api/run/{id}", get(api::run))
        .route("/api/compare", get(api::compare))
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Read-only and hardened: methods other than GET and HEAD are refused whatever the path, a
/// request for another host is refused, and every response gets the security headers (files
/// from run folders bring their own, stricter, policy).
async fn guard(axum::extract::State(app): axum::extract::State<Arc<App>>, req: Request, next: Next) -> Response {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = (StatusCode::METHOD_NOT_ALLOWED, "sweep serve is read-only: only GET and HEAD are allowed\n").into_response();
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return harden(r);
    }
    if !app.hosts.is_empty() {
        let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if !host_allowed(host, &app.hosts) {
            return harden((StatusCode::FORBIDDEN, "this dashboard answers only requests for its loopback address\n").into_response());
        }
    }
    harden(next.run(req).await)
}

/// `name` or `name:port` where name is one of `hosts`.
fn host_allowed(host: &str, hosts: &[String]) -> bool {
    let name =
        if host.starts_with('[') { host.split_inclusive(']').next().unwrap_or(host) } else { host.split(':').next().unwrap_or(host) };
    hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

fn harden(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.entry(header::CONTENT_SECURITY_POLICY).or_insert(HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    r
}

/// Where `sweep serve` listens and what it reads.
#[derive(Clone, Debug)]
pub struct Options {
    pub location: Location,
    pub listen: SocketAddr,
    /// The repository whose recipes give the flag diffs' bases.
    pub repo_root: Option<PathBuf>,
}

/// Serves until Ctrl-C / SIGTERM. `ready` is called with the bound address before the first
/// request is accepted (port 0 picks a free port).
pub fn serve(opts: &Options, ready: impl FnOnce(SocketAddr)) -> Result<(), DashboardError> {
    let repo = opts.repo_root.as_deref().map(Repo::at);
    let hosts = if opts.listen.ip().is_loopback() { loopback_hosts() } else { Vec::new() };
    let app = App::open(opts.location.clone(), repo, hosts)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| DashboardError::Internal(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(opts.listen).await.map_err(|e| {
            DashboardError::BadRequest(format!("cannot listen on {}: {e} (give another address with --listen)", opts.listen))
        })?;
        let addr = listener.local_addr().map_err(|e| DashboardError::Internal(e.to_string()))?;
        ready(addr);
        axum::serve(listener, router(app))
            .with_graceful_shutdown(shutdown())
            .await
            .map_err(|e| DashboardError::Internal(format!("server stopped: {e}")))
    })
}

async fn shutdown() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// A path segment with everything but unreserved characters percent-encoded (run ids and
/// config keys in links).
pub fn url_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_matched_without_their_port() {
        let h = loopback_hosts();
        assert!(host_allowed("127.0.0.1:8080", &h));
        assert!(host_allowed("localhost", &h));
        assert!(host_allowed("[::1]:9", &h));
        assert!(!host_allowed("evil.example:8080", &h));
        assert!(!host_allowed("127.0.0.1.evil.example", &h));
        assert!(!host_allowed("", &h));
    }

    #[test]
    fn segments_encode_everything_but_unreserved() {
        assert_eq!(url_segment("dsv3-fp8_x.y~"), "dsv3-fp8_x.y~");
        assert_eq!(url_segment("a/b c<script>"), "a%2Fb%20c%3Cscript%3E");
        assert_eq!(url_segment("é"), "%C3%A9");
    }
}
