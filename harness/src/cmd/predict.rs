//! `sweep predict --config <key>` (and `--points FILE`, `predict_points.rs`): every point of a config on the virtual clock with the best
//! hardware profile there is for its model (fitted, else measured, else datasheet; and the
//! workload scales fitted with it), reported as `predicted`.

use super::RepoArgs;
use crate::plan::{self, Inputs, Labels, PlanRequest};
use crate::run::{self, RunOptions};
use crate::targets::sim::{ProfileChoice, SimRunner};
use anyhow::{Context, bail};
use engine::GpuSpec;
use engine::profiles::WorkloadScales;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["config", "points"])))]
pub struct PredictArgs {
    /// Config key whose points are predicted.
    #[arg(long)]
    pub config: Option<String>,
    /// A file of published points (the schema of shared/data/published/points.yaml): each point
    /// predicted from its server flags and printed beside what was published, with residuals.
    #[arg(long)]
    pub points: Option<PathBuf>,
    /// With --points: a JSON list of {config, scenario, conc, isl, osl, gpus, profile, published,
    /// predicted, residual_pct} instead of the table.
    #[arg(long, conflicts_with = "config")]
    pub json: bool,
    /// A price file (YAML: `currency`, and per GPU `per_gpu_hour` and its `source`;
    /// docs/formats.md) that adds each priced point's cost per million tokens (with --points,
    /// published and predicted). Without it, or for a GPU it does not name, no cost is shown.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Hardware profile: `best` (the built-in profile fitted to this model's measured points on
    /// the config's GPU, else one measured on that GPU, else its datasheet), `fitted` (the one
    /// fitted for this config), a profile name, or a profile YAML.
    #[arg(long, default_value = "best")]
    pub profile: String,
    /// Trace set (default: the one the profile was fitted on when it is on this machine, else the
    /// config's model family's corpus, as `sweep run --traces auto`).
    #[arg(long)]
    pub traces: Option<String>,
    /// Leave the fitted workload scales (output length, delays) out and replay the traces as recorded.
    #[arg(long)]
    pub no_workload_scales: bool,
    /// Profiling seconds per point (default: the plan's, 3600).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Output directory (default: reports/<UTC timestamp>-predict under the repository root).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Points at once (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Model profile (default: from the recipe's --model-path).
    #[arg(long)]
    pub model: Option<String>,
    #[command(flatten)]
    pub repo: RepoArgs,
    /// The predicted run is recorded in the results store.
    #[command(flatten)]
    pub record: super::store::RecordArgs,
}

/// The best built-in hardware profile for a config's first point (see `sweep run`).
fn best_profile(point: &crate::plan::PlanPoint, model: Option<&str>) -> anyhow::Result<(GpuSpec, String)> {
    let runner = point
        .row
        .get("runner")
        .and_then(|v| v.as_str())
        .ok_or_else(|| anyhow::anyhow!("--profile best: point {} has no `runner`; pass --profile NAME", point.id))?;
    let model = match model {
        Some(m) => Some(engine::ModelSpec::lookup(m).with_context(|| format!("--model {m}"))?),
        None => crate::targets::pools::point_model(point),
    };
    let g = crate::targets::sim::best_for_runner(runner, model.as_ref()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let name = g.name.clone();
    Ok((g, name))
}

/// Finds the profile: `fitted` means the built-in profile whose fit record names this config.
pub fn resolve_profile(profile: &str, config: &str) -> anyhow::Result<(GpuSpec, String)> {
    if profile == "fitted" {
        let all = GpuSpec::builtin();
        let hit = all.iter().find(|g| g.fit.as_ref().is_some_and(|f| f.config_key == config));
        return match hit {
            Some(g) => Ok((g.clone(), g.name.clone())),
            None => bail!(
                "--profile fitted: no built-in fitted profile for {config} (fitted: {}); run `sweep calibrate fit --config {config} …` and pass --profile <its YAML>",
                all.iter().filter(|g| g.fit.is_some()).map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        };
    }
    let g = GpuSpec::lookup(profile).with_context(|| format!("--profile {profile}"))?;
    // A YAML file is passed on by path so the engine reads the same file.
    let choice = if profile.ends_with(".yaml") || profile.ends_with(".yml") { profile.to_string() } else { g.name.clone() };
    Ok((g, choice))
}

/// The trace spec a fit recorded (`<spec> (N traces)`).
pub fn fit_trace_spec(recorded: &str) -> &str {
    recorded.rsplit_once(" (").map_or(recorded, |(s, _)| s)
}

/// Whether a trace spec can be read here (synthetic always can).
fn available(spec: &str) -> bool {
    spec.starts_with("synthetic")
        || spec
            .strip_prefix("like:")
            .is_some_and(|n| crate::trace::published::PublishedStats::embedded(n.split(':').next().unwrap_or("")).is_some())
        || spec.split(',').all(|p| Path::new(p).exists())
}

pub fn run(a: &PredictArgs) -> anyhow::Result<ExitCode> {
    let prices = a.prices.as_deref().map(crate::price::PriceTable::load).transpose().map_err(|p| anyhow::anyhow!("{p}"))?;
    if let Some(points) = &a.points {
        let o = super::predict_points::PointsOptions {
            json: a.json,
            seed: a.seed,
            duration_s: a.duration.unwrap_or(3600.0),
            traces: a.traces.clone(),
            profile: Some(a.profile.clone()),
            prices,
        };
        return super::predict_points::run(points, &o);
    }
    let config = a.config.clone().expect("clap requires --config or --points");
    let (repo, plan) = config_plan(a, &config)?;
    let first = plan.points().next().cloned().expect("config_plan returns a plan with the config's points");
    let (gpu, choice) = if a.profile == "best" { best_profile(&first, a.model.as_deref())? } else { resolve_profile(&a.profile, &config)? };
    let scales = if a.no_workload_scales { WorkloadScales::default() } else { gpu.fit.as_ref().map(|f| f.workload).unwrap_or_default() };
    let (spec, note) = trace_spec(a.traces.as_deref(), gpu.fit.as_ref());
    let (pools, trace_set) = if scales.is_identity() {
        // Compiled one trace at a time: a synthesized published corpus is gigabytes as hash ids.
        let parsed = spec.parse().map_err(|e| anyhow::anyhow!("--traces {spec}: {e}"))?;
        let pools = crate::targets::pools::PointPools::new(parsed, a.seed);
        let set = pools.pool_for(&first).map_err(anyhow::Error::msg)?.trace_set;
        (pools, format!("{set}{note}"))
    } else {
        let traces = crate::fit::load_traces(&spec)?;
        let pool = crate::fit::compile(&traces, scales, a.seed);
        let trace_set = format!("{spec}{note}, fitted workload scales: {}", scales.describe());
        (crate::targets::pools::PointPools::fixed(pool, trace_set.clone()), trace_set)
    };
    let mut r = SimRunner::with_pools(Arc::new(pools));
    r.duration_s = a.duration;
    r.profiles = ProfileChoice { model: a.model.clone(), hardware: Some(choice.clone()) };
    if let Some(j) = a.jobs {
        r.jobs = j.max(1);
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let out = a.out.clone().unwrap_or_else(|| repo.root.join("reports").join(format!("{}-predict", super::run::utc_stamp(now))));
    let opts = RunOptions {
        run_id: out.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "predict".into()),
        labels: vec!["predict".into(), config.clone()],
        target: format!("sim (hardware profile {})", gpu.name),
        out: out.clone(),
        resume: false,
        only: Vec::new(),
        seed: a.seed,
        replicates: 200,
        seed_replicates: 0,
        identity: None,
        verbose: true,
        eval_limit: None,
    };
    eprintln!("sweep predict: {} point(s) of {} with hardware profile {}; traces {trace_set}", plan.points().count(), config, gpu.name);
    let t0 = std::time::Instant::now();
    let summary = run::execute(&plan, &opts, &r, &Arc::new(AtomicBool::new(false))).map_err(anyhow::Error::msg)?;
    let files = crate::report::write_all(&summary, &out).map_err(anyhow::Error::msg)?;
    if let Some(f) = &gpu.fit {
        append_fit_section(&out, &gpu.name, f)?;
    }
    crate::outln!();
    crate::out!("{}", super::run::summary_table(&summary));
    if let Some(t) = &prices {
        crate::out!("\n{}", crate::report::summary::cost_table(&summary, t));
    }
    crate::outln!();
    crate::outln!(
        "{} point(s) predicted in {:.1} s (result_kind predicted; hardware profile {}, traces {trace_set})",
        summary.points.len(),
        t0.elapsed().as_secs_f64(),
        gpu.name
    );
    crate::outln!("report: {}", files.first().map(|f| f.display().to_string()).unwrap_or_default());
    if let Some(line) = super::store::record_quietly(&out, &a.record, Some(&repo.root), "predict") {
        crate::outln!("{line}");
    }
    Ok(if summary.points.iter().all(|p| p.ok()) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The plan of the changelog's latest entry narrowed to `--config`'s points (no canary of
/// another config).
fn config_plan(a: &PredictArgs, config: &str) -> anyhow::Result<(crate::repo::Repo, plan::Plan)> {
    let repo = a.repo.repo().map_err(|p| anyhow::anyhow!("{p}"))?;
    let inputs = Inputs::load(&repo).map_err(|p| anyhow::anyhow!("{p}"))?;
    let mut plan = plan::build(
        &repo,
        &inputs,
        &PlanRequest { labels: Labels::parse(&["full-sweep-fail-fast"]).map_err(anyhow::Error::msg)?, base: None, no_evals: true },
    )
    .map_err(|p| anyhow::anyhow!("{p}"))?;
    let planned: Vec<String> = plan.points().map(|p| p.config_key.clone()).collect();
    let planned: Vec<&str> = planned.iter().map(String::as_str).collect();
    if plan.canary.as_ref().is_some_and(|c| c.config_key != config) {
        plan.canary = None;
    }
    for m in &mut plan.matrices {
        m.points.retain(|p| p.config_key == config);
    }
    plan.matrices.retain(|m| !m.points.is_empty());
    if plan.points().next().is_none() {
        return Err(super::config_not_planned(config, &inputs.master, &planned));
    }
    Ok((repo, plan))
}

/// The trace set replayed and a note on why: `--traces`, else the set the profile was fitted
/// on when it is here, else the config's family corpus (`--traces auto`).
fn trace_spec(traces: Option<&str>, fit: Option<&engine::profiles::FitRecord>) -> (String, String) {
    match (traces, fit) {
        (Some(t), _) => (t.to_string(), String::new()),
        (None, Some(f)) => {
            let s = fit_trace_spec(&f.traces).to_string();
            if available(&s) {
                (s, " (the trace set the profile was fitted on)".to_string())
            } else if let Some(c) = &f.corpus {
                // The fit's corpus file is a synthesis: the family corpus synthesizes the same
                // traces in memory (same statistics and seed).
                (
                    crate::targets::pools::AUTO.to_string(),
                    format!(" (the fit's corpus file {s} is not here; synthesized in memory instead, as `{}` writes it)", c.command),
                )
            } else {
                (
                    crate::targets::pools::AUTO.to_string(),
                    format!(
                        " (the fit's trace set {s} is not on this machine; this config's family corpus instead, see docs/calibration.md)"
                    ),
                )
            }
        }
        (None, None) => (crate::targets::pools::AUTO.to_string(), String::new()),
    }
}

/// Adds the profile's fit (where it came from, its residuals on the measured points) to the
/// predicted run's report, so the predictions are read next to how well the profile fits.
fn append_fit_section(out: &Path, name: &str, f: &engine::profiles::FitRecord) -> anyhow::Result<()> {
    let mut md = format!(
        "\n## Hardware profile `{name}`: its fit\n\nFitted by `sweep calibrate fit` on {} point(s) of `{}` from `{}`, traces {}, seed {}, {} s per point; loss {:.4}; workload scales: {}{}. Residual = (predicted - measured) / measured.\n\n| point | metric | measured | predicted by the profile | residual |\n|---|---|---:|---:|---:|\n",
        f.points.len(),
        f.config_key,
        f.results,
        f.traces,
        f.seed,
        f.duration_s,
        f.loss,
        f.workload.describe(),
        if f.trace_orders > 1 {
            format!("; predicted = mean over {} trace orders (this report replays one: the file order)", f.trace_orders)
        } else {
            String::new()
        }
    );
    for p in &f.points {
        for (k, r) in &p.metrics {
            md.push_str(&format!(
                "| {} | {k} | {} | {} | {:+.1} % |\n",
                p.id.rsplit('/').next().unwrap_or(&p.id),
                crate::fit::fmt(r.measured),
                crate::fit::fmt(r.predicted),
                r.residual_pct
            ));
        }
    }
    let path = out.join("report.md");
    let mut text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.push_str(&md);
    crate::problem::atomic_write(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    let hp = out.join("report.html");
    let html = std::fs::read_to_string(&hp).with_context(|| format!("reading {}", hp.display()))?;
    let esc = crate::html::escape;
    let mut t = format!(
        "<h2>Hardware profile <code>{}</code>: its fit</h2>\n<p>{} point(s) of <code>{}</code>, traces {}, seed {}, loss {:.4}.</p>\n<table id=\"fit\"><tr><th>point</th><th>metric</th><th>measured</th><th>predicted</th><th>residual</th></tr>\n",
        esc(name),
        f.points.len(),
        esc(&f.config_key),
        esc(&f.traces),
        f.seed,
        f.loss
    );
    for p in &f.points {
        for (k, r) in &p.metrics {
            t.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:+.1} %</td></tr>\n",
                esc(&p.id),
                esc(k),
                crate::fit::fmt(r.measured),
                crate::fit::fmt(r.predicted),
                r.residual_pct
            ));
        }
    }
    t.push_str("</table>\n");
    let html = html.replace("</body></html>", &format!("{t}</body></html>"));
    crate::problem::atomic_write(&hp, html.as_bytes()).with_context(|| format!("writing {}", hp.display()))?;
    Ok(())
}
