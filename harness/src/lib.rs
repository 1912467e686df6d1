//! `sweep`: plan, run and report AgentX recipe sweeps against the reference engine or real servers.
//!
//! This crate is the command line (`cmd/`, the `sweep` binary); the layers below it are crates of
//! their own (docs/ARCHITECTURE.md has the graph) and are re-exported here under their module names.

pub mod cmd;
pub mod engine_cmd;

pub use sweep_dashboard::dashboard;
pub use sweep_exec::{eval, fit, run, targets};
pub use sweep_inputs::{changelog, golden_al, html, out, outln, plan, problem, recipe, repo, yaml};
pub use sweep_report::report;
pub use sweep_results::{gate, kv, metrics, noise, pareto, power, price, published, records, results, twin};
pub use sweep_store::store;
pub use sweep_traces::{prompt, trace, workload};
pub use sweep_verify::verify;
