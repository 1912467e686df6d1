//! Two inputs that only a hostile peer controls: a chat-completions reply as `sweep eval` reads
//! it, and the file names of a change as `sweep verify` reads them. Their invariants: a reply is
//! read or refused (never a panic, never an excerpt past its bound), and no file name talks
//! `sweep verify` into passing a change that sets a draft precision under simulated acceptance.

use super::targets::Outcome;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

/// A reply body: parsed, then read as the eval reads it.
pub fn run_eval_reply(path: &Path) -> Outcome {
    let bytes = std::fs::read(path).unwrap_or_default();
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else { return Outcome::Refused };
    match harness::eval::reply::reply_text(&v) {
        Ok((text, ..)) => {
            let kept = harness::eval::reply::excerpt_of(text).len();
            if kept > harness::eval::reply::SAMPLE_EXCERPT + 64 {
                return Outcome::Finding(format!("samples.jsonl would keep {kept} bytes of one answer"));
            }
            Outcome::Accepted
        }
        Err(e) if e.to_string().len() > 1024 => Outcome::Finding(format!("a {}-byte error echoes the reply", e.to_string().len())),
        Err(_) => Outcome::Refused,
    }
}

fn git(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=fuzz", "-c", "user.email=fuzz@localhost", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        std::fs::copy(e.path(), to.join(e.file_name()))?;
    }
    Ok(())
}

const DSPARK: &str = "recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml";

/// A change of the repository at `root` that adds a draft-precision flag to the DSpark recipe
/// (Check 11 fails it) and a file named by the mutant's bytes; a third of the inputs also move
/// `recipes/` behind a symbolic link. `sweep verify` must never pass it.
pub fn run_verify_repo(path: &Path, root: &Path) -> Outcome {
    let name: Vec<u8> = std::fs::read(path).unwrap_or_default().into_iter().map(|b| if b == 0 { b'_' } else { b }).collect();
    let rel = Path::new(std::ffi::OsStr::from_bytes(&name));
    let plain = rel.components().all(|c| matches!(c, std::path::Component::Normal(n) if !n.as_bytes().eq_ignore_ascii_case(b".git")));
    if name.is_empty() || !plain {
        return Outcome::Refused;
    }
    let Ok(repo) = tempfile::tempdir() else { return Outcome::Finding("no temporary folder".into()) };
    let r = repo.path();
    let base_ok = copy_dir(&root.join("recipes"), &r.join("recipes")).is_ok()
        && copy_dir(&root.join("golden_al"), &r.join("golden_al")).is_ok()
        && std::fs::copy(root.join("perf-changelog.yaml"), r.join("perf-changelog.yaml")).is_ok()
        && git(r, &["init", "-q"])
        && git(r, &["add", "-A"])
        && git(r, &["commit", "-q", "-m", "base"])
        && git(r, &["tag", "base"]);
    if !base_ok {
        return Outcome::Finding("cannot make the base commit".into());
    }
    let recipe = std::fs::read_to_string(r.join(DSPARK)).unwrap_or_default();
    let hostile = recipe.replacen("--trust-remote-code,", "--trust-remote-code, --speculative-draft-model-quantization, fp8,", 1);
    if hostile == recipe || std::fs::write(r.join(DSPARK), hostile).is_err() {
        return Outcome::Finding("the DSpark recipe has no `--trust-remote-code,` to edit".into());
    }
    let target = r.join(rel);
    let written = target.parent().is_some_and(|p| std::fs::create_dir_all(p).is_ok()) && std::fs::write(&target, "harmless\n").is_ok();
    if !written {
        return Outcome::Refused;
    }
    if name.len() % 3 == 1
        && (std::fs::rename(r.join("recipes"), r.join("staged")).is_err()
            || std::os::unix::fs::symlink("staged", r.join("recipes")).is_err())
    {
        return Outcome::Refused;
    }
    if !(git(r, &["add", "-A"]) && git(r, &["commit", "-q", "-m", "head"])) {
        // Git refuses the name.
        return Outcome::Refused;
    }
    let opts = harness::verify::Options {
        dir: r.to_path_buf(),
        base: "base".into(),
        head: "HEAD".into(),
        run: None,
        facts: None,
        review_date: harness::verify::Date::parse("2026-12-01").expect("a date"),
        models: None,
        thresholds: None,
    };
    match harness::verify::verify(&opts) {
        Ok(report) if report.passed => Outcome::Finding(format!(
            "verify passed a change that sets a draft precision under simulated acceptance, beside a file named {:?}",
            String::from_utf8_lossy(&name)
        )),
        Ok(_) => Outcome::Accepted,
        Err(_) => Outcome::Refused,
    }
}
