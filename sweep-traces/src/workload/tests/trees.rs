//! Session trees: joins, branches begun before their turn ended, flattened agents.

use super::*;

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
