//! `sweep verify` as a CI job runs it: a git repository made here with a base commit and a head
//! commit (this repository's recipes and changelog, or the real InferenceX files), the real
//! binary, its verdict rows, findings (file, line, value) and exit code. Fixtures that need the
//! shared data are `#[ignore]`d and read `SWEEP_SHARED_DATA`.

mod common;
use common::verify_fixture::*;
use common::*;

use serde_json::Value;
use std::path::Path;

/// The repository's own latest changelog entry: a base without that entry, its configs' master
/// entries and serving recipes, so the head submits them all and every check reads them.
#[test]
fn this_repositorys_latest_changelog_entry_passes() {
    let f = Fixture::sweep();
    let head_master = f.read("recipes/master.yaml");
    let cl = f.read("perf-changelog.yaml");
    let last = cl.rfind("\n- config-keys:").expect("two entries");
    let keys: Vec<String> =
        cl[last..].lines().skip(2).take_while(|l| l.starts_with("    - ")).map(|l| l.trim_start_matches("    - ").to_string()).collect();
    assert!(!keys.is_empty());
    let mut m: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(&head_master).unwrap();
    for k in &keys {
        m.remove(k.as_str());
        std::fs::remove_file(f.path(&format!("recipes/{k}.yaml"))).unwrap();
    }
    f.write("recipes/master.yaml", &serde_yaml_ng::to_string(&m).unwrap());
    f.write("perf-changelog.yaml", &cl[..last + 1]);
    f.commit("base: the repository before its latest entry");
    let root = workspace_root();
    f.write("recipes/master.yaml", &head_master);
    for k in &keys {
        f.write(&format!("recipes/{k}.yaml"), &std::fs::read_to_string(root.join(format!("recipes/{k}.yaml"))).unwrap());
    }
    f.write("perf-changelog.yaml", &cl);
    f.commit("head: the latest entry");
    let (code, v) = f.verify(&[]);
    assert_eq!(code, 0, "{}", serde_json::to_string_pretty(&v).unwrap());
    assert_eq!(v["verdict"], "PASS");
    for id in [6, 8, 9, 10, 11] {
        assert_pass(&v, id);
    }
    assert!(check(&v, 11)["reason"].as_str().unwrap().contains("3.51"), "{}", check(&v, 11));
    assert_eq!(status(&v, 12), "N/A");
    // The text verdict: marker, header, thirteen rows.
    let (code, t) = f.verify_text(&[]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], format!("<!-- codeowner-signoff-verify sha={} -->", f.head_sha()));
    assert_eq!(lines[1], "## ✅✅✅ **Verdict: PASS** ✅✅✅");
    assert_eq!(lines.len(), 16, "{t}");
    assert!(lines[2].starts_with("➖ Check 0 (CODEOWNER sign-off): N/A — "), "{t}");
    assert!(lines[8].starts_with("✅ Check 6 (Upstream images): PASS — "), "{t}");
}

#[test]
fn check0_codeowner_of_every_specific_path() {
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSV3, "--max-running-requests, \"64\"", "--max-running-requests, \"48\"");
    f.commit("head");
    let owners = "* @sweep/maintainers\n/recipes/ @nv-alice\n/amd/ @amd-bob\n";
    let ok = f.facts(&format!("signer: nv-alice\ncodeowners: |\n{}", owners.lines().map(|l| format!("  {l}\n")).collect::<String>()));
    let (code, v) = f.verify(&["--pr-facts", &ok]);
    assert_pass(&v, 0);
    assert_eq!(code, 0);
    let bad = f.facts(&format!("signer: amd-bob\ncodeowners: |\n{}", owners.lines().map(|l| format!("  {l}\n")).collect::<String>()));
    let (code, v) = f.verify(&["--pr-facts", &bad]);
    assert_fail(&v, code, 0);
    let fs = findings(&v, 0);
    assert_eq!((fs[0].1, fs[0].2.as_str()), (Some(2), "/recipes/"), "{fs:?}");
    assert!(fs[0].3.contains("@amd-bob does not own recipes/dsv3-fp8-h200-sglang-agentic.yaml (owners: @nv-alice)"), "{fs:?}");
    // A team whose members the pr-facts list.
    let team = f.facts("signer: carol\ncodeowners: \"/recipes/ @org/nvidia\\n\"\nteams:\n  \"@org/nvidia\": [carol]\n");
    assert_pass(&f.verify(&["--pr-facts", &team]).1, 0);
    // Team membership the forge would not show is not a failure.
    let unknown = f.facts("signer: dave\ncodeowners: \"/recipes/ @org/nvidia\\n\"\n");
    let (_, v) = f.verify(&["--pr-facts", &unknown]);
    assert_pass(&v, 0);
    assert!(check(&v, 0)["reason"].as_str().unwrap().contains("1 owned by teams whose members are not given"), "{}", check(&v, 0));
}

#[test]
fn check1_green_check_runs_or_a_measured_run_on_a_commit_of_the_pr() {
    let f = Fixture::sweep();
    f.commit("base");
    f.append_entry(&["dsv3-fp8-h200-sglang-agentic"], 3, "");
    f.commit("head");
    let sha = f.head_sha();
    let runs = |eval: &str| {
        f.facts(&format!(
            "check_runs:\n  - {{sha: {sha}, name: \"single-node agentic / dsv3\", conclusion: success, details_url: \"https://github.com/o/r/actions/runs/42/job/1\"}}\n  - {{sha: {sha}, name: \"eval / dsv3\", conclusion: {eval}}}\n"
        ))
    };
    let (code, v) = f.verify(&["--pr-facts", &runs("success")]);
    assert_pass(&v, 1);
    assert!(check(&v, 1)["reason"].as_str().unwrap().contains("(run 42)"), "{}", check(&v, 1));
    assert_eq!(code, 0);
    let (code, v) = f.verify(&["--pr-facts", &runs("skipped")]);
    assert_fail(&v, code, 1);
    assert!(
        check(&v, 1)["reason"].as_str().unwrap().starts_with("No passing sweep/eval was found on any commit in this PR"),
        "{}",
        check(&v, 1)
    );
    assert!(findings(&v, 1)[0].3.contains("`eval / dsv3` skipped"), "{:?}", findings(&v, 1));
    // A run on the reference engine is predicted: not the measured sweep the check asks for.
    let out = f.scratch.path().join("run");
    let o =
        sweep(&["run", "full-sweep-fail-fast", "--duration", "120", "--seed-replicates", "0", "--out", out.to_str().unwrap()], f.root());
    assert!(o.status.success(), "{}", text(&o).1);
    let (code, v) = f.verify(&["--run", out.to_str().unwrap()]);
    assert_fail(&v, code, 1);
    let fs = findings(&v, 1);
    // At a commit of the PR, finished and gated: only its kind fails, and its evals, which the
    // reference engine cannot answer (recorded not applicable, read from sweep's eval.json).
    assert_eq!(fs.len(), 2, "{fs:?}");
    assert_eq!(fs[0].2, "result_kind: predicted");
    assert!(fs[0].3.contains("predicted (reference engine) at 5 point(s)"), "{fs:?}");
    assert_eq!((fs[1].2.as_str(), fs[1].3.as_str()), ("not_applicable", "no eval executed (simulated engine)"), "{fs:?}");
    // A point that published no aggregate.
    std::fs::remove_file(out.join("dsv3-fp8-h200-sglang-agentic/tp8-c4/agg.json")).unwrap();
    let (code, v) = f.verify(&["--run", out.to_str().unwrap()]);
    assert_fail(&v, code, 1);
    let fs = findings(&v, 1);
    assert!(fs.iter().any(|x| x.2 == "dsv3-fp8-h200-sglang-agentic/tp8-c4" && x.3.ends_with("published no agg.json")), "{fs:?}");
}

/// An lm-eval result in InferenceX's shapes (`run_lm_eval.sh` leaves it beside `meta_env.json`).
fn eval_set(dir: &Path, (tp, ep, dpa, conc): (u32, u32, bool, u32), (strict, flex, n): (f64, f64, (u32, u32)), extra_meta: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("meta_env.json"),
        format!(
            "{{\"framework\": \"sglang\", \"precision\": \"fp4\", \"spec_decoding\": \"mtp\", \"tp\": {tp}, \"ep\": {ep}, \"dp_attention\": \"{dpa}\", \"conc\": {conc}, \"model\": \"deepseek-ai/DeepSeek-V4.1-Flash\", \"infmax_model_prefix\": \"dsv41flash\", \"hw\": \"gb300\", \"isl\": 0, \"osl\": 0{extra_meta}}}"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("results_2026-12-01T10-00-00.json"),
        format!(
            r#"{{"lm_eval_version": "0.4.9", "results": {{"gsm8k": {{"alias": "gsm8k", "exact_match,strict-match": {strict}, "exact_match_stderr,strict-match": 0.004, "exact_match,flexible-extract": {flex}, "exact_match_stderr,flexible-extract": 0.004}}}},
            "configs": {{"gsm8k": {{"metric_list": [{{"metric": "exact_match"}}], "filter_list": [{{"name": "strict-match"}}, {{"name": "flexible-extract"}}]}}}},
            "n-samples": {{"gsm8k": {{"original": {}, "effective": {}}}}}}}"#,
            n.1, n.0
        ),
    )
    .unwrap();
}

#[test]
fn check2_eval_scores_full_n_and_the_configs_image() {
    let f = Fixture::sweep();
    f.commit("base");
    f.append_entry(&["dsv41flash-fp4-gb300-sglang-agentic-dspark"], 3, "");
    f.commit("head");
    let image =
        "lmsysorg/sglang:nightly-dev-cu13-20261014-684fea8a@sha256:ddae0e399d3d94f7827f16183301cf8dac4cf0eae0ef25590b7dac5881d713d8";
    let run = tempfile::tempdir().unwrap();
    let img = format!(", \"image\": \"{image}\", \"infrastructure_success\": true");
    eval_set(&run.path().join("eval_tp2ep2_c32"), (2, 2, false, 32), (0.975, 0.9731, (1319, 1319)), &img);
    eval_set(&run.path().join("eval_dep2_c160"), (2, 2, true, 160), (0.9742, 0.9712, (1319, 1319)), &img);
    let r = run.path().to_str().unwrap();
    let (code, v) = f.verify(&["--run", r]);
    assert_pass(&v, 2);
    assert_eq!(code, 0);
    assert_eq!(
        check(&v, 2)["reason"],
        format!(
            "gsm8k em_strict 0.9750 (TP2/EP2 C32) and 0.9742 (DEP2 C160), n=1319, infrastructure_success: true, image {image} (the evals'), above the 0.90 bar (thresholds.yaml default.gsm8k)"
        )
    );

    // Below the bar (flexible-extract counts too), a partial n, a tag without the pinned digest.
    let bad = tempfile::tempdir().unwrap();
    eval_set(&bad.path().join("a"), (2, 2, false, 32), (0.95, 0.89, (1319, 1319)), &img);
    eval_set(&bad.path().join("b"), (2, 2, true, 160), (0.97, 0.97, (50, 1319)), &img);
    let tag_only = ", \"image\": \"lmsysorg/sglang:nightly-dev-cu13-20261014-684fea8a\"";
    eval_set(&bad.path().join("c"), (2, 2, true, 64), (0.97, 0.97, (1319, 1319)), tag_only);
    let (code, v) = f.verify(&["--run", bad.path().to_str().unwrap()]);
    assert_fail(&v, code, 2);
    let fs = findings(&v, 2);
    let has = |value: &str, msg: &str| fs.iter().any(|x| x.2 == value && x.3.contains(msg));
    assert!(
        has("em_flexible 0.8900", "gsm8k TP2/EP2 C32: em_flexible 0.8900 is below the 0.90 bar (thresholds.yaml default.gsm8k)"),
        "{fs:?}"
    );
    assert!(has("n=50", "partial n=50 of 1319"), "{fs:?}");
    assert!(
        has("lmsysorg/sglang:nightly-dev-cu13-20261014-684fea8a", "not the image dsv41flash-fp4-gb300-sglang-agentic-dspark pins"),
        "{fs:?}"
    );
    assert!(fs.iter().all(|x| x.0.ends_with(".json")), "each finding names its results file: {fs:?}");

    // The reference engine answers no math: a not_applicable eval is no score.
    let na = tempfile::tempdir().unwrap();
    eval_set(&na.path().join("a"), (2, 2, false, 32), (0.0, 0.0, (1319, 1319)), ", \"not_applicable\": \"simulated engine\"");
    let (code, v) = f.verify(&["--run", na.path().to_str().unwrap()]);
    assert_fail(&v, code, 2);
    assert!(findings(&v, 2)[0].3.contains("no score (not_applicable: simulated engine)"), "{:?}", findings(&v, 2));
    let infra = tempfile::tempdir().unwrap();
    eval_set(&infra.path().join("a"), (2, 2, false, 32), (0.97, 0.97, (1319, 1319)), ", \"infrastructure_success\": false");
    let (code, v) = f.verify(&["--run", infra.path().to_str().unwrap()]);
    assert_fail(&v, code, 2);
    assert_eq!(findings(&v, 2)[0].2, "infrastructure_success: false");

    // With `all-evals`, every selected eval row needs a result: one of the two is missing.
    let facts = f.facts("labels: [full-sweep-fail-fast, all-evals]\n");
    let one = tempfile::tempdir().unwrap();
    eval_set(&one.path().join("a"), (2, 2, false, 32), (0.975, 0.97, (1319, 1319)), &img);
    let (code, v) = f.verify(&["--run", one.path().to_str().unwrap(), "--pr-facts", &facts]);
    assert_fail(&v, code, 2);
    assert!(findings(&v, 2).iter().any(|x| x.3.starts_with("no eval result for")), "{:?}", findings(&v, 2));
}

#[test]
fn check3_single_node_recipe_links_merged_upstream_docs_with_matching_major_args() {
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSV3, "--max-running-requests, \"64\"", "--max-running-requests, \"48\"");
    f.commit("head");
    let url = "https://docs.sglang.io/cookbook/autoregressive/DeepSeek/DeepSeek-V3";
    let facts = |state: &str, args: &str| {
        f.facts(&format!(
            "signoff: |\n  - [x] Verified recipes\n  ### Additional detail section:\n  - recipe: {url}\nrecipe_links:\n  - {{url: \"{url}\", state: {state}, merged_at: \"2026-11-01T00:00:00Z\", args: {args}}}\n"
        ))
    };
    let good = "[--model-path, deepseek-ai/DeepSeek-V3, --tp-size, \"8\", --dp-size, \"8\", --ep-size, \"8\", --enable-dp-attention]";
    let (code, v) = f.verify(&["--pr-facts", &facts("PUBLISHED", good)]);
    assert_pass(&v, 3);
    assert_eq!(code, 0);
    // An upstream page with another parallel layout: the DEP8 points contradict it.
    let other = "[--model-path, deepseek-ai/DeepSeek-V3, --tp-size, \"8\"]";
    let (code, v) = f.verify(&["--pr-facts", &facts("PUBLISHED", other)]);
    assert_fail(&v, code, 3);
    let fs = findings(&v, 3);
    assert!(fs.iter().any(|x| x.0 == DSV3 && x.2 == "dp 8" && x.3.contains("missing from the upstream recipe")), "{fs:?}");
    assert!(fs.iter().all(|x| x.1.is_some()), "each names the point's line: {fs:?}");
    // An open upstream pull request is not merged documentation.
    let pr = "https://github.com/sgl-project/sglang/pull/99";
    let open = f.facts(&format!(
        "signoff: \"Additional detail section:\\n{pr}\\n\"\nrecipe_links:\n  - {{url: \"{pr}\", state: OPEN, args: {good}}}\n"
    ));
    let (code, v) = f.verify(&["--pr-facts", &open]);
    assert_fail(&v, code, 3);
    assert!(findings(&v, 3)[0].3.contains("upstream recipe is OPEN (not merged)"), "{:?}", findings(&v, 3));
}

#[test]
fn check4_authorized_reuse_command() {
    let f = Fixture::sweep();
    f.commit("base");
    f.commit("head");
    let ok = f.facts("comments:\n  - {user: lead, association: MEMBER, body: \"LGTM\\n/reuse-sweep-run 123\\n\"}\n");
    let (_, v) = f.verify(&["--pr-facts", &ok]);
    assert_pass(&v, 4);
    assert!(check(&v, 4)["reason"].as_str().unwrap().contains("`/reuse-sweep-run 123` by @lead (MEMBER)"));
    let bad = f.facts("comments:\n  - {user: drive-by, association: CONTRIBUTOR, body: \"/reuse-sweep-run\"}\n  - {user: lead, association: MEMBER, body: \"please /reuse-sweep-run\"}\n");
    let (code, v) = f.verify(&["--pr-facts", &bad]);
    assert_fail(&v, code, 4);
    assert!(
        check(&v, 4)["reason"]
            .as_str()
            .unwrap()
            .starts_with("No authorized `/reuse-sweep-run` command has been posted on this PR (the only one is by @drive-by, CONTRIBUTOR)")
    );
}

#[test]
fn check5_signoff_has_every_item_of_the_latest_template() {
    let f = Fixture::sweep();
    f.commit("base");
    f.commit("head");
    let template = "## Template\n```\n- [ ] Verified that this is the latest version of PR_REVIEW_CHECKLIST.md\n- [ ] Verified that this PR passes evals with a linked workflow\n- [ ] Verified that speculative decoding PRs use chat templates\n```\n";
    let yaml_block = |s: &str| s.lines().map(|l| format!("  {l}\n")).collect::<String>();
    let all = "- [x] Verified that as of now this is the latest version of PR_REVIEW_CHECKLIST.md\n- [x] Verified that this PR passes evals (workflow linked)\n- [x] Verified that speculative decoding PRs use chat templates\n### Additional detail section:\n- insert any additional info here\n";
    let ok = f.facts(&format!("checklist_template: |\n{}signoff: |\n{}", yaml_block(template), yaml_block(all)));
    assert_pass(&f.verify(&["--pr-facts", &ok]).1, 5);
    let stale = "- [x] Verified that as of now this is the latest version of PR_REVIEW_CHECKLIST.md\n- [ ] Verified that this PR passes evals (workflow linked)\n### Additional detail section:\n- insert any additional info here\n";
    let bad = f.facts(&format!("checklist_template: |\n{}signoff: |\n{}", yaml_block(template), yaml_block(stale)));
    let (code, v) = f.verify(&["--pr-facts", &bad]);
    assert_fail(&v, code, 5);
    let fs = findings(&v, 5);
    assert!(fs.iter().any(|x| x.3 == "left unchecked with no explanation in the additional detail section" && x.1 == Some(4)), "{fs:?}");
    assert!(fs.iter().any(|x| x.3 == "template item missing from the sign-off" && x.2.contains("speculative decoding")), "{fs:?}");
}

#[test]
fn check6_upstream_images_and_well_formed_digests() {
    let f = Fixture::sweep();
    f.commit("base");
    f.edit("recipes/master.yaml", "image: lmsysorg/sglang:v0.5.5-cu129-amd64", "image: lmsysorg/sglang:v0.5.6-cu129-amd64");
    f.edit(DSV3, "image: lmsysorg/sglang:v0.5.5-cu129-amd64", "image: lmsysorg/sglang:v0.5.6-cu129-amd64");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_pass(&v, 6);
    assert!(check(&v, 6)["reason"].as_str().unwrap().contains("lmsysorg/sglang:v0.5.6-cu129-amd64 (tag, not pinned by digest)"));
    assert_eq!(code, 0);

    // A vendor fork on an established SKU (H200).
    let f = Fixture::sweep();
    f.commit("base");
    f.edit("recipes/master.yaml", "image: lmsysorg/sglang:v0.5.5-cu129-amd64", "image: rocm/sgl-dev:v0.5.5");
    f.edit(DSV3, "image: lmsysorg/sglang:v0.5.5-cu129-amd64", "image: rocm/sgl-dev:v0.5.5");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 6);
    let fs = findings(&v, 6);
    assert_eq!(fs[0].0, "recipes/master.yaml");
    assert_eq!(fs[0].1, Some(f.line_of("recipes/master.yaml", "image: rocm/sgl-dev")));
    assert_eq!(fs[0].2, "rocm/sgl-dev:v0.5.5");
    assert!(fs[0].3.contains("sglang on established H200 is not an upstream image"), "{fs:?}");
    // … passes when the sign-off documents the exception.
    let ex = f.facts("exceptions:\n  \"6\": \"new model architecture not yet supported upstream (maintainer thread linked)\"\n");
    assert_pass(&f.verify(&["--pr-facts", &ex]).1, 6);

    // A digest that is not one.
    let f = Fixture::sweep();
    f.commit("base");
    let bad = "image: lmsysorg/sglang:v0.5.5-cu129-amd64@sha256:1234";
    f.edit("recipes/master.yaml", "image: lmsysorg/sglang:v0.5.5-cu129-amd64", bad);
    f.edit(DSV3, "image: lmsysorg/sglang:v0.5.5-cu129-amd64", bad);
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 6);
    assert!(findings(&v, 6)[0].3.contains("`@sha256:1234` is not a sha256 digest"), "{:?}", findings(&v, 6));
}

#[test]
fn check8_no_architecture_overrides() {
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSPARK, "--trust-remote-code,", "--trust-remote-code, --hf-overrides, '{\"index_topk_freq\": 4}',");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 8);
    let fs = findings(&v, 8);
    assert_eq!((fs[0].0.as_str(), fs[0].1), (DSPARK, Some(f.line_of(DSPARK, "--hf-overrides"))));
    assert!(fs[0].2.contains("--hf-overrides, '{\"index_topk_freq\": 4}'"), "{fs:?}");
    assert!(fs[0].3.contains("`--hf-overrides` overrides the model's architecture (`index_topk_freq`)"), "{fs:?}");
    // GitHub annotations name the file and line.
    let o = sweep(&["verify", "--base", "base", "--format", "github"], f.root());
    let (out, _) = text(&o);
    assert!(
        out.contains(&format!("::error file={DSPARK},line={},title=Check 8 (Architecture hacks)::", f.line_of(DSPARK, "--hf-overrides"))),
        "{out}"
    );
    assert_eq!(o.status.code(), Some(1));

    // Extending the context window keeps the computation per token.
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(DSPARK, "--trust-remote-code,", "--trust-remote-code, --json-model-override-args, '{\"max_position_embeddings\": 1048576}',");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_pass(&v, 8);
    assert!(check(&v, 8)["reason"].as_str().unwrap().contains("context-only overrides"), "{}", check(&v, 8));
    assert_eq!(code, 0);
}

#[test]
fn check9_spec_decode_through_chat_templates() {
    // This project's replay sends chat completions.
    let f = Fixture::sweep();
    f.commit("base");
    f.edit(
        DSPARK,
        "--mem-fraction-static, \"0.8\", --tokenizer-backend, fastokens]",
        "--mem-fraction-static, \"0.82\", --tokenizer-backend, fastokens]",
    );
    f.commit("head");
    let (_, v) = f.verify(&[]);
    assert_pass(&v, 9);
    assert!(check(&v, 9)["reason"].as_str().unwrap().contains("chat completions"));
    // An InferenceX fixed-sequence-length MTP script on raw completions.
    let f = Fixture::inferencex_from_sweep();
    f.commit("base");
    let script = "benchmarks/single_node/fixed_seq_len/dsv41flash_fp4_gb300_mtp.sh";
    let body = "#!/bin/bash\npython3 -m sglang.launch_server --model-path $MODEL --speculative-algorithm DSPARK &\nrun_benchmark_serving --backend vllm --model $MODEL \\\n  --num-prompts $((CONC*10))\n";
    f.write(script, body);
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 9);
    let fs = findings(&v, 9);
    assert_eq!((fs[0].0.as_str(), fs[0].1), (script, Some(3)), "{fs:?}");
    assert!(fs[0].3.contains("drives raw completions"), "{fs:?}");
    f.write(script, &body.replace("--backend vllm", "--backend vllm --use-chat-template"));
    f.commit("fix");
    assert_pass(&f.verify(&[]).1, 9);
}

#[test]
fn check10_no_engine_patches_without_a_waiver() {
    let f = Fixture::sweep();
    f.commit("base");
    f.append_entry(&["dsv3-fp8-h200-sglang-agentic"], 7, "");
    let wf = ".github/workflows/sweep.yml";
    f.write(
        wf,
        "jobs:\n  sweep:\n    steps:\n      - run: git apply patches/sglang-radix.patch\n      - run: sweep run full-sweep-fail-fast\n",
    );
    f.write("patches/sglang-radix.patch", "--- a/x\n+++ b/x\n");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 10);
    let fs = findings(&v, 10);
    assert!(fs.iter().any(|x| x.0 == "patches/sglang-radix.patch" && x.3 == "adds a patch file"), "{fs:?}");
    assert!(fs.iter().any(|x| x.0 == wf && x.1 == Some(4) && x.2 == "- run: git apply patches/sglang-radix.patch"), "{fs:?}");
    assert!(check(&v, 10)["reason"].as_str().unwrap().contains("no docs/waiver/7.md"), "{}", check(&v, 10));
    // The waiver, filed in this PR (number 7 from the new entry's pr-link) and linked in the sign-off.
    f.write("docs/waiver/7.md", "# Waiver for #7\nWhat is patched: the radix cache eviction.\nWhy: the released image cannot run this benchmark because it deadlocks.\nUpstream: https://github.com/sgl-project/sglang/pull/1\nRemoval plan: remove when the upstream fix ships.\n");
    f.commit("waiver");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 10);
    assert!(check(&v, 10)["reason"].as_str().unwrap().contains("known only to the forge"), "{}", check(&v, 10));
    let linked = f.facts("signoff: \"### Additional detail section:\\n- waiver: docs/waiver/7.md\\n\"\n");
    let (code, v) = f.verify(&["--pr-facts", &linked]);
    assert_pass(&v, 10);
    assert_eq!(code, 0);
    // An inline patch (heredoc) of installed engine sources.
    let g = Fixture::inferencex_from_sweep();
    g.commit("base");
    let s = "benchmarks/single_node/agentic/dsv41flash_fp4_gb300_mtp.sh";
    g.write(s, "#!/bin/bash\nSRC=$(python3 -c 'import importlib.util;print(importlib.util.find_spec(\"sglang\").origin)')\npython3 - <<'PY'\nimport pathlib\np = pathlib.Path('/usr/lib/python3/site-packages/sglang/srt/mem_cache/radix_cache.py')\np.write_text(p.read_text().replace('a', 'b'))\nPY\npython3 -m sglang.launch_server --model-path $MODEL\n");
    g.commit("head");
    let (code, v) = g.verify(&[]);
    assert_fail(&v, code, 10);
    assert!(findings(&v, 10).iter().any(|x| x.0 == s && x.1 == Some(3) && x.3.contains("heredoc")), "{:?}", findings(&v, 10));
}

#[test]
fn a_revision_that_does_not_exist_cannot_be_verified() {
    let f = Fixture::sweep();
    f.commit("base");
    let o = sweep(&["verify", "--base", "no-such-branch"], f.root());
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o).1;
    assert!(err.contains("cannot verify") && err.contains("no-such-branch: not a commit"), "{err}");
    let bad = f.facts("signer: a\nsigner_typo: b\n");
    let o = sweep(&["verify", "--base", "base", "--pr-facts", &bad], f.root());
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("signer_typo"), "{}", text(&o).1);
}

// ---- the real InferenceX files ----

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn real_check7_deprecated_models_from_models_md() {
    // This repository's models are not in MODELS.md's deprecations: they pass.
    let f = Fixture::sweep();
    f.commit("base");
    f.append_entry(&["dsv3-fp8-h200-sglang-agentic"], 9, "");
    f.commit("head");
    let models = shared_data().join("inferencex/MODELS.md");
    let (code, v) = f.verify(&["--models", models.to_str().unwrap()]);
    assert_pass(&v, 7);
    assert_eq!(code, 0);
    // A retired model re-enabled through the real master config's glm5.1 entry (retired
    // 2026-07-18; 1k1k deprecated for all since 2026-07-17).
    let f = Fixture::inferencex_real();
    f.commit("base");
    let mut cl = f.read("perf-changelog.yaml");
    cl.push_str("\n- config-keys:\n    - glm5.1-fp8-b200-tilert\n  description:\n    - \"Re-run.\"\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/9999\n");
    f.write("perf-changelog.yaml", &cl);
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 7);
    let fs = findings(&v, 7);
    assert_eq!(fs[0].0, "perf-changelog.yaml");
    assert!(fs[0].3.contains("`glm5.1`") && fs[0].3.contains("MODELS.md:"), "{fs:?}");
    // Before its retirement the same entry was allowed (a scheduled deprecation binds from its date).
    let (_, v) = {
        let o = sweep(&["verify", "--base", "base", "--format", "json", "--review-date", "2026-03-01"], f.root());
        (o.status.code(), serde_json::from_str::<Value>(&text(&o).0).unwrap())
    };
    assert_pass(&v, 7);
    // kimik2.5 in this repository's config: fully retired after 2026-08-06.
    let f = Fixture::sweep();
    f.commit("base");
    f.edit("recipes/master.yaml", "model-prefix: dsv3", "model-prefix: kimik2.5");
    f.commit("head");
    let (code, v) = f.verify(&["--models", models.to_str().unwrap()]);
    assert_fail(&v, code, 7);
    let fs = findings(&v, 7);
    assert_eq!((fs[0].0.as_str(), fs[0].1), ("recipes/master.yaml", Some(f.line_of("recipes/master.yaml", "model-prefix: kimik2.5"))));
    assert!(fs[0].3.contains("`kimik2.5`"), "{fs:?}");
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA)"]
fn real_checks_on_the_inferencex_master_config_and_changelog() {
    // The real changelog's last entry as the PR: every check decides on the real inputs.
    let f = Fixture::inferencex_real();
    let cl = f.read("perf-changelog.yaml");
    let last = cl.rfind("\n- config-keys:").unwrap();
    f.write("perf-changelog.yaml", &cl[..last + 1]);
    f.commit("base");
    f.write("perf-changelog.yaml", &cl);
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert!(code == 0 || code == 1, "{v}");
    assert_eq!(v["checks"].as_array().unwrap().len(), 14);
    assert_pass(&v, 7);
    assert_eq!(status(&v, 12), "N/A");

    // Check 9 on the real dsr1 MTP config: its fixed-sequence-length script on raw completions.
    let f = Fixture::inferencex_real();
    f.commit("base");
    f.edit(
        "configs/nvidia-master.yaml",
        "- { tp: 4, ep: 1, conc-start: 1, conc-end: 32, spec-decoding: mtp }",
        "- { tp: 4, ep: 1, conc-start: 1, conc-end: 64, spec-decoding: mtp }",
    );
    let script = "benchmarks/single_node/fixed_seq_len/dsr1_fp4_b200_mtp.sh";
    f.write(script, "#!/bin/bash\npython3 -m sglang.launch_server --model-path $MODEL --speculative-algorithm EAGLE &\nrun_benchmark_serving --backend vllm --model $MODEL\n");
    f.commit("head");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 9);
    assert!(findings(&v, 9).iter().any(|x| x.0 == script && x.1 == Some(3)), "{:?}", findings(&v, 9));

    // Check 11 on the real qwen3.5 golden curve: thinking_on, 3 speculative tokens → 3.39.
    let f = Fixture::inferencex_real();
    f.commit("base");
    let s = "benchmarks/single_node/agentic/qwen3.5_fp8_h200_mtp.sh";
    let body = |al: &str| {
        format!(
            "#!/bin/bash\nexport SGLANG_SIMULATE_ACC_LEN={al}\nexport SGLANG_SIMULATE_ACC_METHOD=match-expected\npython3 -m sglang.launch_server --model-path $MODEL --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4\n"
        )
    };
    f.write(s, &body("3.39"));
    f.commit("head");
    assert_pass(&f.verify(&[]).1, 11);
    f.write(s, &body("3.5"));
    f.commit("wrong AL");
    let (code, v) = f.verify(&[]);
    assert_fail(&v, code, 11);
    assert!(findings(&v, 11)[0].3.contains("golden AL for qwen3.5-397b-a17b-nvfp4 thinking_on K=3 is 3.39"), "{:?}", findings(&v, 11));

    // Check 5 against the real template: a sign-off copied from it with every item checked.
    let f = Fixture::inferencex_real();
    f.commit("base");
    f.commit("head");
    let tpl = f.read("docs/PR_REVIEW_CHECKLIST.md");
    let block = tpl.split("```").nth(1).unwrap();
    let signed = block.replace("- [ ]", "- [x]");
    let facts = f.facts(&format!("signoff: |\n{}", signed.lines().map(|l| format!("  {l}\n")).collect::<String>()));
    assert_pass(&f.verify(&["--pr-facts", &facts]).1, 5);
    let stale: String = signed.lines().filter(|l| !l.contains("append-only")).map(|l| format!("  {l}\n")).collect();
    let facts = f.facts(&format!("signoff: |\n{stale}"));
    let (code, v) = f.verify(&["--pr-facts", &facts]);
    assert_fail(&v, code, 5);
    assert!(findings(&v, 5)[0].2.contains("append-only"), "{:?}", findings(&v, 5));
}
