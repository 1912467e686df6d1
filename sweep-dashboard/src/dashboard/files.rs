//! Files of recorded runs (`/runs/<run id>/files/<path>`): each run's `report.html`, charts and
//! point files, read from the folder the store points to. Only regular files inside that folder
//! are served: a path with `..`, an absolute path, or a link that resolves outside the folder
//! is refused. The files are the runs' own output, so they are served under a sandboxing
//! policy of their own: no requests, no access to the dashboard's origin.

use super::{App, DashboardError};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::path::{Component, PathBuf};
use std::sync::Arc;

/// Run files may carry their own inline style (and script), in an opaque origin that can load
/// nothing but its own images.
pub const FILE_CSP: &str = "sandbox allow-scripts; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; \
                            script-src 'unsafe-inline'; font-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        // Shown as text in a browser rather than downloaded.
        "jsonl" | "md" | "txt" | "log" | "csv" | "yaml" | "yml" => "text/plain; charset=utf-8",
        "xml" => "application/xml",
        "gz" => "application/gzip",
        "zst" => "application/zstd",
        _ => "application/octet-stream",
    }
}

/// The relative path as components, or why it is refused.
pub fn relative(path: &str) -> Result<PathBuf, &'static str> {
    if path.is_empty() || path.contains('\0') || path.contains('\\') {
        return Err("not a file path");
    }
    let p = PathBuf::from(path);
    if p.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err("the path leaves the run's folder");
    }
    Ok(p)
}

fn refuse(status: StatusCode, message: String) -> Response {
    (status, format!("{message}\n")).into_response()
}

pub async fn serve(State(app): State<Arc<App>>, Path((id, path)): Path<(String, String)>) -> Response {
    let rel = match relative(&path) {
        Ok(p) => p,
        Err(why) => return refuse(StatusCode::FORBIDDEN, format!("refused {path:?}: {why}")),
    };
    let run = id.clone();
    let found = match app.read(move |s, _| Ok(s.run_folder(&run)?)).await {
        Ok(f) => f,
        Err(e) => return refuse(e.status(), e.to_string()),
    };
    let Some((folder, host)) = found else {
        return refuse(StatusCode::NOT_FOUND, DashboardError::NotFound(format!("no run {id:?} in the store")).to_string());
    };
    let Ok(root) = tokio::fs::canonicalize(&folder).await else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("the folder of run {id:?} ({}) is not on this machine: it was recorded on host {host:?}", folder.display()),
        );
    };
    let Ok(file) = tokio::fs::canonicalize(root.join(&rel)).await else {
        return refuse(StatusCode::NOT_FOUND, format!("run {id:?} has no file {path:?}"));
    };
    // A link inside the folder may point anywhere: what it resolves to decides.
    if !file.starts_with(&root) {
        return refuse(StatusCode::FORBIDDEN, format!("refused {path:?}: it resolves outside the run's folder"));
    }
    match tokio::fs::metadata(&file).await {
        Ok(m) if m.is_file() => {}
        _ => return refuse(StatusCode::NOT_FOUND, format!("run {id:?} has no file {path:?}")),
    }
    let bytes = match tokio::fs::read(&file).await {
        Ok(b) => b,
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("{}: {e}", file.display())),
    };
    let mut r = Response::new(Body::from(bytes));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(&path)));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(FILE_CSP));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_pass() {
        assert!(relative("report.html").is_ok());
        assert!(relative("dsv3/tp8-c1/agg.json").is_ok());
        for bad in ["", "../x", "a/../../x", "/etc/passwd", "./x", "a\\..\\x", "a\0b"] {
            assert!(relative(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn types_follow_the_extension() {
        assert_eq!(content_type("report.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("x/profile_export.jsonl"), "text/plain; charset=utf-8");
        assert_eq!(content_type("pareto.SVG"), "image/svg+xml");
        assert_eq!(content_type("results.parquet"), "application/octet-stream");
    }
}
