//! The published corpus, synthesized: `sweep trace gen --like` on the real stats file of
//! `semianalysisai/cc-traces-weka-062126` (393 traces, 98,827 requests, 21.6 G input tokens),
//! written as Weka JSONL, read back with the real reader and compared row by row.
//! Ignored by default; `.ci/run` runs it optimised:
//! `SWEEP_SHARED_DATA=../shared/data cargo test --release -p harness --test corpus_like -- --ignored`.

use std::path::PathBuf;

use harness::trace::against::{CorpusMeasure, compare, markdown};
use harness::trace::like::Plan;
use harness::trace::like_write::write_jsonl;
use harness::trace::published::PublishedStats;
use harness::trace::read::{ReadOptions, for_each_trace};

fn stats_file() -> Option<PathBuf> {
    let Some(root) = std::env::var_os("SWEEP_SHARED_DATA") else {
        eprintln!("skipped: SWEEP_SHARED_DATA is not set (point it at the shared data directory)");
        return None;
    };
    let p = PathBuf::from(root).join("agentx-traces/cc-traces-weka-062126.stats.yaml");
    if !p.is_file() {
        eprintln!("skipped: {} not found (set SWEEP_SHARED_DATA to the shared data directory)", p.display());
        return None;
    }
    Some(p)
}

#[test]
#[ignore = "needs the published corpus statistics (SWEEP_SHARED_DATA); run optimised"]
fn published_corpus_synthesized_within_tolerance() {
    let Some(path) = stats_file() else { return };
    let stats = PublishedStats::load(&path).unwrap();
    let plan = Plan::new(&stats, None, 42).unwrap();
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("like.jsonl");
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&out).unwrap());
        write_jsonl(&plan, &mut w).unwrap();
    }
    let mut m = CorpusMeasure::default();
    let mut warnings = Vec::new();
    for_each_trace(&[&out], &ReadOptions::default(), &mut warnings, |t| {
        m.add(&t);
        Ok(())
    })
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let rows = compare(&stats, &m);
    println!("{}", markdown(&rows));
    assert_eq!(rows.len(), 32, "every published row is compared");
    let missed: Vec<_> = rows.iter().filter(|r| !r.pass).collect();
    assert!(missed.is_empty(), "rows outside tolerance: {missed:#?}");
}
