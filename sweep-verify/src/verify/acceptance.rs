//! Check 11: agentic speculative-decoding configs simulate acceptance at the golden AL of their
//! model, thinking mode and draft length — SGLang `SGLANG_SIMULATE_ACC_LEN`, vLLM
//! `--speculative-config` with `"rejection_sample_method": "synthetic"` and
//! `"synthetic_acceptance_length"`, TRT-LLM `TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS` = AL − 1 —
//! read from the effective environment (every layer a point inherits). Simulated-acceptance knobs
//! on a non-agentic spec-decode config fail, and so does a draft-precision knob under simulated
//! acceptance: with acceptance pinned, a cheaper draft would be a speed-up the AL never charges.

use super::scan::{self, LaunchView};
use super::snapshot::Layout;
use super::{Check, Ctx, Finding};
use crate::golden_al::{Golden, GoldenError, fmt_al};
use crate::recipe::master::Entry;
use crate::recipe::serving::flag_value;
use serde_json::Value;

const SGLANG_AL: &str = "SGLANG_SIMULATE_ACC_LEN";
const TRT_AL: &str = "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS";
/// Knobs that set the draft model's precision.
const DRAFT_PRECISION_FLAGS: [&str; 2] = ["--speculative-draft-model-quantization", "--speculative-draft-quantization"];

/// The `--speculative-config` JSON of a launch.
fn spec_config(argv: &[String]) -> Option<(Value, String)> {
    let raw = flag_value(argv, &["--speculative-config", "--speculative_config"])?;
    serde_json::from_str(raw).ok().map(|v| (v, raw.to_string()))
}

/// How the launch simulates acceptance: (the knob, its text, the AL it means).
fn simulated(l: &LaunchView) -> Option<(String, String, Option<f64>)> {
    if let Some(v) = l.env.get(SGLANG_AL) {
        return Some((SGLANG_AL.into(), v.clone(), v.parse().ok()));
    }
    if let Some(v) = l.env.get(TRT_AL) {
        // Accepted draft tokens without the bonus token: AL − 1.
        return Some((TRT_AL.into(), v.clone(), v.parse::<f64>().ok().map(|x| x + 1.0)));
    }
    let (cfg, raw) = spec_config(&l.argv)?;
    let synthetic = cfg.get("rejection_sample_method").and_then(Value::as_str) == Some("synthetic");
    let al = cfg.get("synthetic_acceptance_length");
    (synthetic || al.is_some()).then(|| {
        (
            "--speculative-config".into(),
            raw,
            if synthetic { al.and_then(|a| a.as_f64().or_else(|| a.as_str().and_then(|s| s.parse().ok()))) } else { None },
        )
    })
}

/// Any simulated-acceptance knob present (for the non-agentic rule).
fn sim_knob(l: &LaunchView) -> Option<String> {
    l.env.keys().find(|k| k.starts_with("SGLANG_SIMULATE_ACC") || k.as_str() == TRT_AL).cloned().or_else(|| {
        spec_config(&l.argv).filter(|(c, _)| c.get("synthetic_acceptance_length").is_some()).map(|_| "synthetic_acceptance_length".into())
    })
}

/// Speculative tokens per round (K) and the method the golden curve is named by.
fn draft_length(l: &LaunchView) -> (Option<u32>, Option<&'static str>) {
    if let Some(k) = l.env.get("NUM_SPEC_TOKENS").and_then(|v| v.parse().ok()) {
        return (Some(k), None);
    }
    if let Some((c, _)) = spec_config(&l.argv) {
        let k =
            c.get("num_speculative_tokens").and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))).map(|k| k as u32);
        let method = c.get("method").and_then(Value::as_str).map(|m| m.to_ascii_lowercase());
        let m = match method.as_deref() {
            Some(m) if m.contains("eagle3") => Some("eagle3"),
            Some(m) if m.contains("dspark") => Some("dspark"),
            Some(m) if m.contains("mtp") || m.contains("eagle") => Some("mtp"),
            _ => None,
        };
        return (k, m);
    }
    let algo = flag_value(&l.argv, &["--speculative-algorithm", "--speculative-algo"]).map(str::to_ascii_uppercase);
    let k = match algo.as_deref() {
        Some("DSPARK") => flag_value(&l.argv, &["--speculative-dspark-block-size"]),
        _ => flag_value(&l.argv, &["--speculative-num-steps"]),
    }
    .and_then(|v| v.parse().ok());
    let m = match algo.as_deref() {
        Some("DSPARK") => Some("dspark"),
        Some("EAGLE3") => Some("eagle3"),
        Some("EAGLE") | Some("NEXTN") => Some("mtp"),
        _ => None,
    };
    (k, m)
}

fn is_spec_launch(l: &LaunchView) -> bool {
    l.argv.iter().any(|a| a.starts_with("--speculative")) || l.env.contains_key("NUM_SPEC_TOKENS")
}

fn env_line(l: &LaunchView, k: &str) -> Option<usize> {
    l.env_lines.get(k).copied().flatten().or(l.line)
}

/// Knobs that change the draft's precision (its quantization flags, or the speculative config's
/// `quantization`): a speed-up that simulated acceptance never charges.
fn draft_precision_findings(l: &LaunchView) -> Vec<Finding> {
    let mut bad = Vec::new();
    for f in DRAFT_PRECISION_FLAGS {
        if let Some(v) = flag_value(&l.argv, &[f]) {
            bad.push(Finding::new(
                &l.file,
                l.line,
                format!("{f} {v}"),
                format!("{}: {f} {v} changes the draft's precision under simulated acceptance", l.label),
            ));
        }
    }
    if let Some((c, raw)) = spec_config(&l.argv)
        && let Some(q) = c.get("quantization").filter(|q| !q.is_null())
    {
        bad.push(Finding::new(
            &l.file,
            l.line,
            scan::shown(&raw),
            format!("{}: the draft's quantization {q} changes its precision under simulated acceptance", l.label),
        ));
    }
    bad
}

/// The finding of an agentic spec-decode launch that runs real acceptance: the knob to set.
fn unsimulated(l: &LaunchView) -> Finding {
    let knob = match l.framework.as_str() {
        "vllm" => "--speculative-config rejection_sample_method synthetic + synthetic_acceptance_length",
        f if f.contains("trt") => TRT_AL,
        _ => SGLANG_AL,
    };
    Finding::new(&l.file, l.line, &l.label, format!("{}: agentic spec-decode runs real (unsimulated) acceptance: set {knob}", l.label))
}

/// Why a launch has no golden AL: no curves at all, or the last store's reason.
#[derive(Debug, thiserror::Error)]
enum GoldenLookupError {
    #[error("no golden AL curves in the repository (golden_al/ or golden_al_distribution/)")]
    NoCurves,
    #[error(transparent)]
    Lookup(#[from] GoldenError),
}

/// The golden AL of the launch's model, thinking mode (its environment's, else its serving
/// recipe's) and draft length from the first golden store that has it; else the last reason.
fn golden_for(ctx: &Ctx, l: &LaunchView, k: u32, method: Option<&str>) -> Result<Golden, GoldenLookupError> {
    let thinking = l.env.get("THINKING_MODE").cloned().or_else(|| {
        l.key
            .as_ref()
            .and_then(|key| ctx.head.recipes.get(key))
            .and_then(|r| r.simulated_acceptance.as_ref())
            .and_then(|s| s.thinking_mode.clone())
    });
    let mut last_err = GoldenLookupError::NoCurves;
    for g in scan::goldens(ctx) {
        match g.lookup(&l.prefix, thinking.as_deref(), k, method) {
            Ok(gold) => return Ok(gold),
            Err(e) => last_err = e.into(),
        }
    }
    Err(last_err)
}

/// How `knob={text}` shows the pinned `al`, and what to set it to for the golden AL `gold`
/// (TRT-LLM counts accepted tokens without the bonus token: AL − 1).
fn shown_and_wanted(knob: &str, text: &str, al: f64, gold: f64) -> (String, String) {
    if knob == TRT_AL {
        (format!("{knob}={text} (AL {})", fmt_al(al)), format!("{} (golden AL {} − 1)", fmt_al(gold - 1.0), fmt_al(gold)))
    } else {
        (format!("{knob}={text}"), fmt_al(gold))
    }
}

/// The findings of one agentic spec-decode launch; `Ok` with a summary when it is right.
fn agentic(ctx: &Ctx, l: &LaunchView) -> Result<String, Vec<Finding>> {
    let mut bad = draft_precision_findings(l);
    let Some((knob, text, al)) = simulated(l) else {
        bad.push(unsimulated(l));
        return Err(bad);
    };
    let at = env_line(l, if knob.starts_with("--") { "" } else { &knob });
    let Some(al) = al else {
        bad.push(Finding::new(&l.file, at, format!("{knob}={text}"), format!("{}: {knob} sets no readable acceptance length", l.label)));
        return Err(bad);
    };
    let (k, method) = draft_length(l);
    let Some(k) = k else {
        bad.push(Finding::new(&l.file, l.line, &l.label, format!("{}: the draft length (speculative tokens) is not readable", l.label)));
        return Err(bad);
    };
    let gold = match golden_for(ctx, l, k, method) {
        Ok(gold) => gold,
        Err(last_err) => {
            let sourced = ctx.facts.and_then(|f| f.detail_section()).is_some_and(|d| d.to_ascii_lowercase().contains("golden"));
            if sourced && bad.is_empty() {
                return Ok(format!("{}: no committed golden curve; the sign-off states the AL's source", l.label));
            }
            bad.push(Finding::new(
                &l.file,
                at,
                format!("{knob}={text}"),
                format!("{}: {last_err}; the sign-off must state the AL's source", l.label),
            ));
            return Err(bad);
        }
    };
    if (gold.al - al).abs() > 1e-9 {
        let (shown, want) = shown_and_wanted(&knob, &text, al, gold.al);
        bad.push(Finding::new(
            &l.file,
            at,
            shown,
            format!(
                "{}: pinned AL {} but the golden AL for {}{} K={k} is {} ({}); set {want}",
                l.label,
                fmt_al(al),
                gold.slug,
                gold.mode.as_deref().map(|m| format!(" {m}")).unwrap_or_default(),
                fmt_al(gold.al),
                gold.file.display()
            ),
        ));
        return Err(bad);
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    let who = l.key.clone().unwrap_or_else(|| l.file.clone());
    Ok(format!("{who} AL {} = golden {}{} K={k}", fmt_al(al), gold.slug, gold.mode.map(|m| format!(" {m}")).unwrap_or_default()))
}

/// Whether the config's serving recipe drafts: a spec-decode config whatever its master rows say.
fn recipe_drafts(ctx: &Ctx, key: &str) -> bool {
    ctx.head.recipes.get(key).is_some_and(|r| {
        r.simulated_acceptance.is_some()
            || r.worker
                .args
                .iter()
                .chain(r.arms.iter().flat_map(|a| a.args.iter().chain(a.points.iter().flat_map(|p| p.args.iter()))))
                .any(|a| a.starts_with("--speculative"))
    })
}

/// The finding of a single-node agentic config with no launch script to verify.
fn no_launch_script(ctx: &Ctx, key: &str, e: &Entry) -> Finding {
    let (f, l) = ctx.master_line(key, "scenarios");
    Finding::new(
        f,
        l,
        key,
        format!(
            "{key}: no launch script found (benchmarks/single_node/agentic/{}_{}_{}*_mtp.sh), so its simulated acceptance cannot be verified",
            e.model_prefix,
            e.precision,
            scan::sku(&e.runner)
        ),
    )
}

/// The launches of the changed spec-decode configs; one that cannot be resolved is a finding.
fn changed_config_launches(ctx: &Ctx, launches: &mut Vec<LaunchView>, bad: &mut Vec<Finding>) {
    for key in &ctx.changed_keys {
        let Some(e) = ctx.head.master.get(key) else { continue };
        if !scan::is_spec(e) && !recipe_drafts(ctx, key) {
            continue;
        }
        match ctx.head.layout {
            Layout::Sweep => {
                for r in scan::recipe_launches(ctx, key) {
                    match r {
                        Ok(l) => launches.push(l),
                        Err(f) => bad.push(f),
                    }
                }
            }
            Layout::InferenceX => {
                let scripts = scan::scripts_of(&ctx.head.files, e, true, true);
                if e.has_agentic && !e.multinode && scripts.is_empty() {
                    bad.push(no_launch_script(ctx, key, e));
                }
                launches.extend(scripts.iter().filter_map(|s| scan::script_launch(ctx, s)));
            }
        }
    }
}

/// Changed launch scripts and srt-slurm recipes, agentic or not, that speculate or simulate
/// acceptance (those already among `launches` aside).
fn changed_script_launches(ctx: &Ctx, launches: &mut Vec<LaunchView>) {
    for c in ctx.changes.iter().filter(|c| c.status != 'D' && c.path.starts_with("benchmarks/")) {
        if launches.iter().any(|l| l.file == c.path) {
            continue;
        }
        if let Some(t) = ctx.head_texts.get(&c.path) {
            let mut v = scan::script_view(&c.path, t);
            v.agentic = c.path.contains("/agentic/");
            if is_spec_launch(&v) || c.path.ends_with("_mtp.sh") || sim_knob(&v).is_some() {
                launches.push(v);
            }
        }
    }
}

pub fn check(ctx: &Ctx) -> Check {
    let mut launches: Vec<LaunchView> = Vec::new();
    // A golden value that moves changes every config injecting it.
    let mut bad = if ctx.facts.and_then(|f| f.exception(11)).is_some() { Vec::new() } else { ctx.golden_changes.clone() };
    changed_config_launches(ctx, &mut launches, &mut bad);
    changed_script_launches(ctx, &mut launches);
    if launches.is_empty() && bad.is_empty() {
        return Check::na(11, "no agentic speculative-decoding change");
    }
    let exception = ctx.facts.and_then(|f| f.exception(11));
    let mut ok = Vec::new();
    let mut agentic_seen = 0;
    for l in &launches {
        if l.agentic {
            agentic_seen += 1;
            match agentic(ctx, l) {
                Ok(s) => ok.push(s),
                Err(f) => bad.extend(f),
            }
        } else if let Some(k) = sim_knob(l)
            && exception.is_none()
        {
            bad.push(Finding::new(
                &l.file,
                env_line(l, &k),
                &k,
                format!("{}: simulated acceptance ({k}) on a non-agentic spec-decode config (real-traffic AL applies)", l.label),
            ));
        }
    }
    if !bad.is_empty() {
        return Check::from_findings(11, bad, "");
    }
    if agentic_seen == 0 {
        return Check::na(11, "no agentic speculative-decoding change");
    }
    // One line: the distinct settings, not every point.
    ok.sort();
    let n = ok.len();
    ok.dedup();
    Check::pass(11, format!("{n} agentic spec-decode launch(es) simulate the golden AL: {}", ok.join("; ")))
}
