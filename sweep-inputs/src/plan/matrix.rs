//! Matrix expansion: master entries → rows exactly as InferenceX's generator produces them
//! (spec `inferencex.md` §3): concurrency ladders, defaults, derived fields, exp-names, DRAM
//! budgets, eval selection and recipe fingerprints.

use crate::recipe::master::{Component, Entry, SearchRow, Topology, Worker};
use crate::recipe::runners::Runners;
use crate::recipe::serving::ladder;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// InferenceX `DEFAULT_AGENTIC_DURATION_SECONDS`.
pub const AGENTIC_DURATION_S: u64 = 3600;
/// `agentx-fast` profile duration.
pub const AGENTX_FAST_DURATION_S: u64 = 1200;
/// InferenceX's `RANDOM_RANGE_RATIO` (its benchmark workflow's): fixed-seq-len prompt lengths are
/// drawn in [0.8 × ISL, ISL] and [0.8 × OSL, OSL] unless a recipe sets `random-range-ratio`.
pub const RANDOM_RANGE_RATIO: f64 = 0.8;
/// A fixed-seq-len point sends `--num-prompts` = 10 × conc requests (the launch scripts' `CONC * 10`).
pub const PROMPTS_PER_CONC: u32 = 10;
/// ... after `--num-warmups` = 2 × conc (`benchmark_lib.sh`'s `run_benchmark_serving`).
pub const WARMUPS_PER_CONC: u32 = 2;
/// Eval selection ignores rows below this concurrency.
pub const MIN_EVAL_CONC: u32 = 16;
/// 3 TB (decimal) expressed in MiB: the DRAM offload cap.
pub const DRAM_CAP_MIB: u64 = 2_861_022;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Scenario {
    #[serde(rename = "fixed-seq-len")]
    FixedSeqLen,
    #[serde(rename = "agentic-coding")]
    AgenticCoding,
}

impl Scenario {
    pub fn parse(s: &str) -> Option<Scenario> {
        match s {
            "fixed-seq-len" => Some(Scenario::FixedSeqLen),
            "agentic-coding" => Some(Scenario::AgenticCoding),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Scenario::FixedSeqLen => "fixed-seq-len",
            Scenario::AgenticCoding => "agentic-coding",
        }
    }
}

/// Where a row came from, for plans and recipe lookup.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Origin {
    pub config_key: String,
    pub scenario: Scenario,
    pub multinode: bool,
    pub block: usize,
    pub row: usize,
    /// The bucket's sequence name for fixed-seq-len rows (`1k1k`, `8k1k`, `<isl>_<osl>`).
    pub seq: Option<String>,
    pub gpus: u32,
}

/// One generated matrix row: the InferenceX JSON object plus its origin.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub fields: Map<String, Value>,
    pub origin: Origin,
}

impl Row {
    /// Concurrencies of the row (one for single-node and agentic rows, a list for multi-node fixed).
    pub fn concs(&self) -> Vec<u32> {
        match self.fields.get("conc") {
            Some(Value::Array(a)) => a.iter().filter_map(|v| v.as_u64().map(|x| x as u32)).collect(),
            Some(v) => v.as_u64().map(|x| vec![x as u32]).unwrap_or_default(),
            None => Vec::new(),
        }
    }
    pub fn conc(&self) -> u32 {
        self.concs().into_iter().next().unwrap_or(0)
    }
    pub fn run_eval(&self) -> bool {
        self.fields.get("run-eval").and_then(Value::as_bool).unwrap_or(false)
    }
    fn str(&self, k: &str) -> String {
        match self.fields.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        }
    }
    /// Adds `recipe-fingerprint`: SHA-256 of the canonical row without conc / exp-name.
    pub fn fingerprint(&mut self) {
        let fp = recipe_fingerprint(&self.fields);
        self.fields.insert("recipe-fingerprint".into(), Value::String(fp));
    }
}

/// InferenceX's name of a sequence length: `1k1k`, `8k1k`, `<isl>_<osl>`.
pub fn seq_name(isl: u32, osl: u32) -> String {
    crate::recipe::SeqLen::new(isl, osl).name()
}

/// Canonical JSON: sorted keys, `,`/`:` separators, non-ASCII escaped (Python's
/// `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True)`).
pub fn canonical_json(v: &Value) -> String {
    // serde_json's Map is ordered by key (no `preserve_order`), so keys come out sorted.
    let s = serde_json::to_string(v).expect("JSON values serialise");
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if ch.is_ascii() {
            out.push(ch);
        } else {
            let mut buf = [0u16; 2];
            for u in ch.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

pub fn recipe_fingerprint(fields: &Map<String, Value>) -> String {
    let mut m = fields.clone();
    m.remove("conc");
    m.remove("exp-name");
    m.remove("recipe-fingerprint");
    hex::encode(Sha256::digest(canonical_json(&Value::Object(m)).as_bytes()))
}

fn component(c: &Component) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(c.name));
    if let Some(v) = &c.version {
        m.insert("version".into(), json!(v));
    }
    Value::Object(m)
}

fn worker(w: &Worker) -> Value {
    let mut m = Map::new();
    m.insert("num-worker".into(), json!(w.num_worker));
    m.insert("tp".into(), json!(w.tp));
    m.insert("ep".into(), json!(w.ep));
    m.insert("dp-attn".into(), json!(w.dp_attn));
    m.insert("pp".into(), json!(w.pp));
    m.insert("dcp-size".into(), json!(w.dcp));
    m.insert("pcp-size".into(), json!(w.pcp));
    if let Some(h) = &w.hardware {
        m.insert("hardware".into(), json!(h));
    }
    if !w.additional_settings.is_empty() {
        m.insert("additional-settings".into(), json!(w.additional_settings));
    }
    Value::Object(m)
}

fn base(e: &Entry) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("image".into(), json!(e.image));
    m.insert("model".into(), json!(e.model));
    m.insert("model-prefix".into(), json!(e.model_prefix));
    m.insert("precision".into(), json!(e.precision));
    m.insert("framework".into(), json!(e.framework));
    m.insert("runner".into(), json!(e.runner));
    m.insert("disagg".into(), json!(e.disagg));
    m.insert("run-eval".into(), json!(false));
    m
}

fn scoped(e: &Entry, r: &SearchRow, m: &mut Map<String, Value>) {
    if let Some(rt) = r.router.as_ref().or(e.router.as_ref()) {
        m.insert("router".into(), component(rt));
    }
    if let Some(k) = r.kv_p2p_transfer.as_ref().or(e.kv_p2p_transfer.as_ref()) {
        m.insert("kv-p2p-transfer".into(), json!(k));
    }
}

fn topo_fields(t: &Topology, m: &mut Map<String, Value>) {
    match t {
        Topology::Single { tp, pp, dcp, pcp, ep, dp_attn } => {
            m.insert("tp".into(), json!(tp));
            m.insert("pp".into(), json!(pp));
            m.insert("dcp-size".into(), json!(dcp));
            m.insert("pcp-size".into(), json!(pcp));
            m.insert("ep".into(), json!(ep));
            m.insert("dp-attn".into(), json!(dp_attn));
        }
        Topology::Multi { prefill, decode } => {
            m.insert("prefill".into(), worker(prefill));
            m.insert("decode".into(), worker(decode));
        }
    }
}

/// Why a row's DRAM offload budget cannot be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DramBudgetError {
    #[error("kv-offloading: dram needs dram-utilization")]
    NoUtilization,
    #[error("runner `{runner}` has no `hardware` entry in runners.yaml (needed for the DRAM offload budget)")]
    NoHardware { runner: String },
    #[error("row uses {gpus} GPUs but a `{runner}` node has {per_node}")]
    TooManyGpus { gpus: u64, runner: String, per_node: u64 },
    #[error("prefill replica of {per_replica} GPUs is not a multiple of {per_node} GPUs per node")]
    NotMultiple { per_replica: u64, per_node: u64 },
    #[error("prefill replica of {per_replica} GPUs does not divide {per_node} GPUs per node")]
    NotDivisor { per_replica: u64, per_node: u64 },
}

/// Why a master entry does not expand into rows.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExpandError {
    /// An agentic row's DRAM budget (`key`: the master config).
    #[error("{key}: {source}")]
    DramBudget {
        key: String,
        #[source]
        source: DramBudgetError,
    },
}

/// Per-row DRAM budget in GB (0 unless `kv-offloading: dram`), in exact integer arithmetic.
pub fn dram_budget_gb(e: &Entry, r: &SearchRow, util: Option<f64>, runners: Option<&Runners>) -> Result<u64, DramBudgetError> {
    if r.kv_offloading.as_deref() != Some("dram") {
        return Ok(0);
    }
    let util = util.ok_or(DramBudgetError::NoUtilization)?;
    let hw = runners.and_then(|rs| rs.hardware.get(&e.runner)).ok_or_else(|| DramBudgetError::NoHardware { runner: e.runner.clone() })?;
    let avail = hw.available_cpu_dram_mib.min(DRAM_CAP_MIB) as u128;
    let gpn = hw.gpus_per_node as u128;
    let gpu_count: u128 = match &r.topology {
        Topology::Single { tp, pp, pcp, .. } => {
            let g = (tp * pp * pcp) as u128;
            if g > gpn {
                return Err(DramBudgetError::TooManyGpus { gpus: g as u64, runner: e.runner.clone(), per_node: gpn as u64 });
            }
            g
        }
        Topology::Multi { prefill, .. } => {
            let per_replica = (prefill.tp * prefill.pp * prefill.pcp) as u128;
            if per_replica > gpn {
                if !per_replica.is_multiple_of(gpn) {
                    return Err(DramBudgetError::NotMultiple { per_replica: per_replica as u64, per_node: gpn as u64 });
                }
                per_replica
            } else {
                if !gpn.is_multiple_of(per_replica) {
                    return Err(DramBudgetError::NotDivisor { per_replica: per_replica as u64, per_node: gpn as u64 });
                }
                per_replica
            }
        }
    };
    // Utilisation as an exact decimal (micro-units), as Python's Decimal would hold it.
    let util_micro = (util * 1e6).round() as u128;
    let num = avail * 1_048_576 * util_micro * gpu_count;
    let den = gpn * 1_000_000 * 1_000_000_000;
    Ok((num / den) as u64)
}

/// Expands one master entry into throughput rows for the given scenarios (test-config, step ×2).
pub fn expand(e: &Entry, scenarios: &[Scenario], runners: Option<&Runners>) -> Result<Vec<Row>, ExpandError> {
    let mut out = Vec::new();
    if scenarios.contains(&Scenario::FixedSeqLen) {
        expand_fixed(e, &mut out);
    }
    if scenarios.contains(&Scenario::AgenticCoding) {
        expand_agentic(e, runners, &mut out)?;
    }
    Ok(out)
}

/// Fixed-seq-len rows: one per concurrency on a single node; one row with the whole ladder on
/// multi-node.
fn expand_fixed(e: &Entry, out: &mut Vec<Row>) {
    for b in &e.fixed {
        let seq = seq_name(b.isl, b.osl);
        for r in &b.rows {
            let concs = ladder(&r.conc, 2);
            let mut m = base(e);
            m.insert("isl".into(), json!(b.isl));
            m.insert("osl".into(), json!(b.osl));
            m.insert("max-model-len".into(), json!(b.isl + b.osl + 256));
            m.insert("spec-decoding".into(), json!(r.spec_decoding));
            m.insert("exp-name".into(), json!(format!("{}_{}", e.model_prefix, seq)));
            topo_fields(&r.topology, &mut m);
            scoped(e, r, &mut m);
            let origin = Origin {
                config_key: e.key.clone(),
                scenario: Scenario::FixedSeqLen,
                multinode: e.multinode,
                block: b.index,
                row: r.index,
                seq: Some(seq.clone()),
                gpus: r.gpus(),
            };
            if e.multinode {
                let mut m = m.clone();
                m.insert("conc".into(), json!(concs));
                out.push(Row { fields: m, origin });
            } else {
                for c in concs {
                    let mut m = m.clone();
                    m.insert("conc".into(), json!(c));
                    out.push(Row { fields: m, origin: origin.clone() });
                }
            }
        }
    }
}

/// Agentic rows: one per concurrency, with the DRAM budget and a per-point exp-name.
fn expand_agentic(e: &Entry, runners: Option<&Runners>, out: &mut Vec<Row>) -> Result<(), ExpandError> {
    for b in &e.agentic {
        for r in &b.rows {
            let dram = dram_budget_gb(e, r, b.dram_utilization, runners)
                .map_err(|source| ExpandError::DramBudget { key: e.key.clone(), source })?;
            let kv = r.kv_offloading.clone().unwrap_or_else(|| "none".into());
            let kvsuffix = match (&kv[..], &r.kv_offload_backend) {
                ("none", _) => "kvnone".to_string(),
                (mode, Some(bk)) => format!("kv{mode}-{}", bk.name),
                (mode, None) => format!("kv{mode}"),
            };
            let mut m = base(e);
            m.insert("spec-decoding".into(), json!(r.spec_decoding));
            m.insert("scenario-type".into(), json!("agentic-coding"));
            m.insert("kv-offloading".into(), json!(kv));
            if let Some(bk) = &r.kv_offload_backend {
                m.insert("kv-offload-backend".into(), component(bk));
            }
            m.insert("total-cpu-dram-gb".into(), json!(dram));
            m.insert("duration".into(), json!(AGENTIC_DURATION_S));
            topo_fields(&r.topology, &mut m);
            scoped(e, r, &mut m);
            let origin = Origin {
                config_key: e.key.clone(),
                scenario: Scenario::AgenticCoding,
                multinode: e.multinode,
                block: b.index,
                row: r.index,
                seq: None,
                gpus: r.gpus(),
            };
            for c in ladder(&r.conc, 2) {
                let mut m = m.clone();
                let exp = match &r.topology {
                    Topology::Single { tp, .. } => {
                        let spec = if r.spec_decoding == "none" { String::new() } else { format!("_spec-{}", r.spec_decoding) };
                        m.insert("conc".into(), json!(c));
                        format!("{}_tp{tp}_conc{c}_{kvsuffix}{spec}", e.model_prefix)
                    }
                    Topology::Multi { prefill, decode } => {
                        m.insert("conc".into(), json!([c]));
                        let kvs = if kv == "none" { String::new() } else { format!("_{kvsuffix}") };
                        format!("{}_p{}_d{}_conc{c}{kvs}", e.model_prefix, prefill.label(), decode.label())
                    }
                };
                m.insert("exp-name".into(), json!(exp));
                out.push(Row { fields: m, origin: origin.clone() });
            }
        }
    }
    Ok(())
}

/// Eval selection (spec §3.4). Returns eval-only rows (`run-eval` and `eval-only` true).
/// Agentic rows are included only when `include_agentic` (the generator's `--evals-only` or
/// `--all-evals`, which the changelog path always passes).
pub fn select_evals(rows: &[Row], all_evals: bool, include_agentic: bool) -> Vec<Row> {
    let mut out = single_node_fixed_evals(rows, all_evals);
    out.extend(multinode_evals(rows, all_evals, include_agentic));
    if include_agentic {
        out.extend(single_node_agentic_evals(rows, all_evals));
    }
    for r in &mut out {
        r.fields.insert("run-eval".into(), json!(true));
        r.fields.insert("eval-only".into(), json!(true));
    }
    out
}

fn is_8k1k(r: &Row) -> bool {
    r.origin.seq.as_deref() == Some("8k1k")
}

/// Single-node fixed 8k1k: every row with `all-evals`; else, per group of equal settings, the
/// rows at the highest and the median concurrency (of those at or above [`MIN_EVAL_CONC`]).
fn single_node_fixed_evals(rows: &[Row], all_evals: bool) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    let sn: Vec<&Row> = rows.iter().filter(|r| !r.origin.multinode && r.origin.scenario == Scenario::FixedSeqLen && is_8k1k(r)).collect();
    if all_evals {
        out.extend(sn.iter().map(|r| (*r).clone()));
    } else {
        let mut groups: BTreeMap<Vec<String>, Vec<&Row>> = BTreeMap::new();
        for r in &sn {
            let key =
                ["model", "runner", "framework", "precision", "isl", "osl", "spec-decoding", "dp-attn"].iter().map(|k| r.str(k)).collect();
            groups.entry(key).or_default().push(r);
        }
        for g in groups.values() {
            let mut distinct: Vec<u32> = g.iter().map(|r| r.conc()).filter(|&c| c >= MIN_EVAL_CONC).collect();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.is_empty() {
                continue;
            }
            let max = *distinct.last().expect("non-empty");
            let median = distinct[distinct.len() / 2];
            out.extend(g.iter().filter(|r| r.conc() == max || r.conc() == median).map(|r| (*r).clone()));
        }
    }
    out
}

/// Multi-node: fixed 8k1k always; agentic when included. Rows that differ only in concurrency
/// form a group: with `all-evals`, one row over the group's concurrencies; else the row with the
/// highest concurrency at or above [`MIN_EVAL_CONC`].
fn multinode_evals(rows: &[Row], all_evals: bool, include_agentic: bool) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    let mn = |scn: Scenario| {
        rows.iter()
            .filter(move |r| r.origin.multinode && r.origin.scenario == scn)
            .filter(move |r| scn == Scenario::AgenticCoding || is_8k1k(r))
    };
    let mut mn_groups: Vec<(Scenario, Vec<&Row>)> = Vec::new();
    let scns: &[Scenario] = if include_agentic { &[Scenario::FixedSeqLen, Scenario::AgenticCoding] } else { &[Scenario::FixedSeqLen] };
    for &scn in scns {
        let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
        for r in mn(scn) {
            let mut k = r.fields.clone();
            for f in ["conc", "run-eval", "eval-only", "eval-conc", "eval-all-concs", "exp-name"] {
                k.remove(f);
            }
            let key = canonical_json(&Value::Object(k));
            match groups.iter_mut().find(|(g, _)| *g == key) {
                Some((_, v)) => v.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        mn_groups.extend(groups.into_iter().map(|(_, v)| (scn, v)));
    }
    for (scn, g) in mn_groups {
        if all_evals {
            let mut union: Vec<u32> = g.iter().flat_map(|r| r.concs()).collect();
            union.sort_unstable();
            union.dedup();
            let mut r = g[0].clone();
            let max = *union.last().unwrap_or(&0);
            if scn == Scenario::FixedSeqLen {
                r.fields.insert("conc".into(), json!(union));
                r.fields.insert("eval-all-concs".into(), json!(true));
            } else {
                r.fields.insert("conc".into(), json!([max]));
            }
            r.fields.insert("eval-conc".into(), json!(max));
            out.push(r);
        } else {
            let best = g
                .iter()
                .filter_map(|r| r.concs().into_iter().filter(|&c| c >= MIN_EVAL_CONC).max().map(|c| (c, *r)))
                .max_by_key(|(c, _)| *c);
            if let Some((c, r)) = best {
                let mut r = r.clone();
                r.fields.insert("eval-conc".into(), json!(c));
                out.push(r);
            }
        }
    }
    out
}

/// Single-node agentic: every row with `all-evals`; else the highest-concurrency row per model,
/// runner, framework and precision.
fn single_node_agentic_evals(rows: &[Row], all_evals: bool) -> Vec<Row> {
    let sa: Vec<&Row> = rows.iter().filter(|r| !r.origin.multinode && r.origin.scenario == Scenario::AgenticCoding).collect();
    if all_evals {
        return sa.iter().map(|r| (*r).clone()).collect();
    }
    let mut best: BTreeMap<Vec<String>, &Row> = BTreeMap::new();
    for r in sa {
        let key: Vec<String> = ["model", "runner", "framework", "precision"].iter().map(|k| r.str(k)).collect();
        let e = best.entry(key).or_insert(r);
        if r.conc() > e.conc() {
            *e = r;
        }
    }
    best.into_values().cloned().collect()
}

/// `--trim-conc` (the `sweep-enabled` label): single-node rows keep the minimum concurrency per
/// recipe; multi-node rows with several concurrencies keep `[min]`.
pub fn trim_conc(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for mut r in rows {
        if r.origin.multinode {
            let c = r.concs();
            if c.len() > 1 {
                let min = *c.iter().min().expect("non-empty");
                r.fields.insert("conc".into(), json!([min]));
            }
            out.push(r);
            continue;
        }
        let mut k = r.fields.clone();
        k.remove("conc");
        k.remove("exp-name");
        let key = canonical_json(&Value::Object(k));
        match seen.get(&key) {
            Some(&i) => {
                if r.conc() < out[i].conc() {
                    out[i] = r;
                }
            }
            None => {
                seen.insert(key, out.len());
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
