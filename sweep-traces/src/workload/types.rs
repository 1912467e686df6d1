//! The machine's public vocabulary: its configuration, the events it takes, the actions and
//! requests it emits, how a run ends, and its counters.

use std::sync::Arc;

use super::SEC;
use super::plan::SourceKind;
use crate::prompt::TurnPrompt;

/// Output length of primer requests (the reference replay sends 1 token, like every warmup
/// request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrimerOutput {
    /// The recorded `out` of the primer turn.
    Recorded,
    /// One token.
    One,
}

/// Replay parameters; defaults are the AgentX ones.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadConfig {
    /// Lanes: live session trees.
    pub concurrency: u32,
    /// Seeds t* draws (with trace id and lane).
    pub seed: u64,
    /// Benchmark id mixed into every cache-bust marker: random per live run (as the reference
    /// replay's), so a second run against the same server does not hit the first run's cache.
    pub run_id: String,
    pub duration_ns: u64,
    pub grace_ns: u64,
    pub start_min_ratio: f64,
    pub start_max_ratio: f64,
    /// Start lanes mid-trace at t* with primers and per-lane warmup requests; off: every lane
    /// starts its trace at turn 0 and profiling starts at once.
    pub warmup: bool,
    pub warmup_requests_per_lane: u32,
    pub warmup_grace_ns: u64,
    pub primer_output: PrimerOutput,
    pub system_idle_cap_ns: u64,
    pub trace_idle_cap_ns: u64,
    pub failed_request_threshold: f64,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        Self {
            concurrency: 1,
            seed: 42,
            run_id: "sweep".into(),
            duration_ns: 3600 * SEC,
            grace_ns: 30 * SEC,
            start_min_ratio: 0.25,
            start_max_ratio: 0.75,
            warmup: true,
            warmup_requests_per_lane: 10,
            warmup_grace_ns: 1800 * SEC,
            primer_output: PrimerOutput::One,
            system_idle_cap_ns: 10 * SEC,
            trace_idle_cap_ns: 300 * SEC,
            failed_request_threshold: 0.10,
        }
    }
}

/// A fresh benchmark id for a live run: 12 hex digits from the OS's randomness, as the reference
/// replay's `uuid4().hex[:12]`. Live runs need one each, or a second run against the same server
/// would reuse the first run's cache-bust markers and hit its prefix cache.
pub fn random_benchmark_id() -> String {
    format!("{:012x}", rand::random::<u64>() >> 16)
}

pub type RequestId = u64;

/// Benchmark phase of a request (`metadata.benchmark_phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Warmup,
    Profiling,
}

/// Why a request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A live conversation's last turn before t*, with full history (warmup).
    Primer,
    /// One of a lane's one-token warmup requests played after the primers.
    LaneWarmup,
    /// A replayed turn (profiling).
    Turn,
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub id: RequestId,
    pub lane: u32,
    /// Play id: unique per (lane, pass).
    pub play: u64,
    /// Recycle pass of the lane (0 for its first play).
    pub pass: u64,
    pub phase: Phase,
    pub kind: RequestKind,
    pub conversation_id: Arc<str>,
    /// `X-Correlation-ID`: constant within a conversation of a play.
    pub correlation_id: Arc<str>,
    pub root_correlation_id: Arc<str>,
    pub turn_index: u32,
    /// Stream index within the trace (0 = root).
    pub stream: u16,
    /// `max_completion_tokens`.
    pub max_tokens: u64,
    /// The recorded output length of this turn.
    pub recorded_output_tokens: u64,
    pub prompt: TurnPrompt,
    pub source_trace_id: Arc<str>,
    pub source_outer_idx: u32,
    pub source_kind: SourceKind,
    /// The endpoint the request goes to.
    pub api: super::fixed::Api,
}

impl RequestSpec {
    /// Theoretical prefix-cache hit of this request: (hit blocks, total blocks).
    pub fn theoretical_hit(&self) -> (u32, u32) {
        self.prompt.theoretical_hit()
    }

    /// The `/v1/chat/completions` body (AgentX §4.2): the full accumulated conversation as text,
    /// `stream`, `ignore_eos`, `stream_options.include_usage` and `max_completion_tokens`; never
    /// `temperature`, `tools` or `min_tokens`. `extra` keys are merged in (they cannot override
    /// the locked fields). The reference form the tests hold the HTTP client's pieced body
    /// (`targets::body::BodyPieces`) to.
    #[cfg(test)]
    pub fn http_body(
        &self,
        model: &str,
        vocab: &dyn crate::prompt::TokenText,
        extra: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        if let Some(extra) = extra {
            for (k, v) in extra {
                body.insert(k.clone(), v.clone());
            }
        }
        body.insert("model".into(), model.into());
        body.insert("messages".into(), serde_json::to_value(self.prompt.messages(vocab)).expect("messages serialize"));
        body.insert("stream".into(), true.into());
        body.insert("max_completion_tokens".into(), self.max_tokens.into());
        body.insert("ignore_eos".into(), true.into());
        body.insert("stream_options".into(), serde_json::json!({"include_usage": true}));
        for locked_out in ["temperature", "tools", "min_tokens"] {
            body.remove(locked_out);
        }
        serde_json::Value::Object(body)
    }
}

/// How a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The prompt exceeded the server's context: ends that conversation.
    ContextOverflow,
    /// Anything else (HTTP 500, timeout, …): the conversation continues.
    Error,
}

/// Inputs to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Begin the run.
    Start,
    /// The instant from the latest [`Action::Wake`] has come (early or spurious wakes are harmless).
    /// The driver then forgets that wake; the machine answers with the next one.
    Wake,
    Completed(RequestId),
    Failed(RequestId, Failure),
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Profiling ran to its deadline and drained.
    Completed,
    /// The live abort fired.
    Aborted { failed: u64, total: u64 },
    /// A root conversation's warmup request failed (`run_cancelled`).
    Cancelled { reason: String },
}

/// Outputs of the machine.
#[derive(Debug, Clone)]
pub enum Action {
    Send(Box<RequestSpec>),
    /// Cancel an in-flight request (record it with `was_cancelled: true`); send no event for it.
    Cancel(RequestId),
    /// Call [`Workload::handle`] with [`Event::Wake`] at this instant; replaces earlier wakes.
    Wake(u64),
    /// Profiling starts now; it ends at `deadline`.
    ProfilingStarted {
        at: u64,
        deadline: u64,
    },
    /// No request starts from now on.
    ProfilingEnded {
        at: u64,
    },
    Finished(Outcome),
}

/// Counters of a run so far.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorkloadStats {
    pub sent: u64,
    pub warmup_sent: u64,
    pub primers_sent: u64,
    pub profiling_completed: u64,
    pub profiling_failed: u64,
    pub context_overflows: u64,
    pub cancelled: u64,
    pub plays_started: u64,
    pub global_idle_shifts: u64,
    pub tree_idle_shifts: u64,
    /// Prerequisites released by the stall breaker (0 unless the trace data is inconsistent).
    pub forced_releases: u64,
    /// Lanes that sent fewer than `warmup_requests_per_lane` warmup requests after their primers.
    pub short_warmup_lanes: u64,
    /// Trees played to their end during warmup (the lane took the sampler's next trace).
    pub warmup_recycles: u64,
    /// Lanes started with the root-only split (no stream alive at t*).
    pub legacy_starts: u64,
}
