use super::*;

fn rq(t: f64, api: f64, input: u64, out: u64, ids: &[u64]) -> Request {
    Request {
        t,
        model: "opus".into(),
        input_tokens: input,
        output_tokens: out,
        hash_ids: ids.to_vec(),
        api_time: Some(api),
        think_time: None,
        ttft: None,
        input_types: None,
        output_types: None,
        stop: None,
    }
}

fn items(reqs: &[Request]) -> Vec<Item<'_>> {
    reqs.iter().enumerate().map(|(i, r)| (i as u32, r)).collect()
}

fn keys(v: &[Item]) -> Vec<u32> {
    v.iter().map(|(k, _)| *k).collect()
}

#[test]
fn a_growing_conversation_is_one_chain() {
    let reqs = [rq(0.0, 1.0, 64_000, 10, &[1, 2]), rq(2.0, 1.0, 64_000, 10, &[1, 2, 3]), rq(4.0, 1.0, 64_000, 10, &[1, 2, 3, 4])];
    let s = split(&items(&reqs), (0, 0), 64);
    assert_eq!(keys(&s.main), vec![0, 1, 2]);
    assert!(s.workers.is_empty());
}

#[test]
fn interleaved_agents_off_a_shared_prefix_split_and_are_named() {
    // Main 1,2 → 1,2,3 → 1,2,3,4; a worker forks off 1,2 at t=1.5, while the main's first
    // request is still running (so it cannot be its continuation) → an agent chain `fa:000`;
    // a tiny fresh one-shot on another model → `aux:001`.
    let mut reqs = vec![
        rq(0.0, 2.0, 100_000, 500, &[1, 2]),
        rq(1.5, 5.0, 100_000, 500, &[1, 2, 50]),
        rq(2.0, 1.0, 100_000, 500, &[1, 2, 3]),
        rq(7.0, 1.0, 100_000, 500, &[1, 2, 50, 51]),
        rq(8.0, 1.0, 100_000, 500, &[1, 2, 3, 4]),
        rq(9.0, 0.5, 800, 20, &[900]),
    ];
    reqs[5].model = "haiku".into();
    let s = split(&items(&reqs), (0, 0), 64);
    assert_eq!(keys(&s.main), vec![0, 2, 4]);
    assert_eq!(s.workers.len(), 2);
    assert_eq!(keys(&s.workers[0].items), vec![1, 3]);
    assert_eq!((s.workers[0].suffix.as_str(), s.workers[0].kind), ("fa:000", WorkerKind::Agent));
    assert_eq!((s.workers[1].suffix.as_str(), s.workers[1].kind), ("aux:001", WorkerKind::Aux));
}

#[test]
fn a_compaction_is_a_join_seam_not_a_new_agent() {
    // 1,2,3,4 is compacted to 1,2,9 and the conversation goes on from there; nothing ever
    // returns to 1,2,3,4: the fork is spliced back (one chain, one seam).
    let reqs = [
        rq(0.0, 1.0, 64_000, 10, &[1, 2, 3]),
        rq(2.0, 1.0, 64_000, 10, &[1, 2, 3, 4]),
        rq(4.0, 1.0, 64_000, 10, &[1, 2, 9]),
        rq(6.0, 1.0, 64_000, 10, &[1, 2, 9, 10]),
    ];
    let s = split(&items(&reqs), (0, 0), 64);
    assert_eq!(keys(&s.main), vec![0, 1, 2, 3]);
    assert!(s.workers.is_empty());
    assert_eq!(s.seams, 1);
}

#[test]
fn a_pullback_to_the_longer_state_makes_the_shrink_a_spawn() {
    // Same shrink, but the longer state is extended later: the shrink is another agent.
    let reqs = [
        rq(0.0, 1.0, 64_000, 10, &[1, 2, 3]),
        rq(2.0, 1.0, 64_000, 10, &[1, 2, 3, 4]),
        rq(4.0, 1.0, 64_000, 10, &[1, 2, 9]),
        rq(6.0, 1.0, 64_000, 10, &[1, 2, 3, 4, 5]),
        rq(7.0, 1.0, 64_000, 10, &[1, 2, 9, 10]),
    ];
    let s = split(&items(&reqs), (0, 0), 64);
    assert_eq!(keys(&s.main), vec![0, 1, 3]);
    assert_eq!(keys(&s.workers[0].items), vec![2, 4]);
    assert_eq!(s.seams, 0);
}

#[test]
fn three_concurrent_forks_off_one_request_are_a_worker_group() {
    // Three workers fork off the main's first request while it runs and overlap each other.
    // (Their prompts are shorter than the main's, so each forks off the main, not a sibling;
    // long outputs keep them from being reductions.)
    let mut reqs = vec![rq(0.0, 2.0, 100_000, 500, &[1, 2, 3, 4])];
    for w in 0..3u64 {
        reqs.push(rq(1.0 + w as f64 * 0.1, 5.0, 100_000, 10_000, &[1, 2, 100 + w]));
    }
    reqs.push(rq(10.0, 1.0, 100_000, 500, &[1, 2, 3, 4, 5]));
    let s = split(&items(&reqs), (0, 0), 64);
    assert_eq!(keys(&s.main), vec![0, 4]);
    let names: Vec<&str> = s.workers.iter().map(|w| w.suffix.as_str()).collect();
    assert_eq!(names, vec!["wg:000_000", "wg:000_001", "wg:000_002"]);
}

#[test]
fn a_title_generation_preamble_does_not_found_the_main_chain() {
    // A disjoint 20-token call first, then the conversation: the preamble rides the main chain.
    let reqs = [rq(0.0, 0.5, 500, 20, &[77]), rq(1.0, 1.0, 64_000, 10, &[1, 2]), rq(3.0, 1.0, 64_000, 10, &[1, 2, 3])];
    let s = split(&items(&reqs), (0, 0), 64);
    assert_eq!(keys(&s.main), vec![0, 1, 2]);
    assert!(s.workers.is_empty());
}

#[test]
fn another_model_never_extends_a_chain() {
    let mut reqs = vec![rq(0.0, 1.0, 64_000, 10, &[1, 2]), rq(2.0, 1.0, 64_000, 10, &[1, 2, 3]), rq(3.0, 1.0, 64_000, 10, &[1, 2, 3, 4])];
    reqs[1].model = "sonnet".into();
    let s = split(&items(&reqs), (0, 0), 64);
    // Request 1 forks (another model); request 2 extends request 1's prefix but it is on
    // opus, the main chain's tail is [1, 2], so it extends the main chain.
    assert_eq!(keys(&s.main), vec![0, 2]);
    assert_eq!(keys(&s.workers[0].items), vec![1]);
    assert_eq!(s.workers[0].kind, WorkerKind::Aux);
}

#[test]
fn turn_zero_prefix_is_kept_only_when_provably_shared() {
    assert_eq!(init_tokens((100, 28), 64, &[1, 2, 3], &[1, 2, 9]), (100, 28));
    assert_eq!(init_tokens((100, 28), 64, &[1, 2, 3], &[1, 7, 9]), (0, 0));
    assert_eq!(init_tokens((0, 0), 64, &[1], &[1]), (0, 0));
}
