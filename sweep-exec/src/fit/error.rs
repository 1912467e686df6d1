//! Why a fit cannot run ([`FitError`]) and why one simulated point has no summary ([`PointError`]).

use crate::results::Status;

/// Why a fit could not run.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("{path}: {message}")]
    Results { path: String, message: String },
    #[error("{0}")]
    Points(String),
    #[error("--traces {spec}: {message}")]
    Traces { spec: String, message: String },
    #[error("--params: {0}")]
    Params(String),
    /// A trace that does not compile into a replay plan (the planner's message).
    #[error("{0}")]
    Plan(String),
    /// The fitted profile does not serialize.
    #[error(transparent)]
    ProfileYaml(#[from] serde_yaml_ng::Error),
}

/// Why a point simulated on the virtual clock gave no summary. A failed point still counts in
/// the loss (a fixed penalty), so this is data of an evaluation, not the end of a fit.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PointError {
    #[error("point has no resolved server command")]
    NoLaunch,
    /// The point's server flags or router flags are not the engine's.
    #[error("{0}")]
    Flags(String),
    #[error("no model profile: pass --model")]
    NoModel,
    /// The model profile named by the point or `--model` is unknown.
    #[error("{0}")]
    Model(String),
    /// The engine refuses the configuration (memory, parallelism).
    #[error("{0}")]
    Engine(String),
    /// The replay did not finish (cancelled, failed, …).
    #[error("{0:?}")]
    Ended(Status),
    /// The records do not aggregate.
    #[error("{0}")]
    Aggregate(String),
    #[error("no successful request")]
    NoSuccess,
    #[error("no trace order")]
    NoTraceOrder,
    /// A bounded evaluation stopped before this point (see `FitProblem::evaluate_bounded`).
    #[error("not simulated: the loss bound was reached")]
    Pruned,
}
