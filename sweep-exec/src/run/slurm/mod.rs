//! The Slurm target: each point is one batch job that runs `sweep run --point <id>` (the point's
//! server and its replay on the same allocation) into a results directory shared with the compute
//! nodes; when the job ends its point folder is merged into the run, which then has the same
//! layout as a local run. Canary first and fail-fast come from [`crate::run::execute`]: a point whose
//! cancel flag is raised has its job `scancel`led.
//!
//! Nothing from a recipe or the command line is ever written into script text. The generated
//! batch script is fixed (`exec "$@"`, or the same through `srun --container-image` for pyxis);
//! the point's `sweep` command line reaches it as the script's arguments (`sbatch script ARG…`),
//! which Slurm stores as an argument vector and hands to the script without a shell parsing them.
//! Job options go on `sbatch`'s own argument vector, except the `#SBATCH` lines a user asks for
//! (validated: one line each), which bash reads as comments.
//!
//! Job states come from `squeue` (one call for every job in flight per poll) and, once a job has
//! left the queue, `scontrol show job`; `sacct` only once slurmctld has forgotten a job, and only
//! where accounting storage exists (a single-host Slurm without slurmdbd has none).

mod job;
mod script;
mod state;
#[cfg(test)]
mod tests;

use super::{Job, Outcome, PointRunner, RunError};
use crate::pareto::Samples;
use crate::plan::{Plan, PlanPoint};
use crate::results::{PointResult, Status, point_dir};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

pub use script::batch_script;
use script::mount_path;
use state::on_path;
pub use state::{JobInfo, is_terminal, killed_reason, parse_sacct, parse_scontrol, parse_squeue};

/// The Slurm options of a run (`sweep run --slurm-*`).
#[derive(Clone, Debug, Default)]
pub struct SlurmConfig {
    /// Target each job runs its point on, inside the allocation: sim, local, local:engine or url:URL.
    pub inner_target: crate::run::Target,
    /// Partition (`#SBATCH --partition`); `None`: the cluster's default partition.
    pub partition: Option<String>,
    /// Account to charge (`#SBATCH --account`).
    pub account: Option<String>,
    /// Time limit per job: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS; `None`: the partition's.
    pub time: Option<String>,
    /// GPUs per node (`#SBATCH --gpus-per-node`); omitted when not set.
    pub gpus_per_node: Option<u32>,
    /// Extra `#SBATCH` lines, e.g. `--exclusive` or `--qos=high`.
    pub sbatch: Vec<String>,
    /// Run each job's `sweep` in this container (pyxis `srun --container-image`); `recipe`: the
    /// image pinned by the point's config (its `image` field).
    pub container_image: Option<String>,
    /// Extra container mounts `SRC[:DST[:FLAGS]]`; the results directory, the repository, the
    /// working directory and the sweep binary are always mounted at their own paths.
    pub container_mounts: Vec<String>,
    /// Results directory the compute nodes can write; each run uses `<DIR>/<run id>` (`None`:
    /// `<out>/slurm`; must be on a shared filesystem).
    pub shared_dir: Option<PathBuf>,
    /// The `sweep` binary the jobs run (`None`: this one; it must be visible on the compute nodes).
    pub sweep_bin: Option<PathBuf>,
    /// Seconds between `squeue` polls.
    pub poll_s: f64,
    /// Most jobs in the queue at once.
    pub max_jobs: usize,
    /// Do not echo job logs while jobs run (state changes are still printed).
    pub quiet: bool,
}

/// A bad Slurm option or a failed Slurm command.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SlurmError {
    #[error("--{flag} {value:?}: {why}")]
    BadOption { flag: &'static str, value: String, why: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("`{program}` not found: is Slurm installed and on PATH? (scripts/slurm/start-local.sh starts a single-host Slurm)")]
    Missing { program: String },
    #[error("--slurm-container-image recipe: config {config} pins no image (set `image:` in its master config row or pass an image)")]
    NoImage { config: String },
    #[error("sbatch: {message}")]
    Sbatch { message: String },
    #[error("sbatch refused the job: {stderr}")]
    Refused { stderr: String },
    #[error("sbatch printed no job id: {output:?}")]
    NoJobId { output: String },
    /// The job's plan differs from this run's (the repository changed while the sweep ran).
    #[error("{point}: the job planned this point differently (did recipes/ or the changelog change while the sweep ran?)")]
    PlannedDifferently { point: String },
}

fn io_error(path: &Path, e: std::io::Error) -> SlurmError {
    SlurmError::Io { path: path.display().to_string(), message: e.to_string() }
}

fn bad(flag: &'static str, value: &str, why: &str) -> SlurmError {
    SlurmError::BadOption { flag, value: value.to_string(), why: why.to_string() }
}

/// Folder name of a point inside the shared directory (index keeps it unique, the rest readable).
fn job_folder(index: usize, id: &str) -> String {
    let safe: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    format!("{index:03}-{safe}")
}

/// The last `squeue` poll, shared by every job in flight.
struct PollCache {
    at: Option<Instant>,
    states: BTreeMap<String, JobInfo>,
}

/// Submits, follows and cancels one job per point.
pub struct SlurmRunner {
    cfg: SlurmConfig,
    /// The `sweep run …` argument vector without `--point` / `--out` (first word: the binary).
    inner: Vec<String>,
    shared: PathBuf,
    script: PathBuf,
    job_name: String,
    cwd: PathBuf,
    /// Extra mounts for the container (already `src:dst`).
    mounts: Vec<String>,
    /// Point id → (plan index, serialized point) to detect a job that planned differently.
    points: BTreeMap<String, (usize, serde_json::Value)>,
    cache: Mutex<PollCache>,
    /// Follow a job an earlier invocation submitted for a point instead of replacing it (`--resume`).
    reattach: bool,
    /// Jobs submitted and not yet seen ending (cancelled on drop).
    active: Mutex<BTreeSet<String>>,
    log: Mutex<()>,
}

impl SlurmRunner {
    /// `inner`: the `sweep run` arguments every job shares (labels, plan and workload options,
    /// the inner `--target`), without the program name.
    /// With `resume`, jobs an earlier invocation of this run left queued or running are followed
    /// again (and cancelled where their point is already finished in `out`); without it, they
    /// are cancelled and replaced.
    pub fn new(
        cfg: SlurmConfig,
        inner: Vec<String>,
        plan: &Plan,
        out: &Path,
        run_id: &str,
        repo_root: &Path,
        resume: bool,
    ) -> Result<Self, SlurmError> {
        if cfg.inner_target == crate::run::Target::Slurm {
            return Err(bad("slurm-inner-target", "slurm", "a job runs its point on sim, local, local:engine or url:URL"));
        }
        for prog in ["sbatch", "squeue", "scontrol", "scancel"] {
            if !on_path(prog) {
                return Err(SlurmError::Missing { program: prog.into() });
            }
        }
        let cwd = std::env::current_dir().map_err(|e| SlurmError::Io { path: ".".into(), message: e.to_string() })?;
        let abs = |p: &Path| if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
        // One folder per run, so runs sharing a --slurm-shared-dir never mix their jobs.
        let shared = abs(&match &cfg.shared_dir {
            Some(d) => d.join(run_id),
            None => out.join("slurm"),
        });
        let bin = match &cfg.sweep_bin {
            Some(b) => abs(b),
            None => std::env::current_exe().map_err(|e| SlurmError::Io { path: "sweep".into(), message: e.to_string() })?,
        };
        let script_text = batch_script(&cfg)?;
        let mut mounts = Vec::new();
        if cfg.container_image.is_some() {
            let mut dirs: Vec<PathBuf> = vec![shared.clone(), abs(repo_root), cwd.clone()];
            if let Some(d) = bin.parent() {
                dirs.push(d.to_path_buf());
            }
            dirs.sort();
            dirs.dedup();
            for d in &dirs {
                mounts.push(mount_path(d)?);
            }
            for m in &cfg.container_mounts {
                if m.contains([',', '\n']) || m.is_empty() {
                    return Err(bad("slurm-container-mount", m, "one mount SRC[:DST[:FLAGS]] per flag, without ','"));
                }
                mounts.push(m.clone());
            }
        }
        std::fs::create_dir_all(&shared).map_err(|e| SlurmError::Io { path: shared.display().to_string(), message: e.to_string() })?;
        let script = shared.join("job.sh");
        crate::problem::atomic_write(&script, script_text.as_bytes())
            .map_err(|e| SlurmError::Io { path: script.display().to_string(), message: e.to_string() })?;
        let mut argv = vec![bin.display().to_string()];
        argv.extend(inner);
        let points = plan.points().enumerate().map(|(i, p)| (p.id.clone(), (i, serde_json::to_value(p).unwrap_or_default()))).collect();
        let runner = SlurmRunner {
            cfg,
            inner: argv,
            shared,
            script,
            job_name: format!("sweep-{run_id}"),
            cwd,
            mounts,
            points,
            cache: Mutex::new(PollCache { at: None, states: BTreeMap::new() }),
            reattach: resume,
            active: Mutex::new(BTreeSet::new()),
            log: Mutex::new(()),
        };
        if resume {
            runner.cancel_redundant(out);
        }
        Ok(runner)
    }

    /// Cancels the still-active jobs of points that `out` already holds finished (they would
    /// only repeat a result `--resume` keeps).
    fn cancel_redundant(&self, out: &Path) {
        for (id, (index, _)) in &self.points {
            let finished = std::fs::read_to_string(point_dir(out, id).join("status.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<PointResult>(&t).ok())
                .is_some_and(|r| r.status == Status::Done);
            if finished && let Some(job) = self.still_active(&self.shared.join(job_folder(*index, id))) {
                self.scancel(&job);
                self.say(&format!("slurm: {id} earlier job {job} cancelled (scancel): the point is already finished in the run"));
            }
        }
    }

    /// The job name every job of this run carries (`squeue -n`, `scancel -n`).
    pub fn job_name(&self) -> &str {
        &self.job_name
    }

    /// The script's argument vector for a point: `[image, mounts,] sweep run … --point ID --out DIR`.
    pub fn script_args(&self, p: &PlanPoint, inner_out: &Path) -> Result<Vec<String>, SlurmError> {
        script::script_args(&self.cfg, &self.mounts, &self.inner, p, inner_out)
    }

    /// One progress line (the binary prints it on stderr), whole among the lines of other jobs.
    fn say(&self, line: &str) {
        let _g = self.log.lock().expect("lock");
        tracing::info!(target: crate::PROGRESS, "{line}");
    }
}

impl Drop for SlurmRunner {
    /// Jobs still in flight when the runner goes away (an error, an interrupted run) are cancelled.
    fn drop(&mut self) {
        let ids: Vec<String> = self.active.lock().map(|a| a.iter().cloned().collect()).unwrap_or_default();
        for id in ids {
            self.scancel(&id);
        }
    }
}

impl PointRunner for SlurmRunner {
    fn max_parallel(&self) -> usize {
        self.cfg.max_jobs.max(1)
    }

    /// Not used: a Slurm point runs elsewhere and comes back as a finished point folder
    /// ([`PointRunner::run_point`]).
    fn run(&self, job: &Job) -> Outcome {
        Outcome {
            status: Status::Failed { reason: "the Slurm target runs points through run_point".into() },
            records: Vec::new(),
            ctx: crate::metrics::PointContext { identity: super::identity(&job.point), ..Default::default() },
        }
    }

    fn run_point(&self, job: &Job) -> Result<(PointResult, Option<Samples>), RunError> {
        Ok(self.run_job(job)?)
    }

    fn matrices_at_once(&self) -> bool {
        true
    }

    /// A Slurm job replays its point's gate seeds itself (the inner run repeats `--seed-replicates`).
    fn replicate(&self, _job: &Job, _seed: u64) -> Option<Outcome> {
        None
    }
}
