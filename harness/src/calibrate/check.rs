//! `sweep calibrate check`: step times measured on a GPU against the cost model's predictions
//! from the measured and the datasheet profile.

use anyhow::{Context, Result, bail};
use engine::calibrate::steps::{self, StepComparison};
use engine::{GpuSpec, ModelSpec};

use super::{CheckArgs, load_profile, load_steps};
use harness::problem::atomic_write;

/// The predicted-vs-measured table as Markdown, with the error summary per profile.
pub fn comparison_markdown(rows: &[StepComparison], datasheet: &GpuSpec) -> String {
    let mut s = String::new();
    s.push_str(
        "| runner | mode | batch | ctx | tokens | measured ms | predicted (measured profile) ms | error | \
         predicted (datasheet) ms | error |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let st = &r.step;
        let (pm, em) = match (r.predicted_measured_us, r.err_measured()) {
            (Some(p), Some(e)) => (format!("{:.3}", p / 1e3), format!("{:+.1} %", 100.0 * e)),
            _ => ("n/a".into(), "n/a".into()),
        };
        s.push_str(&format!(
            "| {} | {:?} | {} | {} | {} | {:.3} | {} | {} | {:.3} | {:+.1} % |\n",
            st.runner,
            st.mode,
            st.batch,
            st.ctx,
            st.tokens,
            st.measured_us / 1e3,
            pm,
            em,
            r.predicted_datasheet_us / 1e3,
            100.0 * r.err_datasheet()
        ));
    }
    let em: Vec<f64> = rows.iter().filter_map(|r| r.err_measured()).collect();
    let ed: Vec<f64> = rows.iter().map(|r| r.err_datasheet()).collect();
    if let Some((med, worst)) = steps::error_summary(&em) {
        s.push_str(&format!(
            "\nMeasured profile: median |error| {:.1} %, worst {:.1} % over {} steps.\n",
            100.0 * med,
            100.0 * worst,
            em.len()
        ));
    }
    if let Some((med, worst)) = steps::error_summary(&ed) {
        let c = &datasheet.cost;
        s.push_str(&format!(
            "Datasheet profile {} (HBM {:.0} GB/s, bf16 {:.0} TFLOP/s, eta_bw {}, eta_flops {}, tau_layer {} µs): \
             median |error| {:.1} %, worst {:.1} %.\n",
            datasheet.name,
            datasheet.datasheet.hbm_bandwidth / 1e9,
            datasheet.datasheet.flops.bf16 / 1e12,
            c.eta_bw,
            c.eta_flops,
            c.tau_layer_us,
            100.0 * med,
            100.0 * worst
        ));
    }
    let mut runners: Vec<&str> = rows.iter().map(|r| r.step.runner.as_str()).collect();
    runners.dedup();
    if runners.len() > 1 {
        s.push_str("\nPer runner (median / worst |error|, measured profile; datasheet profile):\n");
        for runner in runners {
            let sub: Vec<&StepComparison> = rows.iter().filter(|r| r.step.runner == runner).collect();
            let em: Vec<f64> = sub.iter().filter_map(|r| r.err_measured()).collect();
            let ed: Vec<f64> = sub.iter().map(|r| r.err_datasheet()).collect();
            if let (Some((m1, w1)), Some((m2, w2))) = (steps::error_summary(&em), steps::error_summary(&ed)) {
                s.push_str(&format!(
                    "- {runner} ({} steps): {:.1} % / {:.1} %; {:.1} % / {:.1} %\n",
                    sub.len(),
                    100.0 * m1,
                    100.0 * w1,
                    100.0 * m2,
                    100.0 * w2
                ));
            }
        }
    }
    s
}

pub(super) fn check(a: CheckArgs) -> Result<()> {
    let measured = load_profile(&a.profile)?;
    let datasheet = GpuSpec::lookup(&a.datasheet).with_context(|| format!("--datasheet {}", a.datasheet))?;
    let model = ModelSpec::lookup(&a.model).with_context(|| format!("--model {}", a.model))?;
    let mut all = Vec::new();
    for p in &a.steps {
        all.extend(load_steps(p)?);
    }
    if all.is_empty() {
        bail!("no step measurements in {:?}", a.steps);
    }
    let rows = steps::compare(&model, &all, &measured, &datasheet);
    let md = comparison_markdown(&rows, &datasheet);
    harness::out!("{md}");
    if let Some(p) = &a.markdown {
        atomic_write(p, md.as_bytes())?;
    }
    Ok(())
}
