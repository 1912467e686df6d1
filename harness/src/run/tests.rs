//! Plan order of submissions, and a run of the repository's own plan through a stand-in batch
//! scheduler.

use super::*;
use crate::metrics;
use crate::plan::Plan;
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
    crate::plan::build(&repo, &inputs, &crate::plan::PlanRequest { labels, base: None }).expect("plan")
}

#[test]
fn parallel_points_reach_their_runner_in_plan_order() {
    let plan = repo_plan();
    let ids: Vec<String> = plan.points().map(|p| p.id.clone()).collect();
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
    };
    execute(&plan, &opts, &runner, &Arc::new(AtomicBool::new(false))).unwrap();
    assert_eq!(runner.submitted.into_inner().unwrap(), ids);
}
