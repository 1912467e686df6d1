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
    pub status: Status,
    /// `measured` or `predicted`.
    pub result_kind: String,
    /// Profiles (predicted) or server identity (measured).
    pub profiles: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pareto: Option<ParetoPoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    /// Wall-clock seconds the point took to run.
    pub wall_s: f64,
}

impl PointResult {
    pub fn ok(&self) -> bool {
        self.status == Status::Done && self.summary.as_ref().is_some_and(|s| s.valid)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub labels: Vec<String>,
    pub target: String,
    pub created_unix: u64,
    pub points: Vec<PointResult>,
    pub curves: Vec<CurveResult>,
}

impl RunSummary {
    pub fn load(dir: &Path) -> Result<RunSummary, String> {
        let p = dir.join("summary.json");
        let t = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e} (is this a sweep run directory?)", p.display()))?;
        serde_json::from_str(&t).map_err(|e| format!("{}: {e}", p.display()))
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
