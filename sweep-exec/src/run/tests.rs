//! Plan order of submissions, and a run of the repository's own plan through a stand-in batch
//! scheduler.

use super::*;
use crate::metrics;
use crate::plan::{Plan, PlanPoint};
use crate::results::RunSummary;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

#[test]
fn turns_are_served_in_the_order_taken_whatever_order_threads_arrive_in() {
    let order = Arc::new(StartOrder::default());
    let turns: Vec<Turn> = (0..6).map(|_| order.take()).collect();
    let served = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (i, t) in turns.into_iter().enumerate().rev() {
            let served = &served;
            s.spawn(move || {
                // Later turns arrive first; turn 2 is given up without being served.
                std::thread::sleep(std::time::Duration::from_millis(5 * (6 - i as u64)));
                if i == 2 {
                    drop(t);
                    return;
                }
                t.wait();
                served.lock().unwrap().push(i);
                t.release();
                t.release(); // twice is harmless
            });
        }
    });
    assert_eq!(served.into_inner().unwrap(), vec![0, 1, 3, 4, 5]);
}

/// Stands in for a batch scheduler's submission step: waits its turn, then notes the point.
struct Submitter {
    submitted: Mutex<Vec<String>>,
    positions: BTreeMap<String, usize>,
}

impl PointRunner for Submitter {
    fn max_parallel(&self) -> usize {
        16
    }
    fn run(&self, _: &Job) -> Outcome {
        unreachable!("run_point is overridden")
    }
    fn run_point(&self, job: &Job) -> Result<(PointResult, Option<Samples>), RunError> {
        // Points late in the plan reach the submission first unless they wait their turn.
        let late = self.positions.len() - self.positions[&job.point.id];
        std::thread::sleep(std::time::Duration::from_millis(4 * late as u64));
        let turn = job.turn.as_ref().expect("execute gives every point a turn");
        turn.wait();
        self.submitted.lock().unwrap().push(job.point.id.clone());
        turn.release();
        let mut r = pending(&job.point);
        r.status = Status::Done;
        r.summary = Some(metrics::Summary { valid: true, ..Default::default() });
        Ok((r, None))
    }
    fn matrices_at_once(&self) -> bool {
        true
    }
}

/// The repository's own `full-sweep-fail-fast` plan.
pub(in crate::run) fn repo_plan() -> Plan {
    let repo = crate::repo::Repo::at(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let inputs = crate::plan::Inputs::load(&repo).expect("repository config loads");
    let labels = crate::plan::Labels::parse(&["full-sweep-fail-fast"]).unwrap();
    crate::plan::build(&repo, &inputs, &crate::plan::PlanRequest { labels, base: None, no_evals: false }).expect("plan")
}

#[test]
fn parallel_points_reach_their_runner_in_plan_order() {
    let plan = repo_plan();
    let ids: Vec<String> = plan.points().filter(|p| !p.id.starts_with("eval:")).map(|p| p.id.clone()).collect();
    assert!(ids.len() > 8, "{ids:?}");
    let runner = Submitter { submitted: Mutex::new(Vec::new()), positions: ids.iter().cloned().zip(0..).collect() };
    let tmp = tempfile::tempdir().unwrap();
    let opts = RunOptions {
        run_id: "order".into(),
        labels: vec!["full-sweep-fail-fast".into()],
        target: "test".into(),
        out: tmp.path().join("run"),
        resume: false,
        only: Vec::new(),
        seed: 1,
        replicates: 10,
        seed_replicates: 0,
        identity: None,
        verbose: false,
        eval_limit: None,
    };
    execute(&plan, &opts, &runner, &Arc::new(AtomicBool::new(false))).unwrap();
    let submitted = runner.submitted.into_inner().unwrap();
    let mut sorted = submitted.clone();
    sorted.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(sorted, all, "every point is submitted once");
    // The canary first; matrices run at once, so their points interleave, each matrix in plan order.
    assert_eq!(submitted.first(), plan.canary.as_ref().map(|c| &c.id));
    assert!(plan.matrices.len() > 1, "the repository's plan has several matrices");
    for m in &plan.matrices {
        let want: Vec<&String> = m.points.iter().map(|p| &p.id).collect();
        let got: Vec<&String> = submitted.iter().filter(|id| want.contains(id)).collect();
        assert_eq!(got, want, "matrix {}", m.name);
    }
}

/// Runs points one at a time and notes what ran, in order: `run:<id>` and `eval:<id>`.
struct Sequence {
    log: Mutex<Vec<String>>,
    kept: Mutex<Vec<String>>,
    fail: Option<String>,
}

impl PointRunner for Sequence {
    fn max_parallel(&self) -> usize {
        1
    }
    fn run(&self, _: &Job) -> Outcome {
        unreachable!("run_point is overridden")
    }
    fn run_point(&self, job: &Job) -> Result<(PointResult, Option<Samples>), RunError> {
        self.log.lock().unwrap().push(format!("run:{}", job.point.id));
        let mut r = pending(&job.point);
        r.status =
            if self.fail.as_deref() == Some(job.point.id.as_str()) { Status::Failed { reason: "test".into() } } else { Status::Done };
        r.summary = Some(metrics::Summary { valid: true, ..Default::default() });
        Ok((r, None))
    }
    fn run_eval(&self, job: &EvalJob) -> EvalOutcome {
        self.log.lock().unwrap().push(job.point.id.clone());
        EvalOutcome { status: Status::Done, detail: Some(serde_json::json!({"task": "gsm8k", "em_strict": 0.95, "n_eff": 1319})) }
    }
    fn keep_server_after(&self, ids: &[String]) {
        self.kept.lock().unwrap().extend(ids.iter().cloned());
    }
}

fn options(out: &Path, resume: bool) -> RunOptions {
    RunOptions {
        run_id: "evals".into(),
        labels: vec!["full-sweep-fail-fast".into()],
        target: "test".into(),
        out: out.to_path_buf(),
        resume,
        only: Vec::new(),
        seed: 1,
        replicates: 10,
        seed_replicates: 0,
        identity: None,
        verbose: false,
        eval_limit: None,
    }
}

#[test]
fn each_eval_runs_right_after_the_last_throughput_point_of_its_server() {
    let plan = repo_plan();
    let evals: Vec<&PlanPoint> = plan.evals.iter().flat_map(|m| m.points.iter()).collect();
    assert!(!evals.is_empty(), "the repository's agentic sweep selects evals");
    let runner = Sequence { log: Mutex::new(Vec::new()), kept: Mutex::new(Vec::new()), fail: None };
    let tmp = tempfile::tempdir().unwrap();
    let s = execute(&plan, &options(&tmp.path().join("run"), false), &runner, &Arc::new(AtomicBool::new(false))).unwrap();
    let log = runner.log.into_inner().unwrap();
    let kept = runner.kept.into_inner().unwrap();
    for e in &evals {
        let at = log.iter().position(|x| x == &e.id).unwrap_or_else(|| panic!("{} ran: {log:?}", e.id));
        let prev = log[at - 1].strip_prefix("run:").expect("a throughput point runs just before");
        let twin = plan.points().find(|p| p.id == prev).unwrap();
        assert_eq!((twin.config_key.as_str(), &twin.launch), (e.config_key.as_str(), &e.launch), "{log:?}");
        assert!(kept.contains(&twin.id), "the runner is told to keep {}'s server: {kept:?}", twin.id);
        // No later throughput point of the same server: the eval comes after all of them.
        assert!(
            !log[at..].iter().filter_map(|x| x.strip_prefix("run:")).any(|id| plan.points().any(|p| p.id == id && p.launch == e.launch))
        );
    }
    assert_eq!(s.evals.len(), evals.len());
    assert!(s.evals.iter().all(|e| e.status == Status::Done && e.detail.is_some()));
    let on_disk = RunSummary::load(&tmp.path().join("run")).unwrap();
    assert_eq!(on_disk.evals, s.evals, "summary.json keeps the evals");

    // --resume: finished evals do not run again.
    let again = Sequence { log: Mutex::new(Vec::new()), kept: Mutex::new(Vec::new()), fail: None };
    execute(&plan, &options(&tmp.path().join("run"), true), &again, &Arc::new(AtomicBool::new(false))).unwrap();
    assert!(again.log.into_inner().unwrap().iter().all(|x| !x.starts_with("eval:")));
}

#[test]
fn a_failed_canary_cancels_the_evals_too() {
    let plan = repo_plan();
    let canary = plan.canary.as_ref().expect("the plan has a canary").id.clone();
    let runner = Sequence { log: Mutex::new(Vec::new()), kept: Mutex::new(Vec::new()), fail: Some(canary) };
    let tmp = tempfile::tempdir().unwrap();
    let s = execute(&plan, &options(&tmp.path().join("run"), false), &runner, &Arc::new(AtomicBool::new(false))).unwrap();
    assert_eq!(runner.log.into_inner().unwrap().len(), 1, "only the canary ran");
    assert!(!s.evals.is_empty() && s.evals.iter().all(|e| matches!(&e.status, Status::Cancelled { reason } if reason.contains("canary"))));
}
