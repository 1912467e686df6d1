//! One point's job from submission to result: submit it (or follow the one an earlier invocation
//! left), poll its state while echoing its log, then gather the point folder it wrote or record
//! why Slurm ended it.

use super::{JobInfo, SlurmError, SlurmRunner, io_error, is_terminal, job_folder, killed_reason};
use crate::pareto::Samples;
use crate::plan::PlanPoint;
use crate::records;
use crate::results::{PointResult, Status, point_dir, write_json};
use crate::run::{Job, pending};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A finished point: its result and, when done, its per-request samples.
type PointDone = (PointResult, Option<Samples>);

/// The job a point waits on, or the point's end before any job ran.
enum Start {
    Job(String),
    Ended(Box<PointDone>),
}

/// A job's log, echoed as it grows.
struct JobLog {
    path: PathBuf,
    /// Bytes already read.
    pos: u64,
    /// A partial last line waiting for the rest.
    tail: String,
    /// `job <id>`, before each echoed line.
    tag: String,
}

impl SlurmRunner {
    pub(super) fn run_job(&self, job: &Job) -> Result<PointDone, SlurmError> {
        let t0 = Instant::now();
        let index = self.points.get(&job.point.id).map(|x| x.0).unwrap_or(0);
        let dir = self.shared.join(job_folder(index, &job.point.id));
        let id = match self.start(job, &dir, t0)? {
            Start::Job(id) => id,
            Start::Ended(done) => return Ok(*done),
        };
        if let Some(t) = &job.turn {
            t.release();
        }
        self.active.lock().expect("lock").insert(id.clone());
        let mut log = JobLog { path: dir.join(format!("slurm-{id}.out")), pos: 0, tail: String::new(), tag: format!("job {id}") };
        let Some(final_info) = self.wait_for_end(job, &id, &mut log) else {
            return self.stopped(job, t0.elapsed().as_secs_f64());
        };
        self.active.lock().expect("lock").remove(&id);
        // The log may still be flushing on a shared filesystem.
        std::thread::sleep(Duration::from_millis(200));
        self.follow(&mut log);
        self.conclude(job, &id, &dir, &log.path, &final_info, t0.elapsed().as_secs_f64())
    }

    /// The point's job: one of this run still queued or running for it (the submitting `sweep`
    /// was killed), followed again with --resume and otherwise cancelled; else a new one,
    /// submitted in plan order.
    fn start(&self, job: &Job, dir: &Path, t0: Instant) -> Result<Start, SlurmError> {
        let p = &job.point;
        let attach = match self.still_active(dir) {
            Some(id) if self.reattach && !job.cancel.load(Ordering::Relaxed) => Some(id),
            Some(id) => {
                self.scancel(&id);
                self.say(&format!("slurm: {} earlier job {id} cancelled (scancel); submitting afresh", p.id));
                None
            }
            None => None,
        };
        if let Some(id) = attach {
            self.say(&format!("slurm: {} following job {id}, submitted by an earlier invocation", p.id));
            return Ok(Start::Job(id));
        }
        // A stale result from an earlier attempt must not be mistaken for this job's.
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| io_error(dir, e))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        // Submitted in plan order: Slurm starts jobs of equal priority oldest first.
        if let Some(t) = &job.turn {
            t.wait();
        }
        if job.cancel.load(Ordering::Relaxed) {
            return self.stopped(job, 0.0).map(|d| Start::Ended(Box::new(d)));
        }
        let id = match self.submit(p, dir) {
            Ok(id) => id,
            Err(e) => return self.failed(job, e.to_string(), t0.elapsed().as_secs_f64()).map(|d| Start::Ended(Box::new(d))),
        };
        let _ = std::fs::write(dir.join("job_id"), format!("{id}\n"));
        self.say(&format!("slurm: {} submitted as job {id}", p.id));
        Ok(Start::Job(id))
    }

    /// Polls job `id` until it ends, echoing its log and its state changes; `None` when the
    /// point was cancelled (the job is then `scancel`led).
    fn wait_for_end(&self, job: &Job, id: &str, log: &mut JobLog) -> Option<JobInfo> {
        let mut last_state = String::new();
        let mut missing_since: Option<Instant> = None;
        let poll = Duration::from_secs_f64(self.cfg.poll_s.max(0.2));
        loop {
            if job.cancel.load(Ordering::Relaxed) {
                self.scancel(id);
                self.active.lock().expect("lock").remove(id);
                self.say(&format!("slurm: {} job {id} cancelled (scancel)", job.point.id));
                return None;
            }
            let info = self.state(id);
            self.follow(log);
            match info {
                Some(i) => {
                    missing_since = None;
                    if i.state != last_state {
                        self.say(&format!("slurm: {} job {id} {}{}", job.point.id, i.state, state_detail(&i)));
                        last_state = i.state.clone();
                    }
                    if is_terminal(&i.state) {
                        return Some(i);
                    }
                }
                None => {
                    // Gone from squeue and scontrol (purged after MinJobAge, or a restarted controller).
                    let since = *missing_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > poll * 5 {
                        return Some(JobInfo::default());
                    }
                }
            }
            // Sleep in short steps so a cancellation reaches `scancel` promptly.
            let until = Instant::now() + poll;
            while Instant::now() < until && !job.cancel.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100).min(poll));
            }
        }
    }

    /// The point once its job has ended: the result it wrote (unless Slurm killed it first), or
    /// why there is none; the job's log is kept in the point folder.
    fn conclude(&self, job: &Job, id: &str, dir: &Path, log: &Path, info: &JobInfo, wall: f64) -> Result<PointDone, SlurmError> {
        let keep_log = |to: &Path| {
            if log.is_file() {
                let _ = std::fs::create_dir_all(to);
                let _ = std::fs::copy(log, to.join("slurm.log"));
            }
        };
        // Slurm's kill wins over what the job recorded while being stopped (a SIGTERM'd
        // `sweep` records its point as cancelled); a point that finished before the kill stands.
        let killed =
            matches!(info.state.as_str(), "TIMEOUT" | "NODE_FAIL" | "CANCELLED" | "OUT_OF_MEMORY" | "PREEMPTED" | "BOOT_FAIL" | "DEADLINE");
        match self.gather(job, &dir.join("run")) {
            Some(Ok((r, _))) if killed && r.status != Status::Done => {
                keep_log(&job.dir);
                self.failed(job, killed_reason(id, info), wall)
            }
            Some(Ok(r)) => {
                keep_log(&job.dir);
                Ok(r)
            }
            Some(Err(e)) => Err(e),
            None => {
                // The job never wrote its point: Slurm killed it, or `sweep` failed before the point ran.
                keep_log(&job.dir);
                let mut reason = killed_reason(id, info);
                if matches!(info.state.as_str(), "COMPLETED" | "FAILED")
                    && let Some(last) = last_log_line(log)
                {
                    reason.push_str(&format!(" (last log line: {last})"));
                }
                self.failed(job, reason, wall)
            }
        }
    }

    /// Submits a point; returns its job id.
    fn submit(&self, p: &PlanPoint, dir: &Path) -> Result<String, SlurmError> {
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
        let o = Command::new(&argv[0]).args(&argv[1..]).output().map_err(|e| SlurmError::Sbatch { message: e.to_string() })?;
        if !o.status.success() {
            return Err(SlurmError::Refused { stderr: String::from_utf8_lossy(&o.stderr).trim().to_string() });
        }
        let out = String::from_utf8_lossy(&o.stdout);
        let id = out.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
            return Err(SlurmError::NoJobId { output: out.trim().to_string() });
        }
        Ok(id)
    }

    /// Echoes the lines appended to the job's log since the last call.
    fn follow(&self, log: &mut JobLog) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&log.path) else { return };
        if f.seek(SeekFrom::Start(log.pos)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_err() {
            return;
        }
        log.pos += buf.len() as u64;
        if self.cfg.quiet {
            return;
        }
        log.tail.push_str(&String::from_utf8_lossy(&buf));
        while let Some(nl) = log.tail.find('\n') {
            let line: String = log.tail.drain(..=nl).collect();
            let line = line.trim_end();
            if !line.is_empty() {
                self.say(&format!("  {} | {line}", log.tag));
            }
        }
    }

    /// Writes a failed point (no result from its job) into the run's point folder.
    fn failed(&self, job: &Job, reason: String, wall_s: f64) -> Result<PointDone, SlurmError> {
        self.ended(job, Status::Failed { reason }, wall_s)
    }

    /// The point was stopped (Ctrl-C, SIGTERM, its matrix's fail-fast) before or while its job ran.
    fn stopped(&self, job: &Job, wall_s: f64) -> Result<PointDone, SlurmError> {
        self.ended(job, Status::Interrupted { reason: crate::targets::STOPPED.into() }, wall_s)
    }

    fn ended(&self, job: &Job, status: Status, wall_s: f64) -> Result<PointDone, SlurmError> {
        std::fs::create_dir_all(&job.dir).map_err(|e| io_error(&job.dir, e))?;
        let mut res = pending(&job.point);
        res.status = status;
        res.wall_s = wall_s;
        let status = job.dir.join("status.json");
        write_json(&status, &res).map_err(|e| io_error(&status, e))?;
        Ok((res, None))
    }

    /// Copies the point folder the job wrote into the run and loads its result.
    fn gather(&self, job: &Job, inner_run: &Path) -> Option<Result<PointDone, SlurmError>> {
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
            return Some(Err(SlurmError::PlannedDifferently { point: job.point.id.clone() }));
        }
        if let Err(e) = crate::run::collect::copy_tree(&from, &job.dir) {
            return Some(Err(io_error(&job.dir, e)));
        }
        let samples = (st.status == Status::Done)
            .then(|| records::export_path(&job.dir).and_then(|f| records::read_jsonl(&f).ok()).map(|r| Samples::from_records(&r, st.gpus)))
            .flatten();
        Some(Ok((st, samples)))
    }
}

/// What a state change line adds: why a job is pending, where it runs.
fn state_detail(i: &JobInfo) -> String {
    match i.state.as_str() {
        "PENDING" if !i.reason.is_empty() && i.reason != "None" => format!(" ({})", i.reason),
        "RUNNING" if !i.nodes.is_empty() => format!(" on {}", i.nodes),
        _ => String::new(),
    }
}

/// The last non-empty line of a job's log (at most 300 characters).
fn last_log_line(log: &Path) -> Option<String> {
    let t = std::fs::read_to_string(log).ok()?;
    t.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.chars().take(300).collect())
}
