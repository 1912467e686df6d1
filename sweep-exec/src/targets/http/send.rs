//! Sending one chat request, on this client's own HTTP/1.1 connections (`http://`) or through
//! reqwest (`https://`); both read the answer with [`read_reply`].

use std::sync::atomic::{AtomicU64, Ordering};

use super::HttpTarget;
use super::h1;
use super::stream::{Answer, ReadOpts, ReqwestReply, fail, read_reply};
use crate::records::Record;
use crate::workload::RequestSpec;

impl HttpTarget {
    /// Sends one request with its body and streams its answer into `rec`; returns the failure, if
    /// any. The body is built already (the clock starts after it: in real time a client's
    /// synthesis is not the server's latency), or still being built (the request's head goes
    /// first, and a time-scaled reference engine holds its clock at the head's arrival until the
    /// body is in, so synthesis costs no engine time). A ready body is sent with its
    /// `Content-Length`, one being built chunked. No timeout here: [`replay`] applies
    /// `request_timeout` and `stall_timeout` (from what is noted in `touched`).
    pub async fn send_body(
        &self,
        spec: &RequestSpec,
        body: h1::Body,
        rec: Record,
        touched: &AtomicU64,
        clock_now: impl Fn() -> u64,
    ) -> Answer {
        let mut headers = vec![
            ("x-correlation-id", spec.correlation_id.as_ref()),
            ("content-type", "application/json"),
            // `sweep engine serve` then stamps its events with engine time; other servers ignore it.
            (engine_server::server::ENGINE_TIME_HEADER, "1"),
        ];
        // Keep the streamed text to count outputs until the server shows it sends usage.
        let opts = ReadOpts { time_scale: self.time_scale, keep_text: !self.usage_seen.load(Ordering::Relaxed), touched };
        let path = match spec.api {
            crate::workload::fixed::Api::Chat => "/v1/chat/completions",
            crate::workload::fixed::Api::Completions => "/v1/completions",
        };
        match &self.h1 {
            Some(c) => self.send_h1(c, path, &mut headers, body, rec, opts, clock_now).await,
            None => self.send_reqwest(path, &headers, body, rec, opts, clock_now).await,
        }
    }

    /// [`HttpTarget::send_body`] on this client's own HTTP/1.1 connections (`http://` targets).
    #[allow(clippy::too_many_arguments)]
    async fn send_h1(
        &self,
        client: &h1::Client,
        path: &str,
        headers: &mut Vec<(&str, &str)>,
        body: h1::Body,
        mut rec: Record,
        opts: ReadOpts<'_>,
        clock_now: impl Fn() -> u64,
    ) -> Answer {
        headers.push(("accept", "text/event-stream"));
        rec.start_ns = clock_now();
        match client.post(path, headers, body).await {
            Ok(resp) => read_reply(resp, rec, opts, clock_now).await,
            Err(e) => {
                // No response (refused, or closed before its head), as reqwest reports it.
                let now = clock_now();
                fail(rec, "connection_error", format!("{}{path}: {e}", self.base_url), None, now)
            }
        }
    }

    /// [`HttpTarget::send_body`] through reqwest (`https://` targets).
    async fn send_reqwest(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: h1::Body,
        mut rec: Record,
        opts: ReadOpts<'_>,
        clock_now: impl Fn() -> u64,
    ) -> Answer {
        let url = format!("{}{path}", self.base_url);
        let mut req = self.client.post(&url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req_with_body(req, body);
        rec.start_ns = clock_now();
        match req.send().await {
            Ok(resp) => read_reply(ReqwestReply::new(resp), rec, opts, clock_now).await,
            Err(e) => {
                let kind = if e.is_timeout() { "timeout" } else { "connection_error" };
                let now = clock_now();
                fail(rec, kind, format!("{url}: {e}"), None, now)
            }
        }
    }
}

/// The request with its body: a ready one sized, one being built streamed once it is done.
fn req_with_body(req: reqwest::RequestBuilder, body: h1::Body) -> reqwest::RequestBuilder {
    match body {
        h1::Body::Ready(parts) => {
            // The pieces stream without a size of their own; the server still gets a sized body.
            let len: usize = parts.iter().map(bytes::Bytes::len).sum();
            let body = match parts.len() {
                0 | 1 => reqwest::Body::from(parts.into_iter().next().unwrap_or_default()),
                _ => reqwest::Body::wrap_stream(futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>))),
            };
            req.header(reqwest::header::CONTENT_LENGTH, len).body(body)
        }
        h1::Body::Later(fut) => {
            use futures_util::StreamExt;
            let pieces = futures_util::stream::once(fut).flat_map(|built| {
                let parts: Vec<Result<bytes::Bytes, tokio::task::JoinError>> = match built {
                    Ok(parts) => parts.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                };
                futures_util::stream::iter(parts)
            });
            req.body(reqwest::Body::wrap_stream(pieces))
        }
    }
}
