//! The checks the forge decides — 0 (CODEOWNER sign-off), 1 (a passing sweep and evals on a
//! commit in the PR), 3 (upstream recipe link, merged, major args), 4 (`/reuse-sweep-run`),
//! 5 (latest checklist template) — from `--pr-facts`, the repository and, for 1, `--run`.

use super::artifacts::RunArtifacts;
use super::codeowners;
use super::facts::{CheckRun, PrFacts};
use super::scan::{self, LaunchView};
use super::snapshot::Layout;
use super::{Check, Ctx, Finding};
use crate::results::RunSummary;
use std::collections::{BTreeMap, BTreeSet};

const NEEDS_FACTS: &str = "decided by the forge: pass --pr-facts";

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

/// Check 0: the sign-off author owns, by CODEOWNERS, every specific changed path.
pub fn codeowners(ctx: &Ctx) -> Check {
    let Some(f) = ctx.facts else { return Check::na(0, format!("{NEEDS_FACTS} (signer)")) };
    let Some(signer) = f.signer.as_deref().map(|s| s.trim_start_matches('@')) else {
        return Check::na(0, "the pr-facts name no `signer`: the sign-off author is unknown");
    };
    let (text, file) = match (&f.codeowners, &ctx.base.codeowners) {
        (Some(t), _) => (t.clone(), "pr-facts codeowners".to_string()),
        (None, Some(t)) => (t.text.clone(), t.path.clone()),
        (None, None) => return Check::na(0, "no CODEOWNERS at the base revision and none in the pr-facts"),
    };
    let rules = codeowners::parse(&text);
    let me = format!("@{signer}").to_ascii_lowercase();
    let member = |owner: &str| -> Option<bool> {
        let o = owner.to_ascii_lowercase();
        if o == me {
            return Some(true);
        }
        if !o.contains('/') {
            return Some(false);
        }
        // A team: known members decide; an unreadable team does not fail the check.
        f.teams
            .iter()
            .find(|(t, _)| t.to_ascii_lowercase() == o)
            .map(|(_, m)| m.iter().any(|u| u.trim_start_matches('@').eq_ignore_ascii_case(signer)))
    };
    let recognised = rules.iter().any(|r| r.owners.iter().any(|o| member(o) == Some(true)));
    let mut bad = Vec::new();
    let (mut specific, mut unreadable) = (0, 0);
    for c in &ctx.changes {
        let Some(rule) = codeowners::owner_rule(&rules, &c.path) else { continue };
        if rule.catch_all() {
            if !recognised {
                bad.push(Finding::new(
                    &file,
                    Some(rule.line),
                    &rule.pattern,
                    format!("{} is owned by {} and @{signer} is no CODEOWNER", c.path, rule.owners.join(" ")),
                ));
            }
            continue;
        }
        specific += 1;
        let verdicts: Vec<Option<bool>> = rule.owners.iter().map(|o| member(o)).collect();
        if verdicts.contains(&Some(true)) {
            continue;
        }
        // An owner team whose members are not given is unreadable membership: never a failure.
        if verdicts.contains(&None) {
            unreadable += 1;
            continue;
        }
        bad.push(Finding::new(
            &file,
            Some(rule.line),
            &rule.pattern,
            format!("@{signer} does not own {} (owners: {})", c.path, rule.owners.join(" ")),
        ));
    }
    if bad.is_empty() {
        let note = if unreadable > 0 { format!("; {unreadable} owned by teams whose members are not given") } else { String::new() };
        Check::pass(
            0,
            format!("@{signer} is a CODEOWNER of the {} changed path(s) ({specific} with specific owners{note})", ctx.changes.len()),
        )
    } else {
        Check::from_findings(0, bad, "")
    }
}

fn run_id(url: &str) -> Option<&str> {
    let rest = url.split("/actions/runs/").nth(1)?;
    Some(rest.split('/').next().unwrap_or(rest))
}

/// Check 1: green (not skipped) `single-node */` and `eval /` check runs on a commit that is in
/// the pull request; with `--run`, that run was made from a commit of the PR, measured, finished,
/// gated green, with its evals run, its metrics published and its curves' coverage stated.
pub fn sweep_ran(ctx: &Ctx) -> Check {
    let evals_expected = !ctx.eval_rows.is_empty();
    let mut parts = Vec::new();
    let mut bad = Vec::new();
    let mut decided = false;
    if let Some(f) = ctx.facts.filter(|f| !f.check_runs.is_empty()) {
        decided = true;
        let commits: Vec<String> = f.commits.clone().unwrap_or_else(|| ctx.commits.clone());
        match green_check_runs(f, &commits, evals_expected) {
            Ok(part) => parts.push(part),
            Err(finding) => bad.push(finding),
        }
    }
    // A sweep run directory (downloaded eval artifacts alone say nothing of the sweep).
    if let Some(run) = ctx.run.filter(|r| r.summary.is_some()) {
        decided = true;
        run_made_and_gated(ctx, run, &mut parts, &mut bad);
        if let Some(s) = &run.summary {
            run_published(run, s, &mut parts, &mut bad);
        }
        if evals_expected {
            bad.extend(run_evals_missing(run));
        }
    }
    if !decided {
        return Check::na(1, format!("{NEEDS_FACTS} (check_runs) or --run with a sweep run directory"));
    }
    if bad.is_empty() { Check::pass(1, parts.join("; ")) } else { Check::from_findings(1, bad, "") }
}

/// The forge's side of Check 1: the first of `commits` with green sweep (and, when expected,
/// eval) check runs, else a finding saying why none is green.
fn green_check_runs(f: &PrFacts, commits: &[String], evals_expected: bool) -> Result<String, Finding> {
    let same = |a: &str, b: &str| !a.is_empty() && !b.is_empty() && (a.starts_with(b) || b.starts_with(a));
    let ok = |v: &[&&CheckRun]| !v.is_empty() && v.iter().all(|r| r.conclusion.as_deref() == Some("success"));
    let mut why = Vec::new();
    for c in commits {
        let runs: Vec<_> = f.check_runs.iter().filter(|r| same(&r.sha, c)).collect();
        let sweep: Vec<_> = runs.iter().filter(|r| r.name.starts_with("single-node")).collect();
        let eval: Vec<_> = runs.iter().filter(|r| r.name == "eval" || r.name.starts_with("eval /")).collect();
        if ok(&sweep) && (ok(&eval) || (!evals_expected && eval.is_empty())) {
            let id = eval.iter().chain(sweep.iter()).find_map(|r| r.details_url.as_deref().and_then(run_id));
            return Ok(format!(
                "green single-node{} check runs on {}{}",
                if evals_expected { " and eval" } else { "" },
                short(c),
                id.map(|i| format!(" (run {i})")).unwrap_or_default()
            ));
        }
        for r in sweep.iter().chain(eval.iter()).filter(|r| r.conclusion.as_deref() != Some("success")) {
            why.push(format!("`{}` {} on {}", r.name, r.conclusion.as_deref().unwrap_or("pending"), short(c)));
        }
        if sweep.is_empty() && !runs.is_empty() {
            why.push(format!("no `single-node */` check run on {}", short(c)));
        }
        if eval.is_empty() && evals_expected && !runs.is_empty() {
            why.push(format!("no `eval /` check run on {}", short(c)));
        }
    }
    let detail = if why.is_empty() { String::new() } else { format!(" ({})", why.into_iter().take(3).collect::<Vec<_>>().join("; ")) };
    Err(Finding::new("pr-facts", None, "check_runs", format!("No passing sweep/eval was found on any commit in this PR{detail}")))
}

/// The run was made at a commit of the PR, measured (not predicted), gated green and finished.
fn run_made_and_gated(ctx: &Ctx, run: &RunArtifacts, parts: &mut Vec<String>, bad: &mut Vec<Finding>) {
    let dir = run.dir.display().to_string();
    match &run.head_ref {
        Some(r) if ctx.commits.iter().any(|c| c.starts_with(r.as_str())) => parts.push(format!("run made at {r}, a commit of this PR")),
        Some(r) => bad.push(Finding::new(format!("{dir}/plan.json"), None, r, format!("the run was made at {r}, not a commit of this PR"))),
        None => bad.push(Finding::new(&dir, None, "plan.json", "the run records no commit (no plan.json head_ref)")),
    }
    let predicted: Vec<&str> = run.points.iter().filter(|p| p.result_kind.as_deref() == Some("predicted")).map(|p| p.id.as_str()).collect();
    if !predicted.is_empty() {
        bad.push(Finding::new(
            &dir,
            None,
            "result_kind: predicted",
            format!("the run is predicted (reference engine) at {} point(s), not a measured sweep", predicted.len()),
        ));
    }
    match run.gate_passed {
        Some(true) => parts.push("gate passed".into()),
        Some(false) => bad.push(Finding::new(format!("{dir}/gate.json"), None, "passed: false", "the run's gate failed")),
        None => bad.push(Finding::new(&dir, None, "gate.json", "the run has no gate verdict (run `sweep gate`)")),
    }
    for id in run.unfinished() {
        bad.push(Finding::new(format!("{dir}/summary.json"), None, &id, format!("point {id} did not finish with a valid aggregate")));
    }
}

/// Metrics publication: every throughput point published its aggregate with the engine's own
/// metrics captured; the curves' Pareto coverage is stated.
fn run_published(run: &RunArtifacts, s: &RunSummary, parts: &mut Vec<String>, bad: &mut Vec<Finding>) {
    let dir = run.dir.display().to_string();
    for p in s.points.iter().filter(|p| !p.id.starts_with("eval:") && p.ok()) {
        match run.points.iter().find(|x| x.id == p.id) {
            None => bad.push(Finding::new(&dir, None, &p.id, format!("point {} published no agg.json", p.id))),
            Some(x) if !x.has_tput => {
                bad.push(Finding::new(x.file.display().to_string(), None, "tput_per_gpu", "the aggregate has no tput_per_gpu"))
            }
            Some(x) if x.server_metrics == Some(false) => bad.push(Finding::new(
                x.file.display().to_string(),
                None,
                "server_metrics.present: false",
                format!("point {} captured no engine metrics (serve with --enable-metrics)", p.id),
            )),
            _ => {}
        }
    }
    let thin: Vec<String> = s
        .curves
        .iter()
        .filter(|c| c.coverage.frontier < crate::pareto::MIN_VALID_POINTS)
        .map(|c| format!("{} {} frontier point(s)", c.curve, c.coverage.frontier))
        .collect();
    parts.push(format!("{} point(s) published", run.points.len()));
    if !thin.is_empty() {
        parts.push(format!("Pareto coverage below the recommended {}: {}", crate::pareto::MIN_VALID_POINTS, thin.join(", ")));
    }
}

/// When evals were expected: the run has eval results and at least one of them executed.
fn run_evals_missing(run: &RunArtifacts) -> Option<Finding> {
    let dir = run.dir.display().to_string();
    if run.evals.is_empty() {
        Some(Finding::new(&dir, None, "eval results", "the sweep's evals did not run (no eval results in the run)"))
    } else if run.evals.iter().all(|e| e.not_applicable.is_some()) {
        Some(Finding::new(
            &dir,
            None,
            "not_applicable",
            format!("no eval executed ({})", run.evals[0].not_applicable.as_deref().unwrap_or_default()),
        ))
    } else {
        None
    }
}

/// Links to upstream recipe documentation the verifier accepts.
const RECIPE_SITES: [&str; 4] = [
    "https://github.com/vllm-project/recipes",
    "https://github.com/sgl-project/sglang",
    "https://recipes.vllm.ai/",
    "https://docs.sglang.io/cookbook",
];

fn links(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == '<' || c == '>' || c == '[' || c == ']' || c == '"')
        .filter(|w| RECIPE_SITES.iter().any(|s| w.starts_with(s)))
        .map(|w| w.trim_end_matches(['.', ',', ';']).to_string())
        .collect()
}

/// The deployment-defining flags of a launch (aliases folded), the verifier's MAJOR args.
fn major_args(argv: &[String]) -> BTreeMap<&'static str, String> {
    const VALUED: &[(&str, &[&str])] = &[
        ("model", &["--model-path", "--model"]),
        ("tp", &["--tensor-parallel-size", "--tp-size", "--tp", "-tp"]),
        ("ep", &["--expert-parallel-size", "--ep-size", "--ep"]),
        ("dp", &["--data-parallel-size", "--dp-size", "--dp"]),
        ("pp", &["--pipeline-parallel-size", "--pp-size", "--pp"]),
        ("quantization", &["--quantization", "-q"]),
        ("kv-cache-dtype", &["--kv-cache-dtype"]),
        ("attention-backend", &["--attention-backend"]),
        ("moe-runner-backend", &["--moe-runner-backend", "--moe-backend"]),
        ("moe-a2a-backend", &["--moe-a2a-backend"]),
    ];
    const SWITCHES: &[&str] =
        &["--enable-dp-attention", "--enable-dp-lm-head", "--enable-expert-parallel", "--enable-flashinfer-allreduce-fusion"];
    let mut out = BTreeMap::new();
    for (i, a) in argv.iter().enumerate() {
        let (name, inline) = a.split_once('=').map(|(n, v)| (n, Some(v.to_string()))).unwrap_or((a.as_str(), None));
        if let Some((canon, _)) = VALUED.iter().find(|(_, names)| names.contains(&name)) {
            if let Some(v) = inline.or_else(|| argv.get(i + 1).filter(|v| !v.starts_with('-')).cloned()) {
                out.insert(*canon, v);
            }
        } else if let Some(s) = SWITCHES.iter().find(|s| **s == name) {
            out.insert(s.trim_start_matches("--"), "on".into());
        }
        // `vllm serve MODEL`
        if a == "serve"
            && i > 0
            && argv[i - 1].ends_with("vllm")
            && let Some(m) = argv.get(i + 1).filter(|m| !m.starts_with('-'))
        {
            out.insert("model", m.clone());
        }
    }
    out
}

/// The single-node launches the pull request adds or changes, whether it changes a single-node
/// recipe at all (a master entry counts even when its launch script is not in the tree), and
/// whether it changes multi-node ones.
fn single_node_launches(ctx: &Ctx) -> (Vec<LaunchView>, bool, bool) {
    let mut out = Vec::new();
    let (mut single, mut multinode) = (false, false);
    for key in &ctx.changed_keys {
        let Some(e) = ctx.head.master.get(key) else { continue };
        if e.multinode || e.disagg {
            multinode = true;
            continue;
        }
        single = true;
        if ctx.head.layout == Layout::Sweep {
            out.extend(scan::recipe_launches(ctx, key).into_iter().flatten());
        }
    }
    if ctx.head.layout == Layout::InferenceX {
        for c in &ctx.changes {
            if c.status == 'D' || !c.path.ends_with(".sh") {
                continue;
            }
            if c.path.starts_with("benchmarks/multi_node/") {
                multinode = true;
            } else if c.path.starts_with("benchmarks/single_node/")
                && let Some(v) = scan::script_launch(ctx, &c.path)
            {
                single = true;
                out.push(v);
            }
        }
    }
    (out, single, multinode)
}

/// Check 3: the single-node recipe links merged upstream documentation whose major server args
/// match.
pub fn recipe(ctx: &Ctx) -> Check {
    let (launches, single, multinode) = single_node_launches(ctx);
    if !single {
        return Check::na(
            3,
            if multinode {
                "disaggregated/multi-node submission; the recipe-link requirement applies to single-node recipes only"
            } else {
                "no single-node recipe added or changed"
            },
        );
    }
    let Some(f) = ctx.facts.filter(|f| f.signoff.is_some()) else {
        return Check::na(3, format!("{NEEDS_FACTS} (signoff, recipe_links): the recipe link is in the sign-off"));
    };
    let detail = f.detail_section().unwrap_or("");
    let found = links(detail);
    if found.is_empty() {
        return Check::fail(
            3,
            "no link to a merged upstream recipe (vLLM recipes / SGLang cookbook) in the sign-off's additional detail section",
            vec![Finding::new("pr-facts", None, "signoff", "the additional detail section links no recipe")],
        );
    }
    let mut bad = Vec::new();
    let mut merged = None;
    for url in &found {
        match f.recipe_links.iter().find(|l| l.url.trim_end_matches('/') == url.trim_end_matches('/')) {
            None => bad.push(Finding::new("pr-facts", None, url, "merge state not given (recipe_links), so it cannot be verified")),
            Some(l) if l.state.eq_ignore_ascii_case("published") || (l.state.eq_ignore_ascii_case("merged") && l.merged_at.is_some()) => {
                merged.get_or_insert(l);
            }
            Some(l) => bad.push(Finding::new("pr-facts", None, url, format!("upstream recipe is {} (not merged)", l.state))),
        }
    }
    let Some(link) = merged else { return Check::fail(3, super::summarise(&bad), bad) };
    let Some(args) = &link.args else {
        return Check::fail(
            3,
            format!("the major server args of {} are not given (recipe_links[].args), so they cannot be compared", link.url),
            vec![Finding::new("pr-facts", None, &link.url, "no args")],
        );
    };
    let mismatch = arg_mismatches(&launches, &upstream_args(args));
    if mismatch.is_empty() {
        Check::pass(
            3,
            format!("{} ({}) matches the major server args of {} launch(es)", link.url, link.state.to_ascii_uppercase(), launches.len()),
        )
    } else {
        Check::from_findings(3, mismatch, "")
    }
}

/// The recipe's values per major flag (a flag given several times lists variants, e.g. TP 4 and 8).
fn upstream_args(args: &[String]) -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut upstream: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (i, a) in args.iter().enumerate() {
        let one = major_args(&args[i..(i + 2).min(args.len())]);
        if a.starts_with('-') || a == "serve" {
            for (k, v) in one {
                upstream.entry(k).or_default().insert(v);
            }
        }
    }
    upstream
}

/// The launches' major args the upstream recipe lacks or contradicts (one finding per value and
/// file in a row).
fn arg_mismatches(launches: &[LaunchView], upstream: &BTreeMap<&str, BTreeSet<String>>) -> Vec<Finding> {
    let mut mismatch = Vec::new();
    for l in launches {
        for (k, v) in major_args(&l.argv) {
            if v.starts_with('$') {
                continue;
            }
            match upstream.get(k) {
                None => mismatch.push(Finding::new(
                    &l.file,
                    l.line,
                    format!("{k} {v}"),
                    format!("{}: {k} {v} is missing from the upstream recipe", l.label),
                )),
                Some(vals) if !vals.contains(&v) => mismatch.push(Finding::new(
                    &l.file,
                    l.line,
                    format!("{k} {v}"),
                    format!(
                        "{}: {k} {v} contradicts the upstream recipe ({})",
                        l.label,
                        vals.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )),
                _ => {}
            }
        }
    }
    mismatch.dedup_by(|a, b| a.value == b.value && a.file == b.file);
    mismatch
}

/// Check 4: an authorized `/reuse-sweep-run [id]` comment line.
pub fn reuse(ctx: &Ctx) -> Check {
    let Some(comments) = ctx.facts.and_then(|f| f.comments.as_ref()) else { return Check::na(4, format!("{NEEDS_FACTS} (comments)")) };
    let is_cmd = |line: &str| {
        let t = line.trim();
        t.strip_prefix("/reuse-sweep-run").is_some_and(|rest| {
            rest.is_empty() || (rest.starts_with(char::is_whitespace) && rest.trim().chars().all(|c| c.is_ascii_digit()))
        })
    };
    let authorized = |a: &str| matches!(a.to_ascii_uppercase().as_str(), "OWNER" | "MEMBER" | "COLLABORATOR");
    let cmds: Vec<_> = comments.iter().filter(|c| c.body.lines().any(is_cmd)).collect();
    if let Some(c) = cmds.iter().find(|c| authorized(&c.association)) {
        let line = c.body.lines().rfind(|l| is_cmd(l)).unwrap_or("").trim();
        return Check::pass(4, format!("`{line}` by @{} ({})", c.user, c.association));
    }
    let detail = cmds.first().map(|c| format!(" (the only one is by @{}, {})", c.user, c.association)).unwrap_or_default();
    Check::fail(
        4,
        format!(
            "No authorized `/reuse-sweep-run` command has been posted on this PR{detail}; an OWNER/MEMBER/COLLABORATOR must comment `/reuse-sweep-run` before it can merge via reuse"
        ),
        vec![Finding::new("pr-facts", None, "comments", "no authorized /reuse-sweep-run")],
    )
}

/// Words of an item, for matching template items to sign-off items despite wording drift.
fn words(s: &str) -> BTreeSet<String> {
    s.to_ascii_lowercase().split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| w.len() >= 3).map(str::to_string).collect()
}

/// `- [ ] text` / `- [x] text` items: (checked, text, line).
fn items(text: &str) -> Vec<(bool, String, usize)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.trim_start().strip_prefix("- [")?;
            let (mark, rest) = t.split_once(']')?;
            Some((mark.trim().eq_ignore_ascii_case("x"), rest.trim().to_string(), i + 1))
        })
        .collect()
}

/// Check 5: every item of the current checklist template is in the sign-off, checked (or
/// explained in the additional detail section).
pub fn checklist(ctx: &Ctx) -> Check {
    let Some(f) = ctx.facts.filter(|f| f.signoff.is_some()) else { return Check::na(5, format!("{NEEDS_FACTS} (signoff)")) };
    let (template, tfile) = match (&f.checklist_template, &ctx.base.checklist) {
        (Some(t), _) => (t.clone(), "pr-facts checklist_template".to_string()),
        (None, Some(t)) => (t.text.clone(), t.path.clone()),
        (None, None) => {
            return Check::na(5, "no docs/PR_REVIEW_CHECKLIST.md at the base revision and no checklist_template in the pr-facts");
        }
    };
    // The template is the fenced block under "## Template" (the page has other lists); the block
    // starts on the fence's line, so its line k is the file's line offset + k - 1.
    let block = template
        .split_once("## Template")
        .map(|(_, r)| r)
        .and_then(|r| r.split_once("```").map(|(_, b)| b.split_once("```").map(|(b, _)| b).unwrap_or(b)))
        .unwrap_or(&template);
    let offset = template.find(block).map(|i| template[..i].lines().count()).unwrap_or(0);
    let wanted = items(block);
    let body = f.signoff.as_deref().unwrap_or("");
    let have = items(body);
    let explained = f.detail_section().is_some_and(|d| {
        let d = d.trim();
        !d.is_empty() && !d.to_ascii_lowercase().contains("insert any additional info here")
    });
    let mut missing = Vec::new();
    let mut unchecked = 0;
    for (_, text, line) in &wanted {
        let w = words(text);
        let best = have
            .iter()
            .map(|(c, t, _)| (*c, w.intersection(&words(t)).count() as f64 / w.len().max(1) as f64))
            .fold((false, 0.0f64), |acc, x| if x.1 > acc.1 { x } else { acc });
        let excerpt: String = text.chars().take(70).collect();
        if best.1 < 0.6 {
            missing.push(Finding::new(&tfile, Some(offset + line - 1), &excerpt, "template item missing from the sign-off"));
        } else if !best.0 {
            if explained {
                unchecked += 1;
            } else {
                missing.push(Finding::new(
                    &tfile,
                    Some(offset + line - 1),
                    &excerpt,
                    "left unchecked with no explanation in the additional detail section",
                ));
            }
        }
    }
    if missing.is_empty() {
        let note =
            if unchecked > 0 { format!(" ({unchecked} unchecked, explained in the additional detail section)") } else { String::new() };
        Check::pass(5, format!("all {} items of the current template are in the sign-off{note}", wanted.len()))
    } else {
        Check::from_findings(5, missing, "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn major_args_fold_aliases_and_switches() {
        let m = major_args(&v(&[
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--tp-size",
            "8",
            "--enable-dp-attention",
            "--chunked-prefill-size",
            "1",
        ]));
        assert_eq!(m.get("model").map(String::as_str), Some("m"));
        assert_eq!(m.get("tp").map(String::as_str), Some("8"));
        assert_eq!(m.get("enable-dp-attention").map(String::as_str), Some("on"));
        assert!(!m.contains_key("chunked-prefill-size"));
        let m = major_args(&v(&["vllm", "serve", "org/model", "--tensor-parallel-size=4"]));
        assert_eq!(m.get("model").map(String::as_str), Some("org/model"));
        assert_eq!(m.get("tp").map(String::as_str), Some("4"));
    }

    #[test]
    fn checklist_items_and_links() {
        let it = items("- [x] Verified A\n  - [ ] nested B\ntext\n");
        assert_eq!(it, vec![(true, "Verified A".into(), 1), (false, "nested B".into(), 2)]);
        assert_eq!(
            links("see (https://github.com/vllm-project/recipes/pull/12)."),
            vec!["https://github.com/vllm-project/recipes/pull/12"]
        );
    }
}
