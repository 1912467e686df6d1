//! The cost model against step times measured on an H200 (engine/tests/data/h200, from
//! `sweep calibrate gpu` and scripts/calibrate_torch.py; see docs/PERFORMANCE.md).

use engine::calibrate::steps::{self, StepMeasurement, StepMode};

use engine::{GpuSpec, ModelSpec};

fn measured_steps() -> Vec<StepMeasurement> {
    let mut v: Vec<StepMeasurement> = serde_json::from_str(include_str!("data/h200/rust-steps.json")).unwrap();
    v.extend(serde_json::from_str::<Vec<StepMeasurement>>(include_str!("data/h200/torch-steps.json")).unwrap());
    v
}

#[test]
fn measured_profile_is_embedded_with_its_provenance() {
    let g = GpuSpec::lookup("h200-measured").unwrap();
    assert!(g.cost.calibrated);
    let m = g.measured.as_ref().unwrap();
    assert_eq!(m.device, "NVIDIA H200");
    assert!(!m.driver.is_empty() && m.driver != "unknown");
    assert_eq!(m.cuda_driver, "13.0");
    assert!(m.checks.iter().all(|c| c.pass) && m.checks.len() >= 5);
    assert!(m.peer.is_some() && !m.prefill_attention.is_empty());
    // Ceilings below the datasheet, as measured ceilings must be.
    assert!(m.copy.gbps < g.datasheet.hbm_bandwidth / 1e9);
    assert!(g.cost.eta_flops < 1.0 && g.cost.eta_bw < 1.0);
}

#[test]
fn measured_profile_predicts_the_h200_step_times() {
    let model = ModelSpec::lookup("llama-3.1-8b").unwrap();
    let measured = GpuSpec::lookup("h200-measured").unwrap();
    let datasheet = GpuSpec::lookup("h200").unwrap();
    // Every measured step: the cudarc decode chain (its own kernels' curves) and the PyTorch
    // decode and prefill chains (the PyTorch kernels' curves from the same profile).
    let rows = steps::compare(&model, &measured_steps(), &measured, &datasheet);
    assert_eq!(rows.len(), 45);
    let em: Vec<f64> = rows.iter().map(|r| r.err_measured().unwrap()).collect();
    let ed: Vec<f64> = rows.iter().map(|r| r.err_datasheet()).collect();
    let (med, worst) = steps::error_summary(&em).unwrap();
    let (_, worst_ds) = steps::error_summary(&ed).unwrap();
    assert!(med <= 0.10, "median |error| {med}");
    assert!(worst <= 0.25, "worst |error| {worst}");
    assert!(worst < worst_ds, "measured {worst} vs datasheet {worst_ds}");
}

#[test]
fn peer_steps_are_predicted_from_the_peer_kernels() {
    let model = ModelSpec::lookup("llama-3.1-8b").unwrap();
    let measured = GpuSpec::lookup("h200-measured").unwrap();
    let datasheet = GpuSpec::lookup("h200").unwrap();
    let s = measured_steps();
    let torch_b1 =
        s.iter().find(|x| x.runner.starts_with("PyTorch") && x.mode == StepMode::Decode && x.batch == 1 && x.ctx == 65536).unwrap();
    let cudarc_b1 = s.iter().find(|x| x.runner.contains("cudarc") && x.batch == 1 && x.ctx == 65536).unwrap();
    let rows = steps::compare(&model, &[torch_b1.clone(), cudarc_b1.clone()], &measured, &datasheet);
    // PyTorch's decode attention does not split the KV: at batch 1 and 64K context it is
    // several times slower, and the prediction from its own curves follows it.
    let (pt, pc) = (rows[0].predicted_measured_us.unwrap(), rows[1].predicted_measured_us.unwrap());
    assert!(pt > 2.0 * pc, "{pt} vs {pc}");
}
