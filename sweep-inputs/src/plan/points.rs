//! Rows to plan points: InferenceX's buckets, the canary, and each point's id, arm and launch
//! resolved from its config's serving recipe.

use super::matrix::{self, Row, Scenario};
use super::{FixedSeqLen, Inputs, PlanPoint};
use crate::problem::Problems;
use crate::recipe::master::{Entry, Topology};
use crate::recipe::serving::{Block, Launch, PointMap, Recipe};
use crate::repo::Repo;
use std::collections::{BTreeMap, HashMap};

/// Throughput rows by bucket, in InferenceX order.
pub(super) fn bench_buckets(bench: Vec<Row>) -> BTreeMap<String, Vec<Row>> {
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
    buckets
}

/// Eval rows by bucket.
pub(super) fn eval_buckets(evals: Vec<Row>) -> BTreeMap<String, Vec<Row>> {
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
    eval_buckets
}

/// Canary: minimum-conc single-node 1k1k, then 8k1k row; sweep also accepts a single-node
/// agentic row when the plan has no fixed-seq-len candidate (agentic-only sweeps). Taken out of
/// its bucket.
pub(super) fn take_canary(buckets: &mut BTreeMap<String, Vec<Row>>) -> Option<(String, Row)> {
    for b in ["single_node.1k1k", "single_node.8k1k", "single_node.agentic"] {
        if let Some(rows) = buckets.get_mut(b)
            && let Some((i, _)) = rows.iter().enumerate().filter(|(_, r)| !r.run_eval()).min_by_key(|(i, r)| (r.conc(), *i))
        {
            return Some((b.to_string(), rows.remove(i)));
        }
    }
    None
}

/// Makes plan points, allocating their ids in the order they are made.
pub(super) struct PointMaker<'a> {
    repo: &'a Repo,
    inputs: &'a Inputs,
    /// `agentx-fast`: shorter profiling, one warmup request per lane.
    fast: bool,
    ids: IdAlloc,
    /// Each config's recipe, loaded and matched to the master once (a config has many points,
    /// and its problems are reported once); `None` when it has none or it failed.
    recipes: HashMap<String, Option<(Recipe, PointMap)>>,
}

impl<'a> PointMaker<'a> {
    pub(super) fn new(repo: &'a Repo, inputs: &'a Inputs, fast: bool) -> Self {
        PointMaker { repo, inputs, fast, ids: IdAlloc::default(), recipes: HashMap::new() }
    }

    /// The same maker (its loaded recipes) with ids allocated afresh.
    pub(super) fn with_fresh_ids(self) -> Self {
        PointMaker { ids: IdAlloc::default(), ..self }
    }

    pub(super) fn point(&mut self, bucket: &str, r: Row, problems: &mut Problems) -> PlanPoint {
        let fast = self.fast;
        let entry = self.inputs.master.get(&r.origin.config_key).expect("rows come from the master");
        let (arm, launch) = self.resolve_launch(entry, &r, problems);
        let agentic = r.origin.scenario == Scenario::AgenticCoding;
        let id = self.ids.alloc(&r.origin.config_key, &arm_slug(entry, &r), r.conc());
        let fixed = self.fixed_seq_len(entry, &r);
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
            fixed,
            row: r.fields,
            launch,
        }
    }

    /// A single-node fixed-seq-len row's requests: its block's ISL and OSL, the recipe's range
    /// ratio (else InferenceX's), 10 × conc prompts after 2 × conc warmups.
    fn fixed_seq_len(&self, entry: &Entry, r: &Row) -> Option<FixedSeqLen> {
        if r.origin.scenario != Scenario::FixedSeqLen || r.origin.multinode {
            return None;
        }
        let b = entry.fixed.iter().find(|b| b.index == r.origin.block)?;
        let recipe_ratio = self.recipes.get(&entry.key).and_then(|m| m.as_ref()).and_then(|(recipe, _)| recipe.random_range_ratio);
        Some(FixedSeqLen {
            isl: b.isl,
            osl: b.osl,
            random_range_ratio: recipe_ratio.unwrap_or(matrix::RANDOM_RANGE_RATIO),
            num_prompts: matrix::PROMPTS_PER_CONC * r.conc(),
            num_warmups: matrix::WARMUPS_PER_CONC * r.conc(),
        })
    }

    /// Arm name and resolved launch from the config's serving recipe, when it has one.
    fn resolve_launch(&mut self, entry: &Entry, r: &Row, problems: &mut Problems) -> (String, Option<Launch>) {
        let fallback = arm_label(entry, r);
        if r.origin.multinode {
            return (fallback, None);
        }
        let repo = self.repo;
        let matched = self.recipes.entry(entry.key.clone()).or_insert_with(|| {
            let recipe = repo.recipe(&entry.key)?.map_err(|e| problems.extend(e)).ok()?;
            let map = recipe.match_master(entry).map_err(|e| problems.extend(e)).ok()?;
            Some((recipe, map))
        });
        let Some((recipe, map)) = matched else { return (fallback, None) };
        let block = match r.origin.scenario {
            Scenario::FixedSeqLen => Block::Fixed(r.origin.block),
            Scenario::AgenticCoding => Block::Agentic(r.origin.block),
        };
        let Some(&(ai, pi)) = map.get(&(block, r.origin.row, r.conc())) else { return (fallback, None) };
        match recipe.resolve(ai, pi, &entry.model_prefix, self.inputs.golden.as_ref()) {
            Ok(l) => (l.arm.clone(), Some(l)),
            Err(e) => {
                problems.extend(e);
                (fallback, None)
            }
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
