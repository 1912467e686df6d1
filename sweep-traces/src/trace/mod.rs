//! AgentX traces: the Weka / kv-cache-tester model, readers (Weka JSON/JSONL, gzip, directories;
//! mooncake JSONL), the synthetic generator and corpus statistics.
//!
//! A [`Trace`] keeps every field of the file (writing it back loses nothing); after reading, every
//! subagent's inner request times are absolute root-trace seconds (both conventions are accepted,
//! see [`Trace::normalize`]).

pub mod against;
pub mod chains;
pub mod fit;
pub mod like;
mod like_plan;
pub mod like_write;
pub mod lines;
pub mod mooncake;
pub mod published;
pub mod read;
pub mod stats;
pub mod synth;
mod tagged;

use serde::{Deserialize, Serialize};

pub use read::{ReadOptions, TraceFormat, TraceSet, read_traces};

/// Errors from reading or validating traces. Each names the file, the line (one trace per line in
/// JSONL; 1 for a single JSON file), the trace id when known, the field and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: trace {trace_id}: field `{field}`: {message}")]
    Invalid { path: String, line: usize, trace_id: String, field: String, message: String },
    /// A file over one of the reading limits (`lines.rs`); reading it stops here. Line 0: the
    /// file as a whole.
    #[error("{path}{}: {message}\n    fix: {fix}", if *.line > 0 { format!(":{line}") } else { String::new() })]
    Limit { path: String, line: usize, message: String, fix: String },
    #[error("{path}: no traces found (expected .json, .jsonl or .jsonl.gz files with Weka or mooncake records)")]
    Empty { path: String },
    /// A `like:` corpus whose statistics cannot be read or met.
    #[error("{0}")]
    Synthesis(String),
}

/// One recorded agent session in the Weka / kv-cache-tester format (strict schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    pub id: String,
    #[serde(default)]
    pub models: Vec<String>,
    pub block_size: u32,
    pub hash_id_scope: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub system_tokens: u64,
    pub requests: Vec<Entry>,
    /// Opaque summary; kept so that a trace written back is unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<serde_json::Value>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One top-level entry: a main-agent request (`n` / `s`) or a subagent group.
/// Deserialized by hand (`tagged.rs`): the derived tagged form buffered every entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum Entry {
    #[serde(rename = "n")]
    NonStreaming(Request),
    #[serde(rename = "s")]
    Streaming(Request),
    #[serde(rename = "subagent")]
    Subagent(Subagent),
}

impl Entry {
    /// The main-agent request, if this entry is one.
    pub fn request(&self) -> Option<&Request> {
        match self {
            Entry::NonStreaming(r) | Entry::Streaming(r) => Some(r),
            Entry::Subagent(_) => None,
        }
    }
}

/// One recorded model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Start time, seconds from the trace's first request (absolute root-trace time after reading).
    pub t: f64,
    #[serde(default)]
    pub model: String,
    /// Input length in tokens (the hashed prefix; the last block may be partial).
    #[serde(rename = "in")]
    pub input_tokens: u64,
    #[serde(rename = "out")]
    pub output_tokens: u64,
    /// One id per 64-token block of the prompt prefix, trace-local.
    #[serde(default)]
    pub hash_ids: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_time: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
}

/// A subagent group: a child conversation with its own context, sharing the trace's hash namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subagent {
    /// Spawn time (the first inner request's start), root-trace seconds.
    pub t: f64,
    pub agent_id: String,
    #[serde(default)]
    pub subagent_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub tool_use_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default)]
    pub models: Vec<String>,
    pub requests: Vec<InnerRequest>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub system_tokens: u64,
}

/// A subagent's inner request: always `type: "n"` in the recordings; `"s"` is accepted too.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum InnerRequest {
    #[serde(rename = "n")]
    NonStreaming(Request),
    #[serde(rename = "s")]
    Streaming(Request),
}

impl InnerRequest {
    pub fn request(&self) -> &Request {
        match self {
            InnerRequest::NonStreaming(r) | InnerRequest::Streaming(r) => r,
        }
    }
    pub fn request_mut(&mut self) -> &mut Request {
        match self {
            InnerRequest::NonStreaming(r) | InnerRequest::Streaming(r) => r,
        }
    }
}

impl Subagent {
    pub fn inner(&self) -> impl Iterator<Item = &Request> {
        self.requests.iter().map(InnerRequest::request)
    }
}

/// Where a validation problem sits inside a trace (for error messages).
#[derive(Debug)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl Trace {
    /// Main-agent requests in order.
    pub fn main_requests(&self) -> impl Iterator<Item = &Request> {
        self.requests.iter().filter_map(Entry::request)
    }

    /// Subagent groups in order.
    pub fn subagents(&self) -> impl Iterator<Item = &Subagent> {
        self.requests.iter().filter_map(|e| match e {
            Entry::Subagent(s) => Some(s),
            _ => None,
        })
    }

    /// Every request (main and inner), in file order.
    pub fn all_requests(&self) -> impl Iterator<Item = &Request> {
        self.requests.iter().flat_map(|e| -> Box<dyn Iterator<Item = &Request> + '_> {
            match e {
                Entry::NonStreaming(r) | Entry::Streaming(r) => Box::new(std::iter::once(r)),
                Entry::Subagent(s) => Box::new(s.inner()),
            }
        })
    }

    /// Validate the semantic rules the schema cannot express and convert subagent inner times to
    /// absolute root-trace time. Rule: if the first inner `t` is ≥ the entry's `t` − 1 ms, inner
    /// times are already absolute; otherwise they are relative to the entry's `t`.
    pub fn normalize(&mut self) -> Result<(), FieldError> {
        if self.hash_id_scope != "local" {
            return Err(FieldError {
                field: "hash_id_scope".into(),
                message: format!(
                    "is {:?}; only \"local\" (ids namespaced per trace) is supported: re-export the trace with per-trace hash ids",
                    crate::problem::excerpt(&self.hash_id_scope)
                ),
            });
        }
        if self.block_size == 0 {
            return Err(FieldError { field: "block_size".into(), message: "must be positive (AgentX traces use 64)".into() });
        }
        let check = |r: &Request, path: String| -> Result<(), FieldError> {
            let bad = |f: &str, m: &str| FieldError { field: format!("{path}.{f}"), message: m.to_string() };
            if !r.t.is_finite() || r.t < 0.0 {
                return Err(bad("t", "must be a finite number of seconds ≥ 0"));
            }
            for (name, v) in [("api_time", r.api_time), ("think_time", r.think_time), ("ttft", r.ttft)] {
                if let Some(v) = v
                    && (!v.is_finite() || v < 0.0)
                {
                    return Err(bad(name, "must be a finite number of seconds ≥ 0"));
                }
            }
            Ok(())
        };
        for (i, e) in self.requests.iter_mut().enumerate() {
            match e {
                Entry::NonStreaming(r) | Entry::Streaming(r) => check(r, format!("requests[{i}]"))?,
                Entry::Subagent(s) => {
                    if s.requests.is_empty() {
                        return Err(FieldError {
                            field: format!("requests[{i}].requests"),
                            message: "a subagent group needs at least one inner request".into(),
                        });
                    }
                    let first = s.requests[0].request().t;
                    let relative = first < s.t - 0.001;
                    for (j, inner) in s.requests.iter_mut().enumerate() {
                        let r = inner.request_mut();
                        if relative {
                            r.t += s.t;
                        }
                        check(r, format!("requests[{i}].requests[{j}]"))?;
                    }
                }
            }
        }
        self.check_ids()?;
        self.check_time_order()
    }

    /// Ids within the length limit; subagent agent ids unique among the subagents a replay plays
    /// (those after a main-agent request: earlier ones are dropped as orphans, as by the
    /// reference replay, which rejects such a repeat because the agent id names the subagent's
    /// conversation and its spawn).
    fn check_ids(&self) -> Result<(), FieldError> {
        let too_long = |field: String, id: &str| FieldError {
            field,
            message: format!("is {} bytes; ids are at most {} bytes (real ids are under 40)", id.len(), lines::MAX_ID_BYTES),
        };
        if self.id.len() > lines::MAX_ID_BYTES {
            return Err(too_long("id".into(), &self.id));
        }
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut main_before = false;
        for (i, e) in self.requests.iter().enumerate() {
            let Entry::Subagent(s) = e else {
                main_before = true;
                continue;
            };
            if s.agent_id.len() > lines::MAX_ID_BYTES {
                return Err(too_long(format!("requests[{i}].agent_id"), &s.agent_id));
            }
            if !main_before {
                continue;
            }
            if let Some(first) = seen.insert(&s.agent_id, i) {
                return Err(FieldError {
                    field: format!("requests[{i}].agent_id"),
                    message: format!(
                        "{:?} is also the agent id of requests[{first}]: it names the subagent's conversation, so give each subagent its own",
                        crate::problem::excerpt(&s.agent_id)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Main-agent requests in time order, and each subagent's requests in time order (after
    /// conversion to absolute times). The reference replay floors the negative gaps of a trace
    /// that goes back in time and sorts it in places, so its recorded timing is lost either
    /// way; such a trace is refused with the place to fix. (Subagent entries may be listed out
    /// of order: they start at their first request's time.)
    fn check_time_order(&self) -> Result<(), FieldError> {
        let backwards = |field: String, t: f64, prev: f64, whose: &str| FieldError {
            field,
            message: format!(
                "starts at {t} s, before the previous {whose} request ({prev} s): requests must be in time order; sort them by `t`"
            ),
        };
        let mut prev_main = f64::NEG_INFINITY;
        for (i, e) in self.requests.iter().enumerate() {
            match e {
                Entry::NonStreaming(r) | Entry::Streaming(r) => {
                    if r.t < prev_main {
                        return Err(backwards(format!("requests[{i}].t"), r.t, prev_main, "main-agent"));
                    }
                    prev_main = r.t;
                }
                Entry::Subagent(s) => {
                    let mut prev = f64::NEG_INFINITY;
                    for (j, r) in s.inner().enumerate() {
                        if r.t < prev {
                            return Err(backwards(format!("requests[{i}].requests[{j}].t"), r.t, prev, "subagent"));
                        }
                        prev = r.t;
                    }
                }
            }
        }
        Ok(())
    }

    /// Recorded span of request start times (all requests): `(t_min, t_max)`.
    pub fn time_span(&self) -> (f64, f64) {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for r in self.all_requests() {
            lo = lo.min(r.t);
            hi = hi.max(r.t);
        }
        if lo.is_finite() { (lo, hi) } else { (0.0, 0.0) }
    }
}

#[cfg(test)]
mod limit_tests;
#[cfg(test)]
mod tests;

/// Where a trace set comes from: files/directories, or the built-in synthetic generator.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceSource {
    /// `synthetic[:N[:SEED]]`: N generated traces (default 200) from SEED (default 42).
    Synthetic { traces: usize, seed: u64 },
    /// Weka / mooncake files or directories.
    Files(Vec<std::path::PathBuf>),
    /// `like:NAME|STATS.yaml[:N[:SEED]]`: a corpus synthesized from published statistics, as
    /// `sweep trace gen --like` writes it (NAME: a corpus whose statistics ship with sweep).
    Like { stats: std::path::PathBuf, traces: Option<usize>, seed: u64 },
}

/// The embedded default data set: 200 synthetic traces.
pub const DEFAULT_SYNTHETIC_TRACES: usize = 200;

/// Why a trace-set spec (`--traces`) names no trace set; `spec` is the whole spec as given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceSourceError {
    #[error("{spec:?}: name the statistics: like:NAME|STATS.yaml[:N[:SEED]] (shipped: {})", published::embedded_names())]
    NoStats { spec: String },
    #[error("{spec:?}: {stats:?} is neither a stats .yaml nor a shipped corpus ({})", published::embedded_names())]
    UnknownStats { spec: String, stats: String },
    #[error("{spec:?}: trace count {count:?} is not a number ({syntax})")]
    BadCount { spec: String, count: String, syntax: &'static str },
    #[error("{spec:?}: seed {seed:?} is not a number ({syntax})")]
    BadSeed { spec: String, seed: String, syntax: &'static str },
}

/// The `N[:SEED]` after a generated set's name: an optional trace count and a seed (default 42);
/// empty parts take their defaults.
fn count_and_seed(spec: &str, rest: &str, syntax: &'static str) -> Result<(Option<usize>, u64), TraceSourceError> {
    let mut parts = rest.split(':').map(|p| Some(p).filter(|p| !p.is_empty()));
    let traces = match parts.next().flatten() {
        Some(n) => Some(n.parse().map_err(|_| TraceSourceError::BadCount { spec: spec.to_string(), count: n.to_string(), syntax })?),
        None => None,
    };
    let seed = match parts.next().flatten() {
        Some(n) => n.parse().map_err(|_| TraceSourceError::BadSeed { spec: spec.to_string(), seed: n.to_string(), syntax })?,
        None => 42,
    };
    Ok((traces, seed))
}

impl std::str::FromStr for TraceSource {
    type Err = TraceSourceError;
    fn from_str(s: &str) -> Result<Self, TraceSourceError> {
        if let Some(rest) = s.strip_prefix("like:") {
            let (stats, rest) = rest.split_once(':').unwrap_or((rest, ""));
            if stats.is_empty() {
                return Err(TraceSourceError::NoStats { spec: s.to_string() });
            }
            let (traces, seed) = count_and_seed(s, rest, "like:NAME[:N[:SEED]]")?;
            if !stats.ends_with(".yaml") && !stats.ends_with(".yml") && !published::is_embedded(stats) {
                return Err(TraceSourceError::UnknownStats { spec: s.to_string(), stats: stats.to_string() });
            }
            return Ok(TraceSource::Like { stats: stats.into(), traces, seed });
        }
        if let Some(rest) = s.strip_prefix("synthetic") {
            let (traces, seed) = count_and_seed(s, rest.trim_start_matches(':'), "synthetic[:N[:SEED]]")?;
            return Ok(TraceSource::Synthetic { traces: traces.unwrap_or(DEFAULT_SYNTHETIC_TRACES), seed });
        }
        Ok(TraceSource::Files(vec![s.into()]))
    }
}

impl TraceSource {
    /// A short name for tables and result metadata.
    pub fn name(&self) -> String {
        match self {
            TraceSource::Synthetic { traces, seed } => format!("synthetic:{traces}:{seed}"),
            TraceSource::Files(p) => p.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(","),
            TraceSource::Like { stats, traces, seed } => match traces {
                Some(n) => format!("like:{}:{n}:{seed}", stats.display()),
                None => format!("like:{}::{seed}", stats.display()),
            },
        }
    }

    /// Stream every trace of the set to `f` (bounded memory).
    pub fn for_each(
        &self,
        opts: &ReadOptions,
        warnings: &mut Vec<String>,
        mut f: impl FnMut(Trace) -> Result<(), TraceError>,
    ) -> Result<(), TraceError> {
        match self {
            TraceSource::Synthetic { traces, seed } => {
                let g = synth::Generator::new(synth::SynthParams { traces: *traces, seed: *seed, ..synth::SynthParams::default() });
                for t in g.traces() {
                    f(t)?;
                }
                Ok(())
            }
            TraceSource::Files(paths) => read::for_each_trace(paths, opts, warnings, f).map(|_| ()),
            TraceSource::Like { stats, traces, seed } => {
                let name = stats.display().to_string();
                let published = match published::PublishedStats::embedded(&name) {
                    Some(p) => p,
                    None => published::PublishedStats::load(stats).map_err(|e| TraceError::Synthesis(e.to_string()))?,
                };
                let plan = like::Plan::new(&published, *traces, *seed).map_err(|e| TraceError::Synthesis(format!("{name}: {e}")))?;
                warnings.extend(plan.warnings.iter().map(|w| format!("{name}: {w}")));
                // One trace at a time: the whole corpus as hash ids would take gigabytes.
                for i in 0..plan.sessions.len() {
                    f(like_write::to_trace(&plan, i))?;
                }
                Ok(())
            }
        }
    }
}
