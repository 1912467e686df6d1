//! Which configs and rows a sweep runs: the changelog entries added since the base (or the
//! latest one), their config keys, and each (config, scenario)'s throughput and eval rows, with
//! the append-only delta against the base revision's master config.

use super::matrix::{self, Row, Scenario};
use super::{Inputs, Labels, PlanRequest};
use crate::changelog::{self, Changelog, Entry as ClEntry};
use crate::problem::{Problem, Problems};
use crate::recipe::master::{Entry, Master};
use crate::repo::Repo;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};

/// The entries that select the configs: those appended since `req.base`, else the latest one;
/// with the master config at the base when an appended entry is append-only.
pub(super) fn added_entries(repo: &Repo, cl: &Changelog, req: &PlanRequest) -> Result<(Vec<ClEntry>, Option<Master>), Problems> {
    let (added, base_master): (Vec<ClEntry>, Option<Master>) = match &req.base {
        Some(rev) => {
            let base_bytes = changelog::git_show(rev, &repo.changelog).map_err(|e| {
                Problems::one(Problem::new(
                    &repo.changelog,
                    None,
                    "",
                    e.to_string(),
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
    Ok((added, base_master))
}

/// Append-only sweeps are all-or-nothing and never run evals.
pub(super) fn check_entry_mix(cl: &Changelog, added: &[ClEntry], labels: &Labels, problems: &mut Problems) {
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
    if n_append > 0 && (labels.all_evals || labels.evals_only) {
        problems.push(Problem::new(
            &cl.file,
            Some(added[0].line),
            "",
            "append-only entries cannot run with the all-evals or evals-only label",
            "remove the eval label",
        ));
    }
}

/// Throughput and eval rows of the selected entries, each (config, scenario) expanded once.
pub(super) struct Selection<'a> {
    inputs: &'a Inputs,
    base_master: Option<&'a Master>,
    labels: &'a Labels,
    bench: Vec<Row>,
    evals: Vec<Row>,
    bench_done: BTreeSet<(String, Scenario)>,
    eval_done: BTreeSet<(String, Scenario)>,
}

impl<'a> Selection<'a> {
    pub(super) fn new(inputs: &'a Inputs, base_master: Option<&'a Master>, labels: &'a Labels) -> Self {
        Selection {
            inputs,
            base_master,
            labels,
            bench: Vec::new(),
            evals: Vec::new(),
            bench_done: BTreeSet::new(),
            eval_done: BTreeSet::new(),
        }
    }

    /// The rows of every entry (`all-evals` entries first): (throughput rows, eval rows).
    pub(super) fn rows(mut self, added: &[ClEntry], problems: &mut Problems) -> (Vec<Row>, Vec<Row>) {
        let mut ordered: Vec<&ClEntry> = added.iter().filter(|e| e.all_evals).collect();
        ordered.extend(added.iter().filter(|e| !e.all_evals));
        for e in ordered {
            let suppress = self.labels.evals_only || e.evals_only || e.all_evals;
            for key in &self.entry_keys(e, problems) {
                let entry = self.inputs.master.get(key).expect("resolved keys exist");
                let scns: Vec<Scenario> = e.scenarios().into_iter().filter(|s| has_scenario(entry, *s)).collect();
                if !suppress {
                    self.add_bench(e, entry, &scns, problems);
                }
                if !e.append_only {
                    self.add_evals(e, entry, &scns);
                }
            }
        }
        (self.bench, self.evals)
    }

    /// The master keys an entry's patterns resolve to, in order, each once.
    fn entry_keys(&self, e: &ClEntry, problems: &mut Problems) -> Vec<String> {
        let cl = &self.inputs.changelog;
        let mut keys = Vec::new();
        for pat in &e.config_keys {
            let hits = changelog::resolve_pattern(pat, self.inputs.master.keys());
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
        keys
    }

    /// Throughput rows of the entry's scenarios not expanded yet (for an append-only entry, only
    /// its new concurrencies).
    fn add_bench(&mut self, e: &ClEntry, entry: &Entry, scns: &[Scenario], problems: &mut Problems) {
        let cl = &self.inputs.changelog;
        let key = &entry.key;
        let todo: Vec<Scenario> = scns.iter().copied().filter(|s| self.bench_done.insert((key.clone(), *s))).collect();
        if !todo.is_empty() {
            match matrix::expand(entry, &todo, self.inputs.runners.as_ref()) {
                Ok(rows) => {
                    if e.append_only {
                        match append_only_delta(&rows, entry, self.base_master, &todo, self.inputs.runners.as_ref()) {
                            Ok(d) => self.bench.extend(d),
                            Err(m) => problems.push(Problem::new(
                                &cl.file,
                                Some(e.line),
                                "",
                                m.to_string(),
                                "an append-only entry may only add concurrencies to existing curves with the same image",
                            )),
                        }
                    } else {
                        self.bench.extend(rows);
                    }
                }
                Err(m) => problems.push(Problem::new(
                    &entry.file,
                    entry.line,
                    key.as_str(),
                    m.to_string(),
                    "add the runner's hardware to recipes/runners.yaml",
                )),
            }
        }
    }

    /// Eval rows of the entry's scenarios not expanded yet.
    fn add_evals(&mut self, e: &ClEntry, entry: &Entry, scns: &[Scenario]) {
        let all = self.labels.all_evals || e.all_evals;
        // The changelog path always generates evals with `--evals-only`, which includes agentic
        // rows (they run gsm8k): every sweep covering the agentic scenario evaluates it.
        let include_agentic_evals = true;
        let key = &entry.key;
        let todo: Vec<Scenario> = scns.iter().copied().filter(|s| self.eval_done.insert((key.clone(), *s))).collect();
        if !todo.is_empty()
            && let Ok(rows) = matrix::expand(entry, &todo, self.inputs.runners.as_ref())
        {
            let mut sel = matrix::select_evals(&rows, all, include_agentic_evals);
            if let Some(min_ep) = e.eval_min_prefill_ep {
                sel.retain(|r| {
                    !r.origin.multinode
                        || r.fields.get("prefill").and_then(|p| p.get("ep")).and_then(Value::as_u64).is_some_and(|ep| ep >= min_ep as u64)
                });
            }
            self.evals.extend(sel);
        }
    }
}

fn has_scenario(e: &Entry, s: Scenario) -> bool {
    match s {
        Scenario::FixedSeqLen => e.has_fixed,
        Scenario::AgenticCoding => e.has_agentic,
    }
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
            Err(e) => p.push(Problem::new(f, None, "", e.to_string(), "append-only sweeps need the master config at the base revision")),
        }
    }
    p.into_result(m)
}

/// Which append-only rule a head revision breaks (`key`: the master config).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AppendOnlyError {
    #[error("append-only: `{key}` does not exist at the base revision")]
    NotAtBase { key: String },
    #[error(transparent)]
    Expand(#[from] matrix::ExpandError),
    #[error("append-only: `{key}` has no curves at the base revision")]
    NoBaseCurves { key: String },
    #[error("append-only: a base curve of `{key}` was removed or modified (recipe fields or image changed)")]
    CurveChanged { key: String },
    #[error("append-only: concurrency {conc} of an existing `{key}` curve was removed")]
    ConcRemoved { key: String, conc: u32 },
    #[error("append-only: new points of `{key}` change the series image")]
    ImageChanged { key: String },
    #[error("append-only: `{key}` adds no new concurrency")]
    NothingNew { key: String },
}

/// Append-only delta (spec §5.5): rows for newly added concurrencies of unchanged curves. `head`
/// are the head revision's rows of `entry` for `scns`; an error says which rule the head breaks.
pub fn append_only_delta(
    head: &[Row],
    entry: &Entry,
    base: Option<&Master>,
    scns: &[Scenario],
    runners: Option<&crate::recipe::Runners>,
) -> Result<Vec<Row>, AppendOnlyError> {
    let key = || entry.key.clone();
    let base_entry = base.and_then(|m| m.get(&entry.key)).ok_or_else(|| AppendOnlyError::NotAtBase { key: key() })?;
    let base_rows = matrix::expand(base_entry, scns, runners)?;
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
        return Err(AppendOnlyError::NoBaseCurves { key: key() });
    }
    let mut head_curves: HashMap<String, BTreeSet<u32>> = HashMap::new();
    for r in head {
        head_curves.entry(curve(r)).or_default().extend(r.concs());
    }
    for (k, concs) in &base_curves {
        let Some(h) = head_curves.get(k) else {
            return Err(AppendOnlyError::CurveChanged { key: key() });
        };
        if let Some(c) = concs.iter().find(|c| !h.contains(c)) {
            return Err(AppendOnlyError::ConcRemoved { key: key(), conc: *c });
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
                return Err(AppendOnlyError::ImageChanged { key: key() });
            }
        }
        let mut r = r.clone();
        if matches!(r.fields.get("conc"), Some(Value::Array(_))) {
            r.fields.insert("conc".into(), json!(new));
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err(AppendOnlyError::NothingNew { key: key() });
    }
    Ok(out)
}
