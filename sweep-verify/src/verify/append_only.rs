//! Check 12: an append-only pull request only adds points to unchanged curves — every new entry
//! append-only, the base matrix an immutable subset of the head's (same image, same recipe, no
//! point removed; `plan::append_only_delta`), every existing point's resolved launch unchanged,
//! and no benchmark-affecting change whose reach cannot be shown to be the new points alone.

use super::scan;
use super::snapshot::Layout;
use super::{Check, Ctx, Finding};
use crate::plan::matrix;
use std::collections::BTreeSet;

pub fn check(ctx: &Ctx) -> Check {
    let app = match appended(ctx) {
        Ok(a) => a,
        Err(c) => return c,
    };
    if !app.iter().any(|e| e.append_only) {
        return Check::na(12, "no new perf-changelog entry sets append-only: true");
    }
    let cl_file = ctx.head.changelog.as_ref().map(|c| c.file.display().to_string()).unwrap_or_default();
    let mut bad = Vec::new();
    for e in app.iter().filter(|e| !e.append_only) {
        bad.push(Finding::new(&cl_file, Some(e.line), e.config_keys.join(", "), "mixes a regular entry with append-only entries"));
    }
    let mut selected = BTreeSet::new();
    let mut added_points = 0;
    for e in app.iter().filter(|e| e.append_only) {
        for pat in &e.config_keys {
            for key in crate::changelog::resolve_pattern(pat, ctx.head.master.keys()) {
                let entry = ctx.head.master.get(&key).expect("resolved");
                let scns: Vec<matrix::Scenario> = e
                    .scenarios()
                    .into_iter()
                    .filter(|s| match s {
                        matrix::Scenario::FixedSeqLen => entry.has_fixed,
                        matrix::Scenario::AgenticCoding => entry.has_agentic,
                    })
                    .collect();
                let (file, line) = ctx.master_line(&key, "scenarios");
                let rows = match matrix::expand(entry, &scns, ctx.head.runners.as_ref()) {
                    Ok(r) => r,
                    Err(m) => {
                        bad.push(Finding::new(&file, line, &key, m.to_string()));
                        continue;
                    }
                };
                match crate::plan::append_only_delta(
                    &rows,
                    entry,
                    Some(&ctx.base.master),
                    &scns,
                    ctx.base.runners.as_ref().or(ctx.head.runners.as_ref()),
                ) {
                    Ok(new) => added_points += new.iter().map(|r| r.concs().len()).sum::<usize>(),
                    Err(m) => bad.push(Finding::new(&file, line, &key, m.to_string())),
                }
                selected.insert(key);
            }
        }
    }
    // Every existing point's complete recipe is unchanged (this project's serving recipes).
    if ctx.head.layout == Layout::Sweep {
        for key in &selected {
            unchanged_recipe_points(ctx, key, &mut bad);
        }
    }
    // Other benchmark-affecting changes: their reach cannot be proven from the diff.
    unprovable_changes(ctx, &selected, &mut bad);
    if bad.is_empty() {
        Check::pass(
            12,
            format!(
                "{} appends {added_points} new point(s); every base point unchanged",
                selected.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )
    } else {
        Check::from_findings(12, bad, "")
    }
}

/// The appended entries, or the check's verdict when the changelog is not a valid append (a
/// failure when its last entries are append-only, else not applicable).
fn appended<'a>(ctx: &'a Ctx) -> Result<&'a [crate::changelog::Entry], Check> {
    match &ctx.appended {
        Ok(a) => Ok(a),
        Err(p) => {
            let f: Vec<Finding> =
                p.0.iter().map(|x| Finding::new(x.file.display().to_string(), x.line, "perf-changelog.yaml", &x.message)).collect();
            let any_append_only = ctx.head.changelog.as_ref().is_some_and(|c| c.entries.iter().rev().take(5).any(|e| e.append_only));
            Err(if any_append_only {
                Check::fail(12, format!("the changelog is not a valid append: {}", super::summarise(&f)), f)
            } else {
                Check::na(
                    12,
                    format!(
                        "no new append-only entry (the changelog is not a valid append: {})",
                        p.0.first().map(|x| x.message.as_str()).unwrap_or("")
                    ),
                )
            })
        }
    }
}

/// Benchmark-affecting changes other than the changelog, the master config and the selected
/// configs' recipes and golden curves: their reach cannot be shown from the diff.
fn unprovable_changes(ctx: &Ctx, selected: &BTreeSet<String>, bad: &mut Vec<Finding>) {
    for c in &ctx.changes {
        let own = |p: &str| {
            p == "perf-changelog.yaml"
                || (ctx.head.layout == Layout::Sweep
                    && (p == "recipes/master.yaml"
                        || selected.iter().any(|k| p == format!("recipes/{k}.yaml"))
                        || p.starts_with("golden_al/")))
                || (ctx.head.layout == Layout::InferenceX && p.ends_with("-master.yaml"))
        };
        if ctx.benchmark_affecting(&c.path) && !own(&c.path) {
            // A sweep recipe of a config not selected runs no point of this sweep.
            if ctx.head.layout == Layout::Sweep && c.path.starts_with("recipes/") {
                continue;
            }
            let first = ctx.added.iter().find(|a| a.file == c.path);
            bad.push(Finding::new(
                &c.path,
                first.map(|a| a.line),
                first.map(|a| scan::shown(&a.text)).unwrap_or_else(|| c.status.to_string()),
                "a benchmark-affecting change whose reach cannot be shown from the diff to be only the appended points",
            ));
        }
    }
}

/// Every point of `key`'s base recipe is in the head's (same arm, concurrency and `seq-len`) and
/// resolves to the same launch.
fn unchanged_recipe_points(ctx: &Ctx, key: &str, bad: &mut Vec<Finding>) {
    let (Some(br), Some(hr), Some(be), Some(he)) =
        (ctx.base.recipes.get(key), ctx.head.recipes.get(key), ctx.base.master.get(key), ctx.head.master.get(key))
    else {
        return;
    };
    let bg = ctx.base.golden.as_ref();
    let hg = ctx.head.golden.as_ref();
    for (ai, a) in br.arms.iter().enumerate() {
        for (pi, p) in a.points.iter().enumerate() {
            let Ok(old) = br.resolve(ai, pi, &be.model_prefix, bg) else { continue };
            let seq = br.seq_len(ai, pi);
            let here = hr.arms.iter().enumerate().find(|(_, x)| x.name == a.name).and_then(|(hai, x)| {
                (0..x.points.len()).find(|&q| x.points[q].conc == p.conc && hr.seq_len(hai, q) == seq).map(|hpi| (hai, hpi))
            });
            let label = format!("{key} {} c{}{}", a.name, p.conc, seq.map(|s| format!(" {s}")).unwrap_or_default());
            let file = hr.file.display().to_string();
            let Some((hai, hpi)) = here else {
                bad.push(Finding::new(file, None, &label, format!("existing point {label} was removed from the recipe")));
                continue;
            };
            let line = hr.line(&hr.arms[hai].points[hpi].path);
            match hr.resolve(hai, hpi, &he.model_prefix, hg) {
                Ok(new) if new == old => {}
                Ok(new) => {
                    bad.push(Finding::new(file, line, &label, format!("existing point {label} changed: {}", launch_diff(&old, &new))))
                }
                Err(p) => bad.push(Finding::new(file, line, &label, p.to_string())),
            }
        }
    }
}

/// The first difference between two launches of a point.
fn launch_diff(a: &crate::recipe::serving::Launch, b: &crate::recipe::serving::Launch) -> String {
    if a.worker_argv != b.worker_argv {
        let i = a.worker_argv.iter().zip(&b.worker_argv).position(|(x, y)| x != y).unwrap_or(a.worker_argv.len().min(b.worker_argv.len()));
        let show = |v: &[String]| v.get(i.saturating_sub(1)..(i + 1).min(v.len())).map(|s| s.join(" ")).unwrap_or_default();
        return format!("server args `{}` → `{}`", show(&a.worker_argv), show(&b.worker_argv));
    }
    if a.env != b.env {
        let k = a.env.keys().chain(b.env.keys()).find(|k| a.env.get(*k) != b.env.get(*k)).cloned().unwrap_or_default();
        return format!("{k} {:?} → {:?}", a.env.get(&k), b.env.get(&k));
    }
    if a.router_argv != b.router_argv {
        return "router command changed".into();
    }
    "launch changed".into()
}
