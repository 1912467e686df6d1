//! The layers of docs/ARCHITECTURE.md. Cargo refuses a cycle between crates, but not an edge that
//! points the wrong way without closing one (a report crate that starts naming the executor):
//! [`the_crate_graph_is_the_layer_diagram`] holds every crate's dependencies to the diagram.
//! What Cargo cannot see at all is checked on the source text: the standard library's clock,
//! sockets and threads in the sans-I/O cores, and the engine's types where results only read
//! them. Also the size limit of a source file (functions are held to 80 lines by clippy's
//! `too_many_lines`, clippy.toml).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

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

/// `(file, forbidden text)` for every file under `paths` (files or folders, relative to `dir`)
/// that names one of `forbidden`, tests apart.
fn violations(dir: &str, paths: &[&str], forbidden: &[&str]) -> Vec<String> {
    let base = root().join(dir);
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

/// Every crate of the workspace, with the workspace crates it may depend on (normal dependencies;
/// tests may use the made-up records of `sweep-results`'s `test-support`). Read from the bottom
/// up: nothing names a crate above it; nothing below the binary names it; what reads records
/// (results, report, store, dashboard, verify) names nothing that executes, the engine included.
const LAYERS: &[(&str, &[&str])] = &[
    ("input-limits", &[]),
    ("engine", &["input-limits"]),
    ("engine-server", &["engine"]),
    ("sweep-inputs", &["input-limits"]),
    ("sweep-results", &["sweep-inputs"]),
    ("sweep-report", &["sweep-inputs", "sweep-results"]),
    ("sweep-store", &["sweep-inputs", "sweep-results"]),
    ("sweep-dashboard", &["sweep-inputs", "sweep-results", "sweep-store"]),
    ("sweep-verify", &["sweep-inputs", "sweep-results"]),
    ("sweep-traces", &["sweep-inputs", "sweep-results", "engine-server"]),
    ("sweep-exec", &["sweep-inputs", "sweep-results", "sweep-traces", "engine", "engine-server"]),
    (
        "harness",
        &[
            "sweep-inputs",
            "sweep-results",
            "sweep-report",
            "sweep-store",
            "sweep-dashboard",
            "sweep-verify",
            "sweep-traces",
            "sweep-exec",
            "engine",
            "engine-server",
        ],
    ),
];

/// The workspace crates named in the `[dependencies]` table of `krate`'s manifest.
fn workspace_deps(krate: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
    let names: Vec<&str> = LAYERS.iter().map(|(n, _)| *n).collect();
    let mut section = "";
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" {
            let name = line.split(['.', ' ', '=']).next().unwrap_or("");
            if names.contains(&name) {
                out.push(name.to_string());
            }
        }
    }
    out
}

#[test]
fn the_crate_graph_is_the_layer_diagram() {
    let members = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let mut wrong = Vec::new();
    for (krate, allowed) in LAYERS {
        assert!(members.contains(&format!("\"{krate}\"")), "{krate} is not a workspace member: update LAYERS");
        for dep in workspace_deps(krate) {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!("{krate} depends on {dep}"));
            }
        }
    }
    // Every member is placed in the diagram.
    for dir in std::fs::read_dir(root()).unwrap().map(|e| e.unwrap().path()) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if dir.join("Cargo.toml").exists() && dir != root() && !LAYERS.iter().any(|(n, _)| *n == name) {
            wrong.push(format!("{name} is not in LAYERS"));
        }
    }
    assert!(wrong.is_empty(), "edges the layer diagram (docs/ARCHITECTURE.md) does not have:\n{}", wrong.join("\n"));
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
fn the_workload_core_and_the_evals_questions_know_no_clock_or_socket() {
    // Neither crate has an async runtime or HTTP client to call (Cargo keeps that); the standard
    // library's are what it cannot keep out.
    let forbidden = ["std::net", "Instant::now", "SystemTime::now"];
    let v = violations("sweep-traces/src", &["workload"], &forbidden);
    assert!(v.is_empty(), "{}", v.join("\n"));
    let v = violations(
        "sweep-results/src",
        &["eval/data.rs", "eval/pyrandom.rs", "eval/task.rs", "eval/score.rs", "eval/record.rs"],
        &forbidden,
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
}

/// The most lines a Rust file of the workspace may have, unless its header says why it is longer
/// ("Over 600 lines …" in its first 30 lines).
const MAX_FILE_LINES: usize = 600;

#[test]
fn no_source_file_is_over_600_lines_without_saying_why() {
    let root = root();
    let mut over = Vec::new();
    for (krate, _) in LAYERS {
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
