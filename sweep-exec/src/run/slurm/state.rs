//! Job states: `squeue` (one call for every job in flight per poll), then `scontrol show job`,
//! then `sacct` where accounting is kept; their output parsed; why Slurm ended a job.

use super::SlurmRunner;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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

pub(super) fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

impl SlurmRunner {
    /// The state of `id`: from the shared `squeue` poll (at most one call per poll interval for
    /// every job in flight), then `scontrol show job` once it has left the queue.
    pub(super) fn state(&self, id: &str) -> Option<JobInfo> {
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
    pub(super) fn still_active(&self, dir: &Path) -> Option<String> {
        let id = std::fs::read_to_string(dir.join("job_id")).ok()?.trim().to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
            return None;
        }
        let o = Command::new("squeue").args(["-h", "-j", &id, "-o", "%T|%j"]).output().ok()?;
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let (state, name) = out.lines().next()?.split_once('|')?;
        (name == self.job_name && !is_terminal(state.trim_end_matches('+'))).then_some(id)
    }

    pub(super) fn scancel(&self, id: &str) {
        let _ = Command::new("scancel").arg(id).output();
    }
}
