//! Check 7: no submission for a deprecated model, scenario, precision or spec-decode arm, as
//! `MODELS.md` says on the review date. The rules are read from its scenario table (scenarios
//! deprecated for all), its model support matrix (retired models, deprecated scenarios, with
//! their dates) and the dated deprecation notices ("… is the last day for …"); a notice whose
//! table is "not yet enacted" does not bind yet.

use super::date::Date;
use super::scan;
use super::snapshot::{Layout, TextFile};
use super::{Check, Ctx, Finding};
use crate::plan::matrix::Scenario;
use crate::recipe::master::Entry;

#[derive(Clone, Debug, PartialEq)]
pub enum Scn {
    Fixed(u32, u32),
    Agentic,
}

impl Scn {
    fn name(&self) -> String {
        match self {
            Scn::Agentic => "agentic coding".into(),
            Scn::Fixed(i, o) => format!("single-turn {}", crate::plan::matrix::seq_name(*i, *o)),
        }
    }
}

/// One deprecation: what it covers and the first day it binds.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// `None`: every model.
    pub prefix: Option<String>,
    /// `None`: every scenario.
    pub scenario: Option<Scn>,
    pub precision: Option<String>,
    /// Only the arm without speculative decoding.
    pub non_spec_arm: bool,
    pub from: Date,
    pub line: usize,
    pub text: String,
}

/// `Single-turn 8k1k`, `Agentic coding`, `1024 / 8192`… as a scenario.
fn scenario_of(s: &str) -> Option<Scn> {
    let l = s.to_ascii_lowercase();
    if l.contains("agentic") {
        return Some(Scn::Agentic);
    }
    for (name, isl, osl) in [("1k1k", 1024, 1024), ("8k1k", 8192, 1024), ("1k8k", 1024, 8192)] {
        if l.contains(name) {
            return Some(Scn::Fixed(isl, osl));
        }
    }
    None
}

fn cells(line: &str) -> Vec<String> {
    let t = line.trim().trim_start_matches('|').trim_end_matches('|');
    t.split('|').map(|c| c.trim().to_string()).collect()
}

fn backticked(s: &str) -> Vec<String> {
    s.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Splits a cell at top-level commas (not inside parentheses or brackets).
fn items(cell: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in cell.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// The precision an item deprecates (`all bf16 recipes`, `All **bf16** recipes`).
fn precision_of(s: &str) -> Option<String> {
    let l = s.to_ascii_lowercase().replace('*', "");
    let w: Vec<&str> = l.split_whitespace().collect();
    w.windows(2)
        .find(|p| p[1].starts_with("recipe"))
        .map(|p| p[0].to_string())
        .filter(|p| ["bf16", "fp8", "fp4", "int4", "mxfp4", "fp16"].contains(&p.as_str()))
}

/// One row of a Markdown table, read through its table's (lowercased) header.
struct Row<'a> {
    header: &'a [String],
    cells: Vec<String>,
    /// 1-based line number.
    line: usize,
    text: String,
}

impl Row<'_> {
    /// The cell under the first header that contains `name` (empty when there is none).
    fn col(&self, name: &str) -> &str {
        self.header.iter().position(|h| h.contains(name)).and_then(|j| self.cells.get(j)).map(String::as_str).unwrap_or("")
    }

    /// A rule from this row for every scenario, precision and arm of `prefix`, binding from `from`.
    fn rule(&self, prefix: Option<String>, from: Date) -> Rule {
        Rule { prefix, scenario: None, precision: None, non_spec_arm: false, from, line: self.line, text: self.text.clone() }
    }
}

/// A scenarios-table row: a scenario deprecated for all models since a date.
fn scenario_rule(row: &Row) -> Option<Rule> {
    let status = row.col("status");
    if !status.to_ascii_lowercase().contains("deprecated for all") {
        return None;
    }
    let (Some(s), Some(d)) = (scenario_of(row.col("scenario")), Date::find_iso(status)) else { return None };
    Some(Rule { scenario: Some(s), ..row.rule(None, d) })
}

/// A model-support-matrix row: its retired models and their deprecated scenarios or precisions.
fn matrix_rules(row: &Row) -> Vec<Rule> {
    let mut rules = Vec::new();
    let added = Date::find_iso(row.col("date added"));
    let active = row.col("active scenarios");
    let retired = active.trim().to_ascii_lowercase().starts_with("none");
    let retired_on = if retired { Date::find_iso(active) } else { None };
    for p in &backticked(row.col("prefix")) {
        if let Some(d) = retired_on {
            rules.push(row.rule(Some(p.clone()), d));
        }
        for item in items(row.col("deprecated scenarios")) {
            let lower = item.to_ascii_lowercase();
            let from = if lower.contains("day 0") { added } else { Date::find_iso(&item) };
            let precision = precision_of(&item);
            let scenario = if precision.is_some() { None } else { scenario_of(&item) };
            if scenario.is_none() && precision.is_none() {
                continue;
            }
            // Listed without a date: as of the model's retirement, else as of this file.
            let from = from.or(retired_on).unwrap_or(Date { y: 1, m: 1, d: 1 });
            rules.push(Rule { scenario, precision, non_spec_arm: lower.contains("non-"), ..row.rule(Some(p.clone()), from) });
        }
    }
    rules
}

/// A row of the deprecation notice of `day` (binding the day after); `from_row` is the file from
/// the row on, whose text after the table may say the notice is not yet enacted.
fn notice_rules(row: &Row, day: Date, from_row: &[&str]) -> Vec<Rule> {
    // A table whose section says it is not yet enacted does not bind yet.
    let rest: String =
        from_row.iter().take_while(|x| !x.starts_with("### ") && !x.starts_with("## ")).copied().collect::<Vec<_>>().join("\n");
    let after_table = rest.split("\n\n").nth(1).unwrap_or("").to_ascii_lowercase();
    if after_table.contains("not yet enacted") {
        return Vec::new();
    }
    let deprecated = row.col("deprecated");
    let arm = row.header.iter().any(|h| h.contains("arm"));
    backticked(row.col("model"))
        .into_iter()
        .map(|p| {
            let precision = precision_of(deprecated);
            Rule {
                scenario: if precision.is_some() { None } else { scenario_of(deprecated) },
                precision,
                non_spec_arm: arm || deprecated.to_ascii_lowercase().contains("non-"),
                ..row.rule(Some(p), day.next_day())
            }
        })
        .collect()
}

pub fn parse(text: &str) -> Vec<Rule> {
    let lines: Vec<&str> = text.lines().collect();
    let mut rules = Vec::new();
    let mut section = String::new();
    let mut notice_day: Option<Date> = None;
    let mut header: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if let Some(h) = l.strip_prefix("## ") {
            section = h.trim().to_ascii_lowercase();
            notice_day = None;
        } else if let Some(h) = l.strip_prefix("### ") {
            notice_day = Date::find_long(h);
        }
        if !l.trim_start().starts_with('|') {
            header.clear();
            i += 1;
            continue;
        }
        let c = cells(l);
        if header.is_empty() {
            header = c.iter().map(|x| x.to_ascii_lowercase()).collect();
            i += 2; // the `|---|` line
            continue;
        }
        let row = Row { header: &header, cells: c, line: i + 1, text: l.trim().to_string() };
        if section.starts_with("scenarios") {
            rules.extend(scenario_rule(&row));
        } else if section.starts_with("model support matrix") {
            rules.extend(matrix_rules(&row));
        } else if section.starts_with("deprecation notice")
            && let Some(day) = notice_day
        {
            rules.extend(notice_rules(&row, day, &lines[i..]));
        }
        i += 1;
    }
    rules
}

/// One submitted configuration: a model, a scenario, a precision, whether it has a
/// non-spec-decode arm, and where it is.
struct Submitted {
    what: String,
    prefix: String,
    scenario: Option<Scn>,
    precision: String,
    non_spec: bool,
    file: String,
    line: Option<usize>,
}

fn entry_scenarios(e: &Entry, only: &[Scenario]) -> Vec<(Scn, bool)> {
    let mut out = Vec::new();
    if only.contains(&Scenario::FixedSeqLen) {
        for b in &e.fixed {
            out.push((Scn::Fixed(b.isl, b.osl), b.rows.iter().any(|r| r.spec_decoding == "none")));
        }
    }
    if only.contains(&Scenario::AgenticCoding) {
        for b in &e.agentic {
            out.push((Scn::Agentic, b.rows.iter().any(|r| r.spec_decoding == "none")));
        }
    }
    out
}

/// One submission per scenario of `e` among `only`, found at `file`:`line` and submitted `why`.
fn entry_submissions(e: &Entry, only: &[Scenario], file: &str, line: Option<usize>, why: &str) -> Vec<Submitted> {
    entry_scenarios(e, only)
        .into_iter()
        .map(|(s, non_spec)| Submitted {
            what: format!("{} ({why})", e.key),
            prefix: e.model_prefix.clone(),
            scenario: Some(s),
            precision: e.precision.clone(),
            non_spec,
            file: file.to_string(),
            line,
        })
        .collect()
}

/// The configs the new changelog entries run (their scenarios), changed master entries aside.
fn changelog_submissions(ctx: &Ctx) -> Vec<Submitted> {
    let mut subs = Vec::new();
    let (Ok(app), Some(cl)) = (&ctx.appended, &ctx.head.changelog) else { return subs };
    for entry in app {
        for pat in &entry.config_keys {
            for k in crate::changelog::resolve_pattern(pat, ctx.head.master.keys()) {
                // A changed entry is checked whole, every scenario (`submissions`).
                if ctx.changed_keys.contains(&k) {
                    continue;
                }
                if let Some(e) = ctx.head.master.get(&k) {
                    let file = cl.file.display().to_string();
                    subs.extend(entry_submissions(e, &entry.scenarios(), &file, Some(entry.line), "run by the new changelog entry"));
                }
            }
        }
    }
    subs
}

/// The launch scripts the PR adds or changes (InferenceX), outside `deprecated/`.
fn script_submissions(ctx: &Ctx) -> Vec<Submitted> {
    if ctx.head.layout != Layout::InferenceX {
        return Vec::new();
    }
    ctx.changes
        .iter()
        .filter(|c| c.status != 'D' && c.path.starts_with("benchmarks/") && c.path.ends_with(".sh") && !c.path.contains("/deprecated/"))
        .map(|c| {
            let v = scan::script_view(&c.path, "");
            let name = c.path.rsplit('/').next().unwrap_or("");
            Submitted {
                what: c.path.clone(),
                prefix: v.prefix,
                scenario: c.path.contains("/agentic/").then_some(Scn::Agentic),
                precision: name.split('_').nth(1).unwrap_or("").to_string(),
                non_spec: !name.ends_with("_mtp.sh"),
                file: c.path.clone(),
                line: None,
            }
        })
        .collect()
}

/// What the PR adds, changes or re-enables: changed master entries (all their scenarios), the
/// configs the new changelog entries run (their scenarios), changed launch scripts.
fn submissions(ctx: &Ctx) -> Vec<Submitted> {
    let both = [Scenario::FixedSeqLen, Scenario::AgenticCoding];
    let mut subs: Vec<Submitted> = Vec::new();
    for k in &ctx.changed_keys {
        if let Some(e) = ctx.head.master.get(k) {
            let (f, l) = ctx.master_line(k, "model-prefix");
            subs.extend(entry_submissions(e, &both, &f, l, "added or changed"));
        }
    }
    subs.extend(changelog_submissions(ctx));
    subs.extend(script_submissions(ctx));
    subs
}

impl Rule {
    /// Whether this rule covers the submission (whatever its date).
    fn covers(&self, s: &Submitted) -> bool {
        let prefix_ok = self.prefix.as_ref().is_none_or(|p| *p == s.prefix);
        // A script whose scenario is unknown matches only whole-model rules.
        let scn_ok = match (&self.scenario, &s.scenario) {
            (None, _) => true,
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        let prec_ok = self.precision.as_ref().is_none_or(|p| p.eq_ignore_ascii_case(&s.precision));
        let arm_ok = !self.non_spec_arm || s.non_spec;
        prefix_ok && scn_ok && prec_ok && arm_ok
    }

    /// What the rule deprecates, in words.
    fn what(&self) -> String {
        match (&self.scenario, &self.precision) {
            (_, Some(p)) => format!("{p} recipes"),
            (Some(sc), _) if self.non_spec_arm => format!("{} without speculative decoding", sc.name()),
            (Some(sc), _) => sc.name(),
            (None, None) => "every scenario (retired)".into(),
        }
    }
}

/// The finding of a submission that rule `r` of `models` deprecates.
fn deprecated(s: &Submitted, r: &Rule, models: &TextFile) -> Finding {
    Finding::new(
        &s.file,
        s.line,
        format!("{} {}", s.prefix, s.scenario.as_ref().map(Scn::name).unwrap_or_default()),
        format!(
            "{}: `{}` {} is deprecated since {} ({}:{}: {})",
            s.what,
            s.prefix,
            r.what(),
            r.from,
            models.path,
            r.line,
            scan::shown(&r.text)
        ),
    )
}

pub fn check(ctx: &Ctx) -> Check {
    let subs = submissions(ctx);
    if subs.is_empty() {
        return Check::na(7, "the PR adds, changes or re-enables no benchmark configuration");
    }
    let Some(models) = &ctx.models else {
        return Check::na(7, "no MODELS.md at the base revision (pass --models FILE)");
    };
    let rules = parse(&models.text);
    let bad: Vec<Finding> = subs
        .iter()
        .filter_map(|s| rules.iter().filter(|r| r.from <= ctx.date).find(|r| r.covers(s)).map(|r| deprecated(s, r, models)))
        .collect();
    if bad.is_empty() {
        let mut models_seen: Vec<&str> = subs.iter().map(|s| s.prefix.as_str()).collect();
        models_seen.sort_unstable();
        models_seen.dedup();
        Check::pass(7, format!("{} active on {} per {} ({} rules)", models_seen.join(", "), ctx.date, models.path, rules.len()))
    } else {
        Check::from_findings(7, bad, "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "## Deprecation Notice\n\n### Monday, August 3, 2026\n\nText.\n\n| Model | Deprecated | Remains |\n|---|---|---|\n| MiniMax-M3 (`minimaxm3`) | Single-turn 8k1k | Agentic coding |\n| Qwen (`qwen3.5`) | All **bf16** recipes, in every scenario | fp8 |\n\nSpec arms:\n\n| Model | Deprecated arm | Published arm |\n|---|---|---|\n| DSV4 (`dsv4`) | Agentic coding, non-MTP | Agentic coding, MTP |\n\n**Status: not yet enacted.** Still runs.\n\n## Scenarios\n\n| Scenario | ISL/OSL | Status |\n|---|---|---|\n| Single-turn 1k1k | 1024 / 1024 | **Deprecated for all models** since 2026-07-17 ([#2263](x)) |\n| Single-turn 8k1k | 8192 / 1024 | Active. |\n\n## Model support matrix\n\n| Model architecture class | Prefix | Date added | Active scenarios | Deprecated scenarios |\n|---|---|---|---|---|\n| Kimi-K3 | `kimik3` | 2026-07-27 ([#2391](x)) | Agentic coding (DSpark only) | Agentic coding non-DSpark arm (deprecated from day 0) |\n| GLM-5 / GLM-5.1 | `glm5`, `glm5.1` | 2026-03-06 | None (retired 2026-07-18, [#2276](x)) | Single-turn 1k1k, Single-turn 8k1k |\n";

    #[test]
    fn rules_from_the_tables() {
        let r = parse(MD);
        let find = |p: Option<&str>, s: Option<Scn>| r.iter().find(|x| x.prefix.as_deref() == p && x.scenario == s).cloned();
        let m3 = find(Some("minimaxm3"), Some(Scn::Fixed(8192, 1024))).unwrap();
        assert_eq!(m3.from.to_string(), "2026-08-04");
        assert_eq!(m3.line, 9);
        let bf16 = r.iter().find(|x| x.precision.as_deref() == Some("bf16")).unwrap();
        assert_eq!(bf16.prefix.as_deref(), Some("qwen3.5"));
        assert!(r.iter().all(|x| x.prefix.as_deref() != Some("dsv4")), "not yet enacted: {r:?}");
        assert_eq!(find(None, Some(Scn::Fixed(1024, 1024))).unwrap().from.to_string(), "2026-07-17");
        let k3 = find(Some("kimik3"), Some(Scn::Agentic)).unwrap();
        assert!(k3.non_spec_arm);
        assert_eq!(k3.from.to_string(), "2026-07-27");
        assert_eq!(find(Some("glm5.1"), None).unwrap().from.to_string(), "2026-07-18");
    }
}
