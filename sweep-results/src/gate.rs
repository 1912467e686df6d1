//! CI verdicts for a run: failed or invalid points, requests dropped by errors, Pareto coverage,
//! eval scores below threshold (InferenceX thresholds format) and regressions against a baseline
//! beyond the noise model of `noise.rs` (seed replicates, else request bootstrap intervals).

use crate::eval::record::{EvalRecord, EvalStatus};
use crate::noise::{self, Judgement, Metric};
use crate::results::{PointResult, RunSummary, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// Checks that do not apply (an eval against the reference engine, which has no score):
    /// reported, neither passed nor failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applicable: Vec<Check>,
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
/// points have them (paired on shared seeds, else Welch), else the request bootstrap (`noise.rs`);
/// J per output token where both have it on replicates.
pub fn compare(base: &RunSummary, new: &RunSummary) -> Vec<Delta> {
    let mut out = Vec::new();
    for n in &new.points {
        let Some(b) = base.point(&n.id) else { continue };
        let (Some(bp), Some(np)) = (b.pareto.as_ref(), n.pareto.as_ref()) else { continue };
        for m in Metric::GATED {
            let replicated = noise::judge(&b.seeds, &n.seeds, m);
            let judgement = match (replicated, m) {
                (Some(j), _) => j,
                (None, Metric::JoulesPerOutputToken) => continue,
                (None, Metric::Tput) => noise::bootstrap(bp.y, np.y, bp.y_ci, np.y_ci, m),
                (None, Metric::View(v)) => {
                    let ci = |p: &crate::pareto::Point| p.x_ci.get(&v).copied().unwrap_or((p.x[&v], p.x[&v]));
                    noise::bootstrap(bp.x[&v], np.x[&v], ci(bp), ci(np), m)
                }
            };
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

/// Why a thresholds file is not read.
#[derive(Debug, thiserror::Error)]
pub enum ThresholdsError {
    /// Not readable, not YAML, or over the input limits.
    #[error(transparent)]
    Load(#[from] crate::problem::Problems),
    /// YAML, but not the thresholds format (serde's message, its quoted value cut to an excerpt).
    #[error(
        "{}: {}; expected `default: {{gsm8k: 0.90}}` and `models: {{<prefix>: {{gsm8k: 0.91}}}}`",
        .path.display(),
        crate::problem::excerpt_quoted(&.source.to_string())
    )]
    Format {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
}

/// `validate_scores.py`'s `--min-score` default: the threshold of a task no entry names.
pub const FALLBACK_MIN_SCORE: f64 = 0.85;

/// InferenceX's `thresholds.yaml`, the default when no file is given.
const EMBEDDED_THRESHOLDS: &str = include_str!("../data/thresholds.yaml");

impl Thresholds {
    /// A thresholds file; as in `validate_scores.py`, a mapping with neither `default` nor
    /// `models` is the legacy flat form (the whole mapping is `default`).
    pub fn load(path: &Path) -> Result<Thresholds, ThresholdsError> {
        let v: serde_yaml_ng::Value = crate::yaml::load_typed(path)?;
        Self::from_value(v).map_err(|source| ThresholdsError::Format { path: path.to_path_buf(), source })
    }

    fn from_value(v: serde_yaml_ng::Value) -> Result<Thresholds, serde_yaml_ng::Error> {
        let flat = v.as_mapping().is_some_and(|m| !m.contains_key("default") && !m.contains_key("models"));
        if flat {
            let default: BTreeMap<String, f64> = serde_yaml_ng::from_value(v)?;
            return Ok(Thresholds { default, models: BTreeMap::new() });
        }
        serde_yaml_ng::from_value(v)
    }

    /// InferenceX's thresholds as shipped (`sweep-results/data/thresholds.yaml`).
    pub fn embedded() -> Thresholds {
        Self::from_value(crate::yaml::from_str(EMBEDDED_THRESHOLDS).expect("embedded thresholds parse")).expect("embedded thresholds")
    }

    /// `--thresholds FILE`, else the embedded InferenceX table; the second value names the source.
    pub fn load_or_embedded(path: Option<&Path>) -> Result<(Thresholds, String), ThresholdsError> {
        match path {
            Some(p) => Ok((Self::load(p)?, p.display().to_string())),
            None => Ok((Self::embedded(), "InferenceX thresholds.yaml (embedded)".into())),
        }
    }

    /// `models[prefix][task]` (exact prefix), else `default[task]`, else 0.85.
    pub fn threshold(&self, prefix: &str, task: &str) -> f64 {
        self.lookup(Some(prefix), task).0
    }

    /// The threshold and where it comes from: `models.<prefix>` (an exact prefix: `glm5.2` does
    /// not fall back to `glm5`), `default`, or `min-score` (no entry for the task), as
    /// `validate_scores.py` resolves and names it.
    pub fn lookup(&self, prefix: Option<&str>, task: &str) -> (f64, String) {
        if let Some(p) = prefix
            && let Some(t) = self.models.get(p).and_then(|m| m.get(task))
        {
            return (*t, format!("models.{p}"));
        }
        match self.default.get(task) {
            Some(t) => (*t, "default".into()),
            None => (FALLBACK_MIN_SCORE, "min-score".into()),
        }
    }
}

/// An eval's check. `applicable` is false for an eval that by design has no score (against the
/// reference engine): its check says so and passes, counted neither as a pass nor a failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalGate {
    pub check: Check,
    pub applicable: bool,
    /// The threshold applied and its source (`models.dsv4`, `default`, `min-score`).
    pub threshold: Option<(f64, String)>,
}

/// The gate on one eval: FAIL for a score (strict-match or flexible-extract, as
/// `validate_scores.py` checks both) below its threshold, a partial n (limited, or fewer
/// questions than the test split), or `infrastructure_success: false`; N/A for an eval that
/// is not applicable. `prefix` overrides the record's model prefix. `name` labels the row.
pub fn check_eval(rec: &EvalRecord, name: &str, thr: &Thresholds, prefix: Option<&str>) -> EvalGate {
    let prefix = prefix.or(rec.meta.model_prefix());
    let (t, src) = thr.lookup(prefix, &rec.task);
    let name = format!("eval {} {name}", rec.task);
    if rec.status == EvalStatus::NotApplicable {
        return EvalGate {
            check: Check {
                name,
                passed: true,
                detail: format!("N/A: {}: it answers no math, so there is no score; run the eval against a real engine", rec.status_text()),
            },
            applicable: false,
            threshold: None,
        };
    }
    let mut bad = Vec::new();
    if !rec.infrastructure_success {
        bad.push(format!("infrastructure_success: false ({})", rec.status_text()));
    }
    if !rec.full_n() {
        let full = crate::eval::record::expected_n(&rec.task).unwrap_or(rec.n_total).max(rec.n_total);
        match rec.limit {
            Some(l) => bad.push(format!("partial n: {} of {full} (limited to the first {l} questions)", rec.n)),
            None => bad.push(format!("partial n: {} of {full}", rec.n)),
        }
    }
    let metrics = [("em_strict", rec.em_strict), ("em_flexible", rec.em_flexible)];
    let mut scored = Vec::new();
    for (m, v) in metrics {
        match v {
            Some(x) if x < t => bad.push(format!("{m} {x:.4} < {t} ({src})")),
            Some(x) => scored.push(format!("{m} {x:.4}")),
            None if rec.infrastructure_success => bad.push(format!("no {m} score")),
            None => {}
        }
    }
    let detail = if bad.is_empty() {
        format!("{} ≥ {t} ({src}), n={}, infrastructure_success: true", scored.join(", "), rec.n)
    } else {
        bad.join("; ")
    };
    EvalGate { check: Check { name, passed: bad.is_empty(), detail }, applicable: true, threshold: Some((t, src)) }
}

/// The gate on every eval at or under `root` (see [`crate::eval::record::find_eval_dirs`]; a
/// batched folder gives one per concurrency); a folder that cannot be read fails its check.
pub fn check_eval_dirs(root: &Path, thr: &Thresholds, prefix: Option<&str>) -> Vec<(std::path::PathBuf, Option<EvalRecord>, EvalGate)> {
    let mut out = Vec::new();
    for d in crate::eval::record::find_eval_dirs(root) {
        let rel = d.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty()).map(Path::to_path_buf).unwrap_or_else(|| d.clone());
        match crate::eval::record::read_eval_records(&d) {
            Ok(recs) => {
                for rec in recs {
                    let label = format!("{} ({})", rec.meta.label(), rel.display());
                    let g = check_eval(&rec, &label, thr, prefix);
                    out.push((d.clone(), Some(rec), g));
                }
            }
            Err(e) => {
                let check = Check { name: format!("eval {}", rel.display()), passed: false, detail: e.to_string() };
                out.push((d, None, EvalGate { check, applicable: true, threshold: None }));
            }
        }
    }
    out
}

/// Splits eval checks into those that count and the not-applicable ones ([`Verdict::not_applicable`]).
pub fn split_evals(gates: impl IntoIterator<Item = EvalGate>) -> (Vec<Check>, Vec<Check>) {
    let (a, n): (Vec<EvalGate>, Vec<EvalGate>) = gates.into_iter().partition(|g| g.applicable);
    (a.into_iter().map(|g| g.check).collect(), n.into_iter().map(|g| g.check).collect())
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
        not_applicable: Vec::new(),
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
        v.checks.len() + v.incomplete.len() + v.not_applicable.len(),
        v.incomplete.len() + v.not_applicable.len()
    );
    for c in &v.not_applicable {
        o.push_str(&format!(
            "  <testcase classname=\"sweep.gate\" name=\"{}\"><skipped message=\"{}\"/></testcase>\n",
            esc(&c.name),
            esc(&c.detail)
        ));
    }
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

/// "15 checks, 0 failed, 2 not applicable": what the verdict rests on.
pub fn tally(v: &Verdict) -> String {
    let failed = v.checks.iter().filter(|c| !c.passed).count();
    let na = if v.not_applicable.is_empty() { String::new() } else { format!(", {} not applicable", v.not_applicable.len()) };
    format!("{} checks, {failed} failed{na}", v.checks.len())
}

/// The human summary: failing checks first.
pub fn human(v: &Verdict) -> String {
    let mut o = format!("gate: {} ({})\n", v.word(), tally(v));
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
    for c in &v.not_applicable {
        // The record's detail says N/A itself (gate.json has no status column); once is enough here.
        o.push_str(&format!("  N/A   {}: {}\n", c.name, c.detail.strip_prefix("N/A: ").unwrap_or(&c.detail)));
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

    fn record(strict: f64, flexible: f64) -> EvalRecord {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("results_2026-01-01T00-00-00.json"),
            format!(
                r#"{{"lm_eval_version": "0.4.9", "results": {{"gsm8k": {{"exact_match,strict-match": {strict}, "exact_match,flexible-extract": {flexible},
                "exact_match_stderr,strict-match": 0.004}}}}, "n-samples": {{"gsm8k": {{"original": 1319, "effective": 1319}}}}, "config": {{"limit": null}}}}"#
            ),
        )
        .unwrap();
        std::fs::write(d.path().join("meta_env.json"), r#"{"infmax_model_prefix": "dsv4", "hw": "b200", "tp": 8, "conc": 64}"#).unwrap();
        crate::eval::record::read_eval_dir(d.path()).unwrap()
    }

    #[test]
    fn eval_scores_both_filters_must_pass() {
        let t = Thresholds::embedded();
        let g = check_eval(&record(0.95, 0.89), "row", &t, None);
        assert!(!g.check.passed && g.check.detail == "em_flexible 0.8900 < 0.91 (models.dsv4)", "{g:?}");
        let g = check_eval(&record(0.975, 0.976), "row", &t, None);
        assert!(g.check.passed, "{g:?}");
        assert_eq!(g.check.detail, "em_strict 0.9750, em_flexible 0.9760 ≥ 0.91 (models.dsv4), n=1319, infrastructure_success: true");
        // An explicit prefix without an entry falls back to the default, not to a similar prefix.
        let g = check_eval(&record(0.905, 0.905), "row", &t, Some("dsv4.1"));
        assert!(g.check.passed && g.threshold == Some((0.90, "default".into())), "{g:?}");
    }

    #[test]
    fn partial_n_failed_infrastructure_and_not_applicable() {
        let t = Thresholds::embedded();
        let mut r = record(0.98, 0.98);
        r.limit = Some(50);
        r.n = 50;
        let g = check_eval(&r, "row", &t, None);
        assert!(!g.check.passed && g.check.detail.contains("partial n: 50 of 1319 (limited to the first 50 questions)"), "{g:?}");
        let mut r = record(0.98, 0.98);
        r.n = 1200;
        assert!(check_eval(&r, "row", &t, None).check.detail.contains("partial n: 1200 of 1319"));
        let mut r = record(0.98, 0.98);
        r.infrastructure_success = false;
        r.status = EvalStatus::Failed;
        r.reason = Some("3 question(s) failed".into());
        let g = check_eval(&r, "row", &t, None);
        assert!(!g.check.passed && g.check.detail.starts_with("infrastructure_success: false (failed: 3 question(s) failed)"), "{g:?}");
        let mut r = record(0.98, 0.98);
        r.status = EvalStatus::NotApplicable;
        r.reason = Some("simulated engine".into());
        r.em_strict = None;
        r.em_flexible = None;
        let g = check_eval(&r, "row", &t, None);
        assert!(!g.applicable && g.check.passed && g.threshold.is_none(), "{g:?}");
        assert!(g.check.detail.starts_with("N/A: not_applicable: simulated engine") && !g.check.detail.contains('0'), "{g:?}");
    }

    #[test]
    fn thresholds_files_as_validate_scores_reads_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.yaml");
        std::fs::write(&p, "gsm8k: 0.8\n").unwrap();
        assert_eq!(Thresholds::load(&p).unwrap().lookup(Some("x"), "gsm8k"), (0.8, "default".into()), "legacy flat form");
        std::fs::write(&p, "default: {gsm8k: high}\n").unwrap();
        let e = Thresholds::load(&p).unwrap_err().to_string();
        assert!(e.contains("t.yaml") && e.contains("default: {gsm8k: 0.90}"), "{e}");
        let t = Thresholds::embedded();
        assert_eq!(t.lookup(Some("glm5"), "gsm8k"), (0.94, "models.glm5".into()));
        assert_eq!(t.lookup(None, "gpqa_diamond_cot_n_shot"), (0.30, "default".into()));
        assert_eq!(t.lookup(Some("dsv4"), "mmlu"), (0.85, "min-score".into()));
    }

    #[test]
    fn numbers_for_humans() {
        assert_eq!(fmt_num(7314.2), "7,314");
        assert_eq!(fmt_num(279528.8), "279,529");
        assert_eq!(fmt_num(12.34), "12.3");
    }
}
