//! Fitting the reference engine to measured serving results (`sweep calibrate fit`), and the
//! metric residuals shared with twin mode (`sweep run --twin`).
//!
//! A fit replays the measured points' own recipes on the virtual clock with candidate cost
//! parameters and minimises a weighted sum of squared log-ratios between simulated and measured
//! metrics (see [`Metric::weight`] and `docs/calibration.md`). Parameters are bounded; the search
//! is a bounded Nelder–Mead ([`nelder_mead`]) restarted several times from seeded starts. Every
//! simulation is deterministic, so the same inputs and seed give the same fitted profile.
//!
//! Some parameters describe the workload rather than the GPU, for measured runs that replayed
//! another trace set: `osl_scale` and `osl_exp` (output tokens), `isl_scale` (input tokens),
//! `delay_scale` and `delay_cap_s` (inter-turn delays); see [`WorkloadScales`]. They are only
//! fitted when asked for, are stored in the profile's `fit.workload`, and `sweep predict` applies
//! them to the trace set. With `orders` > 1 every point is replayed from several starting traces
//! and its metrics averaged ([`simulate_point_orders`]): a low-concurrency point replays only the
//! first few sessions of a set, so one order is one small sample.

pub mod nelder_mead;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use engine::profiles::{CoarseRecord, CorpusRecord, FitParameter, FitPoint, FitRecord, FitResidual, WorkloadScales};
use engine::{Engine, EngineConfig, GpuSpec, ModelSpec};
use serde_json::Value;

use crate::metrics::{PointContext, Summary};
use crate::plan::PlanPoint;
use crate::results::{RunSummary, Status};
use crate::trace::{Entry, InnerRequest, ReadOptions, Request, Trace, TraceSource};
use crate::workload::TracePlan;

/// Why a fit could not run.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("{path}: {message}")]
    Results { path: String, message: String },
    #[error("{0}")]
    Points(String),
    #[error("--traces {spec}: {message}")]
    Traces { spec: String, message: String },
    #[error("--params: {0}")]
    Params(String),
}

pub use crate::metrics::{Metric, residual_pct};

/// Each metric's default weight.
pub fn default_weights() -> BTreeMap<Metric, f64> {
    Metric::ALL.iter().map(|m| (*m, m.weight())).collect()
}

/// Reads `key=weight,…` overrides onto the default weights.
pub fn parse_weights(spec: &[String]) -> Result<BTreeMap<Metric, f64>, FitError> {
    let mut w = default_weights();
    for item in spec {
        let (k, v) = item.split_once('=').ok_or_else(|| FitError::Params(format!("--weights {item}: expected metric=weight")))?;
        let m = Metric::from_key(k.trim()).ok_or_else(|| FitError::Params(format!("--weights {item}: unknown metric {k}")))?;
        let x: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| FitError::Params(format!("--weights {item}: not a weight >= 0")))?;
        w.insert(m, x);
    }
    Ok(w)
}

/// The loss definition written into fitted profiles and the docs.
pub fn loss_definition(weights: &BTreeMap<Metric, f64>) -> String {
    let w: Vec<String> = weights.iter().map(|(m, x)| format!("{} {}", m.key(), x)).collect();
    format!(
        "sum over points and measured metrics of w * ln(predicted / measured)^2, divided by the sum of the weights; weights: {}; a point that fails on the virtual clock adds 25 per weight",
        w.join(", ")
    )
}

/// One measured point: its arm and concurrency (or plan point id) and the metrics it has.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPoint {
    pub arm: String,
    pub conc: u32,
    /// Plan point id, when the source is a run directory.
    pub id: Option<String>,
    pub metrics: BTreeMap<Metric, f64>,
}

/// Reads measured points for `config_key` from a run directory (`summary.json`: its measured,
/// finished, valid points) or a YAML table with a `calibration-results` list (each entry: `arm`,
/// `conc` and any of the metric keys). Returns the points and a description of the source.
pub fn load_measured(path: &Path, config_key: &str) -> Result<Vec<MeasuredPoint>, FitError> {
    let bad = |message: String| FitError::Results { path: path.display().to_string(), message };
    if path.is_dir() {
        let run = RunSummary::load(path).map_err(|e| bad(e.to_string()))?;
        let pts: Vec<MeasuredPoint> = run
            .points
            .iter()
            .filter(|p| p.config_key == config_key && p.result_kind == "measured" && p.ok())
            .filter_map(|p| {
                let s = p.summary.as_ref()?;
                Some(MeasuredPoint {
                    arm: p.arm.clone(),
                    conc: p.conc,
                    id: Some(p.id.clone()),
                    metrics: Metric::ALL.iter().map(|m| (*m, m.of(s))).filter(|(_, v)| v.is_finite() && *v > 0.0).collect(),
                })
            })
            .collect();
        if pts.is_empty() {
            return Err(bad(format!(
                "no finished, valid `measured` point of {config_key} in this run (points: {}); fit on a run against a real server",
                run.points.iter().map(|p| format!("{} ({})", p.id, p.result_kind)).collect::<Vec<_>>().join(", ")
            )));
        }
        return Ok(pts);
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let doc: Value = crate::yaml::from_str(&text).map_err(|e| bad(format!("not YAML: {e}")))?;
    if let Some(k) = doc.get("config-key").and_then(Value::as_str)
        && k != config_key
    {
        return Err(bad(format!("its config-key is {k}, not {config_key}; pass --config {k}")));
    }
    let rows = doc
        .get("calibration-results")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `calibration-results` list (entries: {arm, conc, tput_per_gpu, e2el_p90, …})".into()))?;
    let mut pts = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let at = format!("calibration-results[{i}]");
        let arm = r.get("arm").and_then(Value::as_str).ok_or_else(|| bad(format!("{at}.arm: missing (the arm name, e.g. Agg TP4)")))?;
        let conc = r.get("conc").and_then(Value::as_u64).ok_or_else(|| bad(format!("{at}.conc: missing or not a whole number")))? as u32;
        let mut metrics = BTreeMap::new();
        for (k, v) in r.as_object().into_iter().flatten() {
            if k == "arm" || k == "conc" {
                continue;
            }
            let m = Metric::from_key(k).ok_or_else(|| {
                bad(format!("{at}.{k}: unknown metric; known: {}", Metric::ALL.iter().map(|m| m.key()).collect::<Vec<_>>().join(", ")))
            })?;
            let x = v.as_f64().filter(|x| x.is_finite() && *x > 0.0).ok_or_else(|| bad(format!("{at}.{k}: not a positive number")))?;
            metrics.insert(m, x);
        }
        if metrics.is_empty() {
            return Err(bad(format!("{at}: no metric")));
        }
        pts.push(MeasuredPoint { arm: arm.to_string(), conc, id: None, metrics });
    }
    if pts.is_empty() {
        return Err(bad("`calibration-results` is empty".into()));
    }
    Ok(pts)
}

fn norm_arm(s: &str) -> String {
    s.to_ascii_lowercase().replace(['-', '_', ' '], "")
}

/// Pairs measured points with the plan's points of the same config (by id, else arm and conc).
pub fn match_points(plan_points: &[PlanPoint], measured: &[MeasuredPoint]) -> Result<Vec<(PlanPoint, MeasuredPoint)>, FitError> {
    let mut out = Vec::new();
    for m in measured {
        let hit = plan_points.iter().find(|p| match &m.id {
            Some(id) => &p.id == id,
            None => {
                p.conc == m.conc && (norm_arm(&p.arm) == norm_arm(&m.arm) || p.id.ends_with(&format!("/{}-c{}", norm_arm(&m.arm), m.conc)))
            }
        });
        match hit {
            Some(p) => out.push((p.clone(), m.clone())),
            None => {
                return Err(FitError::Points(format!(
                    "measured point {} c{} has no point in the plan (plan points: {})",
                    m.arm,
                    m.conc,
                    plan_points.iter().map(|p| format!("{} c{}", p.arm, p.conc)).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    Ok(out)
}

/// A fitted parameter: where it lives and its bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Param {
    pub name: &'static str,
    pub lower: f64,
    pub upper: f64,
    pub what: &'static str,
}

impl Param {
    /// A workload transform rather than a cost parameter: candidates that move it replay their
    /// own scaled compile of the trace set.
    pub fn is_workload(&self) -> bool {
        self.what.starts_with("workload:")
    }
}

/// Every parameter a fit can move. Bounds span the spec's ranges (engine spec §7.4) with room
/// on both sides; all are positive, so they are searched on a log scale.
pub const PARAMS: &[Param] = &[
    Param { name: "eta_bw", lower: 0.3, upper: 1.0, what: "HBM bandwidth efficiency (memory-bound steps: decode)" },
    Param { name: "eta_flops", lower: 0.05, upper: 1.0, what: "FLOP efficiency (compute-bound steps: prefill)" },
    Param { name: "tau_layer_us", lower: 5.0, upper: 200.0, what: "fixed cost per layer per step (kernel launches, norms, mHC)" },
    Param { name: "tau_step_us", lower: 50.0, upper: 20000.0, what: "fixed cost per step (sampling, scheduling, streaming)" },
    Param { name: "eager_overhead_us", lower: 100.0, upper: 300000.0, what: "extra cost of a step outside CUDA graphs (prefill)" },
    Param { name: "allreduce_latency_us", lower: 2.0, upper: 100.0, what: "latency per all-reduce (TP)" },
    Param { name: "a2a_latency_us", lower: 5.0, upper: 300.0, what: "latency per all-to-all / DP gather (EP, DP attention)" },
    Param { name: "osl_scale", lower: 0.5, upper: 20.0, what: "workload: output tokens relative to the trace's recorded out" },
    Param { name: "delay_scale", lower: 0.002, upper: 2.0, what: "workload: recorded inter-turn delays multiplied by this" },
    Param { name: "osl_exp", lower: 0.5, upper: 2.0, what: "workload: exponent of output length about 1,000 recorded tokens" },
    Param {
        name: "isl_scale",
        lower: 0.5,
        upper: 6.0,
        what: "workload: input tokens (and tokens per hashed block) relative to the trace's",
    },
    Param { name: "delay_cap_s", lower: 0.05, upper: 600.0, what: "workload: longest end-to-start delay after scaling, s" },
];

/// The default parameter set: the cost model's efficiencies, fixed costs and the EP/DP latency.
pub const DEFAULT_PARAMS: &[&str] = &["eta_bw", "eta_flops", "tau_layer_us", "tau_step_us", "a2a_latency_us"];

pub fn param(name: &str) -> Result<Param, FitError> {
    PARAMS.iter().copied().find(|p| p.name == name).ok_or_else(|| {
        FitError::Params(format!("unknown parameter {name}; known: {}", PARAMS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")))
    })
}

/// A candidate: cost parameters (inside a hardware profile) and workload scales.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub gpu: GpuSpec,
    pub scales: WorkloadScales,
}

impl Candidate {
    /// What tells two candidates apart in a fit: the bits of every fittable parameter.
    pub fn key(&self) -> Vec<u64> {
        PARAMS.iter().map(|p| self.get(p.name).to_bits()).collect()
    }

    pub fn get(&self, name: &str) -> f64 {
        let c = &self.gpu.cost;
        match name {
            "eta_bw" => c.eta_bw,
            "eta_flops" => c.eta_flops,
            "tau_layer_us" => c.tau_layer_us,
            "tau_step_us" => c.tau_step_us,
            "eager_overhead_us" => c.eager_overhead_us,
            "allreduce_latency_us" => c.allreduce_latency_us,
            "a2a_latency_us" => c.a2a_latency_us,
            "osl_scale" => self.scales.osl_scale,
            "delay_scale" => self.scales.delay_scale,
            "osl_exp" => self.scales.osl_exp,
            "isl_scale" => self.scales.isl_scale,
            // No cap is the same as the largest cap the search allows.
            "delay_cap_s" => self.scales.delay_cap_s.unwrap_or(f64::INFINITY),
            _ => f64::NAN,
        }
    }

    pub fn set(&mut self, name: &str, v: f64) {
        let c = &mut self.gpu.cost;
        match name {
            "eta_bw" => c.eta_bw = v,
            "eta_flops" => c.eta_flops = v,
            "tau_layer_us" => c.tau_layer_us = v,
            "tau_step_us" => c.tau_step_us = v,
            "eager_overhead_us" => c.eager_overhead_us = v,
            "allreduce_latency_us" => c.allreduce_latency_us = v,
            "a2a_latency_us" => c.a2a_latency_us = v,
            "osl_scale" => self.scales.osl_scale = v,
            "delay_scale" => self.scales.delay_scale = v,
            "osl_exp" => self.scales.osl_exp = v,
            "isl_scale" => self.scales.isl_scale = v,
            "delay_cap_s" => self.scales.delay_cap_s = v.is_finite().then_some(v),
            _ => {}
        }
    }
}

fn to_unit(p: &Param, v: f64) -> f64 {
    ((v.clamp(p.lower, p.upper) / p.lower).ln() / (p.upper / p.lower).ln()).clamp(0.0, 1.0)
}

fn from_unit(p: &Param, u: f64) -> f64 {
    p.lower * (p.upper / p.lower).powf(u.clamp(0.0, 1.0))
}

/// Reads a trace set into memory (workload scales are applied per candidate).
pub fn load_traces(spec: &str) -> Result<Vec<Trace>, FitError> {
    let source: TraceSource = spec.parse().map_err(|e: String| FitError::Traces { spec: spec.into(), message: e })?;
    let mut warnings = Vec::new();
    let mut out = Vec::new();
    source
        .for_each(&ReadOptions::default(), &mut warnings, |t| {
            out.push(t);
            Ok(())
        })
        .map_err(|e| FitError::Traces { spec: spec.into(), message: e.to_string() })?;
    if out.is_empty() {
        return Err(FitError::Traces { spec: spec.into(), message: "no trace".into() });
    }
    Ok(out)
}

/// The tokens per hashed block after input scaling (a whole number, at least 1), and the factor
/// it actually applies.
pub fn scaled_block(block_size: u32, isl_scale: f64) -> (u32, f64) {
    let b = ((f64::from(block_size) * isl_scale).round() as u32).max(1);
    (b, f64::from(b) / f64::from(block_size.max(1)))
}

/// A trace with its outputs, inputs and recorded times scaled. Scaling every recorded time by
/// the same factor scales every end-to-start delay and spawn offset by it and keeps cross-stream
/// order. Inputs scale with the tokens per hashed block, so every request keeps its blocks and
/// its prefix reuse; the factor is rounded to whole tokens per block.
pub fn scale_trace(t: &Trace, s: WorkloadScales) -> Trace {
    let mut t = t.clone();
    let d = s.delay_scale;
    let (bs, fi) = scaled_block(t.block_size, s.isl_scale);
    t.block_size = bs;
    let tok = |x: u64| (x as f64 * fi).round() as u64;
    t.tool_tokens = tok(t.tool_tokens);
    t.system_tokens = tok(t.system_tokens);
    let f = |r: &mut Request| {
        r.output_tokens = s.osl(r.output_tokens);
        r.input_tokens = tok(r.input_tokens).max(1);
        r.t *= d;
        r.api_time = r.api_time.map(|x| x * d);
        r.think_time = r.think_time.map(|x| x * d);
        r.ttft = r.ttft.map(|x| x * d);
    };
    for e in &mut t.requests {
        match e {
            Entry::NonStreaming(r) | Entry::Streaming(r) => f(r),
            Entry::Subagent(sa) => {
                sa.t *= d;
                sa.duration_ms = sa.duration_ms.map(|x| x * d);
                for ir in &mut sa.requests {
                    match ir {
                        InnerRequest::NonStreaming(r) | InnerRequest::Streaming(r) => f(r),
                    }
                }
            }
        }
    }
    t
}

/// Compiles one trace for replay with workload scales applied; the delay cap bounds each
/// compiled end-to-start delay (a cap on recorded time would move later turns of other streams).
pub fn compile_one(t: &Trace, s: WorkloadScales, seed: u64) -> Result<TracePlan, String> {
    let mut p = if s.is_identity() { TracePlan::build(t, seed) } else { TracePlan::build(&scale_trace(t, s), seed) }?;
    if let Some(cap) = s.delay_cap_s {
        let cap_ns = (cap.max(0.0) * 1e9).round() as u64;
        for st in &mut p.streams {
            for turn in &mut st.turns {
                turn.delay_ns = turn.delay_ns.min(cap_ns);
            }
        }
    }
    Ok(p)
}

/// Reads and compiles a trace set as recorded, keeping only the compact plans: the published
/// corpus is 1.8 GB of JSON whose hash ids alone take 2.7 GB as traces, its plans a few hundred
/// MB. A Weka JSONL file is parsed and compiled `jobs` lines at a time in parallel (parsing is
/// most of a load); plans keep file order. Returns the plans and how many traces were read.
pub fn load_pool(spec: &str, seed: u64, jobs: usize) -> Result<(Vec<Arc<TracePlan>>, usize), FitError> {
    let bad = |message: String| FitError::Traces { spec: spec.into(), message };
    let path = Path::new(spec);
    let jsonl = path.is_file() && !spec.trim_end_matches(".gz").ends_with(".json");
    let (mut pool, mut read) = (Vec::new(), 0usize);
    if jsonl && jobs > 1 {
        use std::io::BufRead;
        let mut reader = crate::trace::read::open_maybe_gz(path).map_err(|e| bad(e.to_string()))?;
        let mut lineno = 0usize;
        loop {
            let mut batch: Vec<(usize, String)> = Vec::with_capacity(jobs * 2);
            while batch.len() < jobs * 2 {
                let mut line = String::new();
                if reader.read_line(&mut line).map_err(|e| bad(e.to_string()))? == 0 {
                    break;
                }
                lineno += 1;
                if !line.trim().is_empty() {
                    batch.push((lineno, line));
                }
            }
            if batch.is_empty() {
                break;
            }
            if read == 0 && !batch[0].1.contains("\"requests\"") {
                // Not Weka (mooncake rows are grouped across lines): the plain reader.
                return load_pool(spec, seed, 1);
            }
            let parsed = parallel_map(jobs, batch.len(), |i| {
                crate::trace::read::parse_weka(spec, batch[i].0, &batch[i].1).map(|t| TracePlan::build(&t, seed).ok())
            });
            for p in parsed {
                read += 1;
                if let Some(p) = p.map_err(|e| bad(e.to_string()))? {
                    pool.push(Arc::new(p));
                }
            }
        }
    } else {
        let source: TraceSource = spec.parse().map_err(|e: String| bad(e))?;
        source
            .for_each(&ReadOptions::default(), &mut Vec::new(), |t| {
                read += 1;
                if let Ok(p) = TracePlan::build(&t, seed) {
                    pool.push(Arc::new(p));
                }
                Ok(())
            })
            .map_err(|e| bad(e.to_string()))?;
    }
    if pool.is_empty() {
        return Err(bad("no trace".into()));
    }
    Ok((pool, read))
}

/// Compiles a trace set for replay with workload scales applied.
pub fn compile(traces: &[Trace], s: WorkloadScales, seed: u64) -> Vec<Arc<TracePlan>> {
    traces.iter().filter_map(|t| compile_one(t, s, seed).ok()).map(Arc::new).collect()
}

/// Runs one plan point on the virtual clock with an explicit hardware profile; its summary.
pub fn simulate_point(
    point: &PlanPoint,
    gpu: &GpuSpec,
    model: Option<&str>,
    pool: &[Arc<TracePlan>],
    seed: u64,
    duration_s: Option<f64>,
) -> Result<Summary, String> {
    simulate_point_timed(point, gpu, model, pool, seed, duration_s).0
}

/// [`simulate_point`] with the seconds spent in its three stages: setup (engine, trace filter,
/// workload), replay on the virtual clock, and the aggregate.
pub fn simulate_point_timed(
    point: &PlanPoint,
    gpu: &GpuSpec,
    model: Option<&str>,
    pool: &[Arc<TracePlan>],
    seed: u64,
    duration_s: Option<f64>,
) -> (Result<Summary, String>, [f64; 3]) {
    let mut t = [0.0; 3];
    let t0 = std::time::Instant::now();
    let setup = || -> Result<Engine, String> {
        let launch = point.launch.as_ref().ok_or("point has no resolved server command")?;
        let flags_only = crate::targets::sim::flags_only;
        let mut cfg = EngineConfig::from_args(flags_only(&launch.worker_argv), &launch.env).map_err(|e| e.to_string())?;
        if let Some(r) = &launch.router_argv {
            cfg = cfg.with_router_args(flags_only(r)).map_err(|e| e.to_string())?;
        }
        let name = model
            .map(str::to_string)
            .or_else(|| cfg.model_path.clone())
            .or_else(|| point.row.get("model").and_then(Value::as_str).map(str::to_string))
            .ok_or("no model profile: pass --model")?;
        let m = ModelSpec::lookup(&name).map_err(|e| e.to_string())?;
        Engine::new(cfg, m, gpu.clone(), seed).map_err(|e| e.to_string())
    };
    let mut engine = match setup() {
        Ok(x) => x,
        Err(e) => return (Err(e), t),
    };
    t[0] = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let ctx = PointContext {
        identity: crate::run::identity(point),
        num_gpus: point.gpus.max(1),
        result_kind: "predicted".into(),
        seed,
        concurrency: point.conc,
        ..Default::default()
    };
    let cfg = crate::targets::sim::workload_config(point, seed, duration_s);
    let out = crate::targets::sim::run_point(&mut engine, pool, cfg, ctx, &AtomicBool::new(false), |_| {});
    t[1] = t1.elapsed().as_secs_f64();
    let t2 = std::time::Instant::now();
    let r = if out.status != Status::Done {
        Err(format!("{:?}", out.status))
    } else {
        match crate::metrics::aggregate(&out.records, &out.ctx) {
            Err(e) => Err(e.to_string()),
            Ok((_, s)) if s.requests_ok == 0 => Err("no successful request".into()),
            Ok((_, s)) => Ok(s),
        }
    };
    t[2] = t2.elapsed().as_secs_f64();
    (r, t)
}

/// The pool read from the `k`-th of `orders` evenly spaced starting traces. AgentX hands traces
/// to lanes in file order, so a low-concurrency point replays only the first few sessions
/// (TP4 c1: about 7 in an hour); other orders are other, equally likely samples of the set.
pub fn rotated(pool: &[Arc<TracePlan>], k: usize, orders: usize) -> Vec<Arc<TracePlan>> {
    if pool.is_empty() || orders <= 1 {
        return pool.to_vec();
    }
    let off = (k % orders) * pool.len() / orders;
    pool[off..].iter().chain(&pool[..off]).cloned().collect()
}

/// The mean of every compared metric over several summaries of one point (other fields: the
/// first summary's).
pub fn mean_summary(v: &[Summary]) -> Option<Summary> {
    let mut out = v.first()?.clone();
    let n = v.len() as f64;
    let mean = |f: &dyn Fn(&Summary) -> f64| v.iter().map(f).sum::<f64>() / n;
    out.tput_per_gpu = mean(&|s| s.tput_per_gpu);
    out.e2el.p75 = mean(&|s| s.e2el.p75);
    out.e2el.p90 = mean(&|s| s.e2el.p90);
    out.intvty_p90 = mean(&|s| s.intvty_p90);
    out.ttft.p50 = mean(&|s| s.ttft.p50);
    out.ttft.p90 = mean(&|s| s.ttft.p90);
    out.ttft.p99 = mean(&|s| s.ttft.p99);
    out.requests_ok = v.iter().map(|s| s.requests_ok).sum();
    out.requests_error = v.iter().map(|s| s.requests_error).sum();
    Some(out)
}

/// [`simulate_point`] over `orders` trace orders ([`rotated`]), each compared metric averaged;
/// any failed order fails the point.
pub fn simulate_point_orders(
    point: &PlanPoint,
    gpu: &GpuSpec,
    model: Option<&str>,
    pool: &[Arc<TracePlan>],
    seed: u64,
    duration_s: Option<f64>,
    orders: usize,
) -> Result<Summary, String> {
    let orders = orders.max(1);
    let mut v = Vec::with_capacity(orders);
    for k in 0..orders {
        v.push(simulate_point(point, gpu, model, &rotated(pool, k, orders), seed, duration_s)?);
    }
    mean_summary(&v).ok_or_else(|| "no trace order".to_string())
}

/// What a fit replays: the measured points with their plan points, the trace set and settings.
pub struct FitProblem {
    pub points: Vec<(PlanPoint, MeasuredPoint)>,
    /// The trace set as read, for candidates that change the workload (may be empty when no
    /// workload scale is fitted: the recorded pool in `cache` is then all a fit needs).
    pub traces: Vec<Trace>,
    /// Description of the trace set (recorded in the profile).
    pub trace_set: String,
    pub model: Option<String>,
    pub base: GpuSpec,
    pub base_scales: WorkloadScales,
    pub seed: u64,
    /// Profiling seconds per point (None: the plan's).
    pub duration_s: Option<f64>,
    /// Simulations run at once.
    pub jobs: usize,
    /// Loss weight of each metric.
    pub weights: BTreeMap<Metric, f64>,
    /// Trace orders each point is replayed with, its metrics averaged ([`simulate_point_orders`]).
    pub orders: usize,
    /// What evaluations reuse, and where their time goes.
    pub cache: FitCache,
}

/// What a fit keeps between evaluations: the compiled trace set, the evaluations already made,
/// and counters of where the time goes.
#[derive(Default)]
pub struct FitCache {
    /// The trace set compiled as recorded (scales 1), reused by every candidate that does not
    /// change the workload; set up front when the traces were compiled while reading.
    pub recorded_pool: std::sync::OnceLock<Vec<Arc<TracePlan>>>,
    /// Evaluations by candidate ([`Candidate::key`]): Nelder–Mead clamps trial points onto the
    /// box's faces and restarts revisit points, and a repeat costs nothing.
    memo: Mutex<std::collections::HashMap<Vec<u64>, Evaluation>>,
    pub timings: FitTimings,
}

impl FitCache {
    /// A cache whose recorded pool is already compiled ([`load_pool`]).
    pub fn with_pool(pool: Vec<Arc<TracePlan>>) -> Self {
        let c = FitCache::default();
        c.recorded_pool.set(pool).expect("a fresh cache has no pool");
        c
    }
}

/// Counters of a fit (`sweep calibrate fit --timings`).
#[derive(Debug, Default)]
pub struct FitTimings {
    /// Candidates asked for, answered from the memo, and stopped early (loss bound exceeded).
    pub candidates: std::sync::atomic::AtomicU64,
    pub memo_hits: std::sync::atomic::AtomicU64,
    pub pruned: std::sync::atomic::AtomicU64,
    /// Trace sets compiled for workload-scaled candidates, and their seconds.
    pub compiles: Mutex<(u64, f64)>,
    /// Per point (problem order): simulations run and seconds of setup, replay and aggregate.
    pub points: Mutex<BTreeMap<usize, PointTiming>>,
}

/// Simulations of one point and their seconds by stage (summed over threads: CPU time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PointTiming {
    pub sims: u64,
    pub setup_s: f64,
    pub replay_s: f64,
    pub aggregate_s: f64,
}

impl FitTimings {
    fn add(&self, point: usize, t: [f64; 3]) {
        let mut m = self.points.lock().expect("lock");
        let e = m.entry(point).or_default();
        e.sims += 1;
        e.setup_s += t[0];
        e.replay_s += t[1];
        e.aggregate_s += t[2];
    }

    /// Simulations run so far, over all points.
    pub fn simulations(&self) -> u64 {
        self.points.lock().expect("lock").values().map(|p| p.sims).sum()
    }

    /// A Markdown table of the counters.
    pub fn table(&self, points: &[(PlanPoint, MeasuredPoint)]) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let compiles = *self.compiles.lock().expect("lock");
        let mut o = format!(
            "candidates {}, answered from the memo {}, stopped early {}; trace sets compiled {} ({:.1} s)\n\n| point | simulations | setup s | replay s | aggregate s | s per simulation |\n|---|---:|---:|---:|---:|---:|\n",
            self.candidates.load(Relaxed),
            self.memo_hits.load(Relaxed),
            self.pruned.load(Relaxed),
            compiles.0,
            compiles.1,
        );
        for (i, t) in self.points.lock().expect("lock").iter() {
            let id = points.get(*i).map_or("?", |(p, _)| p.id.rsplit('/').next().unwrap_or(&p.id));
            let all = t.setup_s + t.replay_s + t.aggregate_s;
            o.push_str(&format!(
                "| {id} | {} | {:.2} | {:.2} | {:.2} | {:.3} |\n",
                t.sims,
                t.setup_s,
                t.replay_s,
                t.aggregate_s,
                all / (t.sims.max(1) as f64)
            ));
        }
        o
    }
}

/// What an evaluation replays at: a profiling duration and the targets its loss compares with
/// (`tag` tells levels apart in the memo).
struct Level<'a> {
    tag: u64,
    duration_s: Option<f64>,
    targets: &'a [(PlanPoint, MeasuredPoint)],
}

/// The measured targets moved by the ratio short / full of one candidate's replays: a search at
/// the short duration against them aims where the full duration meets the measurements, as long
/// as that ratio (mostly the workload's: contexts grow over a session) changes slowly with the
/// parameters. A metric that failed at either level keeps its measured value.
pub fn corrected_targets(points: &[(PlanPoint, MeasuredPoint)], full: &Evaluation, short: &Evaluation) -> Vec<(PlanPoint, MeasuredPoint)> {
    points
        .iter()
        .zip(full.summaries.iter().zip(&short.summaries))
        .map(|((p, m), (f, s))| {
            let mut m = m.clone();
            if let (Ok(f), Ok(s)) = (f, s) {
                for (k, v) in m.metrics.iter_mut() {
                    let r = k.of(s) / k.of(f);
                    if r.is_finite() && r > 0.0 {
                        *v *= r;
                    }
                }
            }
            (p.clone(), m)
        })
        .collect()
}

/// Per-point results of one candidate.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// The loss; when `complete` is false, a lower bound of it (the points not simulated would
    /// only add to it).
    pub loss: f64,
    pub summaries: Vec<Result<Summary, String>>,
    /// Every point was simulated.
    pub complete: bool,
}

/// A point's share of the loss numerator (the sum over its measured metrics of w · ln²), and
/// the weights it adds to the denominator.
fn point_loss(m: &MeasuredPoint, s: &Result<Summary, String>, weights: &BTreeMap<Metric, f64>) -> (f64, f64) {
    let (mut num, mut den) = (0.0, 0.0);
    for (metric, meas) in &m.metrics {
        let w = weights.get(metric).copied().unwrap_or(0.0);
        den += w;
        num += w * match s {
            Ok(s) => {
                let p = metric.of(s);
                if p.is_finite() && p > 0.0 { (p / meas).ln().powi(2) } else { 25.0 }
            }
            Err(_) => 25.0,
        };
    }
    (num, den)
}

/// The loss of per-point summaries against the measured points.
pub fn loss(points: &[(PlanPoint, MeasuredPoint)], summaries: &[Result<Summary, String>], weights: &BTreeMap<Metric, f64>) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for ((_, m), s) in points.iter().zip(summaries) {
        let (n, d) = point_loss(m, s, weights);
        num += n;
        den += d;
    }
    if den > 0.0 { num / den } else { 0.0 }
}

/// `f(0..n)` on `jobs` scoped threads taking indices from a shared counter; results in index order.
fn parallel_map<R: Send>(jobs: usize, n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    if jobs <= 1 || n <= 1 {
        return (0..n).map(f).collect();
    }
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    *slots[i].lock().expect("lock") = Some(f(i));
                }
            });
        }
    });
    slots.into_iter().map(|m| m.into_inner().expect("lock").expect("every index ran")).collect()
}

impl FitProblem {
    /// Evaluates candidates exactly; all (candidate, point, order) simulations share `jobs`
    /// threads.
    pub fn evaluate(&self, cands: &[Candidate]) -> Vec<Evaluation> {
        self.evaluate_bounded(cands, f64::INFINITY)
    }

    /// Evaluates candidates when only losses below `bound` need to be exact: a candidate is
    /// simulated point by point (each point's orders at once) and stops as soon as the points
    /// done already put its loss at or above `bound` (its evaluation is then incomplete and its
    /// loss a lower bound). The points are visited in a fixed order, so the result does not
    /// depend on thread timing. With several candidates, or no finite bound, everything runs at
    /// once.
    pub fn evaluate_bounded(&self, cands: &[Candidate], bound: f64) -> Vec<Evaluation> {
        self.evaluate_at(&self.full_level(), cands, bound)
    }

    /// The level a plain evaluation runs at: the problem's duration and measured targets.
    fn full_level(&self) -> Level<'_> {
        Level { tag: 0, duration_s: self.duration_s, targets: &self.points }
    }

    fn evaluate_at(&self, level: &Level, cands: &[Candidate], bound: f64) -> Vec<Evaluation> {
        use std::sync::atomic::Ordering::Relaxed;
        let t = &self.cache.timings;
        t.candidates.fetch_add(cands.len() as u64, Relaxed);
        let keys: Vec<Vec<u64>> = cands
            .iter()
            .map(|c| {
                let mut k = c.key();
                k.push(level.tag);
                k
            })
            .collect();
        let mut out: Vec<Option<Evaluation>> = {
            let memo = self.cache.memo.lock().expect("lock");
            keys.iter().map(|k| memo.get(k).filter(|e| e.complete || e.loss >= bound).cloned()).collect()
        };
        t.memo_hits.fetch_add(out.iter().filter(|e| e.is_some()).count() as u64, Relaxed);
        let todo: Vec<usize> = (0..cands.len()).filter(|&i| out[i].is_none()).collect();
        if todo.is_empty() {
            return out.into_iter().map(|e| e.expect("answered")).collect();
        }
        let fresh: Vec<Evaluation> = if todo.len() == 1 && bound.is_finite() && self.points.len() > 1 {
            vec![self.evaluate_staged(level, &cands[todo[0]], bound)]
        } else {
            let sel: Vec<&Candidate> = todo.iter().map(|&i| &cands[i]).collect();
            self.evaluate_all(level, &sel)
        };
        let mut memo = self.cache.memo.lock().expect("lock");
        for (i, e) in todo.into_iter().zip(fresh) {
            memo.insert(keys[i].clone(), e.clone());
            out[i] = Some(e);
        }
        out.into_iter().map(|e| e.expect("answered")).collect()
    }

    /// The trace pool of a candidate: the shared recorded pool, or its own scaled compile.
    fn pool(&self, c: &Candidate) -> Vec<Arc<TracePlan>> {
        if c.scales.is_identity() {
            return self.cache.recorded_pool.get_or_init(|| compile(&self.traces, WorkloadScales::default(), self.seed)).clone();
        }
        let t0 = std::time::Instant::now();
        let p = compile(&self.traces, c.scales, self.seed);
        let mut cs = self.cache.timings.compiles.lock().expect("lock");
        cs.0 += 1;
        cs.1 += t0.elapsed().as_secs_f64();
        p
    }

    /// One simulation: candidate `c`'s point `p` from trace order `k`.
    fn simulate(&self, level: &Level, c: &Candidate, pool: &[Arc<TracePlan>], p: usize, k: usize) -> Result<Summary, String> {
        let orders = self.orders.max(1);
        let (r, t) =
            simulate_point_timed(&self.points[p].0, &c.gpu, self.model.as_deref(), &rotated(pool, k, orders), self.seed, level.duration_s);
        self.cache.timings.add(p, t);
        r
    }

    /// The mean over orders of one point's simulations (any failed order fails the point).
    fn combine(runs: Vec<Result<Summary, String>>) -> Result<Summary, String> {
        let v = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
        mean_summary(&v).ok_or_else(|| "no trace order".to_string())
    }

    /// Every (candidate, point, order) simulation at once.
    fn evaluate_all(&self, level: &Level, cands: &[&Candidate]) -> Vec<Evaluation> {
        let jobs = self.jobs.max(1);
        let pools: Vec<Vec<Arc<TracePlan>>> = parallel_map(jobs, cands.len(), |i| self.pool(cands[i]));
        let (n, o) = (self.points.len(), self.orders.max(1));
        let mut flat = parallel_map(jobs, cands.len() * n * o, |t| {
            let (c, p, k) = (t / (n * o), t / o % n, t % o);
            self.simulate(level, cands[c], &pools[c], p, k)
        })
        .into_iter();
        cands
            .iter()
            .map(|_| {
                let summaries: Vec<_> = (0..n).map(|_| Self::combine(flat.by_ref().take(o).collect())).collect();
                Evaluation { loss: loss(level.targets, &summaries, &self.weights), summaries, complete: true }
            })
            .collect()
    }

    /// One candidate, point by point (see [`FitProblem::evaluate_bounded`]).
    fn evaluate_staged(&self, level: &Level, c: &Candidate, bound: f64) -> Evaluation {
        let pool = self.pool(c);
        let o = self.orders.max(1);
        let den: f64 =
            level.targets.iter().map(|(_, m)| m.metrics.keys().map(|k| self.weights.get(k).copied().unwrap_or(0.0)).sum::<f64>()).sum();
        let mut summaries: Vec<Result<Summary, String>> = vec![Err("not simulated: the loss bound was reached".into()); self.points.len()];
        let mut num = 0.0;
        for (done, p) in self.stage_order().into_iter().enumerate() {
            let runs = parallel_map(self.jobs.max(1), o, |k| self.simulate(level, c, &pool, p, k));
            summaries[p] = Self::combine(runs);
            num += point_loss(&level.targets[p].1, &summaries[p], &self.weights).0;
            let lb = if den > 0.0 { num / den } else { 0.0 };
            if done + 1 < self.points.len() && lb >= bound {
                self.cache.timings.pruned.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Evaluation { loss: lb, summaries, complete: false };
            }
        }
        Evaluation { loss: loss(level.targets, &summaries, &self.weights), summaries, complete: true }
    }

    /// The order in which a bounded evaluation visits the points: lowest concurrency first, the
    /// cheapest simulations (fewest requests in flight), so a hopeless candidate is found out
    /// before the expensive points run.
    pub fn stage_order(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.points.len()).collect();
        v.sort_by_key(|&i| (self.points[i].0.conc, i));
        v
    }

    fn base_candidate(&self) -> Candidate {
        Candidate { gpu: self.base.clone(), scales: self.base_scales }
    }
}

/// Settings of the search.
#[derive(Clone, Debug)]
pub struct FitOptions {
    pub params: Vec<Param>,
    pub restarts: u32,
    /// Evaluations per restart.
    pub max_evals: usize,
    pub seed: u64,
    /// Start values of the first restart (default: the base profile's).
    pub start: Vec<(String, f64)>,
    /// A two-level search: restarts at a shorter duration, then a polish at the full one.
    pub coarse: Option<CoarseOptions>,
}

/// The coarse pass of a two-level fit. Simulation cost grows linearly with the duration, so the
/// restarts run at `duration_s` against targets corrected by the start point's short / full
/// ratio ([`corrected_targets`]), then one Nelder–Mead at the full duration starts from the
/// coarse optimum with a small simplex (`polish_step`) for `polish_evals` evaluations. Only
/// full-duration evaluations can become the result.
#[derive(Clone, Copy, Debug)]
pub struct CoarseOptions {
    pub duration_s: f64,
    pub polish_evals: usize,
    pub polish_step: f64,
}

/// A finished fit.
#[derive(Clone, Debug)]
pub struct FitOutcome {
    pub best: Candidate,
    pub evaluation: Evaluation,
    /// The base profile's evaluation (for the before / after table).
    pub base_evaluation: Evaluation,
    pub evaluations: u64,
    /// Best loss of each restart (a two-level fit: each coarse restart's, then the polish's).
    pub restart_losses: Vec<f64>,
    /// Evaluations at the coarse duration and at the full one, of a two-level fit.
    pub coarse_evaluations: Option<(u64, u64)>,
}

/// Runs the search: restart 0 starts from the base profile, later restarts alternately from a
/// seeded random point of the box and from the best point so far with a seeded jolt.
/// `progress(evals_done, best_loss)` is called after every batch.
pub fn fit(problem: &FitProblem, opts: &FitOptions, mut progress: impl FnMut(u64, f64)) -> FitOutcome {
    let base = problem.base_candidate();
    let base_evaluation = problem.evaluate(std::slice::from_ref(&base)).remove(0);
    let to_cand = |u: &[f64]| {
        let mut c = base.clone();
        for (p, x) in opts.params.iter().zip(u) {
            c.set(p.name, from_unit(p, *x));
        }
        c
    };
    let u0: Vec<f64> = opts
        .params
        .iter()
        .map(|p| to_unit(p, opts.start.iter().find(|(n, _)| n == p.name).map_or_else(|| base.get(p.name), |(_, v)| *v)))
        .collect();
    let full = problem.full_level();
    // The best full-level evaluation (the result), and evaluation counts (all, at full duration).
    let best = std::cell::RefCell::new((base_evaluation.loss, base_evaluation.clone(), u0.clone()));
    let (evals, full_evals) = (std::cell::Cell::new(1u64), std::cell::Cell::new(1u64));
    let mut restart_losses = Vec::new();
    let mut rng = engine::rng::Rng::new(opts.seed);
    progress(1, base_evaluation.loss);
    let mut offer = |level: &Level, xs: &[Vec<f64>], ev: &[Evaluation], search_best: &mut (f64, Vec<f64>)| {
        evals.set(evals.get() + xs.len() as u64);
        if level.tag == 0 {
            full_evals.set(full_evals.get() + xs.len() as u64);
        }
        let mut b = best.borrow_mut();
        for (u, e) in xs.iter().zip(ev) {
            if e.complete && e.loss < search_best.0 {
                *search_best = (e.loss, u.clone());
            }
            if level.tag == 0 && e.complete && e.loss < b.0 {
                *b = (e.loss, e.clone(), u.clone());
            }
        }
        progress(evals.get(), b.0);
    };
    // One Nelder–Mead at `level`; full-level evaluations compete for the result.
    let mut search = |level: &Level, start: &[f64], max_evals: usize, step: f64, search_best: &mut (f64, Vec<f64>)| {
        nelder_mead::minimize(
            |xs: &[Vec<f64>], bound: f64| {
                let cands: Vec<Candidate> = xs.iter().map(|u| to_cand(u)).collect();
                let ev = problem.evaluate_at(level, &cands, bound);
                offer(level, xs, &ev, search_best);
                ev.iter().map(|e| e.loss).collect()
            },
            start,
            nelder_mead::Options { max_evals, step, ..Default::default() },
        )
    };
    let restart_start = |r: u32, rng: &mut engine::rng::Rng, best_u: &[f64]| -> Vec<f64> {
        match r {
            0 => u0.clone(),
            r if r % 2 == 1 => opts.params.iter().map(|_| rng.next_f64()).collect(),
            _ => best_u.iter().map(|u| (u + (rng.next_f64() - 0.5) * 0.3).clamp(0.0, 1.0)).collect(),
        }
    };
    let step = nelder_mead::Options::default().step;
    let coarse_evaluations = match opts.coarse {
        None => {
            let mut sb = (f64::INFINITY, u0.clone());
            for r in 0..opts.restarts.max(1) {
                let start = restart_start(r, &mut rng, &sb.1);
                restart_losses.push(search(&full, &start, opts.max_evals, step, &mut sb).f);
            }
            None
        }
        Some(c) => {
            // Anchor: the start point at both durations gives the target correction.
            let (e0, fe0) = (evals.get(), full_evals.get());
            let c0 = vec![to_cand(&u0)];
            let f0 = problem.evaluate_at(&full, &c0, f64::INFINITY);
            let raw = Level { tag: 1, duration_s: Some(c.duration_s), targets: &problem.points };
            let s0 = problem.evaluate_at(&raw, &c0, f64::INFINITY);
            evals.set(evals.get() + 2);
            full_evals.set(full_evals.get() + 1);
            if f0[0].complete && f0[0].loss < best.borrow().0 {
                *best.borrow_mut() = (f0[0].loss, f0[0].clone(), u0.clone());
            }
            let targets = corrected_targets(&problem.points, &f0[0], &s0[0]);
            let coarse = Level { tag: 2, duration_s: Some(c.duration_s), targets: &targets };
            let mut sb = (f64::INFINITY, u0.clone());
            for r in 0..opts.restarts.max(1) {
                let start = restart_start(r, &mut rng, &sb.1);
                restart_losses.push(search(&coarse, &start, opts.max_evals, step, &mut sb).f);
            }
            let mut pb = (f64::INFINITY, sb.1.clone());
            restart_losses.push(search(&full, &sb.1, c.polish_evals, c.polish_step, &mut pb).f);
            let full_n = full_evals.get() - fe0;
            Some((evals.get() - e0 - full_n, full_n))
        }
    };
    let (_, evaluation, best_u) = best.into_inner();
    FitOutcome { best: to_cand(&best_u), evaluation, base_evaluation, evaluations: evals.get(), restart_losses, coarse_evaluations }
}

/// Per-point residual records of an evaluation.
pub fn fit_points(points: &[(PlanPoint, MeasuredPoint)], ev: &Evaluation, weights: &BTreeMap<Metric, f64>) -> Vec<FitPoint> {
    points
        .iter()
        .zip(&ev.summaries)
        .map(|((p, m), s)| FitPoint {
            id: p.id.clone(),
            arm: p.arm.clone(),
            conc: p.conc,
            metrics: m
                .metrics
                .iter()
                .map(|(k, meas)| {
                    let pred = s.as_ref().map(|s| k.of(s)).unwrap_or(f64::NAN);
                    (
                        k.key().to_string(),
                        FitResidual {
                            measured: *meas,
                            predicted: pred,
                            residual_pct: residual_pct(*meas, pred),
                            weight: weights.get(k).copied().unwrap_or(0.0),
                        },
                    )
                })
                .collect(),
        })
        .collect()
}

/// Settings recorded in the fitted profile.
pub struct FitProvenance {
    pub name: String,
    pub aliases: Vec<String>,
    pub config_key: String,
    pub model_profile: String,
    pub results: String,
    pub restarts: u32,
    pub wall_s: f64,
    /// How a synthesized trace set is regenerated.
    pub corpus: Option<CorpusRecord>,
}

/// The fitted hardware profile: the base profile's datasheet, the fitted cost parameters and
/// the fit record.
pub fn fitted_profile(problem: &FitProblem, opts: &FitOptions, out: &FitOutcome, prov: &FitProvenance) -> GpuSpec {
    let mut g = out.best.gpu.clone();
    g.name = prov.name.clone();
    g.aliases = prov.aliases.clone();
    g.cost.calibrated = true;
    let base = problem.base_candidate();
    g.fit = Some(FitRecord {
        config_key: prov.config_key.clone(),
        model_profile: prov.model_profile.clone(),
        base_profile: problem.base.name.clone(),
        results: prov.results.clone(),
        traces: problem.trace_set.clone(),
        trace_orders: problem.orders.max(1) as u32,
        workload: out.best.scales,
        seed: problem.seed,
        duration_s: problem.duration_s.unwrap_or(3600.0),
        restarts: prov.restarts,
        evaluations: out.evaluations,
        wall_s: (prov.wall_s * 10.0).round() / 10.0,
        loss: out.evaluation.loss,
        loss_definition: loss_definition(&problem.weights),
        parameters: opts
            .params
            .iter()
            .map(|p| {
                (p.name.to_string(), FitParameter { value: out.best.get(p.name), lower: p.lower, upper: p.upper, start: base.get(p.name) })
            })
            .collect(),
        points: fit_points(&problem.points, &out.evaluation, &problem.weights),
        corpus: prov.corpus.clone(),
        coarse: match (opts.coarse, out.coarse_evaluations) {
            (Some(c), Some((e, f))) => Some(CoarseRecord { duration_s: c.duration_s, evaluations: e, full_evaluations: f }),
            _ => None,
        },
    });
    g
}

/// The profile as YAML with a header saying what it is.
pub fn profile_yaml(g: &GpuSpec) -> Result<String, String> {
    let body = crate::yaml::to_string(g).map_err(|e| e.to_string())?;
    let f = g.fit.as_ref();
    let header = format!(
        "# Hardware profile FITTED by `sweep calibrate fit` to measured serving results: {} on {} (config {}),\n\
         # traces {}, seed {}. datasheet: the base profile's published facts (unchanged); cost: fitted\n\
         # parameters; fit: the points, loss and per-point residuals. Results predicted with it are\n\
         # `predicted` and name this profile.\n",
        f.map_or("?", |f| f.results.as_str()),
        f.map_or("?", |f| f.base_profile.as_str()),
        f.map_or("?", |f| f.config_key.as_str()),
        f.map_or("?", |f| f.traces.as_str()),
        f.map_or(0, |f| f.seed),
    );
    Ok(header + &body)
}

/// Markdown table of a fit: per point and metric, measured, base profile, fitted, residual.
pub fn fit_table(points: &[(PlanPoint, MeasuredPoint)], base: &Evaluation, fitted: &Evaluation) -> String {
    let mut o = String::from(
        "| point | metric | measured | datasheet profile | residual | fitted profile | residual |\n|---|---|---:|---:|---:|---:|---:|\n",
    );
    for (i, (p, m)) in points.iter().enumerate() {
        for (k, meas) in &m.metrics {
            let b = base.summaries[i].as_ref().map(|s| k.of(s)).unwrap_or(f64::NAN);
            let f = fitted.summaries[i].as_ref().map(|s| k.of(s)).unwrap_or(f64::NAN);
            o.push_str(&format!(
                "| {} | {} ({}) | {} | {} | {:+.1} % | {} | {:+.1} % |\n",
                p.id.rsplit('/').next().unwrap_or(&p.id),
                k.key(),
                k.unit(),
                fmt(*meas),
                fmt(b),
                residual_pct(*meas, b),
                fmt(f),
                residual_pct(*meas, f)
            ));
        }
    }
    o
}

/// Numbers for tables: thousands separators for large values, 3 significant-ish digits for small.
pub fn fmt(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 1000.0 {
        crate::gate::fmt_num(x)
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_mapping_round_trips_and_stays_in_bounds() {
        for p in PARAMS {
            for v in [p.lower, (p.lower * p.upper).sqrt(), p.upper] {
                let u = to_unit(p, v);
                assert!((from_unit(p, u) - v).abs() <= 1e-9 * v.max(1.0), "{} {v}", p.name);
            }
            assert_eq!(from_unit(p, -1.0), p.lower);
            assert!((from_unit(p, 2.0) - p.upper).abs() < 1e-9);
        }
    }

    /// One point `k/a-c1` measured at 100 tok/s/GPU and E2EL p90 2 s.
    fn one_point() -> (PlanPoint, MeasuredPoint) {
        let pp = PlanPoint {
            id: "k/a-c1".into(),
            config_key: "k".into(),
            arm: "a".into(),
            conc: 1,
            gpus: 1,
            scenario: crate::plan::matrix::Scenario::AgenticCoding,
            matrix: "m".into(),
            duration_s: None,
            warmup_per_lane: None,
            row: Default::default(),
            launch: None,
        };
        let m = MeasuredPoint {
            arm: "a".into(),
            conc: 1,
            id: None,
            metrics: [(Metric::TputPerGpu, 100.0), (Metric::E2elP90, 2.0)].into_iter().collect(),
        };
        (pp, m)
    }

    #[test]
    fn corrected_targets_move_each_metric_by_the_short_to_full_ratio() {
        let (pp, m) = one_point();
        let mut full = Summary { tput_per_gpu: 80.0, ..Default::default() };
        full.e2el.p90 = 4.0;
        let mut short = Summary { tput_per_gpu: 40.0, ..Default::default() };
        short.e2el.p90 = 5.0;
        let ev = |s: Summary| Evaluation { loss: 0.0, summaries: vec![Ok(s)], complete: true };
        let pts = vec![(pp, m)];
        let t = corrected_targets(&pts, &ev(full.clone()), &ev(short.clone()));
        assert_eq!(t[0].1.metrics[&Metric::TputPerGpu], 50.0);
        assert_eq!(t[0].1.metrics[&Metric::E2elP90], 2.5);
        // The short replay meets the corrected targets exactly where the full one meets the
        // measurements: the same loss.
        let w = default_weights();
        assert!((loss(&t, &[Ok(short)], &w) - loss(&pts, &[Ok(full)], &w)).abs() < 1e-12);
        let failed = Evaluation { loss: 25.0, summaries: vec![Err("x".into())], complete: true };
        assert_eq!(corrected_targets(&pts, &failed, &ev(Summary::default()))[0].1, pts[0].1);
    }

    #[test]
    fn loss_is_zero_on_a_perfect_match_and_grows_with_the_ratio() {
        let mut s = Summary { tput_per_gpu: 100.0, ..Default::default() };
        s.e2el.p90 = 2.0;
        let pts = vec![one_point()];
        let w = default_weights();
        assert_eq!(loss(&pts, &[Ok(s.clone())], &w), 0.0);
        let mut s2 = s.clone();
        s2.tput_per_gpu = 200.0;
        let l = loss(&pts, &[Ok(s2)], &w);
        assert!((l - 2f64.ln().powi(2) / 2.0).abs() < 1e-12, "{l}");
        assert_eq!(loss(&pts, &[Err("x".into())], &w), 25.0);
        let only_tput = parse_weights(&["e2el_p90=0".to_string()]).unwrap();
        assert!((loss(&pts, &[Ok(s.clone())], &only_tput)).abs() < 1e-12);
        assert!(parse_weights(&["nope=1".to_string()]).is_err());
    }

    #[test]
    fn scaling_a_trace_scales_outputs_and_delays() {
        let src: TraceSource = "synthetic:2:3".parse().unwrap();
        let mut ts = Vec::new();
        src.for_each(&ReadOptions::default(), &mut Vec::new(), |t| {
            ts.push(t);
            Ok(())
        })
        .unwrap();
        let t = &ts[0];
        let s = scale_trace(t, WorkloadScales { osl_scale: 3.0, delay_scale: 0.5, ..Default::default() });
        let (a, b) = (t.main_requests().nth(1).unwrap(), s.main_requests().nth(1).unwrap());
        assert_eq!(b.output_tokens, ((a.output_tokens as f64) * 3.0).round() as u64);
        assert!((b.t - a.t * 0.5).abs() < 1e-9);
        assert_eq!(b.input_tokens, a.input_tokens);
        assert_eq!(b.hash_ids, a.hash_ids);
    }

    fn two_synthetic() -> Vec<Trace> {
        let src: TraceSource = "synthetic:2:3".parse().unwrap();
        let mut ts = Vec::new();
        src.for_each(&ReadOptions::default(), &mut Vec::new(), |t| {
            ts.push(t);
            Ok(())
        })
        .unwrap();
        ts
    }

    #[test]
    fn output_exponent_pivots_at_the_reference_length() {
        let s = WorkloadScales { osl_scale: 2.0, osl_exp: 1.5, ..Default::default() };
        assert_eq!(s.osl(1000), 2000);
        assert_eq!(s.osl(4000), 16000, "2 x 1000 x 4^1.5");
        assert_eq!(s.osl(250), 250, "2 x 1000 x 0.25^1.5");
        assert_eq!(s.osl(0), 1);
        // Exponent 1 is plain proportional scaling.
        assert_eq!(WorkloadScales { osl_scale: 2.5, ..Default::default() }.osl(333), 833);
        assert!(!s.is_identity() && WorkloadScales::default().is_identity());
        assert!(s.describe().contains("^1.500"), "{}", s.describe());
    }

    #[test]
    fn input_scaling_keeps_blocks_and_prefix_reuse() {
        let t = &two_synthetic()[0];
        let s = scale_trace(t, WorkloadScales { isl_scale: 1.5, ..Default::default() });
        assert_eq!((s.block_size, t.block_size), (96, 64));
        for (a, b) in t.main_requests().zip(s.main_requests()) {
            assert_eq!(b.input_tokens, ((a.input_tokens as f64) * 1.5).round() as u64);
            assert_eq!(b.hash_ids, a.hash_ids);
            assert_eq!(b.output_tokens, a.output_tokens);
            assert_eq!(b.t, a.t);
        }
        // The factor is whole tokens per block: 64 x 1.01 rounds to 65.
        assert_eq!(scaled_block(64, 1.01), (65, 65.0 / 64.0));
        // The compiled plan has the same conversations and turns.
        let (p, q) = (TracePlan::build(t, 1).unwrap(), compile_one(t, WorkloadScales { isl_scale: 1.5, ..Default::default() }, 1).unwrap());
        assert_eq!(p.streams.len(), q.streams.len());
        assert_eq!(p.order.len(), q.order.len());
    }

    #[test]
    fn delay_cap_bounds_every_compiled_delay_and_nothing_else() {
        let ts = two_synthetic();
        let cap = 2.0;
        for t in &ts {
            let scales = WorkloadScales { delay_scale: 0.5, delay_cap_s: Some(cap), ..Default::default() };
            let (a, b) =
                (compile_one(t, WorkloadScales { delay_scale: 0.5, ..Default::default() }, 1).unwrap(), compile_one(t, scales, 1).unwrap());
            let mut capped = 0;
            for (sa, sb) in a.streams.iter().zip(&b.streams) {
                for (x, y) in sa.turns.iter().zip(&sb.turns) {
                    assert_eq!(y.delay_ns, x.delay_ns.min(2_000_000_000));
                    assert_eq!((x.t, x.end, x.preds.clone()), (y.t, y.end, y.preds.clone()));
                    capped += usize::from(x.delay_ns > y.delay_ns);
                }
            }
            assert!(capped > 0, "the synthetic traces have delays above {cap} s");
        }
        let mut c = Candidate { gpu: GpuSpec::lookup("gb300").unwrap(), scales: WorkloadScales::default() };
        assert_eq!(c.get("delay_cap_s"), f64::INFINITY);
        let p = param("delay_cap_s").unwrap();
        assert_eq!(from_unit(&p, to_unit(&p, c.get("delay_cap_s"))), p.upper, "no cap searches as the largest cap");
        c.set("delay_cap_s", 3.0);
        assert_eq!(c.scales.delay_cap_s, Some(3.0));
    }
}
