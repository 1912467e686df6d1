//! Shared helpers for the integration tests: the real `sweep` binary and the shared data.
#![allow(dead_code)]

pub mod engine_server;
pub mod verify_fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("harness is in the workspace").to_path_buf()
}

/// `SWEEP_SHARED_DATA` (relative paths are taken from the workspace root). Real-data tests are
/// `#[ignore]`d and run by `.ci/run`; when the data is absent they fail with a plain message.
pub fn shared_data() -> PathBuf {
    let raw = std::env::var("SWEEP_SHARED_DATA").unwrap_or_else(|_| "../shared/data".into());
    let p = PathBuf::from(&raw);
    let p = if p.is_absolute() { p } else { workspace_root().join(p) };
    assert!(p.join("README.md").is_file(), "shared data not found at {} (set SWEEP_SHARED_DATA to the shared/data folder)", p.display());
    p
}

/// A folder's per-request records as AIPerf JSONL text: `profile_export.jsonl.gz` (a run's point
/// folders) or `profile_export.jsonl` (`sweep replay`); empty when there are none.
pub fn export_text(dir: &Path) -> String {
    use std::io::Read;
    if let Ok(f) = std::fs::File::open(dir.join("profile_export.jsonl.gz")) {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(f).read_to_string(&mut s).expect("profile_export.jsonl.gz decompresses");
        return s;
    }
    std::fs::read_to_string(dir.join("profile_export.jsonl")).unwrap_or_default()
}

pub fn sweep(args: &[&str], cwd: &Path) -> Output {
    sweep_command(cwd).args(args).output().expect("run sweep")
}

/// The `sweep` binary run from `cwd`. Run from inside the workspace, it would record its runs in
/// the checkout's own results store (`reports/sweep.db`), where `sweep history` would then show
/// them: there, the tests' runs go to a store under the target folder instead (unless the test
/// names one, with `--store` or `SWEEP_STORE`).
pub fn sweep_command(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sweep"));
    c.current_dir(cwd);
    let inside = |d: &Path| d.canonicalize().ok().zip(workspace_root().canonicalize().ok()).is_some_and(|(d, w)| d.starts_with(w));
    if std::env::var_os("SWEEP_STORE").is_none() && inside(cwd) {
        c.env("SWEEP_STORE", Path::new(env!("CARGO_TARGET_TMPDIR")).join("sweep-tests.db"));
    }
    c
}

pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A copy of the repository's configuration (recipes, golden AL, changelog) in a temp dir.
pub fn repo_copy() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let root = workspace_root();
    for sub in ["recipes", "golden_al"] {
        std::fs::create_dir_all(d.path().join(sub)).unwrap();
        for e in std::fs::read_dir(root.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.path().join(sub).join(e.file_name())).unwrap();
        }
    }
    std::fs::copy(root.join("perf-changelog.yaml"), d.path().join("perf-changelog.yaml")).unwrap();
    d
}

pub fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Replaces `from` (which must occur) in a file.
pub fn edit(path: &Path, from: &str, to: &str) {
    let t = std::fs::read_to_string(path).unwrap();
    assert!(t.contains(from), "{} does not contain {from:?}", path.display());
    std::fs::write(path, t.replacen(from, to, 1)).unwrap();
}

/// `sweep run full-sweep-fail-fast <extra…> --out OUT --root REPO`, run from REPO.
pub fn sweep_run(repo: &Path, out: &Path, extra: &[&str]) -> Output {
    sweep_run_env(repo, out, extra, &[])
}

/// [`sweep_run`] with `env` set for sweep and what it launches.
pub fn sweep_run_env(repo: &Path, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["run", "full-sweep-fail-fast"])
        .args(extra)
        .args(["--out", out.to_str().unwrap(), "--root", repo.to_str().unwrap()])
        .envs(env.iter().copied())
        .current_dir(repo)
        .output()
        .expect("run sweep")
}

/// A run directory's `summary.json`.
pub fn summary_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("summary.json")).expect("summary.json parses")
}

/// `SWEEP_TEST_POSTGRES` with a fresh schema `t_<tag>_<pid>` as the search path, or `None` (and a
/// notice) where no PostgreSQL is configured (`scripts/pg/start.sh` starts one).
pub fn pg_store(tag: &str) -> Option<String> {
    let Some(url) = std::env::var("SWEEP_TEST_POSTGRES").ok().filter(|u| !u.is_empty()) else {
        eprintln!("note: SWEEP_TEST_POSTGRES is not set: the PostgreSQL part of `{tag}` is skipped (scripts/pg/start.sh starts a server)");
        return None;
    };
    let schema = format!("t_{tag}_{}", std::process::id());
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| panic!("SWEEP_TEST_POSTGRES={url}: {e}"));
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")).unwrap();
    Some(format!("{url}{}options=-csearch_path%3D{schema}", if url.contains('?') { '&' } else { '?' }))
}

/// `sweep run` of the DeepSeek-V3 H200 config (5 points, a few seconds on the virtual clock).
pub fn run_args<'a>(out: &'a str, seed: &'a str, store: Option<&'a str>) -> Vec<&'a str> {
    let root = Box::leak(workspace_root().to_string_lossy().into_owned().into_boxed_str());
    let mut a = vec![
        "run",
        "full-sweep-fail-fast",
        "--configs",
        "dsv3-*",
        "--duration",
        "60",
        "--seed-replicates",
        "0",
        "--seed",
        seed,
        "--out",
        out,
        "--root",
        root,
    ];
    match store {
        Some(s) => a.extend(["--store", s]),
        None => a.push("--no-store"),
    }
    a
}
