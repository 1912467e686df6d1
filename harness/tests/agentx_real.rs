//! Conformance on the real AgentX corpus (`SWEEP_SHARED_DATA`, default `../shared/data`).
//! Ignored by default: run with `cargo test -- --ignored`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use harness::prompt::{MARKER_TOKENS, Marker, TurnPrompt, WordVocab};
use harness::trace::{Entry, ReadOptions, Request, TraceSource, read_traces};
use harness::workload::driver::{Service, drive};
use harness::workload::{Outcome, Phase, TracePlan, Workload, WorkloadConfig, compile_pool};

fn corpus() -> PathBuf {
    let root = std::env::var("SWEEP_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let p = root.join("agentx-traces/kv-cache-tester-200.jsonl.gz");
    assert!(p.exists(), "shared data absent: {} not found; set SWEEP_SHARED_DATA to the shared data directory", p.display());
    p
}

#[test]
#[ignore = "needs the shared AgentX corpus (SWEEP_SHARED_DATA)"]
fn real_prompts_share_exactly_the_hashed_prefix_and_have_in_tokens() {
    let set = read_traces(&[corpus()], &ReadOptions::default()).unwrap();
    let vocab = WordVocab::default();
    // Every 25th trace plus the subagent traces keeps the token materialisation affordable.
    let picked: Vec<_> =
        set.traces.iter().enumerate().filter(|(i, t)| i % 25 == 0 || t.subagents().next().is_some()).map(|(_, t)| t).take(14).collect();
    let mut pairs = 0;
    for t in picked {
        let plan = TracePlan::build(t, 42).unwrap();
        let marker = Marker::new("conformance", 0, 0, &t.id);
        for sp in &plan.streams {
            // (tokens, hash ids, page hashes, first user block) of the previous turn.
            type Prev = (Vec<u32>, Vec<u64>, Vec<u64>, u32);
            let mut prev: Option<Prev> = None;
            // Each turn's recorded request, found by its outer (and inner) index.
            let reqs: Vec<&Request> = sp
                .turns
                .iter()
                .map(|turn| match (&t.requests[turn.outer_idx as usize], turn.inner_idx) {
                    (Entry::Subagent(s), Some(j)) => s.requests[j as usize].request(),
                    (e, None) => e.request().unwrap(),
                    _ => unreachable!("inner index without a subagent entry"),
                })
                .collect();
            for (k, r) in reqs.iter().enumerate() {
                let p = TurnPrompt { conversation: sp.prompts.clone(), turn: k as u32, marker: Some(marker) };
                let toks = p.token_ids(&vocab);
                assert_eq!(toks.len() as u64, r.input_tokens + MARKER_TOKENS as u64, "{} turn {k}", t.id);
                let pages = p.page_hashes(64);
                let first_user = p.shape().first_user_block;
                if let Some((ptoks, pids, ppages, pfu)) = &prev {
                    let l = pids.iter().zip(&r.hash_ids).take_while(|(a, b)| a == b).count();
                    let l = l.min((r.input_tokens / 64) as usize).min(ptoks.len() / 64);
                    let fu = (*pfu).min(first_user) as usize;
                    let shared = if l >= fu && *pfu == first_user { l * 64 + MARKER_TOKENS } else { l.min(fu) * 64 };
                    assert_eq!(ptoks[..shared], toks[..shared], "{} turn {k}: shared prefix differs", t.id);
                    if shared + 64 <= toks.len().min(ptoks.len()) {
                        assert_ne!(
                            ptoks[shared..shared + 64],
                            toks[shared..shared + 64],
                            "{} turn {k}: shares more than the ids say",
                            t.id
                        );
                    }
                    let same_pages = ppages.iter().zip(&pages).take_while(|(a, b)| a == b).count();
                    let same_tok_pages = ptoks.chunks_exact(64).zip(toks.chunks_exact(64)).take_while(|(a, b)| a == b).count();
                    assert_eq!(same_pages, same_tok_pages, "{} turn {k}: page hashes disagree with tokens", t.id);
                    let mut inc = Vec::new();
                    p.page_hashes_after(64, ppages, p.shared_tokens_with_previous().unwrap(), &mut inc);
                    assert_eq!(inc, pages, "{} turn {k}: incremental page hashes differ", t.id);
                    pairs += 1;
                }
                prev = Some((toks, r.hash_ids.clone(), pages, first_user));
            }
        }
    }
    assert!(pairs > 500, "only {pairs} consecutive pairs checked");
}

#[test]
#[ignore = "needs the shared AgentX corpus (SWEEP_SHARED_DATA)"]
fn the_real_corpus_replays_with_every_lane_busy() {
    let mut warnings = Vec::new();
    let source = TraceSource::Files(vec![corpus()]);
    let pool: Vec<Arc<TracePlan>> = compile_pool(&source, &ReadOptions::default(), 42, &mut warnings).unwrap();
    assert_eq!(pool.len(), 200);
    assert!(warnings.is_empty(), "{warnings:?}");
    let c = 24;
    // One hour: the sampler reaches the traces whose subagents start after t* (traces 69–77 of the
    // file; the first ones' subagents all lie before their t* or far beyond the hour).
    let cfg = WorkloadConfig { concurrency: c, duration_ns: 3600 * 1_000_000_000, ..WorkloadConfig::default() };
    let mut wl = Workload::new(cfg, pool).unwrap();
    // A rough server: 0.3 s + 20 µs per prompt token + 15 ms per output token.
    let log = drive(
        &mut wl,
        0,
        |r| Service { duration_ns: 300_000_000 + r.prompt.input_tokens() * 20_000 + r.max_tokens * 15_000_000, failure: None },
        |w, _| {
            if w.is_profiling() {
                assert_eq!(w.live_trees(), c as usize);
            }
        },
    );
    assert_eq!(log.outcome, Some(Outcome::Completed));
    assert_eq!(wl.stats().forced_releases, 0);
    let profiled = log.records.iter().filter(|r| r.spec.phase == Phase::Profiling).count();
    // Every lane keeps its tree going: on average more than 40 profiled requests per lane in the
    // hour (the idle caps bound the recorded gaps; 1,933 with seed 42).
    assert!(profiled > 40 * c as usize, "{profiled}");
    let mut seen = HashSet::new();
    for r in &log.records {
        assert!(seen.insert((r.spec.play, r.spec.stream, r.spec.turn_index)));
    }
    // Subagent streams were replayed.
    assert!(log.records.iter().any(|r| r.spec.stream > 0));
}

/// Live synthesis in the DeepSeek-V4 tokenizer's vocabulary joins per-id pieces (8× faster than
/// its decoder on long prompts): the text must be the decoder's, byte for byte, and encode back
/// to the same ids, over real traces with their cache-bust markers.
#[test]
#[ignore = "needs the shared AgentX corpus (SWEEP_SHARED_DATA)"]
fn deepseek_v4_synthesis_joins_pieces_exactly_as_its_decoder() {
    let root = corpus().parent().unwrap().parent().unwrap().to_path_buf();
    let vocab = harness::prompt::TokenizerVocab::from_path(&root.join("tokenizers/deepseek-v4")).unwrap();
    assert!(vocab.joins_pieces(), "the DeepSeek-V4 decoder is byte-level: joining pieces must reproduce it");
    let set = read_traces(&[corpus()], &ReadOptions::default()).unwrap();
    let mut messages = 0;
    for t in set.traces.iter().step_by(40) {
        let plan = TracePlan::build(t, 42).unwrap();
        let sp = &plan.streams[0];
        let turn = (sp.prompts.turns.len() as u32).min(3) - 1;
        let p = TurnPrompt { conversation: sp.prompts.clone(), turn, marker: Some(Marker::new("conformance", 0, 0, &t.id)) };
        for (_, ids) in p.message_ids(&vocab) {
            let text = harness::prompt::TokenText::decode(&vocab, &ids);
            assert_eq!(text, vocab.decode_with_decoder(&ids), "trace {} turn {turn}", t.id);
            assert_eq!(harness::prompt::TokenText::encode(&vocab, &text).unwrap(), ids, "trace {} turn {turn}", t.id);
            messages += 1;
        }
        // The live client writes content tokens straight into the body's JSON: the same bytes as
        // serializing the decoded messages.
        let body = harness::targets::body::BodyPieces::build("m", &p, 9, &vocab, &Default::default(), &Default::default()).concat();
        let whole = serde_json::json!({
            "model": "m", "messages": p.messages(&vocab), "stream": true, "max_completion_tokens": 9,
            "ignore_eos": true, "stream_options": {"include_usage": true},
        });
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&body).unwrap(), whole, "trace {} turn {turn}", t.id);
        let text = String::from_utf8(body).unwrap();
        for m in p.messages(&vocab) {
            let content = serde_json::to_string(&m.content).unwrap();
            assert!(text.contains(&content), "trace {} turn {turn}: a message's escaped text is in the body as is", t.id);
        }
    }
    assert!(messages >= 5, "{messages} messages checked");
}
