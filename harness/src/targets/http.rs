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

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;

use super::body::{BodyPieces, MessageCache};
use super::h1;
use super::ledger::{Close, Command, Ledger};
use crate::metrics::PointContext;
use crate::prompt::{TokenText, TokenizerVocab, WordVocab};
use crate::records::{Record, RecordError, is_overflow_message};
use crate::results::Status;
use crate::run::launcher::{Server, free_port};
use crate::run::{Job, Outcome as PointOutcome, PointRunner};
use crate::workload::{Event, Failure, Outcome as WlOutcome, RequestId, RequestSpec, TracePlan, Workload};

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
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// A monotonic clock reported as Unix nanoseconds (anchored once per run). Against a
/// time-scaled server (`sweep engine serve --time-scale K`) it runs K times faster than wall
/// time, so think delays shrink and measured latencies are in the server's time, as the virtual
/// clock would see them.
#[derive(Clone, Copy)]
struct Clock {
    t0: Instant,
    epoch: u64,
    scale: f64,
}

impl Clock {
    fn new(scale: f64) -> Self {
        Clock { t0: Instant::now(), epoch: unix_ns(), scale: if scale > 0.0 { scale } else { 1.0 } }
    }
    fn now(&self) -> u64 {
        self.epoch + (self.t0.elapsed().as_nanos() as f64 * self.scale) as u64
    }
    fn instant(&self, ns: u64) -> Instant {
        self.t0 + Duration::from_nanos((ns.saturating_sub(self.epoch) as f64 / self.scale) as u64)
    }
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
    pub fn new(base_url: &str, model: &str) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(4096)
            .tcp_nodelay(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
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
        })
    }

    /// A workload over the traces that fit the server's context (AgentX `--max-context-length`,
    /// the whole-trace filter the virtual clock applies too); the note goes into `ctx.trace_set`.
    pub fn workload(
        &self,
        cfg: crate::workload::WorkloadConfig,
        pool: &[Arc<TracePlan>],
        ctx: &mut PointContext,
    ) -> Result<Workload, String> {
        let pool = match self.context_length {
            Some(c) => {
                let (fit, note) = super::sim::fit_pool(pool, c).map_err(|e| e.to_string())?;
                if let Some(n) = note {
                    ctx.trace_set = format!("{} ({n})", ctx.trace_set);
                }
                fit
            }
            None => pool.to_vec(),
        };
        Workload::new(cfg, pool).map_err(|e| e.to_string())
    }

    /// Model, `/server_info` and the synthesis vocabulary of the server, into the point context:
    /// the reference engine (`sweep engine serve`) is labelled `predicted` with its profiles, any
    /// other server `measured`. Prompts are synthesized with `tokenizer` when given, else with the
    /// tokenizer the server reports when it is readable here, else (the reference engine) its
    /// built-in vocabulary, else the word list (token counts then drift from the trace's).
    /// `info_url`: where `/server_info` is asked (the worker behind a router; else `base_url`).
    pub async fn identify(&mut self, ctx: &mut PointContext, tokenizer: Option<&std::path::Path>, info_url: &str) -> Result<(), String> {
        self.model = self.discover_model().await?;
        ctx.result_kind = "measured".into();
        let info = self.server_info_at(info_url).await;
        // A time-scaled reference engine: the client's clock follows its scale.
        if let Some(k) = info.as_ref().and_then(|i| i["time_scale"].as_f64()).filter(|k| *k > 0.0 && k.is_finite()) {
            self.time_scale = k;
        }
        let reported = info.as_ref().and_then(|i| i["tokenizer_path"].as_str()).map(std::path::PathBuf::from).filter(|p| p.exists());
        let engine_info = info.as_ref().and_then(|i| i.get("engine_info")).and_then(Value::as_object).cloned();
        self.context_length =
            info.as_ref().and_then(|i| ["context_length", "max_req_input_len"].iter().find_map(|k| i[*k].as_u64()).filter(|c| *c > 0));
        let file = tokenizer.map(std::path::Path::to_path_buf).or(reported);
        let (vocab, vocab_name): (Arc<dyn TokenText>, String) = match (&file, &engine_info) {
            (Some(p), _) => (
                Arc::new(TokenizerVocab::from_path(p).map_err(|e| format!("synthesis tokenizer {}: {e}", p.display()))?),
                p.display().to_string(),
            ),
            (None, Some(_)) => (Arc::new(TokenizerVocab::builtin()), "builtin (the reference engine's vocabulary)".into()),
            (None, None) => (Arc::new(WordVocab::default()), "word list (no tokenizer: pass --tokenizer for exact prompt lengths)".into()),
        };
        self.vocab = vocab;
        ctx.profiles = match (info, engine_info) {
            // `sweep engine serve`: real HTTP, but every latency comes from the cost model.
            (Some(info), Some(mut p)) => {
                ctx.result_kind = "predicted".into();
                p.insert("engine".into(), "sweep reference engine (sweep engine serve)".into());
                p.insert("time_scale".into(), info.get("time_scale").cloned().unwrap_or(Value::Null));
                Value::Object(p)
            }
            (Some(info), None) => {
                if let Some(k) = info["result_kind"].as_str() {
                    ctx.result_kind = k.to_string();
                }
                info
            }
            (None, _) => serde_json::json!({}),
        };
        if let Some(m) = ctx.profiles.as_object_mut() {
            m.insert("synthesis_tokenizer".into(), vocab_name.into());
        }
        Ok(())
    }

    /// The first model `/v1/models` lists.
    pub async fn discover_model(&self) -> Result<String, String> {
        let url = format!("{}/v1/models", self.base_url);
        let v: Value = self
            .client
            .get(&url)
            .timeout(INFO_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .json()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        v["data"][0]["id"].as_str().map(str::to_string).ok_or_else(|| format!("{url}: no model listed"))
    }

    /// `/server_info` when the server has one (SGLang and the reference engine do).
    pub async fn server_info(&self) -> Option<Value> {
        self.server_info_at(&self.base_url).await
    }

    async fn server_info_at(&self, base: &str) -> Option<Value> {
        let r = self.client.get(format!("{}/server_info", base.trim_end_matches('/'))).timeout(INFO_TIMEOUT).send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    }

    /// Whether something still accepts TCP connections at the server's address.
    async fn reachable(&self) -> bool {
        let Ok(u) = reqwest::Url::parse(&self.base_url) else { return true };
        let Ok(addrs) = u.socket_addrs(|| None) else { return true };
        for a in addrs {
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(a)).await {
                return true;
            }
        }
        false
    }

    /// Scrapes every `/metrics` URL once into `into`.
    async fn scrape_once(&self, clock: &Clock, into: &std::sync::Mutex<super::scrape::Scrapes>) -> bool {
        let mut any = false;
        for base in &self.metrics_urls {
            let url = format!("{base}/metrics");
            let r = self.client.get(&url).timeout(Duration::from_secs(5)).send().await;
            let at = clock.now();
            let res = match r {
                Ok(r) if r.status().is_success() => r.text().await.map_err(|e| e.to_string()),
                Ok(r) => Err(format!("{url}: HTTP {} (an SGLang server needs --enable-metrics)", r.status().as_u16())),
                Err(e) => Err(format!("{url}: {e}")),
            };
            let mut g = into.lock().expect("scrape lock");
            match res {
                Ok(t) => {
                    g.add(at, base, &t);
                    any = true;
                }
                Err(e) => {
                    g.failures += 1;
                    g.last_error = Some(e);
                }
            }
        }
        any
    }

    /// The request body (prompt synthesis of the messages not sent before: CPU work of
    /// milliseconds for a long new message).
    pub fn body(&self, spec: &RequestSpec) -> BodyPieces {
        spec.http_body_pieces(&self.model, self.vocab.as_ref(), &self.messages)
    }

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

/// A failed request's record: the error (an overflow message becomes `context_overflow`, terminal
/// for the session) and its end.
fn fail(mut rec: Record, kind: &str, message: String, status: Option<u16>, now: u64) -> (Record, Option<Failure>) {
    let overflow = is_overflow_message(&message);
    rec.error = Some(RecordError { kind: if overflow { "context_overflow".into() } else { kind.to_string() }, message, status });
    rec.end_ns = now;
    (rec, Some(if overflow { Failure::ContextOverflow } else { Failure::Error }))
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
    time_scale: f64,
    /// A partial line waiting for the rest.
    buf: Vec<u8>,
    done: bool,
    /// The engine time of the event being read (`: t=<ns>` precedes each event's data lines).
    stamp: Option<u64>,
    /// When the first output was observed, and its stamp.
    first: Option<(u64, Option<u64>)>,
}

impl Sse {
    /// Under a time scale the engine's stamps place the request's events: wall-clock delays
    /// between the engine and this client (the server's front end, delivery, a busy core) would
    /// count K times over on the scaled clock, and the virtual clock has none of them. The
    /// observed times still give the added latency.
    fn new(rec: &mut Record, arrival: Option<u64>, time_scale: f64) -> Sse {
        let stamped = time_scale != 1.0 && arrival.is_some();
        if stamped {
            rec.ack_ns = Some(rec.start_ns);
        }
        Sse { start: rec.start_ns, arrival, stamped, time_scale, buf: Vec::new(), done: false, stamp: None, first: None }
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
            let Some(c) = ChunkInfo::parse(payload) else { continue };
            if let Some(e) = c.error {
                return Some(e);
            }
            if c.has_text {
                let at = self.place(t, self.stamp);
                if rec.first_token_ns.is_none() {
                    rec.first_token_ns = Some(at);
                    self.first = Some((t, self.stamp));
                }
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
    /// dropped connection.
    fn finish(self, mut rec: Record, now: u64) -> (Record, Option<Failure>) {
        rec.end_ns = self.place(now, self.stamp).max(rec.last_chunk_ns.unwrap_or(self.start));
        if let (Some(a), Some((observed, Some(s)))) = (self.arrival, self.first) {
            let server = s.saturating_sub(a);
            rec.server_ttft_ns = Some(server);
            rec.added_latency_ns = Some((observed.saturating_sub(self.start).saturating_sub(server) as f64 / self.time_scale) as u64);
        }
        if !self.done && rec.output_tokens.is_none() {
            return fail(rec, "connection_dropped", "the stream closed before [DONE] and usage".into(), None, now);
        }
        (rec, None)
    }
}

/// What the client reads from one streamed chunk.
struct ChunkInfo {
    /// Non-empty content or reasoning text.
    has_text: bool,
    usage: Option<UsageView>,
    /// A mid-stream error event: message and code.
    error: Option<(String, Option<u16>)>,
}

/// The parts of a chat completion chunk the client reads, borrowed from the line (a long reply
/// is hundreds of chunks; a full JSON tree per chunk was a visible share of the client's CPU).
#[derive(serde::Deserialize)]
struct ChunkView<'a> {
    #[serde(default, borrow)]
    choices: Option<FirstChoice<'a>>,
    #[serde(default)]
    usage: Option<UsageView>,
    #[serde(default)]
    error: Option<Value>,
}

/// The first of a chunk's `choices` (the client asks for one), the others skipped: no vector
/// allocated per streamed token.
struct FirstChoice<'a>(Option<ChoiceView<'a>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<ChoiceView<'a>>()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(FirstChoice(first))
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct ChoiceView<'a> {
    #[serde(default, borrow)]
    delta: Option<DeltaView<'a>>,
}

#[derive(serde::Deserialize)]
struct DeltaView<'a> {
    #[serde(default, borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct UsageView {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<DetailsView>,
}

#[derive(serde::Deserialize)]
struct DetailsView {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl ChunkInfo {
    /// `None` for a line that is not JSON. Chunks of unexpected shapes (a number where text
    /// should be) are read leniently through a JSON tree.
    fn parse(data: impl AsRef<[u8]>) -> Option<ChunkInfo> {
        let data = data.as_ref();
        let error = |e: &Value| {
            let msg = e["message"].as_str().map(str::to_string).unwrap_or_else(|| e.to_string());
            (msg, e["code"].as_u64().map(|c| c as u16))
        };
        if let Ok(v) = serde_json::from_slice::<ChunkView>(data) {
            let nonempty = |s: &Option<std::borrow::Cow<str>>| s.as_deref().is_some_and(|s| !s.is_empty());
            let has_text = v
                .choices
                .as_ref()
                .and_then(|c| c.0.as_ref())
                .and_then(|c| c.delta.as_ref())
                .is_some_and(|d| nonempty(&d.content) || nonempty(&d.reasoning_content) || nonempty(&d.reasoning));
            return Some(ChunkInfo { has_text, usage: v.usage, error: v.error.as_ref().filter(|e| !e.is_null()).map(error) });
        }
        let v: Value = serde_json::from_slice(data).ok()?;
        let delta = &v["choices"][0]["delta"];
        let u = v.get("usage").filter(|u| u.is_object());
        Some(ChunkInfo {
            has_text: ["content", "reasoning_content", "reasoning"].iter().any(|k| delta[*k].as_str().is_some_and(|s| !s.is_empty())),
            usage: u.map(|u| UsageView {
                prompt_tokens: u["prompt_tokens"].as_u64(),
                completion_tokens: u["completion_tokens"].as_u64(),
                prompt_tokens_details: Some(DetailsView { cached_tokens: u["prompt_tokens_details"]["cached_tokens"].as_u64() }),
            }),
            error: v.get("error").filter(|e| !e.is_null()).map(error),
        })
    }
}

fn timed_out(after: Duration) -> RecordError {
    RecordError { kind: "timeout".into(), message: format!("no complete answer within {:.1} s", after.as_secs_f64()), status: None }
}

/// What a live run produced.
pub struct LiveRun {
    pub records: Vec<Record>,
    pub outcome: Option<WlOutcome>,
    pub profiling: Option<(u64, u64)>,
    pub interrupted: bool,
    /// Why the run stopped early (server death), if it did.
    pub stopped: Option<String>,
    /// Every `/metrics` scrape of the point.
    pub scrapes: super::scrape::Scrapes,
    /// The harness's CPU seconds during the replay, its peak busy share of the cores, and the
    /// wall seconds.
    pub client_cpu_seconds: f64,
    pub client_cpu_max: f64,
    pub wall_seconds: f64,
}

impl LiveRun {
    /// `server_metrics_export.json` for the profiling window, and its summary for the aggregate;
    /// `None` when nothing was scraped.
    pub fn server_metrics(&self) -> Option<(Value, Value)> {
        if self.scrapes.scrapes.is_empty() {
            return None;
        }
        // From profiling start to the last scrape (drained requests finish after the deadline).
        let from = self.profiling.map(|p| p.0).unwrap_or(0);
        let export = self.scrapes.export(from, u64::MAX);
        let summary = super::scrape::summary(&export);
        Some((export, summary))
    }

    /// Copies the client measurements and server metrics into a point's context.
    pub fn fill(&self, ctx: &mut PointContext) -> Option<Value> {
        ctx.profile_duration_s = self.profiling.map(|(a, d)| (d - a) as f64 / 1e9).unwrap_or(0.0);
        ctx.profile_start_ns = self.profiling.map(|p| p.0);
        ctx.client_cpu_max = Some(self.client_cpu_max);
        ctx.client_cpu_seconds = Some(self.client_cpu_seconds);
        let (export, summary) = self.server_metrics()?;
        ctx.server_metrics = Some(summary);
        Some(export)
    }
}

/// What the replay loop feeds the workload next.
enum Next {
    Event(Event),
    Done { id: RequestId, failure: Option<Failure>, ended: u64 },
}

/// Drives `wl` against `target` in real time until it finishes, `cancel` is set, or `alive`
/// reports the server gone (checked every 200 ms).
pub async fn replay(
    target: &HttpTarget,
    wl: &mut Workload,
    cancel: &AtomicBool,
    mut alive: impl FnMut() -> Result<(), String>,
    mut progress: impl FnMut(&super::ledger::Progress),
) -> LiveRun {
    let clock = Clock::new(target.time_scale);
    let mut cpu = super::scrape::CpuSampler::new();
    let scrapes = Arc::new(std::sync::Mutex::new(super::scrape::Scrapes::default()));
    let scraper = {
        let (t, s) = (target.clone(), scrapes.clone());
        tokio::spawn(async move {
            // Every second of wall time; a server without /metrics is tried a few times, then left alone.
            let mut every = tokio::time::interval(Duration::from_secs(1));
            let mut misses = 0;
            loop {
                every.tick().await;
                if t.scrape_once(&clock, &s).await {
                    misses = 0;
                } else {
                    misses += 1;
                    if misses >= 5 && s.lock().expect("scrape lock").scrapes.is_empty() {
                        break;
                    }
                }
            }
        })
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<(RequestId, Record, Option<Failure>)>();
    let mut ledger = Ledger::new();
    // Task and wall-clock start of each request in flight.
    let mut inflight: HashMap<RequestId, (tokio::task::JoinHandle<()>, Instant)> = HashMap::new();
    let mut actions = Vec::new();
    let mut commands = Vec::new();
    let mut run = LiveRun {
        records: Vec::new(),
        outcome: None,
        profiling: None,
        interrupted: false,
        stopped: None,
        scrapes: Default::default(),
        client_cpu_seconds: 0.0,
        client_cpu_max: 0.0,
        wall_seconds: 0.0,
    };
    let mut unreachable_checked = 0u64;
    let mut event = Some(Next::Event(Event::Start));
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        if let Some(next) = event.take() {
            let now = clock.now();
            actions.clear();
            match next {
                Next::Event(ev) => wl.handle(now, ev, &mut actions),
                Next::Done { id, failure, ended } => wl.handle_done_at(now, ended, id, failure, &mut actions),
            }
            ledger.apply(now, &mut actions, &mut commands);
            for c in commands.drain(..) {
                match c {
                    Command::Send(spec) => {
                        let id = spec.id;
                        let rec = ledger.open_record(id).expect("a sent request is open").clone();
                        let (t, tx) = (target.clone(), tx.clone());
                        let h = tokio::spawn(async move {
                            // Synthesis off the I/O threads, so no stream's chunks wait behind it.
                            let (t2, s2) = (t.clone(), spec.clone());
                            let build = tokio::task::spawn_blocking(move || t2.body(&s2));
                            let body = if t.time_scale != 1.0 {
                                // The head now, the body when built: on the scaled clock the
                                // synthesis would otherwise delay the session K-fold.
                                h1::Body::Later(Box::pin(async move { build.await.map(|b| b.parts).map_err(|e| e.to_string()) }))
                            } else {
                                h1::Body::Ready(build.await.unwrap_or_else(|_| t.body(&spec)).parts)
                            };
                            let (rec, f) = t.send_body(&spec, body, rec, move || clock.now()).await;
                            let _ = tx.send((id, rec, f));
                        });
                        inflight.insert(id, (h, Instant::now()));
                    }
                    Command::Cancel(id) => {
                        if let Some((h, _)) = inflight.remove(&id) {
                            h.abort();
                        }
                    }
                }
            }
            if ledger.is_finished() {
                break;
            }
        }
        let wake = ledger.wake();
        let sleep_to = wake.map(|w| clock.instant(w)).unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            Some((id, rec, f)) = rx.recv() => {
                if inflight.remove(&id).is_some() {
                    // A refused or dropped connection may mean the server is gone: check (at most
                    // every 20 ms of wall time: a dying server drops streams a moment before its
                    // listener closes) and stop before the failure reaches the workload, rather
                    // than failing every session into a live abort.
                    let conn = rec.error.as_ref().is_some_and(|e| e.kind == "connection_error" || e.kind == "connection_dropped");
                    let Some(ended) = ledger.end(id, Some(rec)).map(|r| r.end_ns) else { continue };
                    let wall_ms = clock.t0.elapsed().as_millis() as u64 + 20;
                    if conn && wall_ms >= unreachable_checked + 20 {
                        unreachable_checked = wall_ms;
                        if !target.reachable().await {
                            run.stopped = Some(format!(
                                "the server at {} stopped accepting connections mid-point; the {} records so far are kept",
                                target.base_url,
                                ledger.len()
                            ));
                            break;
                        }
                    }
                    // Its stream's delays count from when it ended on the server's clock (stamped
                    // under a time scale), not from when the end reached this client.
                    event = Some(Next::Done { id, failure: f, ended });
                }
            }
            _ = tokio::time::sleep_until(sleep_to.into()), if wake.is_some() => {
                ledger.woke();
                event = Some(Next::Event(Event::Wake));
            }
            _ = tick.tick() => {
                let now = clock.now();
                ledger.progress.now_ns = now;
                cpu.tick();
                for (id, (h, sent)) in inflight.iter_mut() {
                    if sent.elapsed() >= target.request_timeout {
                        h.abort();
                        let Some(open) = ledger.open_record(*id) else { continue };
                        let mut rec = open.clone();
                        rec.error = Some(timed_out(target.request_timeout));
                        rec.end_ns = now;
                        // Answered through the channel like any end; not again before then.
                        *sent = Instant::now();
                        let _ = tx.send((*id, rec, Some(Failure::Error)));
                    }
                }
                progress(&ledger.progress);
                if cancel.load(Ordering::Relaxed) {
                    run.interrupted = true;
                    break;
                }
                if let Err(e) = alive() {
                    run.stopped = Some(format!("server died mid-point ({e}); the {} records so far are kept", ledger.len()));
                    break;
                }
            }
        }
    }
    let now = clock.now();
    for (_, (h, _)) in inflight.drain() {
        h.abort();
    }
    run.profiling = ledger.profiling;
    run.outcome = ledger.outcome.take();
    let records = ledger.finish(now, if run.stopped.is_some() { Close::ServerGone } else { Close::Cancelled });
    // One last scrape so the window's counters include the drained requests.
    scraper.abort();
    if run.stopped.is_none() {
        target.scrape_once(&clock, &scrapes).await;
    }
    cpu.tick();
    run.scrapes = std::mem::take(&mut *scrapes.lock().expect("scrape lock"));
    run.client_cpu_seconds = cpu.cpu_seconds();
    run.client_cpu_max = cpu.max_busy;
    run.wall_seconds = cpu.wall_seconds();
    run.records = records;
    run
}

/// Runs plan points against a server over HTTP: an existing one (`url`) or one started per
/// point from its resolved command (`local`).
pub struct HttpRunner {
    /// `Some(url)`: an existing server; `None`: start each point's command.
    pub url: Option<String>,
    /// Replace the recipe's program with `sweep engine serve` (the reference engine's live twin).
    pub engine_twin: bool,
    /// The trace set each point replays.
    pub pools: Arc<super::pools::PointPools>,
    pub duration_s: Option<f64>,
    pub health_timeout: Duration,
    /// Profiles of the reference engine when `engine_twin` (default: from the point's runner and model).
    pub profiles: super::sim::ProfileChoice,
    /// Synthesis tokenizer (`tokenizer.json`); default: what the server reports, see [`HttpTarget::identify`].
    pub tokenizer: Option<std::path::PathBuf>,
}

impl HttpRunner {
    /// Replays a point against `base_url`; `worker_url` is the server itself when `base_url` is a
    /// router in front of it (its `/server_info` identifies the engine).
    fn live(&self, job: &Job, base_url: &str, worker_url: &str, mut alive: impl FnMut() -> Result<(), String>) -> PointOutcome {
        let p = &job.point;
        let mut ctx = PointContext {
            identity: crate::run::identity(p),
            num_gpus: p.gpus.max(1),
            result_kind: "measured".into(),
            profiles: Value::Null,
            target: base_url.to_string(),
            seed: job.seed,
            concurrency: p.conc,
            profile_duration_s: 0.0,
            ..Default::default()
        };
        // One thread for the I/O (synthesis runs on the blocking pool): cross-thread wake-ups for
        // every streamed chunk cost about 40 % of the client's CPU.
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(e) => return PointOutcome { status: Status::Failed { reason: format!("runtime: {e}") }, records: Vec::new(), ctx },
        };
        let mut cfg = super::sim::workload_config(p, job.seed, self.duration_s);
        cfg.run_id = crate::workload::random_benchmark_id();
        ctx.benchmark_id = cfg.run_id.clone();
        let res = rt.block_on(async {
            let mut t = HttpTarget::new(base_url, "")?;
            t.identify(&mut ctx, self.tokenizer.as_deref(), worker_url).await?;
            let set = self.pools.pool_for(p)?;
            ctx.trace_set = set.trace_set.clone();
            let mut wl = t.workload(cfg, &set.plans, &mut ctx)?;
            // Behind a router the engine's metrics are the worker's.
            let w = worker_url.trim_end_matches('/').to_string();
            if !t.metrics_urls.contains(&w) {
                t.metrics_urls.push(w);
            }
            Ok::<_, String>(replay(&t, &mut wl, &job.cancel, &mut alive, |_| {}).await)
        });
        let run = match res {
            Ok(r) => r,
            Err(e) => return PointOutcome { status: Status::Failed { reason: e }, records: Vec::new(), ctx },
        };
        if let Some(export) = run.fill(&mut ctx)
            && let Err(e) = crate::results::write_json(&job.dir.join("server_metrics_export.json"), &export)
        {
            tracing::warn!("server_metrics_export.json: {e}");
        }
        let status = if let Some(s) = &run.stopped {
            Status::Failed { reason: s.clone() }
        } else {
            super::point_status(run.interrupted, run.outcome.as_ref(), &mut ctx, "the workload stopped before finishing")
        };
        PointOutcome { status, records: run.records, ctx }
    }
}

impl PointRunner for HttpRunner {
    fn max_parallel(&self) -> usize {
        1
    }

    fn run(&self, job: &Job) -> PointOutcome {
        if let Some(url) = &self.url {
            return self.live(job, url, url, || Ok(()));
        }
        let failed = |reason: String| PointOutcome {
            status: Status::Failed { reason },
            records: Vec::new(),
            ctx: PointContext { identity: crate::run::identity(&job.point), num_gpus: job.point.gpus.max(1), ..Default::default() },
        };
        let Some(launch) = &job.point.launch else { return failed("point has no resolved server command".into()) };
        if let Err(e) = std::fs::create_dir_all(&job.dir) {
            return failed(format!("{}: {e}", job.dir.display()));
        }
        let argv = match self.worker_argv(job, launch) {
            Ok(a) => a,
            Err(e) => return failed(e),
        };
        let env: Vec<(String, String)> = launch.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut worker = match start_healthy(argv, &env, &job.dir.join("server.log"), self.health_timeout, &job.cancel) {
            Ok(s) => s,
            Err(e) => return failed(e),
        };
        // A real recipe's router goes in front of the worker (`<worker>` is the worker's URL); the
        // reference engine models the router in process instead (`--router-args`).
        let mut router = None;
        if let Some(r) = launch.router_argv.as_ref().filter(|_| !self.engine_twin) {
            let argv = r.iter().map(|a| a.replace("<worker>", &worker.base_url)).collect();
            let env: Vec<(String, String)> = launch.router_env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            match start_healthy(argv, &env, &job.dir.join("router.log"), self.health_timeout, &job.cancel) {
                Ok(s) => router = Some(s),
                Err(e) => {
                    worker.stop(Duration::from_secs(5));
                    return failed(format!("router: {e}"));
                }
            }
        }
        let base = router.as_ref().unwrap_or(&worker).base_url.clone();
        let worker_url = worker.base_url.clone();
        let procs = std::sync::Mutex::new((worker, router));
        let out = self.live(job, &base, &worker_url, || {
            let mut g = procs.lock().expect("lock");
            g.0.alive()?;
            match g.1.as_mut() {
                Some(r) => r.alive().map_err(|e| format!("router: {e}")),
                None => Ok(()),
            }
        });
        let (mut worker, router) = procs.into_inner().expect("lock");
        if let Some(mut r) = router {
            r.stop(Duration::from_secs(10));
        }
        worker.stop(Duration::from_secs(10));
        out
    }
}

impl HttpRunner {
    /// The worker's argv: the recipe's command, or the same flags served by `sweep engine serve`
    /// with the point's hardware and model profiles and the recipe's router flags.
    fn worker_argv(&self, job: &Job, launch: &crate::recipe::serving::Launch) -> Result<Vec<String>, String> {
        let mut argv = launch.worker_argv.clone();
        if self.engine_twin {
            let flags_at = argv.iter().position(|a| a.starts_with("--")).unwrap_or(argv.len());
            let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "sweep".into());
            argv.splice(..flags_at, [exe, "engine".into(), "serve".into()]);
            let hardware = match (&self.profiles.hardware, job.point.row.get("runner").and_then(Value::as_str)) {
                (Some(h), _) => h.clone(),
                // The same best profile the virtual clock would use for this model.
                (None, Some(r)) => {
                    super::sim::best_for_runner(r, super::pools::point_model(&job.point).as_ref()).map_err(|e| e.to_string())?.name
                }
                (None, None) => return Err("no hardware: the point has no `runner`; pass --hardware NAME".into()),
            };
            argv.push(format!("--hardware={hardware}"));
            if let Some(m) = &self.profiles.model {
                argv.push(format!("--engine-model={m}"));
            }
            if let Some(r) = &launch.router_argv {
                argv.push(format!("--router-args={}", super::sim::flags_only(r).join(" ")));
            }
        }
        Ok(argv)
    }
}

/// Starts a server on a free loopback port (`--host`/`--port` appended) and waits for `/health`.
fn start_healthy(
    mut argv: Vec<String>,
    env: &[(String, String)],
    log: &std::path::Path,
    timeout: Duration,
    cancel: &Arc<std::sync::atomic::AtomicBool>,
) -> Result<Server, String> {
    let port = free_port().map_err(|e| format!("no free port: {e}"))?;
    argv.extend(["--host".into(), "127.0.0.1".into(), "--port".into(), port.to_string()]);
    let mut server = Server::start(&argv, env, log, format!("http://127.0.0.1:{port}")).map_err(|e| e.to_string())?;
    if let Err(e) = server.wait_healthy(timeout, log, cancel) {
        server.stop(Duration::from_secs(5));
        return Err(e.to_string());
    }
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference engine's real HTTP server in process (time-scaled), ready.
    async fn engine_server() -> engine::server::Server {
        use engine::server::engine_core::EngineCore;
        let flags: Vec<String> =
            ["--model-path", "deepseek-ai/DeepSeek-V4.1-Flash", "--tp", "4", "--hardware", "gb300", "--port", "0", "--time-scale", "100"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let (cfg, rest) = engine::server::ServeConfig::from_argv(&flags, |_| None).unwrap();
        let core =
            EngineCore::from_args(&rest, &cfg.router_args, &Default::default(), cfg.engine_model.as_deref(), &cfg.hardware, cfg.seed)
                .unwrap();
        let server = engine::server::Server::start(cfg, core).await.unwrap();
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
                    let (rec, f) = t.send_body(&spec, body, super::super::record_for(&spec, 0), || clock.now()).await;
                    assert!(f.is_none() && rec.error.is_none(), "request {n}: {:?}", rec.error);
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

    #[test]
    fn chunks_are_read_for_text_usage_and_errors() {
        let c = ChunkInfo::parse(
            r#"{"id":"a","choices":[{"index":0,"delta":{"reasoning_content":null,"content":"Hi \"x\"\n"},"finish_reason":null}]}"#,
        )
        .unwrap();
        assert!(c.has_text && c.usage.is_none() && c.error.is_none());
        let c = ChunkInfo::parse(r#"{"choices":[{"delta":{"reasoning_content":"think","content":null}}]}"#).unwrap();
        assert!(c.has_text);
        // The role chunk and the finish chunk carry no text.
        assert!(!ChunkInfo::parse(r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap().has_text);
        assert!(!ChunkInfo::parse(r#"{"choices":[{"delta":{},"finish_reason":"length"}],"usage":null}"#).unwrap().has_text);
        let c = ChunkInfo::parse(
            r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":7,"total_tokens":127,"prompt_tokens_details":{"cached_tokens":64}}}"#,
        )
        .unwrap();
        let u = c.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.prompt_tokens_details.and_then(|d| d.cached_tokens)),
            (Some(120), Some(7), Some(64))
        );
        let c = ChunkInfo::parse(r#"{"object":"error","error":{"message":"out of memory","code":503}}"#).unwrap();
        assert_eq!(c.error, Some(("out of memory".to_string(), Some(503))));
        // An odd shape is read leniently: a number for text is no text, the usage still counts.
        let c = ChunkInfo::parse(r#"{"choices":null,"usage":{"prompt_tokens":"12","completion_tokens":3}}"#).unwrap();
        assert!(!c.has_text);
        assert_eq!(c.usage.map(|u| (u.prompt_tokens, u.completion_tokens)), Some((None, Some(3))));
        assert!(ChunkInfo::parse("not json").is_none());
        // The first choice is read, later ones skipped; no choice is no text.
        assert!(
            ChunkInfo::parse(r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":""}},{"x":[1,{"y":2}]}]}"#).unwrap().has_text
        );
        assert!(!ChunkInfo::parse(r#"{"choices":[{"delta":{"content":""}},{"delta":{"content":"b"}}]}"#).unwrap().has_text);
        assert!(!ChunkInfo::parse(r#"{"choices":[],"usage":null}"#).unwrap().has_text);
    }
}
