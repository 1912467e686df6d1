//! `sweep`: plan, run and report AgentX recipe sweeps against the reference engine or real servers.

pub mod engine_cmd;
