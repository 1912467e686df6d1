//! `sweep_results::power` against InferenceX's own `aggregate_power.py`, run through its CLI on
//! the same telemetry: a clean two-GPU run, an AMD-shaped one, one with a long sampling gap, one
//! missing a GPU, one with non-numeric cells, zone-less timestamps on a UTC+2 host, and the
//! energy-counter cross-check. The aggregate's power keys and the validation record must agree
//! (numbers within 1e-6 relative).
//!
//! Needs `python3` and the reference under `$SWEEP_SHARED_DATA/inferencex/power/`
//! (default `<workspace>/../shared/data`).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use sweep_results::power::{LocalOffset, cross_check_accumulator, evaluate};

const BASE: f64 = 1_700_000_000.0;

fn shared_data() -> PathBuf {
    std::env::var_os("SWEEP_SHARED_DATA").map(PathBuf::from).unwrap_or_else(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        manifest.parent().and_then(Path::parent).expect("workspace has a parent").join("shared/data")
    })
}

/// `YYYY/MM/DD HH:MM:SS.ffffff` of an epoch, wall clock at `offset_s` east of UTC, with the
/// date and time separators given.
fn wall_clock(epoch: f64, offset_s: i64, sep: (char, char)) -> String {
    let micros = (epoch * 1e6).round() as i64 + offset_s * 1_000_000;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros as u64);
    let iso = humantime::format_rfc3339_micros(at).to_string();
    iso.trim_end_matches('Z').replace('-', &sep.0.to_string()).replacen('T', &sep.1.to_string(), 1)
}

/// Jittered ~1 Hz samples from 2 s before to 2 s after a 30 s window, power varying per GPU.
fn samples(gpus: &[u32], skip: impl Fn(usize) -> bool) -> Vec<(f64, u32, f64)> {
    let mut out = Vec::new();
    for i in 0..34 {
        if skip(i) {
            continue;
        }
        let t = BASE - 2.0 + i as f64 * 0.98 + 0.013 * (i as f64 * 1.7).sin();
        for &g in gpus {
            out.push((t + 0.001 * f64::from(g), g, 310.0 + 45.0 * (i as f64 * 0.37 + f64::from(g)).sin() + 7.25 * f64::from(g)));
        }
    }
    out
}

fn nvidia_csv(rows: &[(f64, u32, f64)], offset_s: i64) -> String {
    let mut s = String::from("timestamp, index, power.draw [W], temperature.gpu, clocks.current.sm [MHz], utilization.gpu [%]\n");
    for (t, g, p) in rows {
        s.push_str(&format!("{}, {g}, {p:.2} W, 64, 1980 MHz, 97 %\n", wall_clock(*t, offset_s, ('/', ' '))));
    }
    s
}

fn amd_csv(rows: &[(f64, u32, f64)]) -> String {
    let mut s = String::from("timestamp,gpu,gfx_activity,socket_power,power_management\n");
    for (t, g, p) in rows {
        s.push_str(&format!("{},{g},99,{p:.3},ENABLED\n", wall_clock(*t, 0, ('-', 'T'))));
    }
    s
}

/// `amd-smi metric -E --csv` snapshots: each GPU's counter at start and the joules it adds.
fn snapshots(start: &[(u32, f64)], added: &[(u32, f64)]) -> (String, String) {
    let header = "gpu,socket_power,power_management,total_energy_consumption\n";
    let row = |g: &u32, j: f64| format!("{g},238,ENABLED,{j:.3}\n");
    let first: String = start.iter().map(|(g, j)| row(g, 178_000_000.0 + j)).collect();
    let last: String = start
        .iter()
        .filter_map(|(g, j)| added.iter().find(|(h, _)| h == g).map(|(_, a)| row(g, 178_000_000.0 + j + a * 33.0 * 310.0)))
        .collect();
    (format!("{header}{first}"), format!("{header}{last}"))
}

fn bench() -> String {
    json!({
        "benchmark_start_time_unix": BASE,
        "benchmark_end_time_unix": BASE + 30.0,
        "duration": 30.02,
        "completed": 321,
        "total_input_tokens": 654_321,
        "total_output_tokens": 98_765,
    })
    .to_string()
}

/// Equal, numbers within 1e-6 relative.
fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-6 * x.abs().max(y.abs()) || x == y
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w))),
        _ => a == b,
    }
}

struct Case {
    name: &'static str,
    csv: String,
    expected_gpus: i64,
    offset_s: i32,
    valid: bool,
    /// Energy-counter snapshots (start, end) beside the stream.
    snapshots: Option<(String, String)>,
}

fn run_reference(script: &Path, dir: &Path, case: &Case) -> (Value, Value) {
    let path = |f: &str| dir.join(format!("{}_{f}", case.name));
    std::fs::write(path("gpu_metrics.csv"), &case.csv).unwrap();
    std::fs::write(path("bench.json"), bench()).unwrap();
    std::fs::write(path("agg.json"), r#"{"hw": "h100"}"#).unwrap();
    if let Some((start, end)) = &case.snapshots {
        std::fs::write(path("gpu_metrics_energy_start.csv"), start).unwrap();
        std::fs::write(path("gpu_metrics_energy_end.csv"), end).unwrap();
    }
    let tz = if case.offset_s == 0 { "UTC".to_string() } else { format!("XXX-{}", case.offset_s / 3600) };
    let out = Command::new("python3")
        .arg(script)
        .args(["--csv", path("gpu_metrics.csv").to_str().unwrap()])
        .args(["--bench-result", path("bench.json").to_str().unwrap()])
        .args(["--agg-result", path("agg.json").to_str().unwrap()])
        .args(["--expected-num-gpus", &case.expected_gpus.to_string()])
        .args(["--validation-result", path("validation.json").to_str().unwrap()])
        .env("TZ", tz)
        .env_remove("REQUIRE_POWER")
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}: reference failed: {}", case.name, String::from_utf8_lossy(&out.stderr));
    let read = |f: &str| serde_json::from_str::<Value>(&std::fs::read_to_string(path(f)).unwrap()).unwrap();
    (read("agg.json"), read("validation.json"))
}

fn cases() -> Vec<Case> {
    let case = |name, csv, expected_gpus, valid| Case { name, csv, expected_gpus, offset_s: 0, valid, snapshots: None };
    let mut non_numeric = nvidia_csv(&samples(&[0, 1], |_| false), 0);
    non_numeric = non_numeric.replacen("W, 64", "W, hot", 1).replace(&format!("{:.2} W", samples(&[1], |_| false)[15].2), "unknown W");
    vec![
        case("clean", nvidia_csv(&samples(&[0, 1], |_| false), 0), 2, true),
        case("amd", amd_csv(&samples(&[0, 1, 2, 3], |_| false)), 4, true),
        case("gap", nvidia_csv(&samples(&[0, 1], |i| (12..17).contains(&i)), 0), 2, false),
        case("missing_gpu", nvidia_csv(&samples(&[0], |_| false), 0), 2, false),
        case("non_numeric", non_numeric, 2, false),
        case(
            "bad_timestamp",
            nvidia_csv(&samples(&[0, 1], |_| false), 0).replacen("2023/11/14 22:13:3", "yesterday, about 22:13:3", 1),
            2,
            false,
        ),
        case("clock_back", shuffled(&nvidia_csv(&samples(&[0, 1], |_| false), 0)), 2, true),
        case("ragged", ragged(&nvidia_csv(&samples(&[0, 1, 2], |_| false), 0)), 3, true),
        case("short_rows", short_rows(&nvidia_csv(&samples(&[0, 1], |_| false), 0)), 2, false),
        Case {
            name: "utc_plus_2",
            csv: nvidia_csv(&samples(&[0, 1], |_| false), 7200),
            expected_gpus: 2,
            offset_s: 7200,
            valid: true,
            snapshots: None,
        },
        Case {
            snapshots: Some(snapshots(&[(0, 10_512.25), (1, 9_876.5), (2, 300.0)], &[(0, 1.0), (1, 0.0)])),
            ..case("counters", amd_csv(&samples(&[0, 1], |_| false)), 2, true)
        },
        Case { snapshots: Some(snapshots(&[(0, 1.0)], &[(0, 1.0)])), ..case("counters_flat", amd_csv(&samples(&[0], |_| false)), 1, true) },
    ]
}

/// Rows out of time order (the sampler's clock stepped back, or rows interleaved): the
/// reference orders each device's samples by time, so this stays valid.
fn shuffled(csv: &str) -> String {
    let mut lines: Vec<&str> = csv.lines().collect();
    lines[10..30].reverse();
    lines[40..44].swap(0, 3);
    lines.join("\n") + "\n"
}

/// CRLF line ends, a blank line, a quoted cell and a second reading at one timestamp (averaged).
fn ragged(csv: &str) -> String {
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    lines.insert(5, String::new());
    lines[8] = lines[8].replacen(", 1,", ", \"1\",", 1);
    let dup = lines[20].replace(" W,", "1 W,");
    lines.insert(21, dup);
    lines.join("\r\n") + "\r\n"
}

/// A row cut short after its timestamp and one naming no device.
fn short_rows(csv: &str) -> String {
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let ts: String = lines[30].split(", ").next().unwrap().to_string();
    lines.insert(31, ts.clone());
    lines.insert(32, format!("{ts}, , 400.00 W"));
    lines.join("\n") + "\n"
}

#[test]
#[ignore = "runs InferenceX's aggregate_power.py (needs python3 and the shared data directory)"]
fn agrees_with_inferencex_aggregate_power() {
    let script = shared_data().join("inferencex/power/aggregate_power.py");
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: python3 is not on PATH; cannot run {}", script.display());
        return;
    }
    assert!(script.is_file(), "reference script not found at {} (set SWEEP_SHARED_DATA)", script.display());
    let dir = tempfile::tempdir().unwrap();
    for case in cases() {
        let (agg, validation) = run_reference(&script, dir.path(), &case);
        let local = LocalOffset(case.offset_s);
        let mut ours = evaluate(&bench(), Some(&case.csv), local, Some(case.expected_gpus));
        if let Some((start, end)) = &case.snapshots {
            ours.validation.accumulator_check = cross_check_accumulator(&case.csv, Some(start), Some(end), local);
        }
        let mut our_agg = json!({"hw": "h100"});
        our_agg.as_object_mut().unwrap().extend(serde_json::to_value(&ours.summary).unwrap().as_object().unwrap().clone());
        assert!(close(&our_agg, &agg), "{}: aggregate differs\n ours: {our_agg}\n ref:  {agg}", case.name);
        let mut reference = validation;
        for k in ["telemetry_source", "benchmark_result"] {
            reference.as_object_mut().unwrap().remove(k);
        }
        let our_validation = serde_json::to_value(&ours.validation).unwrap();
        assert!(close(&our_validation, &reference), "{}: validation differs\n ours: {our_validation}\n ref:  {reference}", case.name);
        assert_eq!(ours.validation.power_valid, case.valid, "{}: {:?}", case.name, ours.validation.reasons);
        let counters = ours.validation.accumulator_check.as_ref().map(|c| serde_json::to_value(c).unwrap()["within_tolerance"].clone());
        eprintln!(
            "{}: power_valid={} reasons={:?} energy={:?} counters_within_tolerance={counters:?}",
            case.name,
            case.valid,
            ours.validation.reasons,
            ours.metrics.map(|m| m.total_gpu_energy_j)
        );
    }
}
