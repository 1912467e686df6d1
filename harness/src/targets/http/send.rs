//! Sending one chat request, on this client's own HTTP/1.1 connections (`http://`) or through
//! reqwest (`https://`), and reading its streamed answer into the request's record.

use super::HttpTarget;
use super::h1;
use super::stream::{Sse, error_message, fail};
use crate::records::Record;
use crate::workload::{Failure, RequestSpec};

impl HttpTarget {
    /// Sends one request with its body and streams its answer into `rec`; returns the failure, if
    /// any. The body is built already (the clock starts after it: in real time a client's
    /// synthesis is not the server's latency), or still being built (the request's head goes
    /// first, and a time-scaled reference engine holds its clock at the head's arrival until the
    /// body is in, so synthesis costs no engine time). A ready body is sent with its
    /// `Content-Length`, one being built chunked. No timeout here: [`replay`] applies
    /// `request_timeout`.
    pub async fn send_body(
        &self,
        spec: &RequestSpec,
        body: h1::Body,
        rec: Record,
        clock_now: impl Fn() -> u64,
    ) -> (Record, Option<Failure>) {
        let mut headers = vec![
            ("x-correlation-id", spec.correlation_id.as_ref()),
            ("content-type", "application/json"),
            // `sweep engine serve` then stamps its events with engine time; other servers ignore it.
            (engine::server::ENGINE_TIME_HEADER, "1"),
        ];
        match &self.h1 {
            Some(c) => self.send_h1(c, &mut headers, body, rec, clock_now).await,
            None => self.send_reqwest(&headers, body, rec, clock_now).await,
        }
    }

    /// [`HttpTarget::send_body`] on this client's own HTTP/1.1 connections (`http://` targets).
    async fn send_h1(
        &self,
        client: &h1::Client,
        headers: &mut Vec<(&str, &str)>,
        body: h1::Body,
        mut rec: Record,
        clock_now: impl Fn() -> u64,
    ) -> (Record, Option<Failure>) {
        headers.push(("accept", "text/event-stream"));
        rec.start_ns = clock_now();
        let mut resp = match client.post("/v1/chat/completions", headers, body).await {
            Ok(r) => r,
            Err(e) => {
                // No response (refused, or closed before its head), as reqwest reports it.
                let now = clock_now();
                return fail(rec, "connection_error", format!("{}/v1/chat/completions: {e}", self.base_url), None, now);
            }
        };
        rec.ack_ns = Some(clock_now());
        let arrival = resp.header(engine::server::ARRIVAL_HEADER).and_then(|v| v.parse::<u64>().ok());
        let mut sse = Sse::new(&mut rec, arrival, self.time_scale);
        if !(200..300).contains(&resp.status) {
            let status = resp.status;
            let text = resp.text().await.unwrap_or_default();
            let now = clock_now();
            return fail(rec, &format!("http_{status}"), error_message(text), Some(status), now);
        }
        loop {
            let data = match resp.data().await {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => {
                    let now = clock_now();
                    return fail(rec, "connection_dropped", format!("stream ended early: {e}"), None, now);
                }
            };
            let t = clock_now();
            if let Some((msg, code)) = sse.feed(&mut rec, data, t) {
                return fail(rec, "stream_error", msg, code, t);
            }
        }
        sse.finish(rec, clock_now())
    }

    /// [`HttpTarget::send_body`] through reqwest (`https://` targets).
    async fn send_reqwest(
        &self,
        headers: &[(&str, &str)],
        body: h1::Body,
        mut rec: Record,
        clock_now: impl Fn() -> u64,
    ) -> (Record, Option<Failure>) {
        let url = format!("{}/v1/chat/completions", self.base_url);
        let mut req = self.client.post(&url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = match body {
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
                    let parts: Vec<Result<bytes::Bytes, String>> = match built {
                        Ok(parts) => parts.into_iter().map(Ok).collect(),
                        Err(e) => vec![Err(e)],
                    };
                    futures_util::stream::iter(parts)
                });
                req.body(reqwest::Body::wrap_stream(pieces))
            }
        };
        rec.start_ns = clock_now();
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let kind = if e.is_timeout() { "timeout" } else { "connection_error" };
                let now = clock_now();
                return fail(rec, kind, format!("{url}: {e}"), None, now);
            }
        };
        rec.ack_ns = Some(clock_now());
        let arrival = resp.headers().get(engine::server::ARRIVAL_HEADER).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let mut sse = Sse::new(&mut rec, arrival, self.time_scale);
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let now = clock_now();
            return fail(rec, &format!("http_{}", status.as_u16()), error_message(text), Some(status.as_u16()), now);
        }
        let mut resp = resp;
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    let kind = if e.is_timeout() { "timeout" } else { "connection_dropped" };
                    let now = clock_now();
                    return fail(rec, kind, format!("stream ended early: {e}"), None, now);
                }
            };
            let t = clock_now();
            if let Some((msg, code)) = sse.feed(&mut rec, &chunk, t) {
                return fail(rec, "stream_error", msg, code, t);
            }
        }
        sse.finish(rec, clock_now())
    }
}
