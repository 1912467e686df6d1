//! The PR verifier: what a pull request submits, judged from git and files alone. Reads; never
//! executes a point, a trace or the engine.

pub mod verify;

pub(crate) use sweep_inputs::{changelog, golden_al, out, plan, problem, recipe, yaml};
pub(crate) use sweep_results::{gate, pareto, results};
