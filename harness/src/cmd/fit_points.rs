//! `sweep calibrate fit --points FILE…`: one fit across the configs, GPUs and models of published
//! points files (`fit::joint`), writing a fitted profile per GPU.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use engine::GpuSpec;

use super::fit::{FitArgs, params_or};
use crate::fit::{self, joint};
use crate::published;
use crate::targets::published as point_sim;

pub fn run(a: &FitArgs) -> anyhow::Result<()> {
    refuse_single_config_options(a)?;
    let t0 = std::time::Instant::now();
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).max(1);
    let problem = problem(a, jobs)?;
    let out_dir = match &a.out {
        Some(d) => d.clone(),
        None => a.repo.repo().map_err(|p| anyhow::anyhow!("{p}"))?.root.join("engine/profiles/hardware"),
    };
    eprintln!(
        "joint fit of {} point(s) on {} GPU(s) [{}]: per GPU [{}], shared [{}]; {} restart(s) x {} evaluations, {} at once",
        problem.points.len(),
        problem.groups.len(),
        problem.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", "),
        problem.gpu_params.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        problem.shared_params.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        a.restarts.max(1),
        a.max_evals,
        jobs
    );
    let base = problem.evaluate_profiles(&problem.groups);
    let bar = indicatif::ProgressBar::new(1 + a.restarts.max(1) as u64 * a.max_evals as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} evaluations  {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let mut best = f64::INFINITY;
    let outcome = problem.fit(a.restarts, a.max_evals.max(2), |n, loss| {
        best = best.min(loss);
        bar.set_position(n);
        bar.set_message(format!("best loss {best:.4}"));
    });
    bar.finish_and_clear();
    let wall = t0.elapsed().as_secs_f64();
    let prov = joint::JointProvenance {
        files: a.points.iter().map(|p| p.display().to_string()).collect(),
        restarts: a.restarts.max(1),
        wall_s: wall,
    };
    let mut md = format!(
        "Joint fit of {} published point(s) from {} on {}: loss {:.4} (base profiles {:.4}), {} evaluations in {wall:.0} s.\n\n",
        problem.points.len(),
        prov.files.join(", "),
        problem.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", "),
        outcome.evaluation.loss,
        base.loss,
        outcome.evaluations
    );
    md.push_str("| profile | parameter | base | fitted |\n|---|---|---:|---:|\n");
    let fitted: Vec<GpuSpec> = (0..problem.groups.len()).map(|g| problem.fitted_profile(g, &outcome, &prov)).collect();
    let borrowed = joint::borrowed_profiles(&fitted);
    for p in fitted.iter().chain(&borrowed) {
        for (k, v) in &p.fit.as_ref().expect("a fitted profile has its record").parameters {
            md.push_str(&format!("| {} | {k} | {} | {} |\n", p.name, fit::fmt(v.start), fit::fmt(v.value)));
        }
        let yaml = fit::profile_yaml(p)?;
        GpuSpec::from_yaml(&p.name, &yaml).context("the fitted profile does not read back")?;
        let path = out_dir.join(format!("{}.yaml", p.name));
        crate::problem::atomic_write(&path, yaml.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    md.push('\n');
    md.push_str(&joint::table(&problem, &base, &outcome.evaluation));
    crate::outln!("{md}");
    if let Some(m) = &a.markdown {
        crate::problem::atomic_write(m, md.as_bytes()).with_context(|| format!("writing {}", m.display()))?;
    }
    Ok(())
}

/// The options of a one-config fit have no meaning here: say so rather than ignore them.
fn refuse_single_config_options(a: &FitArgs) -> anyhow::Result<()> {
    let given: Vec<&str> = [
        (!a.weights.is_empty(), "--weights"),
        (!a.start.is_empty(), "--start"),
        (a.base.is_some(), "--base (each GPU starts from its datasheet profile)"),
        (a.model.is_some(), "--model (each config names its model)"),
        (a.name.is_some(), "--name (profiles are named <gpu>-fitted)"),
        (!a.alias.is_empty(), "--alias"),
        (a.coarse_duration.is_some(), "--coarse-duration"),
        (a.traces_like.is_some(), "--traces-like"),
        (a.trace_orders != 1, "--trace-orders"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    anyhow::ensure!(
        given.is_empty(),
        "{} not used by a joint fit (--points); drop it, or fit one config with --results and --config",
        given.join(", ")
    );
    Ok(())
}

/// The points of every file, grouped by GPU (each group's base: the GPU's datasheet profile), and
/// the trace sets their AgentX points replay, loaded once.
fn problem(a: &FitArgs, jobs: usize) -> anyhow::Result<joint::JointProblem> {
    let mut groups: Vec<GpuSpec> = Vec::new();
    let mut points = Vec::new();
    let mut pools = BTreeMap::new();
    for path in &a.points {
        let file = published::load(path).map_err(|p| anyhow::anyhow!("{p}"))?;
        for c in &file.configs {
            let model =
                engine::ModelSpec::lookup(&c.model).with_context(|| format!("{}: config {}: model {}", path.display(), c.key, c.model))?;
            let base =
                crate::targets::sim::hardware_for_runner(&c.hardware).with_context(|| format!("{}: config {}", path.display(), c.key))?;
            let group = match groups.iter().position(|g| g.name == base.name) {
                Some(i) => i,
                None => {
                    groups.push(base);
                    groups.len() - 1
                }
            };
            let traces = (c.scenario != "fixed-seq-len").then(|| point_sim::trace_spec(&model, a.traces.as_deref()));
            if let Some(spec) = &traces
                && !pools.contains_key(spec)
            {
                eprintln!("loading traces {spec}");
                let pool = crate::targets::pools::load(spec, a.seed).with_context(|| format!("traces {spec} for {}", c.key))?;
                pools.insert(spec.clone(), Arc::new(pool));
            }
            for p in &c.points {
                let mut jp = joint::JointPoint {
                    config: c.clone(),
                    point: p.clone(),
                    model: model.clone(),
                    group,
                    traces: traces.clone(),
                    excluded: false,
                };
                jp.excluded = a.exclude.iter().any(|x| jp.is_named(x));
                points.push(jp);
            }
        }
    }
    anyhow::ensure!(!points.is_empty(), "the points files hold no point");
    for x in &a.exclude {
        let hit = points.iter().any(|p| p.is_named(x));
        anyhow::ensure!(hit, "--exclude {x}: no point has this id or config key (ids look like `dsr1-fp8-h200-sglang 1024/1024 c4`)");
    }
    anyhow::ensure!(points.iter().any(|p| !p.excluded), "--exclude leaves no point to fit");
    // The slowest points (AgentX replays) first, so the parallel evaluation ends together.
    points.sort_by_key(|p| (p.traces.is_none(), std::cmp::Reverse(p.point.conc)));
    let gpu_params = params_or(&a.params, fit::JOINT_GPU_PARAMS)?;
    let shared_params = params_or(&a.shared_params, fit::JOINT_SHARED_PARAMS)?;
    if let Some(w) = gpu_params.iter().chain(&shared_params).find(|p| p.is_workload()) {
        anyhow::bail!("{}: a workload scale, not fitted by a joint fit (published points replay their scenario as published)", w.name);
    }
    if let Some(p) = gpu_params.iter().find(|p| shared_params.iter().any(|q| q.name == p.name)) {
        anyhow::bail!("{} is in both --params and --shared-params: a parameter is either each GPU's or shared", p.name);
    }
    Ok(joint::JointProblem { points, groups, gpu_params, shared_params, pools, seed: a.seed, duration_s: a.duration, jobs })
}
