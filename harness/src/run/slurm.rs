//! The Slurm target: each point is one batch job that runs `sweep run --point <id>` (the point's
//! server and its replay on the same allocation) into a results directory shared with the compute
//! nodes; when the job ends its point folder is merged into the run, which then has the same
//! layout as a local run. Canary first and fail-fast come from [`super::execute`]: a point whose
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

use super::{Job, Outcome, PointRunner, pending};
use crate::pareto::Samples;
use crate::plan::{Plan, PlanPoint};
use crate::records;
use crate::results::{PointResult, Status, point_dir, write_json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `sweep run --target slurm` options.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Slurm (--target slurm)")]
pub struct SlurmArgs {
    /// Target each job runs its point on, inside the allocation: sim, local, local:engine or url:URL.
    #[arg(long = "slurm-inner-target", value_name = "TARGET", default_value = "sim")]
    pub inner_target: String,
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

/// A bad Slurm option or a failed Slurm command.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SlurmError {
    #[error("--{flag} {value:?}: {why}")]
    BadOption { flag: &'static str, value: String, why: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("`{program}` not found: is Slurm installed and on PATH? (scripts/slurm/start-local.sh starts a single-host Slurm)")]
    Missing { program: String },
}

fn bad(flag: &'static str, value: &str, why: &str) -> SlurmError {
    SlurmError::BadOption { flag, value: value.to_string(), why: why.to_string() }
}

/// Names Slurm accepts for partitions and accounts.
fn check_name(flag: &'static str, v: &str) -> Result<(), SlurmError> {
    if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(bad(flag, v, "expected a name of letters, digits, '-', '_' or '.'"));
    }
    Ok(())
}

/// `minutes`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS` or `UNLIMITED`.
fn check_time(v: &str) -> Result<(), SlurmError> {
    let ok = v.eq_ignore_ascii_case("unlimited") || v.eq_ignore_ascii_case("infinite") || {
        let (days, rest) = match v.split_once('-') {
            Some((d, r)) => (Some(d), r),
            None => (None, v),
        };
        let parts: Vec<&str> = rest.split(':').collect();
        days.is_none_or(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
            && parts.len() <= 3
            && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    };
    if !ok {
        return Err(bad("slurm-time", v, "expected minutes, MM:SS, HH:MM:SS or D-HH:MM:SS (e.g. 90 or 1:30:00)"));
    }
    Ok(())
}

/// One `#SBATCH` option: a single line starting with `-`.
fn check_sbatch_line(v: &str) -> Result<String, SlurmError> {
    let o = v.trim().strip_prefix("#SBATCH").unwrap_or(v.trim()).trim();
    if o.contains(['\n', '\r', '\0']) {
        return Err(bad("slurm-sbatch", v, "one option per flag: it must not contain a line break"));
    }
    if !o.starts_with('-') {
        return Err(bad("slurm-sbatch", v, "expected an sbatch option such as --qos=high or --exclusive"));
    }
    Ok(o.to_string())
}

/// A path given to pyxis' `--container-mounts` (comma- and colon-separated).
fn mount_path(p: &Path) -> Result<String, SlurmError> {
    let s = p.to_str().ok_or_else(|| bad("slurm-container-mount", &p.display().to_string(), "not UTF-8"))?;
    if s.contains([',', ':', '\n']) {
        return Err(bad("slurm-container-mount", s, "pyxis cannot mount a path containing ',' or ':'; use a path without them"));
    }
    Ok(format!("{s}:{s}"))
}

/// The generated batch script (identical for every point of a run; see the module docs).
pub fn batch_script(cfg: &SlurmArgs) -> Result<String, SlurmError> {
    let mut s = String::from("#!/bin/bash\n");
    s.push_str("# Generated by `sweep run --target slurm`: runs one sweep point.\n");
    s.push_str("# Every value reaches `sweep` as an argument of this script (sbatch job.sh ARG...),\n");
    s.push_str("# never as script text, so no recipe value is ever parsed by a shell.\n");
    s.push_str("#SBATCH --nodes=1\n#SBATCH --ntasks=1\n");
    if let Some(p) = &cfg.partition {
        check_name("slurm-partition", p)?;
        s.push_str(&format!("#SBATCH --partition={p}\n"));
    }
    if let Some(a) = &cfg.account {
        check_name("slurm-account", a)?;
        s.push_str(&format!("#SBATCH --account={a}\n"));
    }
    if let Some(t) = &cfg.time {
        check_time(t)?;
        s.push_str(&format!("#SBATCH --time={t}\n"));
    }
    if let Some(g) = cfg.gpus_per_node {
        s.push_str(&format!("#SBATCH --gpus-per-node={g}\n"));
    }
    for l in &cfg.sbatch {
        s.push_str(&format!("#SBATCH {}\n", check_sbatch_line(l)?));
    }
    s.push_str("set -euo pipefail\n");
    s.push_str("echo \"sweep: job ${SLURM_JOB_ID:-?} on $(hostname)\" >&2\n");
    if cfg.container_image.is_some() {
        s.push_str("# $1: container image, $2: container mounts, then the sweep command line.\n");
        s.push_str("image=\"$1\"\nmounts=\"$2\"\nshift 2\n");
        s.push_str(
            "exec srun --ntasks=1 --container-image=\"$image\" --container-mounts=\"$mounts\" --container-workdir=\"$PWD\" \"$@\"\n",
        );
    } else {
        s.push_str("exec \"$@\"\n");
    }
    Ok(s)
}

/// A job's state as Slurm reports it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JobInfo {
    /// `PENDING`, `RUNNING`, `COMPLETED`, `TIMEOUT`, … (no `+` suffix).
    pub state: String,
    pub reason: String,
    pub nodes: String,
    pub exit_code: String,
    pub time_limit: String,
}

/// Whether a job in `state` will not run any more.
pub fn is_terminal(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "FAILED"
            | "TIMEOUT"
            | "CANCELLED"
            | "NODE_FAIL"
            | "OUT_OF_MEMORY"
            | "PREEMPTED"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "REVOKED"
            | "SPECIAL_EXIT"
    )
}

/// Parses `squeue -h -o '%i|%T|%r|%N'` output.
pub fn parse_squeue(out: &str) -> BTreeMap<String, JobInfo> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().splitn(4, '|').collect();
            (f.len() == 4 && !f[0].is_empty()).then(|| {
                (
                    f[0].to_string(),
                    JobInfo {
                        state: f[1].trim_end_matches('+').to_string(),
                        reason: f[2].to_string(),
                        nodes: f[3].to_string(),
                        ..Default::default()
                    },
                )
            })
        })
        .collect()
}

/// Parses one `scontrol show job -o <id>` line.
pub fn parse_scontrol(out: &str) -> Option<JobInfo> {
    let mut kv: BTreeMap<&str, &str> = BTreeMap::new();
    for tok in out.split_whitespace() {
        if let Some((k, v)) = tok.split_once('=') {
            kv.entry(k).or_insert(v);
        }
    }
    let state = kv.get("JobState")?;
    Some(JobInfo {
        state: state.trim_end_matches('+').to_string(),
        reason: kv.get("Reason").unwrap_or(&"").to_string(),
        nodes: kv.get("NodeList").unwrap_or(&"").to_string(),
        exit_code: kv.get("ExitCode").unwrap_or(&"").to_string(),
        time_limit: kv.get("TimeLimit").unwrap_or(&"").to_string(),
    })
}

/// The failure reason of a job Slurm ended before its point wrote a result.
pub fn killed_reason(job_id: &str, info: &JobInfo) -> String {
    let what = match info.state.as_str() {
        "TIMEOUT" => format!("killed by its time limit ({})", if info.time_limit.is_empty() { "?" } else { &info.time_limit }),
        "NODE_FAIL" => format!("node failure{}", if info.nodes.is_empty() { String::new() } else { format!(" on {}", info.nodes) }),
        "CANCELLED" => "cancelled outside sweep".to_string(),
        "OUT_OF_MEMORY" => "out of memory".to_string(),
        "PREEMPTED" => "preempted".to_string(),
        "BOOT_FAIL" => "node boot failure".to_string(),
        "DEADLINE" => "deadline reached".to_string(),
        "" => "state unknown: the job has left slurmctld's memory".to_string(),
        _ => format!("ended (exit code {}) without writing a result", if info.exit_code.is_empty() { "?" } else { &info.exit_code }),
    };
    let reason = if info.reason.is_empty() || info.reason == "None" { String::new() } else { format!(", reason {}", info.reason) };
    format!("Slurm job {job_id} {}: {what}{reason}; see slurm.log", if info.state.is_empty() { "?" } else { &info.state })
}

/// Folder name of a point inside the shared directory (index keeps it unique, the rest readable).
fn job_folder(index: usize, id: &str) -> String {
    let safe: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    format!("{index:03}-{safe}")
}

struct PollCache {
    at: Option<Instant>,
    states: BTreeMap<String, JobInfo>,
}

/// Submits, follows and cancels one job per point.
pub struct SlurmRunner {
    cfg: SlurmArgs,
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
        cfg: SlurmArgs,
        inner: Vec<String>,
        plan: &Plan,
        out: &Path,
        run_id: &str,
        repo_root: &Path,
        resume: bool,
    ) -> Result<Self, SlurmError> {
        if cfg.inner_target == "slurm" {
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
    pub fn script_args(&self, p: &PlanPoint, inner_out: &Path) -> Result<Vec<String>, String> {
        script_args(&self.cfg, &self.mounts, &self.inner, p, inner_out)
    }

    fn say(&self, line: &str) {
        let _g = self.log.lock().expect("lock");
        eprintln!("{line}");
    }

    /// Submits a point; returns its job id.
    fn submit(&self, p: &PlanPoint, dir: &Path) -> Result<String, String> {
        let mut argv = vec![
            "sbatch".to_string(),
            "--parsable".to_string(),
            format!("--job-name={}", self.job_name),
            format!("--comment={}", p.id),
            format!("--output={}", dir.join("slurm-%j.out").display()),
            format!("--chdir={}", self.cwd.display()),
            self.script.display().to_string(),
        ];
        argv.extend(self.script_args(p, &dir.join("run"))?);
        // For people: the exact submission, shell-quoted (sweep itself never goes through a shell).
        let _ = std::fs::write(dir.join("submit.txt"), format!("{}\n", crate::recipe::serving::shell_quote(&argv)));
        let o = Command::new(&argv[0]).args(&argv[1..]).output().map_err(|e| format!("sbatch: {e}"))?;
        if !o.status.success() {
            return Err(format!("sbatch refused the job: {}", String::from_utf8_lossy(&o.stderr).trim()));
        }
        let out = String::from_utf8_lossy(&o.stdout);
        let id = out.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
            return Err(format!("sbatch printed no job id: {:?}", out.trim()));
        }
        Ok(id)
    }

    /// The state of `id`: from the shared `squeue` poll (at most one call per poll interval for
    /// every job in flight), then `scontrol show job` once it has left the queue.
    fn state(&self, id: &str) -> Option<JobInfo> {
        let mut c = self.cache.lock().expect("lock");
        let stale = c.at.is_none_or(|t| t.elapsed() >= Duration::from_secs_f64(self.cfg.poll_s.max(0.2) * 0.9));
        if stale {
            let ids: Vec<String> = self.active.lock().expect("lock").iter().cloned().collect();
            if !ids.is_empty() {
                let o = Command::new("squeue").args(["-h", "-t", "all", "-o", "%i|%T|%r|%N", "-j", &ids.join(",")]).output();
                if let Ok(o) = o
                    && o.status.success()
                {
                    c.states = parse_squeue(&String::from_utf8_lossy(&o.stdout));
                } else {
                    c.states.clear();
                }
            }
            c.at = Some(Instant::now());
        }
        let listed = c.states.get(id).cloned();
        drop(c);
        match listed {
            Some(i) if !is_terminal(&i.state) => Some(i),
            // Ended or not listed: scontrol has the final state, reason, exit code and limit;
            // once slurmctld has forgotten the job (MinJobAge), sacct where accounting is kept.
            _ => scontrol(id).or_else(|| sacct(id)).or(listed),
        }
    }

    /// The job recorded in `dir` when it is still queued or running under this run's job name.
    fn still_active(&self, dir: &Path) -> Option<String> {
        let id = std::fs::read_to_string(dir.join("job_id")).ok()?.trim().to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
            return None;
        }
        let o = Command::new("squeue").args(["-h", "-j", &id, "-o", "%T|%j"]).output().ok()?;
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let (state, name) = out.lines().next()?.split_once('|')?;
        (name == self.job_name && !is_terminal(state.trim_end_matches('+'))).then_some(id)
    }

    fn scancel(&self, id: &str) {
        let _ = Command::new("scancel").arg(id).output();
    }

    /// Echoes lines appended to the job's log since `pos`.
    fn follow(&self, log: &Path, pos: &mut u64, pending_tail: &mut String, tag: &str) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(log) else { return };
        if f.seek(SeekFrom::Start(*pos)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_err() {
            return;
        }
        *pos += buf.len() as u64;
        if self.cfg.quiet {
            return;
        }
        pending_tail.push_str(&String::from_utf8_lossy(&buf));
        while let Some(nl) = pending_tail.find('\n') {
            let line: String = pending_tail.drain(..=nl).collect();
            let line = line.trim_end();
            if !line.is_empty() {
                self.say(&format!("  {tag} | {line}"));
            }
        }
    }

    /// Writes a failed point (no result from its job) into the run's point folder.
    fn failed(&self, job: &Job, reason: String, wall_s: f64) -> Result<(PointResult, Option<Samples>), String> {
        std::fs::create_dir_all(&job.dir).map_err(|e| format!("{}: {e}", job.dir.display()))?;
        let mut res = pending(&job.point);
        res.status = Status::Failed { reason };
        res.wall_s = wall_s;
        write_json(&job.dir.join("status.json"), &res).map_err(|e| e.to_string())?;
        Ok((res, None))
    }

    /// Copies the point folder the job wrote into the run and loads its result.
    fn gather(&self, job: &Job, inner_run: &Path) -> Option<Result<(PointResult, Option<Samples>), String>> {
        let from = point_dir(inner_run, &job.point.id);
        let st: PointResult = serde_json::from_str(&std::fs::read_to_string(from.join("status.json")).ok()?).ok()?;
        if st.status == Status::Pending {
            return None;
        }
        // The job rebuilt the plan from the repository: it must be the same point.
        let planned: Option<serde_json::Value> =
            std::fs::read_to_string(inner_run.join("plan.json")).ok().and_then(|t| serde_json::from_str(&t).ok());
        let inner_point = planned.as_ref().and_then(|pl| {
            std::iter::once(&pl["canary"])
                .chain(pl["matrices"].as_array().into_iter().flatten().flat_map(|m| m["points"].as_array().into_iter().flatten()))
                .find(|x| x["id"] == job.point.id)
                .cloned()
        });
        if let (Some(a), Some((_, b))) = (&inner_point, self.points.get(&job.point.id))
            && a != b
        {
            return Some(Err(format!(
                "{}: the job planned this point differently (did recipes/ or the changelog change while the sweep ran?)",
                job.point.id
            )));
        }
        if let Err(e) = super::collect::copy_tree(&from, &job.dir) {
            return Some(Err(format!("{}: {e}", job.dir.display())));
        }
        let samples = (st.status == Status::Done)
            .then(|| records::read_jsonl(&job.dir.join("profile_export.jsonl")).ok().map(|r| Samples::from_records(&r, st.gpus)))
            .flatten();
        Some(Ok((st, samples)))
    }

    fn run_job(&self, job: &Job) -> Result<(PointResult, Option<Samples>), String> {
        let p = &job.point;
        let t0 = Instant::now();
        let index = self.points.get(&p.id).map(|x| x.0).unwrap_or(0);
        let dir = self.shared.join(job_folder(index, &p.id));
        // A job of this run still queued or running for the point (the submitting `sweep` was
        // killed): with --resume it is followed again; otherwise it is cancelled and replaced.
        let earlier = self.still_active(&dir);
        let attach = match earlier {
            Some(id) if self.reattach && !job.cancel.load(Ordering::Relaxed) => Some(id),
            Some(id) => {
                self.scancel(&id);
                self.say(&format!("slurm: {} earlier job {id} cancelled (scancel); submitting afresh", p.id));
                None
            }
            None => None,
        };
        let id = match attach {
            Some(id) => {
                self.say(&format!("slurm: {} following job {id}, submitted by an earlier invocation", p.id));
                id
            }
            None => {
                // A stale result from an earlier attempt must not be mistaken for this job's.
                if dir.exists() {
                    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                // Submitted in plan order: Slurm starts jobs of equal priority oldest first.
                if let Some(t) = &job.turn {
                    t.wait();
                }
                if job.cancel.load(Ordering::Relaxed) {
                    return self.failed(job, "cancelled".into(), 0.0);
                }
                let id = match self.submit(p, &dir) {
                    Ok(id) => id,
                    Err(e) => return self.failed(job, e, t0.elapsed().as_secs_f64()),
                };
                let _ = std::fs::write(dir.join("job_id"), format!("{id}\n"));
                self.say(&format!("slurm: {} submitted as job {id}", p.id));
                id
            }
        };
        if let Some(t) = &job.turn {
            t.release();
        }
        self.active.lock().expect("lock").insert(id.clone());
        let log = dir.join(format!("slurm-{id}.out"));
        let (mut pos, mut tail) = (0u64, String::new());
        let tag = format!("job {id}");
        let mut last_state = String::new();
        let mut missing_since: Option<Instant> = None;
        let poll = Duration::from_secs_f64(self.cfg.poll_s.max(0.2));
        let final_info = loop {
            if job.cancel.load(Ordering::Relaxed) {
                self.scancel(&id);
                self.active.lock().expect("lock").remove(&id);
                self.say(&format!("slurm: {} job {id} cancelled (scancel)", p.id));
                return self.failed(job, "cancelled".into(), t0.elapsed().as_secs_f64());
            }
            let info = self.state(&id);
            self.follow(&log, &mut pos, &mut tail, &tag);
            match info {
                Some(i) => {
                    missing_since = None;
                    if i.state != last_state {
                        let extra = match i.state.as_str() {
                            "PENDING" if !i.reason.is_empty() && i.reason != "None" => format!(" ({})", i.reason),
                            "RUNNING" if !i.nodes.is_empty() => format!(" on {}", i.nodes),
                            _ => String::new(),
                        };
                        self.say(&format!("slurm: {} job {id} {}{extra}", p.id, i.state));
                        last_state = i.state.clone();
                    }
                    if is_terminal(&i.state) {
                        break i;
                    }
                }
                None => {
                    // Gone from squeue and scontrol (purged after MinJobAge, or a restarted controller).
                    let since = *missing_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > poll * 5 {
                        break JobInfo::default();
                    }
                }
            }
            // Sleep in short steps so a cancellation reaches `scancel` promptly.
            let until = Instant::now() + poll;
            while Instant::now() < until && !job.cancel.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100).min(poll));
            }
        };
        self.active.lock().expect("lock").remove(&id);
        // The log may still be flushing on a shared filesystem.
        std::thread::sleep(Duration::from_millis(200));
        self.follow(&log, &mut pos, &mut tail, &tag);
        let wall = t0.elapsed().as_secs_f64();
        let keep_log = |to: &Path| {
            if log.is_file() {
                let _ = std::fs::create_dir_all(to);
                let _ = std::fs::copy(&log, to.join("slurm.log"));
            }
        };
        // Slurm's kill wins over what the job recorded while being stopped (a SIGTERM'd
        // `sweep` records its point as cancelled); a point that finished before the kill stands.
        let killed = matches!(
            final_info.state.as_str(),
            "TIMEOUT" | "NODE_FAIL" | "CANCELLED" | "OUT_OF_MEMORY" | "PREEMPTED" | "BOOT_FAIL" | "DEADLINE"
        );
        match self.gather(job, &dir.join("run")) {
            Some(Ok((r, _))) if killed && r.status != Status::Done => {
                keep_log(&job.dir);
                self.failed(job, killed_reason(&id, &final_info), wall)
            }
            Some(Ok(r)) => {
                keep_log(&job.dir);
                Ok(r)
            }
            Some(Err(e)) => Err(e),
            None => {
                // The job never wrote its point: Slurm killed it, or `sweep` failed before the point ran.
                keep_log(&job.dir);
                let mut reason = killed_reason(&id, &final_info);
                if matches!(final_info.state.as_str(), "COMPLETED" | "FAILED")
                    && let Some(last) = last_log_line(&log)
                {
                    reason.push_str(&format!(" (last log line: {last})"));
                }
                self.failed(job, reason, wall)
            }
        }
    }
}

/// The batch script's arguments for a point (see [`SlurmRunner::script_args`]).
fn script_args(cfg: &SlurmArgs, mounts: &[String], inner: &[String], p: &PlanPoint, inner_out: &Path) -> Result<Vec<String>, String> {
    let mut a = Vec::new();
    if let Some(img) = &cfg.container_image {
        let image = if img == "recipe" {
            p.row.get("image").and_then(|v| v.as_str()).filter(|s| !s.is_empty()).map(str::to_string).ok_or_else(|| {
                format!(
                    "--slurm-container-image recipe: config {} pins no image (set `image:` in its master config row or pass an image)",
                    p.config_key
                )
            })?
        } else {
            img.clone()
        };
        a.push(image);
        a.push(mounts.join(","));
    }
    a.extend(inner.iter().cloned());
    a.extend(["--point".to_string(), p.id.clone(), "--out".to_string(), inner_out.display().to_string()]);
    Ok(a)
}

fn last_log_line(log: &Path) -> Option<String> {
    let t = std::fs::read_to_string(log).ok()?;
    t.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.chars().take(300).collect())
}

fn scontrol(id: &str) -> Option<JobInfo> {
    let o = Command::new("scontrol").args(["show", "job", "-o", id]).output().ok()?;
    if !o.status.success() {
        return None;
    }
    parse_scontrol(&String::from_utf8_lossy(&o.stdout))
}

/// Parses `sacct -n -P -X -o JobID,State,ExitCode,Timelimit,NodeList,Reason` (one line per job).
pub fn parse_sacct(out: &str, id: &str) -> Option<JobInfo> {
    out.lines().find_map(|l| {
        let f: Vec<&str> = l.trim().split('|').collect();
        // A state such as `CANCELLED by 0` keeps its first word.
        (f.len() >= 6 && f[0] == id).then(|| JobInfo {
            state: f[1].split_whitespace().next().unwrap_or("").trim_end_matches('+').to_string(),
            exit_code: f[2].to_string(),
            time_limit: f[3].to_string(),
            nodes: f[4].to_string(),
            reason: f[5].to_string(),
        })
    })
}

/// The job from accounting storage; `None` where there is none (a Slurm without slurmdbd).
fn sacct(id: &str) -> Option<JobInfo> {
    if !on_path("sacct") {
        return None;
    }
    let o =
        Command::new("sacct").args(["-n", "-P", "-X", "-j", id, "-o", "JobID,State,ExitCode,Timelimit,NodeList,Reason"]).output().ok()?;
    if !o.status.success() {
        return None;
    }
    parse_sacct(&String::from_utf8_lossy(&o.stdout), id).filter(|i| !i.state.is_empty())
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
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

    fn run_point(&self, job: &Job) -> Result<(PointResult, Option<Samples>), String> {
        self.run_job(job)
    }

    fn matrices_at_once(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::tests::repo_plan;

    fn cfg() -> SlurmArgs {
        SlurmArgs { inner_target: "sim".into(), poll_s: 2.0, max_jobs: 8, ..Default::default() }
    }

    #[test]
    fn script_has_only_validated_directives_and_runs_its_arguments() {
        let s = batch_script(&cfg()).unwrap();
        assert!(s.starts_with("#!/bin/bash\n"));
        assert!(s.ends_with("exec \"$@\"\n"), "{s}");
        assert!(!s.contains("--partition") && !s.contains("--gpus-per-node") && !s.contains("--time"), "{s}");
        let c = SlurmArgs {
            partition: Some("gpu".into()),
            account: Some("perf-team".into()),
            time: Some("1-02:00:00".into()),
            gpus_per_node: Some(4),
            sbatch: vec!["--exclusive".into(), "#SBATCH --qos=high".into()],
            ..cfg()
        };
        let s = batch_script(&c).unwrap();
        for l in [
            "#SBATCH --partition=gpu\n",
            "#SBATCH --account=perf-team\n",
            "#SBATCH --time=1-02:00:00\n",
            "#SBATCH --gpus-per-node=4\n",
            "#SBATCH --exclusive\n",
            "#SBATCH --qos=high\n",
        ] {
            assert!(s.contains(l), "missing {l:?} in\n{s}");
        }
        // Directives come before the first command, or sbatch ignores them.
        let first_cmd = s.find("set -euo").unwrap();
        assert!(s.rfind("#SBATCH").unwrap() < first_cmd);
    }

    #[test]
    fn bad_options_are_refused_with_the_flag_and_the_fix() {
        let e = batch_script(&SlurmArgs { partition: Some("gpu\n#SBATCH --x".into()), ..cfg() }).unwrap_err();
        assert!(e.to_string().contains("--slurm-partition"), "{e}");
        let e = batch_script(&SlurmArgs { sbatch: vec!["--qos=a\nrm -rf /".into()], ..cfg() }).unwrap_err();
        assert!(e.to_string().contains("line break"), "{e}");
        let e = batch_script(&SlurmArgs { sbatch: vec!["qos=a".into()], ..cfg() }).unwrap_err();
        assert!(e.to_string().contains("--qos=high"), "{e}");
        for t in ["1h", "", "1:2:3:4", "-5", "$(x)"] {
            assert!(batch_script(&SlurmArgs { time: Some(t.into()), ..cfg() }).is_err(), "{t}");
        }
        for t in ["1", "90", "1:30", "01:00:00", "2-00", "2-12:00:00", "UNLIMITED"] {
            assert!(batch_script(&SlurmArgs { time: Some(t.into()), ..cfg() }).is_ok(), "{t}");
        }
        assert!(mount_path(Path::new("/a,b")).is_err());
        assert_eq!(mount_path(Path::new("/scratch/run")).unwrap(), "/scratch/run:/scratch/run");
    }

    #[test]
    fn container_script_takes_image_and_mounts_as_arguments() {
        let s = batch_script(&SlurmArgs { container_image: Some("lmsysorg/sglang:v0.5.5-cu129-amd64".into()), ..cfg() }).unwrap();
        assert!(s.contains("image=\"$1\"\nmounts=\"$2\"\nshift 2\n"), "{s}");
        assert!(s.contains("srun --ntasks=1 --container-image=\"$image\" --container-mounts=\"$mounts\""), "{s}");
        assert!(!s.contains("lmsysorg"), "the image never appears in script text");
    }

    #[test]
    fn a_hostile_argument_passes_through_the_script_inert() {
        // The script as a job runs it, with hostile values as arguments: printed back verbatim,
        // nothing executed.
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("job.sh");
        std::fs::write(&script, batch_script(&cfg()).unwrap()).unwrap();
        let marker = d.path().join("pwned");
        let hostile = [
            format!("$(touch {})", marker.display()),
            format!("`touch {}`", marker.display()),
            format!("a'b\"c; touch {}", marker.display()),
            format!("line1\nline2 $(touch {})", marker.display()),
        ];
        let o = Command::new("bash").arg(&script).args(["printf", "%s\\0"]).args(&hostile).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got: Vec<String> = String::from_utf8(o.stdout).unwrap().split('\0').filter(|s| !s.is_empty()).map(str::to_string).collect();
        assert_eq!(got, hostile);
        assert!(!marker.exists(), "a value was executed");
    }

    #[test]
    fn squeue_and_scontrol_output_parse() {
        let m = parse_squeue("12|RUNNING|None|node1\n13|PENDING|Resources|\n14|COMPLETING+|None|n2\n");
        assert_eq!(m["12"].state, "RUNNING");
        assert_eq!(m["12"].nodes, "node1");
        assert_eq!(m["13"].reason, "Resources");
        assert_eq!(m["14"].state, "COMPLETING");
        let line = "JobId=17 JobName=sweep-x UserId=root(0) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) \
                    ExitCode=0:15 RunTime=00:01:03 TimeLimit=00:01:00 NodeList=vm Command=/a b";
        let i = parse_scontrol(line).unwrap();
        assert_eq!(
            (i.state.as_str(), i.reason.as_str(), i.time_limit.as_str(), i.nodes.as_str()),
            ("TIMEOUT", "TimeLimit", "00:01:00", "vm")
        );
        assert!(is_terminal(&i.state) && !is_terminal("PENDING") && !is_terminal("COMPLETING"));
        let r = killed_reason("17", &i);
        assert!(r.contains("TIMEOUT") && r.contains("time limit (00:01:00)") && r.contains("TimeLimit"), "{r}");
        let nf = killed_reason("18", &JobInfo { state: "NODE_FAIL".into(), nodes: "gpu3".into(), ..Default::default() });
        assert!(nf.contains("node failure on gpu3"), "{nf}");
        assert!(parse_scontrol("slurm_load_jobs error: Invalid job id specified").is_none());
        let a = parse_sacct("4711|TIMEOUT|0:0|01:00:00|gpu3|TimeLimit\n", "4711").unwrap();
        assert_eq!((a.state.as_str(), a.time_limit.as_str(), a.nodes.as_str()), ("TIMEOUT", "01:00:00", "gpu3"));
        assert_eq!(parse_sacct("12|CANCELLED by 0|0:15|UNLIMITED|n1|None", "12").unwrap().state, "CANCELLED");
        // Without accounting storage sacct answers with a message, not a job.
        assert!(parse_sacct("Slurm accounting storage is disabled", "12").is_none());
    }

    #[test]
    fn container_arguments_carry_the_recipe_image_and_the_mounts() {
        let plan = repo_plan();
        let p = plan.canary.as_ref().unwrap();
        let pinned = p.row["image"].as_str().unwrap().to_string();
        let inner = vec!["/opt/sweep".to_string(), "run".into(), "full-sweep-fail-fast".into()];
        let mounts = vec!["/scratch/run:/scratch/run".to_string(), "/repo:/repo".into()];
        let out = Path::new("/scratch/run/000/run");
        let c = SlurmArgs { container_image: Some("recipe".into()), ..cfg() };
        let a = script_args(&c, &mounts, &inner, p, out).unwrap();
        assert_eq!(a[0], pinned);
        assert_eq!(a[1], "/scratch/run:/scratch/run,/repo:/repo");
        assert_eq!(&a[2..5], &inner[..]);
        assert_eq!(&a[5..], &["--point".to_string(), p.id.clone(), "--out".into(), "/scratch/run/000/run".into()]);
        let c = SlurmArgs { container_image: Some("registry.local/sglang:test".into()), ..cfg() };
        assert_eq!(script_args(&c, &mounts, &inner, p, out).unwrap()[0], "registry.local/sglang:test");
        // Without a container the script's arguments are the sweep command line alone.
        let a = script_args(&cfg(), &mounts, &inner, p, out).unwrap();
        assert_eq!(a[0], "/opt/sweep");
        let mut unpinned = p.clone();
        unpinned.row.remove("image");
        let e = script_args(&SlurmArgs { container_image: Some("recipe".into()), ..cfg() }, &mounts, &inner, &unpinned, out).unwrap_err();
        assert!(e.contains("pins no image"), "{e}");
    }

    #[test]
    fn job_folders_are_unique_and_filesystem_safe() {
        assert_eq!(job_folder(3, "cfg-a/tp4-c16"), "003-cfg-a_tp4-c16");
        assert_eq!(job_folder(12, "x:y/$(z)"), "012-x_y___z_");
    }
}
