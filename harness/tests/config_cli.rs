//! The configuration commands as a new user runs them: the real binary on the repository's
//! recipes and on copies with deliberate mistakes.

mod common;
use common::*;

#[test]
fn plan_shows_the_dsv41flash_sweep_with_tp4_c1_canary() {
    let o = sweep(&["plan", "full-sweep-fail-fast"], &workspace_root());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let canary = out.split("\nmatrix").next().unwrap();
    assert!(canary.contains("dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1"), "{out}");
    let dsv41: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("dsv41flash-fp4-gb300-sglang-agentic-dspark/")).collect();
    assert_eq!(dsv41.len(), 8, "{out}");
    for want in ["tp4-c4", "tp4-c16", "tp2-ep2-c16", "tp2-ep2-c32", "dep2-c64", "dep2-c128", "dep2-c160"] {
        assert!(dsv41.iter().any(|l| l.contains(&format!("/{want} "))), "missing {want}");
    }
    assert!(out.contains("fail-fast on"));
}

#[test]
fn show_commands_resolves_dep2_c160_with_router() {
    let o = sweep(&["plan", "full-sweep-fail-fast", "--show-commands"], &workspace_root());
    let (out, _) = text(&o);
    let block: String =
        out.split("dsv41flash-fp4-gb300-sglang-agentic-dspark/dep2-c160").nth(1).unwrap().split("\n  dsv3").next().unwrap().to_string();
    for want in [
        "--prefill-decode-interval 8",
        "--tokenizer-backend huggingface",
        "--mem-fraction-static 0.85",
        "--enable-dp-attention",
        "SGLANG_SIMULATE_ACC_LEN=3.51",
        "router: python3 -m sglang_router.launch_router --policy cache_aware",
    ] {
        assert!(block.contains(want), "missing {want} in:\n{block}");
    }
    // The point's value replaces the arm's: only one --mem-fraction-static, no fastokens backend.
    assert_eq!(block.matches("--mem-fraction-static").count(), 1);
    assert!(!block.contains("fastokens"));
}

#[test]
fn github_matrix_and_json_formats() {
    let o = sweep(&["plan", "full-sweep-fail-fast", "--format", "github"], &workspace_root());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["canary"]["include"].as_array().unwrap().len(), 1);
    assert_eq!(v["single_node_agentic"]["include"].as_array().unwrap().len(), 12);
    assert_eq!(v["single_node_agentic"]["fail-fast"], true);
    let row = &v["canary"]["include"][0];
    assert_eq!(row["point"], "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1");
    assert_eq!(row["recipe-fingerprint"].as_str().unwrap().len(), 64);
    let o = sweep(&["plan", "full-sweep-fail-fast", "agentx-fast", "--format", "json"], &workspace_root());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["canary"]["duration_s"], 1200);
    assert_eq!(v["canary"]["warmup_per_lane"], 1);
}

#[test]
fn label_errors() {
    let o = sweep(&["plan", "sweep-enabled", "full-sweep-enabled"], &workspace_root());
    assert!(!o.status.success());
    let (_, err) = text(&o);
    assert!(err.contains("sweep-enabled") && err.contains("full-sweep-enabled"), "{err}");
    let o = sweep(&["plan", "sweep-enabled"], &workspace_root());
    let (out, _) = text(&o);
    assert!(o.status.success());
    // Trimmed to the minimum concurrency per recipe, and no canary.
    assert!(out.contains("/tp4-c1") && !out.contains("/tp4-c4") && !out.contains("canary ("), "{out}");
}

#[test]
fn repository_validates() {
    let o = sweep(&["validate"], &workspace_root());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("2 serving recipes (13 points resolved)"), "{out}");
}

fn validate_fails(dir: &std::path::Path, needles: &[&str]) {
    let o = sweep(&["validate"], dir);
    let (_, err) = text(&o);
    assert!(!o.status.success(), "validate should fail");
    for n in needles {
        assert!(err.contains(n), "missing `{n}` in:\n{err}");
    }
}

#[test]
fn unknown_key_is_named_with_line_and_fix() {
    let d = repo_copy();
    let m = d.path().join("recipes/master.yaml");
    edit(&m, "  precision: fp8\n", "  precision: fp8\n  trace-source: weka\n");
    validate_fails(d.path(), &["recipes/master.yaml:33: dsv3-fp8-h200-sglang-agentic.trace-source: unknown key `trace-source`", "fix:"]);
}

/// A misspelled key is an unknown key, named with its line and the close allowed key, in each of
/// the master config, a serving recipe and the changelog.
#[test]
fn misspelled_keys_are_unknown_keys_with_a_suggestion_in_each_file() {
    let d = repo_copy();
    edit(&d.path().join("recipes/master.yaml"), "  precision: fp8\n", "  precison: fp8\n");
    validate_fails(d.path(), &["recipes/master.yaml:", "unknown key `precison` in a config entry", "fix: did you mean `precision`?"]);
    let d = repo_copy();
    edit(&d.path().join("recipes/dsv3-fp8-h200-sglang-agentic.yaml"), "    gpus: 8\n", "    gpu: 8\n");
    validate_fails(
        d.path(),
        &["recipes/dsv3-fp8-h200-sglang-agentic.yaml:17: arms[0].gpu: unknown key `gpu` in an arm", "fix: did you mean `gpus`?"],
    );
    let d = repo_copy();
    edit(&d.path().join("perf-changelog.yaml"), "  pr-link:", "  pr-lnk:");
    validate_fails(
        d.path(),
        &["perf-changelog.yaml:9: [0].pr-lnk: unknown key `pr-lnk` in a changelog entry", "fix: did you mean `pr-link`?"],
    );
}

/// 40K levels of nesting took seconds to reject (quadratic in the depth); now the depth limit
/// refuses it before parsing, naming the file and the line.
#[test]
fn deeply_nested_master_config_is_refused_at_its_line() {
    let d = repo_copy();
    let deep = format!("  precision: fp8\n  notes: {}{}\n", "[".repeat(40_000), "]".repeat(40_000));
    edit(&d.path().join("recipes/master.yaml"), "  precision: fp8\n", &deep);
    validate_fails(d.path(), &["recipes/master.yaml:33: nests mappings and lists deeper than 64 levels", "fix: flatten the structure"]);
}

#[test]
fn range_and_list_both_given() {
    let d = repo_copy();
    edit(
        &d.path().join("recipes/master.yaml"),
        "conc-list: [1, 4, 16] }\n      # Agg TP2",
        "conc-list: [1, 4, 16], conc-start: 1, conc-end: 16 }\n      # Agg TP2",
    );
    validate_fails(
        d.path(),
        &["recipes/master.yaml:18:", "search-space[0].conc-list: both `conc-list` and a `conc-start`/`conc-end` range"],
    );
}

#[test]
fn tp_not_divisible_by_dcp() {
    let d = repo_copy();
    edit(&d.path().join("recipes/master.yaml"), "{ tp: 8, ep: 1, kv-offloading", "{ tp: 8, dcp-size: 3, ep: 1, kv-offloading");
    validate_fails(d.path(), &["tp 8 is not divisible by dcp-size 3", "search-space[0].dcp-size"]);
}

#[test]
fn golden_al_mismatch_names_both_values() {
    let d = repo_copy();
    edit(
        &d.path().join("recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml"),
        "env: {SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE: \"0\"}",
        "env: {SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE: \"0\", SGLANG_SIMULATE_ACC_LEN: \"3.2\"}",
    );
    validate_fails(
        d.path(),
        &[
            "SGLANG_SIMULATE_ACC_LEN is 3.2 but the golden AL",
            "is 3.51",
            "dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml:39: arms[0].points[0].env.SGLANG_SIMULATE_ACC_LEN",
        ],
    );
}

#[test]
fn recipe_and_master_must_agree() {
    let d = repo_copy();
    edit(&d.path().join("recipes/dsv3-fp8-h200-sglang-agentic.yaml"), "      - conc: 16\n", "      - conc: 8\n");
    validate_fails(
        d.path(),
        &[
            "concurrency 16 has no point in the serving recipe",
            "no master search-space row of `dsv3-fp8-h200-sglang-agentic` has tp 8 ep 1 dp-attn false with concurrency 8",
        ],
    );
    // The plan reports them too, each once: the recipe is loaded once per config, not per point.
    let o = sweep(&["plan", "full-sweep-fail-fast"], d.path());
    let (_, err) = text(&o);
    assert!(!o.status.success(), "plan should fail:\n{err}");
    assert_eq!(err.matches("concurrency 16 has no point in the serving recipe").count(), 1, "{err}");
    assert_eq!(err.matches("has tp 8 ep 1 dp-attn false with concurrency 8").count(), 1, "{err}");
}

#[test]
fn changelog_history_is_append_only_and_appends_select_keys() {
    let d = repo_copy();
    let p = d.path();
    git(p, &["init", "-q"]);
    git(p, &["add", "."]);
    git(p, &["commit", "-qm", "base"]);
    // Append an entry through the CLI: it is valid and selects only its key.
    let o = sweep(
        &[
            "changelog",
            "append",
            "--config-keys",
            "dsv3-*",
            "--description",
            "Retune DEP8",
            "--pr-link",
            "https://github.com/o/r/pull/7",
            "--scenario-type",
            "agentic-coding",
        ],
        p,
    );
    assert!(o.status.success(), "{}", text(&o).1);
    let o = sweep(&["changelog", "check", "--base", "HEAD"], p);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = sweep(&["plan", "full-sweep-fail-fast", "--base", "HEAD", "--format", "json"], p);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let keys: std::collections::BTreeSet<String> = v["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["points"].as_array().unwrap().iter().map(|p| p["config_key"].as_str().unwrap().to_string()))
        .chain(v["canary"]["config_key"].as_str().map(str::to_string))
        .collect();
    assert_eq!(keys.into_iter().collect::<Vec<_>>(), vec!["dsv3-fp8-h200-sglang-agentic"]);
    // A one-character change to a historical line is rejected with its line.
    edit(&p.join("perf-changelog.yaml"), "Add a DeepSeek-V3 FP8", "Add a DeepSeek-V3 FP9");
    let o = sweep(&["changelog", "check", "--base", "HEAD"], p);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("perf-changelog.yaml:8: historical line 8 changed"), "{err}");
}

#[test]
fn placeholder_pr_link_is_refused_and_file_unchanged() {
    let d = repo_copy();
    let before = std::fs::read(d.path().join("perf-changelog.yaml")).unwrap();
    let o = sweep(
        &[
            "changelog",
            "append",
            "--config-keys",
            "dsv3-fp8-h200-sglang-agentic",
            "--description",
            "x",
            "--pr-link",
            "https://github.com/o/r/pull/XXXX",
        ],
        d.path(),
    );
    assert!(!o.status.success());
    assert!(text(&o).1.contains("placeholder"));
    assert_eq!(std::fs::read(d.path().join("perf-changelog.yaml")).unwrap(), before);
}

#[test]
fn an_engine_flag_run_would_refuse_is_refused_by_validate() {
    let d = repo_copy();
    edit(
        &d.path().join("recipes/dsv3-fp8-h200-sglang-agentic.yaml"),
        "args: [--max-running-requests, \"64\",",
        "args: [--max-runing-requests, \"64\",",
    );
    validate_fails(d.path(), &["recipes/dsv3-fp8-h200-sglang-agentic.yaml", "arms[", "--max-runing-requests", "fix:"]);
}

#[test]
fn a_mistyped_config_or_missing_trace_file_is_named_before_anything_is_written() {
    let root = workspace_root();
    let o = sweep(&["predict", "--config", "dsv41flash-fp4-gb300-sglang-agentic-dspak"], &root);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("no such config key in the master config"), "{err}");
    assert!(err.contains("did you mean `dsv41flash-fp4-gb300-sglang-agentic-dspark`?"), "{err}");
    // User errors are one message, not a backtrace, whatever RUST_BACKTRACE says.
    assert!(!err.contains("Stack backtrace") && !err.contains("Error: "), "{err}");

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let missing = tmp.path().join("nope.jsonl");
    let o = sweep(&["run", "full-sweep-fail-fast", "--traces", missing.to_str().unwrap(), "--out", out.to_str().unwrap()], &root);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains(&format!("--traces {}: no such file or folder", missing.display())), "{err}");
    assert!(!out.exists(), "a run that cannot start leaves no folder");
}
