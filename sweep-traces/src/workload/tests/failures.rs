//! Failed requests: context overflow, the live abort, failed warmup requests.

use super::*;

#[test]
fn context_overflow_ends_the_conversation_but_errors_do_not() {
    let t = linear("o", 10, 5.0, 1.0);
    let c = WorkloadConfig { warmup: false, ..cfg(1) };
    let log = run(c, pool(&[t]), |r: &RequestSpec| Service {
        duration_ns: S,
        failure: match (r.play, r.turn_index) {
            (0, 2) => Some(Failure::Error),
            (0, 4) => Some(Failure::ContextOverflow),
            _ => None,
        },
    });
    let play0: Vec<u32> = log.records.iter().filter(|r| r.spec.play == 0).map(|r| r.spec.turn_index).collect();
    assert_eq!(play0, vec![0, 1, 2, 3, 4]);
    // The lane moved on to the next play right away.
    assert!(log.records.iter().any(|r| r.spec.play == 1));
}

#[test]
fn live_abort_fires_after_max_c_10_records_and_not_before() {
    let traces: Vec<Trace> = (0..3).map(|i| linear(&format!("t{i}"), 40, 2.0, 1.0)).collect();
    let c = WorkloadConfig { warmup: false, ..cfg(3) };
    let mut n = 0;
    let log = run(c, pool(&traces), |_| {
        n += 1;
        Service { duration_ns: S, failure: Some(Failure::Error) }
    });
    assert_eq!(log.outcome, Some(Outcome::Aborted { failed: 10, total: 10 }));
    // One early failure: 1/3 after three records does not abort (not armed), and 1/10 is not above 10 %.
    let c = WorkloadConfig { warmup: false, duration_ns: 300 * S, ..cfg(3) };
    let mut k = 0u64;
    let log = run(c, pool(&traces), |_| {
        k += 1;
        Service { duration_ns: S, failure: if k == 1 { Some(Failure::Error) } else { None } }
    });
    assert_eq!(log.outcome, Some(Outcome::Completed));
}

#[test]
fn root_warmup_failure_cancels_the_run_but_subagent_warmup_failure_does_not() {
    // t* pinned mid-trace while the subagent is active, so the lane sends a child primer.
    let t = mk("w", &[(0.0, 1.0), (10.0, 1.0), (100.0, 1.0), (110.0, 1.0)], &[(1, vec![(20.0, 1.0), (50.0, 1.0), (105.0, 1.0)])]);
    let c = WorkloadConfig { start_min_ratio: 0.5, start_max_ratio: 0.5, ..cfg(1) };
    let root_fail = run(c.clone(), pool(std::slice::from_ref(&t)), |r: &RequestSpec| Service {
        duration_ns: S,
        failure: (r.phase == Phase::Warmup && r.stream == 0).then_some(Failure::Error),
    });
    assert_eq!(root_fail.outcome, Some(Outcome::Cancelled { reason: "run_cancelled".into() }));
    let child_fail = run(c, pool(&[t]), |r: &RequestSpec| Service {
        duration_ns: S,
        failure: (r.phase == Phase::Warmup && r.stream == 1).then_some(Failure::Error),
    });
    assert!(child_fail.records.iter().any(|r| r.spec.phase == Phase::Warmup && r.spec.stream == 1 && r.spec.kind == RequestKind::Primer));
    assert_eq!(child_fail.outcome, Some(Outcome::Completed));
}
