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
    /// A run directory (reports/<run-id>), or a folder of evals (`sweep eval --out`).
    pub run: PathBuf,
    /// A baseline run: regressions beyond the noise fail the gate. `last-pass` (the last run of
    /// the same recipe fingerprints whose gate passed, from the results store; none yet: no
    /// baseline), a run id in the store, or a run directory.
    #[arg(long, value_name = "last-pass|RUN_ID|DIR")]
    pub baseline: Option<String>,
    /// Eval thresholds in the InferenceX format (default: InferenceX's thresholds.yaml, embedded),
    /// applied to every eval folder in the run (`eval.json`, or lm-eval results with meta_env.json).
    #[arg(long)]
    pub thresholds: Option<PathBuf>,
    /// The verdict is recorded in the results store with the run.
    #[command(flatten)]
    pub record: super::store::RecordArgs,
}

#[derive(clap::Args, Debug)]
pub struct CollectArgs {
    /// Run directories or folders containing them (e.g. downloaded CI artifacts).
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// The merged run directory.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub record: super::store::RecordArgs,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// `BASE NEW` run directories, or `NEW` alone with --baseline.
    #[arg(required = true, num_args = 1..=2, value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// The baseline of a single NEW run: `last-pass` (the last run of the same recipe
    /// fingerprints whose gate passed, from the results store), a run id in the store, or a run directory.
    #[arg(long, value_name = "last-pass|RUN_ID|DIR")]
    pub baseline: Option<String>,
    #[command(flatten)]
    pub at: super::store::StoreArg,
}

pub fn report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let run = RunSummary::load(&a.run).map_err(anyhow::Error::msg)?;
    let files = crate::report::write_all(&run, &a.run).map_err(anyhow::Error::msg)?;
    let (main, pages) = files.split_at(files.len().min(2));
    for f in main {
        crate::outln!("{}", f.display());
    }
    if !pages.is_empty() {
        crate::outln!("{} point page(s): <point>/report.html", pages.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the gate and writes `gate.json`, `gate.xml` (JUnit) and `gate.txt`; returns the verdict.
/// Eval folders at or under `run_dir` are checked against `thresholds` (default: InferenceX's
/// table); a folder of evals alone (`sweep eval --out`, downloaded eval artifacts) is gated on
/// its evals.
pub fn gate_run(
    run_dir: &std::path::Path,
    baseline: Option<&std::path::Path>,
    thresholds: Option<&std::path::Path>,
) -> anyhow::Result<gate::Verdict> {
    let base = baseline.map(RunSummary::load).transpose().map_err(anyhow::Error::msg)?;
    gate_with(run_dir, base.as_ref(), thresholds)
}

/// [`gate_run`] against a baseline already loaded (from a folder or the results store).
pub fn gate_with(
    run_dir: &std::path::Path,
    base: Option<&RunSummary>,
    thresholds: Option<&std::path::Path>,
) -> anyhow::Result<gate::Verdict> {
    let (thr, _) = Thresholds::load_or_embedded(thresholds).map_err(anyhow::Error::msg)?;
    let eval_only = !run_dir.join("summary.json").exists() && !crate::eval::record::find_eval_dirs(run_dir).is_empty();
    let v = if eval_only {
        let (checks, not_applicable) = gate::split_evals(gate::check_eval_dirs(run_dir, &thr, None).into_iter().map(|(_, _, g)| g));
        gate::Verdict {
            passed: checks.iter().all(|c| c.passed),
            run_id: run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            baseline: None,
            checks,
            incomplete: Vec::new(),
            not_applicable,
        }
    } else {
        let run = RunSummary::load(run_dir).map_err(anyhow::Error::msg)?;
        // Config keys start with the model prefix (`<model-prefix>-<precision>-<hw>-…`): the
        // prefix of an eval inside a point's folder whose record does not name one.
        let point_prefix: Vec<(std::path::PathBuf, String)> = run
            .points
            .iter()
            .map(|p| (p.id.as_str(), p.config_key.as_str()))
            .chain(run.evals.iter().map(|e| (e.id.as_str(), e.config_key.as_str())))
            .map(|(id, key)| (point_dir(run_dir, id), key.split('-').next().unwrap_or("").to_string()))
            .collect();
        let gates = gate::check_eval_dirs(run_dir, &thr, None).into_iter().map(|(dir, rec, g)| {
            let inherited = point_prefix.iter().find(|(d, _)| dir.starts_with(d)).map(|(_, p)| p.as_str());
            match (rec, inherited) {
                (Some(rec), Some(p)) if rec.meta.model_prefix().is_none() => {
                    let name = g.check.name.trim_start_matches(&format!("eval {} ", rec.task)).to_string();
                    gate::check_eval(&rec, &name, &thr, Some(p))
                }
                _ => g,
            }
        });
        let (evals, not_applicable) = gate::split_evals(gates);
        let mut v = gate::evaluate(&run, base, evals);
        v.not_applicable = not_applicable;
        v
    };
    write_json(&run_dir.join("gate.json"), &v)?;
    crate::problem::atomic_write(&run_dir.join("gate.xml"), gate::junit(&v).as_bytes())?;
    crate::problem::atomic_write(&run_dir.join("gate.txt"), gate::human(&v).as_bytes())?;
    Ok(v)
}

pub fn gate(a: &GateArgs) -> anyhow::Result<ExitCode> {
    let base = match &a.baseline {
        Some(spec) => match super::store::resolve_baseline(spec, &a.run, &a.record.at)? {
            Some(b) => {
                crate::outln!("baseline: {}", b.what);
                Some(b.summary)
            }
            None => {
                crate::outln!(
                    "baseline: none (no earlier run of these recipe fingerprints passed its gate in the store); gating without one"
                );
                None
            }
        },
        None => None,
    };
    let v = gate_with(&a.run, base.as_ref(), a.thresholds.as_deref())?;
    crate::out!("{}", gate::human(&v));
    crate::outln!("wrote {}", a.run.join("gate.json").display());
    // Reports open with the verdict: rewrite them with this one (point pages do not show it).
    // (A folder of evals alone keeps the reports `sweep eval` wrote.)
    if a.run.join("summary.json").is_file() && (a.run.join("report.html").is_file() || a.run.join("report.md").is_file()) {
        let run = RunSummary::load(&a.run).map_err(anyhow::Error::msg)?;
        crate::report::write_main(&run, &a.run).map_err(anyhow::Error::msg)?;
        crate::outln!("updated {} and report.md", a.run.join("report.html").display());
    }
    if let Some(line) = super::store::record_quietly(&a.run, &a.record, None, "gate") {
        crate::outln!("{line}");
    }
    Ok(if v.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub fn collect(a: &CollectArgs) -> anyhow::Result<ExitCode> {
    let run = crate::run::collect::collect(&a.inputs, &a.out).map_err(anyhow::Error::msg)?;
    crate::report::write_all(&run, &a.out).map_err(anyhow::Error::msg)?;
    crate::outln!("collected {} point(s) into {}", run.points.len(), a.out.display());
    if let Some(line) = super::store::record_quietly(&a.out, &a.record, None, "collect") {
        crate::outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn compare(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    let (base, new) = match (&a.runs[..], &a.baseline) {
        ([b, n], None) => (RunSummary::load(b).map_err(anyhow::Error::msg)?, RunSummary::load(n).map_err(anyhow::Error::msg)?),
        ([n], Some(spec)) => {
            let b = super::store::resolve_baseline(spec, n, &a.at)?.ok_or_else(|| {
                anyhow::anyhow!(
                    "--baseline {spec}: no earlier run of the recipe fingerprints of {} passed its gate in the store (see `sweep history`)",
                    n.display()
                )
            })?;
            crate::outln!("baseline: {}", b.what);
            (b.summary, RunSummary::load(n).map_err(anyhow::Error::msg)?)
        }
        ([_, _], Some(_)) => anyhow::bail!("--baseline replaces the first run: give one run (the new one) with it"),
        _ => anyhow::bail!("give two runs (BASE NEW), or one with --baseline last-pass|RUN_ID|DIR"),
    };
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
    use sweep_results::testing::fake_run;

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
