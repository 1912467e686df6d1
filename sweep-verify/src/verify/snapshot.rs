//! A repository's inputs at one revision, read from git: the master config(s), serving recipes,
//! runners, changelog, golden AL curves, `MODELS.md`, eval thresholds, CODEOWNERS, the review
//! checklist and the waivers. Two layouts are understood: this project's (`recipes/master.yaml`,
//! `recipes/<key>.yaml`, `golden_al/`) and InferenceX's (`configs/*-master.yaml`,
//! `benchmarks/**`, `golden_al_distribution/`, `utils/evals/thresholds.yaml`).

use super::git::{Git, GitError, Tree};
use crate::changelog::Changelog;
use crate::gate::Thresholds;
use crate::golden_al::GoldenAl;
use crate::problem::Problems;
use crate::recipe::serving::Recipe;
use crate::recipe::{Master, Runners};
use crate::yaml::{self, Doc};
use serde_yaml_ng::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `recipes/master.yaml` and one serving recipe per config key.
    Sweep,
    /// `configs/*-master.yaml` and shell scripts under `benchmarks/`.
    InferenceX,
}

/// A text file of the tree.
#[derive(Clone, Debug)]
pub struct TextFile {
    pub path: String,
    pub text: String,
}

pub struct Snapshot {
    /// The full commit id.
    pub rev: String,
    pub layout: Layout,
    /// Every entry of the revision's tree (files, links, submodules).
    pub tree: Tree,
    /// The regular files.
    pub files: BTreeSet<String>,
    pub master: Master,
    /// The master files as parsed (their locators give the lines of fields).
    pub master_docs: Vec<Doc>,
    /// Each config key's entry as written (comments and layout aside), for change detection.
    pub master_values: BTreeMap<String, Value>,
    pub runners: Option<Runners>,
    pub changelog: Option<Changelog>,
    pub golden: Option<GoldenAl>,
    /// Serving recipes by config key, with their values as written.
    pub recipes: BTreeMap<String, Recipe>,
    pub recipe_values: BTreeMap<String, Value>,
    pub models_md: Option<TextFile>,
    pub thresholds: Option<(String, Thresholds)>,
    pub codeowners: Option<TextFile>,
    pub checklist: Option<TextFile>,
}

const CHANGELOG: &str = "perf-changelog.yaml";
const MODELS: &str = "MODELS.md";
const THRESHOLDS: [&str; 3] = ["utils/evals/thresholds.yaml", "thresholds.yaml", "evals/thresholds.yaml"];
const CODEOWNERS: [&str; 3] = [".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"];
const CHECKLIST: &str = "docs/PR_REVIEW_CHECKLIST.md";

fn in_dir<'a>(files: &'a BTreeSet<String>, dir: &'a str) -> impl Iterator<Item = &'a String> + 'a {
    files.iter().filter(move |f| f.strip_prefix(dir).is_some_and(|rest| !rest.contains('/')))
}

fn is_yaml(f: &str) -> bool {
    f.ends_with(".yaml") || f.ends_with(".yml")
}

/// The files of a revision that hold its parsed inputs, by the layout's conventions.
struct Sources {
    masters: Vec<String>,
    runners: Option<String>,
    recipes: Vec<String>,
    golden: Vec<String>,
}

impl Sources {
    fn locate(files: &BTreeSet<String>, layout: Layout) -> Sources {
        match layout {
            Layout::Sweep => Sources {
                masters: vec!["recipes/master.yaml".to_string()],
                runners: files.get("recipes/runners.yaml").cloned(),
                recipes: in_dir(files, "recipes/")
                    .filter(|f| is_yaml(f) && !f.ends_with("master.yaml") && !f.ends_with("/runners.yaml"))
                    .cloned()
                    .collect(),
                golden: in_dir(files, "golden_al/").filter(|f| is_yaml(f)).cloned().collect(),
            },
            Layout::InferenceX => {
                let mut masters: Vec<String> = in_dir(files, "configs/").filter(|f| f.ends_with("-master.yaml")).cloned().collect();
                if masters.is_empty() {
                    masters = in_dir(files, ".github/configs/").filter(|f| f.ends_with("-master.yaml")).cloned().collect();
                }
                let runners =
                    ["configs/runners.yaml", ".github/configs/runners.yaml"].iter().find(|f| files.contains(**f)).map(|f| f.to_string());
                let golden = in_dir(files, "golden_al_distribution/").filter(|f| is_yaml(f)).cloned().collect();
                Sources { masters, runners, recipes: Vec::new(), golden }
            }
        }
    }

    /// Every file to read: these and the fixed-name inputs the tree has.
    fn wanted(&self, files: &BTreeSet<String>) -> Vec<String> {
        let mut wanted: Vec<String> = self.masters.iter().chain(&self.recipes).chain(&self.golden).cloned().collect();
        wanted.extend(self.runners.iter().cloned());
        for f in [CHANGELOG, MODELS, CHECKLIST].into_iter().chain(THRESHOLDS).chain(CODEOWNERS) {
            if files.contains(f) {
                wanted.push(f.to_string());
            }
        }
        wanted
    }
}

/// The files read at a revision, decoded on demand; what does not decode or parse is kept as a
/// problem naming the file.
struct Reader<'a> {
    rev: &'a str,
    bytes: BTreeMap<String, Vec<u8>>,
    problems: Problems,
}

impl Reader<'_> {
    /// The file's text (`None` when it was not read or is not UTF-8).
    fn text(&mut self, f: &str) -> Option<String> {
        let b = self.bytes.get(f)?;
        match std::str::from_utf8(b) {
            Ok(t) => Some(t.to_string()),
            Err(e) => {
                self.problems.extend(Problems::not_utf8(&at(self.rev, f), b, &e));
                None
            }
        }
    }

    fn doc(&mut self, f: &str) -> Option<Doc> {
        let t = self.text(f)?;
        self.problems.take(yaml::parse(&at(self.rev, f), &t))
    }

    fn file(&mut self, f: &str) -> Option<TextFile> {
        self.text(f).map(|t| TextFile { path: f.to_string(), text: t })
    }

    /// Serving recipes by config key, and each one's values as written.
    fn recipes(&mut self, files: &[String]) -> (BTreeMap<String, Recipe>, BTreeMap<String, Value>) {
        let mut recipes = BTreeMap::new();
        let mut recipe_values = BTreeMap::new();
        for f in files {
            let Some(t) = self.text(f) else { continue };
            if let Some(r) = self.problems.take(Recipe::from_str(&at(self.rev, f), &t)) {
                if let Ok(v) = serde_yaml_ng::from_str::<Value>(&t) {
                    recipe_values.insert(r.config_key.clone(), v);
                }
                recipes.insert(r.config_key.clone(), r);
            }
        }
        (recipes, recipe_values)
    }

    /// The first thresholds file the tree has that reads, with its path.
    fn thresholds(&mut self) -> Option<(String, Thresholds)> {
        THRESHOLDS.iter().find_map(|f| {
            let t = self.text(f)?;
            self.problems.take(yaml::parse_typed::<Thresholds>(&at(self.rev, f), &t)).map(|th| (f.to_string(), th))
        })
    }
}

/// Each config key's entry as written, over the master files.
fn master_values(docs: &[Doc]) -> BTreeMap<String, Value> {
    let mut values = BTreeMap::new();
    for d in docs {
        if let Value::Mapping(m) = &d.value {
            for (k, v) in m {
                if let Some(k) = k.as_str() {
                    values.insert(k.to_string(), v.clone());
                }
            }
        }
    }
    values
}

impl Snapshot {
    /// Reads the inputs of `rev`. Inputs that do not load are problems naming the revision's file.
    pub fn load(git: &Git, rev: &str) -> Result<Snapshot, SnapshotError> {
        let tree = git.ls_tree(rev)?;
        // Only regular files are inputs: a symbolic link or submodule is never read through.
        let files: BTreeSet<String> = tree.files().cloned().collect();
        let layout = if files.contains("recipes/master.yaml") { Layout::Sweep } else { Layout::InferenceX };
        let src = Sources::locate(&files, layout);
        let bytes = git.read_many(&tree, &src.wanted(&files))?;
        let mut r = Reader { rev, bytes, problems: Problems::default() };

        let master_docs: Vec<Doc> = src.masters.iter().filter_map(|f| r.doc(f)).collect();
        let master = r.problems.take(Master::from_docs(&master_docs)).unwrap_or_default();
        let master_values = master_values(&master_docs);
        let runners = src.runners.as_deref().and_then(|f| r.doc(f)).and_then(|d| r.problems.take(Runners::from_doc(&d)));
        let changelog = r.text(CHANGELOG).and_then(|t| r.problems.take(Changelog::parse(&at(rev, CHANGELOG), t.as_bytes())));
        let golden_docs: Vec<Doc> = src.golden.iter().filter_map(|f| r.doc(f)).collect();
        let golden = if src.golden.is_empty() { None } else { r.problems.take(GoldenAl::from_docs(&golden_docs)) };
        let (recipes, recipe_values) = r.recipes(&src.recipes);
        let models_md = r.file(MODELS);
        let checklist = r.file(CHECKLIST);
        let codeowners = CODEOWNERS.iter().find_map(|f| r.file(f));
        let thresholds = r.thresholds();
        if !r.problems.is_empty() {
            return Err(SnapshotError::Inputs { rev: rev[..rev.len().min(12)].to_string(), problems: r.problems });
        }
        Ok(Snapshot {
            rev: rev.to_string(),
            layout,
            tree,
            files,
            master,
            master_docs,
            master_values,
            runners,
            changelog,
            golden,
            recipes,
            recipe_values,
            models_md,
            thresholds,
            codeowners,
            checklist,
        })
    }
}

/// A file of a revision is named by its path in the repository (the revision is in the
/// report's header).
fn at(_rev: &str, path: &str) -> PathBuf {
    Path::new(path).to_path_buf()
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("the inputs at {rev} do not load:\n{problems}")]
    Inputs { rev: String, problems: Problems },
}
