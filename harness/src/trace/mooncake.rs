//! Mooncake JSONL (one request per line) → Weka-shaped traces.
//!
//! Lines sharing a `session_id` become one trace (in line order); a line without one is a trace of
//! its own. Start times come from `timestamp` (ms) when present, else from cumulative `delay` (ms).
//! `hash_ids` keep their meaning: blocks of `block_size` tokens (mooncake's default 512).

use std::collections::HashMap;

use serde::Deserialize;

use super::{Entry, Request, Trace, TraceError};

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
    sessions: HashMap<String, (Vec<Request>, f64)>,
}

impl Collector {
    pub fn new(path: &str, block_size: u32) -> Self {
        Self { path: path.to_string(), block_size, order: Vec::new(), sessions: HashMap::new() }
    }

    pub fn push(&mut self, line: usize, text: &str) -> Result<(), TraceError> {
        let err = |field: &str, message: String| TraceError::Invalid {
            path: self.path.clone(),
            line,
            trace_id: "(mooncake line)".into(),
            field: field.to_string(),
            message,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let l: Line = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            err(&field, e.into_inner().to_string())
        })?;
        if l.text_input.is_some() || l.messages.is_some() || l.tools.is_some() {
            return Err(err(
                "text_input/messages",
                "literal prompts are not replayed as AgentX trees: give `input_length` and `hash_ids` instead".into(),
            ));
        }
        let _ = (&l.headers, &l.extra);
        let input =
            l.input_length.ok_or_else(|| err("input_length", "missing: every mooncake line needs its input length in tokens".into()))?;
        let output = l.output_length.unwrap_or(1);
        let key = match &l.session_id {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => format!("line{line}"),
        };
        if !self.sessions.contains_key(&key) {
            self.order.push(key.clone());
        }
        let (reqs, clock) = self.sessions.entry(key).or_insert_with(|| (Vec::new(), 0.0));
        let t = match (l.timestamp, l.delay) {
            (Some(ts), _) => ts / 1000.0,
            (None, Some(d)) => *clock + d / 1000.0,
            (None, None) => *clock,
        };
        *clock = t;
        reqs.push(Request {
            t,
            model: String::new(),
            input_tokens: input,
            output_tokens: output,
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

    pub fn finish(self) -> Vec<Trace> {
        let mut sessions = self.sessions;
        self.order
            .into_iter()
            .map(|key| {
                let (mut reqs, _) = sessions.remove(&key).unwrap_or_default();
                let t0 = reqs.iter().map(|r| r.t).fold(f64::INFINITY, f64::min);
                for r in &mut reqs {
                    r.t -= t0;
                }
                Trace {
                    id: key,
                    models: Vec::new(),
                    block_size: self.block_size,
                    hash_id_scope: "local".into(),
                    tool_tokens: 0,
                    system_tokens: 0,
                    requests: reqs.into_iter().map(Entry::Streaming).collect(),
                    totals: None,
                }
            })
            .collect()
    }
}
