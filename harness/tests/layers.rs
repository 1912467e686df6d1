//! The dependency directions of docs/ARCHITECTURE.md, checked on the source: a module may not
//! name a module above it. (Crate boundaries would enforce some of these too; inside one crate
//! the compiler cannot, so this reads the `crate::` paths each file names.) Also the size limit
//! of a source file (functions are held to 80 lines by clippy's `too_many_lines`, clippy.toml).

use std::path::{Path, PathBuf};

fn sources(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// `(file, forbidden text)` for every file under `paths` (files or folders, relative to `crate_dir`)
/// that names one of `forbidden`.
fn violations(crate_dir: &str, paths: &[&str], forbidden: &[&str]) -> Vec<String> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(crate_dir);
    let mut out = Vec::new();
    for p in paths {
        let p = base.join(p);
        assert!(p.exists(), "{} is gone: update this test and docs/ARCHITECTURE.md", p.display());
        // Tests may reach across layers to set a module up.
        for f in sources(&p).into_iter().filter(|f| !f.components().any(|c| c.as_os_str() == "tests") && !f.ends_with("tests.rs")) {
            let text = std::fs::read_to_string(&f).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for bad in forbidden {
                    if code.contains(bad) {
                        out.push(format!("{}:{}: {bad}", f.display(), n + 1));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_engine_core_knows_no_clock_socket_thread_or_tokenizer() {
    // The server and the tokenizers are the `engine-server` crate, which the engine cannot name,
    // and the engine has no async runtime or HTTP stack to call; the standard library's clock,
    // sockets and threads are what Cargo cannot keep out.
    let v = violations("engine/src", &["core"], &["std::time", "std::net", "std::thread", "Instant::now"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn cost_and_profiles_do_not_depend_on_calibration() {
    let v = violations("engine/src", &["cost", "profiles"], &["crate::calibrate"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn results_reports_and_the_gate_do_not_execute() {
    let results = [
        "records.rs",
        "metrics",
        "kv.rs",
        "results.rs",
        "pareto.rs",
        "noise.rs",
        "gate.rs",
        "report",
        "twin.rs",
        "html.rs",
        "store",
        "eval/record.rs",
        "eval/score.rs",
    ];
    // The eval's read side (`eval::record`, `eval::score`) is theirs; its runner and writers are not.
    let above = [
        "crate::run",
        "crate::targets",
        "crate::workload",
        "crate::fit",
        "crate::cmd",
        "crate::trace",
        "crate::plan",
        "engine::",
        "crate::eval::runner",
        "crate::eval::write",
        "super::runner",
        "super::write",
    ];
    let v = violations("harness/src", &results, &above);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn nothing_below_the_cli_depends_on_it() {
    let below = [
        "run",
        "targets",
        "workload",
        "trace",
        "prompt",
        "fit",
        "calibrate",
        "plan",
        "recipe",
        "records.rs",
        "metrics",
        "results.rs",
        "report",
        "gate.rs",
        "noise.rs",
        "twin.rs",
        "verify",
        "store",
        "dashboard",
        "eval",
    ];
    let v = violations("harness/src", &below, &["crate::cmd"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

/// The dashboard reads the store and serves; it never runs a point, a plan or a trace, and the
/// store it reads never names the server.
#[test]
fn the_dashboard_reads_and_never_executes() {
    let above =
        ["crate::run", "crate::targets", "crate::workload", "crate::fit", "crate::trace", "crate::plan", "crate::calibrate", "engine::"];
    let v = violations("harness/src", &["dashboard"], &above);
    assert!(v.is_empty(), "{}", v.join("\n"));
    let v = violations("harness/src", &["store"], &["crate::dashboard", "axum"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn the_verifier_reads_and_never_executes() {
    let v = violations(
        "harness/src",
        &["verify"],
        &["crate::run", "crate::targets", "crate::workload", "crate::fit", "crate::trace", "crate::cmd", "engine::", "tokio"],
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn the_workload_core_knows_no_transport() {
    let v = violations("harness/src", &["workload"], &["crate::targets", "crate::run", "reqwest", "tokio", "std::net", "Instant::now"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn the_evals_questions_prompts_and_scores_know_no_transport() {
    let v = violations(
        "harness/src",
        &["eval/data.rs", "eval/pyrandom.rs", "eval/task.rs", "eval/score.rs", "eval/record.rs"],
        &["crate::targets", "crate::run", "reqwest", "tokio", "std::net", "Instant::now"],
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
}

/// The most lines a Rust file of the workspace may have, unless its header says why it is longer
/// ("Over 600 lines …" in its first 30 lines).
const MAX_FILE_LINES: usize = 600;

#[test]
fn no_source_file_is_over_600_lines_without_saying_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut over = Vec::new();
    for krate in ["engine", "engine-server", "harness"] {
        for f in sources(&root.join(krate)).into_iter().filter(|f| !f.components().any(|c| c.as_os_str() == "target")) {
            let text = std::fs::read_to_string(&f).unwrap();
            let lines = text.lines().count();
            let says_why = text.lines().take(30).any(|l| l.trim_start().starts_with("//") && l.to_lowercase().contains("over 600 lines"));
            if lines > MAX_FILE_LINES && !says_why {
                over.push(format!("{}: {lines} lines", f.strip_prefix(&root).unwrap_or(&f).display()));
            }
        }
    }
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines: split them, or say in the file's header why it is longer (\"Over 600 lines …\"):\n{}",
        over.join("\n")
    );
}
