//! The sweep plan for a label: changelog selection → matrix rows → buckets, canary and
//! matrix-scoped fail-fast (spec `inferencex.md` §3.5, §4), with each point's resolved launch.

pub mod labels;
pub mod matrix;
pub mod narrow;
mod points;
mod select;

use crate::changelog::Changelog;
use crate::golden_al::GoldenAl;
use crate::problem::Problems;
use crate::recipe::master::Master;
use crate::recipe::serving::Launch;
use crate::repo::Repo;
pub use labels::{LabelError, Labels, Primary};
use matrix::Scenario;
pub use points::arm_label;
pub use select::{AppendOnlyError, append_only_delta};
use serde::Serialize;
use serde_json::{Map, Value, json};

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
    /// Fixed-seq-len throughput points: what the client sends (`isl`, `osl`, ...).
    #[serde(flatten)]
    pub fixed: Option<FixedSeqLen>,
    pub row: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
}

/// A fixed-seq-len point's requests, as InferenceX's `benchmark_serving` sends them: random
/// prompts of ISL input and OSL output tokens, each length drawn in [ratio × length, length],
/// `num_prompts` of them at `conc` in flight after `num_warmups` warmup requests.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FixedSeqLen {
    pub isl: u32,
    pub osl: u32,
    /// The recipe's `random-range-ratio`, else [`matrix::RANDOM_RANGE_RATIO`].
    pub random_range_ratio: f64,
    /// [`matrix::PROMPTS_PER_CONC`] × conc.
    pub num_prompts: u32,
    /// [`matrix::WARMUPS_PER_CONC`] × conc.
    pub num_warmups: u32,
}

impl PlanPoint {
    /// (ISL, OSL) of a fixed-seq-len point (its eval points included), from its matrix row.
    pub fn seq_len(&self) -> Option<(u32, u32)> {
        let n = |k: &str| self.row.get(k).and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok());
        (self.scenario == Scenario::FixedSeqLen).then(|| Some((n("isl")?, n("osl")?))).flatten()
    }
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
                // InferenceX's benchmark workflow input of the same name.
                if let Some(f) = &p.fixed { m.insert("random-range-ratio".into(), json!(f.random_range_ratio)); }
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
    /// Leave out eval rows (the generator's `--no-evals`): throughput only.
    pub no_evals: bool,
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
    let (added, base_master) = select::added_entries(repo, &inputs.changelog, req)?;
    let (mut bench, mut evals) = selected_rows(inputs, &added, base_master.as_ref(), &req.labels)?;
    let mut problems = Problems::default();
    if req.no_evals {
        if req.labels.evals_only || req.labels.all_evals {
            problems.push(crate::problem::Problem::new(
                &inputs.changelog.file,
                None,
                "",
                "--no-evals with the evals-only or all-evals label selects nothing to run",
                "drop --no-evals or the eval label",
            ));
            return Err(problems);
        }
        evals.clear();
    }
    if req.labels.primary.trim_conc() {
        bench = matrix::trim_conc(bench);
    }
    for r in &mut bench {
        r.fingerprint();
    }

    let mut buckets = points::bench_buckets(bench);
    let eval_buckets = points::eval_buckets(evals);
    let canary_row = if req.labels.primary.canary() { points::take_canary(&mut buckets) } else { None };
    buckets.retain(|_, v| !v.is_empty());

    let mut maker = points::PointMaker::new(repo, inputs, req.labels.agentx_fast);
    let canary = canary_row.map(|(b, r)| {
        let mut p = maker.point(&b, r, &mut problems);
        p.matrix = "canary".into();
        p
    });
    let ff = req.labels.primary.fail_fast();
    let mut matrices = Vec::new();
    for (name, rows) in buckets {
        let points = rows.into_iter().map(|r| maker.point(&name, r, &mut problems)).collect();
        matrices.push(Matrix { name, fail_fast: ff, points });
    }
    // Eval ids are their throughput twin's with an `eval:` prefix, so they get their own allocator.
    let mut eval_maker = maker.with_fresh_ids();
    let mut eval_ms = Vec::new();
    for (name, rows) in eval_buckets {
        let points = rows
            .into_iter()
            .map(|r| {
                let mut p = eval_maker.point(&name, r, &mut problems);
                p.id = format!("eval:{}", p.id);
                // An eval answers gsm8k; it replays no trace.
                p.duration_s = None;
                p.warmup_per_lane = None;
                p.fixed = None;
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

/// The throughput and eval rows that changelog entries `added` select (each (config, scenario)
/// expanded once; append-only entries only their new concurrencies against `base_master`), as
/// `build` plans them, before trimming and fingerprints.
pub fn selected_rows(
    inputs: &Inputs,
    added: &[crate::changelog::Entry],
    base_master: Option<&Master>,
    labels: &Labels,
) -> Result<(Vec<matrix::Row>, Vec<matrix::Row>), Problems> {
    let mut problems = Problems::default();
    select::check_entry_mix(&inputs.changelog, added, labels, &mut problems);
    let rows = select::Selection::new(inputs, base_master, labels).rows(added, &mut problems);
    problems.into_result(rows)
}

fn git_head(root: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new("git").arg("-C").arg(root).args(["rev-parse", "--short", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
