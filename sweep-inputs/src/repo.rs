//! Where a sweep repository keeps its inputs, with overrides for each path.

use crate::changelog::Changelog;
use crate::golden_al::GoldenAl;
use crate::problem::{Problem, Problems};
use crate::recipe::serving::Recipe;
use crate::recipe::{Master, Runners};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Repo {
    pub root: PathBuf,
    pub master_files: Vec<PathBuf>,
    pub runners_file: Option<PathBuf>,
    pub recipes_dir: PathBuf,
    pub golden_dir: Option<PathBuf>,
    pub changelog: PathBuf,
}

impl Repo {
    /// The repository that contains `start` (the nearest ancestor with `recipes/master.yaml`).
    pub fn discover(start: &Path) -> Result<Repo, Problems> {
        let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
        for (up, dir) in start.ancestors().enumerate() {
            if dir.join("recipes").join("master.yaml").is_file() {
                // Relative to the start folder, so messages show short paths.
                let rel: PathBuf = std::iter::repeat_n("..", up).collect();
                return Ok(Repo::at(&rel));
            }
        }
        Err(Problems::one(Problem::new(
            &start,
            None,
            "",
            "not inside a sweep repository (no recipes/master.yaml here or above)",
            "run from the repository root, or pass --master / --changelog / --golden-al explicitly",
        )))
    }

    /// The standard layout under `root`.
    pub fn at(root: &Path) -> Repo {
        let runners = root.join("recipes").join("runners.yaml");
        let golden = root.join("golden_al");
        Repo {
            root: root.to_path_buf(),
            master_files: vec![root.join("recipes").join("master.yaml")],
            runners_file: runners.is_file().then_some(runners),
            recipes_dir: root.join("recipes"),
            golden_dir: golden.is_dir().then_some(golden),
            changelog: root.join("perf-changelog.yaml"),
        }
    }

    pub fn master(&self) -> Result<Master, Problems> {
        Master::load(&self.master_files)
    }

    pub fn runners(&self) -> Result<Option<Runners>, Problems> {
        self.runners_file.as_deref().map(Runners::load).transpose()
    }

    pub fn golden(&self) -> Result<Option<GoldenAl>, Problems> {
        self.golden_dir.as_deref().map(GoldenAl::load_dir).transpose()
    }

    pub fn changelog(&self) -> Result<Changelog, Problems> {
        Changelog::load(&self.changelog)
    }

    /// The serving recipe of a config key (`recipes/<key>.yaml`), when there is one.
    pub fn recipe(&self, key: &str) -> Option<Result<Recipe, Problems>> {
        let f = self.recipes_dir.join(format!("{key}.yaml"));
        f.is_file().then(|| Recipe::load(&f))
    }

    /// Every serving recipe file in the recipes folder (all `*.yaml` except master and runners).
    pub fn recipe_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> =
            std::fs::read_dir(&self.recipes_dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        v.retain(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.ends_with(".yaml") && name != "runners.yaml" && !name.ends_with("master.yaml")
        });
        v.sort();
        v
    }
}
