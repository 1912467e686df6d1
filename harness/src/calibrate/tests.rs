use engine::GpuSpec;
use engine::calibrate::curves::MeasuredCurves;
use engine::calibrate::steps::{StepComparison, StepMeasurement, StepMode};

use super::check::comparison_markdown;
use super::*;

#[test]
fn unknown_model_error_names_the_built_ins() {
    let e = load_model("no-such-model").unwrap_err().to_string();
    assert!(e.contains("llama-3.1-8b") && e.contains("no-such-model"), "{e}");
}

#[test]
fn markdown_reports_errors_per_row_and_summary() {
    let step = StepMeasurement { mode: StepMode::Decode, batch: 1, ctx: 1024, tokens: 1, measured_us: 1000.0, runner: "r".into() };
    let rows = vec![StepComparison { step, predicted_measured_us: Some(1100.0), predicted_datasheet_us: 800.0 }];
    let md = comparison_markdown(&rows, &GpuSpec::lookup("h200").unwrap());
    assert!(md.contains("+10.0 %"), "{md}");
    assert!(md.contains("-20.0 %"), "{md}");
    assert!(md.contains("median |error| 10.0 %, worst 10.0 %"), "{md}");
}

#[test]
fn profile_without_curves_is_refused_with_the_fix() {
    let e = format!("{:#}", load_profile("h200").unwrap_err());
    assert!(e.contains("measured") && e.contains("sweep calibrate gpu"), "{e}");
}

#[test]
fn written_profile_reads_back_as_a_hardware_profile() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.yaml");
    let mut g = GpuSpec::lookup("h200").unwrap();
    g.name = "x".into();
    g.measured = Some(MeasuredCurves { device: "NVIDIA H200".into(), ..Default::default() });
    harness::problem::atomic_write(&p, profile_yaml(&g).unwrap().as_bytes()).unwrap();
    assert_eq!(GpuSpec::from_file(&p).unwrap(), g);
}
