//! Golden run: two points of the main job on the virtual clock (fixed seed, five minutes each)
//! must write exactly the committed `profile_export.jsonl` and `agg.json`, byte for byte. A
//! refactor must leave them unchanged; a deliberate change of behaviour (replay, engine, profile,
//! metrics) re-blesses them with `SWEEP_BLESS=1 cargo test --test golden_run` and says why in the
//! commit.

mod common;
use common::*;

const POINTS: [&str; 2] = ["dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c4", "dsv3-fp8-h200-sglang-agentic/dep8-c32"];
/// The records as their text (a run's point folder holds them compressed: compared decompressed,
/// so the compressor's version never matters) and the aggregate.
const FILES: [&str; 2] = ["profile_export.jsonl", "agg.json"];

#[test]
fn two_points_write_the_committed_records_and_aggregates() {
    let out = tempfile::tempdir().unwrap();
    let root = workspace_root();
    let mut args = vec!["run", "full-sweep-fail-fast", "--duration", "300", "--seed", "42", "--only"];
    args.extend(POINTS);
    let o = sweep(&[&args[..], &["--out", out.path().to_str().unwrap(), "--root", root.to_str().unwrap()]].concat(), &root);
    let (stdout, stderr) = text(&o);
    assert!(stdout.contains("2/2 point(s) finished"), "{stdout}\n{stderr}");
    let golden = root.join("harness/tests/golden");
    let bless = std::env::var_os("SWEEP_BLESS").is_some();
    for point in POINTS {
        for file in FILES {
            let dir = out.path().join(point);
            let got = if file == "agg.json" { std::fs::read(dir.join(file)).unwrap() } else { export_text(&dir).into_bytes() };
            assert!(!got.is_empty(), "{point}/{file}: missing");
            let path = golden.join(point).join(file);
            if bless {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &got).unwrap();
                continue;
            }
            let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (bless with SWEEP_BLESS=1)", path.display()));
            if got != want {
                let (g, w) = (String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
                let line = g.lines().zip(w.lines()).position(|(a, b)| a != b).unwrap_or(g.lines().count().min(w.lines().count()));
                panic!(
                    "{point}/{file} differs from {} at line {}:\n  got:  {}\n  want: {}\n(a deliberate change of behaviour: SWEEP_BLESS=1 cargo test --test golden_run)",
                    path.display(),
                    line + 1,
                    g.lines().nth(line).unwrap_or("<end>").chars().take(300).collect::<String>(),
                    w.lines().nth(line).unwrap_or("<end>").chars().take(300).collect::<String>(),
                );
            }
        }
    }
}
