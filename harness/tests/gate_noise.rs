//! The gate's false-alarm rate and power on the virtual clock (docs/gate.md): twenty pairs of
//! runs of one recipe that differ only in `--seed`, each point replayed with the shared gate
//! seeds. Release, in `.ci/run`: `cargo test --release -p harness --test gate_noise -- --ignored`.

use harness::cmd::results::gate_run;
use harness::results::RunSummary;
use std::path::Path;
use std::process::Command;

const PAIRS: u64 = 20;

fn run(out: &Path, seed: u64) {
    let st = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["run", "full-sweep-fail-fast", "--configs", "dsv3-*", "--duration", "1200", "--seed-replicates", "4"])
        .args(["--seed", &seed.to_string(), "--out"])
        .arg(out)
        .output()
        .expect("sweep runs");
    assert!(st.status.success(), "seed {seed}: {}", String::from_utf8_lossy(&st.stderr));
}

/// Makes one metric of one point worse by `factor` in every seed and in its reported value.
fn inject(dir: &Path, point: &str, metric: &str, factor: f64) {
    let mut s = RunSummary::load(dir).unwrap();
    let p = s.points.iter_mut().find(|p| p.id == point).unwrap();
    let scale = |v: &mut f64| *v *= factor;
    let pp = p.pareto.as_mut().unwrap();
    match metric {
        "tput_per_gpu" => {
            scale(&mut pp.y);
            p.seeds.iter_mut().for_each(|x| scale(&mut x.y));
        }
        view => {
            let v = *pp.x.keys().find(|v| v.key() == view).unwrap();
            scale(pp.x.get_mut(&v).unwrap());
            p.seeds.iter_mut().for_each(|x| scale(x.x.get_mut(&v).unwrap()));
        }
    }
    s.save(dir).unwrap();
}

#[test]
#[ignore = "40 virtual-clock runs with seed replicates: release, in .ci/run"]
fn seed_noise_does_not_fail_the_gate_and_injected_regressions_do() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut checks, mut false_alarms, mut caught, mut injected) = (0usize, Vec::new(), 0usize, 0usize);
    for i in 0..PAIRS {
        let (a, b) = (tmp.path().join(format!("a{i}")), tmp.path().join(format!("b{i}")));
        run(&a, 1000 + i);
        run(&b, 2000 + i);
        let v = gate_run(&b, Some(&a), None).unwrap();
        let regressions: Vec<_> = v.checks.iter().filter(|c| c.name.starts_with("regression ")).collect();
        assert!(regressions.len() >= 20, "{} regression checks", regressions.len());
        checks += regressions.len();
        false_alarms.extend(regressions.iter().filter(|c| !c.passed).map(|c| format!("{}: {}", c.name, c.detail)));
        // Every point keeps its seeds: the run's own and the four gate seeds.
        let base = RunSummary::load(&a).unwrap();
        assert!(base.points.iter().all(|p| p.seeds.len() == 5), "a point lost seeds");

        // 5 % less throughput, then 10 % more P90 E2EL (and 1/1.1 the interactivity), each on
        // one point, the point taking turns over the pairs.
        let point = &base.points[i as usize % base.points.len()].id;
        for (metric, factor) in [("tput_per_gpu", 0.95), ("e2el_p90", 1.10), ("intvty_p90", 1.0 / 1.10)] {
            let c = tmp.path().join(format!("c{i}-{metric}"));
            copy_summary(&b, &c);
            inject(&c, point, metric, factor);
            let v = gate_run(&c, Some(&a), None).unwrap();
            injected += 1;
            let name = format!("regression {point} {metric}");
            if v.checks.iter().any(|c| c.name == name && !c.passed) {
                caught += 1;
            }
        }
    }
    let rate = false_alarms.len() as f64 / checks as f64;
    eprintln!("false alarms: {} of {checks} checks; injected regressions caught: {caught} of {injected}", false_alarms.len());
    assert!(rate <= 0.01, "{:.2} % of checks failed on seed noise alone:\n{}", 100.0 * rate, false_alarms.join("\n"));
    assert!(caught as f64 >= 0.95 * injected as f64, "caught {caught} of {injected} injected regressions");
}

/// A run directory with only its summary (what the gate reads).
fn copy_summary(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(from.join("summary.json"), to.join("summary.json")).unwrap();
}
