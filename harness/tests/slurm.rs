//! `sweep run --target slurm` against a real Slurm: one batch job per point, merged into one run.
//!
//! These need a running Slurm whose jobs can reach this machine's files (a single-host Slurm:
//! `scripts/slurm/start-local.sh`, as root). They are ignored by default; `.ci/run` starts Slurm
//! and runs them. When no Slurm answers they fail and say so.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CANARY: &str = "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1";
const P2: &str = "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c4";
const P3: &str = "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp2-ep2-c16";

/// The tests share one small cluster (a single host has as many job slots as cores): they take
/// turns, so one test's jobs never queue behind another's and timings stay meaningful.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn require_slurm() -> std::sync::MutexGuard<'static, ()> {
    let turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let o = Command::new("sinfo").args(["-h", "-o", "%T"]).output();
    let states = match o {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => panic!(
            "Slurm is not answering: `sinfo` failed: {} (start one with scripts/slurm/start-local.sh)",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("Slurm is absent: `sinfo`: {e} (install slurm-wlm and munge, then run scripts/slurm/start-local.sh)"),
    };
    assert!(
        states
            .lines()
            // `planned`: up, and held by the backfill scheduler for a pending job (another test's).
            .any(|s| matches!(
                s.trim().trim_end_matches(['+', '~', '#', '$', '@']),
                "idle" | "mixed" | "allocated" | "completing" | "planned"
            )),
        "no Slurm node is up (sinfo says {states:?}); run scripts/slurm/start-local.sh"
    );
    turn
}

/// A run directory whose name (and so the run's job name) is unique to this test invocation.
fn unique_out(parent: &Path, tag: &str) -> PathBuf {
    let ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    parent.join(format!("{tag}-{}-{}", std::process::id(), ns % 1_000_000_000))
}

fn point<'a>(s: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    s["points"].as_array().unwrap().iter().find(|p| p["id"] == id).unwrap_or_else(|| panic!("no point {id} in {s}"))
}

/// Job ids Slurm ever knew under `name`: the queue (recent jobs) and the jobcomp/filetxt log.
fn jobs_named(name: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let o = Command::new("squeue").args(["-h", "-t", "all", "-n", name, "-o", "%i"]).output().unwrap();
    ids.extend(String::from_utf8_lossy(&o.stdout).split_whitespace().map(str::to_string));
    let conf = Command::new("scontrol").args(["show", "config"]).output().unwrap();
    let conf = String::from_utf8_lossy(&conf.stdout).into_owned();
    let loc = conf.lines().find(|l| l.starts_with("JobCompLoc")).and_then(|l| l.split('=').nth(1)).map(|s| s.trim().to_string());
    if let Some(loc) = loc.filter(|l| Path::new(l).is_file()) {
        for l in std::fs::read_to_string(&loc).unwrap().lines() {
            if l.contains(&format!(" Name={name} "))
                && let Some(id) = l.split_whitespace().find_map(|t| t.strip_prefix("JobId="))
            {
                ids.push(id.to_string());
            }
        }
    }
    ids.sort();
    ids.dedup();
    ids
}

/// A job's final state, once it has finished stopping (a cancelled job's `sweep` stops its point
/// cleanly on SIGTERM, so the job may be COMPLETING for a moment).
fn job_state(id: &str) -> String {
    let t0 = Instant::now();
    loop {
        let o = Command::new("scontrol").args(["show", "job", "-o", id]).output().unwrap();
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        let st = t.split_whitespace().find_map(|t| t.strip_prefix("JobState=")).unwrap_or("?").to_string();
        if !matches!(st.as_str(), "COMPLETING" | "RUNNING" | "PENDING") || t0.elapsed() > Duration::from_secs(30) {
            return st;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn run_sweep(a: &[String], cwd: &Path) -> std::process::Output {
    sweep(&a.iter().map(String::as_str).collect::<Vec<_>>(), cwd)
}

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_three_point_plan_merges_to_the_same_aggregates_as_a_local_run() {
    let _turn = require_slurm();
    let tmp = tempfile::tempdir().unwrap();
    let slurm = unique_out(tmp.path(), "slurm3");
    let local = tmp.path().join("local");
    let common = args(&[
        "run",
        "full-sweep-fail-fast",
        "--configs",
        "dsv41flash-*",
        "--duration",
        "120",
        "--traces",
        "synthetic",
        "--only",
        CANARY,
        P2,
        P3,
    ]);
    let mut a = common.clone();
    a.extend(args(&["--target", "slurm", "--slurm-poll", "0.5", "--out", slurm.to_str().unwrap()]));
    let o = run_sweep(&a, &workspace_root());
    let (so, se) = text(&o);
    assert!(so.contains("3/3 point(s) finished"), "{so}\n{se}");
    // Progress: submissions, states and the jobs' own log lines.
    for id in [CANARY, P2, P3] {
        assert!(se.contains(&format!("slurm: {id} submitted as job")), "{se}");
    }
    assert!(se.contains("RUNNING on ") && se.contains(" | sweep run: 1 point(s) on target sim"), "{se}");

    let mut a = common.clone();
    a.extend(args(&["--target", "sim", "--out", local.to_str().unwrap()]));
    let o = run_sweep(&a, &workspace_root());
    assert!(text(&o).0.contains("3/3 point(s) finished"), "{}", text(&o).1);

    // The same layout as a local run, and identical aggregates.
    for f in ["plan.json", "summary.json", "results.parquet", "report.html", "report.md", "gate.json"] {
        assert!(slurm.join(f).is_file(), "{f} missing from the merged run");
    }
    for id in [CANARY, P2, P3] {
        let read = |run: &Path, f: &str| std::fs::read(harness::results::point_dir(run, id).join(f)).unwrap();
        assert_eq!(read(&local, "agg.json"), read(&slurm, "agg.json"), "{id}: aggregates differ");
        let recs = |run: &Path| export_text(&harness::results::point_dir(run, id));
        assert_eq!(recs(&local), recs(&slurm), "{id}: records differ");
        assert!(String::from_utf8(read(&slurm, "slurm.log")).unwrap().contains("sweep: job "), "{id}: job log kept");
    }
    let (l, s) = (harness::results::RunSummary::load(&local).unwrap(), harness::results::RunSummary::load(&slurm).unwrap());
    assert_eq!(l.curves, s.curves, "same frontiers and coverage");
    assert_eq!(s.target, "slurm");
    assert_eq!(
        s.points.iter().map(|p| (&p.id, &p.status)).collect::<Vec<_>>(),
        l.points.iter().map(|p| (&p.id, &p.status)).collect::<Vec<_>>()
    );
    let name = format!("sweep-{}", slurm.file_name().unwrap().to_str().unwrap());
    assert_eq!(jobs_named(&name).len(), 3, "one job per point");
}

/// Fixed-seq-len points go through Slurm as AgentX points do: one job each, the same
/// `benchmark_serving.json` and aggregate as a local run.
#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_fixed_seq_len_points_match_a_local_run() {
    let _turn = require_slurm();
    let tmp = tempfile::tempdir().unwrap();
    let slurm = unique_out(tmp.path(), "slurmfixed");
    let local = tmp.path().join("local");
    let ids = ["dsr1-fp8-h200-sglang/1k1k-tp8-c4", "dsr1-fp8-h200-sglang/8k1k-tp8-c4"];
    let mut common = args(&["run", "full-sweep-fail-fast", "--configs", "dsr1-fp8-h200-*", "--seed-replicates", "0", "--only"]);
    common.extend(args(&ids));
    let mut a = common.clone();
    a.extend(args(&["--target", "slurm", "--slurm-poll", "0.5", "--out", slurm.to_str().unwrap()]));
    let o = run_sweep(&a, &workspace_root());
    let (so, se) = text(&o);
    assert!(so.contains("2/2 point(s) finished"), "{so}\n{se}");
    let mut a = common;
    a.extend(args(&["--target", "sim", "--out", local.to_str().unwrap()]));
    let o = run_sweep(&a, &workspace_root());
    assert!(text(&o).0.contains("2/2 point(s) finished"), "{}", text(&o).1);
    for id in ids {
        let read = |run: &Path, f: &str| std::fs::read(harness::results::point_dir(run, id).join(f)).unwrap();
        assert_eq!(read(&local, "benchmark_serving.json"), read(&slurm, "benchmark_serving.json"), "{id}");
        assert_eq!(read(&local, "agg.json"), read(&slurm, "agg.json"), "{id}: aggregates differ");
        let bs: serde_json::Value = serde_json::from_slice(&read(&slurm, "benchmark_serving.json")).unwrap();
        assert_eq!(bs["completed"], 40, "{id}");
    }
    let name = format!("sweep-{}", slurm.file_name().unwrap().to_str().unwrap());
    assert_eq!(jobs_named(&name).len(), 2, "one job per point");
}

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_failed_canary_leaves_no_other_job_submitted() {
    let _turn = require_slurm();
    let repo = repo_copy();
    // The main job's canary is InferenceX's: the minimum-concurrency 1k/1k point.
    let canary = "dsr1-fp8-b200-sglang/1k1k-tp8-c1";
    edit(&repo.path().join("recipes/dsr1-fp8-b200-sglang.yaml"), "command: python3 -m sglang.launch_server", "command: \"false\"");
    // A hostile run name: it reaches the job name and the log path, and must stay inert.
    let dir = unique_out(repo.path(), "canary $(touch pwned) `touch pwned2` 'q\"");
    let o = run_sweep(
        &args(&[
            "run",
            "full-sweep-fail-fast",
            "--target",
            "slurm",
            "--slurm-inner-target",
            "local",
            "--server-timeout",
            "30",
            "--slurm-poll",
            "0.5",
            "--out",
            dir.to_str().unwrap(),
            "--root",
            repo.path().to_str().unwrap(),
        ]),
        repo.path(),
    );
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{so}\n{se}");
    let s = summary_json(&dir);
    let c = point(&s, canary);
    assert_eq!(c["status"]["state"], "failed", "{c}");
    assert!(c["status"]["reason"].as_str().unwrap().contains("exited during start-up"), "{c}");
    let pts = s["points"].as_array().unwrap();
    // 13 agentic and 26 fixed-seq-len points.
    assert_eq!(pts.len(), 39);
    for p in pts.iter().filter(|p| p["id"] != canary) {
        assert_eq!(p["status"]["state"], "cancelled", "{p}");
    }
    assert_eq!(se.matches("submitted as job").count(), 1, "{se}");
    let name = format!("sweep-{}", dir.file_name().unwrap().to_str().unwrap());
    let jobs = jobs_named(&name);
    assert_eq!(jobs.len(), 1, "only the canary was submitted: {jobs:?}");
    assert!(!repo.path().join("pwned").exists() && !repo.path().join("pwned2").exists(), "a value was executed");
}

/// A repository copy whose H200 recipe starts a "server" that never answers /health: a `sleep`
/// with a unique duration, so a test can look for it among the processes afterwards.
fn never_healthy_repo() -> (tempfile::TempDir, String) {
    let repo = repo_copy();
    let ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() % 1_000_000;
    let marker = format!("600.{}{ns:06}", std::process::id());
    edit(
        &repo.path().join("recipes/dsv3-fp8-h200-sglang-agentic.yaml"),
        "command: python3 -m sglang.launch_server",
        &format!("command: [bash, -c, 'exec sleep {marker}']"),
    );
    (repo, marker)
}

/// Processes whose command line contains `marker` (none may outlive a killed job).
/// Waits up to 15 s for every process whose command line holds `marker` to exit.
fn assert_gone_within_15s(marker: &str, what: &str) {
    let t1 = Instant::now();
    while !processes_with(marker).is_empty() && t1.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(processes_with(marker), Vec::<String>::new(), "{what}");
}

fn processes_with(marker: &str) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(marker) && !c.contains("cargo") {
                v.push(format!("{}: {c}", e.file_name().to_string_lossy()));
            }
        }
    }
    v
}

const H200: &str = "dsv3-fp8-h200-sglang-agentic/tp8-c1";

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_time_limit_kill_is_a_failed_point_with_the_reason() {
    let _turn = require_slurm();
    let (repo, marker) = never_healthy_repo();
    let dir = unique_out(repo.path(), "timeout");
    let t0 = Instant::now();
    // The point waits up to 15 minutes for its server; Slurm's 1-minute limit ends it first.
    let o = run_sweep(
        &args(&[
            "run",
            "full-sweep-fail-fast",
            "--only",
            H200,
            "--target",
            "slurm",
            "--slurm-inner-target",
            "local",
            "--server-timeout",
            "900",
            "--slurm-time",
            "1",
            "--slurm-poll",
            "1",
            "--out",
            dir.to_str().unwrap(),
            "--root",
            repo.path().to_str().unwrap(),
        ]),
        repo.path(),
    );
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{so}\n{se}");
    assert!(t0.elapsed() < Duration::from_secs(240), "took {:?}", t0.elapsed());
    let s = summary_json(&dir);
    let p = point(&s, H200);
    assert_eq!(p["status"]["state"], "failed", "{p}");
    let reason = p["status"]["reason"].as_str().unwrap();
    assert!(reason.contains("TIMEOUT") && reason.contains("time limit (00:01:00)"), "{reason}");
    assert!(harness::results::point_dir(&dir, H200).join("slurm.log").is_file());
    assert!(se.contains(" TIMEOUT"), "{se}");
    assert_eq!(processes_with(&marker), Vec::<String>::new(), "the point's server outlived its job");
}

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_interrupt_cancels_submitted_jobs() {
    signal_cancels_submitted_jobs(libc::SIGINT);
}

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_sigterm_cancels_submitted_jobs() {
    // What a cancelled CI job or an outer batch scheduler sends.
    signal_cancels_submitted_jobs(libc::SIGTERM);
}

fn signal_cancels_submitted_jobs(signal: i32) {
    let _turn = require_slurm();
    let (repo, marker) = never_healthy_repo();
    let dir = unique_out(repo.path(), "sigint");
    let err = repo.path().join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["run", "full-sweep-fail-fast", "--only", H200, "--target", "slurm", "--server-timeout", "900"])
        .args(["--slurm-inner-target", "local", "--slurm-poll", "0.5", "--out", dir.to_str().unwrap()])
        .args(["--root", repo.path().to_str().unwrap()])
        .current_dir(repo.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let job = loop {
        let t = std::fs::read_to_string(&err).unwrap_or_default();
        if t.contains("RUNNING on ") && !processes_with(&marker).is_empty() {
            break t.split("submitted as job ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the job's server never started:\n{t}");
        assert!(child.try_wait().unwrap().is_none(), "sweep exited early:\n{t}");
        std::thread::sleep(Duration::from_millis(200));
    };
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let status = child.wait().unwrap();
    let t = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(130), "{t}");
    assert!(t.contains(&format!("job {job} cancelled (scancel)")), "{t}");
    assert_eq!(job_state(&job), "CANCELLED");
    assert_gone_within_15s(&marker, "the point's server outlived its cancelled job");
}

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_fail_fast_cancels_the_rest_of_the_matrix() {
    let _turn = require_slurm();
    // One point whose server exits at once, two whose servers never answer: the first failure
    // must scancel the other two jobs of the matrix (running or still queued).
    let (repo, marker) = never_healthy_repo();
    edit(
        &repo.path().join("recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml"),
        "command: python3 -m sglang.launch_server",
        "command: \"false\"",
    );
    let dir = unique_out(repo.path(), "failfast");
    let (bad, slow) = (P2, ["dsv3-fp8-h200-sglang-agentic/tp8-c1", "dsv3-fp8-h200-sglang-agentic/tp8-c4"]);
    let o = run_sweep(
        &args(&[
            "run",
            "full-sweep-fail-fast",
            "--only",
            bad,
            slow[0],
            slow[1],
            "--target",
            "slurm",
            "--slurm-inner-target",
            "local",
            "--server-timeout",
            "900",
            "--slurm-time",
            "3",
            "--slurm-poll",
            "0.5",
            "--out",
            dir.to_str().unwrap(),
            "--root",
            repo.path().to_str().unwrap(),
        ]),
        repo.path(),
    );
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{so}\n{se}");
    // Submitted in plan order, so the failing point is not queued behind the two that hold the
    // node's two job slots until their time limit.
    let submitted: Vec<(&str, u64)> = se
        .lines()
        .filter_map(|l| l.strip_prefix("slurm: ")?.split_once(" submitted as job "))
        .map(|(id, job)| (id, job.trim().parse().unwrap()))
        .collect();
    assert_eq!(submitted.iter().map(|s| s.0).collect::<Vec<_>>(), [bad, slow[0], slow[1]], "{se}");
    assert!(submitted.windows(2).all(|w| w[0].1 < w[1].1), "{se}");
    let s = summary_json(&dir);
    assert_eq!(point(&s, bad)["status"]["state"], "failed", "{se}");
    for &(id, job) in &submitted[1..] {
        let p = point(&s, id);
        assert_eq!(p["status"]["state"], "cancelled", "{p}");
        assert!(p["status"]["reason"].as_str().unwrap().contains(&format!("fail-fast: {bad} failed")), "{p}");
        assert!(se.contains(&format!("slurm: {id} job {job} cancelled (scancel)")), "{se}");
        assert_eq!(job_state(&job.to_string()), "CANCELLED");
    }
    assert_gone_within_15s(&marker, "a cancelled job's server survived");
}

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_refused_submission_is_a_failed_canary_with_sbatch_s_words() {
    let _turn = require_slurm();
    let tmp = tempfile::tempdir().unwrap();
    let dir = unique_out(tmp.path(), "refused");
    let o = run_sweep(
        &args(&[
            "run",
            "full-sweep-fail-fast",
            "--configs",
            "dsv41flash-*",
            "--duration",
            "120",
            "--target",
            "slurm",
            "--slurm-partition",
            "no-such-partition",
            "--out",
            dir.to_str().unwrap(),
        ]),
        &workspace_root(),
    );
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{so}\n{se}");
    let s = summary_json(&dir);
    let reason = point(&s, CANARY)["status"]["reason"].as_str().unwrap().to_string();
    assert!(reason.starts_with("sbatch refused the job:") && reason.to_lowercase().contains("partition"), "{reason}");
    assert!(s["points"].as_array().unwrap().iter().skip(1).all(|p| p["status"]["state"] == "cancelled"));
}

#[test]
#[ignore = "needs a running Slurm (scripts/slurm/start-local.sh); .ci/run starts one"]
fn slurm_jobs_of_a_killed_sweep_are_followed_with_resume_and_replaced_without() {
    let _turn = require_slurm();
    let tmp = tempfile::tempdir().unwrap();
    let dir = unique_out(tmp.path(), "reattach");
    // Jobs that wait 8 s before starting, so they are still queued when the sweep is killed.
    let base = args(&["run", "full-sweep-fail-fast", "--configs", "dsv41flash-*", "--duration", "120", "--only", CANARY])
        .into_iter()
        .chain(args(&["--target", "slurm", "--slurm-poll", "0.5", "--slurm-sbatch=--begin=now+8", "--out", dir.to_str().unwrap()]))
        .collect::<Vec<_>>();
    let submit_then_kill = || -> String {
        // A new invocation into a run that reached its end is refused; this one stands for an
        // invocation into a run that had not (no verdict yet), which restarts it in place.
        let _ = std::fs::remove_file(dir.join("gate.json"));
        let err = tmp.path().join("killed.txt");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
            .args(&base)
            .current_dir(workspace_root())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        let job = loop {
            let t = std::fs::read_to_string(&err).unwrap_or_default();
            if let Some(j) = t.split("submitted as job ").nth(1).and_then(|r| r.split_whitespace().next()) {
                break j.to_string();
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "nothing submitted:\n{t}");
            std::thread::sleep(Duration::from_millis(100));
        };
        // No chance to cancel anything: the job stays queued.
        child.kill().unwrap();
        child.wait().unwrap();
        job
    };

    // Without --resume, the earlier job is cancelled and the point submitted afresh.
    let first = submit_then_kill();
    let o = run_sweep(&base, &workspace_root());
    let (so, se) = text(&o);
    assert!(se.contains(&format!("earlier job {first} cancelled (scancel)")), "{se}");
    assert!(so.contains("1/1 point(s) finished"), "{so}\n{se}");
    assert_eq!(job_state(&first), "CANCELLED");

    // With --resume, a job still queued for a point already finished in the run is cancelled.
    let redundant = submit_then_kill();
    let mut resume = base.clone();
    resume.push("--resume".into());
    let o = run_sweep(&resume, &workspace_root());
    let se = text(&o).1;
    assert!(se.contains(&format!("earlier job {redundant} cancelled (scancel): the point is already finished")), "{se}");
    assert_eq!(job_state(&redundant), "CANCELLED");

    // With --resume, a job still queued for an unfinished point is followed, not submitted twice.
    std::fs::remove_dir_all(harness::results::point_dir(&dir, CANARY)).unwrap();
    let second = submit_then_kill();
    let o = run_sweep(&resume, &workspace_root());
    let (so, se) = text(&o);
    assert!(se.contains(&format!("following job {second}, submitted by an earlier invocation")), "{se}");
    assert!(!se.contains("submitted as job"), "{se}");
    assert!(so.contains("1/1 point(s) finished"), "{so}\n{se}");
    assert_eq!(job_state(&second), "COMPLETED");
    let s = summary_json(&dir);
    assert_eq!(point(&s, CANARY)["status"]["state"], "done");
}
