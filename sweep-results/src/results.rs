//! A run directory on disk (DESIGN §6): `plan.json`, one folder per point (`agg.json`,
//! `profile_export.jsonl`, `server_metrics.json`, `server.log`), `summary.json`, charts, reports
//! and `gate.json`. Every file is written atomically.

use crate::metrics::Summary;
use crate::pareto::{CurveResult, Point as ParetoPoint};
use crate::problem::atomic_write;
use crate::recipe::serving::Launch;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How a point ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Ran to the end; `summary.valid` says whether the aggregate passed its gates.
    Done,
    /// Failed: server start/health/death, live abort, invalid aggregate, Slurm kill, …
    Failed { reason: String },
    /// Not run because of an earlier failure (canary or fail-fast).
    Cancelled { reason: String },
    /// Stopped by the user (Ctrl-C, SIGTERM) before its end: its records are kept, it is never
    /// valid, it is not a failure of the recipe, and `--resume` runs it again.
    Interrupted { reason: String },
    /// Not run in this invocation (`--only`, interrupted).
    Pending,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub id: String,
    pub config_key: String,
    pub arm: String,
    pub conc: u32,
    pub gpus: u32,
    pub matrix: String,
    /// A fixed-seq-len point's sequence (`1k1k`), also when it runs as the canary (runs written
    /// before this field: read from the matrix name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<String>,
    pub status: Status,
    /// `measured` or `predicted`.
    pub result_kind: String,
    /// Profiles (predicted) or server identity (measured).
    pub profiles: serde_json::Value,
    /// The trace set the point replayed.
    #[serde(default)]
    pub trace_set: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pareto: Option<ParetoPoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    /// The point's metrics under each seed it was replayed with (the run's seed first, then
    /// `--seed-replicates`): the noise model of the gate (`noise.rs`). Empty without replicates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<crate::noise::SeedSample>,
    /// Wall-clock seconds the point took to run.
    pub wall_s: f64,
}

/// A Pareto curve's key: the config, and a fixed-seq-len sequence after it.
pub fn curve_key(config_key: &str, seq: Option<&str>) -> String {
    match seq {
        Some(s) => format!("{config_key} {s}"),
        None => config_key.to_string(),
    }
}

/// The fixed-seq-len sequence of a matrix name (`single_node.1k1k` → `1k1k`); none for AgentX.
pub fn seq_of_matrix(matrix: &str) -> Option<&str> {
    let rest = matrix.strip_prefix("single_node.").or_else(|| matrix.strip_prefix("multi_node."))?;
    (rest != "agentic" && !rest.is_empty()).then_some(rest)
}

impl PointResult {
    /// The fixed-seq-len sequence of the point's matrix (`1k1k`, `8k1k`, `<isl>_<osl>`); none for
    /// AgentX points.
    pub fn seq(&self) -> Option<&str> {
        self.seq.as_deref().or_else(|| seq_of_matrix(&self.matrix))
    }

    /// The Pareto curve the point belongs to: its config, and for fixed-seq-len points its
    /// sequence lengths too (a 1k/1k and an 8k/1k point are never on one frontier).
    pub fn curve_key(&self) -> String {
        curve_key(&self.config_key, self.seq())
    }

    /// What a result rests on, in words: `predicted with model M on hardware H (kind), traces T`
    /// or `measured on <server>, traces T`.
    pub fn provenance(&self) -> String {
        let p = &self.profiles;
        let s = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string();
        let traces = if self.trace_set.is_empty() { String::new() } else { format!("; traces {}", self.trace_set) };
        if self.result_kind == "predicted" {
            let kind = p.get("hardware_profile_kind").and_then(|v| v.as_str()).map(|k| format!(" ({k})")).unwrap_or_default();
            // How far the profile was from published points when it was made: a prediction on a
            // GPU with no fitted point says so.
            let standing = p.get("hardware_profile_standing").and_then(|v| v.as_str()).map(|t| format!(" [{t}]")).unwrap_or_default();
            format!(
                "predicted with model profile {} on hardware profile {}{kind}{standing}{traces}",
                s("model_profile"),
                s("hardware_profile")
            )
        } else {
            format!("{}{traces}", self.result_kind)
        }
    }

    pub fn ok(&self) -> bool {
        self.status == Status::Done && self.summary.as_ref().is_some_and(|s| s.valid)
    }
}

/// One eval point of a run (gsm8k against its config's server; its files are in its folder).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalPointResult {
    pub id: String,
    pub config_key: String,
    pub arm: String,
    /// The eval's concurrency (`num_concurrent`).
    pub conc: u32,
    pub matrix: String,
    pub status: Status,
    /// The eval's summary row as its folder records it (score, n, infrastructure_success, or
    /// `not_applicable` with the reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
    pub wall_s: f64,
}

impl EvalPointResult {
    /// An eval in a line: its scores, or why it has none (the row `eval.json` and
    /// `agg_eval.json` hold).
    pub fn describe(&self) -> String {
        let d = self.detail.as_ref();
        let text = |k: &str| d.and_then(|d| d.get(k)).and_then(|v| v.as_str()).unwrap_or("");
        match &self.status {
            Status::Done if text("status").starts_with("not_applicable") => {
                format!("gsm8k not applicable ({})", text("status").trim_start_matches("not_applicable").trim_start_matches(": "))
            }
            Status::Done => {
                let num = |k: &str| d.and_then(|d| d.get(k)).and_then(|v| v.as_f64());
                let limit =
                    d.and_then(|d| d.get("limit")).and_then(|v| v.as_u64()).map(|l| format!(" (first {l} only)")).unwrap_or_default();
                format!(
                    "gsm8k em_strict {:.4}  em_flexible {:.4}  n={}{limit}",
                    num("em_strict").unwrap_or(f64::NAN),
                    num("em_flexible").unwrap_or(f64::NAN),
                    num("n_eff").unwrap_or(0.0)
                )
            }
            st => format!("{st:?}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub labels: Vec<String>,
    pub target: String,
    pub created_unix: u64,
    /// Seed of the workload and of the bootstrap.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Bootstrap replicates behind the intervals and frontier probabilities.
    #[serde(default = "default_replicates")]
    pub replicates: usize,
    pub points: Vec<PointResult>,
    pub curves: Vec<CurveResult>,
    /// Eval points, in plan order (none in runs made before evals ran).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evals: Vec<EvalPointResult>,
}

fn default_seed() -> u64 {
    42
}
fn default_replicates() -> usize {
    200
}

/// Why a run's `summary.json` does not load (`path`: the file).
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error("{}: {source} (is this a sweep run directory?)", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", .path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl RunSummary {
    pub fn load(dir: &Path) -> Result<RunSummary, SummaryError> {
        let path = dir.join("summary.json");
        let t = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(source) => return Err(SummaryError::Read { path, source }),
        };
        serde_json::from_str(&t).map_err(|source| SummaryError::Parse { path, source })
    }
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        atomic_write(&dir.join("summary.json"), &serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)
    }
    pub fn point(&self, id: &str) -> Option<&PointResult> {
        self.points.iter().find(|p| p.id == id)
    }
}

/// The folder of a point inside a run directory (ids contain `/`, kept as nested folders).
pub fn point_dir(run: &Path, id: &str) -> PathBuf {
    run.join(id.replace(':', "_"))
}

/// Writes JSON atomically, pretty-printed.
pub fn write_json<T: Serialize>(path: &Path, v: &T) -> std::io::Result<()> {
    atomic_write(path, &serde_json::to_vec_pretty(v).map_err(std::io::Error::other)?)
}
