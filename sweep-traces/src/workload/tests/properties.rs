//! Properties under random completion times.

use proptest::prelude::*;

use super::*;

fn check_log(log: &DriveLog, pool: &[Arc<TracePlan>], caps_off: bool) {
    let plan_of: HashMap<&str, &Arc<TracePlan>> = pool.iter().map(|p| (&*p.id, p)).collect();
    let mut by_turn: HashMap<(u64, u16, u32), &SentRecord> = HashMap::new();
    for r in &log.records {
        assert!(by_turn.insert(key(r), r).is_none(), "turn sent twice in one play");
    }
    let mut markers: HashMap<u64, crate::prompt::Marker> = HashMap::new();
    let mut seen_markers = HashSet::new();
    for r in &log.records {
        let m = r.spec.prompt.marker.unwrap();
        match markers.get(&r.spec.play) {
            Some(x) => assert_eq!(*x, m),
            None => {
                assert!(seen_markers.insert(m), "marker shared by two plays");
                markers.insert(r.spec.play, m);
            }
        }
    }
    for r in log.records.iter().filter(|r| r.spec.phase == Phase::Profiling) {
        let plan = plan_of[&*r.spec.source_trace_id];
        let sp = &plan.streams[r.spec.stream as usize];
        let turn = &sp.turns[r.spec.turn_index as usize];
        // No turn before its predecessor finished (+ its delay when no idle cap applies). A child's
        // first turn follows its spawning root turn: its sending (a branch begun before the turn's
        // recorded end) or its completion.
        let branch = sp.branch.map(|b| &plan.branches[b as usize]);
        let pred = if r.spec.turn_index > 0 {
            by_turn.get(&(r.spec.play, r.spec.stream, r.spec.turn_index - 1))
        } else {
            branch.and_then(|b| by_turn.get(&(r.spec.play, 0, b.spawn_turn)))
        };
        let at_issue = r.spec.turn_index == 0 && branch.is_some_and(|b| b.at_issue);
        if let Some(p) = pred {
            let from = if at_issue { Some(p.sent_at) } else { p.done_at };
            if let Some(done) = from {
                assert!(r.sent_at >= done, "turn before its predecessor finished");
                if caps_off && p.spec.phase == Phase::Profiling {
                    assert!(
                        r.sent_at >= done + turn.delay_ns,
                        "turn before its delay: {:?} {:?} sent {} pred {:?} {:?} from {} delay {}",
                        key(r),
                        r.spec.kind,
                        r.sent_at,
                        key(p),
                        p.spec.kind,
                        done,
                        turn.delay_ns
                    );
                }
            } else {
                // Warmup cut short by its grace hands cancelled turns over as played.
                assert_eq!(p.spec.phase, Phase::Warmup, "predecessor cancelled yet turn sent");
            }
        }
        // Join and replay predecessors.
        for &(ps, pi) in &turn.preds {
            if let Some(p) = by_turn.get(&(r.spec.play, ps, pi)) {
                assert!(p.done_at.is_some_and(|d| d <= r.sent_at), "prerequisite {ps}/{pi} not finished");
            }
        }
    }
}

fn synth_pool(n: usize, seed: u64) -> Vec<Arc<TracePlan>> {
    // Small synthetic traces (subagents forced in) keep the property runs fast.
    let g = crate::trace::synth::Generator::new(crate::trace::synth::SynthParams {
        traces: n,
        seed,
        subagent_trace_fraction: 0.5,
        ..Default::default()
    });
    g.traces()
        .map(|mut t| {
            // Trim long traces: the properties do not need hundreds of turns.
            let mut mains = 0;
            t.requests.retain(|e| {
                if e.request().is_some() {
                    mains += 1;
                }
                mains <= 25
            });
            Arc::new(TracePlan::build(&t, seed).unwrap())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn workload_invariants_hold_under_random_service_times(
        seed in 0u64..1000,
        c in 1u32..6,
        caps_off in any::<bool>(),
        durations in proptest::collection::vec(1u64..40_000, 64),
    ) {
        let p = synth_pool(6, seed);
        let mut config = WorkloadConfig { concurrency: c, seed, duration_ns: 1500 * S, warmup_requests_per_lane: 3, ..WorkloadConfig::default() };
        if caps_off {
            config.system_idle_cap_ns = u64::MAX / 4;
            config.trace_idle_cap_ns = u64::MAX / 4;
        }
        let mut i = 0usize;
        let mut svc = |_: &RequestSpec| { i += 1; Service { duration_ns: durations[i % durations.len()] * 1_000_000, failure: None } };
        let mut wl = Workload::new(config.clone(), p.clone()).unwrap();
        let log = drive(&mut wl, 0, &mut svc, |w, _| {
            if w.is_profiling() {
                assert_eq!(w.live_trees(), c as usize, "live trees differ from C");
            }
        });
        prop_assert!(matches!(log.outcome, Some(Outcome::Completed)));
        check_log(&log, &p, caps_off);
        prop_assert_eq!(wl.stats().forced_releases, 0);
        // Same seed, same request sequence.
        let mut j = 0usize;
        let mut wl2 = Workload::new(config, p.clone()).unwrap();
        let log2 = drive(&mut wl2, 0, |_| { j += 1; Service { duration_ns: durations[j % durations.len()] * 1_000_000, failure: None } }, |_, _| {});
        let a: Vec<_> = log.records.iter().map(|r| (r.sent_at, r.spec.id, key(r), r.spec.prompt.marker)).collect();
        let b: Vec<_> = log2.records.iter().map(|r| (r.sent_at, r.spec.id, key(r), r.spec.prompt.marker)).collect();
        prop_assert_eq!(a, b);
    }
}
