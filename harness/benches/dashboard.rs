//! Dashboard speed: a config with 500 recorded runs, served by the real router over loopback
//! HTTP — time to the first byte of its page, of the JSON the page draws from
//! (`/api/config/<key>`: every point of the 500 runs with intervals, frontiers and flag diffs)
//! and of the runs list.
//!
//! The runs are real: one `sweep run full-sweep-fail-fast --duration 60` on the virtual clock
//! (13 points, 8 of them of the DSV4.1-Flash GB300 config), made once into
//! `target/bench-dashboard/run13`, recorded 500 times under other ids and dates through the
//! store's recording API into `target/bench-dashboard/runs-500.db` (kept between runs).
//!
//! `cargo bench -p harness --bench dashboard`

mod common;

use common::root;
use criterion::{Criterion, criterion_group, criterion_main};
use harness::dashboard::{App, loopback_hosts, router};
use harness::repo::Repo;
use harness::store::{Location, Mode, RunFilter, RunRecord, Store, read_run_dir};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const RUNS: usize = 500;
const CONFIG: &str = "dsv41flash-fp4-gb300-sglang-agentic-dspark";

fn bench_dir() -> PathBuf {
    let d = root().join("target").join("bench-dashboard");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The real 13-point run folder, made once.
fn run13() -> PathBuf {
    common::run13(bench_dir().join("run13"), &[])
}

/// Run `i`: the real run under another id and finishing time (ten minutes apart).
fn variant(base: &RunRecord, i: usize) -> RunRecord {
    let mut r = base.clone();
    let id = format!("run-{i:04}");
    r.run.run_id = id.clone();
    r.run.finished_unix = 1_780_000_000 + i as i64 * 600;
    for p in &mut r.points {
        p.run_id = id.clone();
    }
    r
}

/// The store of 500 runs, filled once through `Store::record`.
fn store(base: &RunRecord) -> PathBuf {
    let path = bench_dir().join("runs-500.db");
    let loc = Location::Sqlite(path.clone());
    if let Ok(mut s) = Store::open(&loc, Mode::ReadOnly)
        && s.count_runs(&RunFilter::default()).unwrap_or(0) == RUNS as i64
    {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let mut s = Store::open(&loc, Mode::Write).unwrap();
    for i in 0..RUNS {
        s.record(&variant(base, i)).unwrap();
    }
    path
}

/// Seconds to the first byte of the response and to its end, and its size.
fn get(addr: SocketAddr, path: &str) -> (Duration, Duration, usize) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = s.read(&mut buf).unwrap();
    let first = t.elapsed();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{path}: {}", String::from_utf8_lossy(&buf[..n.min(300)]));
    let mut total = n;
    while {
        n = s.read(&mut buf).unwrap();
        n > 0
    } {
        total += n;
    }
    (first, t.elapsed(), total)
}

fn bench(c: &mut Criterion) {
    let base = read_run_dir(&run13(), "bench").unwrap();
    assert_eq!(base.points.iter().filter(|p| p.config_key == CONFIG).count(), 8);
    let db = store(&base);
    let app = App::open(Location::Sqlite(db), Some(Repo::at(&root())), loopback_hosts()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, router(app)).await });

    let page = format!("/config/{CONFIG}");
    let api = format!("/api/config/{CONFIG}");
    let (_, whole, bytes) = get(addr, &api);
    eprintln!("{api}: {bytes} bytes ({:.1} ms to the end, first request)", whole.as_secs_f64() * 1e3);

    let mut g = c.benchmark_group("dashboard");
    g.sample_size(30).measurement_time(Duration::from_secs(10));
    let ttfb = |path: String| move |b: &mut criterion::Bencher| b.iter_custom(|n| (0..n).map(|_| get(addr, &path).0).sum());
    g.bench_function("config page, 500 runs: first byte", ttfb(page.clone()));
    g.bench_function("config data (/api/config), 500 runs x 8 points: first byte", ttfb(api.clone()));
    g.bench_function("config data (/api/config), 500 runs x 8 points: whole body", |b| {
        b.iter_custom(|n| (0..n).map(|_| get(addr, &api).1).sum())
    });
    g.bench_function("config data, newest 50 runs (?limit=50): first byte", ttfb(format!("{api}?limit=50")));
    g.bench_function("runs list page (newest 200 of 500): first byte", ttfb("/".into()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
