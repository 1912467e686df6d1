//! What a change can hide from a verifier that reads files one by one: entries that are not
//! plain files (a symbolic link `sweep plan` follows and `git cat-file` does not, a submodule),
//! names that forge other names (control characters, bytes that are not UTF-8), and edits to
//! files many configs share (golden AL curves, the runner table) that change what those configs
//! run without touching them. Check 13 reports the first two; the third makes every config it
//! reaches a changed config, and a golden value that changes is a Check 11 finding.

use super::git::Tree;
use super::snapshot::Snapshot;
use super::{Check, Finding, scan};
use crate::golden_al::{GoldenAl, fmt_al, slug_for_prefix};
use std::collections::{BTreeMap, BTreeSet};

/// Paths `sweep plan`, `sweep run` or a check reads (either layout), or the folders holding them.
const INPUT_ROOTS: [&str; 18] = [
    "recipes",
    "golden_al",
    "golden_al_distribution",
    "configs",
    ".github/configs",
    ".github/workflows",
    ".github/CODEOWNERS",
    "benchmarks",
    "runners",
    "utils",
    "evals",
    "perf-changelog.yaml",
    "MODELS.md",
    "thresholds.yaml",
    "CODEOWNERS",
    "docs/CODEOWNERS",
    "docs/PR_REVIEW_CHECKLIST.md",
    "docs/waiver",
];

/// Whether `path` is an input, a folder of inputs, or a folder above one (a link at `docs`
/// would carry `docs/waiver` with it).
fn is_input(path: &str) -> bool {
    INPUT_ROOTS.iter().any(|r| path == *r || path.starts_with(&format!("{r}/")) || r.starts_with(&format!("{path}/")))
}

/// Check 13: every entry the change adds or changes is a plain file with a plain name, and no
/// input path is a link or a submodule.
pub fn tree_check(base: &Tree, head: &Tree) -> Check {
    let mut bad = Vec::new();
    for (path, e) in &head.entries {
        let changed = base.entries.get(path) != Some(e);
        if changed && (!e.utf8 || path.chars().any(char::is_control)) {
            bad.push(Finding::new(
                crate::out::shown(path).into_owned(),
                None,
                &e.oid,
                "a file name with a control character or bytes that are not UTF-8: it can pass for another name in the tools that read the change; rename it",
            ));
        }
        let what = if e.is_symlink() {
            "a symbolic link"
        } else if e.is_submodule() {
            "a submodule"
        } else {
            continue;
        };
        if changed || is_input(path) {
            bad.push(Finding::new(
                crate::out::shown(path).into_owned(),
                None,
                format!("mode {}", e.mode),
                format!(
                    "{what}: `sweep plan` and `sweep run` would read through it what this verification cannot see; commit the files themselves"
                ),
            ));
        }
    }
    let n = head.entries.len();
    Check::from_findings(13, bad, format!("{n} entries: plain files with plain names, no link or submodule on an input path"))
}

/// (slug, thinking mode, K) → (AL, file) over every curve of a set.
fn golden_values(g: Option<&GoldenAl>) -> BTreeMap<(String, Option<String>, u32), (f64, String)> {
    let mut out = BTreeMap::new();
    for f in g.iter().flat_map(|g| &g.files) {
        for (slug, c) in &f.curves {
            for (mode, ks) in &c.modes {
                for (k, al) in ks {
                    out.insert((slug.clone(), mode.clone(), *k), (*al, f.path.display().to_string()));
                }
            }
        }
    }
    out
}

/// Configs a shared file reaches, and the golden values the change alters.
pub struct SharedChanges {
    /// Config key → why it counts as changed.
    pub keys: BTreeMap<String, String>,
    /// Golden values changed or removed (Check 11 findings).
    pub golden: Vec<Finding>,
}

/// Configs whose effective environment changes through a shared file: a golden AL value their
/// model injects, or their runner's nodes or hardware.
pub fn shared_changes(base: &Snapshot, head: &Snapshot) -> SharedChanges {
    let (old, new) = (golden_values(base.golden.as_ref()), golden_values(head.golden.as_ref()));
    let mut slugs: BTreeSet<&str> = BTreeSet::new();
    let mut moved = Vec::new();
    for ((slug, mode, k), (al, file)) in &old {
        let now = new.get(&(slug.clone(), mode.clone(), *k));
        if now.map(|(a, _)| (a - al).abs() > 1e-12) != Some(false) {
            slugs.insert(slug);
            moved.push((slug.clone(), mode.clone(), *k, *al, now.map(|(a, f)| (*a, f.clone())), file.clone()));
        }
    }
    let mut keys = BTreeMap::new();
    for e in &head.master.entries {
        let key = &e.key;
        let drafts = scan::is_spec(e) || head.recipes.get(key).is_some_and(|r| r.simulated_acceptance.is_some());
        if drafts && e.has_agentic && slugs.contains(slug_for_prefix(&e.model_prefix)) {
            keys.insert(key.clone(), format!("its golden AL curve ({}) changes", slug_for_prefix(&e.model_prefix)));
        }
        let nodes =
            |s: &Snapshot| s.runners.as_ref().map(|r| (r.labels.get(&e.runner).cloned(), r.hardware.get(&scan::sku(&e.runner)).cloned()));
        if base.master.get(key).is_some() && nodes(base) != nodes(head) {
            keys.entry(key.clone()).or_insert_with(|| format!("its runner `{}` changes in the runner table", e.runner));
        }
    }
    let golden = moved
        .into_iter()
        .map(|(slug, mode, k, al, now, file)| {
            let reached: Vec<&String> = keys.iter().filter(|(_, why)| why.contains(&format!("({slug})"))).map(|(k, _)| k).collect();
            let what = format!("{slug}{} K={k}", mode.as_deref().map(|m| format!(" {m}")).unwrap_or_default());
            let (value, change) = match &now {
                Some((a, _)) => (format!("{} → {}", fmt_al(al), fmt_al(*a)), format!("changes {} → {}", fmt_al(al), fmt_al(*a))),
                None => (fmt_al(al), "is removed".to_string()),
            };
            Finding::new(
                now.map(|(_, f)| f).unwrap_or(file),
                None,
                value,
                format!(
                    "the golden AL for {what} {change}, and with it the simulated acceptance of {} config(s){}: a golden curve changes only in its own reviewed pull request (or with a Check 11 exception in pr-facts)",
                    reached.len(),
                    if reached.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", reached.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "))
                    }
                ),
            )
        })
        .collect();
    SharedChanges { keys, golden }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_paths_and_the_folders_above_them() {
        assert!(is_input("recipes"));
        assert!(is_input("recipes/x.yaml"));
        assert!(is_input(".github"));
        assert!(is_input("docs/waiver/a.md"));
        assert!(!is_input("src/main.rs"));
        assert!(!is_input("recipes-old"));
        assert_eq!(crate::out::shown("a\nb\u{1b}"), "a\\nb\\u{1b}");
    }
}
