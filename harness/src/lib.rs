//! `sweep`: plan, run and report AgentX recipe sweeps against the reference engine or real servers.

pub mod prompt;
pub mod trace;
pub mod workload;
