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
pub struct CollectArgs {
    /// Run directories or folders containing them (e.g. downloaded CI artifacts).
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// The merged run directory.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    pub base: PathBuf,
    pub new: PathBuf,
}

pub fn report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let run = RunSummary::load(&a.run).map_err(anyhow::Error::msg)?;
    let files = crate::report::write_all(&run, &a.run).map_err(anyhow::Error::msg)?;
    let (main, pages) = files.split_at(files.len().min(2));
    for f in main {
        println!("{}", f.display());
    }
    if !pages.is_empty() {
        println!("{} point page(s): <point>/report.html", pages.len());
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
    // Reports open with the verdict: rewrite them with this one (point pages do not show it).
    if a.run.join("report.html").is_file() || a.run.join("report.md").is_file() {
        let run = RunSummary::load(&a.run).map_err(anyhow::Error::msg)?;
        crate::report::write_main(&run, &a.run).map_err(anyhow::Error::msg)?;
        println!("updated {} and report.md", a.run.join("report.html").display());
    }
    Ok(if v.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub fn collect(a: &CollectArgs) -> anyhow::Result<ExitCode> {
    let run = crate::run::collect::collect(&a.inputs, &a.out).map_err(anyhow::Error::msg)?;
    crate::report::write_all(&run, &a.out).map_err(anyhow::Error::msg)?;
    println!("collected {} point(s) into {}", run.points.len(), a.out.display());
    Ok(ExitCode::SUCCESS)
}

pub fn compare(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    let base = RunSummary::load(&a.base).map_err(anyhow::Error::msg)?;
    let new = RunSummary::load(&a.new).map_err(anyhow::Error::msg)?;
    let deltas = gate::compare(&base, &new);
    super::reader_may_stop(print_deltas(&deltas))?;
    Ok(ExitCode::SUCCESS)
}

/// The comparison table on stdout.
fn print_deltas(deltas: &[gate::Delta]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if deltas.is_empty() {
        writeln!(out, "no point is in both runs")?;
        return Ok(());
    }
    let w = deltas.iter().map(|d| d.point.len()).max().unwrap_or(5);
    writeln!(
        out,
        "{:<w$}  {:<20}  {:>24}  {:>8}  {:>9}  {:>10}  verdict (noise model)",
        "point", "metric", "base → new", "change", "threshold", "detectable"
    )?;
    for d in deltas {
        let j = &d.judgement;
        let arrow = format!("{} → {}", gate::fmt_num(j.base), gate::fmt_num(j.new));
        let verdict = match (j.beyond_noise, j.worse) {
            (false, _) => "within noise",
            (true, true) => "WORSE beyond noise",
            (true, false) => "better beyond noise",
        };
        writeln!(
            out,
            "{:<w$}  {:<20}  {:>24}  {:>+7.1}%  {:>8.1}%  {:>9.1}%  {verdict} ({})",
            d.point, d.metric, arrow, j.change_pct, j.threshold_pct, j.detectable_pct, j.model
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::fake_run;

    #[test]
    fn gate_passes_against_itself_and_fails_on_an_injected_regression() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let run = fake_run(5);
        run.save(&a).unwrap();
        let v = gate_run(&a, Some(&a), None).unwrap();
        assert!(v.passed, "{}", gate::human(&v));
        assert!(a.join("gate.json").is_file() && a.join("gate.xml").is_file());
        // 20 % less throughput on one point, far beyond its bootstrap noise.
        let mut worse = run.clone();
        worse.run_id = "worse".into();
        let p = worse.points[2].pareto.as_mut().unwrap();
        p.y *= 0.8;
        p.y_ci = (p.y_ci.0 * 0.8, p.y_ci.1 * 0.8);
        worse.save(&b).unwrap();
        let v = gate_run(&b, Some(&a), None).unwrap();
        assert!(!v.passed);
        let failed: Vec<&str> = v.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
        assert_eq!(failed, vec!["regression cfg/tp4-c4 tput_per_gpu"]);
        assert!(std::fs::read_to_string(b.join("gate.xml")).unwrap().contains("<failure"));
    }

    #[test]
    fn gate_fails_on_thin_coverage_and_failed_points() {
        let d = tempfile::tempdir().unwrap();
        let mut run = fake_run(5);
        run.points[4].status = crate::results::Status::Failed { reason: "server exited".into() };
        run.curves[0].coverage.pass = false;
        run.save(d.path()).unwrap();
        let v = gate_run(d.path(), None, None).unwrap();
        let failed: Vec<String> = v.checks.iter().filter(|c| !c.passed).map(|c| c.name.clone()).collect();
        assert!(failed.contains(&"point cfg/tp4-c16".to_string()) && failed.contains(&"pareto coverage cfg".to_string()), "{failed:?}");
    }

    #[test]
    fn an_interrupted_run_is_incomplete_not_failed() {
        let d = tempfile::tempdir().unwrap();
        let mut run = fake_run(5);
        run.points[3].status = crate::results::Status::Interrupted { reason: crate::targets::STOPPED.into() };
        run.points[4].status = crate::results::Status::Pending;
        run.save(d.path()).unwrap();
        let v = gate_run(d.path(), None, None).unwrap();
        assert!(!v.passed, "an incomplete run never passes");
        assert_eq!(v.incomplete, vec![run.points[3].id.clone(), run.points[4].id.clone()]);
        assert!(v.checks.iter().filter(|c| c.name.starts_with("point ")).all(|c| c.passed), "{}", gate::human(&v));
        assert!(gate::human(&v).starts_with("gate: INCOMPLETE (") && gate::human(&v).contains("--resume"), "{}", gate::human(&v));
        let xml = std::fs::read_to_string(d.path().join("gate.xml")).unwrap();
        assert!(xml.contains("<skipped") && !xml.contains("<failure"), "{xml}");
    }
}
