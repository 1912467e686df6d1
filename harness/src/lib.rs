//! `sweep`: plan, run and report AgentX recipe sweeps against the reference engine or real servers.
//!
//! Configuration (InferenceX master config, serving recipes, golden acceptance lengths and the
//! append-only `perf-changelog.yaml`) is read exactly as it is and turned into a sweep plan.

pub mod changelog;
pub mod cmd;
pub mod dashboard;
pub mod engine_cmd;
pub mod eval;
pub mod fit;
pub mod gate;
pub mod golden_al;
pub mod html;
pub mod kv;
pub mod metrics;
pub mod noise;
pub mod out;
pub mod pareto;
pub mod plan;
pub mod problem;
pub mod prompt;
pub mod published;
pub mod recipe;
pub mod records;
pub mod repo;
pub mod report;
pub mod results;
pub mod run;
pub mod store;
pub mod targets;
pub mod trace;
pub mod twin;
pub mod verify;
pub mod workload;
pub mod yaml;
