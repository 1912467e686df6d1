//! Changelog-driven selection and label policy on a crafted repository (library API).

use harness::plan::{self, Inputs, Labels, PlanRequest};
use harness::repo::Repo;

const MASTER: &str = r#"
mix-fp8-h200-sglang:
  image: lmsysorg/sglang:v0.5.5-cu129-amd64
  model: deepseek-ai/DeepSeek-V3
  model-prefix: dsv3
  runner: cluster:h200-dgxc
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 8, conc-list: [4, 8] }
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 8, conc-start: 2, conc-end: 32 }
    agentic-coding:
    - search-space:
      - { tp: 8, kv-offloading: none, conc-list: [1, 16] }
"#;

fn repo(changelog: &str) -> (tempfile::TempDir, Repo) {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("recipes")).unwrap();
    std::fs::write(d.path().join("recipes/master.yaml"), MASTER).unwrap();
    std::fs::write(d.path().join("perf-changelog.yaml"), changelog).unwrap();
    let r = Repo::at(d.path());
    (d, r)
}

fn entry(scn: Option<&str>, extra: &str) -> String {
    let st = scn.map(|s| format!("  scenario-type:\n    - {s}\n")).unwrap_or_default();
    format!("- config-keys:\n    - mix-*\n{st}  description:\n    - \"x\"\n  pr-link: https://github.com/o/r/pull/1\n{extra}")
}

fn build(cl: &str, labels: &[&str]) -> plan::Plan {
    build_with(cl, labels, false)
}

fn build_with(cl: &str, labels: &[&str], no_evals: bool) -> plan::Plan {
    let (_d, r) = repo(cl);
    let inputs = Inputs::load(&r).unwrap_or_else(|e| panic!("{e}"));
    plan::build(&r, &inputs, &PlanRequest { labels: Labels::parse(labels).unwrap(), base: None, no_evals })
        .unwrap_or_else(|e| panic!("{e}"))
}

fn names(p: &plan::Plan) -> Vec<String> {
    p.matrices.iter().map(|m| format!("{}:{}", m.name, m.points.len())).collect()
}

#[test]
fn canary_is_min_conc_1k1k_and_removed_from_its_bucket() {
    let p = build(&entry(None, ""), &["full-sweep-fail-fast"]);
    let c = p.canary.as_ref().unwrap();
    assert_eq!((c.matrix.as_str(), c.conc), ("canary", 4));
    assert_eq!(c.row["isl"], 1024);
    assert_eq!(names(&p), vec!["single_node.1k1k:1", "single_node.8k1k:5", "single_node.agentic:2"]);
    // Default eval selection: 8k1k concs {2..32}, eligible {16, 32} → max = upper median = 32.
    let ev: Vec<(String, u32)> = p.evals.iter().flat_map(|m| m.points.iter().map(|x| (m.name.clone(), x.conc))).collect();
    let agentic_max = p.matrices.iter().filter(|m| m.name == "single_node.agentic").flat_map(|m| m.points.iter().map(|x| x.conc)).max();
    // A changelog sweep generates evals with `--evals-only`, so the agentic scenario's
    // highest-concurrency row runs gsm8k too.
    assert_eq!(ev, vec![("agentic_evals".to_string(), agentic_max.unwrap()), ("evals".to_string(), 32)]);
    let p = build_with(&entry(None, ""), &["full-sweep-fail-fast"], true);
    assert!(p.evals.is_empty(), "--no-evals drops every eval row");
    assert_eq!(names(&p), vec!["single_node.1k1k:1", "single_node.8k1k:5", "single_node.agentic:2"]);
}

#[test]
fn scenario_type_restricts_and_no_canary_labels() {
    let p = build(&entry(Some("agentic-coding"), ""), &["full-sweep-fail-fast-no-canary"]);
    assert!(p.canary.is_none());
    assert_eq!(names(&p), vec!["single_node.agentic:2"]);
    assert!(p.matrices[0].fail_fast);
    let p = build(&entry(Some("agentic-coding"), ""), &["full-sweep-enabled"]);
    assert_eq!(p.canary.as_ref().unwrap().conc, 1, "agentic-only sweeps get an agentic canary");
    assert!(!p.matrices[0].fail_fast);
}

#[test]
fn all_evals_field_suppresses_throughput_label_keeps_it() {
    let p = build(&entry(None, "  all-evals: true\n"), &["full-sweep-fail-fast"]);
    assert!(p.matrices.is_empty() && p.canary.is_none(), "{:?}", names(&p));
    let n_eval: usize = p.evals.iter().map(|m| m.points.len()).sum();
    assert_eq!(n_eval, 5 + 2, "every 8k1k row and every single-node agentic row");
    let p = build(&entry(None, ""), &["full-sweep-fail-fast", "all-evals"]);
    assert!(!p.matrices.is_empty());
    assert!(p.evals.iter().any(|m| m.name == "agentic_evals"));
}

#[test]
fn disjoint_scenarios_both_run_and_duplicates_run_once() {
    let cl = format!("{}\n{}", entry(Some("agentic-coding"), ""), entry(Some("fixed-seq-len"), ""));
    // Only the latest entry without --base: fixed-seq-len.
    let p = build(&cl, &["non-canary-full-sweep-enabled"]);
    assert_eq!(names(&p), vec!["single_node.1k1k:2", "single_node.8k1k:5"]);
    // Both entries selected through a base revision.
    let (d, r) = repo(&entry(None, "").replace("mix-*", "nothing-yet"));
    let git = |a: &[&str]| {
        assert!(
            std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(a)
                .current_dir(d.path())
                .status()
                .unwrap()
                .success()
        )
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "base"]);
    let base = std::fs::read_to_string(d.path().join("perf-changelog.yaml")).unwrap();
    let same = entry(Some("agentic-coding"), "");
    std::fs::write(d.path().join("perf-changelog.yaml"), format!("{base}\n{}\n{}\n{}", cl, same.clone(), "").trim_end().to_string() + "\n")
        .unwrap();
    let inputs = Inputs::load(&r).unwrap();
    let p = plan::build(
        &r,
        &inputs,
        &PlanRequest { labels: Labels::parse(&["non-canary-full-sweep-enabled"]).unwrap(), base: Some("HEAD".into()), no_evals: false },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names(&p), vec!["single_node.1k1k:2", "single_node.8k1k:5", "single_node.agentic:2"]);
}

#[test]
fn unknown_changelog_key_is_an_error_naming_the_entry_line() {
    let (_d, r) = repo(&entry(None, "").replace("mix-*", "mix-fp?-h200-sglang"));
    let inputs = Inputs::load(&r).unwrap();
    let e = plan::build(&r, &inputs, &PlanRequest { labels: Labels::parse(&["full-sweep-enabled"]).unwrap(), base: None, no_evals: false })
        .unwrap_err();
    let s = e.to_string();
    assert!(s.contains("perf-changelog.yaml:1") && s.contains("`mix-fp?-h200-sglang` matches no master config"), "{s}");
}
