//! One request of an eval: a question's body sent, its reply read within the limit the token
//! budget allows, and the answer's text taken from it; or why the attempt failed.

use std::time::Duration;

use serde_json::Value;

use super::reply::{Reply, reply_text};
use crate::targets::http::describe;

/// Why one attempt at a question failed (kept as the sample's `error`, retried up to the limit).
#[derive(Debug, thiserror::Error)]
pub(super) enum AttemptError {
    /// The request or its stream failed (reqwest's cause, described).
    #[error("{0}")]
    Transport(String),
    #[error("the reply passed {0} bytes (the most max_tokens allows): cut there")]
    TooLong(usize),
    #[error("HTTP {status}: {excerpt}")]
    Status { status: u16, excerpt: String },
    #[error("the reply is not JSON ({0})")]
    NotJson(serde_json::Error),
    /// A JSON reply without the answer's text.
    #[error("{0}")]
    Reply(String),
}

/// One attempt's outcome: the answer, or why it failed.
pub(super) async fn attempt(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &[u8],
    timeout: Duration,
    limit: usize,
) -> Result<Reply, AttemptError> {
    let mut r = client
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {key}"))
        .body(body.to_vec())
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| AttemptError::Transport(describe(&e)))?;
    let status = r.status();
    let mut bytes = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(|e| AttemptError::Transport(describe(&e)))? {
        if bytes.len() + chunk.len() > limit {
            return Err(AttemptError::TooLong(limit));
        }
        bytes.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        let excerpt: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
        return Err(AttemptError::Status { status: status.as_u16(), excerpt });
    }
    let v: Value = serde_json::from_slice(&bytes).map_err(AttemptError::NotJson)?;
    reply_text(&v).map_err(|e| AttemptError::Reply(e.to_string()))
}
