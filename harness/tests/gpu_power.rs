//! GPU power of live points through the binary: `sweep replay --url` against a real `sweep
//! engine serve` in real time, with a stand-in `nvidia-smi` on `PATH` (a shell script that
//! answers InferenceX's query once a second, as the real tool does, and a one-shot sample), so
//! the monitor's start, stop, final sample and the integration into `agg.json` run end to end.
//! The same path runs with the real `nvidia-smi` on a GPU host (docs/PERFORMANCE.md).

mod common;
use common::engine_server::*;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// A stand-in `nvidia-smi`: two GPUs at 250 W and 350 W, stamped with `date` (so in the zone the
/// monitor gives it), one sample a second, the first after `late` seconds.
fn stand_in(dir: &Path, late: u32) {
    let script = format!(
        r#"#!/bin/sh
row() {{ t=$(date +"%Y/%m/%d %H:%M:%S.%3N"); echo "$t, 0, 250.00 W, 40, 1980 MHz, 2619 MHz, 50 %, 20 %"; echo "$t, 1, 350.00 W, 41, 1980 MHz, 2619 MHz, 60 %, 30 %"; }}
case "$*" in
  *--format=csv,noheader*) row; exit 0 ;;
esac
echo "timestamp, index, power.draw [W], temperature.gpu, clocks.current.sm [MHz], clocks.current.memory [MHz], utilization.gpu [%], utilization.memory [%]"
sleep {late}
while true; do row; sleep 1; done
"#
    );
    let p = dir.join("nvidia-smi");
    std::fs::write(&p, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A short fixed-length replay against `url` with `PATH` set to `path`; the point's `agg.json`.
fn replay_with_path(url: &str, path: &str, extra: &[&str]) -> (Value, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("point");
    let mut args = vec!["replay", "--url", url, "--isl", "128", "--osl", "64", "--num-prompts", "40", "--concurrency", "4", "--gpus", "2"];
    args.extend_from_slice(extra);
    args.extend(["--out", dir.to_str().unwrap()]);
    // A host zone far from UTC: the monitor's timestamps must still line up with the window.
    let o = Command::new(env!("CARGO_BIN_EXE_sweep")).args(&args).env("PATH", path).env("TZ", "JST-9").output().unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (read_json(&dir.join("agg.json")), out)
}

fn sh_path(bin: &Path) -> String {
    // `sh`, `date` and `sleep` for the stand-in, after it.
    format!("{}:/usr/bin:/bin", bin.display())
}

#[test]
fn a_stand_in_nvidia_smi_is_sampled_and_integrated_over_the_benchmark_window() {
    let s = EngineServer::start(&[]);
    let bin = tempfile::tempdir().unwrap();
    stand_in(bin.path(), 0);
    let (agg, out) = replay_with_path(&s.url, &sh_path(bin.path()), &[]);
    assert_eq!(agg["power_source"], "measured", "{agg}");
    assert_eq!(agg["power_valid"], 1, "{}", agg["power_validation"]);
    assert_eq!(agg["power_metric_schema_version"], 2);
    assert!(agg["power_monitor"]["command"].as_str().unwrap().starts_with("nvidia-smi --query-gpu=timestamp,index,power.draw"), "{agg}");
    // Constant draw: the mean of one GPU is the two boards' mean, energy is 600 W over the window.
    assert!((agg["avg_power_w"].as_f64().unwrap() - 300.0).abs() < 1e-6, "{agg}");
    let bs = &agg["benchmark_serving"];
    let window = bs["benchmark_end_time_unix"].as_f64().unwrap() - bs["benchmark_start_time_unix"].as_f64().unwrap();
    let energy = agg["total_gpu_energy_j"].as_f64().unwrap();
    assert!((energy - 600.0 * window).abs() < 0.01, "{energy} J over {window} s");
    let out_tokens = bs["total_output_tokens"].as_f64().unwrap();
    assert!((agg["joules_per_output_token"].as_f64().unwrap() - energy / out_tokens).abs() < 1e-5, "{agg}");
    // The telemetry is kept beside the results, ending with the sample taken after the stop.
    let csv = std::fs::read_to_string(out.path().join("point/gpu_metrics.csv")).unwrap();
    assert!(csv.starts_with("timestamp, index, power.draw"), "{csv}");
    assert!(csv.ends_with(" %\n"), "{csv}");
    assert_eq!(agg["power_validation"]["observed_gpu_count"], 2);
}

#[test]
fn telemetry_that_misses_the_window_or_no_tool_gives_power_valid_0_with_the_reason_never_a_number() {
    let s = EngineServer::start(&[]);
    let bin = tempfile::tempdir().unwrap();
    // The first sample comes after the window started (the point takes about 2 s).
    stand_in(bin.path(), 6);
    let (agg, _out) = replay_with_path(&s.url, &sh_path(bin.path()), &[]);
    assert_eq!(agg["power_valid"], 0, "{agg}");
    assert!(agg.get("avg_power_w").is_none() && agg.get("joules_per_output_token").is_none(), "{agg}");
    let reasons = agg["power_invalid_reasons"].to_string();
    assert!(reasons.contains("benchmark_window_not_bracketed") || reasons.contains("insufficient_power_samples"), "{reasons}");

    // No tool on PATH: no file, the reference's reason, and the monitor's note.
    let empty = tempfile::tempdir().unwrap();
    let (agg, out) = replay_with_path(&s.url, empty.path().to_str().unwrap(), &[]);
    assert_eq!(agg["power_valid"], 0, "{agg}");
    assert_eq!(agg["power_invalid_reasons"], serde_json::json!(["telemetry_file_missing"]), "{agg}");
    assert_eq!(agg["power_monitor"]["note"], "neither nvidia-smi nor amd-smi is on PATH", "{agg}");
    assert!(!out.path().join("point/gpu_metrics.csv").exists());

    // Off: no power keys at all.
    let (agg, _out) = replay_with_path(&s.url, &sh_path(bin.path()), &["--gpu-monitor", "off"]);
    assert!(agg.get("power_valid").is_none() && agg.get("power_source").is_none(), "{agg}");
}

/// `sweep replay --engine` at concurrency `c`: the point's `agg.json`.
fn predicted(c: &str) -> Value {
    let flags = "--model-path deepseek-ai/DeepSeek-R1-0528 --tensor-parallel-size 8 --disable-radix-cache --max-running-requests 512 \
        --chunked-prefill-size 32768 --mem-fraction-static 0.82";
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("point");
    let o = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["replay", "--engine", flags, "--hardware", "h200", "--gpus", "8", "--isl", "1024", "--osl", "1024", "--concurrency", c])
        .args(["--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    read_json(&dir.join("agg.json"))
}

#[test]
fn the_engine_predicts_power_from_what_its_steps_keep_busy_labelled_with_its_model() {
    let (c1, c64) = (predicted("1"), predicted("64"));
    for agg in [&c1, &c64] {
        assert_eq!(agg["power_source"], "predicted", "{agg}");
        assert_eq!(agg["result_kind"], "predicted");
        assert_eq!(agg["power_valid"], 1);
        let m = &agg["power_model"];
        assert_eq!(m["hardware_profile"], "h200");
        assert!(m["source"].as_str().unwrap().contains("700 W"), "{m}");
        let (idle, limit, w) = (m["idle_w"].as_f64().unwrap(), m["limit_w"].as_f64().unwrap(), agg["avg_power_w"].as_f64().unwrap());
        assert!(w > idle && w <= limit, "{w} W outside ({idle}, {limit}]");
        // Whole deployment over the window: eight GPUs at the mean power.
        let bs = &agg["benchmark_serving"];
        let window = bs["benchmark_end_time_unix"].as_f64().unwrap() - bs["benchmark_start_time_unix"].as_f64().unwrap();
        let e = agg["total_gpu_energy_j"].as_f64().unwrap();
        assert!((e - w * 8.0 * window).abs() / e < 1e-3, "{e} J vs {w} W x 8 x {window} s");
        let per_out = e / bs["total_output_tokens"].as_f64().unwrap();
        assert!((agg["joules_per_output_token"].as_f64().unwrap() - per_out).abs() / per_out < 1e-5, "{agg}");
    }
    // A fuller batch keeps HBM and the tensor cores busier: more watts, far fewer joules a token.
    let w = |a: &Value, k: &str| a[k].as_f64().unwrap();
    assert!(w(&c64, "avg_power_w") > w(&c1, "avg_power_w"), "c1 {} W, c64 {} W", w(&c1, "avg_power_w"), w(&c64, "avg_power_w"));
    assert!(w(&c64, "joules_per_output_token") * 5.0 < w(&c1, "joules_per_output_token"));
}
