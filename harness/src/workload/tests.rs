use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;

use super::driver::{DriveLog, SentRecord, Service, drive};
use super::*;
use crate::trace::{Entry, InnerRequest, Request, Subagent, Trace};

const S: u64 = SEC;

fn rq(t: f64, api: f64, input: u64, out: u64, ids: std::ops::Range<u64>) -> Request {
    Request {
        t,
        model: "m".into(),
        input_tokens: input,
        output_tokens: out,
        hash_ids: ids.collect(),
        api_time: Some(api),
        think_time: None,
        ttft: None,
        input_types: None,
        output_types: None,
        stop: None,
    }
}

/// A trace with main turns `(t, api)` and subagent groups `(after main turn, [(t, api)])`.
fn mk(id: &str, main: &[(f64, f64)], subs: &[(usize, Vec<(f64, f64)>)]) -> Trace {
    let mut entries = Vec::new();
    let mut next = 0u64;
    for (k, &(t, api)) in main.iter().enumerate() {
        entries.push(Entry::Streaming(rq(t, api, 640 + 64 * k as u64, 50, 0..10 + k as u64)));
        for (j, (after, inner)) in subs.iter().enumerate() {
            if *after == k {
                let reqs = inner
                    .iter()
                    .enumerate()
                    .map(|(i, &(t, api))| {
                        next += 1;
                        InnerRequest::NonStreaming(rq(
                            t,
                            api,
                            1280 + 64 * i as u64,
                            30,
                            1000 * (j as u64 + 1)..1000 * (j as u64 + 1) + 20 + i as u64,
                        ))
                    })
                    .collect();
                entries.push(Entry::Subagent(Subagent {
                    t: inner[0].0,
                    agent_id: format!("agent_{j}"),
                    subagent_type: "Subagent".into(),
                    duration_ms: None,
                    total_tokens: None,
                    tool_use_count: None,
                    status: None,
                    models: vec![],
                    requests: reqs,
                    tool_tokens: 0,
                    system_tokens: 0,
                }));
            }
        }
    }
    let _ = next;
    Trace {
        id: id.into(),
        models: vec!["m".into()],
        block_size: 64,
        hash_id_scope: "local".into(),
        tool_tokens: 128,
        system_tokens: 0,
        requests: entries,
        totals: None,
    }
}

fn pool(traces: &[Trace]) -> Vec<Arc<TracePlan>> {
    traces.iter().map(|t| Arc::new(TracePlan::build(t, 42).unwrap())).collect()
}

/// Evenly spaced main turns: `n` turns, `gap` s apart, each `api` s long.
fn linear(id: &str, n: usize, gap: f64, api: f64) -> Trace {
    let main: Vec<(f64, f64)> = (0..n).map(|k| (k as f64 * gap, api)).collect();
    mk(id, &main, &[])
}

fn cfg(c: u32) -> WorkloadConfig {
    WorkloadConfig { concurrency: c, duration_ns: 2000 * S, ..WorkloadConfig::default() }
}

fn fixed(d: u64) -> impl FnMut(&RequestSpec) -> Service {
    move |_| Service { duration_ns: d, failure: None }
}

fn run(c: WorkloadConfig, p: Vec<Arc<TracePlan>>, svc: impl FnMut(&RequestSpec) -> Service) -> DriveLog {
    let mut wl = Workload::new(c, p).unwrap();
    drive(&mut wl, 0, svc, |_, _| {})
}

fn key(r: &SentRecord) -> (u64, u16, u32) {
    (r.spec.play, r.spec.stream, r.spec.turn_index)
}

// ---------------------------------------------------------------------------------------------

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

#[test]
fn join_waits_for_children_and_children_wait_for_their_spawn() {
    // Root turn 1 spawns two subagents; root turn 2 joins them; a third subagent runs in the background.
    let t = mk("j", &[(0.0, 1.0), (2.0, 1.0), (30.0, 1.0)], &[(1, vec![(4.0, 2.0), (7.0, 2.0)]), (1, vec![(5.0, 1.0)])]);
    let mut bg = mk("bg", &[(0.0, 1.0), (2.0, 1.0)], &[(1, vec![(3.0, 1.0), (5.0, 1.0)])]);
    bg.requests.rotate_left(0);
    let c = WorkloadConfig { warmup: false, ..cfg(1) };
    // Children are slow (20 s each): the join turn must wait for them beyond its own delay.
    let log = run(c, pool(&[t, bg]), |r: &RequestSpec| Service { duration_ns: if r.stream > 0 { 20 * S } else { S }, failure: None });
    let play0: Vec<&SentRecord> = log.records.iter().filter(|r| r.spec.play == 0).collect();
    let get = |s: u16, i: u32| play0.iter().find(|r| r.spec.stream == s && r.spec.turn_index == i).unwrap();
    // Both subagents form one branch (spawned by turn 1, joined by turn 2) that began at 4.0 s,
    // after turn 1's recorded end (3.0 s): each starts when turn 1 completes, at its offset from
    // the branch start (0 s and 1 s).
    let plan =
        TracePlan::build(&mk("j", &[(0.0, 1.0), (2.0, 1.0), (30.0, 1.0)], &[(1, vec![(4.0, 2.0), (7.0, 2.0)]), (1, vec![(5.0, 1.0)])]), 42)
            .unwrap();
    assert_eq!(plan.branches.len(), 1);
    assert_eq!((plan.branches[0].spawn_turn, plan.branches[0].join_turn, plan.branches[0].at_issue), (1, Some(2), false));
    let anchor_done = get(0, 1).done_at.unwrap();
    assert_eq!(get(1, 0).sent_at, anchor_done);
    assert_eq!(get(2, 0).sent_at, anchor_done + S);
    let join = get(0, 2);
    assert!(join.sent_at >= get(1, 1).done_at.unwrap());
    assert!(join.sent_at >= get(2, 0).done_at.unwrap());
    // The background subagent holds the lane: the next play starts only after it finished.
    let play1: Vec<&SentRecord> = log.records.iter().filter(|r| r.spec.play == 1).collect();
    let bg_child_done = play1.iter().filter(|r| r.spec.stream == 1).map(|r| r.done_at.unwrap()).max().unwrap();
    let play2_start = log.records.iter().filter(|r| r.spec.play == 2).map(|r| r.sent_at).min().unwrap();
    assert!(play2_start >= bg_child_done);
    // Correlation ids: constant within a conversation, distinct between parent and children.
    let corr = |s: u16| play0.iter().filter(|r| r.spec.stream == s).map(|r| r.spec.correlation_id.clone()).collect::<HashSet<_>>();
    assert_eq!(corr(0).len(), 1);
    assert_eq!(corr(1).len(), 1);
    assert_ne!(corr(0), corr(1));
    assert_ne!(corr(1), corr(2));
    assert!(play0.iter().all(|r| r.spec.root_correlation_id == *corr(0).iter().next().unwrap()));
    assert_eq!(&*get(1, 0).spec.conversation_id, "j::sa:agent_0");
}

#[test]
fn a_branch_begun_before_its_turn_ended_starts_when_the_turn_is_sent() {
    // Root turn 1 runs 2.0–12.0 s; its subagent starts at 5.0 s, while turn 1 is still running
    // (a tool call that spawned it mid-response): it is dispatched 3 s after turn 1 is sent, not
    // after turn 1 completes. A second subagent begun after the end (13.0 s) and joined later
    // (its own branch) waits for the completion.
    let t = mk("o", &[(0.0, 1.0), (2.0, 10.0), (40.0, 1.0), (80.0, 1.0)], &[(1, vec![(5.0, 1.0)]), (1, vec![(13.0, 30.0)])]);
    let plan = TracePlan::build(&t, 42).unwrap();
    assert_eq!(plan.branches.iter().map(|b| b.at_issue).collect::<Vec<_>>(), vec![true, false]);
    let c = WorkloadConfig { warmup: false, ..cfg(1) };
    let log = run(c, pool(&[t]), fixed(20 * S));
    let play0: Vec<&SentRecord> = log.records.iter().filter(|r| r.spec.play == 0).collect();
    let get = |s: u16, i: u32| play0.iter().find(|r| r.spec.stream == s && r.spec.turn_index == i).unwrap();
    let parent = get(0, 1);
    assert_eq!(get(1, 0).sent_at, parent.sent_at + 3 * S);
    assert!(get(1, 0).sent_at < parent.done_at.unwrap());
    assert_eq!(get(2, 0).sent_at, parent.done_at.unwrap());
}

#[test]
fn flattened_agents_are_replayed_as_children_of_the_root() {
    // Top-level requests of two agents interleaved: the main conversation (ids 0..) and a worker
    // that forked off the main's first prompt while it ran (ids 0..3 then 500..).
    let mut t = linear("f", 4, 10.0, 1.0);
    let worker = |t: f64, n: u64| {
        let mut r = rq(t, 3.0, 2048, 40, 0..3);
        r.hash_ids.extend(500..500 + n);
        Entry::Streaming(r)
    };
    if let Entry::Streaming(r) = &mut t.requests[0] {
        r.api_time = Some(6.0); // still running when the worker starts
    }
    t.requests.insert(1, worker(5.0, 4));
    t.requests.insert(3, worker(12.0, 8));
    let plan = TracePlan::build(&t, 42).unwrap();
    assert_eq!(plan.flat_agents, 1);
    assert_eq!(plan.streams.len(), 2);
    assert_eq!(plan.root_turns(), 4);
    assert_eq!(&*plan.streams[1].conversation_id, "f::fa:000");
    assert_eq!(plan.streams[1].kind, SourceKind::Flat);
    assert_eq!(plan.streams[1].turns.iter().map(|t| t.outer_idx).collect::<Vec<_>>(), vec![1, 3]);
    // Spawned by root turn 0 while it runs (5.0 s < 6.0 s); joined by the first root turn at or
    // after its end (15.0 s): turn 2 (20 s).
    let b = &plan.branches[0];
    assert_eq!((b.spawn_turn, b.join_turn, b.at_issue), (0, Some(2), true));
    // Same agent scope: root turn 2 (20 s) waits for the worker's turn 1 (12–15 s).
    assert!(plan.streams[0].turns[2].preds.contains(&(1, 1)));
    let c = WorkloadConfig { warmup: false, ..cfg(1) };
    let log = run(c, pool(&[t]), fixed(S));
    let sent: Vec<&str> = log.records.iter().filter(|r| r.spec.play == 0).map(|r| &*r.spec.conversation_id).collect();
    assert_eq!(sent.iter().filter(|c| **c == "f::fa:000").count(), 2);
    assert!(log.records.iter().filter(|r| r.spec.play == 0 && r.spec.stream == 1).all(|r| r.spec.source_kind == SourceKind::Flat));
}

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

#[test]
fn request_spec_exposes_prompt_and_theoretical_hit() {
    let t = linear("h", 5, 5.0, 1.0);
    let log = run(WorkloadConfig { warmup: false, ..cfg(1) }, pool(&[t]), fixed(S));
    let r0 = &log.records[0].spec;
    assert_eq!(r0.theoretical_hit(), (0, 10));
    let r1 = &log.records[1].spec;
    assert_eq!(r1.theoretical_hit(), (10, 11));
    assert_eq!(r1.max_tokens, 50);
    assert_eq!(r1.prompt.input_tokens(), 704);
}

// ---------------------------------------------------------------------------------------------
// Properties under random completion times.

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

#[test]
fn http_body_has_the_locked_agentx_shape() {
    let t = linear("b", 4, 5.0, 1.0);
    let log = run(WorkloadConfig { warmup: false, ..cfg(1) }, pool(&[t]), fixed(S));
    let v = crate::prompt::WordVocab::default();
    let extra: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"temperature": 0.7, "top_k": 5, "stream": false}"#).unwrap();
    for r in &log.records {
        let b = r.spec.http_body("served", &v, Some(&extra));
        // The serialized body the live client sends is the same document, extra keys aside.
        let direct: serde_json::Value =
            serde_json::from_slice(&r.spec.http_body_pieces("served", &v, &crate::targets::body::MessageCache::default()).concat())
                .unwrap();
        assert_eq!(direct, r.spec.http_body("served", &v, None));
        assert_eq!(b["model"], "served");
        assert_eq!(b["stream"], true);
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["max_completion_tokens"], r.spec.max_tokens);
        assert_eq!(b["top_k"], 5);
        for absent in ["temperature", "tools", "min_tokens", "max_tokens"] {
            assert!(b.get(absent).is_none(), "{absent} must not be sent");
        }
        let msgs = b["messages"].as_array().unwrap();
        assert_eq!(msgs.last().unwrap()["role"], "user");
        // Turn k carries turn k-1's messages (no reset in this trace) plus its own.
        if r.spec.turn_index > 0 {
            let prev = log.records.iter().find(|p| p.spec.turn_index == r.spec.turn_index - 1 && p.spec.play == r.spec.play).unwrap();
            let pb = prev.spec.http_body("served", &v, None);
            let pm = pb["messages"].as_array().unwrap();
            assert!(!r.spec.prompt.reset_context());
            assert_eq!(msgs[..pm.len() - 1], pm[..pm.len() - 1]);
            assert!(msgs.len() > pm.len());
        }
    }
}

#[test]
fn plan_hit_rate_matches_the_corpus_statistic() {
    // Same definition in both places: a block is a hit if already seen in the trace, walking every
    // request (root and subagents) in recorded order.
    let traces = crate::trace::synth::generate(8, 11);
    let stats = crate::trace::stats::stats_of("s", &traces);
    let (mut hit, mut total) = (0u64, 0u64);
    for t in &traces {
        let p = TracePlan::build(t, 1).unwrap();
        for s in &p.streams {
            for turn in &s.prompts.turns {
                hit += u64::from(turn.hit_blocks);
                total += u64::from(turn.total_blocks);
            }
        }
    }
    assert!((hit as f64 / total as f64 - stats.theoretical_cache_hit_rate).abs() < 1e-12);
}
