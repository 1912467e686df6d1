//! `sweep run <labels…>`: build the plan a label selects, run every point against a target
//! (default: the reference engine on the virtual clock), write the report and the gate verdict.

use super::RepoArgs;
use crate::plan::{self, Inputs, Plan};
use crate::repo::Repo;
use crate::results::{RunSummary, Status};
use crate::run::identity::RunIdentity;
use crate::run::launcher::{Endpoint, PointLauncher};
use crate::run::{self, PointRunner, RunOptions, Target};
use crate::targets::pools::TraceSpec;
use crate::targets::sim::{ProfileChoice, SimRunner};
use crate::trace::TraceSource;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Gate seeds each point is also replayed with on the virtual clock (`--seed-replicates`): with
/// the run's own seed, four shared seeds give the paired test three degrees of freedom.
pub const DEFAULT_SIM_SEED_REPLICATES: usize = 4;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: super::select_args::LabelArgs,
    /// Run only configs whose key matches this glob (`*`, `?`), e.g. `dsv41flash-*`.
    #[arg(long)]
    pub configs: Option<String>,
    /// Evals: score only the first N gsm8k test questions (a smoke run; the result says so and
    /// the gate does not accept it as a full eval).
    #[arg(long, value_name = "N")]
    pub eval_limit: Option<usize>,
    /// Where requests go: `sim` (reference engine, virtual clock), `local` (start each point's
    /// resolved server command), `local:engine` (the same flags served by `sweep engine serve`),
    /// `url:URL` (an existing OpenAI-compatible server), or `slurm` (one batch job per point,
    /// see the Slurm options).
    #[arg(long, default_value = "sim")]
    pub target: Target,
    /// Profiling duration per point, seconds (default: the plan's, 3600 or 1200 with agentx-fast).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Trace set: `auto` (each point's model family's corpus: DeepSeek-V4 points replay
    /// `like:cc-traces-weka-062126`, the published AgentX corpus synthesized from its statistics;
    /// others the bundled synthetic set), `synthetic[:N[:SEED]]`, `like:NAME|STATS.yaml[:N[:SEED]]`,
    /// or Weka/mooncake files or directories.
    #[arg(long, default_value = "auto")]
    pub traces: TraceSpec,
    /// Output directory (default: reports/<UTC timestamp>-<label> under the repository root).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Keep finished points found in --out and run only the rest.
    #[arg(long)]
    pub resume: bool,
    /// Delete a finished run found in --out and start a new one there (otherwise refused, so
    /// that a second run never overwrites the first).
    #[arg(long, conflicts_with = "resume")]
    pub overwrite: bool,
    /// Run only these point ids (see `sweep plan`).
    #[arg(long, num_args = 1..)]
    pub only: Vec<String>,
    /// Run exactly one point (a CI matrix job, a Slurm job); its folder is what `sweep collect` merges.
    #[arg(long, value_name = "ID", conflicts_with = "append_changelog")]
    pub point: Option<String>,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also replay each finished point with N shared gate seeds, the gate's noise model (see
    /// docs/gate.md); default 4 on the virtual clock, 0 on live targets (each is a full point).
    #[arg(long, value_name = "N")]
    pub seed_replicates: Option<usize>,
    /// Points run at once on the virtual clock (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Seconds to wait for a started server to answer /health.
    #[arg(long, default_value_t = 1800.0)]
    pub server_timeout: f64,
    /// Reference engine model profile (default: from the point's --model-path / the row's model).
    #[arg(long)]
    pub model: Option<String>,
    /// Live targets: the client's tokenizer, timeouts, readiness and request dialect (a recipe's
    /// `client-args` apply to its points; these flags win).
    #[command(flatten)]
    pub client: super::client_args::ClientArgs,
    /// Reference engine hardware profile (default: from the row's runner, e.g. cluster:gb300-nv → gb300).
    #[arg(long)]
    pub hardware: Option<String>,
    /// Twin mode (live targets): replay every finished point on the virtual clock with the same
    /// recipe, traces and seed; write residuals.json and a residual table in the reports.
    #[arg(long)]
    pub twin: bool,
    /// After a passing gate, append a perf-changelog.yaml entry for the run's config keys.
    #[arg(long, requires_all = ["description", "pr_link"])]
    pub append_changelog: bool,
    /// Description lines of the changelog entry (repeat for several lines).
    #[arg(long)]
    pub description: Vec<String>,
    /// https://github.com/<owner>/<repo>/pull/<number> of the changelog entry.
    #[arg(long = "pr-link")]
    pub pr_link: Option<String>,
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub slurm: super::slurm_args::SlurmArgs,
    /// The finished run is recorded in the results store (not a --point job: its collected run is).
    #[command(flatten)]
    pub record: super::store::RecordArgs,
    /// A price file (docs/formats.md#prices): each finished point's cost per million tokens.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
}

/// `YYYYMMDDTHHMMSSZ` for a Unix time (UTC).
pub fn utc_stamp(unix: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix);
    humantime::format_rfc3339_seconds(t).to_string().replace(['-', ':'], "")
}

pub use crate::plan::narrow::glob_match;

pub use crate::report::summary::summary_table;

/// `sweep run`'s options resolved once, before any point runs: the plan the labels select, the
/// run's folder and the identity a resumed run must match. The runner and the run's options are
/// derived from it.
struct Resolved {
    repo: Repo,
    plan: Plan,
    identity: RunIdentity,
    out: PathBuf,
    run_id: String,
}

impl Resolved {
    /// `None` when the repository's inputs have problems (printed).
    fn new(args: &Args) -> anyhow::Result<Option<Resolved>> {
        let Some((repo, plan)) = plan_for(args)? else { return Ok(None) };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let label = args.select.labels.first().map(|s| s.replace(',', "+")).unwrap_or_default();
        let identity = run_identity(args, &plan);
        let out = out_dir(args, &repo, &identity, &label, now)?;
        let run_id = out.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or(label);
        guard_finished(args, &out)?;
        check_target(args, &plan)?;
        Ok(Some(Resolved { repo, plan, identity, out, run_id }))
    }

    fn options(&self, args: &Args) -> RunOptions {
        RunOptions {
            run_id: self.run_id.clone(),
            labels: args.select.labels.clone(),
            target: args.target.to_string(),
            out: self.out.clone(),
            resume: args.resume,
            only: args.only.iter().chain(&args.point).cloned().collect(),
            seed: args.seed,
            replicates: 200,
            seed_replicates: self.identity.seed_replicates,
            identity: Some(self.identity.clone()),
            verbose: true,
            eval_limit: args.eval_limit,
        }
    }
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let prices = args.prices.as_deref().map(crate::price::PriceTable::load).transpose().map_err(|p| anyhow::anyhow!("{p}"))?;
    let Some(r) = Resolved::new(args)? else { return Ok(ExitCode::FAILURE) };
    let (plan, out, repo) = (&r.plan, &r.out, &r.repo);
    let pools = Arc::new(crate::targets::pools::PointPools::new(args.traces.clone(), args.seed));
    let runner = runner_for(args, plan, out, &r.run_id, &repo.root, pools.clone())?;
    let opts = r.options(args);
    let n = plan.points().filter(|p| opts.only.is_empty() || opts.only.contains(&p.id)).count();
    eprintln!(
        "sweep run: {} point(s) on target {} ({} at once), traces {}, seed {}; writing {}",
        n,
        args.target,
        runner.max_parallel(),
        if args.traces.is_auto() { "auto (each config's model family's corpus)" } else { args.traces.as_str() },
        args.seed,
        out.display()
    );
    let interrupt = Arc::new(AtomicBool::new(false));
    super::install_interrupt(interrupt.clone(), "stopping running points; finished points are kept (re-run with --resume to continue)");
    let t0 = std::time::Instant::now();
    let summary = run::execute(plan, &opts, runner.as_ref(), &interrupt).map_err(anyhow::Error::msg)?;
    let wall = t0.elapsed().as_secs_f64();
    if args.twin {
        // The twins replay the traces the live points replayed (compiled once, shared).
        let fallback = ProfileChoice { model: args.model.clone(), hardware: args.hardware.clone() };
        let twins =
            crate::run::twin::run_twins(plan, &summary, out, pools.clone(), args.traces.as_str(), args.seed, args.duration, &fallback)
                .map_err(anyhow::Error::msg)?;
        eprintln!("twin: {} point(s) replayed on the virtual clock; {}", twins.points.len(), out.join("residuals.json").display());
    }
    let (code, passed) = finish(&summary, out, wall, interrupt.load(Ordering::SeqCst), args.point.is_some())?;
    if let Some(t) = &prices {
        crate::out!("\n{}", crate::report::summary::cost_table(&summary, t));
    }
    if args.point.is_none()
        && let Some(line) = super::store::record_quietly(out, &args.record, Some(&repo.root), "run")
    {
        crate::outln!("{line}");
    }
    if args.append_changelog {
        return append_changelog(args, repo, out, passed, code);
    }
    Ok(code)
}

/// What the run's options are, as a resumed run must match them.
fn run_identity(args: &Args, plan: &Plan) -> RunIdentity {
    let seed_replicates = args.seed_replicates.unwrap_or(if args.target == Target::Sim { DEFAULT_SIM_SEED_REPLICATES } else { 0 });
    RunIdentity {
        version: env!("CARGO_PKG_VERSION").into(),
        labels: args.select.labels.clone(),
        target: args.target.to_string(),
        seed: args.seed,
        duration: args.duration,
        traces: args.traces.to_string(),
        seed_replicates,
        model: args.model.clone(),
        hardware: args.hardware.clone(),
        client: args.client.shaping_argv(),
        recipes: RunIdentity::recipes(plan),
    }
}

/// The run's folder: `--out`, with `--resume` alone the newest run made with these options, or a
/// new timestamped folder under `reports/`.
fn out_dir(args: &Args, repo: &Repo, identity: &RunIdentity, label: &str, now: u64) -> anyhow::Result<PathBuf> {
    let reports = repo.root.join("reports");
    let out = match &args.out {
        Some(o) => o.clone(),
        // `--resume` alone: the newest run made with these options.
        None if args.resume => crate::run::identity::latest_matching(&reports, identity).ok_or_else(|| {
            anyhow::anyhow!(
                "--resume: no run under {} was made with these options (labels, target, seed, duration, traces, profiles, recipes); name one with --out, or start a new run without --resume",
                reports.display()
            )
        })?,
        None => reports.join(format!("{}-{label}", utc_stamp(now))),
    };
    if args.resume && args.out.is_none() {
        eprintln!("sweep run: resuming {}", out.display());
    }
    Ok(out)
}

/// Refuses to start over a finished run in `out`, unless resumed, overwritten (it is removed
/// first) or a per-point job.
fn guard_finished(args: &Args, out: &Path) -> anyhow::Result<()> {
    // A run that reached its end (its gate verdict is written, interrupted or not) would lose its
    // results, and their record in the store, to a new run in the same folder. A run that died
    // before its end is restarted in place, as a killed Slurm sweep is; a per-point job
    // (`--point`) belongs to the run its orchestrator manages.
    let finished = out.join("gate.json").is_file();
    if finished && !args.resume && !args.overwrite && args.point.is_none() {
        anyhow::bail!(
            "--out {}: the folder holds a finished run (gate.json); nothing was changed\n    fix: `--resume --out {}` keeps its finished points and runs the rest, `--overwrite` replaces it, or pass another --out",
            out.display(),
            out.display()
        );
    }
    if finished && args.overwrite {
        // Its point folders, pages and charts would otherwise mix with the new run's.
        std::fs::remove_dir_all(out).with_context(|| format!("--overwrite: removing the finished run in {}", out.display()))?;
        eprintln!("sweep run: --overwrite: removed the finished run in {}", out.display());
    }
    Ok(())
}

/// Refuses, before any point runs, options the target cannot take: `--twin` on the virtual
/// clock, another framework than SGLang on the reference engine, a bad `--traces`.
fn check_target(args: &Args, plan: &Plan) -> anyhow::Result<()> {
    if args.twin && args.target == Target::Sim {
        anyhow::bail!("--twin compares a live run with its virtual-clock twin; use it with --target local, local:engine or url:URL");
    }
    // The reference engine simulates SGLang: another framework's points can only be measured.
    if args.target.is_reference_engine()
        && let Some(p) = plan.points().find(|p| p.row.get("framework").and_then(|f| f.as_str()).is_some_and(|f| f != "sglang"))
    {
        anyhow::bail!(
            "{}: its framework is {}, and the reference engine simulates SGLang servers; measure it with --target local (or url:URL)",
            p.id,
            p.row["framework"]
        );
    }
    // A bad --traces must fail before any point runs.
    if let Some(TraceSource::Files(paths)) = args.traces.source()
        && let Some(missing) = paths.iter().find(|p| !p.exists())
    {
        anyhow::bail!(
            "--traces {}: no such file or folder; pass AgentX trace files (.jsonl, .jsonl.gz) or a folder of them, `synthetic[:N[:SEED]]`, `like:NAME` or `auto`",
            missing.display()
        );
    }
    Ok(())
}

/// The repository and the plan the labels select, narrowed to `--configs`; `None` when the repository's inputs have problems (printed).
fn plan_for(args: &Args) -> anyhow::Result<Option<(Repo, Plan)>> {
    let request = args.select.request()?;
    // Checked before any point runs: a bad link must not cost a sweep.
    if let Some(l) = &args.pr_link
        && !crate::changelog::is_canonical_pr_link(l)
    {
        anyhow::bail!("--pr-link {l}: expected https://github.com/<owner>/<repo>/pull/<number>");
    }
    let built = args.repo.repo().and_then(|repo| {
        let inputs = Inputs::load(&repo)?;
        let plan = plan::build(&repo, &inputs, &request)?;
        Ok((repo, plan))
    });
    let (repo, mut plan) = match built {
        Ok(x) => x,
        Err(p) => {
            eprintln!("{p}");
            return Ok(None);
        }
    };
    if let Some(g) = &args.configs {
        crate::plan::narrow::filter_configs(&mut plan, g);
        if plan.points().next().is_none() {
            anyhow::bail!("--configs {g}: no config key in the plan matches (see `sweep plan {}`)", args.select.labels.join(" "));
        }
    }
    Ok(Some((repo, plan)))
}

/// The point runner `--target` names.
fn runner_for(
    args: &Args,
    plan: &Plan,
    out: &Path,
    run_id: &str,
    repo_root: &Path,
    pools: Arc<crate::targets::pools::PointPools>,
) -> anyhow::Result<Box<dyn PointRunner>> {
    Ok(match &args.target {
        Target::Sim => {
            let mut r = SimRunner::with_pools(pools);
            r.duration_s = args.duration;
            r.profiles = ProfileChoice { model: args.model.clone(), hardware: args.hardware.clone() };
            if let Some(j) = args.jobs {
                r.jobs = j.max(1);
            }
            Box::new(r)
        }
        t @ (Target::Local | Target::LocalEngine | Target::Url(_)) => Box::new(crate::targets::http::HttpRunner {
            endpoint: match t {
                Target::Url(url) => Endpoint::Url(url.clone()),
                _ => Endpoint::Launch(PointLauncher {
                    engine_twin: *t == Target::LocalEngine,
                    health_timeout: std::time::Duration::from_secs_f64(args.server_timeout.max(1.0)),
                    profiles: ProfileChoice { model: args.model.clone(), hardware: args.hardware.clone() },
                }),
            },
            pools,
            duration_s: args.duration,
            client: args.client.options()?,
            warm: Default::default(),
        }),
        Target::Slurm => {
            let inner = inner_args(args);
            let r = crate::run::slurm::SlurmRunner::new(args.slurm.config(), inner, plan, out, run_id, repo_root, args.resume)
                .map_err(anyhow::Error::msg)?;
            Box::new(r)
        }
    })
}

/// After a passing gate, the run's config keys as a new changelog entry; the exit code.
fn append_changelog(args: &Args, repo: &Repo, out: &Path, passed: bool, code: ExitCode) -> anyhow::Result<ExitCode> {
    if !passed {
        crate::outln!("changelog: not appended (the gate failed)");
        return Ok(code);
    }
    let entry = crate::changelog::NewEntry {
        config_keys: super::changelog::keys_from_run(out).map_err(|p| anyhow::anyhow!("{p}"))?,
        description: args.description.clone(),
        pr_link: args.pr_link.clone().unwrap_or_default(),
        scenario_type: None,
        evals_only: false,
        all_evals: false,
        append_only: false,
    };
    match super::changelog::append_entry(repo, &entry) {
        Ok(msg) => crate::outln!("changelog: {msg}"),
        Err(p) => {
            eprintln!("{p}");
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(code)
}

/// Reports, gate, summary table; the exit code and whether the gate passed. A `--point` job exits
/// on its point alone: coverage and the other gate checks belong to the run it is collected into.
fn finish(summary: &RunSummary, out: &Path, wall_s: f64, interrupted: bool, one_point: bool) -> anyhow::Result<(ExitCode, bool)> {
    crate::outln!();
    crate::out!("{}", summary_table(summary));
    let done = summary.points.iter().filter(|p| p.status == Status::Done).count();
    crate::outln!();
    for (config, what) in crate::report::provenance(summary) {
        crate::outln!("{config}: {what}");
    }
    if one_point && !interrupted {
        // A single point cannot cover a frontier: charts, reports and the gate belong to the
        // collected run (`sweep collect` renders them).
        let ok = summary.points.iter().all(|p| p.ok());
        crate::outln!("{done}/{} point(s) finished in {wall_s:.1} s; point {}", summary.points.len(), if ok { "ok" } else { "FAILED" });
        crate::outln!("--point: the exit status is this point's; gate the collected run (`sweep collect`, then `sweep gate`)");
        return Ok((if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }, false));
    }
    // The gate first: the reports open with its verdict.
    let verdict = super::results::gate_run(out, None, None)?;
    let files = crate::report::write_all(summary, out).map_err(anyhow::Error::msg)?;
    crate::outln!(
        "{done}/{} point(s) finished in {wall_s:.1} s; gate {} ({})",
        summary.points.len(),
        if verdict.passed { "PASSED" } else { "FAILED" },
        crate::gate::tally(&verdict)
    );
    if !summary.evals.is_empty() {
        let w = summary.evals.iter().map(|e| e.id.len()).max().unwrap_or(0);
        crate::outln!("evals:");
        for e in &summary.evals {
            crate::outln!("  {:<w$}  {}", e.id, e.describe());
        }
    }
    for c in verdict.checks.iter().filter(|c| !c.passed) {
        crate::outln!("  failed check: {}: {}", c.name, c.detail);
    }
    crate::outln!("report: {}", files.first().map(|f| f.display().to_string()).unwrap_or_default());
    crate::outln!("gate:   {}", out.join("gate.json").display());
    if interrupted {
        crate::outln!("interrupted: re-run with --resume --out {} to finish the remaining points", out.display());
        return Ok((ExitCode::from(130), false));
    }
    Ok((if verdict.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE }, verdict.passed))
}

/// The `sweep run` arguments a job repeats from this invocation (everything that shapes the
/// plan and the point), with the inner target.
pub fn inner_args(a: &Args) -> Vec<String> {
    let mut v: Vec<String> = vec!["run".into()];
    v.extend(a.select.labels.iter().cloned());
    let mut opt = |k: &str, val: Option<String>| {
        if let Some(x) = val {
            v.push(k.to_string());
            v.push(x);
        }
    };
    opt("--target", Some(a.slurm.inner_target.to_string()));
    opt("--base", a.select.base.clone());
    opt("--configs", a.configs.clone());
    opt("--duration", a.duration.map(|d| d.to_string()));
    opt("--traces", Some(a.traces.to_string()));
    opt("--seed", Some(a.seed.to_string()));
    opt("--seed-replicates", a.seed_replicates.map(|n| n.to_string()));
    opt("--jobs", a.jobs.map(|j| j.to_string()));
    opt("--server-timeout", Some(a.server_timeout.to_string()));
    opt("--model", a.model.clone());
    opt("--hardware", a.hardware.clone());
    let r = &a.repo;
    opt("--root", r.root.as_ref().map(|p| p.display().to_string()));
    for m in &r.master {
        opt("--master", Some(m.display().to_string()));
    }
    opt("--runners", r.runners.as_ref().map(|p| p.display().to_string()));
    opt("--changelog", r.changelog.as_ref().map(|p| p.display().to_string()));
    opt("--golden-al", r.golden_al.as_ref().map(|p| p.display().to_string()));
    v.extend(a.client.argv());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct RunCli {
        #[command(flatten)]
        a: Args,
    }

    #[test]
    fn a_job_repeats_every_option_that_shapes_the_plan_and_the_point() {
        use clap::Parser;
        let outer = RunCli::try_parse_from([
            "run",
            "full-sweep-fail-fast",
            "agentx-fast",
            "--base",
            "abc123",
            "--configs",
            "dsv41flash-*",
            "--duration",
            "90.5",
            "--traces",
            "traces/a b.jsonl",
            "--seed",
            "7",
            "--jobs",
            "3",
            "--server-timeout",
            "600",
            "--model",
            "deepseek-v3",
            "--hardware",
            "h200",
            "--root",
            "/r",
            "--master",
            "m1.yaml",
            "--master",
            "m2.yaml",
            "--runners",
            "run.yaml",
            "--changelog",
            "cl.yaml",
            "--golden-al",
            "gal",
            "--target",
            "slurm",
            "--slurm-inner-target",
            "local",
            "--slurm-partition",
            "gpu",
            "--only",
            "x/y-c1",
            "--out",
            "/o",
            "--resume",
        ])
        .unwrap()
        .a;
        let inner = inner_args(&outer);
        assert_eq!(inner[0], "run");
        let back = RunCli::try_parse_from(&inner).unwrap().a;
        assert_eq!(back.select.labels, outer.select.labels);
        assert_eq!(back.target, Target::Local, "the job runs its point on the inner target");
        assert_eq!((back.select.base, back.configs, back.duration), (outer.select.base.clone(), outer.configs.clone(), outer.duration));
        assert_eq!((back.traces, back.seed, back.jobs), (outer.traces.clone(), outer.seed, outer.jobs));
        assert_eq!((back.server_timeout, back.model, back.hardware), (outer.server_timeout, outer.model.clone(), outer.hardware.clone()));
        assert_eq!(back.repo.root, outer.repo.root);
        assert_eq!(back.repo.master, outer.repo.master);
        assert_eq!(
            (back.repo.runners, back.repo.changelog, back.repo.golden_al),
            (outer.repo.runners, outer.repo.changelog, outer.repo.golden_al)
        );
        // Selection, output and resumption are the outer run's: the job gets --point and --out.
        assert!(back.only.is_empty() && back.out.is_none() && !back.resume && back.slurm.partition.is_none());
    }

    #[test]
    fn utc_stamp_matches_known_instants() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000Z");
        assert_eq!(utc_stamp(1_764_434_769), "20251129T164609Z");
    }

    #[test]
    fn the_summary_keeps_its_columns_aligned_and_shows_the_frontier_metric() {
        let mut run = sweep_results::testing::fake_run_of(&[("a-fp8-h200-x", 4, 1.0), ("b-fp4-gb300-y", 3, 30.0)]);
        // A long status and a long frontier cell must not push the columns after them.
        run.points[1].status = Status::Failed { reason: "server exited with code 1 after 12 s (see server.log)".into() };
        run.points[5].summary.as_mut().unwrap().tput_per_gpu = 1_234_567.0;
        let t = summary_table(&run);
        let lines: Vec<&str> = t.lines().collect();
        let head = lines[0];
        assert!(head.contains("E2E-norm intvty") && head.contains("frontier (tok/s/GPU × E2E-norm intvty)"), "{head}");
        let col = |l: &str, name: &str| {
            l.chars().collect::<Vec<_>>().windows(name.chars().count()).position(|w| w.iter().collect::<String>() == name)
        };
        let status_at = col(head, "status").unwrap();
        let rows: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("  ")).collect();
        assert_eq!(rows.len(), 7);
        for r in &rows {
            // Every cell before the status ends where its column ends: the status starts at the header's.
            let chars: Vec<char> = r.chars().collect();
            assert!(chars[status_at - 2] == ' ' && chars[status_at - 1] == ' ' && chars[status_at] != ' ', "misaligned:\n{head}\n{r}");
        }
        // The E2E-norm value shown is the one the frontier compares.
        let s = run.points[0].summary.as_ref().unwrap();
        assert!(rows[0].contains(&format!("{:.1}", s.e2e_norm_intvty_p90)));
        assert!(lines.iter().any(|l| l.starts_with("a-fp8-h200-x (predicted)")), "{t}");
        assert!(t.lines().last().unwrap().starts_with("frontier: per config"));
    }

    #[test]
    fn glob_matches_stars_and_marks() {
        assert!(glob_match("dsv41flash-*", "dsv41flash-fp4-gb300-sglang-agentic-dspark"));
        assert!(glob_match("*h200*", "dsv3-fp8-h200-sglang-agentic"));
        assert!(!glob_match("dsv3-*", "dsv41flash-fp4"));
        assert!(glob_match("dsv?-*", "dsv3-fp8"));
        assert!(glob_match("*", ""));
    }
}
