//! Mooncake JSONL (one request per line) → Weka-shaped traces.
//!
//! Lines sharing a `session_id` become one trace (in line order); a line without one is a trace of
//! its own. Start times come from `timestamp` (ms) when present, else from cumulative `delay` (ms).
//! `hash_ids` keep their meaning: blocks of `block_size` tokens (mooncake's default 512).

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use super::lines::MAX_ID_BYTES;
use super::{Entry, Request, Trace, TraceError};
use crate::problem::{excerpt, excerpt_quoted};

pub const DEFAULT_BLOCK_SIZE: u32 = 512;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    timestamp: Option<f64>,
    #[serde(default)]
    input_length: Option<u64>,
    #[serde(default)]
    output_length: Option<u64>,
    #[serde(default)]
    hash_ids: Vec<u64>,
    #[serde(default)]
    text_input: Option<serde_json::Value>,
    #[serde(default)]
    messages: Option<serde_json::Value>,
    #[serde(default)]
    tools: Option<serde_json::Value>,
    #[serde(default)]
    delay: Option<f64>,
    #[serde(default)]
    session_id: Option<serde_json::Value>,
    #[serde(default)]
    headers: Option<serde_json::Value>,
    #[serde(default)]
    extra: Option<serde_json::Value>,
}

/// Accumulates mooncake lines of one file into traces.
pub struct Collector {
    path: String,
    block_size: u32,
    order: Vec<String>,
    /// Per session: its requests, its clock (the last start time, seconds) and its first line.
    sessions: HashMap<String, (Vec<Request>, f64, usize)>,
    /// Sessions with a bad line: dropped whole (reported once, at that line).
    bad: HashSet<String>,
}

impl Collector {
    pub fn new(path: &str, block_size: u32) -> Self {
        Self { path: path.to_string(), block_size, order: Vec::new(), sessions: HashMap::new(), bad: HashSet::new() }
    }

    /// Adds one line. An error about a line of a known session drops the whole session (the
    /// caller fails the read or, skipping invalid traces, warns once).
    pub fn push(&mut self, line: usize, text: &str) -> Result<(), TraceError> {
        let err = |id: &str, field: &str, message: String| TraceError::Invalid {
            path: self.path.clone(),
            line,
            trace_id: if id.is_empty() { "(mooncake line)".into() } else { excerpt(id) },
            field: field.to_string(),
            message,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let l: Line = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            err("", &excerpt(&field), excerpt_quoted(&e.into_inner().to_string()))
        })?;
        let key = match &l.session_id {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => format!("line{line}"),
        };
        if self.bad.contains(&key) {
            return Ok(());
        }
        let checked = self.check(&l, &key).map_err(|(field, message)| err(&key, field, message));
        if checked.is_err() {
            self.sessions.remove(&key);
            self.bad.insert(key);
            return checked.map(|_| ());
        }
        let (input, t) = checked?;
        if !self.sessions.contains_key(&key) {
            self.order.push(key.clone());
        }
        let (reqs, clock, _) = self.sessions.entry(key).or_insert_with(|| (Vec::new(), 0.0, line));
        *clock = t;
        reqs.push(Request {
            t,
            model: String::new(),
            input_tokens: input,
            output_tokens: l.output_length.unwrap_or(1),
            hash_ids: l.hash_ids,
            api_time: None,
            think_time: l.delay.map(|d| d / 1000.0),
            ttft: None,
            input_types: None,
            output_types: None,
            stop: None,
        });
        Ok(())
    }

    /// The line's input length and start time (seconds), or the field that is wrong and why.
    fn check(&self, l: &Line, key: &str) -> Result<(u64, f64), (&'static str, String)> {
        if key.len() > MAX_ID_BYTES {
            return Err(("session_id", format!("is {} bytes; ids are at most {MAX_ID_BYTES} bytes", key.len())));
        }
        if l.text_input.is_some() || l.messages.is_some() || l.tools.is_some() {
            let m = "literal prompts are not replayed as AgentX trees: give `input_length` and `hash_ids` instead";
            return Err(("text_input/messages", m.into()));
        }
        let _ = (&l.headers, &l.extra);
        let input = l.input_length.ok_or(("input_length", "missing: every mooncake line needs its input length in tokens".into()))?;
        let clock = self.sessions.get(key).map(|s| s.1);
        let t = match (l.timestamp, l.delay) {
            (Some(ts), _) => ts / 1000.0,
            (None, Some(d)) => clock.unwrap_or(0.0) + d / 1000.0,
            (None, None) => clock.unwrap_or(0.0),
        };
        if !t.is_finite() || t < 0.0 {
            return Err(("timestamp", "must be a finite number of milliseconds ≥ 0 (a `delay` too)".into()));
        }
        if let Some(prev) = clock.filter(|&prev| t < prev) {
            let m = format!(
                "starts at {:.3} s, before the session's previous request ({prev:.3} s): a session's lines must be in time order; sort them by `timestamp`",
                t
            );
            return Err(("timestamp", m));
        }
        Ok((input, t))
    }

    /// The traces, each with the line of its first request, in order of first appearance.
    pub fn finish(self) -> Vec<(usize, Trace)> {
        let mut sessions = self.sessions;
        self.order
            .into_iter()
            .filter_map(|key| {
                let (mut reqs, _, line) = sessions.remove(&key)?;
                let t0 = reqs.iter().map(|r| r.t).fold(f64::INFINITY, f64::min);
                for r in &mut reqs {
                    r.t -= t0;
                }
                let trace = Trace {
                    id: key,
                    models: Vec::new(),
                    block_size: self.block_size,
                    hash_id_scope: "local".into(),
                    tool_tokens: 0,
                    system_tokens: 0,
                    requests: reqs.into_iter().map(Entry::Streaming).collect(),
                    totals: None,
                };
                Some((line, trace))
            })
            .collect()
    }
}
