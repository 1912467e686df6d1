//! Fitting the reference engine to measured serving results (`sweep calibrate fit`), and the
//! metric residuals shared with twin mode (`sweep run --twin`).
//!
//! A fit replays the measured points' own recipes on the virtual clock with candidate cost
//! parameters and minimises a weighted sum of squared log-ratios between simulated and measured
//! metrics (see [`Metric::weight`] and `docs/calibration.md`). Parameters are bounded; the search
//! is a bounded Nelder–Mead ([`nelder_mead`]) restarted several times from seeded starts. Every
//! simulation is deterministic, so the same inputs and seed give the same fitted profile.
//!
//! Some parameters describe the workload rather than the GPU, for measured runs that replayed
//! another trace set: `osl_scale` and `osl_exp` (output tokens), `isl_scale` (input tokens),
//! `delay_scale` and `delay_cap_s` (inter-turn delays); see [`WorkloadScales`]. They are only
//! fitted when asked for, are stored in the profile's `fit.workload`, and `sweep predict` applies
//! them to the trace set. With `orders` > 1 every point is replayed from several starting traces
//! and its metrics averaged ([`simulate_point_orders`]): a low-concurrency point replays only the
//! first few sessions of a set, so one order is one small sample.
//!
//! The parts: the measured points (`measured.rs`), the parameter space (`space.rs`), the trace
//! set and its workload scaling (`traces.rs`), one simulated point (`simulate.rs`), the loss
//! (`objective.rs`), evaluating candidates (`problem.rs`, `cache.rs`), the search driver
//! (`search.rs`), the fitted profile and tables (`output.rs`) and why any of it fails
//! (`error.rs`).

mod cache;
mod error;
pub mod joint;
mod measured;
pub mod nelder_mead;
mod objective;
mod output;
mod parallel;
mod problem;
mod search;
mod simulate;
mod space;
mod traces;

#[cfg(test)]
mod tests;

#[cfg(doc)]
use engine::profiles::WorkloadScales;

pub use crate::gate::fmt_value as fmt;
pub use crate::metrics::{Metric, residual_pct};
pub use cache::{FitCache, FitTimings, PointTiming};
pub use error::{FitError, PointError};
pub use measured::{MeasuredPoint, load_measured, match_points};
pub use objective::{Evaluation, corrected_targets, default_weights, loss, loss_definition, parse_weights};
pub use output::{FitProvenance, fit_points, fit_table, fitted_profile, profile_yaml};
pub use problem::FitProblem;
pub use search::{CoarseOptions, FitOptions, FitOutcome, fit};
pub use simulate::{mean_summary, rotated, simulate_point, simulate_point_orders, simulate_point_timed};
pub use space::{Candidate, DEFAULT_PARAMS, JOINT_GPU_PARAMS, JOINT_SHARED_PARAMS, PARAMS, Param, param};
pub use traces::{compile, compile_one, load_pool, load_traces, scale_trace, scaled_block};
