//! What a fit writes: the fitted hardware profile (YAML with its fit record) and the Markdown
//! tables of parameters and residuals.

use std::collections::BTreeMap;

use engine::GpuSpec;
use engine::profiles::{CoarseRecord, CorpusRecord, FitParameter, FitPoint, FitRecord, FitResidual};

use super::objective::loss_definition;
use super::{Evaluation, FitError, FitOptions, FitOutcome, FitProblem, MeasuredPoint, Metric, residual_pct};
use crate::gate::fmt_value as fmt;
use crate::plan::PlanPoint;

/// Per-point residual records of an evaluation.
pub fn fit_points(points: &[(PlanPoint, MeasuredPoint)], ev: &Evaluation, weights: &BTreeMap<Metric, f64>) -> Vec<FitPoint> {
    points
        .iter()
        .zip(&ev.summaries)
        .map(|((p, m), s)| FitPoint {
            id: p.id.clone(),
            arm: p.arm.clone(),
            conc: p.conc,
            metrics: m
                .metrics
                .iter()
                .map(|(k, meas)| {
                    let pred = s.as_ref().map(|s| k.of(s)).unwrap_or(f64::NAN);
                    (
                        k.key().to_string(),
                        FitResidual {
                            measured: *meas,
                            predicted: pred,
                            residual_pct: residual_pct(*meas, pred),
                            weight: weights.get(k).copied().unwrap_or(0.0),
                        },
                    )
                })
                .collect(),
        })
        .collect()
}

/// Settings recorded in the fitted profile.
pub struct FitProvenance {
    pub name: String,
    pub aliases: Vec<String>,
    pub config_key: String,
    pub model_profile: String,
    pub results: String,
    pub restarts: u32,
    pub wall_s: f64,
    /// How a synthesized trace set is regenerated.
    pub corpus: Option<CorpusRecord>,
}

/// The fitted hardware profile: the base profile's datasheet, the fitted cost parameters and
/// the fit record.
pub fn fitted_profile(problem: &FitProblem, opts: &FitOptions, out: &FitOutcome, prov: &FitProvenance) -> GpuSpec {
    let mut g = out.best.gpu.clone();
    g.name = prov.name.clone();
    g.aliases = prov.aliases.clone();
    g.cost.calibrated = true;
    let base = problem.base_candidate();
    g.fit = Some(FitRecord {
        config_key: prov.config_key.clone(),
        model_profile: prov.model_profile.clone(),
        base_profile: problem.base.name.clone(),
        results: prov.results.clone(),
        traces: problem.trace_set.clone(),
        trace_orders: problem.orders.max(1) as u32,
        workload: out.best.scales,
        seed: problem.seed,
        duration_s: problem.duration_s.unwrap_or(3600.0),
        restarts: prov.restarts,
        evaluations: out.evaluations,
        wall_s: (prov.wall_s * 10.0).round() / 10.0,
        loss: out.evaluation.loss,
        loss_definition: loss_definition(&problem.weights),
        parameters: opts
            .params
            .iter()
            .map(|p| {
                (p.name.to_string(), FitParameter { value: out.best.get(p.name), lower: p.lower, upper: p.upper, start: base.get(p.name) })
            })
            .collect(),
        points: fit_points(&problem.points, &out.evaluation, &problem.weights),
        corpus: prov.corpus.clone(),
        models: Vec::new(),
        borrowed_from: None,
        coarse: match (opts.coarse, out.coarse_evaluations) {
            (Some(c), Some((e, f))) => Some(CoarseRecord { duration_s: c.duration_s, evaluations: e, full_evaluations: f }),
            _ => None,
        },
    });
    g
}

/// The profile as YAML with a header saying what it is.
pub fn profile_yaml(g: &GpuSpec) -> Result<String, FitError> {
    let body = crate::yaml::to_string(g)?;
    let f = g.fit.as_ref();
    if let Some(src) = f.and_then(|f| f.borrowed_from.as_deref()) {
        let header = format!(
            "# Hardware profile with BORROWED cost: {} has no published point, so `sweep calibrate fit --points`\n\
             # gave its datasheet the cost parameters of {src} (same architecture: the GPU efficiency terms\n\
             # and the framework's host costs). fit: the source's record (its points, not this GPU's).\n\
             # Results predicted with it are `predicted` and name this profile.\n",
            f.map_or("?", |f| f.base_profile.as_str())
        );
        return Ok(header + &body);
    }
    let joint = f.is_some_and(|f| !f.models.is_empty());
    let header = format!(
        "# Hardware profile FITTED by `sweep calibrate fit{}` to {}: {} on {} (config {}),\n\
         # traces {}, seed {}. datasheet: the base profile's published facts (unchanged); cost: fitted\n\
         # parameters; fit: the points, loss and per-point residuals. Results predicted with it are\n\
         # `predicted` and name this profile.\n",
        if joint { " --points" } else { "" },
        if joint {
            "published points, jointly with the other GPUs' (its parameters are the GPU's, for every model)"
        } else {
            "measured serving results"
        },
        f.map_or("?", |f| f.results.as_str()),
        f.map_or("?", |f| f.base_profile.as_str()),
        f.map_or("?", |f| f.config_key.as_str()),
        f.map_or("?", |f| f.traces.as_str()),
        f.map_or(0, |f| f.seed),
    );
    Ok(header + &body)
}

/// Markdown table of a fit: per point and metric, measured, base profile, fitted, residual.
pub fn fit_table(points: &[(PlanPoint, MeasuredPoint)], base: &Evaluation, fitted: &Evaluation) -> String {
    let mut o = String::from(
        "| point | metric | measured | datasheet profile | residual | fitted profile | residual |\n|---|---|---:|---:|---:|---:|---:|\n",
    );
    for (i, (p, m)) in points.iter().enumerate() {
        for (k, meas) in &m.metrics {
            let b = base.summaries[i].as_ref().map(|s| k.of(s)).unwrap_or(f64::NAN);
            let f = fitted.summaries[i].as_ref().map(|s| k.of(s)).unwrap_or(f64::NAN);
            o.push_str(&format!(
                "| {} | {} ({}) | {} | {} | {:+.1} % | {} | {:+.1} % |\n",
                p.id.rsplit('/').next().unwrap_or(&p.id),
                k.key(),
                k.unit(),
                fmt(*meas),
                fmt(b),
                residual_pct(*meas, b),
                fmt(f),
                residual_pct(*meas, f)
            ));
        }
    }
    o
}
