//! Results store speed: recording a 13-point run, `sweep history` over 10,000 runs, and a
//! config's points across 500 runs (what a dashboard page reads).
//!
//! The recorded run is real: `sweep run full-sweep-fail-fast --duration 60` on the virtual clock
//! (13 points), made once into `target/bench-store/run13`. The 10,000-run store is filled through
//! the recording API with copies of that run under other ids, dates, labels and config keys
//! (20 configs, 500 runs each), kept in `target/bench-store/history-10000.db` between runs.
//! With `SWEEP_TEST_POSTGRES` set, recording is also timed against that PostgreSQL server.
//!
//! `cargo bench -p harness --bench store`

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use harness::store::{Location, Mode, RunFilter, RunRecord, Store, read_run_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const RUNS: usize = 10_000;
const CONFIGS: usize = 20;

fn bench_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("target").join("bench-store");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The real 13-point run folder, made once.
fn run13() -> PathBuf {
    common::run13(bench_dir().join("run13"), &["--seed-replicates", "0"])
}

/// Run `i` of the synthetic history: the real run under another id, date, label and configs.
fn variant(base: &RunRecord, i: usize) -> RunRecord {
    let mut r = base.clone();
    let id = format!("run-{i:05}");
    let cfg = |k: &str| format!("c{:02}-{k}", i % CONFIGS);
    r.run.run_id = id.clone();
    r.run.finished_unix = 1_780_000_000 + i as i64 * 600;
    r.run.labels = vec![if i.is_multiple_of(4) { "full-sweep-enabled" } else { "full-sweep-fail-fast" }.to_string()];
    r.run.configs = base.run.configs.iter().map(|k| cfg(k)).collect();
    r.run.gate = Some(if i.is_multiple_of(7) { "fail" } else { "pass" }.into());
    for p in &mut r.points {
        p.run_id = id.clone();
        p.point_id = format!("{}/{}", cfg(&p.config_key), p.point_id.rsplit('/').next().unwrap_or_default());
        p.config_key = cfg(&p.config_key);
        if i.is_multiple_of(3) {
            p.result_kind = "measured".into();
        }
    }
    for e in &mut r.evals {
        e.point_id =
            format!("{}/{}", cfg(e.point_id.split('/').next().unwrap_or_default()), e.point_id.rsplit('/').next().unwrap_or_default());
    }
    r.run.result_kind = if i.is_multiple_of(3) { "measured".into() } else { "predicted".into() };
    r
}

/// The 10,000-run SQLite store, filled once through `Store::record`.
fn history_store(base: &RunRecord) -> PathBuf {
    let path = bench_dir().join("history-10000.db");
    let loc = Location::Sqlite(path.clone());
    if let Ok(mut s) = Store::open(&loc, Mode::ReadOnly)
        && s.count_runs(&RunFilter::default()).unwrap_or(0) == RUNS as i64
    {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let mut s = Store::open(&loc, Mode::Write).unwrap();
    let t = std::time::Instant::now();
    for i in 0..RUNS {
        s.record(&variant(base, i)).unwrap();
    }
    eprintln!("filled {} with {RUNS} runs of {} points in {:.1} s", path.display(), base.points.len(), t.elapsed().as_secs_f64());
    path
}

fn bench(c: &mut Criterion) {
    let run = run13();
    let base = read_run_dir(&run, "bench").unwrap();
    assert_eq!(base.points.len(), 13);

    let tmp = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("store");
    g.measurement_time(Duration::from_secs(10));
    {
        let loc = Location::Sqlite(tmp.path().join("record.db"));
        let mut s = Store::open(&loc, Mode::Write).unwrap();
        // What `sweep run` does once it has finished: read the folder, record it (re-recording
        // replaces, so every iteration is a full record of 13 points).
        g.bench_function("record 13-point run (read folder + transaction), SQLite", |b| b.iter(|| s.record_dir(&run, "run").unwrap()));
        g.bench_function("read 13-point run folder", |b| b.iter(|| read_run_dir(&run, "run").unwrap()));
        g.bench_function("open store + record 13-point run, SQLite", |b| {
            b.iter(|| Store::open(&loc, Mode::Write).unwrap().record_dir(&run, "run").unwrap())
        });
    }
    if let Ok(url) = std::env::var("SWEEP_TEST_POSTGRES") {
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        admin.batch_execute("DROP SCHEMA IF EXISTS bench_store CASCADE; CREATE SCHEMA bench_store").unwrap();
        let loc = Location::parse(&format!("{url}{}options=-csearch_path%3Dbench_store", if url.contains('?') { '&' } else { '?' }));
        let mut s = Store::open(&loc, Mode::Write).unwrap();
        g.bench_function("record 13-point run (read folder + transaction), PostgreSQL", |b| b.iter(|| s.record_dir(&run, "run").unwrap()));
    }

    let db = history_store(&base);
    let loc = Location::Sqlite(db.clone());
    let mut s = Store::open(&loc, Mode::ReadOnly).unwrap();
    g.bench_function("history: all 10,000 runs", |b| {
        b.iter(|| assert_eq!(s.runs(&RunFilter::default()).unwrap().len(), RUNS));
    });
    g.bench_function("history: newest 50 runs", |b| {
        b.iter(|| s.runs(&RunFilter { limit: Some(50), ..Default::default() }).unwrap());
    });
    g.bench_function("history: --config glob --label --kind (all matches)", |b| {
        let f = RunFilter {
            config: Some("c07-dsv41flash-*".into()),
            label: Some("full-sweep-fail-fast".into()),
            kind: Some("predicted".into()),
            ..Default::default()
        };
        b.iter(|| assert!(!s.runs(&f).unwrap().is_empty()));
    });
    let key = format!("c07-{}", base.run.configs.iter().find(|k| k.starts_with("dsv41flash")).unwrap());
    g.bench_function("config points across its 500 runs (dashboard data)", |b| {
        b.iter(|| assert_eq!(s.config_points(&key, &RunFilter::default()).unwrap().len(), 500 * 8));
    });
    let exe = env!("CARGO_BIN_EXE_sweep");
    g.sample_size(20);
    g.bench_function("`sweep history` command over 10,000 runs (process, default --limit 50)", |b| {
        b.iter(|| {
            let o = Command::new(exe).args(["history", "--store"]).arg(&db).output().unwrap();
            assert!(o.status.success());
        })
    });
    g.bench_function("`sweep history --limit 0 --json` command over 10,000 runs (process)", |b| {
        b.iter(|| {
            let o = Command::new(exe).args(["history", "--limit", "0", "--json", "--store"]).arg(&db).output().unwrap();
            assert!(o.status.success());
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
