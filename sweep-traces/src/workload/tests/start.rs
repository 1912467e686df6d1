//! Where lanes start (t*, the sampler, snapshots), warmup and its hand-off, cache-bust markers.

use super::*;

#[test]
fn t_star_lies_in_the_window_and_every_lane_profiles_a_turn() {
    let traces: Vec<Trace> = (0..6).map(|i| linear(&format!("t{i}"), 3 + 7 * i, 13.0 + i as f64, 2.0)).collect();
    let p = pool(&traces);
    let c = cfg(12);
    for (lane, plan) in p.iter().cycle().take(12).enumerate() {
        let t = t_star_ms(plan, c.seed, lane as u32, 0.25, 0.75);
        let d = (plan.t_max - plan.t_min) * 1000.0;
        assert!(t >= plan.t_min * 1000.0 + 0.25 * d && t <= plan.t_min * 1000.0 + 0.75 * d);
        let snap = snapshot_at(plan, t).expect("a linear trace is live at any t* inside its span");
        assert!((snap.live[0].next as usize) < plan.root_turns());
        assert!(plan.streams[0].turns[snap.live[0].next as usize].t * 1000.0 >= t);
    }
    let log = run(c, p, fixed(S));
    assert_eq!(log.outcome, Some(Outcome::Completed));
    for lane in 0..12 {
        assert!(log.records.iter().any(|r| r.spec.lane == lane && r.spec.phase == Phase::Profiling), "lane {lane} has no profiled turn");
    }
}

#[test]
fn same_seed_same_sequence_and_different_seed_different_placement() {
    let traces: Vec<Trace> = (0..5).map(|i| linear(&format!("t{i}"), 20 + i, 9.0, 3.0)).collect();
    let seq = |seed: u64| {
        let c = WorkloadConfig { seed, ..cfg(3) };
        let log = run(c, pool(&traces), |r: &RequestSpec| Service { duration_ns: (1 + r.turn_index as u64 % 4) * S, failure: None });
        log.records
            .iter()
            .map(|r| (r.sent_at, r.spec.lane, r.spec.source_trace_id.to_string(), r.spec.turn_index, r.spec.phase, r.spec.prompt.marker))
            .collect::<Vec<_>>()
    };
    assert_eq!(seq(42), seq(42));
    let p = pool(&traces);
    let t = |seed: u64| (0..3).map(|l| t_star_ms(&p[l], seed, l as u32, 0.25, 0.75)).collect::<Vec<_>>();
    assert_eq!(t(42), t(42));
    assert_ne!(t(42), t(43));
}

#[test]
fn sequential_sampler_plays_every_trace_before_repeating() {
    let traces: Vec<Trace> = (0..7).map(|i| linear(&format!("t{i}"), 2, 1.0, 0.5)).collect();
    let log = run(cfg(3), pool(&traces), fixed(S));
    let mut plays: Vec<(u64, String)> = log.records.iter().map(|r| (r.spec.play, r.spec.source_trace_id.to_string())).collect();
    plays.sort();
    plays.dedup();
    let order: Vec<String> = plays.into_iter().map(|p| p.1).collect();
    assert!(order.len() > 14);
    for (i, id) in order.iter().enumerate() {
        assert_eq!(id, &format!("t{}", i % 7), "play {i}");
    }
}

#[test]
fn warmup_sends_ten_one_token_requests_per_lane_plus_primers() {
    let traces: Vec<Trace> = (0..4).map(|i| linear(&format!("t{i}"), 60, 10.0, 2.0)).collect();
    let log = run(cfg(4), pool(&traces), fixed(S));
    let warm: Vec<&SentRecord> = log.records.iter().filter(|r| r.spec.kind == RequestKind::LaneWarmup).collect();
    assert_eq!(warm.len(), 40);
    for lane in 0..4 {
        assert_eq!(warm.iter().filter(|r| r.spec.lane == lane).count(), 10, "lane {lane}");
    }
    let primers: Vec<&SentRecord> = log.records.iter().filter(|r| r.spec.kind == RequestKind::Primer).collect();
    assert_eq!(primers.len(), 4);
    // Every warmup request, primers included, asks for one token; a primer is the turn before t*.
    assert!(log.records.iter().filter(|r| r.spec.phase == Phase::Warmup).all(|r| r.spec.max_tokens == 1));
    for p in &primers {
        assert!(p.spec.turn_index > 0);
    }
    // The play after the primers starts only when every primer is back.
    let last_primer = primers.iter().map(|r| r.done_at.unwrap()).max().unwrap();
    assert!(warm.iter().all(|r| r.sent_at >= last_primer));
    // Profiling starts after every warmup request finished.
    let start = log.profiling_start.unwrap();
    assert!(log.records.iter().filter(|r| r.spec.phase == Phase::Warmup).all(|r| r.done_at.unwrap() <= start));
    assert!(log.records.iter().filter(|r| r.spec.phase == Phase::Profiling).all(|r| r.sent_at >= start));
    // Warmup turns are consumed: profiling continues with the following turns, never repeating.
    let mut seen = HashSet::new();
    for r in &log.records {
        assert!(seen.insert(key(r)), "turn sent twice: {:?}", key(r));
    }
}

#[test]
fn primers_are_spread_so_every_lane_reaches_t_star_together() {
    // Lanes' last turns before t* lie at different distances from their t*; the primer recorded
    // furthest before its t* goes first and each other one waits the difference (leads capped at
    // the 10 s system idle cap).
    let traces: Vec<Trace> = (0..6).map(|i| linear(&format!("t{i}"), 40, 3.0 + 2.5 * i as f64, 0.5)).collect();
    let p = pool(&traces);
    let c = cfg(6);
    let log = run(c.clone(), p.clone(), fixed(S));
    let mut leads = Vec::new();
    for lane in 0..6u32 {
        let plan = &p[lane as usize];
        let t = t_star_ms(plan, c.seed, lane, 0.25, 0.75);
        let snap = snapshot_at(plan, t).unwrap();
        let (s, i) = snap.primers().next().unwrap();
        let lead = (t - plan.streams[s as usize].turns[i as usize].t * 1000.0).min(10_000.0);
        let rec = log.records.iter().find(|r| r.spec.lane == lane && r.spec.kind == RequestKind::Primer).unwrap();
        assert_eq!((rec.spec.stream, rec.spec.turn_index), (s, i));
        leads.push((lead, rec.sent_at));
    }
    let max_lead = leads.iter().map(|l| l.0).fold(f64::MIN, f64::max);
    for (lead, sent) in leads {
        assert_eq!(sent, ((max_lead - lead) * 1e6).round() as u64, "lead {lead} ms");
    }
    assert!(log.records.iter().filter(|r| r.spec.kind == RequestKind::Primer).any(|r| r.sent_at > 0));
}

#[test]
fn warmup_plays_through_a_trace_end_into_the_next_trace() {
    // Short traces: ten delay-free warmup requests run past each tree's end, so lanes take the
    // sampler's next traces (from their first turn, with fresh markers) during warmup.
    let traces: Vec<Trace> = (0..5).map(|i| linear(&format!("s{i}"), 4, 20.0, 1.0)).collect();
    // No system idle cap: profiling's first requests keep their places.
    let mut wl = Workload::new(WorkloadConfig { system_idle_cap_ns: u64::MAX / 4, ..cfg(2) }, pool(&traces)).unwrap();
    let log = drive(&mut wl, 0, fixed(S), |_, _| {});
    let warm: Vec<&SentRecord> = log.records.iter().filter(|r| r.spec.kind == RequestKind::LaneWarmup).collect();
    assert_eq!(warm.len(), 20);
    assert!(wl.stats().warmup_recycles >= 4, "{:?}", wl.stats());
    let traces_warmed: HashSet<String> = warm.iter().map(|r| r.spec.source_trace_id.to_string()).collect();
    assert!(traces_warmed.len() >= 4, "{traces_warmed:?}");
    // Delay-free: each warmup request of a lane goes out the instant the previous one is back.
    for lane in 0..2 {
        let w: Vec<&&SentRecord> = warm.iter().filter(|r| r.spec.lane == lane).collect();
        for pair in w.windows(2) {
            assert_eq!(pair[1].sent_at, pair[0].done_at.unwrap(), "warmup request {:?} waited", key(pair[1]));
        }
    }
    // At the hand-off a tree begun in warmup is placed on its own recorded clock: its next turn's
    // start minus its first turn's start, less one minimum over the lanes.
    let start = log.profiling_start.unwrap();
    let plans = pool(&traces);
    let firsts: Vec<&SentRecord> = (0..2)
        .map(|lane| {
            log.records.iter().filter(|r| r.spec.lane == lane && r.spec.phase == Phase::Profiling).min_by_key(|r| r.sent_at).unwrap()
        })
        .collect();
    let place = |r: &SentRecord| {
        assert!(r.spec.pass > 0, "lane {} still plays its first tree", r.spec.lane);
        let plan = plans.iter().find(|p| *p.id == *r.spec.source_trace_id).unwrap();
        let turns = &plan.streams[0].turns;
        turns[r.spec.turn_index as usize].t * 1000.0 - turns[0].t * 1000.0
    };
    let t0 = firsts.iter().map(|r| place(r)).fold(f64::INFINITY, f64::min);
    for r in &firsts {
        assert_eq!(r.sent_at - start, ((place(r) - t0) * 1e6).round() as u64, "lane {}", r.spec.lane);
    }
    // A recycled play starts at turn 0 and carries its own marker.
    let recycled = warm.iter().find(|r| r.spec.pass > 0).unwrap();
    let first = log.records.iter().filter(|r| r.spec.play == recycled.spec.play).map(|r| r.spec.turn_index).min();
    assert_eq!(first, Some(0));
}

#[test]
fn profiling_places_each_stream_at_its_recorded_start_minus_one_phase_wide_minimum() {
    // No warmup requests after the primers: the first profiled turn of each lane is its first
    // turn at or after t*, sent (its start − t*) − min over lanes after profiling starts.
    let traces: Vec<Trace> = (0..4).map(|i| linear(&format!("p{i}"), 30, 7.0 + 3.0 * i as f64, 0.5)).collect();
    let p = pool(&traces);
    let c = WorkloadConfig { warmup_requests_per_lane: 0, ..cfg(4) };
    let log = run(c.clone(), p.clone(), fixed(S));
    let start = log.profiling_start.unwrap();
    let mut offsets = Vec::new();
    for lane in 0..4u32 {
        let plan = &p[lane as usize];
        let t = t_star_ms(plan, c.seed, lane, 0.25, 0.75);
        let snap = snapshot_at(plan, t).unwrap();
        offsets.push((lane, snap.live[0].next, snap.live[0].offset_ms));
    }
    let t0 = offsets.iter().map(|o| o.2).fold(f64::INFINITY, f64::min);
    for (lane, next, off) in offsets {
        let first =
            log.records.iter().filter(|r| r.spec.lane == lane && r.spec.phase == Phase::Profiling).min_by_key(|r| r.sent_at).unwrap();
        assert_eq!(first.spec.turn_index, next, "lane {lane}");
        assert_eq!(first.sent_at, start + ((off - t0) * 1e6).round() as u64, "lane {lane}");
    }
}

#[test]
fn snapshot_takes_every_conversation_alive_at_t_star() {
    // Root turns at 0, 10, 20, 60, 70; turn 1 spawns a subagent (21–41 s) joined by turn 3; turn 2
    // spawns a background subagent that starts late (50 s).
    let t = mk(
        "x",
        &[(0.0, 1.0), (10.0, 1.0), (20.0, 1.0), (60.0, 1.0), (70.0, 1.0)],
        &[(1, vec![(21.0, 5.0), (31.0, 5.0), (41.0, 5.0)]), (2, vec![(50.0, 1.0)])],
    );
    let plan = TracePlan::build(&t, 42).unwrap();
    // At 30 s: root's next is turn 3 (60 s), which joins the first subagent: the root waits. The
    // first subagent is live from its turn 1 (31 s), primed with turn 0. The second group's
    // spawning turn (2, at 20 s) was sent, so it is live from its first turn with no primer.
    let snap = snapshot_at(&plan, 30_000.0).unwrap();
    let root = snap.live.iter().find(|l| l.stream == 0).unwrap();
    assert_eq!((root.next, root.waiting), (3, true));
    assert_eq!(root.offset_ms, 30_000.0);
    let first = snap.live.iter().find(|l| l.stream == 1).unwrap();
    assert_eq!((first.next, first.offset_ms, first.waiting), (1, 1_000.0, false));
    let second = snap.live.iter().find(|l| l.stream == 2).unwrap();
    assert_eq!((second.next, second.offset_ms), (0, 20_000.0));
    let primers: Vec<(u16, u32)> = snap.primers().collect();
    assert_eq!(primers, vec![(0, 2), (1, 0)]);
    // At 15 s the first subagent has not started and its spawning turn (1, at 10 s) was sent:
    // live from turn 0; the second group's spawning turn (20 s) is still ahead: not live.
    let snap = snapshot_at(&plan, 15_000.0).unwrap();
    assert_eq!(snap.live.iter().map(|l| (l.stream, l.next)).collect::<Vec<_>>(), vec![(0, 2), (1, 0)]);
    // At 45 s the first subagent is over and the second is live.
    let snap = snapshot_at(&plan, 45_000.0).unwrap();
    assert!(snap.finished.contains(&1));
    // A t* past the last root turn with nothing else alive has no snapshot.
    assert!(snapshot_at(&plan, 71_000.0).is_none());
}

#[test]
fn markers_follow_the_reference_digest_and_count_passes_per_trace() {
    // sha256("bench-1:0:3:trace_0001")[:12] and sha256("bench-1:2:0:trace_0001")[:12] (Python).
    assert_eq!(crate::prompt::Marker::new("bench-1", 0, 3, "trace_0001").hex(), "a0547ad7e2f4");
    assert_eq!(crate::prompt::Marker::new("bench-1", 2, 0, "trace_0001::sa:agent_1").hex(), "2bc787a5b397");
    // Three lanes over one trace: passes 0, 1, 2 of that trace, one per lane.
    let traces = vec![linear("only", 40, 5.0, 1.0)];
    let c = WorkloadConfig { run_id: "bench-1".into(), ..cfg(3) };
    let log = run(c, pool(&traces), fixed(S));
    for lane in 0..3u32 {
        let m = log.records.iter().find(|r| r.spec.lane == lane && r.spec.pass == 0).unwrap().spec.prompt.marker.unwrap();
        assert_eq!(m, crate::prompt::Marker::new("bench-1", lane as u64, lane, "only"), "lane {lane}");
    }
}

#[test]
fn markers_are_shared_within_a_play_and_fresh_on_recycle() {
    let traces: Vec<Trace> = (0..2).map(|i| linear(&format!("t{i}"), 30, 5.0, 1.0)).collect();
    let log = run(cfg(2), pool(&traces), fixed(S));
    let mut by_play: HashMap<u64, HashSet<String>> = HashMap::new();
    for r in &log.records {
        by_play.entry(r.spec.play).or_default().insert(r.spec.prompt.marker.unwrap().hex());
    }
    assert!(by_play.len() > 2, "needs recycled plays");
    let mut all = HashSet::new();
    for (play, m) in &by_play {
        assert_eq!(m.len(), 1, "play {play} has several markers");
        assert!(all.insert(m.iter().next().unwrap().clone()), "marker reused across plays");
    }
    // The first user message of every request starts with the marker.
    let v = crate::prompt::WordVocab::default();
    for r in log.records.iter().take(50) {
        let msgs = r.spec.prompt.messages(&v);
        let first_user = msgs.iter().find(|m| m.role == crate::prompt::Role::User).unwrap();
        assert!(first_user.content.starts_with(&r.spec.prompt.marker.unwrap().text()));
        assert_eq!(msgs.last().unwrap().role, crate::prompt::Role::User);
    }
}
