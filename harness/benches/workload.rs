//! Trace and workload benchmarks: synthetic generation vs reading the real corpus, compact page
//! hashing vs materialising token ids, and a one-hour AgentX point at concurrency 160 driven by
//! the workload alone (fixed service model, no engine). See docs/PERFORMANCE.md ("Workload").

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use harness::prompt::{PAGE_TOKENS, PageHashCache, TokenText, TokenizerVocab, TurnPrompt, WordVocab, mix64};
use harness::targets::body::{BodyPieces, MessageCache};
use harness::trace::synth::{Generator, SynthParams};
use harness::trace::{ReadOptions, read_traces};
use harness::workload::driver::{Service, drive};
use harness::workload::{TracePlan, Workload, WorkloadConfig, default_pool};

fn corpus() -> Option<PathBuf> {
    let root = std::env::var("SWEEP_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let p = root.join("agentx-traces/kv-cache-tester-200.jsonl.gz");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("shared data absent ({}): skipping the real-corpus benchmarks", p.display());
        None
    }
}

fn trace_sets(c: &mut Criterion) {
    let mut g = c.benchmark_group("trace_set_200");
    g.sample_size(10);
    g.bench_function("synthetic_generate", |b| {
        b.iter(|| {
            let gen_ = Generator::new(SynthParams::default());
            let n: usize = gen_.traces().map(|t| t.requests.len()).sum();
            black_box(n)
        })
    });
    g.bench_function("synthetic_compile_pool", |b| b.iter(|| black_box(default_pool(42).len())));
    if let Some(p) = corpus() {
        g.bench_function("real_read_gzip", |b| b.iter(|| black_box(read_traces(&[&p], &ReadOptions::default()).unwrap().traces.len())));
        // Compiling into replay plans includes splitting flattened agents (62 in this corpus).
        let traces = read_traces(&[&p], &ReadOptions::default()).unwrap().traces;
        g.bench_function("real_compile_plans", |b| {
            b.iter(|| black_box(traces.iter().map(|t| TracePlan::build(t, 42).unwrap().streams.len()).sum::<usize>()))
        });
    }
    g.finish();
}

fn big_prompt() -> TurnPrompt {
    // The largest request of the default synthetic set.
    let pool = default_pool(42);
    let mut best: Option<(u64, Arc<TracePlan>, u32)> = None;
    for p in &pool {
        for (i, t) in p.streams[0].prompts.turns.iter().enumerate() {
            if i > 0 && best.as_ref().is_none_or(|b| t.input_tokens > b.0) {
                best = Some((t.input_tokens, p.clone(), i as u32));
            }
        }
    }
    let (_, plan, turn) = best.unwrap();
    TurnPrompt { conversation: plan.streams[0].prompts.clone(), turn, marker: Some(harness::prompt::Marker::new("bench", 0, 0, &plan.id)) }
}

fn prompts(c: &mut Criterion) {
    let p = big_prompt();
    let vocab = WordVocab::default();
    let mut g = c.benchmark_group(format!("prompt_{}k_tokens", p.total_tokens() / 1000));
    g.sample_size(20);
    let mut buf = Vec::new();
    g.bench_function("page_hashes_compact", |b| {
        b.iter(|| {
            buf.clear();
            p.page_hashes_into(PAGE_TOKENS, &mut buf);
            black_box(buf.len())
        })
    });
    let prev = TurnPrompt { turn: p.turn - 1, ..p.clone() };
    let prev_hashes = prev.page_hashes(PAGE_TOKENS);
    let shared = p.shared_tokens_with_previous().unwrap();
    g.bench_function("page_hashes_after_previous_turn", |b| {
        b.iter(|| {
            buf.clear();
            p.page_hashes_after(PAGE_TOKENS, &prev_hashes, shared, &mut buf);
            black_box(buf.len())
        })
    });
    g.bench_function("token_ids_then_hash", |b| {
        b.iter(|| {
            let toks = p.token_ids(&vocab);
            let mut h = 0u64;
            let mut n = 0;
            for page in toks.chunks_exact(PAGE_TOKENS) {
                for &t in page {
                    h = mix64(h ^ u64::from(t));
                }
                n += 1;
            }
            black_box((h, n))
        })
    });
    g.bench_function("messages_text", |b| b.iter(|| black_box(p.messages(&vocab).len())));
    g.finish();
}

fn one_hour_point(c: &mut Criterion) {
    let pool = default_pool(42);
    let mut g = c.benchmark_group("workload_1h_c160");
    g.sample_size(10);
    let service = |r: &harness::workload::RequestSpec| Service {
        duration_ns: 300_000_000 + r.prompt.input_tokens() * 20_000 + r.max_tokens * 15_000_000,
        failure: None,
    };
    {
        let cfg = WorkloadConfig { concurrency: 160, ..WorkloadConfig::default() };
        let mut wl = Workload::new(cfg, pool.clone()).unwrap();
        let mut pages = 0usize;
        let mut tokens = 0u64;
        let log = drive(
            &mut wl,
            0,
            |r| {
                pages += r.prompt.total_tokens() as usize / PAGE_TOKENS;
                tokens += r.prompt.total_tokens();
                service(r)
            },
            |_, _| {},
        );
        eprintln!(
            "one-hour point at C=160: {} requests ({} profiled), {} prompt tokens, {} full pages, {} events",
            log.records.len(),
            log.records.iter().filter(|r| r.spec.phase == harness::workload::Phase::Profiling).count(),
            tokens,
            pages,
            log.events
        );
    }
    g.bench_function("schedule_only", |b| {
        b.iter(|| {
            let cfg = WorkloadConfig { concurrency: 160, ..WorkloadConfig::default() };
            let mut wl = Workload::new(cfg, pool.clone()).unwrap();
            let log = drive(&mut wl, 0, service, |_, _| {});
            black_box(log.records.len())
        })
    });
    g.bench_function("schedule_plus_page_hashes", |b| {
        let mut buf = Vec::new();
        b.iter(|| {
            let cfg = WorkloadConfig { concurrency: 160, ..WorkloadConfig::default() };
            let mut wl = Workload::new(cfg, pool.clone()).unwrap();
            let mut pages = 0usize;
            let log = drive(
                &mut wl,
                0,
                |r| {
                    buf.clear();
                    r.prompt.page_hashes_into(PAGE_TOKENS, &mut buf);
                    pages += buf.len();
                    service(r)
                },
                |_, _| {},
            );
            black_box((log.records.len(), pages))
        })
    });
    g.bench_function("schedule_plus_cached_page_hashes", |b| {
        b.iter(|| {
            let cfg = WorkloadConfig { concurrency: 160, ..WorkloadConfig::default() };
            let mut wl = Workload::new(cfg, pool.clone()).unwrap();
            let mut cache = PageHashCache::new(PAGE_TOKENS, 4096);
            let mut pages = 0usize;
            let log = drive(
                &mut wl,
                0,
                |r| {
                    pages += cache.page_hashes(&r.prompt).len();
                    service(r)
                },
                |_, _| {},
            );
            black_box((log.records.len(), pages))
        })
    });
    g.finish();
}

/// Live prompt synthesis (the client's CPU per request): the largest synthetic request as chat
/// messages in the server's vocabulary, joining per-id pieces against running the tokenizer's
/// decoder, and the serialized request body (whole, and as the live client builds it for a
/// conversation's next turn).
fn synthesis(c: &mut Criterion) {
    let p = big_prompt();
    let mut g = c.benchmark_group(format!("synthesis_{}k_tokens", p.total_tokens() / 1000));
    g.sample_size(10);
    let mut vocabs = vec![("builtin", TokenizerVocab::builtin())];
    if let Some(dir) = corpus().and_then(|c| Some(c.parent()?.parent()?.join("tokenizers/deepseek-v4"))) {
        vocabs.push(("deepseek_v4", TokenizerVocab::from_path(&dir).expect("DeepSeek-V4 tokenizer")));
    }
    for (name, v) in &vocabs {
        eprintln!("{name}: synthesis joins pieces: {}", v.joins_pieces());
        let ids: Vec<Vec<u32>> = p.message_ids(v).into_iter().map(|(_, ids)| ids).collect();
        g.bench_function(format!("{name}_decode_synthesis"), |b| {
            b.iter(|| black_box(ids.iter().map(|m| v.decode(m).len()).sum::<usize>()))
        });
        g.bench_function(format!("{name}_decode_with_decoder"), |b| {
            b.iter(|| black_box(ids.iter().map(|m| v.decode_with_decoder(m).len()).sum::<usize>()))
        });
        g.bench_function(format!("{name}_messages_json"), |b| b.iter(|| black_box(serde_json::to_vec(&p.messages(v)).unwrap().len())));
        // The live client's body of this turn when the previous turn's was built (its messages
        // cached), against building it with nothing cached.
        let prev = TurnPrompt { turn: p.turn - 1, ..p.clone() };
        g.bench_function(format!("{name}_body_uncached"), |b| {
            b.iter(|| black_box(BodyPieces::build("m", &p, 100, v, &MessageCache::default(), &Default::default()).len))
        });
        g.bench_function(format!("{name}_body_after_previous_turn"), |b| {
            b.iter_batched(
                || {
                    let cache = MessageCache::default();
                    BodyPieces::build("m", &prev, 100, v, &cache, &Default::default());
                    cache
                },
                |cache| black_box(BodyPieces::build("m", &p, 100, v, &cache, &Default::default()).len),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, trace_sets, prompts, synthesis, one_hour_point);
criterion_main!(benches);
