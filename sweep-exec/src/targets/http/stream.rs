//! Reading a streamed reply, whichever transport carried it: the server-sent events into the
//! request's record (timestamps, chunk count, usage, mid-stream errors), and a failed request's
//! record.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde_json::Value;

use super::chunk::ChunkInfo;
use super::h1;
use crate::records::{Record, RecordError, is_overflow_message};
use crate::workload::Failure;

/// A response whose head is in, as either transport delivers it; its body is read in runs of
/// bytes.
pub(super) trait Reply {
    fn status(&self) -> u16;
    /// The value of header `name` (lowercase).
    fn header(&self, name: &str) -> Option<&str>;
    /// The whole body as text (an error reply); empty when it cannot be read.
    async fn error_text(self) -> String;
    /// The next run of body bytes; `None` at the end of the body.
    async fn data(&mut self) -> Result<Option<&[u8]>, BodyError>;
}

/// Why a reply's body stopped before its end.
pub(super) struct BodyError {
    /// The record's error kind: `timeout` or `connection_dropped`.
    pub(super) kind: &'static str,
    pub(super) message: String,
}

impl Reply for h1::Response<'_> {
    fn status(&self) -> u16 {
        self.status
    }
    fn header(&self, name: &str) -> Option<&str> {
        h1::Response::header(self, name)
    }
    async fn error_text(mut self) -> String {
        self.text().await.unwrap_or_default()
    }
    async fn data(&mut self) -> Result<Option<&[u8]>, BodyError> {
        h1::Response::data(self).await.map_err(|e| BodyError { kind: "connection_dropped", message: e.to_string() })
    }
}

/// A reqwest response and the chunk last read from it.
pub(super) struct ReqwestReply {
    resp: reqwest::Response,
    chunk: Bytes,
}

impl ReqwestReply {
    pub(super) fn new(resp: reqwest::Response) -> Self {
        ReqwestReply { resp, chunk: Bytes::new() }
    }
}

impl Reply for ReqwestReply {
    fn status(&self) -> u16 {
        self.resp.status().as_u16()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.resp.headers().get(name).and_then(|v| v.to_str().ok())
    }
    async fn error_text(self) -> String {
        self.resp.text().await.unwrap_or_default()
    }
    async fn data(&mut self) -> Result<Option<&[u8]>, BodyError> {
        match self.resp.chunk().await {
            Ok(Some(c)) => {
                self.chunk = c;
                Ok(Some(&self.chunk))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(BodyError { kind: if e.is_timeout() { "timeout" } else { "connection_dropped" }, message: e.to_string() }),
        }
    }
}

/// A reply read to its end without token counts from the server: what to count them from.
#[derive(Debug, Default)]
pub struct Uncounted {
    /// The streamed content and reasoning text, when it was kept (`None`: not kept, because the
    /// server had sent usage before).
    pub text: Option<String>,
    /// It finished on its output budget (`finish_reason: "length"`).
    pub length_finish: bool,
}

/// A request's record, its failure if any, and what to count its tokens from if the server
/// did not.
pub type Answer = (Record, Option<Failure>, Option<Uncounted>);

/// How a reply is read: the server's time scale, whether to keep the streamed text (outputs to
/// count if no usage comes), and where each received run of bytes is noted (on the client's
/// clock) for the stall check.
pub(super) struct ReadOpts<'a> {
    pub(super) time_scale: f64,
    pub(super) keep_text: bool,
    pub(super) touched: &'a AtomicU64,
}

/// Reads a reply whose head has just come in into `rec`: the ack, an error reply, or the event
/// stream to its end; returns the failure, if any.
pub(super) async fn read_reply(mut reply: impl Reply, mut rec: Record, opts: ReadOpts<'_>, clock_now: impl Fn() -> u64) -> Answer {
    rec.ack_ns = Some(clock_now());
    opts.touched.store(clock_now(), Ordering::Relaxed);
    let arrival = reply.header(engine_server::server::ARRIVAL_HEADER).and_then(|v| v.parse::<u64>().ok());
    let mut sse = Sse::new(&mut rec, arrival, opts.time_scale, opts.keep_text);
    let status = reply.status();
    if !(200..300).contains(&status) {
        let text = reply.error_text().await;
        let now = clock_now();
        return fail(rec, &format!("http_{status}"), error_message(text), Some(status), now);
    }
    loop {
        let data = match reply.data().await {
            Ok(Some(d)) => d,
            Ok(None) => break,
            Err(e) => {
                let now = clock_now();
                return fail(rec, e.kind, format!("stream ended early: {}", e.message), None, now);
            }
        };
        let t = clock_now();
        opts.touched.store(t, Ordering::Relaxed);
        if let Some((msg, code)) = sse.feed(&mut rec, data, t) {
            return fail(rec, "stream_error", msg, code, t);
        }
    }
    sse.finish(rec, clock_now())
}

/// A failed request's record: the error (an overflow message becomes `context_overflow`, terminal
/// for the session) and its end.
pub(super) fn fail(mut rec: Record, kind: &str, message: String, status: Option<u16>, now: u64) -> Answer {
    let overflow = is_overflow_message(&message);
    rec.error = Some(RecordError { kind: if overflow { "context_overflow".into() } else { kind.to_string() }, message, status });
    rec.end_ns = now;
    (rec, Some(if overflow { Failure::ContextOverflow } else { Failure::Error }), None)
}

/// The message of an error reply (OpenAI's `error.message`, or a top-level `message`), else its text.
fn error_message(text: String) -> String {
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().or(v["message"].as_str()).map(str::to_string))
        .unwrap_or(text)
}

/// The server-sent events of one streamed reply, read as the body arrives: timestamps of the
/// first and last output, chunk count, usage and mid-stream errors, into the request's record.
struct Sse {
    start: u64,
    /// The engine time of the request's arrival, when the server stamps its events.
    arrival: Option<u64>,
    /// Events placed by the engine's stamps (a time-scaled reference engine).
    stamped: bool,
    /// Every chunk with a choice is an output, empty text included, as `benchmark_serving`
    /// reads a stream (fixed-length `random` requests: their TTFT, ITL and E2EL are its);
    /// otherwise only chunks with text are (AgentX, AIPerf).
    per_choice: bool,
    time_scale: f64,
    /// A partial line waiting for the rest.
    buf: Vec<u8>,
    done: bool,
    /// The engine time of the event being read (`: t=<ns>` precedes each event's data lines).
    stamp: Option<u64>,
    /// When the first output was observed, and its stamp.
    first: Option<(u64, Option<u64>)>,
    /// The streamed text, kept when the server may send no usage.
    text: Option<String>,
    length_finish: bool,
}

impl Sse {
    /// Under a time scale the engine's stamps place the request's events: wall-clock delays
    /// between the engine and this client (the server's front end, delivery, a busy core) would
    /// count K times over on the scaled clock, and the virtual clock has none of them. The
    /// observed times still give the added latency.
    fn new(rec: &mut Record, arrival: Option<u64>, time_scale: f64, keep_text: bool) -> Sse {
        let stamped = time_scale != 1.0 && arrival.is_some();
        if stamped {
            rec.ack_ns = Some(rec.start_ns);
        }
        Sse {
            start: rec.start_ns,
            arrival,
            stamped,
            per_choice: rec.source_kind == "random",
            time_scale,
            buf: Vec::new(),
            done: false,
            stamp: None,
            first: None,
            text: keep_text.then(String::new),
            length_finish: false,
        }
    }

    fn place(&self, observed: u64, stamp: Option<u64>) -> u64 {
        match (self.stamped, stamp, self.arrival) {
            (true, Some(t), Some(a)) => self.start + t.saturating_sub(a),
            _ => observed,
        }
    }

    /// Reads the complete lines of `chunk` (received at `t`); a partial line waits for the next
    /// chunk. Lines are read in place from the chunk when nothing is left over (the usual case:
    /// one event per chunk). Returns a mid-stream error event's message and code.
    fn feed(&mut self, rec: &mut Record, chunk: &[u8], t: u64) -> Option<(String, Option<u16>)> {
        let mut pending = std::mem::take(&mut self.buf);
        let data: &[u8] = if pending.is_empty() {
            chunk
        } else {
            pending.extend_from_slice(chunk);
            &pending
        };
        let mut used = 0;
        while let Some(nl) = data[used..].iter().position(|&b| b == b'\n') {
            let line = data[used..used + nl].trim_ascii();
            used += nl + 1;
            if let Some(comment) = line.strip_prefix(b":") {
                let v = comment.trim_ascii().strip_prefix(b"t=").and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
                if v.is_some() {
                    self.stamp = v;
                }
                continue;
            }
            let Some(payload) = line.strip_prefix(b"data:") else { continue };
            let payload = payload.trim_ascii();
            if payload == b"[DONE]" {
                self.done = true;
                continue;
            }
            let Some(c) = ChunkInfo::parse_into(payload, self.text.as_mut()) else { continue };
            if let Some(e) = c.error {
                return Some(e);
            }
            self.length_finish |= c.length_finish;
            let output = if self.per_choice { c.has_choice } else { c.has_text };
            if output {
                let at = self.place(t, self.stamp);
                if rec.first_token_ns.is_none() {
                    rec.first_token_ns = Some(at);
                    self.first = Some((t, self.stamp));
                }
                rec.note_chunk_gap(at);
                rec.last_chunk_ns = Some(at);
                rec.chunks += 1;
            }
            if let Some(u) = c.usage {
                rec.input_tokens = u.prompt_tokens;
                rec.output_tokens = u.completion_tokens;
                rec.cached_tokens = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
            }
        }
        if pending.is_empty() {
            self.buf.extend_from_slice(&chunk[used..]);
        } else {
            pending.drain(..used);
            self.buf = pending;
        }
        None
    }

    /// The record once the body has ended at `now`: its end (the last stamp is the finish's),
    /// the server's TTFT and the client's added latency; a stream without `[DONE]` or usage is a
    /// dropped connection, one with `[DONE]` but no usage has its tokens still to count.
    fn finish(self, mut rec: Record, now: u64) -> Answer {
        rec.end_ns = self.place(now, self.stamp).max(rec.last_chunk_ns.unwrap_or(self.start));
        if let (Some(a), Some((observed, Some(s)))) = (self.arrival, self.first) {
            let server = s.saturating_sub(a);
            rec.server_ttft_ns = Some(server);
            rec.added_latency_ns = Some((observed.saturating_sub(self.start).saturating_sub(server) as f64 / self.time_scale) as u64);
        }
        if !self.done && rec.output_tokens.is_none() {
            return fail(rec, "connection_dropped", "the stream closed before [DONE] and usage".into(), None, now);
        }
        let uncounted = rec.output_tokens.is_none().then_some(Uncounted { text: self.text, length_finish: self.length_finish });
        (rec, None, uncounted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's stream: two text chunks, then a finish chunk with empty text, no usage.
    const STREAM: &str = "data: {\"choices\":[{\"text\":\" a\",\"finish_reason\":null}]}\n\n\
        data: {\"choices\":[{\"text\":\" b\",\"finish_reason\":null}]}\n\n\
        data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n\
        data: [DONE]\n\n";

    /// Feeds `STREAM` one event every 10 ms from t = 100 ms into a record of `kind` started at 0.
    fn read(kind: &str) -> Record {
        let mut rec = sweep_results::testing::rec(0, 0, 0, 0, 0);
        (rec.source_kind, rec.first_token_ns, rec.last_chunk_ns, rec.chunks) = (kind.into(), None, None, 0);
        (rec.input_tokens, rec.output_tokens) = (None, None);
        let mut sse = Sse::new(&mut rec, None, 1.0, true);
        for (i, event) in STREAM.split_inclusive("\n\n").enumerate() {
            assert!(sse.feed(&mut rec, event.as_bytes(), (100 + 10 * i as u64) * 1_000_000).is_none());
        }
        let (rec, failure, uncounted) = sse.finish(rec, 140_000_000);
        assert!(failure.is_none() && uncounted.is_some_and(|u| u.length_finish && u.text.as_deref() == Some(" a b")));
        rec
    }

    /// A fixed-length request reads the stream as benchmark_serving does: every chunk with a
    /// choice is an output (its ITL has a gap per chunk, its E2EL ends at the finish chunk);
    /// an AgentX request counts the chunks with text.
    #[test]
    fn fixed_length_requests_count_every_chunk_with_a_choice() {
        let ms = 1_000_000;
        let r = read("random");
        assert_eq!((r.first_token_ns, r.last_chunk_ns, r.chunks), (Some(100 * ms), Some(120 * ms), 3));
        assert_eq!(r.chunk_gaps_ns, vec![10 * ms, 10 * ms]);
        assert_eq!(r.e2el_ns(), Some(120 * ms));
        let r = read("main");
        assert_eq!((r.first_token_ns, r.last_chunk_ns, r.chunks), (Some(100 * ms), Some(110 * ms), 2));
        assert!(r.chunk_gaps_ns.is_empty(), "kept for fixed-length requests only");
    }
}
