//! What a request carries: its prompt, theoretical hit and HTTP body; the plan's hit rate.

use super::*;

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

#[test]
fn http_body_has_the_locked_agentx_shape() {
    let t = linear("b", 4, 5.0, 1.0);
    let log = run(WorkloadConfig { warmup: false, ..cfg(1) }, pool(&[t]), fixed(S));
    let v = crate::prompt::WordVocab::default();
    let extra: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"temperature": 0.7, "top_k": 5, "stream": false}"#).unwrap();
    for r in &log.records {
        let b = r.spec.http_body("served", &v, Some(&extra));
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
