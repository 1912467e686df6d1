//! Gathering what the checks read into a [`Ctx`]: the pull request's revisions and diff from git,
//! what it submits (derived from the revisions alone), and the files that decide it — in the order
//! `verify` has always read them, so the first input that fails is the one reported.

use super::git::{AddedLine, FileChange, Git};
use super::snapshot::{Layout, Snapshot, TextFile};
use super::{Ctx, Finding, Options, PrFacts, RunArtifacts, VerifyError, scan, shared};
use crate::changelog::{self, Entry as ClEntry};
use crate::plan::matrix::Row;
use crate::plan::{Inputs, Labels};
use crate::problem::{Problem, Problems};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What git says of the pull request: both revisions' inputs and the diff between them.
pub(super) struct Revisions {
    pub base: Snapshot,
    pub head: Snapshot,
    pub changes: Vec<FileChange>,
    pub added: Vec<AddedLine>,
    /// The commits the head adds to the base, newest first.
    pub commits: Vec<String>,
}

impl Revisions {
    /// Reads the head and its fork point from the base: the pull request's diff starts there
    /// (`git diff base...head`).
    pub fn gather(git: &Git, opts: &Options) -> Result<Revisions, VerifyError> {
        let head_rev = git.resolve(&opts.head)?;
        let base_given = git.resolve(&opts.base)?;
        let base_rev = git.merge_base(&base_given, &head_rev)?;
        let base = Snapshot::load(git, &base_rev)?;
        let head = Snapshot::load(git, &head_rev)?;
        let changes = git.name_status(&base_rev, &head_rev)?;
        let added = git.added_lines(&base_rev, &head_rev)?;
        let commits = git.commits(&base_rev, &head_rev)?;
        Ok(Revisions { base, head, changes, added, commits })
    }
}

/// What the pull request submits, derived from the two revisions alone.
struct Submission {
    /// Master-config keys the head adds or changes (or whose serving recipe or shared file it
    /// changes).
    changed_keys: BTreeSet<String>,
    /// Golden AL values the change alters or removes (Check 11 findings).
    golden_changes: Vec<Finding>,
    /// Changelog entries the head appends (or why the changelog is not a valid append).
    appended: Result<Vec<ClEntry>, Problems>,
    /// The changed keys and the keys the appended entries select.
    submitted: BTreeSet<String>,
}

impl Submission {
    fn derive(base: &Snapshot, head: &Snapshot) -> Submission {
        // Master entries added or changed (their YAML as written, comments aside), and configs
        // whose serving recipe changed.
        let mut changed_keys: BTreeSet<String> =
            head.master_values.iter().filter(|(k, v)| base.master_values.get(*k) != Some(*v)).map(|(k, _)| k.clone()).collect();
        for (k, v) in &head.recipe_values {
            if base.recipe_values.get(k) != Some(v) && head.master.get(k).is_some() {
                changed_keys.insert(k.clone());
            }
        }
        // …and configs a shared file reaches (a golden AL curve, the runner table).
        let shared = shared::shared_changes(base, head);
        changed_keys.extend(shared.keys.keys().cloned());
        let appended = match (&base.changelog, &head.changelog) {
            (Some(b), Some(h)) => changelog::check_append(b, h).map(|d| d.appended),
            (None, Some(h)) => Ok(h.entries.clone()),
            _ => Ok(Vec::new()),
        };
        let mut submitted = changed_keys.clone();
        for e in appended.iter().flatten() {
            for pat in &e.config_keys {
                submitted.extend(changelog::resolve_pattern(pat, head.master.keys()));
            }
        }
        Submission { changed_keys, golden_changes: shared.golden, appended, submitted }
    }
}

impl<'a> Ctx<'a> {
    /// Everything the checks read: the revisions, what the pull request submits, the eval rows it
    /// selects, and the files that decide it (`MODELS.md`, thresholds, the changed launch files).
    pub(super) fn gather(git: &Git, opts: &'a Options, revs: Revisions, run: Option<&'a RunArtifacts>) -> Result<Ctx<'a>, VerifyError> {
        let Revisions { base, head, changes, added, commits } = revs;
        let sub = Submission::derive(&base, &head);
        let facts = opts.facts.as_ref();
        let labels = sweep_labels(facts)?;
        let eval_rows = selected_eval_rows(&sub.appended, &base, &head, &labels);
        let pr_number = facts.and_then(|f| f.number).or_else(|| changelog_pr_number(&sub.appended));
        let models = models_file(&base, &head, opts)?;
        let thresholds = thresholds_file(&base, &head, opts)?;
        let head_texts = read_head_texts(git, &head, &changes, &sub.changed_keys)?;
        Ok(Ctx {
            head_texts,
            golden_changes: sub.golden_changes,
            base,
            head,
            changes,
            added,
            commits,
            changed_keys: sub.changed_keys,
            appended: sub.appended,
            submitted: sub.submitted,
            eval_rows,
            facts,
            run,
            date: opts.review_date,
            pr_number,
            models,
            thresholds,
        })
    }
}

/// The labels that select eval rows as the sweep did; PR labels that are not sweep labels are
/// left out, and a full sweep is assumed when no primary label is given.
fn sweep_labels(facts: Option<&PrFacts>) -> Result<Labels, VerifyError> {
    let known = |w: &str| crate::plan::labels::PRIMARY.iter().any(|(n, _)| *n == w) || crate::plan::labels::MODIFIERS.contains(&w);
    let mut words: Vec<String> = facts.map(|f| f.labels.iter().filter(|l| known(l)).cloned().collect()).unwrap_or_default();
    if !words.iter().any(|w| crate::plan::labels::PRIMARY.iter().any(|(n, _)| n == w)) {
        words.insert(0, "full-sweep-enabled".into());
    }
    Labels::parse(&words).map_err(|m| {
        VerifyError::Input(Problems::one(Problem::new(
            Path::new("pr-facts"),
            None,
            "labels",
            m.to_string(),
            "keep one primary sweep label",
        )))
    })
}

/// The eval rows the appended entries select (as `sweep plan` selects them).
fn selected_eval_rows(appended: &Result<Vec<ClEntry>, Problems>, base: &Snapshot, head: &Snapshot, labels: &Labels) -> Vec<Row> {
    match (appended, &head.changelog) {
        (Ok(app), Some(cl)) if !app.is_empty() => {
            let inputs =
                Inputs { master: head.master.clone(), runners: head.runners.clone(), golden: head.golden.clone(), changelog: cl.clone() };
            let base_master = app.iter().any(|e| e.append_only).then_some(&base.master);
            crate::plan::selected_rows(&inputs, app, base_master, labels).map(|(_, evals)| evals).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// The pull request's number when the appended entries' `pr-link`s all name the same one.
fn changelog_pr_number(appended: &Result<Vec<ClEntry>, Problems>) -> Option<u64> {
    let nums: BTreeSet<u64> = appended.iter().flatten().filter_map(|e| pr_number_of(&e.pr_link)).collect();
    (nums.len() == 1).then(|| *nums.iter().next().expect("one number"))
}

/// The number at the end of a `…/pull/<n>` link.
fn pr_number_of(link: &str) -> Option<u64> {
    link.trim_end_matches('/').rsplit_once("/pull/").and_then(|(_, n)| n.parse().ok())
}

/// `MODELS.md`: the base revision's, else `--models`, else the head's.
fn models_file(base: &Snapshot, head: &Snapshot, opts: &Options) -> Result<Option<TextFile>, VerifyError> {
    Ok(match (&base.models_md, &opts.models) {
        (Some(m), _) => Some(m.clone()),
        (None, Some(p)) => {
            // Read within the input limits every YAML input has (a device or a huge file stops there).
            let bytes = crate::yaml::read_bytes(p).map_err(VerifyError::Input)?;
            let text = String::from_utf8(bytes).map_err(|e| VerifyError::Input(Problems::not_utf8(p, e.as_bytes(), &e.utf8_error())))?;
            Some(TextFile { path: p.display().to_string(), text })
        }
        _ => head.models_md.clone(),
    })
}

/// The eval thresholds, with the file they come from: the base revision's, else `--thresholds`,
/// else the head's.
fn thresholds_file(base: &Snapshot, head: &Snapshot, opts: &Options) -> Result<Option<(String, crate::gate::Thresholds)>, VerifyError> {
    Ok(match (&base.thresholds, &opts.thresholds) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(p)) => Some((
            p.display().to_string(),
            crate::gate::Thresholds::load(p).map_err(|m| {
                VerifyError::Input(Problems::one(Problem::new(
                    p,
                    None,
                    "",
                    m.to_string(),
                    "fix the thresholds file (format: docs/verify.md)",
                )))
            })?,
        )),
        _ => head.thresholds.clone(),
    })
}

/// Head texts of the changed launch files, the waivers and workflows, and (InferenceX) the
/// launch scripts of changed configs.
fn read_head_texts(
    git: &Git,
    head: &Snapshot,
    changes: &[FileChange],
    changed_keys: &BTreeSet<String>,
) -> Result<BTreeMap<String, String>, VerifyError> {
    let mut wanted: Vec<String> = changes
        .iter()
        .filter(|c| c.status != 'D')
        .filter(|c| c.path.starts_with("benchmarks/") || c.path.starts_with("docs/waiver/") || c.path.starts_with(".github/workflows/"))
        .map(|c| c.path.clone())
        .collect();
    if head.layout == Layout::InferenceX {
        for k in changed_keys {
            if let Some(e) = head.master.get(k) {
                let spec = scan::is_spec(e);
                wanted.extend(scan::scripts_of(&head.files, e, true, spec));
                wanted.extend(scan::scripts_of(&head.files, e, false, spec));
            }
        }
    }
    wanted.sort();
    wanted.dedup();
    Ok(git.read_many(&head.tree, &wanted)?.into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned())).collect())
}
