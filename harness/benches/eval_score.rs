//! Scoring gsm8k: both filters, `exact_match` and the aggregate over the 1,319 test answers
//! (target ≤ 50 ms). Responses are the gold worked answers (a few hundred bytes, as a
//! non-reasoning model writes them) and the same padded to 8 KB of reasoning each. See
//! docs/PERFORMANCE.md ("gsm8k scoring").

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use harness::eval::{data, score};

fn score_all(c: &mut Criterion) {
    let d = data::embedded();
    let short: Vec<(String, &str)> = d.test.iter().map(|doc| (doc.answer.clone(), doc.answer.as_str())).collect();
    let long: Vec<(String, &str)> = d
        .test
        .iter()
        .map(|doc| {
            let mut r = String::new();
            while r.len() < 8192 {
                r.push_str("Let me reconsider: ");
                r.push_str(&doc.answer.replace("####", "so"));
                r.push('\n');
            }
            r.push_str(&doc.answer);
            (r, doc.answer.as_str())
        })
        .collect();
    let mut g = c.benchmark_group("gsm8k_score");
    for (name, set) in [("1319_answers", &short), ("1319_answers_8kb", &long)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let scored: Vec<score::Scored> = set.iter().map(|(r, gold)| score::score(r, gold)).collect();
                black_box(score::aggregate(&scored))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, score_all);
criterion_main!(benches);
