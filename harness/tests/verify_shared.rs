//! `sweep verify` on what reaches beyond the files a change touches: the golden acceptance a
//! config's points inherit (Check 11), append-only entries (Check 12), and changes that hide from
//! a file-by-file reader (Check 13: file names with control characters, symbolic links on input
//! paths; edits to files many configs share, golden AL curves and the runner table).

mod common;
use common::verify_fixture::*;
use common::*;

/// A change that fails Check 11 on its own still fails when it also commits a file whose name
/// holds newlines (read by name, such a name once injected requests and moved contents to other
/// paths): contents are read by object id, and the name itself is a Check 13 finding.
#[test]
fn a_file_name_with_newlines_neither_hides_a_change_nor_passes() {
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSPARK, "--trust-remote-code,", "--trust-remote-code, --speculative-draft-model-quantization, fp8,");
    let forged = format!("notes\nHEAD:{DSPARK}\nHEAD:recipes/master.yaml");
    f.write(&forged, "harmless\n");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 11);
    assert!(findings(&v, 11)[0].3.contains("--speculative-draft-model-quantization fp8"), "{:?}", findings(&v, 11));
    assert_fail(&v, code, 13);
    let fs = findings(&v, 13);
    assert_eq!(fs.len(), 1, "{fs:?}");
    assert!(fs[0].0.starts_with("notes\\nHEAD:recipes/"), "the name shown escaped: {fs:?}");
    assert!(fs[0].3.contains("control character"), "{fs:?}");
    // The text verdict stays one line per check.
    let (_, t) = f.verify_text(&[]);
    assert_eq!(t.lines().count(), 17, "{t}");
    assert!(t.contains("❌ Check 13 (Repository tree): FAIL — "), "{t}");
}

/// `recipes/` replaced by a link to a folder holding a hostile recipe: `sweep plan` would follow
/// it; verify cannot read through it, so the link itself fails the change.
#[test]
fn a_recipe_folder_turned_into_a_symlink_fails() {
    let f = Fixture::sweep();
    f.commit("base");
    let staged = f.path("staged");
    std::fs::create_dir_all(&staged).unwrap();
    for e in std::fs::read_dir(f.path("recipes")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), staged.join(e.file_name())).unwrap();
    }
    edit(
        &staged.join("dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml"),
        "--trust-remote-code,",
        "--trust-remote-code, --speculative-draft-model-quantization, fp8,",
    );
    std::fs::remove_dir_all(f.path("recipes")).unwrap();
    std::os::unix::fs::symlink("staged", f.path("recipes")).unwrap();
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 13);
    let fs = findings(&v, 13);
    assert_eq!((fs[0].0.as_str(), fs[0].2.as_str()), ("recipes", "mode 120000"), "{fs:?}");
    assert!(fs[0].3.starts_with("a symbolic link: `sweep plan` and `sweep run` would read through it"), "{fs:?}");
    // A link elsewhere that the change does not touch is no finding; a new one anywhere is.
    let g = Fixture::sweep();
    std::os::unix::fs::symlink("README.md", g.path("ALIAS.md")).unwrap();
    g.commit("base");
    g.edit(DSV3, "--max-running-requests, \"64\"", "--max-running-requests, \"48\"");
    g.commit("head");
    let (_, v) = g.verify(&[]);
    assert_pass(&v, 13);
    std::os::unix::fs::symlink("README.md", g.path("OTHER.md")).unwrap();
    g.commit("head 2");
    let (code, v) = g.verify(&[]);
    assert_fail(&v, code, 13);
    assert_eq!(findings(&v, 13)[0].0, "OTHER.md");
}

/// The golden curve itself edited (3.51 → 3.9): every config injecting it changed, so the config
/// is judged as changed and the moved value is a Check 11 finding.
#[test]
fn editing_a_golden_al_curve_changes_every_config_that_injects_it() {
    let f = Fixture::sweep();
    f.commit("base");
    f.edit("golden_al/dsv41flash_dspark.yaml", "5: 3.51", "5: 3.9");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 11);
    let fs = findings(&v, 11);
    assert_eq!(fs.len(), 1, "{fs:?}");
    assert_eq!((fs[0].0.as_str(), fs[0].2.as_str()), ("golden_al/dsv41flash_dspark.yaml", "3.51 → 3.9"), "{fs:?}");
    assert!(
        fs[0].3.contains("the golden AL for deepseek-v4.1-flash thinking_on K=5 changes 3.51 → 3.9, and with it the simulated acceptance of 1 config(s) (dsv41flash-fp4-gb300-sglang-agentic-dspark)"),
        "{fs:?}"
    );
    // Granted as an exception in the pr-facts, the curve's configs are still judged: they
    // inject the new value, which is the golden one.
    let ok = f.facts("exceptions:\n  \"11\": \"the curve is re-measured in this pull request\"\n");
    let (_, v) = f.verify(&["--pr-facts", &ok]);
    assert_pass(&v, 11);
    assert!(check(&v, 11)["reason"].as_str().unwrap().contains("dsv41flash-fp4-gb300-sglang-agentic-dspark AL 3.9"), "{}", check(&v, 11));
    // A new draft length added to the curve moves no value.
    let g = Fixture::sweep();
    g.commit("base");
    g.edit("golden_al/dsv41flash_dspark.yaml", "5: 3.51", "5: 3.51\n    7: 4.1");
    g.commit("head");
    assert_eq!(status(&g.verify(&[]).1, 11), "N/A");
}

/// A runner's nodes changed in the runner table: its configs run elsewhere, so they are judged
/// as changed configs (Check 11 reads the DSpark recipe's eight points).
#[test]
fn a_runner_table_edit_changes_the_configs_on_that_runner() {
    let f = Fixture::sweep();
    f.commit("base");
    f.edit("recipes/runners.yaml", "    - gb300-nv_2\n", "    - gb300-nv_2\n    - gb300-nv_9\n");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_eq!(code, 0, "{}", serde_json::to_string_pretty(&v).unwrap());
    assert_pass(&v, 11);
    assert!(check(&v, 11)["reason"].as_str().unwrap().starts_with("8 agentic spec-decode launch(es)"), "{}", check(&v, 11));
}

#[test]
fn check11_golden_simulated_acceptance_in_the_effective_environment() {
    // A pinned AL other than the golden one, set where every point inherits it.
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSPARK, "SGLANG_TIMEOUT_KEEP_ALIVE: \"900\"}", "SGLANG_TIMEOUT_KEEP_ALIVE: \"900\", SGLANG_SIMULATE_ACC_LEN: \"3.2\"}");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 11);
    let fs = findings(&v, 11);
    assert_eq!(fs.len(), 1, "one cause, one line: {fs:?}");
    let points = check(&v, 11)["findings"][0]["points"].as_array().unwrap().len();
    assert_eq!(points, 8, "every point inherits the worker's variable: {fs:?}");
    assert!(
        fs[0].3.starts_with(
            "dsv41flash-fp4-gb300-sglang-agentic-dspark Agg TP4 c1/c4/c16, Agg TP2-EP2 c16/c32, Agg DEP2 c64/c128/c160 (8 points): "
        ),
        "{fs:?}"
    );
    assert!(fs[0].3.contains(" (8 points): "), "{fs:?}");
    assert_eq!((fs[0].0.as_str(), fs[0].1), (DSPARK, Some(f.line_of(DSPARK, "SGLANG_SIMULATE_ACC_LEN: \"3.2\""))), "{fs:?}");
    assert!(
        fs[0].3.contains(
            "SGLANG_SIMULATE_ACC_LEN is 3.2 but the golden AL for deepseek-v4.1-flash thinking_on with 5 speculative tokens is 3.51"
        ),
        "{fs:?}"
    );

    // Real acceptance: the recipe no longer simulates it.
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSPARK, "simulated-acceptance:\n  thinking-mode: thinking_on\n", "");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 11);
    assert!(
        findings(&v, 11)[0].3.contains("agentic spec-decode runs real (unsimulated) acceptance: set SGLANG_SIMULATE_ACC_LEN"),
        "{:?}",
        findings(&v, 11)
    );

    // A recipe that starts drafting although its master rows say `spec-decoding: none`.
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSV3, "--trust-remote-code,", "--trust-remote-code, --speculative-algorithm, EAGLE, --speculative-num-steps, \"3\",");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 11);
    let fs = findings(&v, 11);
    assert_eq!(fs.len(), 1, "one cause at every point of the recipe: {fs:?}");
    assert!(
        fs[0].3.starts_with(
            "dsv3-fp8-h200-sglang-agentic TP8 c1/c4/c16, DEP8 c32/c64 (5 points): agentic spec-decode runs real (unsimulated) acceptance"
        ),
        "{fs:?}"
    );
    assert_eq!(fs[0].1, Some(f.line_of(DSV3, "- conc: 1")));

    // A cheaper draft under pinned acceptance.
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSPARK, "--trust-remote-code,", "--trust-remote-code, --speculative-draft-model-quantization, fp8,");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 11);
    assert!(
        findings(&v, 11)[0].3.contains("--speculative-draft-model-quantization fp8 changes the draft's precision"),
        "{:?}",
        findings(&v, 11)
    );
}

/// The vLLM and TRT-LLM forms (TRT counts accepted drafts without the bonus token: AL − 1), in an
/// InferenceX-layout agentic script.
#[test]
fn check11_vllm_and_trtllm_forms_and_the_al_minus_one_rule() {
    let s = "benchmarks/single_node/agentic/dsv41flash_fp4_gb300_mtp.sh";
    let run = |body: &str| {
        let f = Fixture::inferencex_from_sweep();
        f.commit("base");
        f.write(s, body);
        f.commit("head");
        let (code, v) = f.verify(&[]);
        (code, v, f)
    };
    let vllm = |al: &str| {
        format!(
            "#!/bin/bash\nvllm serve deepseek-ai/DeepSeek-V4.1-Flash --tensor-parallel-size 4 \\\n  --speculative-config '{{\"method\": \"dspark\", \"num_speculative_tokens\": 5, \"rejection_sample_method\": \"synthetic\", \"synthetic_acceptance_length\": {al}}}'\n"
        )
    };
    let (code, v, _) = run(&vllm("3.51"));
    assert_pass(&v, 11);
    assert_eq!(code, 0);
    let (code, v, _) = run(&vllm("3.6"));
    assert_fail(&v, code, 11);
    assert!(
        findings(&v, 11)[0].3.contains("pinned AL 3.6 but the golden AL for deepseek-v4.1-flash thinking_on K=5 is 3.51"),
        "{:?}",
        findings(&v, 11)
    );
    let trt = |n: &str| {
        format!(
            "#!/bin/bash\nexport NUM_SPEC_TOKENS=5\nexport TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS={n}\ntrtllm-serve deepseek-ai/DeepSeek-V4.1-Flash --tp_size 4\n"
        )
    };
    let (code, v, _) = run(&trt("2.51"));
    assert_pass(&v, 11);
    assert_eq!(code, 0);
    // The golden AL itself, without subtracting the bonus token.
    let (code, v, _) = run(&trt("3.51"));
    assert_fail(&v, code, 11);
    let fs = findings(&v, 11);
    assert_eq!(
        (fs[0].0.as_str(), fs[0].1, fs[0].2.as_str()),
        (s, Some(3), "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=3.51 (AL 4.51)"),
        "{fs:?}"
    );
    assert!(fs[0].3.contains("set 2.51 (golden AL 3.51 − 1)"), "{fs:?}");
    // Simulated acceptance on a non-agentic spec-decode script.
    let (code, v, _) = {
        let f = Fixture::inferencex_from_sweep();
        f.commit("base");
        f.write("benchmarks/single_node/fixed_seq_len/dsv41flash_fp4_gb300_mtp.sh", "#!/bin/bash\nexport SGLANG_SIMULATE_ACC_LEN=3.51\npython3 -m sglang.launch_server --speculative-algorithm DSPARK --use-chat-template\n");
        f.commit("head");
        let (c, v) = f.verify(&[]);
        (c, v, f)
    };
    assert_fail(&v, code, 11);
    assert!(
        findings(&v, 11)[0].3.contains("simulated acceptance (SGLANG_SIMULATE_ACC_LEN) on a non-agentic spec-decode config"),
        "{:?}",
        findings(&v, 11)
    );
}

#[test]
fn check12_append_only_adds_points_to_unchanged_curves() {
    // Adds c8 to the TP8 curve: row and recipe point.
    let add = |f: &Fixture| {
        f.edit(
            "recipes/master.yaml",
            "- { tp: 8, ep: 1, kv-offloading: none, conc-list: [1, 4, 16] }",
            "- { tp: 8, ep: 1, kv-offloading: none, conc-list: [1, 4, 8, 16] }",
        );
        f.edit(DSV3, "      - conc: 4\n      - conc: 16\n", "      - conc: 4\n      - conc: 8\n      - conc: 16\n");
    };
    let f = Fixture::sweep();
    f.commit("base");
    add(&f);
    f.append_entry(&["dsv3-fp8-h200-sglang-agentic"], 8, "  append-only: true\n");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_pass(&v, 12);
    assert!(check(&v, 12)["reason"].as_str().unwrap().contains("appends 1 new point(s)"), "{}", check(&v, 12));
    assert_eq!(code, 0);

    // A base point removed.
    let f = Fixture::sweep();
    f.commit("base");
    add(&f);
    f.edit("recipes/master.yaml", "conc-list: [1, 4, 8, 16]", "conc-list: [1, 8, 16]");
    f.append_entry(&["dsv3-fp8-h200-sglang-agentic"], 8, "  append-only: true\n");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 12);
    let fs = findings(&v, 12);
    assert!(
        fs.iter().any(|x| x.0 == "recipes/master.yaml"
            && x.3.contains("concurrency 4 of an existing `dsv3-fp8-h200-sglang-agentic` curve was removed")),
        "{fs:?}"
    );

    // An existing point's recipe changed (the TP8 arm's flags reach c1, c4 and c16).
    let f = Fixture::sweep();
    f.commit("base");
    add(&f);
    f.edit(
        DSV3,
        "args: [--max-running-requests, \"64\", --cuda-graph-max-bs, \"64\"]",
        "args: [--max-running-requests, \"64\", --cuda-graph-max-bs, \"32\"]",
    );
    f.append_entry(&["dsv3-fp8-h200-sglang-agentic"], 8, "  append-only: true\n");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 12);
    let fs = findings(&v, 12);
    assert_eq!(fs.len(), 3, "{fs:?}");
    assert!(
        fs[0].3.starts_with(
            "existing point dsv3-fp8-h200-sglang-agentic TP8 c1 changed: server args `--cuda-graph-max-bs 64` → `--cuda-graph-max-bs 32`"
        ),
        "{fs:?}"
    );
    assert_eq!(fs[0].1, Some(f.line_of(DSV3, "- conc: 1")));

    // Mixed with a regular entry.
    let f = Fixture::sweep();
    f.commit("base");
    add(&f);
    f.append_entry(&["dsv3-fp8-h200-sglang-agentic"], 8, "  append-only: true\n");
    f.append_entry(&["dsv41flash-fp4-gb300-sglang-agentic-dspark"], 8, "");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 12);
    let fs = findings(&v, 12);
    assert_eq!(fs[0].0, "perf-changelog.yaml");
    assert_eq!(
        fs[0].1,
        Some(
            f.read("perf-changelog.yaml").lines().enumerate().filter(|(_, l)| l.starts_with("- config-keys:")).last().unwrap().0 as u64 + 1
        )
    );
    assert_eq!(fs[0].3, "mixes a regular entry with append-only entries");
}
