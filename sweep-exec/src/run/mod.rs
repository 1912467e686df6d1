//! Executing a plan: canary first (its failure stops everything), then each matrix with
//! matrix-scoped fail-fast, points in parallel where the target allows, results written
//! atomically per point so an interrupted run stays consistent and `--resume` skips finished
//! points; then Pareto analysis with bootstrap uncertainty over every finished point.

pub mod collect;
mod execute;
mod finalize;
pub mod identity;
pub mod launcher;
mod order;
pub mod slurm;
mod target;
#[cfg(test)]
mod tests;
pub mod twin;

use crate::metrics::PointContext;
use crate::pareto::Samples;
use crate::plan::PlanPoint;
use crate::records::Record;
use crate::results::{PointResult, Status};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

pub use execute::execute;
pub use finalize::{finalize, load_samples, write_parquet};
pub use order::{StartOrder, Turn};
pub use target::Target;

/// Why a run (or a collection of runs) could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("--only {id}: no such point in the plan (see `sweep plan`)")]
    UnknownPoint { id: String },
    #[error("{point}: aggregate: {source}")]
    Aggregate { point: String, source: polars::prelude::PolarsError },
    #[error("results.parquet: {0}")]
    Parquet(#[source] polars::prelude::PolarsError),
    #[error("a matrix thread panicked")]
    MatrixPanicked,
    #[error(transparent)]
    Slurm(#[from] slurm::SlurmError),
    /// A run directory whose `summary.json` does not load.
    #[error("{0}")]
    Summary(String),
    #[error("no run directory (with summary.json) under {inputs}")]
    NoRuns { inputs: String },
    #[error("{} was planned differently from {}: collect runs of one plan only", .run.display(), .first.display())]
    PlannedDifferently { run: PathBuf, first: PathBuf },
    #[error("point {point} is in both {} and {}", .first.display(), .second.display())]
    Duplicate { point: String, first: PathBuf, second: PathBuf },
    #[error("{point}: {source}")]
    Copy { point: String, source: std::io::Error },
    #[error(transparent)]
    Resume(#[from] identity::ResumeError),
}

impl RunError {
    /// An I/O error on `path`.
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
        move |source| RunError::Io { path: path.to_path_buf(), source }
    }
}

/// One point to run.
pub struct Job {
    pub point: PlanPoint,
    pub dir: PathBuf,
    /// Set when the point must stop early (fail-fast of its matrix, Ctrl-C).
    pub cancel: Arc<AtomicBool>,
    pub seed: u64,
    /// The point's place in plan order, for runners that hand points to a queue elsewhere.
    pub turn: Option<Turn>,
}

/// What a runner returns for a point.
pub struct Outcome {
    pub status: Status,
    pub records: Vec<Record>,
    pub ctx: PointContext,
}

/// One eval point to run: gsm8k against its config's server, its files written into `dir`.
pub struct EvalJob {
    pub point: PlanPoint,
    pub dir: PathBuf,
    /// Set on Ctrl-C: the eval stops, keeping the samples it logged (a re-run resumes them).
    pub cancel: Arc<AtomicBool>,
    /// Score only the first N test questions (a smoke run; never a full-n pass).
    pub limit: Option<usize>,
}

/// What a runner returns for an eval point.
pub struct EvalOutcome {
    pub status: Status,
    /// The eval's summary row (score, n, infrastructure_success, or `not_applicable`), as the
    /// eval writes it in the point's folder.
    pub detail: Option<serde_json::Value>,
}

/// Runs single points against one kind of target.
pub trait PointRunner: Sync {
    /// How many points may run at once (virtual clock: one per core; a GPU server: one).
    fn max_parallel(&self) -> usize;
    fn run(&self, job: &Job) -> Outcome;
    /// Runs a point and writes its folder (`status.json`, records, `agg.json`). By default the
    /// point runs here through [`PointRunner::run`]; a batch scheduler overrides this to gather
    /// the finished folder its job wrote elsewhere.
    fn run_point(&self, job: &Job) -> Result<(PointResult, Option<Samples>), RunError> {
        let t0 = Instant::now();
        let out = self.run(job);
        execute::finish_point(job, out, t0.elapsed().as_secs_f64())
    }
    /// Whether every matrix may run at the same time (a batch scheduler queues them all).
    fn matrices_at_once(&self) -> bool {
        false
    }
    /// Replays the point once more with another seed, for the gate's noise model (`noise.rs`);
    /// `None` where this runner cannot (a batch scheduler's point runs elsewhere).
    fn replicate(&self, job: &Job, seed: u64) -> Option<Outcome> {
        let again = Job { point: job.point.clone(), dir: job.dir.clone(), cancel: job.cancel.clone(), seed, turn: None };
        Some(self.run(&again))
    }
    /// Runs an eval point (gsm8k) against the point's server, writing its files into `job.dir`.
    fn run_eval(&self, job: &EvalJob) -> EvalOutcome {
        let _ = job;
        EvalOutcome {
            status: Status::Failed {
                reason: "this target does not run evals: run `sweep eval --url` against the server, or leave them out with --no-evals"
                    .into(),
            },
            detail: None,
        }
    }
    /// The throughput points whose server an eval of the same server config runs on next: a
    /// runner that launches servers keeps those up after the point instead of starting another.
    fn keep_server_after(&self, point_ids: &[String]) {
        let _ = point_ids;
    }
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub run_id: String,
    pub labels: Vec<String>,
    pub target: String,
    pub out: PathBuf,
    /// Reuse finished points found in `out`.
    pub resume: bool,
    /// Run only these point ids (others are left out of this run).
    pub only: Vec<String>,
    pub seed: u64,
    /// Bootstrap replicates for intervals and frontier probabilities.
    pub replicates: usize,
    /// Extra replays of each finished point with the shared gate seeds (`noise::replicate_seeds`).
    pub seed_replicates: usize,
    /// What makes this run itself (`run.json`): checked by `--resume`, recorded otherwise.
    pub identity: Option<identity::RunIdentity>,
    /// Print a line per finished point.
    pub verbose: bool,
    /// Evals score only the first N test questions (`--eval-limit`).
    pub eval_limit: Option<usize>,
}

fn pending(p: &PlanPoint) -> PointResult {
    PointResult {
        id: p.id.clone(),
        config_key: p.config_key.clone(),
        arm: p.arm.clone(),
        conc: p.conc,
        gpus: p.gpus,
        matrix: p.matrix.clone(),
        seq: p.seq_len().map(|(i, o)| crate::plan::matrix::seq_name(i, o)),
        status: Status::Pending,
        result_kind: String::new(),
        profiles: serde_json::Value::Null,
        trace_set: String::new(),
        summary: None,
        pareto: None,
        launch: p.launch.clone(),
        seeds: Vec::new(),
        wall_s: 0.0,
    }
}

/// The InferenceX identity fields of a point's aggregate, from its matrix row.
pub fn identity(p: &PlanPoint) -> serde_json::Map<String, serde_json::Value> {
    let r = &p.row;
    let mut m = serde_json::Map::new();
    let copy = |m: &mut serde_json::Map<String, serde_json::Value>, from: &str, to: &str| {
        if let Some(v) = r.get(from) {
            m.insert(to.into(), v.clone());
        }
    };
    m.insert("hw".into(), r.get("runner").cloned().unwrap_or_default());
    m.insert("conc".into(), serde_json::json!(p.conc));
    for (from, to) in [
        ("image", "image"),
        ("recipe-fingerprint", "recipe_fingerprint"),
        ("model", "model"),
        ("model-prefix", "infmax_model_prefix"),
        ("framework", "framework"),
        ("precision", "precision"),
        ("spec-decoding", "spec_decoding"),
        ("disagg", "disagg"),
        ("tp", "tp"),
        ("ep", "ep"),
        ("pp", "pp"),
        ("dcp-size", "dcp_size"),
        ("pcp-size", "pcp_size"),
        ("kv-offloading", "kv_offloading"),
        ("kv-offload-backend", "kv_offload_backend"),
        ("total-cpu-dram-gb", "allocated_cpu_dram_gb"),
        ("router", "router"),
        ("kv-p2p-transfer", "kv_p2p_transfer"),
        ("isl", "isl"),
        ("osl", "osl"),
    ] {
        copy(&mut m, from, to);
    }
    m.insert("is_multinode".into(), serde_json::json!(r.contains_key("prefill")));
    if let Some(d) = r.get("dp-attn") {
        m.insert("dp_attention".into(), serde_json::json!(d.as_bool().map(|b| b.to_string()).unwrap_or_default()));
    }
    m.insert("point_id".into(), serde_json::json!(p.id));
    m.insert("arm".into(), serde_json::json!(p.arm));
    m
}
