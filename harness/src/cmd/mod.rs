//! Command-line subcommands: argument structs (clap) and their implementations.

pub mod changelog;
pub mod client_args;
pub mod eval;
pub mod fit;
pub mod fit_points;
pub mod fixed_args;
pub mod plan;
pub mod predict;
pub mod predict_points;
pub mod replay;
pub mod results;
pub mod run;
pub mod select_args;
pub mod serve;
pub mod slurm_args;
pub mod store;
pub mod trace;
pub mod validate;
pub mod verify;
pub mod workload_args;

use crate::problem::Problems;
use crate::repo::Repo;
use std::path::PathBuf;

/// Where the repository's inputs are; each path can be overridden.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RepoArgs {
    /// Repository root (default: the nearest ancestor of the current directory with recipes/master.yaml).
    #[arg(long, global = true)]
    pub root: Option<PathBuf>,
    /// Master config file(s), loaded in order (default: recipes/master.yaml).
    #[arg(long = "master", global = true)]
    pub master: Vec<PathBuf>,
    /// runners.yaml (default: recipes/runners.yaml when present).
    #[arg(long, global = true)]
    pub runners: Option<PathBuf>,
    /// perf-changelog.yaml (default: the repository's).
    #[arg(long, global = true)]
    pub changelog: Option<PathBuf>,
    /// Folder of golden acceptance-length curves (default: golden_al/).
    #[arg(long = "golden-al", global = true)]
    pub golden_al: Option<PathBuf>,
}

impl RepoArgs {
    /// The repository layout with any overrides applied. Explicit paths alone work outside a repository.
    pub fn repo(&self) -> Result<Repo, Problems> {
        let explicit = !self.master.is_empty() || self.changelog.is_some() || self.golden_al.is_some();
        let mut r = match &self.root {
            Some(root) => Repo::at(root),
            None => match Repo::discover(&std::env::current_dir().unwrap_or_default()) {
                Ok(r) => r,
                Err(e) if !explicit => return Err(e),
                Err(_) => {
                    let mut r = Repo::at(&std::env::current_dir().unwrap_or_default());
                    r.master_files.clear();
                    r.runners_file = None;
                    r.golden_dir = None;
                    r
                }
            },
        };
        if !self.master.is_empty() {
            r.master_files = self.master.clone();
        }
        if let Some(x) = &self.runners {
            r.runners_file = Some(x.clone());
        }
        if let Some(x) = &self.changelog {
            r.changelog = x.clone();
        }
        if let Some(x) = &self.golden_al {
            r.golden_dir = Some(x.clone());
        }
        Ok(r)
    }
}

/// A command's output to a reader that went away (`| head`) is not an error: what it wanted was
/// written.
pub fn reader_may_stop(r: anyhow::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                    || c.downcast_ref::<serde_json::Error>().is_some_and(|j| j.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
            }) =>
        {
            Ok(())
        }
        r => r,
    }
}

/// Ctrl-C or SIGTERM sets `flag` (first: finish cleanly, saying `what_happens`; a second Ctrl-C:
/// exit at once). The handlers are registered before this returns, so a signal that comes right
/// after start stops the command cleanly instead of killing it.
pub fn install_interrupt(flag: std::sync::Arc<std::sync::atomic::AtomicBool>, what_happens: &'static str) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    let (int, mut term) = {
        let _ctx = rt.enter();
        (signal(SignalKind::interrupt()).ok(), signal(SignalKind::terminate()).ok())
    };
    let Some(mut int) = int else { return };
    std::thread::spawn(move || {
        rt.block_on(async move {
            // SIGTERM (a cancelled CI job, a batch scheduler's kill) stops as cleanly as Ctrl-C:
            // running points are recorded and submitted Slurm jobs cancelled.
            let first = match term.as_mut() {
                Some(t) => tokio::select! {
                    r = int.recv() => r.is_some(),
                    r = t.recv() => r.is_some(),
                },
                None => int.recv().await.is_some(),
            };
            if first {
                eprintln!("\ninterrupted: {what_happens}. Press Ctrl-C again to exit now.");
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            if int.recv().await.is_some() {
                std::process::exit(130);
            }
        });
    });
}

/// Why `--config KEY` selects no point: a key the master config lacks (with the nearest
/// one), or a config the changelog's latest entry does not plan (with the ones it does).
pub fn config_not_planned(key: &str, master: &crate::recipe::Master, planned: &[&str]) -> anyhow::Error {
    if master.get(key).is_none() {
        let hint = crate::problem::nearest(key, master.keys()).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default();
        return anyhow::anyhow!(
            "--config {key}: no such config key in the master config{hint}; `sweep plan` lists the configs the latest changelog entry selects"
        );
    }
    let mut keys: Vec<&str> = planned.to_vec();
    keys.sort_unstable();
    keys.dedup();
    anyhow::anyhow!(
        "--config {key}: not in the plan of the changelog's latest entry (configs there: {}); append a changelog entry that names it",
        keys.join(", ")
    )
}
