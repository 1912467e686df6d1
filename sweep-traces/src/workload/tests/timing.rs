//! Delays, the idle caps and the profiling deadline with its grace.

use super::*;

#[test]
fn global_idle_cap_shifts_all_timers_by_the_same_amount() {
    // Two lanes, no warmup: both first turns take 1 s; next turns are 25 s and 33 s away.
    let a = mk("a", &[(0.0, 1.0), (26.0, 1.0)], &[]);
    let b = mk("b", &[(0.0, 1.0), (34.0, 1.0)], &[]);
    let c = WorkloadConfig { warmup: false, ..cfg(2) };
    let log = run(c, pool(&[a, b]), fixed(S));
    let t = |id: &str| {
        log.records.iter().find(|r| &*r.spec.source_trace_id == id && r.spec.turn_index == 1 && r.spec.play < 2).unwrap().sent_at
    };
    assert_eq!(t("a"), 11 * S, "25 s gap capped to 10 s after the last completion at 1 s");
    assert_eq!(t("b") - t("a"), 8 * S, "relative spacing kept");
}

#[test]
fn a_completion_learnt_late_counts_its_delay_from_when_it_ended() {
    // Turns 6 s apart, each 1 s long: 5 s from one turn's end to the next turn's start.
    let traces = vec![linear("a", 10, 6.0, 1.0)];
    let c = WorkloadConfig { warmup: false, ..cfg(1) };
    let next_wake = |learnt_at: u64, ended: u64| {
        let mut wl = Workload::new(c.clone(), pool(&traces)).unwrap();
        let first = wl.step(0, Event::Start).into_iter().find_map(|a| if let Action::Send(s) = a { Some(s) } else { None }).unwrap();
        let mut out = Vec::new();
        wl.handle_done_at(learnt_at, ended, first.id, None, &mut out);
        out.into_iter().find_map(|a| if let Action::Wake(t) = a { Some(t) } else { None })
    };
    let on_time = next_wake(S, S);
    assert_eq!(on_time, Some(6 * S));
    assert_eq!(next_wake(3 * S, S), on_time, "the delay counts from the end at 1 s, not from when it was learnt (3 s)");
    // An end stamped after the moment it is learnt is taken as now.
    assert_eq!(next_wake(S, 2 * S), on_time);
}

#[test]
fn tree_idle_cap_fires_the_next_turn_at_300_s() {
    // Lane 0 waits 400 s between turns; lane 1 keeps a request in flight (so the global cap stays off).
    let a = mk("a", &[(0.0, 1.0), (401.0, 1.0)], &[]);
    let b = mk("b", &[(0.0, 1.0), (2.0, 1.0)], &[]);
    let c = WorkloadConfig { warmup: false, ..cfg(2) };
    let log = run(c, pool(&[a, b]), |r: &RequestSpec| Service {
        duration_ns: if &*r.source_trace_id == "b" { 500 * S } else { S },
        failure: None,
    });
    let sent = log.records.iter().find(|r| &*r.spec.source_trace_id == "a" && r.spec.turn_index == 1 && r.spec.play == 0).unwrap();
    assert_eq!(sent.sent_at, S + 300 * S);
}

#[test]
fn tree_idle_watchdog_runs_on_the_driver_clock_while_the_global_cap_compresses_timers() {
    // Lane 0 waits 5,000 s between its two turns. Lane 1 has a turn every 100 s, which the global
    // idle cap brings to 10 s apart, pulling every pending timer (lane 0's too) forward each
    // time. Lane 0's idle watchdog, as the reference's, counts 300 s on the driver's clock from
    // its tree going idle and is not moved by those shifts: its next turn goes at 1 s + 300 s.
    let a = mk("a", &[(0.0, 1.0), (5000.0, 1.0)], &[]);
    let main: Vec<(f64, f64)> = (0..60).map(|k| (k as f64 * 100.0, 1.0)).collect();
    let b = mk("b", &main, &[]);
    let c = WorkloadConfig { warmup: false, ..cfg(2) };
    let log = run(c, pool(&[a, b]), fixed(S));
    let sent = log.records.iter().find(|r| &*r.spec.source_trace_id == "a" && r.spec.turn_index == 1 && r.spec.play == 0).unwrap();
    assert_eq!(sent.sent_at, S + 300 * S);
    // Meanwhile lane 1 ran on the compressed clock: far more than three of its turns went first.
    let before = log.records.iter().filter(|r| &*r.spec.source_trace_id == "b" && r.sent_at < sent.sent_at).count();
    assert!(before > 20, "{before}");
}

#[test]
fn nothing_starts_after_the_deadline_and_stragglers_are_cancelled_after_the_grace() {
    let traces: Vec<Trace> = (0..3).map(|i| linear(&format!("t{i}"), 50, 3.0, 1.0)).collect();
    let c = WorkloadConfig { warmup: false, duration_ns: 100 * S, ..cfg(3) };
    let log =
        run(c, pool(&traces), |r: &RequestSpec| Service { duration_ns: if r.turn_index % 3 == 2 { 80 * S } else { 2 * S }, failure: None });
    assert_eq!(log.outcome, Some(Outcome::Completed));
    let deadline = log.profiling_deadline.unwrap();
    assert!(log.records.iter().all(|r| r.sent_at < deadline));
    for r in &log.records {
        let end = r.sent_at + if r.spec.turn_index % 3 == 2 { 80 * S } else { 2 * S };
        if end > deadline + 30 * S {
            assert!(r.cancelled, "request ending at {end} should have been cancelled");
        } else {
            assert!(!r.cancelled && r.done_at == Some(end));
        }
    }
    assert!(log.records.iter().any(|r| r.cancelled));
}
