//! The configuration commands as a new user runs them: the real binary on the repository's
//! recipes and on copies with deliberate mistakes.

mod common;
use common::*;

#[test]
fn plan_shows_the_main_job_with_inferencex_canary_and_the_agentic_matrix() {
    let o = sweep(&["plan", "full-sweep-fail-fast"], &workspace_root());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("selected by the latest changelog entry: 4 config(s)"), "{out}");
    // InferenceX's canary: the minimum-concurrency single-node 1k/1k point.
    let canary = out.split("\nmatrix").next().unwrap();
    assert!(canary.contains("dsr1-fp8-b200-sglang/1k1k-tp8-c1 "), "{out}");
    let agentic =
        out.split("matrix single_node.agentic (13 points, fail-fast on)").nth(1).expect("agentic matrix").split("\nevals").next().unwrap();
    let dsv41: Vec<&str> = agentic.lines().filter(|l| l.trim_start().starts_with("dsv41flash-fp4-gb300-sglang-agentic-dspark/")).collect();
    assert_eq!(dsv41.len(), 8, "{out}");
    for want in ["tp4-c1", "tp4-c4", "tp4-c16", "tp2-ep2-c16", "tp2-ep2-c32", "dep2-c64", "dep2-c128", "dep2-c160"] {
        assert!(dsv41.iter().any(|l| l.contains(&format!("/{want} "))), "missing {want}");
    }
    assert_eq!(agentic.lines().filter(|l| l.trim_start().starts_with("dsv3-fp8-h200-sglang-agentic/")).count(), 5, "{out}");
    assert!(out.contains("matrix single_node.1k1k (11 points, fail-fast on)"), "{out}");
    assert!(out.contains("matrix single_node.8k1k (14 points, fail-fast on)"), "{out}");
    assert!(!out.contains("fail-fast off"));
}

/// Fixed-seq-len points show their sequence length and the requests they send (10 × conc)
/// instead of a duration; the totals count those requests beside the agentic GPU-hours.
#[test]
fn plan_shows_fixed_seq_len_points_with_their_sequence_length_and_requests() {
    let o = sweep(&["plan", "full-sweep-fail-fast"], &workspace_root());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let cells = |id: &str| -> Vec<String> {
        let l = out.lines().find(|l| l.trim_start().starts_with(&format!("{id} "))).unwrap_or_else(|| panic!("no {id} in:\n{out}"));
        l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect()
    };
    assert!(out.contains("  POINT ") && out.contains("  SEQ ") && out.contains("  DURATION\n"), "{out}");
    assert_eq!(
        cells("dsr1-fp8-h200-sglang/1k1k-tp8-c64"),
        ["dsr1-fp8-h200-sglang/1k1k-tp8-c64", "TP8 1k1k", "1k/1k", "64", "8", "640 req"]
    );
    assert_eq!(
        cells("dsr1-fp8-b200-sglang/8k1k-tp4-c32"),
        ["dsr1-fp8-b200-sglang/8k1k-tp4-c32", "TP4 8k1k", "8k/1k", "32", "4", "320 req"]
    );
    assert_eq!(cells("dsv3-fp8-h200-sglang-agentic/dep8-c64"), ["dsv3-fp8-h200-sglang-agentic/dep8-c64", "DEP8", "-", "64", "8", "3600 s"]);
    // The 8k/1k evals InferenceX selects (highest and median concurrency ≥ 16 per group).
    for id in ["eval:dsr1-fp8-h200-sglang/8k1k-tp8-c32", "eval:dsr1-fp8-h200-sglang/8k1k-tp8-c64", "eval:dsr1-fp8-b200-sglang/8k1k-tp4-c32"]
    {
        let c = cells(id);
        assert_eq!((c[2].as_str(), c[5].as_str()), ("8k/1k", "-"), "{id}: {c:?}");
    }
    // 13 agentic one-hour points (62 GPU-hours) and 26 fixed-seq-len points of 10 × conc requests:
    // H200 2 × (4 + 8 + … + 64) × 10, B200 (1 + … + 64 + 1 + 2 + 4 + 1 + … + 32) × 10.
    assert!(
        out.ends_with("\n39 throughput point(s), 62.0 GPU-hours of agentic profiling on real hardware plus 26 fixed-seq-len point(s) sending 4,450 requests (10 × conc each), 5 eval point(s)\n"),
        "{out}"
    );
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
    assert_eq!(v["single_node_agentic"]["include"].as_array().unwrap().len(), 13);
    assert_eq!(v["single_node_1k1k"]["include"].as_array().unwrap().len(), 11);
    assert_eq!(v["single_node_8k1k"]["include"].as_array().unwrap().len(), 14);
    assert_eq!(v["single_node_agentic"]["fail-fast"], true);
    assert_eq!(v["single_node_8k1k"]["fail-fast"], true);
    let row = &v["canary"]["include"][0];
    assert_eq!(row["point"], "dsr1-fp8-b200-sglang/1k1k-tp8-c1");
    assert_eq!((row["isl"].as_u64(), row["osl"].as_u64(), row["exp-name"].as_str()), (Some(1024), Some(1024), Some("dsr1_1k1k")));
    // What InferenceX's benchmark workflow takes as its `random-range-ratio` input; no duration.
    assert_eq!(row["random-range-ratio"].as_f64(), Some(0.8));
    assert!(row.get("profile-duration").is_none(), "{row}");
    assert_eq!(row["recipe-fingerprint"].as_str().unwrap().len(), 64);
    assert_eq!(v["single_node_agentic"]["include"][0]["point"], "dsv41flash-fp4-gb300-sglang-agentic-dspark/tp4-c1");
    let o = sweep(&["plan", "full-sweep-fail-fast", "agentx-fast", "--format", "json"], &workspace_root());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    let agentic = v["matrices"].as_array().unwrap().iter().find(|m| m["name"] == "single_node.agentic").expect("agentic matrix");
    assert_eq!(agentic["points"][0]["duration_s"], 1200);
    assert_eq!(agentic["points"][0]["warmup_per_lane"], 1);
    // A fixed-seq-len point carries its requests instead of a duration; its evals neither.
    let c = &v["canary"];
    assert_eq!((c["isl"].as_u64(), c["osl"].as_u64(), c["random_range_ratio"].as_f64()), (Some(1024), Some(1024), Some(0.8)));
    assert_eq!((c["num_prompts"].as_u64(), c["num_warmups"].as_u64()), (Some(10), Some(2)));
    assert!(c.get("duration_s").is_none() && c.get("warmup_per_lane").is_none(), "{c}");
    let ev = &v["evals"].as_array().unwrap().iter().find(|m| m["name"] == "evals").expect("fixed-seq-len evals")["points"][0];
    assert_eq!(ev["id"], "eval:dsr1-fp8-h200-sglang/8k1k-tp8-c32");
    assert!(ev.get("num_prompts").is_none() && ev["row"]["isl"] == 8192, "{ev}");
}

/// A recipe's `random-range-ratio` replaces InferenceX's 0.8 for its config's points.
#[test]
fn a_recipe_sets_the_random_range_ratio_of_its_points() {
    let d = repo_copy();
    edit(&d.path().join("recipes/dsr1-fp8-h200-sglang.yaml"), "image: lmsysorg", "random-range-ratio: 1.0\nimage: lmsysorg");
    let o = sweep(&["plan", "full-sweep-fail-fast", "--format", "json"], d.path());
    assert!(o.status.success(), "{}", text(&o).1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    let ratios: std::collections::BTreeMap<String, f64> = v["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["points"].as_array().unwrap().iter())
        .filter_map(|p| Some((p["id"].as_str()?.to_string(), p["random_range_ratio"].as_f64()?)))
        .collect();
    assert_eq!(ratios.len(), 25, "{ratios:?}");
    assert_eq!(ratios["dsr1-fp8-h200-sglang/8k1k-tp8-c4"], 1.0);
    assert_eq!(ratios["dsr1-fp8-b200-sglang/8k1k-tp4-c4"], 0.8);
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
    assert!(out.contains("4 serving recipes (39 points resolved)"), "{out}");
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

/// A fixed-seq-len row whose sequence length has no point, or points that two arms both serve,
/// are named with file, line and YAML path, and the fix says which `seq-len` to give.
#[test]
fn fixed_seq_len_rows_need_exactly_one_point_of_their_sequence_length() {
    let d = repo_copy();
    let recipe = d.path().join("recipes/dsr1-fp8-h200-sglang.yaml");
    edit(&recipe, "      - conc: 64\n\n", "\n");
    let o = sweep(&["plan", "full-sweep-fail-fast"], d.path());
    let (_, err) = text(&o);
    assert!(!o.status.success(), "plan should fail");
    let line =
        std::fs::read_to_string(d.path().join("recipes/master.yaml")).unwrap().lines().position(|l| l == "dsr1-fp8-h200-sglang:").unwrap()
            + 1;
    assert!(
        err.contains(&format!("recipes/master.yaml:{line}: dsr1-fp8-h200-sglang.scenarios.fixed-seq-len[0].search-space[0]: 1k1k concurrency 64 has no point in the serving recipe")),
        "{err}"
    );
    assert!(
        err.contains("fix: add `- conc: 64` to an arm whose flags give tp 8 ep 1 dp-attn false and whose `seq-len` is 1k1k or unset"),
        "{err}"
    );
    let d = repo_copy();
    let recipe = d.path().join("recipes/dsr1-fp8-h200-sglang.yaml");
    edit(&recipe, "    seq-len: 1k1k\n", "");
    edit(&recipe, "    seq-len: 8k1k\n", "");
    let o = sweep(&["plan", "full-sweep-fail-fast"], d.path());
    let (_, err) = text(&o);
    assert!(!o.status.success(), "plan should fail");
    assert!(
        err.contains("recipes/dsr1-fp8-h200-sglang.yaml:44: arms[1].points[0]: master row dsr1-fp8-h200-sglang.scenarios.fixed-seq-len[1].search-space[0] 8k1k concurrency 4 matches two recipe points: this one and arms[0].points[0] (line 34)"),
        "{err}"
    );
    assert!(err.contains("fix: give the arms or points `seq-len` selectors that differ (this row needs `seq-len: 8k1k`)"), "{err}");
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
