//! `sweep predict --points FILE`: every published point of a file (the schema of
//! `shared/data/published/points.yaml`) built from its server flags and environment, predicted
//! on the virtual clock with the best hardware profile for its GPU and model, and printed beside
//! what was published with the residual of each metric.
//!
//! The metrics are the dashboard's, computed as InferenceX computes them per scenario: for
//! fixed-seq-len points `benchmark_serving`'s (total and output throughput over the benchmark's
//! duration per GPU, mean TTFT, mean TPOT); for AgentX points the agentic aggregate's (throughput
//! per GPU with cached input counted, mean TTFT, and as "TPOT" the aggregate's `tpot`, which
//! InferenceX's agentic aggregation fills with the per-request inter-token latency).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::metrics;
use crate::price::PriceTable;
use crate::published::{self, Compared, PublishedConfig, PublishedPoint};
use crate::targets::published as published_point;
use crate::targets::sim;
use crate::workload::TracePlan;

/// Predicts every point of `path`; prints a table (or `--json`), exits 1 when a point could not
/// be predicted (the reason names the flag or profile).
/// How `sweep predict --points` runs.
#[derive(Clone, Debug)]
pub struct PointsOptions {
    pub json: bool,
    pub seed: u64,
    /// Profiling seconds of an AgentX point.
    pub duration_s: f64,
    pub traces: Option<String>,
    /// A profile name or YAML for every point (`None` or `best`: the best for each point's GPU).
    pub profile: Option<String>,
    /// Prices per GPU-hour (`--prices`): each priced point gets its cost per million tokens.
    pub prices: Option<PriceTable>,
}

pub fn run(path: &Path, o: &PointsOptions) -> anyhow::Result<ExitCode> {
    let file = published::load(path).map_err(|p| anyhow::anyhow!("{p}"))?;
    let mut pools: BTreeMap<String, Arc<Vec<Arc<TracePlan>>>> = BTreeMap::new();
    let mut out = Vec::new();
    for c in &file.configs {
        for p in &c.points {
            let mut row = compared(c, p);
            if let Err(e) = predict(c, p, o, &mut pools, &mut row) {
                row.error = Some(e);
            }
            row.compare();
            if let Some(t) = &o.prices {
                let pair = |m: &BTreeMap<String, f64>| Some((*m.get("tput_total_per_gpu")?, *m.get("tput_out_per_gpu")?));
                row.cost = t.point_cost(&c.hardware, pair(&row.published), pair(&row.predicted));
            }
            if !o.json {
                eprintln!("{}", line(&row));
            }
            out.push(row);
        }
    }
    if o.json {
        crate::outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        crate::out!("{}", table(&out));
    }
    let failed: Vec<&Compared> = out.iter().filter(|r| r.error.is_some()).collect();
    for r in &failed {
        eprintln!("error: {} c{}: {}", r.config, r.conc, r.error.as_deref().unwrap_or_default());
    }
    Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn compared(c: &PublishedConfig, p: &PublishedPoint) -> Compared {
    Compared {
        config: c.key.clone(),
        scenario: c.scenario.clone(),
        conc: p.conc,
        isl: p.isl,
        osl: p.osl,
        gpus: p.gpus.or(c.gpus).unwrap_or(1),
        profile: String::new(),
        profile_residuals: String::new(),
        published: published::METRICS.iter().filter_map(|k| p.metric(k).map(|v| (k.to_string(), v))).collect(),
        predicted: BTreeMap::new(),
        residual_pct: BTreeMap::new(),
        cost: None,
        error: None,
    }
}

/// One point on the virtual clock into `row`; the reason when it cannot be expressed or run.
fn predict(
    c: &PublishedConfig,
    p: &PublishedPoint,
    o: &PointsOptions,
    pools: &mut BTreeMap<String, Arc<Vec<Arc<TracePlan>>>>,
    row: &mut Compared,
) -> Result<(), String> {
    let model = engine::ModelSpec::lookup(&c.model).map_err(|e| format!("model {}: {e}", c.model))?;
    let gpu = match o.profile.as_deref() {
        None | Some("best") => sim::best_for_runner(&c.hardware, Some(&model)).map_err(|e| e.to_string())?,
        Some(name) => engine::GpuSpec::lookup(name).map_err(|e| format!("--profile {name}: {e}"))?,
    };
    row.profile = gpu.name.clone();
    row.profile_residuals = crate::targets::profiles::profile_residuals(&gpu);
    let engine = published_point::engine(c, p, &model, &gpu, o.seed).map_err(|e| e.to_string())?;
    let pool = if c.scenario == "fixed-seq-len" {
        None
    } else {
        let spec = published_point::trace_spec(&model, o.traces.as_deref());
        if !pools.contains_key(&spec) {
            let loaded = crate::targets::pools::load(&spec, o.seed).map_err(|e| e.to_string())?;
            pools.insert(spec.clone(), Arc::new(loaded));
        }
        Some(spec)
    };
    let pool = pool.as_ref().map(|s| (s.as_str(), &pools[s]));
    row.predicted = published_point::simulate(c, p, engine, pool, o.seed, o.duration_s).map_err(|e| e.to_string())?;
    Ok(())
}

fn short(r: &Compared) -> String {
    match (r.isl, r.osl) {
        (Some(i), Some(o)) => format!("{} {i}/{o} c{}", r.config, r.conc),
        _ => format!("{} c{}", r.config, r.conc),
    }
}

/// A progress line per point.
fn line(r: &Compared) -> String {
    match &r.error {
        Some(e) => format!("{}: cannot predict: {e}", short(r)),
        None => format!("{}: predicted with {}", short(r), r.profile),
    }
}

/// Published beside predicted, per metric, with the residual; then the median |residual| per
/// metric and each profile's standing.
pub fn table(rows: &[Compared]) -> String {
    let mut o = String::from("point | profile | tok/s/GPU pub → pred | out tok/s/GPU | TTFT mean ms | TPOT mean ms\n");
    let cell = |r: &Compared, k: &str| match (r.published.get(k), r.predicted.get(k), r.residual_pct.get(k)) {
        (Some(p), Some(q), Some(d)) => format!("{} → {} ({d:+.0} %)", crate::gate::fmt_num(*p), crate::gate::fmt_num(*q)),
        (Some(p), _, _) => format!("{} → –", crate::gate::fmt_num(*p)),
        _ => "–".into(),
    };
    let priced = rows.iter().any(|r| r.cost.is_some());
    if priced {
        o.insert_str(o.len() - 1, " | cost per M output tokens pub → pred");
    }
    for r in rows {
        o.push_str(&format!(
            "{} | {} | {} | {} | {} | {}{}\n",
            short(r),
            if r.profile.is_empty() { "–" } else { &r.profile },
            cell(r, "tput_total_per_gpu"),
            cell(r, "tput_out_per_gpu"),
            cell(r, "ttft_mean_ms"),
            cell(r, "tpot_mean_ms"),
            if priced { format!(" | {}", cost_cell(r)) } else { String::new() }
        ));
    }
    o.push('\n');
    for k in published::METRICS {
        let mut v: Vec<f64> = rows.iter().filter_map(|r| r.residual_pct.get(k)).map(|x| x.abs()).filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        if !v.is_empty() {
            o.push_str(&format!("median |residual| {k}: {:.1} % over {} point(s)\n", metrics::percentile_linear(&v, 0.5), v.len()));
        }
    }
    let mut prices: Vec<String> = Vec::new();
    for c in rows.iter().filter_map(|r| r.cost.as_ref()) {
        let l = format!("price: {} {} per GPU-hour ({})\n", c.per_gpu_hour, c.currency, c.source);
        if !prices.contains(&l) {
            prices.push(l);
        }
    }
    prices.iter().for_each(|l| o.push_str(l));
    let mut seen = Vec::new();
    for r in rows.iter().filter(|r| !r.profile.is_empty()) {
        if !seen.contains(&r.profile) {
            seen.push(r.profile.clone());
            o.push_str(&format!("profile {}: {}\n", r.profile, r.profile_residuals));
        }
    }
    o
}

/// A point's cost per million output tokens, published → predicted (`–` for a side without
/// throughput, `no price` for a GPU the price file does not name).
fn cost_cell(r: &Compared) -> String {
    let Some(c) = &r.cost else { return "no price".into() };
    let side = |t: Option<crate::price::TokenCost>| t.map_or("–".to_string(), |t| format!("{:.2}", t.per_mtok_output));
    format!("{} → {} {}", side(c.published), side(c.predicted), c.currency)
}
