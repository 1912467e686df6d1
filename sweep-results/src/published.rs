//! Published InferenceX results as data (the schema of `shared/data/published/points.yaml`):
//! configs with their model, GPU, scenario and, per point, the server's flags and environment and
//! the dashboard's headline metrics. `sweep predict --points` predicts each point from its flags
//! and prints it beside what was published.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::problem::Problems;

/// The dashboard metrics a published point carries (and a prediction is compared on).
pub const METRICS: [&str; 4] = ["tput_total_per_gpu", "tput_out_per_gpu", "ttft_mean_ms", "tpot_mean_ms"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedFile {
    pub configs: Vec<PublishedConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedConfig {
    pub key: String,
    pub model: String,
    /// The GPU (`h200`, `b200`, `gb300`, …): the hardware profile's name.
    pub hardware: String,
    /// GPUs per point (a point may give its own).
    #[serde(default)]
    pub gpus: Option<u32>,
    #[serde(default)]
    pub framework: Option<String>,
    /// `fixed-seq-len` or `agentic-coding`.
    pub scenario: String,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub published: Option<String>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
    pub points: Vec<PublishedPoint>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedPoint {
    #[serde(default)]
    pub isl: Option<u32>,
    #[serde(default)]
    pub osl: Option<u32>,
    pub conc: u32,
    #[serde(default)]
    pub gpus: Option<u32>,
    /// The worker's server flags (without the program and `--model-path`).
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub tput_total_per_gpu: Option<f64>,
    #[serde(default)]
    pub tput_out_per_gpu: Option<f64>,
    #[serde(default)]
    pub ttft_mean_ms: Option<f64>,
    #[serde(default)]
    pub tpot_mean_ms: Option<f64>,
}

impl PublishedPoint {
    /// The published value of one of [`METRICS`].
    pub fn metric(&self, key: &str) -> Option<f64> {
        match key {
            "tput_total_per_gpu" => self.tput_total_per_gpu,
            "tput_out_per_gpu" => self.tput_out_per_gpu,
            "ttft_mean_ms" => self.ttft_mean_ms,
            "tpot_mean_ms" => self.tpot_mean_ms,
            _ => None,
        }
    }
}

/// Reads a published-points file, within the YAML limits, with the line of a bad field.
pub fn load(path: &Path) -> Result<PublishedFile, Problems> {
    let f: PublishedFile = crate::yaml::load_typed(path)?;
    let bad = |msg: String, fix: &str| Problems::one(crate::problem::Problem::new(path, None, "", msg, fix));
    for c in &f.configs {
        if c.scenario != "fixed-seq-len" && c.scenario != "agentic-coding" {
            return Err(bad(format!("config {}: scenario `{}`", c.key, c.scenario), "use fixed-seq-len or agentic-coding"));
        }
        for (i, p) in c.points.iter().enumerate() {
            if c.scenario == "fixed-seq-len" && (p.isl.is_none() || p.osl.is_none()) {
                return Err(bad(
                    format!("config {}: points[{i}] has no `isl`/`osl`", c.key),
                    "give each fixed-seq-len point its isl and osl",
                ));
            }
            if p.gpus.or(c.gpus).is_none() {
                return Err(bad(format!("config {}: points[{i}] has no `gpus`", c.key), "give the config or the point `gpus`"));
            }
        }
    }
    Ok(f)
}

/// One point predicted beside what was published (`sweep predict --points --json`'s objects).
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    pub config: String,
    pub scenario: String,
    pub conc: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isl: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub osl: Option<u32>,
    pub gpus: u32,
    /// The hardware profile the prediction used.
    pub profile: String,
    /// How far that profile was from published points of its GPU when it was made.
    pub profile_residuals: String,
    pub published: BTreeMap<String, f64>,
    pub predicted: BTreeMap<String, f64>,
    /// (predicted − published) / published × 100, per metric published.
    pub residual_pct: BTreeMap<String, f64>,
    /// Cost per million tokens, published and predicted, with `--prices` and a price for the GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::price::PointCost>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Compared {
    /// Fills the residuals of every metric both sides have.
    pub fn compare(&mut self) {
        for (k, &p) in &self.published {
            if let Some(&q) = self.predicted.get(k)
                && p != 0.0
            {
                self.residual_pct.insert(k.clone(), crate::metrics::residual_pct(p, q));
            }
        }
    }
}
