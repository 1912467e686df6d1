//! One fit across configs (`sweep calibrate fit --points FILE…`): every published point of the
//! files (their own server flags and environment, `shared/data/published/points.yaml`'s schema)
//! predicted on the virtual clock at once, with
//!
//! - per-GPU parameters (`--params`, e.g. the roofline efficiencies and the per-layer step floor):
//!   one set per GPU, shared by every model and scenario on it;
//! - shared parameters (`--shared-params`, e.g. the framework's eager host cost per layer): one
//!   value for every GPU, as the host-side Python does not change with the GPU;
//! - per-model facts left to the model profiles (layers, experts, KV layout).
//!
//! The loss is a weighted soft-L1 of the log-ratio predicted / published per metric (quadratic
//! near zero, linear far away), so a point whose regime the engine does not reproduce pulls the
//! parameters without owning them. Bounded Nelder–Mead on the unit cube, restarted from the best.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::profiles::{FitParameter, FitPoint, FitRecord, FitResidual, WorkloadScales};
use engine::{GpuSpec, ModelSpec};

use super::nelder_mead::{self, Options};
use super::parallel::parallel_map;
use super::space::{Candidate, Param, from_unit, to_unit};
use crate::published::{PublishedConfig, PublishedPoint};
use crate::targets::published::{self as point_sim, Metrics, PublishedError};
use crate::workload::TracePlan;

/// Each metric's weight in the loss: throughput and TPOT carry the fit, TTFT half (its target is
/// looser and its mean is noisy), output throughput half (it moves with total throughput).
pub const WEIGHTS: [(&str, f64); 4] =
    [("tput_total_per_gpu", 1.0), ("tput_out_per_gpu", 0.5), ("ttft_mean_ms", 0.5), ("tpot_mean_ms", 1.0)];

/// The soft-L1 scale on ln(predicted / published): residuals well under ~30 % count squared.
const SOFT_L1_SCALE: f64 = 0.3;

/// The loss of a point that cannot run, per unit of weight.
const FAILED: f64 = 25.0;

/// One published point of the fit.
pub struct JointPoint {
    pub config: PublishedConfig,
    pub point: PublishedPoint,
    pub model: ModelSpec,
    /// Index into [`JointProblem::groups`].
    pub group: usize,
    /// The trace set an AgentX point replays.
    pub traces: Option<String>,
    /// Predicted and tabled, but left out of the loss (`--exclude`).
    pub excluded: bool,
}

impl JointPoint {
    /// `config ISL/OSL cN` or `config cN`.
    pub fn id(&self) -> String {
        match (self.point.isl, self.point.osl) {
            (Some(i), Some(o)) => format!("{} {i}/{o} c{}", self.config.key, self.point.conc),
            _ => format!("{} c{}", self.config.key, self.point.conc),
        }
    }

    /// Whether `pattern` names this point: its id, or its config key.
    pub fn is_named(&self, pattern: &str) -> bool {
        let id = self.id();
        id == pattern || id.starts_with(&format!("{pattern} "))
    }
}

/// `items` without repeats, in first-seen order (the points are sorted by cost, not by config).
fn unique(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// The fit: its points, the GPUs (each a base profile), the parameters and the settings.
pub struct JointProblem {
    pub points: Vec<JointPoint>,
    /// One base profile per GPU.
    pub groups: Vec<GpuSpec>,
    pub gpu_params: Vec<Param>,
    pub shared_params: Vec<Param>,
    pub pools: BTreeMap<String, Arc<Vec<Arc<TracePlan>>>>,
    pub seed: u64,
    /// Profiling seconds of an AgentX point.
    pub duration_s: f64,
    pub jobs: usize,
}

/// Every point's metrics (or why it failed) under one parameter vector, and the loss.
#[derive(Clone, Debug)]
pub struct JointEval {
    pub loss: f64,
    pub metrics: Vec<Result<Metrics, PublishedError>>,
}

/// The best parameters found, their evaluation and how many evaluations it took.
pub struct JointOutcome {
    pub profiles: Vec<GpuSpec>,
    pub evaluation: JointEval,
    pub evaluations: u64,
}

fn soft_l1(r: f64) -> f64 {
    let s = SOFT_L1_SCALE;
    2.0 * s * s * ((1.0 + (r / s).powi(2)).sqrt() - 1.0)
}

impl JointProblem {
    fn dims(&self) -> usize {
        self.groups.len() * self.gpu_params.len() + self.shared_params.len()
    }

    /// The profiles a unit-cube vector stands for: group `g`'s parameters, then the shared ones.
    pub fn profiles(&self, x: &[f64]) -> Vec<GpuSpec> {
        let n = self.gpu_params.len();
        let shared = &x[self.groups.len() * n..];
        self.groups
            .iter()
            .enumerate()
            .map(|(g, base)| {
                let mut c = Candidate { gpu: base.clone(), scales: WorkloadScales::default() };
                for (i, p) in self.gpu_params.iter().enumerate() {
                    c.set(p.name, from_unit(p, x[g * n + i]));
                }
                for (i, p) in self.shared_params.iter().enumerate() {
                    c.set(p.name, from_unit(p, shared[i]));
                }
                c.gpu
            })
            .collect()
    }

    /// The base profiles' values on the unit cube (shared parameters from the first GPU's).
    pub fn start(&self) -> Vec<f64> {
        let mut x = Vec::with_capacity(self.dims());
        for base in &self.groups {
            let c = Candidate { gpu: base.clone(), scales: WorkloadScales::default() };
            x.extend(self.gpu_params.iter().map(|p| to_unit(p, c.get(p.name))));
        }
        let c = Candidate { gpu: self.groups[0].clone(), scales: WorkloadScales::default() };
        x.extend(self.shared_params.iter().map(|p| to_unit(p, c.get(p.name))));
        x
    }

    /// Every point on the virtual clock with `profiles` (one per group).
    pub fn evaluate_profiles(&self, profiles: &[GpuSpec]) -> JointEval {
        let metrics = parallel_map(self.jobs, self.points.len(), |i| {
            let jp = &self.points[i];
            let engine = point_sim::engine(&jp.config, &jp.point, &jp.model, &profiles[jp.group], self.seed)?;
            let pool = jp.traces.as_ref().map(|s| (s.as_str(), &self.pools[s]));
            point_sim::simulate(&jp.config, &jp.point, engine, pool, self.seed, self.duration_s)
        });
        let loss = self.loss(&metrics);
        JointEval { loss, metrics }
    }

    fn loss(&self, metrics: &[Result<Metrics, PublishedError>]) -> f64 {
        let (mut sum, mut wsum) = (0.0, 0.0);
        for (jp, m) in self.points.iter().zip(metrics).filter(|(jp, _)| !jp.excluded) {
            for (k, w) in WEIGHTS {
                let Some(publ) = jp.point.metric(k) else { continue };
                wsum += w;
                sum += w * match m.as_ref().ok().and_then(|m| m.get(k)).filter(|v| v.is_finite() && **v > 0.0) {
                    Some(pred) => soft_l1((pred / publ).ln()),
                    None => FAILED,
                };
            }
        }
        if wsum > 0.0 { sum / wsum } else { 0.0 }
    }

    /// Bounded Nelder–Mead from the base profiles, `restarts` times from the best so far.
    pub fn fit(&self, restarts: u32, max_evals: usize, mut progress: impl FnMut(u64, f64)) -> JointOutcome {
        let mut best_x = self.start();
        let mut best = self.evaluate_profiles(&self.profiles(&best_x));
        let mut evaluations = 1u64;
        for r in 0..restarts.max(1) {
            let step = if r == 0 { 0.2 } else { 0.08 };
            let m = nelder_mead::minimize(
                |xs, _bound| {
                    xs.iter()
                        .map(|x| {
                            let e = self.evaluate_profiles(&self.profiles(x));
                            evaluations += 1;
                            progress(evaluations, e.loss);
                            e.loss
                        })
                        .collect()
                },
                &best_x,
                Options { max_evals, step, ..Options::default() },
            );
            if m.f < best.loss {
                best_x = m.x;
                best = self.evaluate_profiles(&self.profiles(&best_x));
            }
        }
        JointOutcome { profiles: self.profiles(&best_x), evaluation: best, evaluations }
    }

    /// The points of group `g` with their published and predicted metrics (for a fit record).
    pub fn fit_points(&self, g: usize, ev: &JointEval) -> Vec<FitPoint> {
        let w: BTreeMap<&str, f64> = WEIGHTS.into_iter().collect();
        self.points
            .iter()
            .zip(&ev.metrics)
            .filter(|(jp, _)| jp.group == g && !jp.excluded)
            .map(|(jp, m)| FitPoint {
                id: jp.id(),
                arm: jp.config.key.clone(),
                conc: jp.point.conc,
                metrics: WEIGHTS
                    .iter()
                    .filter_map(|(k, _)| {
                        let publ = jp.point.metric(k)?;
                        let pred = m.as_ref().ok().and_then(|m| m.get(*k).copied()).unwrap_or(f64::NAN);
                        Some((
                            k.to_string(),
                            FitResidual {
                                measured: publ,
                                predicted: pred,
                                residual_pct: crate::metrics::residual_pct(publ, pred),
                                weight: w[k],
                            },
                        ))
                    })
                    .collect(),
            })
            .collect()
    }

    /// The fitted profile of group `g`: its base's datasheet, the fitted cost and the record.
    pub fn fitted_profile(&self, g: usize, out: &JointOutcome, prov: &JointProvenance) -> GpuSpec {
        let base = &self.groups[g];
        let mut p = out.profiles[g].clone();
        p.name = format!("{}-fitted", base.name);
        p.aliases = Vec::new();
        p.cost.calibrated = true;
        let mine: Vec<&JointPoint> = self.points.iter().filter(|jp| jp.group == g && !jp.excluded).collect();
        let keys = unique(mine.iter().map(|jp| jp.config.key.clone()));
        let mut models = unique(mine.iter().map(|jp| jp.model.name.clone()));
        models.sort();
        let traces = unique(mine.iter().filter_map(|jp| jp.traces.clone()));
        let start = Candidate { gpu: base.clone(), scales: WorkloadScales::default() };
        let fitted = Candidate { gpu: p.clone(), scales: WorkloadScales::default() };
        let parameters = self
            .gpu_params
            .iter()
            .chain(&self.shared_params)
            .map(|q| {
                (q.name.to_string(), FitParameter { value: fitted.get(q.name), lower: q.lower, upper: q.upper, start: start.get(q.name) })
            })
            .collect();
        p.fit = Some(FitRecord {
            config_key: keys.join(", "),
            model_profile: models.first().cloned().unwrap_or_default(),
            base_profile: base.name.clone(),
            results: prov.files.join(", "),
            traces: if traces.is_empty() { "none (fixed-seq-len points only)".into() } else { traces.join(", ") },
            trace_orders: 1,
            workload: WorkloadScales::default(),
            seed: self.seed,
            duration_s: self.duration_s,
            restarts: prov.restarts,
            evaluations: out.evaluations,
            wall_s: (prov.wall_s * 10.0).round() / 10.0,
            loss: out.evaluation.loss,
            loss_definition: loss_definition(&self.shared_params),
            parameters,
            points: self.fit_points(g, &out.evaluation),
            corpus: None,
            models,
            borrowed_from: None,
            coarse: None,
        });
        p
    }
}

/// Profiles for the built-in GPUs with no published point: each datasheet profile of an
/// architecture that a fitted profile shares carries that profile's cost parameters (the GPU
/// efficiency terms and the framework's), named `<gpu>-from-<fitted>`.
pub fn borrowed_profiles(fitted: &[GpuSpec]) -> Vec<GpuSpec> {
    let have: Vec<&str> = fitted.iter().filter_map(|f| f.fit.as_ref().map(|r| r.base_profile.as_str())).collect();
    GpuSpec::builtin()
        .into_iter()
        .filter(|g| g.fit.is_none() && g.measured.is_none() && !have.contains(&g.name.as_str()))
        .filter_map(|g| {
            let src = fitted.iter().find(|f| f.datasheet.architecture.is_some() && f.datasheet.architecture == g.datasheet.architecture)?;
            let mut b = g.clone();
            b.name = format!("{}-from-{}", g.name, src.name);
            b.aliases = Vec::new();
            b.cost = src.cost.clone();
            let mut rec = src.fit.clone()?;
            rec.base_profile = g.name.clone();
            rec.borrowed_from = Some(src.name.clone());
            b.fit = Some(rec);
            Some(b)
        })
        .collect()
}

/// What a joint fit's profiles record about how they were made.
pub struct JointProvenance {
    pub files: Vec<String>,
    pub restarts: u32,
    pub wall_s: f64,
}

/// The loss, as written into the profiles.
pub fn loss_definition(shared: &[Param]) -> String {
    let w: Vec<String> = WEIGHTS.iter().map(|(k, w)| format!("{k} {w}")).collect();
    format!(
        "joint fit across configs: sum over every GPU's published points and metrics of w * softL1(ln(predicted / published), scale {SOFT_L1_SCALE}), divided by the sum of the weights; weights: {}; shared across GPUs: {}; a point that fails adds {FAILED} per weight",
        w.join(", "),
        if shared.is_empty() { "nothing".to_string() } else { shared.iter().map(|p| p.name).collect::<Vec<_>>().join(", ") }
    )
}

/// Markdown: per point and metric, published, the base profiles' prediction and the fitted one.
pub fn table(problem: &JointProblem, base: &JointEval, fitted: &JointEval) -> String {
    let mut o = String::from(
        "| point | GPU | metric | published | base profile | residual | fitted | residual |\n|---|---|---|---:|---:|---:|---:|---:|\n",
    );
    let fmt = crate::gate::fmt_num;
    let mut excluded = false;
    for (i, jp) in problem.points.iter().enumerate() {
        excluded |= jp.excluded;
        for (k, _) in WEIGHTS {
            let Some(publ) = jp.point.metric(k) else { continue };
            let get = |e: &JointEval| e.metrics[i].as_ref().ok().and_then(|m| m.get(k).copied()).unwrap_or(f64::NAN);
            let (b, f) = (get(base), get(fitted));
            o.push_str(&format!(
                "| {}{} | {} | {k} | {} | {} | {:+.1} % | {} | {:+.1} % |\n",
                jp.id(),
                if jp.excluded { " (not fitted)" } else { "" },
                problem.groups[jp.group].name,
                fmt(publ),
                fmt(b),
                crate::metrics::residual_pct(publ, b),
                fmt(f),
                crate::metrics::residual_pct(publ, f)
            ));
        }
    }
    if excluded {
        o.push_str("\nPoints marked (not fitted) were left out of the loss (`--exclude`): their rows are predictions.\n");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::soft_l1;

    #[test]
    fn soft_l1_is_quadratic_near_zero_and_linear_far_away() {
        assert!((soft_l1(0.01) - 0.0001).abs() < 1e-6);
        let (a, b) = (soft_l1(10.0), soft_l1(20.0));
        assert!((b - a) / 10.0 < 0.61 && (b - a) / 10.0 > 0.59, "slope {}", (b - a) / 10.0);
    }
}
