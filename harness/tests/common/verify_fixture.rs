//! The `sweep verify` fixture: a git repository made here with a base commit and a head commit,
//! the real binary's JSON verdict, and readers of its checks and findings.

use super::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A git repository in a temp dir; the first commit is tagged `base`.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    /// pr-facts files and run directories, outside the repository's tree.
    pub scratch: tempfile::TempDir,
}

impl Fixture {
    /// This repository's recipes, golden AL curves and changelog, committed as the base.
    pub fn sweep() -> Fixture {
        let f = Fixture { dir: repo_copy(), scratch: tempfile::tempdir().unwrap() };
        f.write("thresholds.yaml", "default:\n  gsm8k: 0.90\nmodels:\n  dsv3:\n    gsm8k: 0.91\n");
        f
    }

    /// An InferenceX-layout repository: this repository's master config as
    /// `configs/nvidia-master.yaml`, its golden curves under `golden_al_distribution/`.
    pub fn inferencex_from_sweep() -> Fixture {
        let f = Fixture { dir: tempfile::tempdir().unwrap(), scratch: tempfile::tempdir().unwrap() };
        let root = workspace_root();
        f.write("configs/nvidia-master.yaml", &std::fs::read_to_string(root.join("recipes/master.yaml")).unwrap());
        f.write("perf-changelog.yaml", &std::fs::read_to_string(root.join("perf-changelog.yaml")).unwrap());
        for e in std::fs::read_dir(root.join("golden_al")).unwrap() {
            let e = e.unwrap();
            f.write(&format!("golden_al_distribution/{}", e.file_name().to_string_lossy()), &std::fs::read_to_string(e.path()).unwrap());
        }
        f
    }

    /// The real InferenceX master config, changelog, MODELS.md, thresholds, golden curves and
    /// review checklist in their repository places.
    pub fn inferencex_real() -> Fixture {
        let ix = shared_data().join("inferencex");
        let f = Fixture { dir: tempfile::tempdir().unwrap(), scratch: tempfile::tempdir().unwrap() };
        let copy = |from: &Path, to: &str| f.write(to, &std::fs::read_to_string(from).unwrap());
        copy(&ix.join("nvidia-master.yaml"), "configs/nvidia-master.yaml");
        copy(&ix.join("runners.yaml"), "configs/runners.yaml");
        copy(&ix.join("perf-changelog.yaml"), "perf-changelog.yaml");
        copy(&ix.join("MODELS.md"), "MODELS.md");
        copy(&ix.join("thresholds.yaml"), "utils/evals/thresholds.yaml");
        copy(&ix.join("verifier/PR_REVIEW_CHECKLIST.md"), "docs/PR_REVIEW_CHECKLIST.md");
        for e in std::fs::read_dir(ix.join("golden_al_distribution")).unwrap() {
            let e = e.unwrap();
            copy(&e.path(), &format!("golden_al_distribution/{}", e.file_name().to_string_lossy()));
        }
        f
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    pub fn edit(&self, rel: &str, from: &str, to: &str) {
        edit(&self.path(rel), from, to);
    }

    /// Commits everything; the first commit is tagged `base`.
    pub fn commit(&self, msg: &str) {
        let first = !self.path(".git").exists();
        if first {
            git(self.root(), &["init", "-q"]);
        }
        git(self.root(), &["add", "-A"]);
        git(self.root(), &["commit", "-q", "--allow-empty", "-m", msg]);
        if first {
            git(self.root(), &["tag", "base"]);
        }
    }

    /// Appends a changelog entry for `keys`, linking pull request `pr`.
    pub fn append_entry(&self, keys: &[&str], pr: u32, extra: &str) {
        let mut t = self.read("perf-changelog.yaml");
        t.push_str("\n- config-keys:\n");
        for k in keys {
            t.push_str(&format!("    - {k}\n"));
        }
        t.push_str(&format!("  scenario-type:\n    - agentic-coding\n  description:\n    - \"Test entry.\"\n  pr-link: https://github.com/sweep-project/sweep/pull/{pr}\n{extra}"));
        self.write("perf-changelog.yaml", &t);
    }

    /// `sweep verify --base base` from the repository, JSON output: (exit code, report).
    pub fn verify(&self, extra: &[&str]) -> (i32, Value) {
        let mut a = vec!["verify", "--base", "base", "--format", "json", "--review-date", "2026-12-01"];
        a.extend_from_slice(extra);
        let o = sweep(&a, self.root());
        let (out, err) = text(&o);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"));
        (o.status.code().unwrap_or(-1), v)
    }

    /// The text verdict: (exit code, stdout).
    pub fn verify_text(&self, extra: &[&str]) -> (i32, String) {
        let mut a = vec!["verify", "--base", "base", "--review-date", "2026-12-01"];
        a.extend_from_slice(extra);
        let o = sweep(&a, self.root());
        (o.status.code().unwrap_or(-1), text(&o).0)
    }

    /// The 1-based line of the first line of `rel` containing `needle`.
    pub fn line_of(&self, rel: &str, needle: &str) -> u64 {
        self.read(rel).lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{rel} has no {needle:?}")) as u64 + 1
    }

    /// A pr-facts file in the temp dir (outside the repository's tree).
    pub fn facts(&self, yaml: &str) -> String {
        let n = std::fs::read_dir(self.scratch.path()).unwrap().count();
        let p = self.scratch.path().join(format!("facts-{n}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        p.display().to_string()
    }

    pub fn head_sha(&self) -> String {
        let o = std::process::Command::new("git").args(["rev-parse", "HEAD"]).current_dir(self.root()).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }
}

pub fn check(v: &Value, id: u64) -> &Value {
    v["checks"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap()
}

pub fn status(v: &Value, id: u64) -> String {
    check(v, id)["status"].as_str().unwrap().to_string()
}

/// The findings of check `id` as (file, line, value, message).
pub fn findings(v: &Value, id: u64) -> Vec<(String, Option<u64>, String, String)> {
    check(v, id)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_string(),
                f["line"].as_u64(),
                f["value"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub fn assert_fail(v: &Value, code: i32, id: u64) {
    assert_eq!(status(v, id), "FAIL", "check {id}: {}", serde_json::to_string_pretty(check(v, id)).unwrap());
    assert_eq!(code, 1, "a failing check exits 1");
    assert_eq!(v["verdict"], "REJECTED");
}

pub fn assert_pass(v: &Value, id: u64) {
    assert_eq!(status(v, id), "PASS", "check {id}: {}", serde_json::to_string_pretty(check(v, id)).unwrap());
}

pub const DSPARK: &str = "recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml";
pub const DSV3: &str = "recipes/dsv3-fp8-h200-sglang-agentic.yaml";
