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
    let e = g.lookup("qwen3.5", None, 42, None).unwrap_err().to_string();
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

/// The flag items of a launch's server flags (command words and the harness's own flags left
/// out), sorted: what a published point's `args` must equal.
fn server_flags(argv: &[String]) -> Vec<(String, Option<String>)> {
    let flags: Vec<String> = argv.iter().skip_while(|a| !a.starts_with("--")).cloned().collect();
    let mut items = harness::recipe::serving::flag_items(&flags);
    items.retain(|(f, _)| !["--model-path", "--served-model-name", "--enable-metrics"].contains(&f.as_str()));
    items.sort();
    items
}

/// The DeepSeek-R1 FP8 recipes give every published 1k/1k point (H200 and B200, TP8) its published
/// server flags and environment, value for value, at its ISL/OSL; their 8k/1k points are the launch
/// scripts' other branch (H200: 256 running requests and CUDA-graph batch; B200 at the stored
/// script: the same line without `--trust-remote-code`).
#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn dsr1_recipes_reproduce_the_published_points() {
    let yaml = std::fs::read_to_string(shared_data().join("published/points.yaml")).unwrap();
    let published: serde_yaml_ng::Value = serde_yaml_ng::from_str(&yaml).unwrap();
    let o = sweep(&["plan", "full-sweep-fail-fast", "--format", "json"], &workspace_root());
    assert!(o.status.success(), "{}", text(&o).1);
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let points: Vec<&serde_json::Value> = plan["canary"]
        .as_object()
        .map(|_| &plan["canary"])
        .into_iter()
        .chain(plan["matrices"].as_array().unwrap().iter().flat_map(|m| m["points"].as_array().unwrap()))
        .collect();
    let point = |id: &str| *points.iter().find(|p| p["id"] == id).unwrap_or_else(|| panic!("no plan point {id}"));
    let argv = |p: &serde_json::Value| -> Vec<String> {
        p["launch"]["worker_argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
    };
    let s = |v: &serde_yaml_ng::Value| -> String {
        v.as_str().map(str::to_string).unwrap_or_else(|| serde_yaml_ng::to_string(v).unwrap().trim().to_string())
    };
    let mut n = 0;
    for c in published["configs"].as_sequence().unwrap().iter().filter(|c| s(&c["key"]).starts_with("dsr1-")) {
        let key = s(&c["key"]);
        for pp in c["points"].as_sequence().unwrap() {
            let args: Vec<String> = pp["args"].as_sequence().unwrap().iter().map(s).collect();
            let tp = harness::recipe::serving::flag_value(&args, &["--tensor-parallel-size"]).unwrap();
            let id = format!("{key}/1k1k-tp{tp}-c{}", s(&pp["conc"]));
            let p = point(&id);
            assert_eq!((p["isl"].as_u64(), p["osl"].as_u64()), (pp["isl"].as_u64(), pp["osl"].as_u64()), "{id}");
            assert_eq!(server_flags(&argv(p)), server_flags(&args), "{id}: server flags");
            let env = p["launch"]["env"].as_object().unwrap();
            for (k, v) in pp["env"].as_mapping().unwrap() {
                assert_eq!(env.get(&s(k)).and_then(|x| x.as_str()), Some(s(v).as_str()), "{id}: {}", s(k));
            }
            // Beside the published variables, only the scripts' `PYTHONNOUSERSITE=1` prefix.
            assert_eq!(env.len(), pp["env"].as_mapping().unwrap().len() + 1, "{id}: {env:?}");
            assert_eq!(env["PYTHONNOUSERSITE"], "1");
            n += 1;
        }
    }
    assert_eq!(n, 12, "5 H200 and 7 B200 published points");
    let with = |id: &str, changes: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
        let mut items = server_flags(&argv(point(id)));
        for (f, v) in changes {
            items.retain(|(g, _)| g != f);
            if let Some(v) = v {
                items.push((f.to_string(), (!v.is_empty()).then(|| v.to_string())));
            }
        }
        items.sort();
        items
    };
    let h = ("dsr1-fp8-h200-sglang/1k1k-tp8-c64", "dsr1-fp8-h200-sglang/8k1k-tp8-c64");
    assert_eq!(
        server_flags(&argv(point(h.1))),
        with(h.0, &[("--max-running-requests", Some("256")), ("--cuda-graph-max-bs", Some("256"))])
    );
    let b = ("dsr1-fp8-b200-sglang/1k1k-tp8-c4", "dsr1-fp8-b200-sglang/8k1k-tp8-c4");
    assert_eq!(server_flags(&argv(point(b.1))), with(b.0, &[("--trust-remote-code", None)]));
    // B200 TP4 (8k/1k only): the script's TP4 values, receive interval 10 at every concurrency.
    let tp4 = with(
        "dsr1-fp8-b200-sglang/8k1k-tp8-c4",
        &[
            ("--tensor-parallel-size", Some("4")),
            ("--cuda-graph-max-bs", Some("32")),
            ("--max-running-requests", Some("32")),
            ("--mem-fraction-static", Some("0.95")),
            ("--chunked-prefill-size", Some("8192")),
            ("--max-prefill-tokens", Some("8192")),
        ],
    );
    assert_eq!(server_flags(&argv(point("dsr1-fp8-b200-sglang/8k1k-tp4-c32"))), tp4);
}
