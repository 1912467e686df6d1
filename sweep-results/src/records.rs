//! Per-request records: what every target (HTTP client, virtual clock) produces for each request,
//! and their AIPerf-compatible `profile_export.jsonl` form (spec `agentx.md` §5, §8.1).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordPhase {
    Warmup,
    Profiling,
}

/// A failed request: `kind` is the category used in `error_categories`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordError {
    /// e.g. `http_500`, `context_overflow`, `connection_dropped`, `timeout`, `stream_error`.
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl RecordError {
    pub fn is_context_overflow(&self) -> bool {
        self.kind == "context_overflow" || is_overflow_message(&self.message)
    }
}

/// Phrases that mark a context-length error (SGLang, vLLM, OpenAI wording).
pub fn is_overflow_message(m: &str) -> bool {
    let m = m.to_ascii_lowercase();
    [
        "context length",
        "maximum context",
        "exceeds the maximum allowed length",
        "context window",
        "too many tokens",
        "is longer than the model",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// One request as the client observed it. Times are nanoseconds since the point's epoch
/// (Unix time for live runs, virtual time for the simulator).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub phase: RecordPhase,
    pub conversation_id: String,
    pub turn_index: u32,
    pub x_correlation_id: String,
    pub root_correlation_id: String,
    pub worker_id: String,
    pub source_trace_id: String,
    pub source_outer_idx: u32,
    /// `main`, `subagent`, `fa`, `wg`, `aux`.
    pub source_kind: String,
    pub start_ns: u64,
    pub ack_ns: Option<u64>,
    /// First non-empty content / reasoning chunk (a fixed-length `random` request: the first
    /// chunk with a choice, empty text included, as `benchmark_serving` reads it).
    pub first_token_ns: Option<u64>,
    /// Last response chunk carrying output (a fixed-length request: the last with a choice).
    pub last_chunk_ns: Option<u64>,
    /// HTTP body end (the simulator: the finish event).
    pub end_ns: u64,
    /// `usage.prompt_tokens`.
    pub input_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub output_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens` when reported.
    pub cached_tokens: Option<u64>,
    /// The trace's recorded output length (`max_completion_tokens` sent).
    pub expected_output_tokens: Option<u64>,
    pub theoretical_hit_blocks: u64,
    pub theoretical_total_blocks: u64,
    /// SSE chunks seen (never used as a token count).
    pub chunks: u32,
    pub was_cancelled: bool,
    pub error: Option<RecordError>,
    /// Server-side TTFT: engine time from the request's arrival to its first output, when the
    /// server stamps its events (`sweep engine serve`, see `docs/replay.md`).
    #[serde(default)]
    pub server_ttft_ns: Option<u64>,
    /// What the path between the client and the engine added to the first token, in wall
    /// nanoseconds: client-observed TTFT − server-side TTFT.
    #[serde(default)]
    pub added_latency_ns: Option<u64>,
    /// Where the token counts came from when not from the server's `usage`: `tokenized`
    /// (output counted by tokenizing the streamed text, input from the synthesized prompt) or
    /// `budget` (a `length` finish: the output budget sent). Absent: the server's `usage` (or
    /// the engine's own counts on the virtual clock), or no count at all when the counts are None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_source: Option<String>,
    /// Gaps between successive output chunks, ns: `benchmark_serving`'s ITL list. Kept for
    /// fixed-length (`random`) requests only: an AgentX hour would make records far larger.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_gaps_ns: Vec<u64>,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl Record {
    /// A chunk with output arrived at `at`: its gap from the previous one, for the records that
    /// keep them (call before `last_chunk_ns` moves to `at`).
    pub fn note_chunk_gap(&mut self, at: u64) {
        if self.source_kind == "random"
            && let Some(prev) = self.last_chunk_ns
        {
            self.chunk_gaps_ns.push(at.saturating_sub(prev));
        }
    }

    pub fn ok(&self) -> bool {
        self.error.is_none() && !self.was_cancelled
    }
    pub fn ttft_ns(&self) -> Option<u64> {
        self.first_token_ns.map(|f| f.saturating_sub(self.start_ns))
    }
    /// E2EL: last response chunk − start.
    pub fn e2el_ns(&self) -> Option<u64> {
        self.last_chunk_ns.or(Some(self.end_ns)).map(|l| l.saturating_sub(self.start_ns))
    }
    /// ITL = (E2EL − TTFT) / (OSL − 1), OSL ≥ 2.
    pub fn itl_ns(&self) -> Option<f64> {
        let osl = self.output_tokens?;
        if osl < 2 {
            return None;
        }
        Some((self.e2el_ns()? as f64 - self.ttft_ns()? as f64) / (osl - 1) as f64)
    }
    /// (HTTP end − first output chunk) / (OSL − 1).
    pub fn full_response_itl_ns(&self) -> Option<f64> {
        let osl = self.output_tokens?;
        if osl < 2 {
            return None;
        }
        Some((self.end_ns as f64 - self.first_token_ns? as f64) / (osl - 1) as f64)
    }

    /// The AIPerf `profile_export.jsonl` object.
    pub fn to_aiperf(&self) -> Value {
        let mut metrics = serde_json::Map::new();
        let mut put = |k: &str, v: Option<f64>, unit: &str| {
            if let Some(v) = v {
                metrics.insert(k.into(), json!({"value": v, "unit": unit}));
            }
        };
        if self.ok() {
            put("time_to_first_token", self.ttft_ns().map(ms), "ms");
            put("request_latency", self.e2el_ns().map(ms), "ms");
            put("inter_token_latency", self.itl_ns().map(|x| x / 1e6), "ms");
            put("full_response_inter_token_latency", self.full_response_itl_ns().map(|x| x / 1e6), "ms");
            put("output_token_throughput_per_user", self.itl_ns().filter(|x| *x > 0.0).map(|x| 1e9 / x), "tokens/sec/user");
        }
        put("input_sequence_length", self.input_tokens.map(|x| x as f64), "tokens");
        put("output_sequence_length", self.output_tokens.map(|x| x as f64), "tokens");
        if let Some(c) = self.cached_tokens {
            put("cached_tokens", Some(c as f64), "tokens");
        }
        if self.ok() {
            put("server_time_to_first_token", self.server_ttft_ns.map(ms), "ms");
            put("client_added_latency", self.added_latency_ns.map(ms), "ms");
        }
        if !self.chunk_gaps_ns.is_empty() {
            // AIPerf's per-chunk list, in ms.
            let gaps: Vec<f64> = self.chunk_gaps_ns.iter().map(|&g| ms(g)).collect();
            metrics.insert("inter_chunk_latency".into(), json!({"value": gaps, "unit": "ms"}));
        }
        let mut v = json!({
            "metadata": {
                "benchmark_phase": self.phase,
                "conversation_id": self.conversation_id,
                "turn_index": self.turn_index,
                "request_start_ns": self.start_ns,
                "request_ack_ns": self.ack_ns,
                "request_end_ns": self.end_ns,
                "x_correlation_id": self.x_correlation_id,
                "root_correlation_id": self.root_correlation_id,
                "worker_id": self.worker_id,
                "was_cancelled": self.was_cancelled,
                "source_trace_id": self.source_trace_id,
                "source_outer_idx": self.source_outer_idx,
                "source_kind": self.source_kind,
                "theoretical_prefix_cache_hit_blocks": self.theoretical_hit_blocks,
                "theoretical_prefix_cache_total_blocks": self.theoretical_total_blocks,
                "expected_output_sequence_length": self.expected_output_tokens,
                "chunks": self.chunks,
            },
            "metrics": metrics,
            "error": self.error,
        });
        if let Some(src) = &self.token_source {
            v["metadata"]["token_source"] = json!(src);
        }
        v
    }
}

/// The AIPerf export's name, as `sweep replay` writes it.
pub const EXPORT: &str = "profile_export.jsonl";
/// The same export gzip-compressed, as a run's point folders hold it: per-request records are
/// most of a run folder (77 MB for the 13 points of the main job), and gzip makes them 6–7×
/// smaller (`zcat` gives back the AIPerf file byte for byte).
pub const EXPORT_GZ: &str = "profile_export.jsonl.gz";

/// A folder's per-request records: the compressed export, else the plain one.
pub fn export_path(dir: &Path) -> Option<std::path::PathBuf> {
    [EXPORT_GZ, EXPORT].iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// The export's bytes: one AIPerf object per line.
fn export_bytes(records: &[Record]) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(records.len() * 900);
    for r in records {
        serde_json::to_writer(&mut buf, &r.to_aiperf())?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// Writes records as `profile_export.jsonl.gz` atomically. The fastest gzip level: it already
/// gives most of the size (level 6 is another 20 % smaller at twice the time).
pub fn write_jsonl_gz(path: &Path, records: &[Record]) -> std::io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&export_bytes(records)?)?;
    crate::problem::atomic_write(path, &gz.finish()?)
}

/// Writes records as `profile_export.jsonl` (one object per line) atomically.
pub fn write_jsonl(path: &Path, records: &[Record]) -> std::io::Result<()> {
    crate::problem::atomic_write(path, &export_bytes(records)?)
}

/// Appends records to an open JSONL stream (used while a live point runs so nothing is lost
/// if it dies; the final file is rewritten atomically at the end).
pub fn append_jsonl<W: Write>(w: &mut W, records: &[Record]) -> std::io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *w, &r.to_aiperf())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// Why a `profile_export.jsonl` does not read back: the file and (1-based) line.
#[derive(Debug, thiserror::Error)]
pub enum ReadJsonlError {
    #[error("{}: {source}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {source}", .path.display())]
    Read {
        path: PathBuf,
        line: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: not JSON: {source}", .path.display())]
    NotJson {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// A record without a field every record has (`metadata.request_start_ns`, …).
    #[error("{}:{line}: missing `{field}`", .path.display())]
    Missing { path: PathBuf, line: usize, field: &'static str },
}

/// Reads a `profile_export.jsonl` written by sweep or AIPerf back into records, plain or
/// gzip-compressed (told by its first bytes, whatever its name).
pub fn read_jsonl(path: &Path) -> Result<Vec<Record>, ReadJsonlError> {
    let open = |source| ReadJsonlError::Open { path: path.to_path_buf(), source };
    let mut f = std::io::BufReader::new(std::fs::File::open(path).map_err(open)?);
    let gz = f.fill_buf().map_err(open)?.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn BufRead> = if gz { Box::new(std::io::BufReader::new(flate2::read::MultiGzDecoder::new(f))) } else { Box::new(f) };
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| ReadJsonlError::Read { path: path.to_path_buf(), line: i + 1, source })?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(&line).map_err(|source| ReadJsonlError::NotJson { path: path.to_path_buf(), line: i + 1, source })?;
        out.push(from_aiperf(&v).map_err(|field| ReadJsonlError::Missing { path: path.to_path_buf(), line: i + 1, field })?);
    }
    Ok(out)
}

/// A record from its AIPerf form; the error names the missing field.
fn from_aiperf(v: &Value) -> Result<Record, &'static str> {
    let md = v.get("metadata").ok_or("metadata")?;
    let s = |k: &str| md.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let u = |k: &str| md.get(k).and_then(Value::as_u64);
    let m = |k: &str| v.get("metrics").and_then(|m| m.get(k)).and_then(|x| x.get("value")).and_then(Value::as_f64);
    let start = u("request_start_ns").ok_or("metadata.request_start_ns")?;
    let end = u("request_end_ns").ok_or("metadata.request_end_ns")?;
    let ttft = m("time_to_first_token");
    let e2el = m("request_latency");
    let error = match v.get("error") {
        None | Some(Value::Null) => None,
        Some(e) => {
            let kind = ["type", "error_type", "code", "class", "status"]
                .iter()
                .find_map(|k| e.get(*k).map(|x| x.as_str().map(str::to_string).unwrap_or_else(|| x.to_string())))
                .unwrap_or_else(|| "error".into());
            Some(RecordError {
                kind,
                message: e.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
                status: e.get("status").and_then(Value::as_u64).map(|x| x as u16),
            })
        }
    };
    Ok(Record {
        phase: if md.get("benchmark_phase").and_then(Value::as_str) == Some("warmup") {
            RecordPhase::Warmup
        } else {
            RecordPhase::Profiling
        },
        conversation_id: s("conversation_id"),
        turn_index: u("turn_index").unwrap_or(0) as u32,
        x_correlation_id: s("x_correlation_id"),
        root_correlation_id: s("root_correlation_id"),
        worker_id: s("worker_id"),
        source_trace_id: s("source_trace_id"),
        source_outer_idx: u("source_outer_idx").unwrap_or(0) as u32,
        source_kind: s("source_kind"),
        start_ns: start,
        ack_ns: u("request_ack_ns"),
        first_token_ns: ttft.map(|t| start + (t * 1e6).round() as u64),
        last_chunk_ns: e2el.map(|t| start + (t * 1e6).round() as u64),
        end_ns: end,
        input_tokens: m("input_sequence_length").map(|x| x as u64),
        output_tokens: m("output_sequence_length").map(|x| x as u64),
        cached_tokens: m("cached_tokens").map(|x| x as u64),
        expected_output_tokens: u("expected_output_sequence_length"),
        theoretical_hit_blocks: u("theoretical_prefix_cache_hit_blocks").unwrap_or(0),
        theoretical_total_blocks: u("theoretical_prefix_cache_total_blocks").unwrap_or(0),
        chunks: u("chunks").unwrap_or(0) as u32,
        was_cancelled: md.get("was_cancelled").and_then(Value::as_bool).unwrap_or(false),
        error,
        server_ttft_ns: m("server_time_to_first_token").map(|t| (t * 1e6).round() as u64),
        added_latency_ns: m("client_added_latency").map(|t| (t * 1e6).round() as u64),
        token_source: md.get("token_source").and_then(Value::as_str).map(str::to_string),
        chunk_gaps_ns: v
            .pointer("/metrics/inter_chunk_latency/value")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).map(|g| (g * 1e6).round() as u64).collect())
            .unwrap_or_default(),
    })
}

/// Records made up for tests here and in the crates above (`test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub mod testing {
    use super::*;

    pub fn rec(start_ms: u64, ttft_ms: u64, e2el_ms: u64, isl: u64, osl: u64) -> Record {
        let ns = 1_000_000;
        Record {
            phase: RecordPhase::Profiling,
            conversation_id: "t1".into(),
            turn_index: 0,
            x_correlation_id: "x".into(),
            root_correlation_id: "r".into(),
            worker_id: "lane_0".into(),
            source_trace_id: "t1".into(),
            source_outer_idx: 0,
            source_kind: "main".into(),
            start_ns: start_ms * ns,
            ack_ns: Some(start_ms * ns + ns),
            first_token_ns: Some((start_ms + ttft_ms) * ns),
            last_chunk_ns: Some((start_ms + e2el_ms) * ns),
            end_ns: (start_ms + e2el_ms) * ns + 100,
            input_tokens: Some(isl),
            output_tokens: Some(osl),
            cached_tokens: None,
            expected_output_tokens: Some(osl),
            theoretical_hit_blocks: 3,
            theoretical_total_blocks: 4,
            chunks: osl as u32,
            was_cancelled: false,
            error: None,
            server_ttft_ns: None,
            added_latency_ns: None,
            token_source: None,
            chunk_gaps_ns: Vec::new(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    pub use super::testing::rec;
    use super::*;

    #[test]
    fn per_request_metrics_follow_the_definitions() {
        let r = rec(0, 200, 1200, 1000, 101);
        assert_eq!(r.ttft_ns(), Some(200_000_000));
        assert_eq!(r.itl_ns(), Some(10_000_000.0));
        let one = rec(0, 200, 200, 10, 1);
        assert_eq!(one.itl_ns(), None, "ITL needs OSL ≥ 2");
    }

    #[test]
    fn jsonl_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("profile_export.jsonl");
        let mut bad = rec(5, 1, 2, 3, 4);
        bad.error = Some(RecordError { kind: "http_500".into(), message: "boom".into(), status: Some(500) });
        write_jsonl(&p, &[rec(0, 200, 1200, 1000, 101), bad.clone()]).unwrap();
        let back = read_jsonl(&p).unwrap();
        assert_eq!(back[0], rec(0, 200, 1200, 1000, 101));
        assert_eq!(back[1].error, bad.error);
        let line = std::fs::read_to_string(&p).unwrap();
        assert!(line.contains("\"benchmark_phase\":\"profiling\"") && line.contains("\"unit\":\"ms\""));
        // The compressed form reads back the same, and decompresses to the plain file.
        let gz = d.path().join(EXPORT_GZ);
        write_jsonl_gz(&gz, &[rec(0, 200, 1200, 1000, 101), bad.clone()]).unwrap();
        assert_eq!(read_jsonl(&gz).unwrap(), back);
        let mut plain = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()), &mut plain).unwrap();
        assert_eq!(plain, line);
        assert_eq!(export_path(d.path()), Some(gz), "the compressed export first");
    }

    #[test]
    fn overflow_phrases() {
        assert!(is_overflow_message("Requested token count exceeds the maximum allowed length"));
        assert!(!is_overflow_message("internal server error"));
    }
}
