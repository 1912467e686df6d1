//! Traces and the workload: AgentX trace corpora (read, checked, summarised, synthesised like a
//! published corpus), prompt synthesis from hash ids, and the workload's sans-I/O state machine
//! that both drivers move.

pub mod prompt;
pub mod trace;
pub mod workload;

pub(crate) use sweep_inputs::{problem, yaml};
pub(crate) use sweep_results::metrics;
