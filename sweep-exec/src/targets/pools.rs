//! Which traces each point replays. Given `--traces`, every point replays that set; by default
//! (`auto`) each point replays the corpus its model family's published points replayed — for the
//! DeepSeek-V4 family the AgentX corpus `cc-traces-weka-062126`, synthesized from its published
//! statistics — and other families the bundled synthetic set. Sets are compiled once and shared.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use crate::plan::PlanPoint;
use crate::trace::{ReadOptions, TraceSource};
use crate::workload::{TracePlan, compile_pool};

/// Why a trace set could not be compiled; each names the `--traces` spec.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The spec does not parse.
    #[error("--traces {spec}: {message}")]
    Spec { spec: String, message: String },
    #[error("--traces {spec}: {source}")]
    Read { spec: String, source: Box<crate::trace::TraceError> },
    #[error("--traces {spec}: no replayable trace (each needs at least one main-agent request)")]
    Empty { spec: String },
}

/// `--traces` value that picks each point's family corpus.
pub const AUTO: &str = "auto";

/// `--traces`, parsed once (clap reads it through `FromStr`): [`AUTO`] or the one trace source
/// every point replays, kept with its spelling, which runs record and resumed runs compare.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSpec {
    text: String,
    source: Option<TraceSource>,
}

impl TraceSpec {
    /// Each point replays its model family's corpus.
    pub fn auto() -> Self {
        TraceSpec { text: AUTO.into(), source: None }
    }

    /// Each point replays its model family's corpus (`--traces auto`).
    pub fn is_auto(&self) -> bool {
        self.text == AUTO
    }

    /// The parsed source every point replays (`None` for `auto`, or a set compiled beforehand).
    pub fn source(&self) -> Option<&TraceSource> {
        self.source.as_ref()
    }

    /// The spec as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for TraceSpec {
    type Err = crate::trace::TraceSourceError;
    fn from_str(s: &str) -> Result<TraceSpec, Self::Err> {
        if s == AUTO {
            return Ok(TraceSpec::auto());
        }
        Ok(TraceSpec { text: s.to_string(), source: Some(s.parse()?) })
    }
}

impl fmt::Display for TraceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The corpus a model family's published agentic points replayed, as a trace spec.
pub fn family_corpus(family: &engine::profiles::ModelFamily) -> &'static str {
    match family {
        engine::profiles::ModelFamily::DeepseekV4 => "like:cc-traces-weka-062126",
        _ => "synthetic",
    }
}

/// The model profile a point's recipe serves (`--model-path`, else the master row's `model`).
pub fn point_model(point: &PlanPoint) -> Option<engine::ModelSpec> {
    let from_argv = point.launch.as_ref().and_then(|l| {
        let argv = &l.worker_argv;
        argv.iter().position(|a| a == "--model-path" || a == "--model").and_then(|i| argv.get(i + 1)).cloned().or_else(|| {
            argv.iter().find_map(|a| a.strip_prefix("--model-path=").or_else(|| a.strip_prefix("--model=")).map(str::to_string))
        })
    });
    let name = from_argv.or_else(|| point.row.get("model").and_then(|v| v.as_str()).map(str::to_string))?;
    engine::ModelSpec::lookup(&name).ok()
}

/// A compiled trace set and the name results record for it.
#[derive(Clone)]
pub struct Pool {
    pub plans: Arc<Vec<Arc<TracePlan>>>,
    pub trace_set: String,
}

/// The trace sets of a run, compiled on first use.
pub struct PointPools {
    spec: TraceSpec,
    seed: u64,
    compiled: Mutex<HashMap<String, Pool>>,
}

impl PointPools {
    /// `spec`: the trace source every point replays, or each point's family corpus.
    pub fn new(spec: TraceSpec, seed: u64) -> Self {
        Self { spec, seed, compiled: Mutex::new(HashMap::new()) }
    }

    /// One fixed, already compiled set for every point.
    pub fn fixed(plans: Vec<Arc<TracePlan>>, trace_set: String) -> Self {
        let spec = TraceSpec { text: trace_set.clone(), source: None };
        let p = Self::new(spec, 0);
        p.compiled.lock().expect("not poisoned").insert(trace_set.clone(), Pool { plans: Arc::new(plans), trace_set });
        p
    }

    /// The trace spec a point replays.
    pub fn spec_for(&self, point: &PlanPoint) -> String {
        if !self.spec.is_auto() {
            return self.spec.to_string();
        }
        point_model(point).map_or("synthetic", |m| family_corpus(&m.family)).to_string()
    }

    /// The compiled set a point replays; `auto` sets are named with why they were chosen.
    pub fn pool_for(&self, point: &PlanPoint) -> Result<Pool, PoolError> {
        let spec = self.spec_for(point);
        let mut compiled = self.compiled.lock().expect("not poisoned");
        if let Some(p) = compiled.get(&spec) {
            return Ok(p.clone());
        }
        let trace_set = if self.spec.is_auto() { describe_auto(&spec) } else { spec.clone() };
        let plans = match self.spec.source() {
            Some(source) => compile(source, &spec, self.seed)?,
            None => load(&spec, self.seed)?,
        };
        let pool = Pool { plans: Arc::new(plans), trace_set };
        compiled.insert(spec, pool.clone());
        Ok(pool)
    }
}

fn describe_auto(spec: &str) -> String {
    match spec.strip_prefix("like:") {
        Some(name) => {
            format!("{spec} (synthesized from the published statistics of {name}, the corpus this model family's points replayed)")
        }
        None => format!("{spec} (the bundled synthetic set, calibrated on the kv-cache-tester traces)"),
    }
}

/// Compiles a trace spec into replay plans; errors name the spec.
pub fn load(spec: &str, seed: u64) -> Result<Vec<Arc<TracePlan>>, PoolError> {
    let source: TraceSource =
        spec.parse().map_err(|e: crate::trace::TraceSourceError| PoolError::Spec { spec: spec.to_string(), message: e.to_string() })?;
    compile(&source, spec, seed)
}

/// Compiles a parsed trace source (`spec`: its spelling, for errors) into replay plans.
pub fn compile(source: &TraceSource, spec: &str, seed: u64) -> Result<Vec<Arc<TracePlan>>, PoolError> {
    let mut warnings = Vec::new();
    let pool = compile_pool(source, &ReadOptions::default(), seed, &mut warnings)
        .map_err(|e| PoolError::Read { spec: spec.to_string(), source: Box::new(e) })?;
    for w in warnings.iter().take(5) {
        tracing::warn!("{w}");
    }
    if pool.is_empty() {
        return Err(PoolError::Empty { spec: spec.to_string() });
    }
    Ok(pool)
}

/// The most tokens any request of a trace needs (input, marker and output).
pub fn trace_max_tokens(t: &TracePlan) -> u64 {
    t.streams
        .iter()
        .flat_map(|s| s.prompts.turns.iter())
        .map(|turn| turn.input_tokens + turn.output_tokens + crate::prompt::MARKER_TOKENS as u64)
        .max()
        .unwrap_or(0)
}

/// The whole-trace filter at the server's context length (AgentX `--max-context-length`): a
/// trace with a request that cannot fit is left out, so that a short-context model is measured on
/// the sessions it can serve instead of aborting on the first overflowing root turn. Returns the
/// pool and a note when traces were dropped.
pub fn fit_pool(pool: &[Arc<TracePlan>], context: u64) -> Result<(Vec<Arc<TracePlan>>, Option<String>), super::sim::SimError> {
    let kept: Vec<Arc<TracePlan>> = pool.iter().filter(|t| trace_max_tokens(t) <= context).cloned().collect();
    if kept.len() == pool.len() {
        return Ok((kept, None));
    }
    if kept.is_empty() {
        return Err(super::sim::SimError::Workload(format!(
            "no trace fits the server's context length of {context} tokens; use a model with a longer context or shorter traces"
        )));
    }
    let note = format!("whole-trace filter at the context length {context}: {} of {} traces", kept.len(), pool.len());
    Ok((kept, Some(note)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::sim::{best_hardware, hardware_kind};
    use engine::{GpuSpec, ModelSpec};

    #[test]
    fn the_best_profile_is_fitted_then_joint_then_measured_then_borrowed_then_datasheet() {
        let v41 = ModelSpec::lookup("deepseek-ai/DeepSeek-V4.1-Flash").unwrap();
        let v3 = ModelSpec::lookup("deepseek-ai/DeepSeek-V3").unwrap();
        let best = |hw: &str, m: &ModelSpec| best_hardware(GpuSpec::lookup(hw).unwrap(), m);
        let g = best("gb300", &v41);
        assert_eq!((g.name.as_str(), hardware_kind(&g)), ("gb300-fitted-dsv41flash", "fitted"));
        // The GB300 fit is of V4.1-Flash: another model on GB300 borrows the fitted B200's cost.
        let g = best("gb300", &v3);
        assert_eq!((g.name.as_str(), hardware_kind(&g)), ("gb300-from-b200-fitted", "fitted"));
        assert_eq!(g.datasheet, GpuSpec::lookup("gb300").unwrap().datasheet, "its own datasheet");
        assert_eq!(g.cost, GpuSpec::lookup("b200-fitted").unwrap().cost, "the fitted B200's cost");
        // The joint fits apply to every model on their GPU, before the measured curves.
        let g = best("h200", &v3);
        assert_eq!((g.name.as_str(), hardware_kind(&g)), ("h200-fitted", "fitted"));
        let g = best("b200", &v41);
        assert_eq!((g.name.as_str(), hardware_kind(&g)), ("b200-fitted", "fitted"));
        let g = best("h100", &v3);
        assert_eq!(g.name, "h100-from-h200-fitted");
        // The standing says a borrowed profile was fitted to no point of its GPU.
        let s = crate::targets::profiles::profile_residuals(&g);
        assert!(s.starts_with("fitted to no published point of this GPU: cost parameters of h200-fitted"), "{s}");
    }

    #[test]
    fn auto_gives_each_family_its_corpus_and_bad_like_specs_are_named() {
        assert_eq!(family_corpus(&ModelSpec::lookup("dsv41flash").unwrap().family), "like:cc-traces-weka-062126");
        assert_eq!(family_corpus(&ModelSpec::lookup("dsv3").unwrap().family), "synthetic");
        let e = "like:nope".parse::<TraceSource>().unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("cc-traces-weka-062126"), "{e}");
        let e = "like:cc-traces-weka-062126:x".parse::<TraceSource>().unwrap_err().to_string();
        assert!(e.contains("trace count"), "{e}");
        let ok = "like:cc-traces-weka-062126:12:7".parse::<TraceSource>().unwrap();
        assert_eq!(ok.name(), "like:cc-traces-weka-062126:12:7");
    }

    #[test]
    fn a_small_like_corpus_compiles_and_is_shared_between_points() {
        let pools = PointPools::new("like:cc-traces-weka-062126:12".parse().unwrap(), 42);
        let repo = crate::repo::Repo::at(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        let inputs = crate::plan::Inputs::load(&repo).expect("repository config loads");
        let labels = crate::plan::Labels::parse(&["full-sweep-fail-fast"]).unwrap();
        let plan = crate::plan::build(&repo, &inputs, &crate::plan::PlanRequest { labels, base: None, no_evals: false }).expect("plan");
        let a = plan.points().next().unwrap();
        let b = plan.points().nth(1).unwrap();
        let pa = pools.pool_for(a).unwrap();
        let pb = pools.pool_for(b).unwrap();
        assert_eq!(pa.plans.len(), 12);
        assert!(Arc::ptr_eq(&pa.plans, &pb.plans), "compiled once");
        // Inputs are whole 64-token blocks and long: the published corpus's contexts.
        let max_in = pa.plans.iter().map(|p| crate::targets::sim::trace_max_tokens(p)).max().unwrap();
        assert!(max_in > 100_000, "{max_in}");
    }
}
