//! `sweep verify`: InferenceX's pull-request verifier (Checks 0–12 of
//! `codeowner-signoff-verify`, `docs/PR_REVIEW_CHECKLIST.md`) decided from a repository's base and
//! head revisions, a run's artifacts and, for what only the forge knows, a pr-facts file. Each
//! check is PASS, FAIL or N/A with a one-line reason and findings naming file, line and value;
//! N/A counts as a pass, as in the verifier. `docs/verify.md` says what decides each check.

mod acceptance;
mod append_only;
pub mod artifacts;
mod checks_forge;
mod codeowners;
pub mod date;
mod evals;
pub mod facts;
mod gather;
pub mod git;
mod images;
mod models;
pub mod output;
mod scan;
mod shared;
mod snapshot;

pub use artifacts::RunArtifacts;
pub use date::Date;
pub use facts::PrFacts;

use crate::changelog::Entry as ClEntry;
use crate::plan::matrix::Row;
use crate::problem::Problems;
use git::{AddedLine, FileChange, Git};
use serde::Serialize;
use snapshot::{Layout, Snapshot, TextFile};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The verifier's checks, by number: the short names its verdict rows use.
pub const CHECK_NAMES: [&str; 14] = [
    "CODEOWNER sign-off",
    "Passing sweep + evals",
    "Evals",
    "Recipe",
    "Reuse command",
    "Checklist template",
    "Upstream images",
    "Deprecated models",
    "Architecture hacks",
    "Chat templates",
    "Engine patches",
    "Golden acceptance length",
    "Append-only",
    "Repository tree",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    #[serde(rename = "PASS")]
    Pass,
    #[serde(rename = "FAIL")]
    Fail,
    #[serde(rename = "N/A")]
    NotApplicable,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::NotApplicable => "N/A",
        }
    }
}

/// One offending (or, for a pass, supporting) fact: where it is and what it says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub value: String,
    pub message: String,
    /// The points one finding covers, when the same cause shows at several.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<String>,
}

impl Finding {
    pub fn new(file: impl Into<String>, line: Option<usize>, value: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding { file: file.into(), line, value: value.into(), message: message.into(), points: Vec::new() }
    }

    /// `file:line`, or the file alone.
    pub fn place(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub id: u8,
    pub name: &'static str,
    pub status: Status,
    pub reason: String,
    pub findings: Vec<Finding>,
}

impl Check {
    pub fn pass(id: u8, reason: impl Into<String>) -> Check {
        Check { id, name: CHECK_NAMES[id as usize], status: Status::Pass, reason: reason.into(), findings: Vec::new() }
    }
    pub fn na(id: u8, reason: impl Into<String>) -> Check {
        Check { id, name: CHECK_NAMES[id as usize], status: Status::NotApplicable, reason: reason.into(), findings: Vec::new() }
    }
    /// A failure: the root issue and the findings that show it (one per distinct cause).
    pub fn fail(id: u8, reason: impl Into<String>, findings: Vec<Finding>) -> Check {
        Check { id, name: CHECK_NAMES[id as usize], status: Status::Fail, reason: reason.into(), findings: merge_points(findings) }
    }
    /// PASS with `ok`, or FAIL with the findings (their messages joined as the reason).
    pub fn from_findings(id: u8, findings: Vec<Finding>, ok: impl Into<String>) -> Check {
        if findings.is_empty() {
            return Check::pass(id, ok);
        }
        let findings = merge_points(findings);
        let reason = summarise(&findings);
        Check { id, name: CHECK_NAMES[id as usize], status: Status::Fail, reason, findings }
    }
}

/// Whether `s` names a point: `<key> <arm…> c<N>`.
fn is_point(s: &str) -> bool {
    s.contains(' ')
        && s.rsplit(' ').next().and_then(|w| w.strip_prefix('c')).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Findings that say the same thing about several points (the point named at the start of the
/// message, or as the value) become one, naming the points: a recipe-wide cause is one line, not
/// one per point.
pub fn merge_points(findings: Vec<Finding>) -> Vec<Finding> {
    // (finding, the rest of its message, whether the point is its value)
    let mut groups: Vec<(Finding, String, bool)> = Vec::new();
    for f in findings {
        if !f.points.is_empty() {
            groups.push((f, String::new(), false));
            continue;
        }
        let (point, rest, in_value) = match f.message.split_once(": ").filter(|(l, _)| is_point(l)) {
            Some((l, r)) => (l.to_string(), r.to_string(), f.value == l),
            None if is_point(&f.value) => (f.value.clone(), f.message.clone(), true),
            None => {
                groups.push((f, String::new(), false));
                continue;
            }
        };
        let same = groups
            .iter_mut()
            .find(|(o, r, v)| !o.points.is_empty() && *r == rest && *v == in_value && o.file == f.file && (in_value || o.value == f.value));
        match same {
            Some((o, _, _)) => o.points.push(point),
            None => groups.push((Finding { points: vec![point], ..f }, rest, in_value)),
        }
    }
    groups
        .into_iter()
        .map(|(mut f, rest, in_value)| {
            if rest.is_empty() {
                // Passed through as it came.
            } else if f.points.len() > 1 {
                let who = compact(&f.points);
                f.message = format!("{who} ({} points): {rest}", f.points.len());
                if in_value && f.value == f.points[0] {
                    f.value = who;
                }
            } else {
                f.points.clear();
            }
            f
        })
        .collect()
}

/// `key arm c1/c4, arm2 c16` from point labels `key arm cN` (the key once when all share it).
fn compact(points: &[String]) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for p in points {
        let (head, conc) = p.rsplit_once(' ').unwrap_or(("", p));
        match groups.iter_mut().find(|(h, _)| h == head) {
            Some((_, cs)) => cs.push(conc.to_string()),
            None => groups.push((head.to_string(), vec![conc.to_string()])),
        }
    }
    let key = groups[0].0.split(' ').next().unwrap_or_default().to_string();
    let one_key = groups.iter().all(|(h, _)| h.split(' ').next() == Some(key.as_str()) && h.len() > key.len());
    let parts: Vec<String> =
        groups.iter().map(|(h, cs)| format!("{} {}", if one_key { &h[key.len() + 1..] } else { h.as_str() }, cs.join("/"))).collect();
    if one_key { format!("{key} {}", parts.join(", ")) } else { parts.join(", ") }
}

/// The reason of a failing check: its first findings, each with where it is, then how many more.
pub fn summarise(findings: &[Finding]) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = findings.iter().take(SHOWN).map(|f| format!("{} ({})", f.message, f.place())).collect();
    if findings.len() > SHOWN {
        parts.push(format!("+{} more (--format json lists all)", findings.len() - SHOWN));
    }
    parts.join("; ")
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub base: String,
    pub head: String,
    pub review_date: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    pub passed: bool,
    pub verdict: &'static str,
    pub checks: Vec<Check>,
}

/// What to verify.
pub struct Options {
    /// A folder inside the repository.
    pub dir: PathBuf,
    pub base: String,
    pub head: String,
    pub run: Option<PathBuf>,
    pub facts: Option<PrFacts>,
    /// The review date (the verifier's `date -u +%F`).
    pub review_date: Date,
    /// `MODELS.md` when the base revision has none.
    pub models: Option<PathBuf>,
    /// `thresholds.yaml` when the base revision has none.
    pub thresholds: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error(transparent)]
    Artifacts(#[from] artifacts::ArtifactError),
    #[error("{0}")]
    Input(Problems),
}

/// Everything the checks read, loaded once.
pub(crate) struct Ctx<'a> {
    pub base: Snapshot,
    pub head: Snapshot,
    pub changes: Vec<FileChange>,
    pub added: Vec<AddedLine>,
    /// The commits the head adds to the base, newest first.
    pub commits: Vec<String>,
    /// Master-config keys the head adds or changes (or whose serving recipe it changes).
    pub changed_keys: BTreeSet<String>,
    /// Changelog entries the head appends (or why the changelog is not a valid append).
    pub appended: Result<Vec<ClEntry>, Problems>,
    /// The changed keys and the keys the appended entries select: what the pull request submits.
    pub submitted: BTreeSet<String>,
    /// The eval rows the appended entries select (as `sweep plan` selects them).
    pub eval_rows: Vec<Row>,
    pub facts: Option<&'a PrFacts>,
    pub run: Option<&'a RunArtifacts>,
    pub date: Date,
    /// The pull request's number: the pr-facts' or the appended entries' `pr-link`.
    pub pr_number: Option<u64>,
    pub models: Option<TextFile>,
    pub thresholds: Option<(String, crate::gate::Thresholds)>,
    /// Head texts of the changed launch files, the waivers and the launch scripts of changed
    /// configs.
    pub head_texts: std::collections::BTreeMap<String, String>,
    /// Golden AL values the change alters or removes (Check 11 findings).
    pub golden_changes: Vec<Finding>,
}

impl Ctx<'_> {
    /// The added lines of files for which `keep` holds.
    pub fn added_in(&self, keep: impl Fn(&str) -> bool) -> impl Iterator<Item = &AddedLine> {
        self.added.iter().filter(move |a| keep(&a.file))
    }

    /// Files whose contents can change what a benchmark runs (launch scripts, configs, recipes,
    /// workflows); documentation and the changelog cannot.
    pub fn benchmark_affecting(&self, path: &str) -> bool {
        let top = |p: &str| path.starts_with(p);
        match self.head.layout {
            Layout::Sweep => top("recipes/") || top("golden_al/") || top(".github/workflows/"),
            Layout::InferenceX => {
                (top("benchmarks/")
                    || top("configs/")
                    || top(".github/configs/")
                    || top(".github/workflows/")
                    || top("runners/")
                    || top("utils/"))
                    && !path.ends_with(".md")
                    && !top("utils/evals/")
                    && !top("benchmarks/single_node/speedbench/")
            }
        }
    }

    /// The line of `field` of a master entry at the head (else the entry's own line).
    pub fn master_line(&self, key: &str, field: &str) -> (String, Option<usize>) {
        let e = self.head.master.get(key);
        let file = e.map(|e| e.file.display().to_string()).unwrap_or_default();
        let line = self.head.master_docs.iter().find(|d| d.file.display().to_string() == file).and_then(|d| {
            let p = crate::yaml::YPath::root().key(key);
            d.loc.line(&p.key(field)).or_else(|| d.loc.line(&p))
        });
        (file, line.or(e.and_then(|e| e.line)))
    }
}

/// Runs every check: gathers what they read (git, the run, the input files) into a [`Ctx`], then
/// decides each check from it alone.
pub fn verify(opts: &Options) -> Result<Report, VerifyError> {
    let git = Git::open(&opts.dir)?;
    let revs = gather::Revisions::gather(&git, opts)?;
    let run = opts.run.as_deref().map(RunArtifacts::load).transpose()?;
    let ctx = Ctx::gather(&git, opts, revs, run.as_ref())?;
    Ok(decide(&ctx, opts))
}

/// The report: every check decided from `ctx`, and the verdict.
fn decide(ctx: &Ctx, opts: &Options) -> Report {
    let checks = vec![
        checks_forge::codeowners(ctx),
        checks_forge::sweep_ran(ctx),
        evals::check(ctx),
        checks_forge::recipe(ctx),
        checks_forge::reuse(ctx),
        checks_forge::checklist(ctx),
        images::check(ctx),
        models::check(ctx),
        scan::architecture(ctx),
        scan::chat_templates(ctx),
        scan::engine_patches(ctx),
        acceptance::check(ctx),
        append_only::check(ctx),
        shared::tree_check(&ctx.base.tree, &ctx.head.tree),
    ];
    let passed = checks.iter().all(|c| c.status != Status::Fail);
    Report {
        base: ctx.base.rev.clone(),
        head: ctx.head.rev.clone(),
        review_date: opts.review_date.to_string(),
        signer: ctx.facts.and_then(|f| f.signer.clone()),
        passed,
        verdict: if passed { "PASS" } else { "REJECTED" },
        checks,
    }
}
