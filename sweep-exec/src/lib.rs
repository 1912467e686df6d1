//! Running points: the targets (the reference engine on the virtual clock, HTTP servers in real
//! time, fixed-length points), the run driver with its launcher, Slurm and twin, the eval's
//! execution, and the fit that runs the engine to calibrate it.

/// The `tracing` target of progress lines (a finished point, a replay's state, a server not
/// ready yet, a Slurm job's state): library code reports them, the binary decides how they show
/// (plain lines on stderr by default).
pub const PROGRESS: &str = "sweep::progress";

pub mod eval;
pub mod fit;
pub mod run;
pub mod targets;

#[cfg(test)]
use sweep_inputs::repo;
pub(crate) use sweep_inputs::{plan, problem, recipe, yaml};
pub(crate) use sweep_results::{gate, metrics, noise, pareto, power, published, records, results, twin};
pub(crate) use sweep_traces::{prompt, trace, workload};
