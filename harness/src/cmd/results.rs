//! `sweep report`, `sweep gate` and `sweep compare` over run directories.

use crate::gate::{self, Thresholds};
use crate::results::{RunSummary, point_dir, write_json};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A run directory (reports/<run-id>).
    pub run: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct GateArgs {
    /// A run directory (reports/<run-id>).
    pub run: PathBuf,
    /// A baseline run: regressions beyond the bootstrap noise fail the gate.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Eval thresholds in the InferenceX format (used when points carry eval results).
    #[arg(long)]
    pub thresholds: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    pub base: PathBuf,
    pub new: PathBuf,
}

pub fn report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let run = RunSummary::load(&a.run).map_err(anyhow::Error::msg)?;
    let files = crate::report::write_all(&run, &a.run).map_err(anyhow::Error::msg)?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the gate and writes `gate.json`, `gate.xml` (JUnit) and `gate.txt`; returns the verdict.
pub fn gate_run(
    run_dir: &std::path::Path,
    baseline: Option<&std::path::Path>,
    thresholds: Option<&std::path::Path>,
) -> anyhow::Result<gate::Verdict> {
    let run = RunSummary::load(run_dir).map_err(anyhow::Error::msg)?;
    let base = baseline.map(RunSummary::load).transpose().map_err(anyhow::Error::msg)?;
    let thr = match thresholds {
        Some(t) => Some(Thresholds::load(t).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let mut evals = Vec::new();
    if let Some(t) = &thr {
        for p in &run.points {
            // Config keys start with the model prefix (`<model-prefix>-<precision>-<hw>-…`).
            let prefix = p.config_key.split('-').next().unwrap_or("");
            if let Some(c) = gate::check_eval_results(&point_dir(run_dir, &p.id), prefix, t) {
                evals.push(c);
            }
        }
    }
    let v = gate::evaluate(&run, base.as_ref(), evals);
    write_json(&run_dir.join("gate.json"), &v)?;
    crate::problem::atomic_write(&run_dir.join("gate.xml"), gate::junit(&v).as_bytes())?;
    crate::problem::atomic_write(&run_dir.join("gate.txt"), gate::human(&v).as_bytes())?;
    Ok(v)
}

pub fn gate(a: &GateArgs) -> anyhow::Result<ExitCode> {
    let v = gate_run(&a.run, a.baseline.as_deref(), a.thresholds.as_deref())?;
    print!("{}", gate::human(&v));
    println!("wrote {}", a.run.join("gate.json").display());
    Ok(if v.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub fn compare(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    let base = RunSummary::load(&a.base).map_err(anyhow::Error::msg)?;
    let new = RunSummary::load(&a.new).map_err(anyhow::Error::msg)?;
    let deltas = gate::compare(&base, &new);
    if deltas.is_empty() {
        println!("no point is in both runs");
        return Ok(ExitCode::SUCCESS);
    }
    let w = deltas.iter().map(|d| d.point.len()).max().unwrap_or(5);
    println!("{:<w$}  {:<20}  {:>24}  {:>8}  noise", "point", "metric", "base → new", "change");
    for d in &deltas {
        let arrow = format!("{} → {}", gate::fmt_num(d.base), gate::fmt_num(d.new));
        let verdict = match (d.beyond_noise, d.worse) {
            (false, _) => "within noise",
            (true, true) => "WORSE beyond noise",
            (true, false) => "better beyond noise",
        };
        println!("{:<w$}  {:<20}  {:>24}  {:>+7.1}%  {verdict}", d.point, d.metric, arrow, d.change_pct);
    }
    Ok(ExitCode::SUCCESS)
}
