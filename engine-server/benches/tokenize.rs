//! Tokenizer benchmarks: full encode of a 500K-token conversation through each
//! backend side by side, and the incremental re-encode after one new 2K-token message.
//!
//! `cargo bench -p engine-server --bench tokenize` (reads the DeepSeek-V4 tokenizer from
//! `SWEEP_SHARED_DATA`, default `../shared/data`; without it only the built-in
//! vocabulary runs, and the bench says so).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use engine_server::tokenize::{
    Backend, ChatEncoder, ChatMessage, ChatOptions, Role, TemplateFamily, Tokenizer, deepseek_v4_tokenizer_path, sample, shared_data_dir,
};

const TARGET_TOKENS: usize = 500_000;
/// Template markers add a few tokens; aim a little over 500K.
const AIM_TOKENS: usize = 501_000;
const MESSAGE_BYTES: usize = 8_000;

fn tokenizers() -> Vec<(&'static str, Arc<Tokenizer>)> {
    let mut out = vec![("builtin", Arc::new(Tokenizer::builtin()))];
    match deepseek_v4_tokenizer_path() {
        Some(p) => {
            out.push(("fastokens", Arc::new(Tokenizer::from_path(&p, Backend::Fastokens).unwrap())));
            out.push(("huggingface", Arc::new(Tokenizer::from_path(&p, Backend::HuggingFace).unwrap())));
        }
        None => eprintln!(
            "shared data absent: no DeepSeek-V4 tokenizer under {}; benchmarking the built-in vocabulary only",
            shared_data_dir().display()
        ),
    }
    out
}

/// A conversation of at least 500K tokens under the reference tokenizer (the
/// DeepSeek-V4 one when present), plus a fresh ~2K-token message generator.
fn conversation(reference: &Tokenizer) -> Vec<ChatMessage> {
    sample::conversation_of(7, AIM_TOKENS, MESSAGE_BYTES, |t| reference.encode(t).unwrap().len())
}

fn new_message(i: u64, reference: &Tokenizer) -> ChatMessage {
    // ~2K tokens under the reference tokenizer.
    let per_byte = reference.encode(&sample::text(1, MESSAGE_BYTES)).unwrap().len() as f64 / MESSAGE_BYTES as f64;
    let bytes = (2048.0 / per_byte) as usize;
    ChatMessage::new(Role::User, format!("turn {i}\n{}", sample::text(1_000 + i, bytes)))
}

fn benches(c: &mut Criterion) {
    let toks = tokenizers();
    let reference = toks.last().unwrap().1.clone();
    let convo = conversation(&reference);
    let opts = ChatOptions::default();
    let text = TemplateFamily::DeepSeekV4.render(&convo, &opts);
    let n_ref = reference.encode(&text).unwrap().len();
    assert!(n_ref >= TARGET_TOKENS, "conversation has only {n_ref} tokens");
    for (name, t) in &toks {
        eprintln!("{name}: conversation of {} messages, {} bytes = {} tokens", convo.len(), text.len(), t.encode(&text).unwrap().len());
    }

    let mut g = c.benchmark_group("encode_500k_full");
    g.sample_size(10).warm_up_time(Duration::from_secs(1));
    for (name, t) in &toks {
        g.bench_function(*name, |b| b.iter(|| black_box(t.encode(black_box(&text)).unwrap())));
    }
    g.finish();

    let mut g = c.benchmark_group("reencode_500k_plus_2k_message");
    g.sample_size(30).warm_up_time(Duration::from_secs(1));
    for (name, t) in &toks {
        let enc = ChatEncoder::new(t.clone(), TemplateFamily::DeepSeekV4, 4 << 30).unwrap();
        enc.encode(&convo, &opts).unwrap();
        let mut i = 0u64;
        g.bench_function(*name, |b| {
            b.iter_batched(
                || {
                    i += 1;
                    let mut m = convo.clone();
                    m.push(new_message(i, &reference));
                    m
                },
                |m| {
                    let r = enc.encode(&m, &opts).unwrap();
                    assert_eq!(r.encoded, 1);
                    black_box(r.ids.len())
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(tokenize_benches, benches);
criterion_main!(tokenize_benches);
