//! Running the virtual-clock twins of a live run (`sweep run --twin`): each finished live point
//! replayed on the reference engine with the profiles the live engine named, and the residuals
//! written as `residuals.json` (read by the reports through [`crate::twin`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::fit::{Metric, residual_pct};
use crate::plan::Plan;
use crate::results::{RunSummary, Status, write_json};
use crate::run::{Job, PointRunner, RunError};
use crate::targets::sim::{ProfileChoice, SimRunner};
use crate::twin::{FLAG_PCT, MetricResidual, Residuals, TwinPoint};

/// Runs the twins of a finished live run and writes `residuals.json` into `out`.
#[allow(clippy::too_many_arguments)]
pub fn run_twins(
    plan: &Plan,
    run: &RunSummary,
    out: &Path,
    pools: Arc<crate::targets::pools::PointPools>,
    trace_set: &str,
    seed: u64,
    duration_s: Option<f64>,
    fallback: &ProfileChoice,
) -> Result<Residuals, RunError> {
    let mut res = Residuals {
        run_id: run.run_id.clone(),
        live_target: run.target.clone(),
        trace_set: trace_set.to_string(),
        seed,
        duration_s,
        live_time_scale: None,
        flag_pct: FLAG_PCT,
        points: Vec::new(),
    };
    for p in &run.points {
        let (Status::Done, Some(live)) = (&p.status, &p.summary) else { continue };
        let Some(point) = plan.points().find(|x| x.id == p.id) else { continue };
        // A live reference engine names its profiles in /server_info; use exactly those.
        let info = &p.profiles;
        let named = |k: &str| {
            info.get(format!("{k}_profile"))
                .or_else(|| info.pointer(&format!("/engine_info/{k}_profile")))
                .or_else(|| info.pointer(&format!("/profiles/{k}")))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let (hw, model) = (named("hardware"), named("model"));
        if let Some(ts) = info.get("time_scale").and_then(|v| v.as_f64()) {
            res.live_time_scale = Some(ts);
        }
        let choice = ProfileChoice { model: model.or_else(|| fallback.model.clone()), hardware: hw.or_else(|| fallback.hardware.clone()) };
        let mut sim = SimRunner::with_pools(pools.clone());
        sim.duration_s = duration_s;
        sim.profiles = choice;
        let dir = crate::results::point_dir(out, &p.id).join("twin");
        let job = Job { point: point.clone(), dir: dir.clone(), cancel: Arc::new(AtomicBool::new(false)), seed, turn: None };
        let o = sim.run(&job);
        let hw_name = o.ctx.profiles.get("hardware_profile").and_then(|v| v.as_str()).unwrap_or("?").to_string();
        let model_name = o.ctx.profiles.get("model_profile").and_then(|v| v.as_str()).unwrap_or("?").to_string();
        let mut tp = TwinPoint {
            id: p.id.clone(),
            live_result_kind: p.result_kind.clone(),
            twin_hardware_profile: hw_name,
            twin_model_profile: model_name,
            status: "ok".into(),
            metrics: BTreeMap::new(),
        };
        match (&o.status, crate::metrics::aggregate(&o.records, &o.ctx)) {
            (Status::Done, Ok((agg, s))) => {
                std::fs::create_dir_all(&dir).map_err(RunError::io(&dir))?;
                let agg_json = dir.join("agg.json");
                write_json(&agg_json, &agg).map_err(RunError::io(&agg_json))?;
                for m in Metric::ALL {
                    let (a, b) = (m.of(live), m.of(&s));
                    tp.metrics.insert(m.key().into(), MetricResidual { measured: a, predicted: b, residual_pct: residual_pct(a, b) });
                }
            }
            (Status::Done, Err(e)) => tp.status = format!("twin aggregate failed: {e}"),
            (st, _) => tp.status = format!("twin failed: {st:?}"),
        }
        res.points.push(tp);
    }
    let residuals = out.join("residuals.json");
    write_json(&residuals, &res).map_err(RunError::io(&residuals))?;
    Ok(res)
}
