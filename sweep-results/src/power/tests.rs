//! The reference's own test cases (InferenceX `test_aggregate_power.py`), same inputs and
//! expectations, plus the reader details the reference inherits from Python.

use super::*;
use serde_json::{Value, json};

const BASE: f64 = 1_700_000_000.0;
const UTC: LocalOffset = LocalOffset(0);

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1e-12)
}

/// `YYYY/MM/DD HH:MM:SS.ffffff` of an epoch in UTC, as nvidia-smi writes it on a UTC host.
fn nvidia_ts(epoch: f64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros((epoch * 1e6).round() as u64);
    let iso = humantime::format_rfc3339_micros(at).to_string();
    iso.trim_end_matches('Z').replace('-', "/").replacen('T', " ", 1)
}

fn nvidia_csv(samples: &[(f64, u32, f64)]) -> String {
    let mut lines = vec!["timestamp, index, power.draw [W], temperature.gpu".to_string()];
    lines.extend(samples.iter().map(|(t, i, p)| format!("{}, {i}, {p:.2} W, 65", nvidia_ts(*t))));
    lines.join("\n") + "\n"
}

/// One sample a second from `start` to `end`, plus one a second either side of the window.
fn constant_window_csv(start: f64, end: f64, watts: f64, gpus: u32) -> String {
    let mut times = vec![start - 1.0];
    times.extend((0..=(end - start) as i64).map(|o| start + o as f64));
    times.push(end + 1.0);
    let samples: Vec<_> = times.iter().flat_map(|&t| (0..gpus).map(move |g| (t, g, watts))).collect();
    nvidia_csv(&samples)
}

fn bench_json(start: f64, end: f64, completed: u64, input: u64, output: u64) -> String {
    json!({
        "benchmark_start_time_unix": start,
        "benchmark_end_time_unix": end,
        "duration": end - start,
        "completed": completed,
        "total_output_tokens": output,
        "total_input_tokens": input,
    })
    .to_string()
}

fn integrate_text(csv: &str, expected: Option<i64>) -> PowerIntegration {
    integrate_power(Some(csv), UTC, &IntegrationParams::new(BASE, BASE + 10.0, expected))
}

#[test]
fn detects_nvidia_and_amd_columns() {
    let c = detect_columns(&["timestamp", "index", "power.draw [W]", "utilization.gpu"]);
    assert_eq!((c.timestamp.as_deref(), c.power.as_deref(), c.gpu.as_deref()), (Some("timestamp"), Some("power.draw [W]"), Some("index")));
    let c = detect_columns(&["timestamp", "gpu", "socket_power", "temperature"]);
    assert_eq!((c.timestamp.as_deref(), c.power.as_deref(), c.gpu.as_deref()), (Some("timestamp"), Some("socket_power"), Some("gpu")));
}

#[test]
fn amd_watch_mode_header_takes_socket_power_before_power_management() {
    let header = [
        "timestamp",
        "gpu",
        "gfx_activity",
        "umc_activity",
        "mm_activity",
        "vcn_activity",
        "jpeg_activity",
        "gfx_busy_inst_xcp_0",
        "jpeg_busy_xcp_0",
        "vcn_busy_xcp_0",
        "socket_power",
        "gfx_voltage",
        "soc_voltage",
        "mem_voltage",
        "throttle_status",
        "power_management",
        "gfx_0_clk",
        "mem_0_clk",
        "edge",
        "hotspot",
        "mem",
    ];
    let c = detect_columns(&header);
    assert_eq!((c.timestamp.as_deref(), c.power.as_deref(), c.gpu.as_deref()), (Some("timestamp"), Some("socket_power"), Some("gpu")));
}

#[test]
fn power_limit_is_never_the_power_column() {
    assert_eq!(detect_columns(&["timestamp", "index", "power.limit [W]", "power.draw [W]"]).power.as_deref(), Some("power.draw [W]"));
    assert_eq!(detect_columns(&["timestamp", "index", "temperature.gpu"]).power, None);
}

#[test]
fn power_cells() {
    assert!(approx(parse_power("412.34 W").unwrap(), 412.34));
    assert!(approx(parse_power("412.34").unwrap(), 412.34));
    assert_eq!(parse_power("[N/A]"), None);
    assert_eq!(parse_power(""), None);
    assert_eq!(parse_power("n/a"), None);
    assert_eq!(parse_power("-5.5 W"), Some(-5.5));
    assert_eq!(parse_power("W 7."), Some(7.0));
    assert_eq!(parse_power("inf"), None);
}

#[test]
fn timestamps_in_every_known_shape() {
    let expected = 1_736_944_496.789; // 2025-01-15T12:34:56.789 UTC
    assert!((parse_timestamp("2025/01/15 12:34:56.789", UTC).unwrap() - expected).abs() < 0.01);
    assert!((parse_timestamp("2025-01-15T12:34:56.789", UTC).unwrap() - expected).abs() < 0.01);
    assert!(approx(parse_timestamp("1736942096.789", UTC).unwrap(), 1_736_942_096.789));
    assert!(approx(parse_timestamp("1736942096789", UTC).unwrap(), 1_736_942_096.789));
    assert_eq!(parse_timestamp("not-a-date", UTC), None);
    assert_eq!(parse_timestamp("", UTC), None);
}

#[test]
fn zone_less_timestamps_follow_the_local_offset_and_zoned_ones_do_not() {
    let east2 = LocalOffset(7200);
    assert_eq!(parse_timestamp("2025/01/15 12:34:56", east2), Some(1_736_944_496.0 - 7200.0));
    assert_eq!(parse_timestamp("2025-01-15 12:34:56", east2), Some(1_736_944_496.0 - 7200.0));
    assert_eq!(parse_timestamp("2025-01-15T12:34:56Z", east2), Some(1_736_944_496.0));
    assert_eq!(parse_timestamp("2025-01-15T12:34:56+05:30", east2), Some(1_736_924_696.0));
    assert_eq!(parse_timestamp("2025/1/5 1:2:3.5", UTC), Some(1_736_038_923.5));
    assert_eq!(parse_timestamp("2025/02/30 00:00:00", UTC), None);
    assert_eq!(parse_timestamp("2025/01/15 12:34:56.1234567", UTC), None);
    assert_eq!(parse_timestamp("2025-01-15T24:00:00", UTC), None);
}

#[test]
fn per_device_trapezoidal_integration_with_interpolated_boundaries() {
    let mut samples = Vec::new();
    for (gpu, offset) in [(0, 0.0), (1, 100.0)] {
        for (t, p) in [(-1.0, 100.0), (1.0, 140.0), (3.5, 190.0), (6.0, 240.0), (8.5, 290.0), (11.0, 340.0)] {
            samples.push((BASE + t, gpu, p + offset));
        }
    }
    let r = integrate_text(&nvidia_csv(&samples), Some(2));
    assert!(r.power_valid, "{:?}", r.invalid_reasons);
    assert!(r.invalid_reasons.is_empty());
    assert_eq!(r.per_gpu_energy_j.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["0", "1"]);
    assert!(approx(r.per_gpu_energy_j[0].1, 2200.0) && approx(r.per_gpu_energy_j[1].1, 3200.0));
    assert!(approx(r.total_gpu_energy_j.unwrap(), 5400.0));
    assert!(approx(r.avg_total_gpu_power_w.unwrap(), 540.0));
    assert!(approx(r.avg_power_w.unwrap(), 270.0));
}

#[test]
fn rejects_a_gpu_count_other_than_expected() {
    let r = integrate_text(&constant_window_csv(BASE, BASE + 10.0, 500.0, 2), Some(4));
    assert!(!r.power_valid);
    assert!(r.invalid_reasons.contains(&Reason::ExpectedGpuCountMismatch));
    assert_eq!((r.expected_num_gpus, r.observed_num_gpus()), (Some(4), 2));
}

#[test]
fn every_gpu_must_bracket_the_window() {
    let mut samples: Vec<_> = [-1.0, 1.0, 3.0, 5.0, 7.0, 9.0, 11.0].iter().map(|t| (BASE + t, 0, 500.0)).collect();
    samples.extend([1.0, 3.0, 5.0, 7.0, 9.0, 11.0].iter().map(|t| (BASE + t, 1, 500.0)));
    let r = integrate_text(&nvidia_csv(&samples), Some(2));
    assert!(!r.power_valid);
    assert!(r.invalid_reasons.contains(&Reason::BenchmarkWindowNotBracketed));
    assert_eq!(r.device_issues, vec![("1".to_string(), vec![Reason::BenchmarkWindowNotBracketed])]);
    assert_eq!(r.total_gpu_energy_j, None);
}

#[test]
fn rejects_a_sampling_gap() {
    let samples: Vec<_> = [-1.0, 1.0, 9.0, 11.0].iter().map(|t| (BASE + t, 0, 500.0)).collect();
    let r = integrate_text(&nvidia_csv(&samples), Some(1));
    assert!(!r.power_valid);
    assert!(r.invalid_reasons.contains(&Reason::SamplingGapExceeded));
    assert_eq!(r.device_issues, vec![("0".to_string(), vec![Reason::SamplingGapExceeded])]);
    assert_eq!(r.per_gpu_max_sample_gap_s, vec![("0".to_string(), 8.0)]);
}

#[test]
fn ignores_invalid_samples_far_outside_the_window() {
    let mut samples = vec![(BASE - 100.0, 0, -1.0), (BASE + 100.0, 0, 100.0), (BASE + 100.0, 0, 200.0)];
    samples.extend((-1..12).map(|o| (BASE + f64::from(o), 0, 500.0)));
    let r = integrate_text(&nvidia_csv(&samples), Some(1));
    assert!(r.power_valid, "{:?}", r.invalid_reasons);
    assert!(approx(r.total_gpu_energy_j.unwrap(), 5000.0));
}

fn one_malformed_row(row: &str) -> PowerReport {
    let mut rows = vec!["timestamp, index, power.draw [W]".to_string()];
    for offset in -1..12 {
        let ts = nvidia_ts(BASE + f64::from(offset));
        rows.push(if offset == 5 { row.replace("{timestamp}", &ts) } else { format!("{ts}, 0, 500 W") });
    }
    let csv = rows.join("\n") + "\n";
    evaluate(&bench_json(BASE, BASE + 10.0, 1, 1000, 1000), Some(&csv), UTC, Some(1))
}

#[test]
fn malformed_telemetry_inside_the_window_invalidates_power() {
    for (row, reason) in
        [("not-a-timestamp, 0, 500 W", Reason::InvalidTimestampSample), ("{timestamp}, 0, [N/A]", Reason::InvalidPowerSample)]
    {
        let r = one_malformed_row(row);
        assert_eq!(r.summary.power_valid, 0);
        assert_eq!(r.summary.metrics, None);
        assert_eq!(r.validation.reasons, vec![reason]);
    }
}

#[test]
fn energy_per_output_and_total_token() {
    let csv = constant_window_csv(BASE, BASE + 10.0, 500.0, 8);
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 1, 20_000, 20_000), Some(&csv), UTC, None);
    let m = r.summary.metrics.expect("valid");
    assert!(approx(m.avg_power_w, 500.0));
    assert!(approx(m.joules_per_output_token, 2.0));
    assert!(approx(m.joules_per_total_token, 1.0));
}

#[test]
fn total_token_energy_counts_input_tokens() {
    let csv = constant_window_csv(BASE, BASE + 10.0, 500.0, 8);
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 1, 524_288, 65_536), Some(&csv), UTC, None);
    let m = r.summary.metrics.expect("valid");
    assert!((m.joules_per_output_token - 40_000.0 / 65_536.0).abs() < 1e-5);
    assert!((m.joules_per_total_token - 40_000.0 / (65_536.0 + 524_288.0)).abs() < 1e-5);
    let ratio = m.joules_per_output_token / m.joules_per_total_token;
    assert!(8.5 < ratio && ratio < 9.5);
}

#[test]
fn missing_window_gives_only_the_invalid_stamp() {
    let csv = nvidia_csv(&[(BASE, 0, 400.0)]);
    let r = evaluate(r#"{"duration": 10.0, "total_output_tokens": 1000}"#, Some(&csv), UTC, None);
    assert_eq!(serde_json::to_value(&r.summary).unwrap(), json!({"power_metric_schema_version": 2, "power_valid": 0}));
    assert_eq!(r.validation.reasons, vec![Reason::InvalidBenchmarkWindow]);
}

#[test]
fn missing_telemetry_is_invalid_not_fatal() {
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 10, 10_000, 2_000), None, UTC, Some(8));
    assert_eq!(serde_json::to_value(&r.summary).unwrap(), json!({"power_metric_schema_version": 2, "power_valid": 0}));
    assert!(!r.validation.power_valid);
    assert_eq!(r.validation.reasons, vec![Reason::TelemetryFileMissing]);
}

#[test]
fn zero_output_tokens_give_no_energy_per_token() {
    let csv = nvidia_csv(&[(BASE, 0, 400.0)]);
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 1, 0, 0), Some(&csv), UTC, None);
    assert_eq!(r.summary.metrics, None);
    assert!(r.validation.reasons.contains(&Reason::InvalidOutputTokenCount));
}

#[test]
fn complete_whole_deployment_metric_contract() {
    let csv = constant_window_csv(BASE, BASE + 10.0, 500.0, 8);
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 10, 10_000, 2_000), Some(&csv), UTC, Some(8));
    let s = serde_json::to_value(&r.summary).unwrap();
    assert_eq!(s["power_metric_schema_version"], 2);
    assert_eq!(s["power_valid"], 1);
    assert!(s.get("power_invalid_reasons").is_none());
    for (key, want) in [
        ("avg_power_w", 500.0),
        ("avg_total_gpu_power_w", 4000.0),
        ("total_gpu_energy_j", 40_000.0),
        ("joules_per_successful_query", 4000.0),
        ("joules_per_input_token", 4.0),
        ("joules_per_output_token", 20.0),
        ("joules_per_total_token", 40_000.0 / 12_000.0),
    ] {
        assert!(approx(s[key].as_f64().unwrap(), want), "{key}: {}", s[key]);
    }
    let v = serde_json::to_value(&r.validation).unwrap();
    assert_eq!((v["schema_version"].clone(), v["power_valid"].clone(), v["reasons"].clone()), (json!(1), json!(true), json!([])));
    assert_eq!((v["expected_gpu_count"].clone(), v["observed_gpu_count"].clone()), (json!(8), json!(8)));
    assert_eq!(v["benchmark_window"]["start_time_unix"], BASE);
    assert_eq!(v["benchmark_window"]["end_time_unix"], BASE + 10.0);
    assert_eq!(v["benchmark_window"]["integration_duration_s"], 10.0);
    assert_eq!(v["integration_method"], "per_device_trapezoidal_with_linear_boundary_interpolation");
}

#[test]
fn invalid_denominator_is_auditable() {
    let csv = constant_window_csv(BASE, BASE + 10.0, 500.0, 1);
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 0, 10_000, 2_000), Some(&csv), UTC, Some(1));
    assert_eq!(r.summary.power_valid, 0);
    assert_eq!(r.validation.reasons, vec![Reason::InvalidSuccessfulQueryCount]);
}

#[test]
fn window_and_parameter_checks_come_first() {
    let csv = constant_window_csv(BASE, BASE + 10.0, 500.0, 1);
    let bad_window = integrate_power(Some(&csv), UTC, &IntegrationParams::new(BASE, BASE, Some(0)));
    assert_eq!(bad_window.invalid_reasons, vec![Reason::InvalidBenchmarkWindow]);
    let mut params = IntegrationParams::new(BASE, BASE + 10.0, Some(0));
    params.max_sample_gap_s = 0.0;
    assert_eq!(integrate_power(Some(&csv), UTC, &params).invalid_reasons, vec![Reason::InvalidMaxSampleGap]);
    params.max_sample_gap_s = DEFAULT_MAX_SAMPLE_GAP_S;
    let r = integrate_power(Some(&csv), UTC, &params);
    assert_eq!(r.invalid_reasons, vec![Reason::InvalidExpectedGpuCount]);
    assert!(approx(r.total_gpu_energy_j.unwrap(), 5000.0));
    assert_eq!(integrate_power(Some(""), UTC, &params).invalid_reasons, vec![Reason::InvalidExpectedGpuCount, Reason::TelemetryFileEmpty]);
}

#[test]
fn header_and_identity_problems() {
    let r = integrate_text("time,watts\n", Some(1));
    assert_eq!(r.invalid_reasons, vec![Reason::PowerColumnMissing, Reason::GpuIdentityColumnMissing]);
    let r = integrate_text(&format!("timestamp,gpu,power\n{},,500\n", BASE), Some(1));
    assert_eq!(r.invalid_reasons, vec![Reason::GpuIdentityMissing, Reason::NoUsablePowerSamples]);
    let r = integrate_text(&format!("timestamp,gpu,power\n{},0,500\n", BASE), Some(1));
    assert_eq!(r.invalid_reasons, vec![Reason::InsufficientPowerSamples]);
}

#[test]
fn duplicate_timestamps_are_averaged_and_ids_sort_numerically() {
    let mut csv = "timestamp,gpu,power\n".to_string();
    for o in -1..=11 {
        for (gpu, p) in [("10", 100.0), ("2", 300.0), ("2", 100.0), ("b", 50.0)] {
            csv.push_str(&format!("{},{gpu},{p}\n", BASE + f64::from(o)));
        }
    }
    let r = integrate_text(&csv, Some(3));
    assert!(r.power_valid, "{:?}", r.invalid_reasons);
    assert_eq!(r.observed_gpu_ids, ["2", "10", "b"]);
    assert_eq!(r.per_gpu_energy_j, vec![("2".into(), 2000.0), ("10".into(), 1000.0), ("b".into(), 500.0)]);
    assert_eq!(r.avg_power_w, Some(350.0 / 3.0));
}

#[test]
fn csv_reader_matches_python() {
    let r = read_csv("a, b\n\n c,\"d\"e\r\n \n\"x\ny\",\"q\"\"\"\n1,");
    assert_eq!(r.records, vec![vec!["a", "b"], vec![], vec!["c", "de"], vec![""], vec!["x\ny", "q\""], vec!["1", ""]]);
    assert_eq!(r.error, None);
    let long = format!("a\n{}\nb\n", "x".repeat(CSV_FIELD_LIMIT + 1));
    let r = read_csv(&long);
    assert_eq!((r.records.len(), r.error), (1, Some(CsvError::FieldTooLarge { record: 1 })));
}

#[test]
fn an_unreadable_file_keeps_earlier_reasons() {
    let csv = format!("timestamp,gpu,power\nnope,0,1\n{},0,{}\n", BASE, "9".repeat(CSV_FIELD_LIMIT + 1));
    let r = integrate_text(&csv, Some(1));
    assert_eq!(r.invalid_reasons, vec![Reason::InvalidTimestampSample, Reason::TelemetryFileUnreadable]);
}

#[test]
fn rounding_matches_python() {
    assert_eq!(report::round_to(0.0625, 3), 0.062);
    assert_eq!(report::round_to(2.675, 2), 2.67);
    assert_eq!(report::round_to(1234.56789, 3), 1234.568);
}

#[test]
fn summary_rounds_watts_and_joules_to_3_and_ratios_to_6() {
    let csv = constant_window_csv(BASE, BASE + 10.0, 333.33, 3);
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 7, 1_001, 999), Some(&csv), UTC, Some(3));
    let m = r.summary.metrics.unwrap();
    assert_eq!(m.avg_power_w, 333.33);
    assert_eq!(m.total_gpu_energy_j, 9_999.9);
    assert_eq!(m.joules_per_successful_query, 1428.557143);
    assert_eq!(m.joules_per_input_token, 9.98991);
    assert_eq!(m.joules_per_total_token, 4.99995);
    assert_eq!(r.validation.metrics[3], ("joules_per_successful_query".to_string(), 1428.557143));
}

const SNAPSHOT_HEADER: &str =
    "gpu,socket_power,gfx_voltage,soc_voltage,mem_voltage,throttle_status,power_management,total_energy_consumption";

/// `amd-smi metric -E --csv` as measured on MI355X, N/A cells included.
fn snapshot(energy: &[(&str, f64)]) -> String {
    let mut s = format!("{SNAPSHOT_HEADER}\n");
    for (gpu, j) in energy {
        s.push_str(&format!("{gpu},238,N/A,N/A,N/A,N/A,ENABLED,{j:?}\n"));
    }
    s
}

/// 11 samples at 1 Hz per GPU, amd-smi shape, so each GPU's stream spans exactly 10 s.
fn flat_stream(watts: &[(u32, f64)]) -> String {
    let mut s = "timestamp,gpu,socket_power,temperature\n".to_string();
    for (gpu, w) in watts {
        for o in 0..11 {
            let iso = nvidia_ts(BASE + f64::from(o)).replace('/', "-").replacen(' ', "T", 1);
            s.push_str(&format!("{iso},{gpu},{w:?},65\n"));
        }
    }
    s
}

fn check(stream: &str, start: Option<&str>, end: Option<&str>) -> AccumulatorComparison {
    match cross_check_accumulator(stream, start, end, UTC) {
        Some(AccumulatorCheck::Available(c)) => *c,
        other => panic!("expected a comparison, got {other:?}"),
    }
}

#[test]
fn accumulator_matches_full_stream_integral() {
    let c = check(&flat_stream(&[(0, 500.0)]), Some(&snapshot(&[("0", 1e6)])), Some(&snapshot(&[("0", 1_005_000.0)])));
    assert!(approx(c.accumulator_delta_j, 5000.0) && approx(c.integrated_stream_j, 5000.0));
    assert!(c.relative_error.unwrap() < 0.05 && c.within_tolerance);
    assert_eq!(c.tolerance, 0.05);
    assert_eq!(c.per_gpu_delta_j, vec![("0".to_string(), 5000.0)]);
    assert_eq!((c.integrated_gpu_ids, c.unmatched_gpus, c.negative_delta_gpus), (vec!["0".to_string()], vec![], vec![]));
    assert!(approx(c.stream_span_s, 10.0));
}

#[test]
fn accumulator_flags_disagreement_beyond_tolerance() {
    let c = check(&flat_stream(&[(0, 400.0)]), Some(&snapshot(&[("0", 1e6)])), Some(&snapshot(&[("0", 1_005_000.0)])));
    assert!(approx(c.integrated_stream_j, 4000.0));
    assert!(approx(c.relative_error.unwrap(), 0.2));
    assert!(!c.within_tolerance);
}

#[test]
fn accumulator_snapshots_missing_or_unparseable() {
    let stream = flat_stream(&[(0, 500.0)]);
    let start = snapshot(&[("0", 1e6)]);
    assert_eq!(cross_check_accumulator(&stream, None, None, UTC), None);
    let unavailable = |reason| Some(AccumulatorCheck::Unavailable { available: false, reason });
    assert_eq!(cross_check_accumulator(&stream, Some(&start), None, UTC), unavailable("missing_end_snapshot"));
    assert_eq!(
        cross_check_accumulator(&stream, Some(&start), Some("gpu,socket_power\n0,238\n"), UTC),
        unavailable("unparseable_end_snapshot")
    );
    let json = serde_json::to_value(unavailable("missing_end_snapshot")).unwrap();
    assert_eq!(json, json!({"available": false, "reason": "missing_end_snapshot"}));
}

#[test]
fn accumulator_flags_a_counter_that_went_backwards() {
    let c = check(
        &flat_stream(&[(0, 400.0), (1, 0.0)]),
        Some(&snapshot(&[("0", 1e6), ("1", 2e6)])),
        Some(&snapshot(&[("0", 1_005_000.0), ("1", 1_999_000.0)])),
    );
    assert_eq!(c.negative_delta_gpus, ["1"]);
    assert!(approx(c.accumulator_delta_j, 4000.0) && approx(c.integrated_stream_j, 4000.0));
    assert_eq!(c.relative_error, Some(0.0));
    assert!(!c.within_tolerance);
}

#[test]
fn accumulator_excludes_a_gpu_missing_from_one_snapshot() {
    let c =
        check(&flat_stream(&[(0, 500.0), (1, 5000.0)]), Some(&snapshot(&[("0", 1e6), ("1", 3e6)])), Some(&snapshot(&[("0", 1_005_000.0)])));
    assert_eq!(c.unmatched_gpus, ["1"]);
    assert_eq!(c.per_gpu_delta_j.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["0"]);
    assert_eq!(c.integrated_gpu_ids, ["0"]);
    assert!(approx(c.accumulator_delta_j, 5000.0) && approx(c.integrated_stream_j, 5000.0));
    assert!(c.within_tolerance);
}

#[test]
fn accumulator_guards_a_zero_delta() {
    let c = check(&flat_stream(&[(0, 500.0)]), Some(&snapshot(&[("0", 1e6)])), Some(&snapshot(&[("0", 1e6)])));
    assert_eq!((c.accumulator_delta_j, c.relative_error, c.within_tolerance), (0.0, None, false));
}

#[test]
fn accumulator_reads_real_amd_smi_snapshots() {
    let start = format!("{SNAPSHOT_HEADER}\n0,238,N/A,N/A,N/A,N/A,ENABLED,178319501.682\n1,241,N/A,N/A,N/A,N/A,ENABLED,178400000.000\n");
    let end = format!("{SNAPSHOT_HEADER}\n0,240,N/A,N/A,N/A,N/A,ENABLED,178324501.682\n1,239,N/A,N/A,N/A,N/A,ENABLED,N/A\n");
    let c = check(&flat_stream(&[(0, 500.0)]), Some(&start), Some(&end));
    assert_eq!(c.per_gpu_delta_j.len(), 1);
    assert!(approx(c.per_gpu_delta_j[0].1, 5000.0));
    assert_eq!(c.unmatched_gpus, ["1"]);
    assert!(c.within_tolerance);
}

#[test]
fn accumulator_spans_the_monitor_lifetime_not_the_window() {
    let csv = constant_window_csv(BASE, BASE + 10.0, 500.0, 2);
    let r = evaluate(&bench_json(BASE, BASE + 10.0, 10, 10_000, 2_000), Some(&csv), UTC, Some(2));
    assert_eq!(r.summary.power_valid, 1);
    assert!(approx(r.summary.metrics.unwrap().total_gpu_energy_j, 10_000.0));
    assert_eq!(serde_json::to_value(&r.validation).unwrap()["accumulator_check"], Value::Null);
    let c = check(&csv, Some(&snapshot(&[("0", 1e6), ("1", 2e6)])), Some(&snapshot(&[("0", 1_006_000.0), ("1", 2_006_000.0)])));
    assert!(c.within_tolerance);
    assert!(approx(c.accumulator_delta_j, 12_000.0) && approx(c.integrated_stream_j, 12_000.0));
    assert!(approx(c.stream_span_s, 12.0));
    let c = check(&csv, Some(&snapshot(&[("0", 1e6), ("1", 2e6)])), Some(&snapshot(&[("0", 1_000_100.0), ("1", 2_000_100.0)])));
    assert!(!c.within_tolerance, "advisory only: the window's power stays valid");
}

#[test]
fn snapshot_cells_read_like_python_float() {
    let c =
        check(&flat_stream(&[(0, 500.0)]), Some(&snapshot(&[("0", 1e6)])), Some(&format!("{SNAPSHOT_HEADER}\n0,1,2,3,4,5,6,1_005_000\n")));
    assert_eq!(c.accumulator_delta_j, 5000.0);
}
