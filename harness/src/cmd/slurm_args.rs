//! `sweep run --target slurm` flags; the run takes them as a [`SlurmConfig`].

use crate::run::slurm::SlurmConfig;
use std::path::PathBuf;

/// `sweep run --target slurm` options.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Slurm (--target slurm)")]
pub struct SlurmArgs {
    /// Target each job runs its point on, inside the allocation: sim, local, local:engine or url:URL.
    #[arg(long = "slurm-inner-target", value_name = "TARGET", default_value = "sim")]
    pub inner_target: crate::run::Target,
    /// Partition (`#SBATCH --partition`); default: the cluster's default partition.
    #[arg(long = "slurm-partition", value_name = "NAME")]
    pub partition: Option<String>,
    /// Account to charge (`#SBATCH --account`).
    #[arg(long = "slurm-account", value_name = "NAME")]
    pub account: Option<String>,
    /// Time limit per job: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS; default: the partition's.
    #[arg(long = "slurm-time", value_name = "LIMIT")]
    pub time: Option<String>,
    /// GPUs per node (`#SBATCH --gpus-per-node`); omitted when not set.
    #[arg(long = "slurm-gpus-per-node", value_name = "N")]
    pub gpus_per_node: Option<u32>,
    /// An extra `#SBATCH` line (repeatable), e.g. `--slurm-sbatch=--exclusive` or `--slurm-sbatch='--qos=high'`.
    #[arg(long = "slurm-sbatch", value_name = "OPTION", allow_hyphen_values = true)]
    pub sbatch: Vec<String>,
    /// Run each job's `sweep` in this container (pyxis `srun --container-image`); `recipe`: the
    /// image pinned by the point's config (its `image` field).
    #[arg(long = "slurm-container-image", value_name = "IMAGE|recipe")]
    pub container_image: Option<String>,
    /// Extra container mount `SRC[:DST[:FLAGS]]` (repeatable); the results directory, the
    /// repository, the working directory and the sweep binary are always mounted at their own paths.
    #[arg(long = "slurm-container-mount", value_name = "MOUNT")]
    pub container_mounts: Vec<String>,
    /// Results directory the compute nodes can write; each run uses `<DIR>/<run id>` (default:
    /// `<out>/slurm`; must be on a shared filesystem).
    #[arg(long = "slurm-shared-dir", value_name = "DIR")]
    pub shared_dir: Option<PathBuf>,
    /// The `sweep` binary the jobs run (default: this one; it must be visible on the compute nodes).
    #[arg(long = "slurm-sweep-bin", value_name = "PATH")]
    pub sweep_bin: Option<PathBuf>,
    /// Seconds between `squeue` polls.
    #[arg(long = "slurm-poll", value_name = "SECONDS", default_value_t = 2.0)]
    pub poll_s: f64,
    /// Most jobs in the queue at once.
    #[arg(long = "slurm-max-jobs", value_name = "N", default_value_t = 512)]
    pub max_jobs: usize,
    /// Do not echo job logs while jobs run (state changes are still printed).
    #[arg(long = "slurm-quiet")]
    pub quiet: bool,
}

impl SlurmArgs {
    /// The options as the Slurm runner takes them.
    pub fn config(&self) -> SlurmConfig {
        SlurmConfig {
            inner_target: self.inner_target.clone(),
            partition: self.partition.clone(),
            account: self.account.clone(),
            time: self.time.clone(),
            gpus_per_node: self.gpus_per_node,
            sbatch: self.sbatch.clone(),
            container_image: self.container_image.clone(),
            container_mounts: self.container_mounts.clone(),
            shared_dir: self.shared_dir.clone(),
            sweep_bin: self.sweep_bin.clone(),
            poll_s: self.poll_s,
            max_jobs: self.max_jobs,
            quiet: self.quiet,
        }
    }
}
