//! What a sweep is planned from, read exactly as it is: InferenceX's master config and serving
//! recipes, golden acceptance-length curves, the append-only `perf-changelog.yaml`, and the plan
//! they make; with the problem reports every reader shares and the terminal output helpers.
//!
//! The bottom of the harness: it names no other `sweep-*` crate.

pub mod changelog;
pub mod golden_al;
pub mod html;
pub mod out;
pub mod plan;
pub mod problem;
pub mod recipe;
pub mod repo;
pub mod yaml;
