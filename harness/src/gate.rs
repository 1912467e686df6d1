//! CI verdicts for a run: failed or invalid points, requests dropped by errors, Pareto coverage,
//! eval scores below threshold (InferenceX thresholds format) and regressions against a baseline
//! beyond the noise model of `noise.rs` (seed replicates, else request bootstrap intervals).

use crate::noise::{self, Judgement, Metric};
use crate::results::{PointResult, RunSummary, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub passed: bool,
    pub run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    pub checks: Vec<Check>,
    /// Points not finished (interrupted or not reached): an incomplete run never passes, and
    /// these are not counted as failed checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<String>,
}

/// A metric compared against a baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    pub point: String,
    pub metric: String,
    #[serde(flatten)]
    pub judgement: Judgement,
}

/// Compares two runs point by point on tok/s/GPU and the gated views: seed replicates where both
/// points have them (paired on shared seeds, else Welch), else the request bootstrap (`noise.rs`).
pub fn compare(base: &RunSummary, new: &RunSummary) -> Vec<Delta> {
    let mut out = Vec::new();
    for n in &new.points {
        let Some(b) = base.point(&n.id) else { continue };
        let (Some(bp), Some(np)) = (b.pareto.as_ref(), n.pareto.as_ref()) else { continue };
        for m in Metric::GATED {
            let replicated = noise::judge(&b.seeds, &n.seeds, m);
            let judgement = replicated.unwrap_or_else(|| {
                let (bv, nv, bci, nci) = match m {
                    Metric::Tput => (bp.y, np.y, bp.y_ci, np.y_ci),
                    Metric::View(v) => {
                        let ci = |p: &crate::pareto::Point| p.x_ci.get(&v).copied().unwrap_or((p.x[&v], p.x[&v]));
                        (bp.x[&v], np.x[&v], ci(bp), ci(np))
                    }
                };
                noise::bootstrap(bv, nv, bci, nci, m)
            });
            out.push(Delta { point: n.id.clone(), metric: m.key().into(), judgement });
        }
    }
    out
}

/// Eval thresholds in the InferenceX format (`default:` task → score, `models:` prefix → task → score).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Thresholds {
    #[serde(default)]
    pub default: BTreeMap<String, f64>,
    #[serde(default)]
    pub models: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Thresholds {
    pub fn load(path: &Path) -> Result<Thresholds, String> {
        crate::yaml::load_typed(path).map_err(|e| e.to_string())
    }
    /// `models[prefix][task]` (exact prefix), else `default[task]`, else 0.85.
    pub fn threshold(&self, prefix: &str, task: &str) -> f64 {
        self.models.get(prefix).and_then(|m| m.get(task)).or_else(|| self.default.get(task)).copied().unwrap_or(0.85)
    }
}

/// Checks lm-eval `results*.json` files of a point: every `exact_match,*` metric (not stderr) of
/// every task must reach the threshold; a results set with no such metric fails.
pub fn check_eval_results(dir: &Path, prefix: &str, thr: &Thresholds) -> Option<Check> {
    let files: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("results") && n.to_string_lossy().ends_with(".json")))
        .collect();
    if files.is_empty() {
        return None;
    }
    let mut bad = Vec::new();
    let mut checked = 0;
    for f in &files {
        let Ok(v) = std::fs::read_to_string(f).map_err(|_| ()).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|_| ()))
        else {
            bad.push(format!("{} is not JSON", f.display()));
            continue;
        };
        for (task, metrics) in v.get("results").and_then(|r| r.as_object()).into_iter().flatten() {
            for (name, val) in metrics.as_object().into_iter().flatten() {
                if name.starts_with("exact_match,")
                    && !name.contains("stderr")
                    && let Some(x) = val.as_f64()
                {
                    checked += 1;
                    let t = thr.threshold(prefix, task);
                    if x < t {
                        bad.push(format!("{task} {name} = {x:.4} < {t:.2}"));
                    }
                }
            }
        }
    }
    if checked == 0 {
        bad.push("no exact_match metric in the eval results".into());
    }
    Some(Check {
        name: format!("evals {}", dir.display()),
        passed: bad.is_empty(),
        detail: if bad.is_empty() { format!("{checked} metrics at or above threshold") } else { bad.join("; ") },
    })
}

fn point_check(p: &PointResult) -> Check {
    let name = format!("point {}", p.id);
    match &p.status {
        Status::Done => match &p.summary {
            Some(s) if !s.valid => Check { name, passed: false, detail: format!("invalid aggregate: {}", s.invalid_reasons.join(", ")) },
            Some(s) if s.requests_error > 0 => {
                Check { name, passed: false, detail: format!("{} profiling request(s) dropped by errors", s.requests_error) }
            }
            Some(s) => Check { name, passed: true, detail: format!("{:.0} tok/s/GPU, {} requests", s.tput_per_gpu, s.requests_ok) },
            None => Check { name, passed: false, detail: "no aggregate".into() },
        },
        Status::Failed { reason } => Check { name, passed: false, detail: format!("failed: {reason}") },
        Status::Cancelled { reason } => Check { name, passed: false, detail: format!("cancelled: {reason}") },
        Status::Interrupted { .. } | Status::Pending => unreachable!("unfinished points are not checked"),
    }
}

/// Points the run has not finished (interrupted, or not reached): the run is incomplete, which
/// is not a failure of any recipe.
fn unfinished(run: &RunSummary) -> Vec<String> {
    run.points.iter().filter(|p| matches!(p.status, Status::Interrupted { .. } | Status::Pending)).map(|p| p.id.clone()).collect()
}

/// The gate over a run (and a baseline when given).
pub fn evaluate(run: &RunSummary, baseline: Option<&RunSummary>, eval_checks: Vec<Check>) -> Verdict {
    let incomplete = unfinished(run);
    let mut checks: Vec<Check> = run.points.iter().filter(|p| !incomplete.contains(&p.id)).map(point_check).collect();
    for c in &run.curves {
        checks.push(Check {
            name: format!("pareto coverage {}", c.curve),
            passed: c.coverage.pass,
            detail: format!(
                "{} measured, {} invalid, {} on the frontier (needs ≥ {} valid points)",
                c.coverage.measured,
                c.coverage.invalid,
                c.coverage.frontier,
                crate::pareto::MIN_VALID_POINTS
            ),
        });
    }
    checks.extend(eval_checks);
    if let Some(b) = baseline {
        for d in compare(b, run) {
            let j = &d.judgement;
            checks.push(Check {
                name: format!("regression {} {}", d.point, d.metric),
                passed: !(j.worse && j.beyond_noise),
                detail: format!(
                    "{} → {} ({:+.1} %, {} noise: fails beyond {:.1} %, catches {:.1} % with {:.0} % power; {})",
                    fmt_num(j.base),
                    fmt_num(j.new),
                    j.change_pct,
                    if j.beyond_noise { "beyond" } else { "within" },
                    j.threshold_pct,
                    j.detectable_pct,
                    noise::POWER * 100.0,
                    j.model
                ),
            });
        }
    }
    Verdict {
        passed: incomplete.is_empty() && checks.iter().all(|c| c.passed),
        incomplete,
        run_id: run.run_id.clone(),
        baseline: baseline.map(|b| b.run_id.clone()),
        checks,
    }
}

/// Numbers for tables: thousands separators for large values, 3 significant-ish digits for small.
pub fn fmt_value(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 1000.0 {
        fmt_num(x)
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// `7,314` / `0.123` style numbers for humans.
pub fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 {
        let s = format!("{:.0}", x.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if x < 0.0 { format!("-{out}") } else { out }
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// JUnit XML (one test case per check) for CI systems.
pub fn junit(v: &Verdict) -> String {
    let esc = crate::html::escape;
    let failures = v.checks.iter().filter(|c| !c.passed).count();
    let mut o = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"sweep gate {}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{}\">\n",
        esc(&v.run_id),
        v.checks.len() + v.incomplete.len(),
        v.incomplete.len()
    );
    for id in &v.incomplete {
        o.push_str(&format!(
            "  <testcase classname=\"sweep.gate\" name=\"point {}\"><skipped message=\"not finished (interrupted or not reached)\"/></testcase>\n",
            esc(id)
        ));
    }
    for c in &v.checks {
        o.push_str(&format!("  <testcase classname=\"sweep.gate\" name=\"{}\">", esc(&c.name)));
        if c.passed {
            o.push_str(&format!("<system-out>{}</system-out>", esc(&c.detail)));
        } else {
            o.push_str(&format!("<failure message=\"{}\"/>", esc(&c.detail)));
        }
        o.push_str("</testcase>\n");
    }
    o.push_str("</testsuite>\n");
    o
}

impl Verdict {
    /// `PASS`, `FAIL`, or `INCOMPLETE` (no failed check, but points not finished).
    pub fn word(&self) -> &'static str {
        let failed = self.checks.iter().filter(|c| !c.passed).count();
        match (self.passed, failed, self.incomplete.is_empty()) {
            (true, ..) => "PASS",
            (false, 0, false) => "INCOMPLETE",
            _ => "FAIL",
        }
    }

    /// The verdict of `run` written by `sweep gate` (`gate.json` in its directory), if any and
    /// if it is this run's.
    pub fn load(dir: &Path, run_id: &str) -> Option<Verdict> {
        let v: Verdict = serde_json::from_str(&std::fs::read_to_string(dir.join("gate.json")).ok()?).ok()?;
        (v.run_id == run_id).then_some(v)
    }
}

/// The human summary: failing checks first.
pub fn human(v: &Verdict) -> String {
    let failed = v.checks.iter().filter(|c| !c.passed).count();
    let verdict = v.word();
    let mut o = format!("gate: {verdict} ({} checks, {failed} failed)\n", v.checks.len());
    if !v.incomplete.is_empty() {
        o.push_str(&format!(
            "  INCOMPLETE  {} point(s) not finished (interrupted or not reached; re-run with --resume): {}\n",
            v.incomplete.len(),
            v.incomplete.join(", ")
        ));
    }
    for c in v.checks.iter().filter(|c| !c.passed) {
        o.push_str(&format!("  FAIL  {}: {}\n", c.name, c.detail));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_the_inferencex_rules() {
        let t: Thresholds = crate::yaml::from_str("default: {gsm8k: 0.90}\nmodels:\n  glm5: {gsm8k: 0.94}\n").unwrap();
        assert_eq!(t.threshold("glm5.2", "gsm8k"), 0.90, "no fallback from glm5.2 to glm5");
        assert_eq!(t.threshold("glm5", "gsm8k"), 0.94);
        assert_eq!(t.threshold("glm5", "unknown_task"), 0.85);
    }

    #[test]
    fn eval_scores_both_filters_must_pass() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("results_conc32.json"),
            r#"{"results":{"gsm8k":{"exact_match,strict-match":0.95,"exact_match,flexible-extract":0.89,"exact_match_stderr,strict-match":0.01}}}"#,
        )
        .unwrap();
        let t: Thresholds = crate::yaml::from_str("default: {gsm8k: 0.90}\n").unwrap();
        let c = check_eval_results(d.path(), "dsv4", &t).unwrap();
        assert!(!c.passed && c.detail.contains("flexible-extract"), "{c:?}");
        std::fs::write(d.path().join("results_conc32.json"), r#"{"results":{"gsm8k":{"acc":1.0}}}"#).unwrap();
        assert!(!check_eval_results(d.path(), "dsv4", &t).unwrap().passed, "zero exact_match metrics fails");
    }

    #[test]
    fn numbers_for_humans() {
        assert_eq!(fmt_num(7314.2), "7,314");
        assert_eq!(fmt_num(279528.8), "279,529");
        assert_eq!(fmt_num(12.34), "12.3");
    }
}
