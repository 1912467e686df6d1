//! Conformance on the real InferenceX inputs (shared data). `#[ignore]`d: `.ci/run` runs them with
//! `SWEEP_SHARED_DATA` set.

mod common;
use common::*;
use harness::changelog::{self, Changelog};
use harness::golden_al::GoldenAl;
use harness::plan::matrix::{self, Scenario};
use harness::recipe::{Master, Runners};
use std::path::PathBuf;

fn ix() -> PathBuf {
    shared_data().join("inferencex")
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn all_152_master_entries_load_and_expand() {
    let m = Master::load(&[ix().join("nvidia-master.yaml")]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.len(), 152);
    let runners = Runners::load(&ix().join("runners.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let mut rows = 0;
    let mut dram_1234 = false;
    for e in &m.entries {
        let r = matrix::expand(e, &[Scenario::FixedSeqLen, Scenario::AgenticCoding], Some(&runners))
            .unwrap_or_else(|x| panic!("{}: {x}", e.key));
        assert!(!r.is_empty(), "{} expands to no rows", e.key);
        // H200 DGXC at 0.80 with an 8-GPU footprint gives 1234 GB (spec §3.3 example).
        dram_1234 |= r.iter().any(|x| x.fields["runner"] == "cluster:h200-dgxc" && x.fields["total-cpu-dram-gb"] == 1234);
        rows += r.len();
    }
    assert!(rows > 1000, "{rows} rows");
    assert!(dram_1234, "no H200 DGXC row with the 1234 GB DRAM budget");
    let n_multi = m.entries.iter().filter(|e| e.multinode).count();
    let n_agentic = m.entries.iter().filter(|e| e.has_agentic).count();
    assert!(n_multi > 0 && n_agentic > 0);
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn real_inputs_validate_through_the_cli() {
    let d = ix();
    let (m, r, c, g) =
        (d.join("nvidia-master.yaml"), d.join("runners.yaml"), d.join("perf-changelog.yaml"), d.join("golden_al_distribution"));
    let o = sweep(
        &[
            "validate",
            "--master",
            m.to_str().unwrap(),
            "--runners",
            r.to_str().unwrap(),
            "--changelog",
            c.to_str().unwrap(),
            "--golden-al",
            g.to_str().unwrap(),
        ],
        &workspace_root(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("152 master configs") && out.contains("772 changelog entries") && out.contains("9 golden AL files"), "{out}");
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn changelog_parses_and_enforces_append_only() {
    let f = ix().join("perf-changelog.yaml");
    let bytes = std::fs::read(&f).unwrap();
    let base = Changelog::parse(&f, &bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(base.entries.len(), 772);

    // A one-byte change to a historical entry is rejected with its line.
    let text = String::from_utf8(bytes.clone()).unwrap();
    let line = 1000;
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let target = (line - 1..lines.len()).find(|&i| lines[i].contains("    - ") && lines[i].len() > 8).unwrap();
    let last = lines[target].pop().unwrap();
    lines[target].push(if last == 'x' { 'y' } else { 'x' });
    let changed = Changelog::parse(&f, lines.join("\n").as_bytes()).unwrap();
    let err = changelog::check_append(&base, &changed).unwrap_err();
    assert_eq!(err.0[0].line, Some(target + 1), "{err}");

    // An appended entry is accepted and selects the right keys (with a `*` pattern).
    let master = Master::load(&[ix().join("nvidia-master.yaml")]).unwrap();
    let add = "\n- config-keys:\n    - dsv4-fp4-b200-*-agentic-mtp\n  scenario-type:\n    - agentic-coding\n  description:\n    - \"Retune\"\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/2800\n";
    let head = Changelog::parse(&f, format!("{text}{add}").as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let delta = changelog::check_append(&base, &head).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(delta.appended.len(), 1);
    let keys = changelog::resolve_pattern(&delta.appended[0].config_keys[0], master.keys());
    assert_eq!(keys, vec!["dsv4-fp4-b200-vllm-agentic-mtp".to_string()]);
    // `?` is not a wildcard in the changelog.
    assert!(changelog::resolve_pattern("dsv4-fp?-b200-vllm-agentic-mtp", master.keys()).is_empty());
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn golden_al_files_all_load_and_look_up() {
    let g = GoldenAl::load_dir(&ix().join("golden_al_distribution")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.files.len(), 9);
    assert_eq!(g.lookup("qwen3.5", Some("thinking_on"), 3, None).unwrap().al, 3.39);
    assert_eq!(g.lookup("dsv4dspark", None, 5, None).unwrap().al, 3.61);
    let e = g.lookup("qwen3.5", None, 42, None).unwrap_err();
    assert!(e.contains("no golden AL for 42"), "{e}");
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn recipe_transcribes_the_published_seed() {
    // Every flag and variable of the published recipe appears in the resolved commands.
    let seed = std::fs::read_to_string(shared_data().join("seed/dsv41flash-gb300-sglang-agentic.yaml")).unwrap();
    let o = sweep(&["plan", "full-sweep-fail-fast", "--show-commands"], &workspace_root());
    let (out, _) = text(&o);
    let code: String = seed
        .lines()
        .map(|l| l.split(" #").next().unwrap_or(""))
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    for tok in code.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '"') {
        if tok.starts_with("--") || tok.starts_with("SGLANG_") {
            let t = tok.trim_end_matches(':');
            assert!(out.contains(t), "{t} from the seed recipe is missing from the resolved commands");
        }
    }
    assert!(seed.contains("sha256:ddae0e399d3d94f7827f16183301cf8dac4cf0eae0ef25590b7dac5881d713d8"));
    let master = std::fs::read_to_string(workspace_root().join("recipes/master.yaml")).unwrap();
    assert!(master.contains("sha256:ddae0e399d3d94f7827f16183301cf8dac4cf0eae0ef25590b7dac5881d713d8"));
}
