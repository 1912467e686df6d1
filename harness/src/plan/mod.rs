//! The sweep plan for a label: changelog selection → matrix rows → buckets, canary and
//! matrix-scoped fail-fast (spec `inferencex.md` §3.5, §4), with each point's resolved launch.

pub mod labels;
pub mod matrix;

use crate::changelog::{self, Changelog, Entry as ClEntry};
use crate::golden_al::GoldenAl;
use crate::problem::{Problem, Problems};
use crate::recipe::master::{Entry, Master, Topology};
use crate::recipe::serving::Launch;
use crate::repo::Repo;
pub use labels::{Labels, Primary};
use matrix::{Row, Scenario};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One point of a plan: a matrix row plus what is needed to run it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanPoint {
    /// Stable id: `<config-key>/<arm>-c<conc>` (used by `--only`, `--point`, result folders).
    pub id: String,
    pub config_key: String,
    pub arm: String,
    pub conc: u32,
    pub gpus: u32,
    pub scenario: Scenario,
    pub matrix: String,
    /// Profiling duration in seconds (agentic points).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<u64>,
    /// Warmup requests per lane (10 by default, 1 with `agentx-fast`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_per_lane: Option<u32>,
    pub row: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Matrix {
    pub name: String,
    pub fail_fast: bool,
    pub points: Vec<PlanPoint>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub labels: Labels,
    pub base_ref: Option<String>,
    pub head_ref: String,
    pub canary: Option<PlanPoint>,
    /// Throughput matrices in run order.
    pub matrices: Vec<Matrix>,
    /// Eval matrices (run only against servers that produce real tokens).
    pub evals: Vec<Matrix>,
    pub changelog_metadata: Value,
}

impl Plan {
    /// Every point in run order: canary, then the throughput matrices, then evals.
    pub fn points(&self) -> impl Iterator<Item = &PlanPoint> {
        self.canary.iter().chain(self.matrices.iter().flat_map(|m| m.points.iter())).chain(self.evals.iter().flat_map(|m| m.points.iter()))
    }

    /// `strategy.matrix`-ready JSON for GitHub Actions: one `{include: [...]}` per job.
    pub fn github(&self) -> Value {
        let inc = |pts: &[PlanPoint]| {
            json!({"include": pts.iter().map(|p| {
                let mut m = p.row.clone();
                m.insert("point".into(), json!(p.id));
                m.insert("arm".into(), json!(p.arm));
                m.insert("gpus".into(), json!(p.gpus));
                if let Some(d) = p.duration_s { m.insert("profile-duration".into(), json!(d)); }
                Value::Object(m)
            }).collect::<Vec<_>>()})
        };
        let mut out = Map::new();
        out.insert("canary".into(), self.canary.as_ref().map(|c| inc(std::slice::from_ref(c))).unwrap_or(json!({"include": []})));
        for m in self.matrices.iter().chain(self.evals.iter()) {
            let mut v = inc(&m.points);
            v["fail-fast"] = json!(m.fail_fast);
            out.insert(m.name.replace('.', "_"), v);
        }
        Value::Object(out)
    }
}

/// What to plan.
#[derive(Clone, Debug)]
pub struct PlanRequest {
    pub labels: Labels,
    /// Base revision: entries added since it select the configs. None = the latest entry.
    pub base: Option<String>,
}

/// The inputs a plan is built from (loaded once).
pub struct Inputs {
    pub master: Master,
    pub runners: Option<crate::recipe::Runners>,
    pub golden: Option<GoldenAl>,
    pub changelog: Changelog,
}

impl Inputs {
    pub fn load(repo: &Repo) -> Result<Inputs, Problems> {
        let mut p = Problems::default();
        let master = p.take(repo.master());
        let runners = p.take(repo.runners()).flatten();
        let golden = p.take(repo.golden()).flatten();
        let changelog = p.take(repo.changelog());
        match (master, changelog) {
            (Some(master), Some(changelog)) if p.is_empty() => Ok(Inputs { master, runners, golden, changelog }),
            _ => Err(p),
        }
    }
}

/// Builds the plan: selects configs from the changelog, expands them, buckets the rows, picks the
/// canary and resolves every point's launch from its serving recipe.
pub fn build(repo: &Repo, inputs: &Inputs, req: &PlanRequest) -> Result<Plan, Problems> {
    let mut problems = Problems::default();
    let cl = &inputs.changelog;
    let (added, base_master): (Vec<ClEntry>, Option<Master>) = match &req.base {
        Some(rev) => {
            let base_bytes = changelog::git_show(rev, &repo.changelog).map_err(|e| {
                Problems::one(Problem::new(
                    &repo.changelog,
                    None,
                    "",
                    e,
                    "pass a revision that exists and has perf-changelog.yaml (e.g. origin/main)",
                ))
            })?;
            let base = Changelog::parse(&repo.changelog, &base_bytes)?;
            let delta = changelog::check_append(&base, cl)?;
            if delta.appended.is_empty() {
                return Err(Problems::one(Problem::new(
                    &repo.changelog,
                    None,
                    "",
                    format!("no entries were added since {rev}: nothing to sweep"),
                    "append an entry (sweep changelog append) to select configs",
                )));
            }
            let base_master = if delta.appended.iter().any(|e| e.append_only) { Some(load_master_at(repo, rev)?) } else { None };
            (delta.appended, base_master)
        }
        None => match cl.entries.last() {
            Some(e) => (vec![e.clone()], None),
            None => {
                return Err(Problems::one(Problem::new(
                    &cl.file,
                    None,
                    "",
                    "the changelog has no entries",
                    "append an entry that names the configs to sweep",
                )));
            }
        },
    };

    // Append-only sweeps are all-or-nothing and never run evals.
    let n_append = added.iter().filter(|e| e.append_only).count();
    if n_append > 0 && n_append < added.len() {
        let e = added.iter().find(|e| !e.append_only).expect("one regular entry");
        problems.push(Problem::new(
            &cl.file,
            Some(e.line),
            "",
            "a sweep mixes append-only and regular entries",
            "put append-only entries in their own change",
        ));
    }
    if n_append > 0 && (req.labels.all_evals || req.labels.evals_only) {
        problems.push(Problem::new(
            &cl.file,
            Some(added[0].line),
            "",
            "append-only entries cannot run with the all-evals or evals-only label",
            "remove the eval label",
        ));
    }

    let mut ordered: Vec<&ClEntry> = added.iter().filter(|e| e.all_evals).collect();
    ordered.extend(added.iter().filter(|e| !e.all_evals));
    let mut bench_done: BTreeSet<(String, Scenario)> = BTreeSet::new();
    let mut eval_done: BTreeSet<(String, Scenario)> = BTreeSet::new();
    let mut bench: Vec<Row> = Vec::new();
    let mut evals: Vec<Row> = Vec::new();
    for e in ordered {
        let mut keys = Vec::new();
        for pat in &e.config_keys {
            let hits = changelog::resolve_pattern(pat, inputs.master.keys());
            if hits.is_empty() {
                problems.push(Problem::new(
                    &cl.file,
                    Some(e.line),
                    "",
                    format!("config key `{pat}` matches no master config"),
                    "fix the key (only `*` is a wildcard in the changelog) or add the config to the master file",
                ));
            }
            for h in hits {
                if !keys.contains(&h) {
                    keys.push(h);
                }
            }
        }
        let suppress = req.labels.evals_only || e.evals_only || e.all_evals;
        let all = req.labels.all_evals || e.all_evals;
        let include_agentic_evals = req.labels.all_evals || req.labels.evals_only || e.all_evals || e.evals_only;
        for key in &keys {
            let entry = inputs.master.get(key).expect("resolved keys exist");
            let scns: Vec<Scenario> = e.scenarios().into_iter().filter(|s| has_scenario(entry, *s)).collect();
            if !suppress {
                let todo: Vec<Scenario> = scns.iter().copied().filter(|s| bench_done.insert((key.clone(), *s))).collect();
                if !todo.is_empty() {
                    match matrix::expand(entry, &todo, inputs.runners.as_ref()) {
                        Ok(rows) => {
                            if e.append_only {
                                match append_only_delta(&rows, entry, base_master.as_ref(), &todo, inputs) {
                                    Ok(d) => bench.extend(d),
                                    Err(m) => problems.push(Problem::new(
                                        &cl.file,
                                        Some(e.line),
                                        "",
                                        m,
                                        "an append-only entry may only add concurrencies to existing curves with the same image",
                                    )),
                                }
                            } else {
                                bench.extend(rows);
                            }
                        }
                        Err(m) => problems.push(Problem::new(
                            &entry.file,
                            entry.line,
                            key.as_str(),
                            m,
                            "add the runner's hardware to recipes/runners.yaml",
                        )),
                    }
                }
            }
            if !e.append_only {
                let todo: Vec<Scenario> = scns.iter().copied().filter(|s| eval_done.insert((key.clone(), *s))).collect();
                if !todo.is_empty()
                    && let Ok(rows) = matrix::expand(entry, &todo, inputs.runners.as_ref())
                {
                    let mut sel = matrix::select_evals(&rows, all, include_agentic_evals);
                    if let Some(min_ep) = e.eval_min_prefill_ep {
                        sel.retain(|r| {
                            !r.origin.multinode
                                || r.fields
                                    .get("prefill")
                                    .and_then(|p| p.get("ep"))
                                    .and_then(Value::as_u64)
                                    .is_some_and(|ep| ep >= min_ep as u64)
                        });
                    }
                    evals.extend(sel);
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    if req.labels.primary.trim_conc() {
        bench = matrix::trim_conc(bench);
    }
    for r in &mut bench {
        r.fingerprint();
    }

    // Buckets in InferenceX order.
    let mut buckets: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in bench {
        let b = match (r.origin.multinode, r.origin.scenario) {
            (false, Scenario::AgenticCoding) => "single_node.agentic".to_string(),
            (false, Scenario::FixedSeqLen) => format!("single_node.{}", r.origin.seq.clone().unwrap_or_default()),
            (true, Scenario::AgenticCoding) => "multi_node.agentic".to_string(),
            (true, Scenario::FixedSeqLen) => format!("multi_node.{}", r.origin.seq.clone().unwrap_or_default()),
        };
        buckets.entry(b).or_default().push(r);
    }
    let mut eval_buckets: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in evals {
        let b = match (r.origin.multinode, r.origin.scenario) {
            (false, Scenario::FixedSeqLen) => "evals",
            (false, Scenario::AgenticCoding) => "agentic_evals",
            (true, Scenario::FixedSeqLen) => "multinode_evals",
            (true, Scenario::AgenticCoding) => "multinode_agentic_evals",
        };
        eval_buckets.entry(b.to_string()).or_default().push(r);
    }

    // Canary: minimum-conc single-node 1k1k, then 8k1k row; sweep also accepts a single-node
    // agentic row when the plan has no fixed-seq-len candidate (agentic-only sweeps).
    let mut canary_row: Option<(String, Row)> = None;
    if req.labels.primary.canary() {
        for b in ["single_node.1k1k", "single_node.8k1k", "single_node.agentic"] {
            if let Some(rows) = buckets.get_mut(b)
                && let Some((i, _)) = rows.iter().enumerate().filter(|(_, r)| !r.run_eval()).min_by_key(|(i, r)| (r.conc(), *i))
            {
                canary_row = Some((b.to_string(), rows.remove(i)));
                break;
            }
        }
    }
    buckets.retain(|_, v| !v.is_empty());

    let fast = req.labels.agentx_fast;
    let mut ids = IdAlloc::default();
    let mut mk = |bucket: &str, r: Row, problems: &mut Problems| -> PlanPoint {
        let entry = inputs.master.get(&r.origin.config_key).expect("rows come from the master");
        let (arm, launch) = resolve_launch(repo, inputs, entry, &r, problems);
        let agentic = r.origin.scenario == Scenario::AgenticCoding;
        let id = ids.alloc(&r.origin.config_key, &arm_slug(entry, &r), r.conc());
        PlanPoint {
            id,
            config_key: r.origin.config_key.clone(),
            arm,
            conc: r.conc(),
            gpus: r.origin.gpus,
            scenario: r.origin.scenario,
            matrix: bucket.to_string(),
            duration_s: agentic.then_some(if fast { matrix::AGENTX_FAST_DURATION_S } else { matrix::AGENTIC_DURATION_S }),
            warmup_per_lane: agentic.then_some(if fast { 1 } else { 10 }),
            row: r.fields,
            launch,
        }
    };
    let canary = canary_row.map(|(b, r)| {
        let mut p = mk(&b, r, &mut problems);
        p.matrix = "canary".into();
        p
    });
    let ff = req.labels.primary.fail_fast();
    let mut matrices = Vec::new();
    for (name, rows) in buckets {
        let points = rows.into_iter().map(|r| mk(&name, r, &mut problems)).collect();
        matrices.push(Matrix { name, fail_fast: ff, points });
    }
    let mut eval_ms = Vec::new();
    for (name, rows) in eval_buckets {
        let points = rows
            .into_iter()
            .map(|r| {
                let mut p = mk(&name, r, &mut problems);
                p.id = format!("eval:{}", p.id);
                p
            })
            .collect();
        eval_ms.push(Matrix { name, fail_fast: ff, points });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let head_ref = git_head(&repo.root).unwrap_or_else(|| "working tree".into());
    let metadata = json!({
        "base_ref": req.base,
        "head_ref": head_ref,
        "entries": added.iter().map(|e| e.raw.clone()).collect::<Vec<_>>(),
    });
    Ok(Plan {
        labels: req.labels.clone(),
        base_ref: req.base.clone(),
        head_ref,
        canary,
        matrices,
        evals: eval_ms,
        changelog_metadata: metadata,
    })
}

fn has_scenario(e: &Entry, s: Scenario) -> bool {
    match s {
        Scenario::FixedSeqLen => e.has_fixed,
        Scenario::AgenticCoding => e.has_agentic,
    }
}

fn git_head(root: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new("git").arg("-C").arg(root).args(["rev-parse", "--short", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn load_master_at(repo: &Repo, rev: &str) -> Result<Master, Problems> {
    let mut p = Problems::default();
    let mut m = Master::default();
    for f in &repo.master_files {
        match changelog::git_show(rev, f) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                if let Some(x) = p.take(Master::from_str(f, &text)) {
                    m = x;
                }
            }
            Err(e) => p.push(Problem::new(f, None, "", e, "append-only sweeps need the master config at the base revision")),
        }
    }
    p.into_result(m)
}

/// Append-only delta (spec §5.5): rows for newly added concurrencies of unchanged curves.
fn append_only_delta(head: &[Row], entry: &Entry, base: Option<&Master>, scns: &[Scenario], inputs: &Inputs) -> Result<Vec<Row>, String> {
    let base_entry =
        base.and_then(|m| m.get(&entry.key)).ok_or_else(|| format!("append-only: `{}` does not exist at the base revision", entry.key))?;
    let base_rows = matrix::expand(base_entry, scns, inputs.runners.as_ref())?;
    let curve = |r: &Row| {
        let mut m = r.fields.clone();
        for k in ["conc", "exp-name", "recipe-fingerprint"] {
            m.remove(k);
        }
        matrix::canonical_json(&Value::Object(m))
    };
    let mut base_curves: HashMap<String, BTreeSet<u32>> = HashMap::new();
    for r in &base_rows {
        base_curves.entry(curve(r)).or_default().extend(r.concs());
    }
    if base_curves.is_empty() {
        return Err(format!("append-only: `{}` has no curves at the base revision", entry.key));
    }
    let mut head_curves: HashMap<String, BTreeSet<u32>> = HashMap::new();
    for r in head {
        head_curves.entry(curve(r)).or_default().extend(r.concs());
    }
    for (k, concs) in &base_curves {
        let Some(h) = head_curves.get(k) else {
            return Err(format!("append-only: a base curve of `{}` was removed or modified (recipe fields or image changed)", entry.key));
        };
        if let Some(c) = concs.iter().find(|c| !h.contains(c)) {
            return Err(format!("append-only: concurrency {c} of an existing `{}` curve was removed", entry.key));
        }
    }
    let mut out = Vec::new();
    for r in head {
        let base_concs = base_curves.get(&curve(r)).cloned().unwrap_or_default();
        let new: Vec<u32> = r.concs().into_iter().filter(|c| !base_concs.contains(c)).collect();
        if new.is_empty() {
            continue;
        }
        if !base_curves.contains_key(&curve(r)) {
            // A new curve must join a visual series whose image is unchanged.
            let img = r.fields.get("image");
            if !base_rows.iter().any(|b| b.fields.get("image") == img) {
                return Err(format!("append-only: new points of `{}` change the series image", entry.key));
            }
        }
        let mut r = r.clone();
        if matches!(r.fields.get("conc"), Some(Value::Array(_))) {
            r.fields.insert("conc".into(), json!(new));
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err(format!("append-only: `{}` adds no new concurrency", entry.key));
    }
    Ok(out)
}

/// Arm name and resolved launch from the config's serving recipe, when it has one.
fn resolve_launch(repo: &Repo, inputs: &Inputs, entry: &Entry, r: &Row, problems: &mut Problems) -> (String, Option<Launch>) {
    let fallback = arm_label(entry, r);
    if r.origin.scenario != Scenario::AgenticCoding || r.origin.multinode {
        return (fallback, None);
    }
    let Some(recipe) = repo.recipe(&entry.key) else { return (fallback, None) };
    let recipe = match recipe {
        Ok(x) => x,
        Err(e) => {
            problems.extend(e);
            return (fallback, None);
        }
    };
    let map = match recipe.match_master(entry) {
        Ok(m) => m,
        Err(e) => {
            problems.extend(e);
            return (fallback, None);
        }
    };
    let Some(&(ai, pi)) = map.get(&(r.origin.block, r.origin.row, r.conc())) else { return (fallback, None) };
    match recipe.resolve(ai, pi, &entry.model_prefix, inputs.golden.as_ref()) {
        Ok(l) => (l.arm.clone(), Some(l)),
        Err(e) => {
            problems.extend(e);
            (fallback, None)
        }
    }
}

/// A display name for a row's parallel layout (`TP4`, `TP2-EP2`, `DEP2`, `P1x4-D1x8`).
pub fn arm_label(e: &Entry, r: &Row) -> String {
    arm_slug(e, r).to_uppercase()
}

fn arm_slug(e: &Entry, r: &Row) -> String {
    let row = match r.origin.scenario {
        Scenario::FixedSeqLen => e.fixed.iter().find(|b| b.index == r.origin.block).and_then(|b| b.rows.get(r.origin.row)),
        Scenario::AgenticCoding => e.agentic.iter().find(|b| b.index == r.origin.block).and_then(|b| b.rows.get(r.origin.row)),
    };
    let Some(row) = row else { return "row".into() };
    let mut s = match &row.topology {
        Topology::Single { tp, pp, dcp, pcp, ep, dp_attn } => {
            let mut s = if *dp_attn && ep == tp {
                format!("dep{tp}")
            } else {
                let mut s = format!("tp{tp}");
                if *ep > 1 {
                    s.push_str(&format!("-ep{ep}"));
                }
                if *dp_attn {
                    s.push_str("-dpa");
                }
                s
            };
            for (n, v) in [("pp", pp), ("dcp", dcp), ("pcp", pcp)] {
                if *v > 1 {
                    s.push_str(&format!("-{n}{v}"));
                }
            }
            s
        }
        Topology::Multi { prefill, decode } => {
            format!("p{}-d{}", prefill.label(), decode.label())
        }
    };
    if let Some(seq) = &r.origin.seq {
        s = format!("{seq}-{s}");
    }
    if row.kv_offloading.as_deref().is_some_and(|k| k != "none") {
        s.push_str("-kvdram");
    }
    s
}

#[derive(Default)]
struct IdAlloc {
    used: BTreeMap<String, u32>,
}

impl IdAlloc {
    fn alloc(&mut self, key: &str, slug: &str, conc: u32) -> String {
        let base = format!("{key}/{slug}-c{conc}");
        let n = self.used.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 { base } else { format!("{base}-{n}") }
    }
}
