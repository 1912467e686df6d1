//! Check 2: the run's evals pass — every `exact_match` filter at or above the model's threshold
//! (`thresholds.yaml`: `models[prefix][task]`, else `default[task]`, else 0.85, as
//! `validate_scores.py`), over the task's full size, with `infrastructure_success` not false, no
//! `not_applicable` stand-in for a score, every selected eval row present, and the run on the
//! image the pull request's config pins.

use super::artifacts::{EvalRow, RunArtifacts};
use super::{Check, Ctx, Finding};
use std::collections::BTreeSet;

/// Full sizes of the tasks whose size is fixed (the GSM8K test split).
fn task_size(task: &str) -> Option<u64> {
    (task == "gsm8k").then_some(1319)
}

/// `validate_scores.py`'s fallback when no threshold applies.
const MIN_SCORE: f64 = 0.85;

fn threshold(ctx: &Ctx, prefix: Option<&str>, task: &str) -> (f64, String) {
    let Some((file, t)) = &ctx.thresholds else { return (MIN_SCORE, "no thresholds.yaml: validate_scores.py --min-score 0.85".into()) };
    if let Some(x) = prefix.and_then(|p| t.models.get(p)).and_then(|m| m.get(task)) {
        return (*x, format!("{file} models.{}.{task}", prefix.unwrap_or_default()));
    }
    match t.default.get(task) {
        Some(x) => (*x, format!("{file} default.{task}")),
        None => (MIN_SCORE, format!("{file} has no {task} threshold: --min-score 0.85")),
    }
}

/// `TP2/EP2 C32` or `DEP2 C160` (attention data parallel).
fn label(r: &EvalRow) -> String {
    let dp = r.dp_attention.as_deref().is_some_and(|d| d.eq_ignore_ascii_case("true"));
    let conc = r.conc.map(|c| format!(" C{c}")).unwrap_or_default();
    match (r.tp, r.ep) {
        (Some(tp), _) if dp => format!("DEP{tp}{conc}"),
        (Some(tp), Some(ep)) if ep > 1 => format!("TP{tp}/EP{ep}{conc}"),
        (Some(tp), _) => format!("TP{tp}{conc}"),
        _ => conc.trim().to_string(),
    }
}

pub fn check(ctx: &Ctx) -> Check {
    let Some(run) = ctx.run else { return Check::na(2, "eval results are run artifacts: pass --run DIR") };
    if ctx.eval_rows.is_empty() && run.evals.is_empty() {
        let why = if ctx.appended.as_ref().is_ok_and(|a| !a.is_empty() && a.iter().all(|e| e.append_only)) {
            "append-only entries run no evals"
        } else {
            "the new changelog entries select no eval rows and the run has none"
        };
        return Check::na(2, why);
    }
    let dir = run.dir.display().to_string();
    if run.evals.is_empty() {
        return Check::fail(
            2,
            format!("evals skipped or empty: no eval results in {dir} ({} eval row(s) selected)", ctx.eval_rows.len()),
            vec![Finding::new(&dir, None, "eval results", "no results*.json with meta_env.json, no agg_eval_all.json")],
        );
    }
    let mut bad = Vec::new();
    let mut passed = Vec::new();
    for r in &run.evals {
        match score(ctx, r) {
            Ok(p) => passed.push(p),
            Err(findings) => bad.extend(findings),
        }
    }
    bad.extend(missing_results(ctx, run, &dir));
    let images = run_images(ctx, run, &mut bad);
    if !bad.is_empty() {
        return Check::from_findings(2, bad, "");
    }
    Check::pass(2, pass_reason(run, &passed, &images))
}

/// An eval result that cleared its bar over the task's full size.
struct Passed {
    task: String,
    /// `0.9750 (TP2/EP2 C32)`.
    score: String,
    /// `0.85 bar (<where the threshold comes from>)`.
    bar: String,
    n: Option<u64>,
}

/// Scores one eval result: what it passed with, or every reason it does not pass.
fn score(ctx: &Ctx, r: &EvalRow) -> Result<Passed, Vec<Finding>> {
    let src = r.source.display().to_string();
    let who = format!("{} {}", r.task, label(r));
    if let Some(na) = &r.not_applicable {
        return Err(vec![Finding::new(&src, None, format!("not_applicable: {na}"), format!("{who}: no score (not_applicable: {na})"))]);
    }
    if r.infrastructure_success == Some(false) {
        return Err(vec![Finding::new(&src, None, "infrastructure_success: false", format!("{who}: the eval's infrastructure failed"))]);
    }
    let (thr, source) = threshold(ctx, r.model_prefix.as_deref(), &r.task);
    let Some(strict) = r.em_strict else {
        return Err(vec![Finding::new(&src, None, "exact_match", format!("{who}: no exact_match score in the results"))]);
    };
    let mut bad = Vec::new();
    for (name, v) in [("em_strict", Some(strict)), ("em_flexible", r.em_flexible)] {
        if let Some(v) = v
            && v < thr
        {
            bad.push(Finding::new(
                &src,
                None,
                format!("{name} {v:.4}"),
                format!("{who}: {name} {v:.4} is below the {thr:.2} bar ({source})"),
            ));
        }
    }
    let full = r.n_total.or_else(|| task_size(&r.task));
    match (r.n_eff, full) {
        (Some(n), Some(f)) if n < f => bad.push(Finding::new(&src, None, format!("n={n}"), format!("{who}: partial n={n} of {f}"))),
        (None, _) => bad.push(Finding::new(&src, None, "n_eff", format!("{who}: the results record no sample count"))),
        _ => {}
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    Ok(Passed { task: r.task.clone(), score: format!("{strict:.4} ({})", label(r)), bar: format!("{thr:.2} bar ({source})"), n: r.n_eff })
}

/// The selected eval rows the run has no result for (matched on the fields both record).
fn missing_results(ctx: &Ctx, run: &RunArtifacts, dir: &str) -> Vec<Finding> {
    let mut bad = Vec::new();
    for row in &ctx.eval_rows {
        let get = |k: &str| row.fields.get(k).and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())));
        let prefix = row.fields.get("model-prefix").and_then(|v| v.as_str());
        let (tp, ep, conc) = (get("tp"), get("ep"), row.concs().into_iter().max().map(u64::from));
        let hit = run.evals.iter().any(|e| {
            let eq = |a: Option<u64>, b: Option<u64>| a.is_none() || b.is_none() || a == b;
            (prefix.is_none() || e.model_prefix.is_none() || e.model_prefix.as_deref() == prefix)
                && eq(e.tp, tp)
                && eq(e.ep, ep)
                && eq(e.conc, conc)
        });
        if !hit {
            let name = row.fields.get("exp-name").and_then(|v| v.as_str()).unwrap_or(&row.origin.config_key);
            bad.push(Finding::new(
                dir,
                None,
                name,
                format!("no eval result for {} (tp {}, ep {}, conc {})", name, tp.unwrap_or(0), ep.unwrap_or(0), conc.unwrap_or(0)),
            ));
        }
    }
    bad
}

/// The images the run recorded for the submitted configs, and where they were recorded.
#[derive(Default)]
struct RunImages {
    images: Vec<String>,
    from_tput: bool,
    from_evals: bool,
}

impl RunImages {
    /// `image X (the evals')`, `images X, Y (…)`, or that the run recorded none.
    fn describe(&self) -> String {
        let which = match (self.from_evals, self.from_tput) {
            (true, true) => "the evals' and the throughput run's",
            (true, false) => "the evals'",
            (false, true) => "the throughput run's; the eval results record none",
            (false, false) => "",
        };
        match self.images.as_slice() {
            [] => "image not recorded by the run".to_string(),
            [one] => format!("image {one} ({which})"),
            many => format!("images {} ({which})", many.join(", ")),
        }
    }
}

/// The image: what the throughput points ran and what the evals record, against what the config
/// pins. Pushes a finding per point or result on another image.
fn run_images(ctx: &Ctx, run: &RunArtifacts, bad: &mut Vec<Finding>) -> RunImages {
    let mut seen = RunImages::default();
    for key in &ctx.submitted {
        let Some(e) = ctx.head.master.get(key) else { continue };
        let pts: Vec<_> = run
            .points
            .iter()
            .filter(|p| {
                p.config_key.as_deref() == Some(key) || (p.config_key.is_none() && p.model_prefix.as_deref() == Some(&e.model_prefix))
            })
            .collect();
        for p in &pts {
            if let Some(img) = &p.image
                && img != &e.image
            {
                let (f, l) = ctx.master_line(key, "image");
                bad.push(Finding::new(
                    p.file.display().to_string(),
                    None,
                    img,
                    format!("the run's throughput point {} used {img}, not the image {key} pins ({f}:{})", p.id, l.unwrap_or(0)),
                ));
            }
        }
        for r in run.evals.iter().filter(|r| r.model_prefix.is_none() || r.model_prefix.as_deref() == Some(&e.model_prefix)) {
            if let Some(img) = &r.image
                && img != &e.image
            {
                bad.push(Finding::new(
                    r.source.display().to_string(),
                    None,
                    img,
                    format!("the eval ran on {img}, not the image {key} pins ({})", e.image),
                ));
            }
        }
        let evals_recorded = run.evals.iter().any(|r| r.image.as_deref() == Some(&e.image));
        if !pts.is_empty() || evals_recorded {
            seen.images.push(e.image.clone());
            seen.from_tput |= pts.iter().any(|p| p.image.is_some());
            seen.from_evals |= evals_recorded;
        }
    }
    seen.images.sort();
    seen.images.dedup();
    seen
}

/// The PASS reason: `gsm8k em_strict 0.9750 (TP2/EP2 C32) and 0.9742 (DEP2 C160), n=1319, …`,
/// per task in the runs' order.
fn pass_reason(run: &RunArtifacts, passed: &[Passed], images: &RunImages) -> String {
    let bars: BTreeSet<&str> = passed.iter().map(|p| p.bar.as_str()).collect();
    let ns: BTreeSet<u64> = passed.iter().filter_map(|p| p.n).collect();
    let n = ns.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("/");
    let mut tasks: Vec<&str> = passed.iter().map(|p| p.task.as_str()).collect();
    tasks.dedup();
    let scores: Vec<String> = tasks
        .iter()
        .map(|t| {
            format!("{t} em_strict {}", passed.iter().filter(|p| p.task == *t).map(|p| p.score.as_str()).collect::<Vec<_>>().join(" and "))
        })
        .collect();
    let infra = if run.evals.iter().all(|r| r.infrastructure_success == Some(true)) { ", infrastructure_success: true" } else { "" };
    format!("{}, n={n}{infra}, {}, above the {}", scores.join("; "), images.describe(), bars.into_iter().collect::<Vec<_>>().join(" and "))
}
