//! What a run recorded, read back: per-request records, the metrics and their aggregation, Pareto
//! frontiers, the noise model, the gate's verdict, live-vs-twin residuals, published points, GPU
//! power and energy per token over the benchmark window, and the gsm8k eval's questions, scores
//! and records.
//!
//! Executes nothing: no target, driver or engine run is reachable from here (Cargo keeps it so:
//! this crate depends on the inputs and the engine's sans-I/O types only).

pub mod eval;
pub mod gate;
pub mod kv;
pub mod metrics;
pub mod noise;
pub mod pareto;
pub mod power;
pub mod price;
pub mod published;
pub mod records;
pub mod results;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod twin;

// The inputs' modules under their own names, so paths read the same in every crate.
pub(crate) use sweep_inputs::{html, problem, recipe, yaml};
