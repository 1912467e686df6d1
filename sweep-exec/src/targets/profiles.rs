//! Which hardware profile a point runs on: the GPU a runner label names, and the best profile
//! of that GPU for a model (fitted to the model, the GPU's joint fit, measured curves, a fitted
//! cost borrowed from a GPU of the same architecture, or the datasheet).

use engine::{GpuSpec, ModelSpec};

use super::sim::SimError;

/// The hardware profile for a master-config runner label: `cluster:gb300-nv` → `gb300`,
/// `h200-dgxc` → `h200`, `b200` → `b200` (tries the whole label, then shorter `-` prefixes).
pub fn hardware_for_runner(runner: &str) -> Result<GpuSpec, SimError> {
    let label = runner.rsplit(':').next().unwrap_or(runner);
    let parts: Vec<&str> = label.split(['-', '_']).collect();
    for n in (1..=parts.len()).rev() {
        if let Ok(g) = GpuSpec::lookup(&parts[..n].join("-")) {
            return Ok(g);
        }
    }
    let known: Vec<String> = GpuSpec::builtin().into_iter().map(|g| g.name).collect();
    Err(SimError::Profile(format!(
        "no hardware profile matches runner `{runner}` (known: {}); pass --hardware NAME or a profile .yaml",
        known.join(", ")
    )))
}

/// The best built-in hardware profile for a model on `base`'s hardware: one fitted to measured
/// serving results of this model on it, else one fitted jointly across the GPU's published
/// configs (its parameters are the GPU's, shared by every model), else one measured on the GPU
/// (`<base>-measured`), else one carrying the fitted cost of a GPU of the same architecture
/// (`<base>-from-<fitted>`), else the datasheet profile itself.
pub fn best_hardware(base: GpuSpec, model: &ModelSpec) -> GpuSpec {
    let all = GpuSpec::builtin();
    let own = |g: &&GpuSpec| g.name.starts_with(&format!("{}-", base.name));
    let fitted = all
        .iter()
        .find(|g| g.fit.as_ref().is_some_and(|f| f.base_profile == base.name && f.model_profile == model.name && f.models.is_empty()));
    let joint = || {
        all.iter()
            .filter(own)
            .find(|g| g.fit.as_ref().is_some_and(|f| f.base_profile == base.name && !f.models.is_empty() && f.borrowed_from.is_none()))
    };
    let measured = || all.iter().filter(own).find(|g| g.measured.is_some());
    // No point of this GPU: the cost a fitted GPU of its architecture was fitted to.
    let borrowed =
        || all.iter().filter(own).find(|g| g.fit.as_ref().is_some_and(|f| f.borrowed_from.is_some() && f.base_profile == base.name));
    fitted.or_else(joint).or_else(measured).or_else(borrowed).cloned().unwrap_or(base)
}

/// The best profile on a runner's GPU for a model (the datasheet one when the model is unknown).
pub fn best_for_runner(runner: &str, model: Option<&ModelSpec>) -> Result<GpuSpec, SimError> {
    let base = hardware_for_runner(runner)?;
    Ok(match model {
        Some(m) => best_hardware(base, m),
        None => base,
    })
}

/// What a hardware profile rests on: `fitted` (to measured serving results), `measured` (GPU
/// operator curves) or `datasheet`.
pub fn hardware_kind(gpu: &GpuSpec) -> &'static str {
    if gpu.fit.is_some() {
        "fitted"
    } else if gpu.measured.is_some() {
        "measured"
    } else {
        "datasheet"
    }
}

/// A profile's standing against published points: the median |residual| of its fit, or that it
/// was fitted to none.
pub fn profile_residuals(g: &engine::GpuSpec) -> String {
    match &g.fit {
        Some(f) if f.borrowed_from.is_some() => format!(
            "fitted to no published point of this GPU: cost parameters of {} (same architecture), {}",
            f.borrowed_from.as_deref().unwrap_or_default(),
            standing(f)
        ),
        Some(f) => standing(f),
        None => "fitted to no published point of this GPU".to_string(),
    }
}

fn standing(f: &engine::profiles::FitRecord) -> String {
    let mut r: Vec<f64> =
        f.points.iter().flat_map(|p| p.metrics.values().map(|m| m.residual_pct.abs())).filter(|x| x.is_finite()).collect();
    r.sort_by(f64::total_cmp);
    let med = if r.is_empty() { f64::NAN } else { crate::metrics::percentile_linear(&r, 0.5) };
    format!("fitted to {} published point(s) of {}: median |residual| {med:.1} %", f.points.len(), f.config_key)
}
