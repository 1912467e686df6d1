use super::*;
use crate::workload::driver;

fn cfg(conc: u32) -> FixedConfig {
    FixedConfig { vocab_size: 1000, ..FixedConfig::inferencex(1024, 1024, conc) }
}

/// The lengths are numpy's draws in benchmark_serving's order: inputs, then outputs, then
/// offsets, each `num_prompts` long (values from `np.random.seed(0)`, see `numpy::tests`).
#[test]
fn lengths_are_benchmark_servings_draws() {
    let d = sample(&FixedConfig { num_prompts: 8, ..cfg(1) });
    let ins: Vec<u32> = d.iter().map(|r| r.input_len).collect();
    let outs: Vec<u32> = d.iter().map(|r| r.output_len).collect();
    assert_eq!(ins, [991, 866, 936, 1011, 886, 1014, 922, 828]);
    assert_eq!(outs, [840, 855, 906, 889, 907, 959, 877, 1012]);
    // A ratio of 1 draws nothing for the lengths: the offsets come first then.
    let one = sample(&FixedConfig { num_prompts: 3, range_ratio: 1.0, vocab_size: 128_000, ..cfg(1) });
    assert!(one.iter().all(|r| r.input_len == 1024 && r.output_len == 1024));
    let mut rs = numpy::RandomState::new(0);
    assert_eq!(one.iter().map(|r| i64::from(r.offset)).collect::<Vec<_>>(), rs.randint(0, 128_000, 3));
}

#[test]
fn bad_parameters_name_their_field() {
    let e = |c: FixedConfig| FixedWorkload::new(c).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e(FixedConfig { isl: 0, ..cfg(1) }).contains("`isl`"));
    assert!(e(FixedConfig { osl: 0, ..cfg(1) }).contains("`osl`"));
    assert!(e(FixedConfig { range_ratio: 0.0, ..cfg(1) }).contains("`random-range-ratio`"));
    assert!(e(FixedConfig { range_ratio: 1.5, ..cfg(1) }).contains("outside (0, 1]"));
    assert!(e(FixedConfig { concurrency: 0, ..cfg(1) }).contains("`concurrency`"));
}

/// Warmup sends 2·C copies of request 0 at most C at once and waits for all of them; the main
/// run sends the 10·C requests in order, never more than C in flight, and ends when the last is
/// back; the profiling window is the main run's.
#[test]
fn closed_loop_with_warmup_then_main_run() {
    let c = 4;
    let mut wl = FixedWorkload::new(cfg(c)).unwrap();
    let drawn: Vec<Drawn> = wl.drawn().copied().collect();
    let log = driver::drive(&mut wl, 0, |s| driver::Service { duration_ns: 1_000_000 * (1 + s.max_tokens % 7), failure: None }, |_, _| {});
    let warm: Vec<_> = log.records.iter().filter(|r| r.spec.phase == Phase::Warmup).collect();
    let main: Vec<_> = log.records.iter().filter(|r| r.spec.phase == Phase::Profiling).collect();
    assert_eq!(warm.len(), 2 * c as usize);
    assert!(warm.iter().all(|r| r.spec.source_outer_idx == 0 && r.spec.max_tokens == u64::from(drawn[0].output_len)));
    assert_eq!(main.len(), 10 * c as usize);
    for (i, r) in main.iter().enumerate() {
        assert_eq!(r.spec.source_outer_idx as usize, i, "sent in order");
        assert_eq!(r.spec.prompt.input_tokens(), u64::from(drawn[i].input_len));
        assert_eq!(r.spec.max_tokens, u64::from(drawn[i].output_len));
        assert_eq!(r.spec.api, Api::Completions);
    }
    let last_warm_end = warm.iter().filter_map(|r| r.done_at).max().unwrap();
    assert!(main.iter().all(|r| r.sent_at >= last_warm_end), "the main run starts after every warmup request is back");
    // In flight at each send: requests sent before and not yet done.
    let in_flight = |t: u64| log.records.iter().filter(|r| r.sent_at <= t && r.done_at.is_some_and(|d| d > t)).count();
    assert_eq!(log.records.iter().map(|r| in_flight(r.sent_at)).max(), Some(c as usize));
    assert_eq!(log.profiling_start, Some(last_warm_end));
    assert_eq!(log.profiling_deadline, Some(OPEN_DEADLINE));
    assert_eq!(log.profiling_end, main.iter().filter_map(|r| r.done_at).max());
    assert_eq!(log.outcome, Some(Outcome::Completed));
}

/// Prompts are unique per request (no shared prefix), the same across runs of the same seed.
#[test]
fn prompts_are_unique_and_reproducible() {
    let a = FixedWorkload::new(cfg(2)).unwrap();
    let b = FixedWorkload::new(cfg(2)).unwrap();
    let mut seen = std::collections::HashSet::new();
    for (x, y) in a.requests.iter().zip(&b.requests) {
        assert_eq!(x.prompt.conv_key, y.prompt.conv_key);
        assert!(seen.insert(x.prompt.conv_key));
    }
}

/// More than 5 % failed requests fails the run, as benchmark_serving exits then.
#[test]
fn over_five_percent_failures_abort() {
    let mut wl = FixedWorkload::new(cfg(2)).unwrap();
    let log = driver::drive(
        &mut wl,
        0,
        |s| driver::Service {
            duration_ns: 1_000_000,
            failure: (s.phase == Phase::Profiling && s.source_outer_idx % 10 == 3).then_some(Failure::Error),
        },
        |_, _| {},
    );
    assert_eq!(log.outcome, Some(Outcome::Aborted { failed: 2, total: 20 }));
    let mut wl = FixedWorkload::new(cfg(4)).unwrap();
    let log = driver::drive(
        &mut wl,
        0,
        |s| driver::Service {
            duration_ns: 1_000_000,
            failure: (s.phase == Phase::Profiling && s.source_outer_idx == 3).then_some(Failure::Error),
        },
        |_, _| {},
    );
    assert_eq!(log.outcome, Some(Outcome::Completed), "1 of 40 is within the 5 %");
}
