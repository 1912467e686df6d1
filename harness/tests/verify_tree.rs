//! `sweep verify` against changes that hide from a file-by-file reader: file names with control
//! characters, symbolic links on input paths, and edits to files many configs share (golden AL
//! curves, the runner table).

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
