//! Where requests go. [`sim`]: the reference engine in process on a virtual clock (one
//! discrete-event loop drives the workload and the engine together). [`http`]: any
//! OpenAI-compatible server over streaming HTTP, in real time.

pub mod body;
pub mod dialect;
pub mod energy;
pub mod fixed;
pub mod gpu_monitor;
pub mod http;
pub mod ledger;
pub mod pools;
pub mod profiles;
pub mod published;
pub mod scrape;
pub mod sim;

use crate::metrics::PointContext;
use crate::records::{Record, RecordPhase};
use crate::results::Status;
use crate::workload::{Outcome, Phase, RequestSpec, SourceKind};

/// Why a point stopped before its end when its cancel flag was raised.
pub const STOPPED: &str = "stopped before the end";

/// A point's status from how its workload ended (both targets); marks cancellation in `ctx`.
pub fn point_status(interrupted: bool, outcome: Option<&Outcome>, ctx: &mut PointContext, unfinished: &str) -> Status {
    if interrupted {
        ctx.cancelled = true;
        // The run decides whose stop it was: the user's, or its matrix's fail-fast.
        return Status::Interrupted { reason: STOPPED.into() };
    }
    match outcome {
        Some(Outcome::Completed) => Status::Done,
        Some(Outcome::Aborted { failed, total }) => {
            Status::Failed { reason: format!("live abort: {failed} of {total} profiling requests failed (> 10 %)") }
        }
        Some(Outcome::Cancelled { reason }) => {
            ctx.cancelled = true;
            Status::Failed { reason: format!("run cancelled: {reason}") }
        }
        None => Status::Failed { reason: unfinished.into() },
    }
}

/// The record of a request sent at `now`, before anything came back.
pub fn record_for(spec: &RequestSpec, now: u64) -> Record {
    let (hit, total) = spec.theoretical_hit();
    Record {
        phase: match spec.phase {
            Phase::Warmup => RecordPhase::Warmup,
            Phase::Profiling => RecordPhase::Profiling,
        },
        conversation_id: spec.conversation_id.to_string(),
        turn_index: spec.turn_index,
        x_correlation_id: spec.correlation_id.to_string(),
        root_correlation_id: spec.root_correlation_id.to_string(),
        worker_id: format!("lane-{}", spec.lane),
        source_trace_id: spec.source_trace_id.to_string(),
        source_outer_idx: spec.source_outer_idx,
        source_kind: match spec.source_kind {
            SourceKind::Main => "main",
            SourceKind::Subagent => "subagent",
            SourceKind::Flat => "flat",
            SourceKind::Random => "random",
        }
        .to_string(),
        start_ns: now,
        ack_ns: None,
        first_token_ns: None,
        last_chunk_ns: None,
        end_ns: now,
        input_tokens: None,
        output_tokens: None,
        cached_tokens: None,
        expected_output_tokens: Some(spec.max_tokens),
        theoretical_hit_blocks: hit as u64,
        theoretical_total_blocks: total as u64,
        chunks: 0,
        was_cancelled: false,
        error: None,
        server_ttft_ns: None,
        added_latency_ns: None,
        token_source: None,
        chunk_gaps_ns: Vec::new(),
    }
}
