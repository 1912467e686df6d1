//! `sweep calibrate fit`: fit the reference engine's cost parameters to measured points, and
//! write a fitted hardware profile next to the datasheet one.

use super::RepoArgs;
use crate::fit::{self, FitOptions, FitProblem, FitProvenance};
use crate::plan::{self, Inputs, Labels, PlanPoint, PlanRequest};
use anyhow::{Context, bail};
use engine::GpuSpec;
use engine::profiles::WorkloadScales;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("measured").required(true).args(["results", "points"])))]
pub struct FitArgs {
    /// Measured results: a `sweep run` directory (its measured points) or a YAML file with a
    /// `calibration-results` list (arm, conc, tput_per_gpu, e2el_p75/p90, interactivity_p90, ttft_*).
    #[arg(long, requires = "config")]
    pub results: Option<PathBuf>,
    /// Config key whose recipes are replayed (e.g. dsv41flash-fp4-gb300-sglang-agentic-dspark).
    #[arg(long, requires = "results")]
    pub config: Option<String>,
    /// Published points files (the schema of shared/data/published/points.yaml; repeat or
    /// comma-separate): one joint fit across their configs, GPUs and models, each point built
    /// from its own server flags. Writes `<gpu>-fitted.yaml` per GPU.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["results", "config"])]
    pub points: Vec<PathBuf>,
    /// With --points: points left out of the fit (still predicted and tabled), each a point id
    /// as the table prints it (`config cN`, `config ISL/OSL cN`) or a whole config key.
    #[arg(long, value_delimiter = ',', requires = "points")]
    pub exclude: Vec<String>,
    /// With --points: parameters shared by every GPU (the framework's host costs).
    #[arg(long, value_delimiter = ',', requires = "points", default_values_t = fit::JOINT_SHARED_PARAMS.iter().map(|s| s.to_string()).collect::<Vec<_>>())]
    pub shared_params: Vec<String>,
    /// Trace set replayed: `synthetic[:N[:SEED]]` or Weka/mooncake files (use the set the
    /// measured runs used).
    /// Default `synthetic`; with --points, each AgentX point's model family's corpus.
    #[arg(long)]
    pub traces: Option<String>,
    /// Profiling seconds per simulated point (the measured runs' own duration is most faithful;
    /// shorter is faster and noisier).
    #[arg(long, default_value_t = 1200.0)]
    pub duration: f64,
    /// Trace orders per point: each point is replayed from this many evenly spaced starting
    /// traces and its metrics averaged (low concurrency replays only the first few sessions).
    #[arg(long, default_value_t = 1)]
    pub trace_orders: usize,
    /// Nelder–Mead restarts.
    #[arg(long, default_value_t = 3)]
    pub restarts: u32,
    /// Evaluations per restart.
    #[arg(long, default_value_t = 60)]
    pub max_evals: usize,
    /// Seed of the replays and of the restarts.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Parameters to fit (comma-separated; with --points, per GPU). Cost: eta_bw, eta_flops,
    /// tau_layer_us, tau_step_us, eager_overhead_us, eager_layer_us, allreduce_latency_us,
    /// a2a_latency_us; workload: osl_scale, osl_exp, isl_scale, delay_scale, delay_cap_s
    /// (docs/calibration.md says what each means). Default: eta_bw, eta_flops, tau_layer_us,
    /// tau_step_us, a2a_latency_us; with --points eta_bw, tau_layer_us, tau_step_us.
    #[arg(long, value_delimiter = ',')]
    pub params: Vec<String>,
    /// Loss weight overrides, `metric=weight` (comma-separated), e.g. `ttft_p99=0,e2el_p90=2`.
    #[arg(long, value_delimiter = ',')]
    pub weights: Vec<String>,
    /// Start values of the first restart, `param=value` (default: the base profile's values).
    #[arg(long, value_delimiter = ',')]
    pub start: Vec<String>,
    /// Starting hardware profile (default: the one matching the config's runner).
    #[arg(long)]
    pub base: Option<String>,
    /// Model profile (default: from the recipe's --model-path).
    #[arg(long)]
    pub model: Option<String>,
    /// Name of the fitted profile (default: <base>-fitted-<model prefix>).
    #[arg(long)]
    pub name: Option<String>,
    /// Aliases of the fitted profile (default: <base>-fitted).
    #[arg(long, value_delimiter = ',')]
    pub alias: Vec<String>,
    /// Where the profile goes (default: engine/profiles/hardware/<name>.yaml in the repository).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the fit table (Markdown) here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Simulations at once (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Two-level search: run the restarts at this many profiling seconds per point (targets
    /// corrected by the start point's short / full ratio), then polish at --duration.
    #[arg(long)]
    pub coarse_duration: Option<f64>,
    /// Evaluations of the full-duration polish after a coarse pass.
    #[arg(long, default_value_t = 30)]
    pub polish_evals: usize,
    /// Initial simplex edge of the polish (unit-cube coordinates; the coarse search uses 0.2).
    #[arg(long, default_value_t = 0.05)]
    pub polish_step: f64,
    /// The --traces file was synthesized by `sweep trace gen --like STATS.yaml`: record how to
    /// regenerate it (stats file, --traces-seed, size) in the profile.
    #[arg(long)]
    pub traces_like: Option<String>,
    /// Seed the --traces-like corpus was generated with.
    #[arg(long, default_value_t = 42)]
    pub traces_seed: u64,
    /// Print where the time went (loading, simulations per point and stage, memo hits, early
    /// stops) to stderr.
    #[arg(long)]
    pub timings: bool,
    #[command(flatten)]
    pub repo: RepoArgs,
}

/// The plan's points of one config key (the changelog's latest entry must select it).
pub fn config_points(repo_args: &RepoArgs, key: &str) -> anyhow::Result<(crate::repo::Repo, Vec<PlanPoint>)> {
    let repo = repo_args.repo().map_err(|p| anyhow::anyhow!("{p}"))?;
    let inputs = Inputs::load(&repo).map_err(|p| anyhow::anyhow!("{p}"))?;
    let plan = plan::build(
        &repo,
        &inputs,
        &PlanRequest { labels: Labels::parse(&["full-sweep-fail-fast"]).map_err(anyhow::Error::msg)?, base: None, no_evals: true },
    )
    .map_err(|p| anyhow::anyhow!("{p}"))?;
    let pts: Vec<PlanPoint> = plan.points().filter(|p| p.config_key == key).cloned().collect();
    if pts.is_empty() {
        let planned: Vec<&str> = plan.points().map(|p| p.config_key.as_str()).collect();
        return Err(super::config_not_planned(key, &inputs.master, &planned));
    }
    Ok((repo, pts))
}

pub fn run(a: &FitArgs) -> anyhow::Result<()> {
    if !a.points.is_empty() {
        return super::fit_points::run(a);
    }
    let (Some(results), Some(config)) = (&a.results, &a.config) else {
        bail!("give --results and --config (one config's measured points), or --points FILE (a joint fit)");
    };
    let t0 = std::time::Instant::now();
    let (repo, plan_points) = config_points(&a.repo, config)?;
    let measured = fit::load_measured(results, config)?;
    let points = fit::match_points(&plan_points, &measured)?;
    let params = params_or(&a.params, fit::DEFAULT_PARAMS)?;
    let runner = points[0].0.row.get("runner").and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let base = match &a.base {
        Some(b) => GpuSpec::lookup(b).with_context(|| format!("--base {b}"))?,
        None => crate::targets::sim::hardware_for_runner(&runner)?,
    };
    let prefix = points[0].0.row.get("model-prefix").and_then(|v| v.as_str()).unwrap_or("model").to_string();
    let name = a.name.clone().unwrap_or_else(|| format!("{}-fitted-{prefix}", base.name));
    let aliases = if a.alias.is_empty() { vec![format!("{}-fitted", base.name)] } else { a.alias.clone() };
    let out = a.out.clone().unwrap_or_else(|| repo.root.join("engine/profiles/hardware").join(format!("{name}.yaml")));
    eprintln!("sweep calibrate fit: loading traces {}", trace_spec(a));
    let t_load = std::time::Instant::now();
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).max(1);
    let (traces, cache, n_traces) = load_traces(a, &params, jobs)?;
    let load_s = t_load.elapsed().as_secs_f64();
    let model_profile = model_profile(&points[0].0, a.model.as_deref())?;
    let problem = FitProblem {
        points,
        trace_set: format!("{} ({} traces)", trace_spec(a), n_traces),
        traces,
        model: a.model.clone(),
        base: base.clone(),
        base_scales: WorkloadScales::default(),
        seed: a.seed,
        duration_s: Some(a.duration),
        jobs,
        weights: fit::parse_weights(&a.weights)?,
        orders: a.trace_orders.max(1),
        cache,
    };
    let opts = FitOptions {
        params,
        restarts: a.restarts.max(1),
        max_evals: a.max_evals.max(2),
        seed: a.seed,
        start: start_values(&a.start)?,
        coarse: coarse_options(a)?,
    };
    announce(config, &base.name, a, &problem, &opts);
    let outcome = fit_with_progress(&problem, &opts);
    let wall = t0.elapsed().as_secs_f64();
    if a.timings {
        eprintln!(
            "timings: {:.1} s wall; traces read and compiled in {load_s:.1} s; {} evaluations, {} simulations\n{}",
            wall,
            outcome.evaluations,
            problem.cache.timings.simulations(),
            problem.cache.timings.table(&problem.points)
        );
    }
    let prov = provenance(a, &name, aliases, model_profile, opts.restarts, wall);
    let g = fit::fitted_profile(&problem, &opts, &outcome, &prov);
    let yaml = fit::profile_yaml(&g)?;
    GpuSpec::from_yaml(&out.display().to_string(), &yaml).context("the fitted profile does not read back")?;
    crate::problem::atomic_write(&out, yaml.as_bytes()).with_context(|| format!("writing {}", out.display()))?;
    let md = fit_markdown(a, &base.name, &name, &problem, &opts, &outcome, wall);
    crate::outln!("{md}");
    crate::outln!("wrote {}", out.display());
    if let Some(m) = &a.markdown {
        crate::problem::atomic_write(m, md.as_bytes()).with_context(|| format!("writing {}", m.display()))?;
    }
    Ok(())
}

/// The line that says what a one-config fit is about to do.
fn announce(config: &str, base: &str, a: &FitArgs, problem: &FitProblem, opts: &FitOptions) {
    eprintln!(
        "fitting {} parameter(s) [{}] of {} on {} point(s) of {} ({} s per point, {} trace order(s), {} restart(s) x {} evaluations, {} at once)",
        opts.params.len(),
        opts.params.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        base,
        problem.points.len(),
        config,
        a.duration,
        problem.orders,
        opts.restarts,
        opts.max_evals,
        problem.jobs
    );
}

/// The trace set of a one-config fit (`--traces`, default `synthetic`).
fn trace_spec(a: &FitArgs) -> &str {
    a.traces.as_deref().unwrap_or("synthetic")
}

/// `--params`, else `default`, as parameters.
pub fn params_or(given: &[String], default: &[&str]) -> anyhow::Result<Vec<fit::Param>> {
    let names: Vec<&str> = if given.is_empty() { default.to_vec() } else { given.iter().map(|s| s.trim()).collect() };
    Ok(names.into_iter().map(fit::param).collect::<Result<Vec<_>, _>>()?)
}

/// The trace set: read as traces when a workload scale is fitted (each candidate compiles its
/// own scaled set), else compiled while reading into the cache's recorded pool. Returns the
/// traces (empty in the second case), the cache and how many traces were read.
fn load_traces(a: &FitArgs, params: &[fit::Param], jobs: usize) -> anyhow::Result<(Vec<crate::trace::Trace>, fit::FitCache, usize)> {
    // Without a workload scale to fit, every candidate replays the traces as recorded: compile
    // them while reading and keep only the plans.
    if params.iter().any(fit::Param::is_workload) {
        let t = fit::load_traces(trace_spec(a))?;
        let n = t.len();
        Ok((t, fit::FitCache::default(), n))
    } else {
        let (pool, n) = fit::load_pool(trace_spec(a), a.seed, jobs)?;
        Ok((Vec::new(), fit::FitCache::with_pool(pool), n))
    }
}

/// The model profile's name recorded in the fit: `--model`, else the recipe's `--model-path`
/// ("?" when neither names a known profile).
fn model_profile(point: &PlanPoint, model: Option<&str>) -> anyhow::Result<String> {
    let launch = point.launch.as_ref().context("the point has no resolved server command")?;
    let mp = model.map(str::to_string).or_else(|| {
        let i = launch.worker_argv.iter().position(|x| x == "--model-path")?;
        launch.worker_argv.get(i + 1).cloned()
    });
    Ok(engine::ModelSpec::lookup(mp.as_deref().unwrap_or_default()).map(|m| m.name).unwrap_or_else(|_| "?".into()))
}

/// `--start param=value` pairs, each inside its parameter's bounds.
fn start_values(start: &[String]) -> anyhow::Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for s in start {
        let (k, v) = s.split_once('=').with_context(|| format!("--start {s}: expected param=value"))?;
        let p = fit::param(k.trim())?;
        let v: f64 = v.trim().parse().with_context(|| format!("--start {s}: not a number"))?;
        if !(p.lower..=p.upper).contains(&v) {
            bail!("--start {s}: outside the bounds {} – {}", p.lower, p.upper);
        }
        out.push((p.name.to_string(), v));
    }
    Ok(out)
}

/// The two-level search's settings, when `--coarse-duration` asks for one.
fn coarse_options(a: &FitArgs) -> anyhow::Result<Option<fit::CoarseOptions>> {
    Ok(match a.coarse_duration {
        Some(d) if d > 0.0 && d < a.duration => {
            Some(fit::CoarseOptions { duration_s: d, polish_evals: a.polish_evals.max(2), polish_step: a.polish_step.clamp(1e-3, 0.5) })
        }
        Some(d) => bail!("--coarse-duration {d}: must be above 0 and below --duration {}", a.duration),
        None => None,
    })
}

/// Runs the fit with a progress bar of evaluations and the best loss so far.
fn fit_with_progress(problem: &FitProblem, opts: &FitOptions) -> fit::FitOutcome {
    let total = 1 + opts.restarts as u64 * opts.max_evals as u64 + opts.coarse.map_or(0, |c| 2 + c.polish_evals as u64);
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} evaluations  {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let outcome = fit::fit(problem, opts, |n, best| {
        bar.set_position(n.min(total));
        bar.set_message(format!("best loss {best:.4}"));
    });
    bar.finish_and_clear();
    outcome
}

/// What the fitted profile records about how it was made.
fn provenance(a: &FitArgs, name: &str, aliases: Vec<String>, model_profile: String, restarts: u32, wall: f64) -> FitProvenance {
    FitProvenance {
        name: name.to_string(),
        aliases,
        config_key: a.config.clone().unwrap_or_default(),
        model_profile,
        results: a.results.as_ref().map(|r| r.display().to_string()).unwrap_or_default(),
        restarts,
        wall_s: wall,
        corpus: a.traces_like.as_ref().map(|like| engine::profiles::CorpusRecord {
            like: like.clone(),
            seed: a.traces_seed,
            bytes: std::fs::metadata(trace_spec(a)).map(|m| m.len()).unwrap_or(0),
            command: format!("sweep trace gen --like {like} --seed {} -o {}", a.traces_seed, trace_spec(a)),
        }),
    }
}

/// The fit's Markdown: a summary line, the two-level counts, the parameters before and after,
/// and the per-point residual table.
fn fit_markdown(
    a: &FitArgs,
    base_name: &str,
    name: &str,
    problem: &FitProblem,
    opts: &FitOptions,
    outcome: &fit::FitOutcome,
    wall: f64,
) -> String {
    let table = fit::fit_table(&problem.points, &outcome.base_evaluation, &outcome.evaluation);
    let mut md = format!(
        "Fit of `{}` ({} → `{name}`) on {} point(s) of `{}`, traces {}, seed {}, {} s per point, metrics averaged over {} trace order(s): loss {:.4} (datasheet profile {:.4}), {} evaluations in {:.0} s; restarts ended at [{}].\n\n",
        a.results.as_ref().map(|r| r.display().to_string()).unwrap_or_default(),
        base_name,
        problem.points.len(),
        a.config.as_deref().unwrap_or_default(),
        problem.trace_set,
        a.seed,
        a.duration,
        problem.orders,
        outcome.evaluation.loss,
        outcome.base_evaluation.loss,
        outcome.evaluations,
        wall,
        outcome.restart_losses.iter().map(|l| format!("{l:.4}")).collect::<Vec<_>>().join(", ")
    );
    if let (Some(c), Some((e, f))) = (opts.coarse, outcome.coarse_evaluations) {
        md.push_str(&format!(
            "Two-level search: {e} evaluations at {} s per point (restarts), {f} at {} s (start and polish; the last restart loss above is the polish's).\n\n",
            c.duration_s, a.duration
        ));
    }
    md.push_str("| parameter | datasheet profile | fitted | bounds |\n|---|---:|---:|---|\n");
    for p in &opts.params {
        md.push_str(&format!(
            "| {} | {} | {} | {} – {} |\n",
            p.name,
            fit::fmt(problem_base_get(problem, p.name)),
            fit::fmt(outcome.best.get(p.name)),
            p.lower,
            p.upper
        ));
    }
    md.push('\n');
    md.push_str(&table);
    md
}

fn problem_base_get(p: &FitProblem, name: &str) -> f64 {
    fit::Candidate { gpu: p.base.clone(), scales: p.base_scales }.get(name)
}
