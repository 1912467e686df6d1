//! The end of a run: Pareto analysis with bootstrap uncertainty over every finished point, then
//! `summary.json` and `results.parquet`.

use super::RunError;
use crate::pareto::{self, Samples};
use crate::records;
use crate::results::{PointResult, RunSummary, point_dir};
use std::collections::BTreeMap;
use std::path::Path;

/// Pareto over every finished point (bootstrap intervals, frontier probabilities), then
/// `summary.json` and `results.parquet`. Shared by `sweep run` and `sweep collect`.
pub fn finalize(mut summary: RunSummary, samples: &BTreeMap<String, Samples>, out: &Path) -> Result<RunSummary, RunError> {
    let inputs: Vec<(String, String, String, u32, bool, Samples)> = summary
        .points
        .iter()
        .filter(|r| r.summary.is_some())
        .filter_map(|r| samples.get(&r.id).map(|s| (r.id.clone(), r.curve_key(), r.arm.clone(), r.conc, r.ok(), s.clone())))
        .collect();
    let pts = pareto::points_with_uncertainty(&inputs, summary.replicates, summary.seed);
    summary.curves = pareto::analyse(&pts);
    for p in &pts {
        if let Some(x) = summary.points.iter_mut().find(|x| x.id == p.id) {
            x.pareto = Some(p.clone());
        }
    }
    summary.save(out).map_err(RunError::io(out))?;
    write_parquet(&summary, &out.join("results.parquet")).map_err(RunError::Parquet)?;
    Ok(summary)
}

/// Reads a finished point's samples back from its records (`profile_export.jsonl.gz`, or the
/// plain export of runs written before compression).
pub fn load_samples(run: &Path, p: &PointResult) -> Option<Samples> {
    let recs = records::read_jsonl(&records::export_path(&point_dir(run, &p.id))?).ok()?;
    Some(Samples::from_records(&recs, p.gpus))
}

/// One row per point with the headline metrics (`results.parquet`).
pub fn write_parquet(run: &RunSummary, path: &Path) -> polars::prelude::PolarsResult<()> {
    use polars::prelude::*;
    let g = |f: &dyn Fn(&PointResult) -> Option<f64>| run.points.iter().map(f).collect::<Vec<Option<f64>>>();
    let mut df = df!(
        "point" => run.points.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
        "config_key" => run.points.iter().map(|p| p.config_key.clone()).collect::<Vec<_>>(),
        "arm" => run.points.iter().map(|p| p.arm.clone()).collect::<Vec<_>>(),
        "conc" => run.points.iter().map(|p| p.conc).collect::<Vec<_>>(),
        "gpus" => run.points.iter().map(|p| p.gpus).collect::<Vec<_>>(),
        "result_kind" => run.points.iter().map(|p| p.result_kind.clone()).collect::<Vec<_>>(),
        "status" => run.points.iter().map(|p| serde_json::to_value(&p.status).ok().and_then(|v| v["state"].as_str().map(str::to_string)).unwrap_or_default()).collect::<Vec<_>>(),
        "valid" => run.points.iter().map(|p| p.ok()).collect::<Vec<_>>(),
        "tput_per_gpu" => g(&|p| p.summary.as_ref().map(|s| s.tput_per_gpu)),
        "output_tput_per_gpu" => g(&|p| p.summary.as_ref().map(|s| s.output_tput_per_gpu)),
        "intvty_p90" => g(&|p| p.summary.as_ref().map(|s| s.intvty_p90)),
        "e2e_norm_intvty_p90" => g(&|p| p.summary.as_ref().map(|s| s.e2e_norm_intvty_p90)),
        "ttft_p50" => g(&|p| p.summary.as_ref().map(|s| s.ttft.p50)),
        "ttft_p90" => g(&|p| p.summary.as_ref().map(|s| s.ttft.p90)),
        "ttft_p99" => g(&|p| p.summary.as_ref().map(|s| s.ttft.p99)),
        "e2el_p75" => g(&|p| p.summary.as_ref().map(|s| s.e2el.p75)),
        "e2el_p90" => g(&|p| p.summary.as_ref().map(|s| s.e2el.p90)),
        "p_frontier" => g(&|p| p.pareto.as_ref().map(|x| x.p_frontier)),
    )?;
    crate::problem::atomic_write_with(path, |f| ParquetWriter::new(f).finish(&mut df).map(drop))
}
