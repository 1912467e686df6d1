//! What makes two invocations the same run, so that `--resume` never mixes points measured under
//! different options: `run.json` in the run directory, written when the run starts and compared
//! field by field when it is resumed.

use crate::plan::Plan;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The options and inputs a run's results depend on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// The `sweep` version that made it.
    pub version: String,
    pub labels: Vec<String>,
    pub target: String,
    pub seed: u64,
    /// `--duration` (absent: each point's planned duration).
    pub duration: Option<f64>,
    pub traces: String,
    pub seed_replicates: usize,
    /// `--model` / `--hardware` overrides of the reference engine's profiles.
    pub model: Option<String>,
    pub hardware: Option<String>,
    /// The live client's flags that shape requests (tokenizer, request dialect).
    #[serde(default)]
    pub client: Vec<String>,
    /// Each planned point's recipe: a digest of its matrix row and server launch.
    pub recipes: BTreeMap<String, String>,
}

/// Why a run directory cannot be resumed with these options.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(
        "--resume {}: the run was made with {field} {was}, this invocation has {now}; resume with the same options, or start a new run in another --out",
        .dir.display()
    )]
    Mismatch { dir: PathBuf, field: String, was: String, now: String },
    #[error("{}: {source}", .path.display())]
    Unreadable { path: PathBuf, source: Box<dyn std::error::Error + Send + Sync> },
}

impl RunIdentity {
    /// The digest of every point's recipe in `plan`.
    pub fn recipes(plan: &Plan) -> BTreeMap<String, String> {
        plan.points()
            .map(|p| {
                let mut h = Sha256::new();
                h.update(serde_json::to_vec(&p.row).unwrap_or_default());
                h.update(serde_json::to_vec(&p.launch).unwrap_or_default());
                h.update(serde_json::to_vec(&(p.duration_s, p.warmup_per_lane)).unwrap_or_default());
                (p.id.clone(), hex::encode(&h.finalize()[..8]))
            })
            .collect()
    }

    pub fn path(dir: &Path) -> PathBuf {
        dir.join("run.json")
    }

    /// The identity recorded in `dir`, if any.
    pub fn load(dir: &Path) -> Result<Option<RunIdentity>, ResumeError> {
        let path = Self::path(dir);
        match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t).map(Some).map_err(|e| ResumeError::Unreadable { path, source: Box::new(e) }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ResumeError::Unreadable { path, source: Box::new(e) }),
        }
    }

    /// The first difference that makes `self` (the recorded run) and `now` different runs.
    pub fn check(&self, now: &RunIdentity, dir: &Path) -> Result<(), ResumeError> {
        let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let mismatch =
            |field: &str, was: String, now: String| Err(ResumeError::Mismatch { dir: dir.to_path_buf(), field: field.into(), was, now });
        let fields: [(&str, String, String); 10] = [
            ("sweep version", self.version.clone(), now.version.clone()),
            ("labels", self.labels.join(" "), now.labels.join(" ")),
            ("--target", self.target.clone(), now.target.clone()),
            ("--seed", self.seed.to_string(), now.seed.to_string()),
            ("--duration", show(&self.duration), show(&now.duration)),
            ("--traces", self.traces.clone(), now.traces.clone()),
            ("--seed-replicates", self.seed_replicates.to_string(), now.seed_replicates.to_string()),
            ("--model", show(&self.model), show(&now.model)),
            ("--hardware", show(&self.hardware), show(&now.hardware)),
            ("client flags", format!("[{}]", self.client.join(" ")), format!("[{}]", now.client.join(" "))),
        ];
        for (field, was, is) in fields {
            if was != is {
                return mismatch(field, was, is);
            }
        }
        // Points this invocation plans that the run planned differently (a changed recipe).
        for (id, digest) in &now.recipes {
            if let Some(old) = self.recipes.get(id)
                && old != digest
            {
                return mismatch(&format!("the recipe of {id}"), format!("digest {old}"), format!("digest {digest} (the recipe changed)"));
            }
        }
        Ok(())
    }
}

/// The newest run directory under `reports` whose `run.json` matches `now`, for `--resume`
/// without `--out`.
pub fn latest_matching(reports: &Path, now: &RunIdentity) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(reports).ok()?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    // Run directories start with a UTC timestamp: the newest sorts last.
    dirs.sort();
    dirs.into_iter().rev().find(|d| matches!(RunIdentity::load(d), Ok(Some(id)) if id.check(now, d).is_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> RunIdentity {
        RunIdentity {
            version: "0.1.0".into(),
            labels: vec!["full-sweep-fail-fast".into()],
            target: "sim".into(),
            seed: 42,
            duration: None,
            traces: "auto".into(),
            seed_replicates: 4,
            model: None,
            hardware: None,
            client: Vec::new(),
            recipes: [("a/tp4-c1".to_string(), "00aa".to_string())].into(),
        }
    }

    #[test]
    fn a_different_seed_or_recipe_is_named() {
        let d = Path::new("/r");
        assert!(id().check(&id(), d).is_ok());
        let e = id().check(&RunIdentity { seed: 1, ..id() }, d).unwrap_err().to_string();
        let dialect = RunIdentity { client: vec!["--max-tokens-field".into(), "max_tokens".into()], ..id() };
        assert!(
            id().check(&dialect, d)
                .unwrap_err()
                .to_string()
                .contains("client flags [], this invocation has [--max-tokens-field max_tokens]")
        );
        assert!(e.contains("--seed 42, this invocation has 1"), "{e}");
        let mut other = id();
        other.recipes.insert("a/tp4-c1".into(), "11bb".into());
        let e = id().check(&other, d).unwrap_err().to_string();
        assert!(e.contains("the recipe of a/tp4-c1"), "{e}");
        // A point the run did not plan is new, not a mismatch (a later changelog entry).
        let mut more = id();
        more.recipes.insert("b/tp8-c4".into(), "22cc".into());
        assert!(id().check(&more, d).is_ok());
    }

    #[test]
    fn the_latest_matching_run_is_found() {
        let t = tempfile::tempdir().unwrap();
        for (name, seed) in [("20261201T100000Z-x", 42), ("20261201T110000Z-x", 42), ("20261201T120000Z-x", 7)] {
            let d = t.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(RunIdentity::path(&d), serde_json::to_vec(&RunIdentity { seed, ..id() }).unwrap()).unwrap();
        }
        assert_eq!(latest_matching(t.path(), &id()).unwrap(), t.path().join("20261201T110000Z-x"));
        assert!(latest_matching(t.path(), &RunIdentity { seed: 3, ..id() }).is_none());
    }
}
