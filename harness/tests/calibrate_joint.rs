//! `sweep calibrate fit --points`: one fit across GPUs. Points "published" by the engine itself
//! with known per-GPU and shared parameters are fitted from the datasheet profiles, and the fit
//! must find those parameters again (each GPU its own, the shared one once for both).

mod common;
use common::*;

const ARGS_H200: &str = "[--tensor-parallel-size, '8', --disable-radix-cache, --max-running-requests, '512', --stream-interval, '10']";
const ARGS_B200: &str = "[--tensor-parallel-size, '8', --disable-radix-cache, --kv-cache-dtype, fp8_e4m3, --scheduler-recv-interval, '10']";

fn points(values: Option<&serde_json::Value>) -> String {
    let mut out = String::from("configs:\n");
    let mut i = 0;
    for (key, hw, args, concs) in [("dsr1-h200", "h200", ARGS_H200, &[2u32][..]), ("dsr1-b200", "b200", ARGS_B200, &[1, 4][..])] {
        out.push_str(&format!(
            "- key: {key}\n  model: deepseek-ai/DeepSeek-R1-0528\n  hardware: {hw}\n  gpus: 8\n  scenario: fixed-seq-len\n  points:\n"
        ));
        for c in concs {
            out.push_str(&format!("  - {{isl: 256, osl: 256, conc: {c}, args: {args}"));
            if let Some(v) = values {
                let p = &v[i]["predicted"];
                for k in ["tput_total_per_gpu", "tput_out_per_gpu", "ttft_mean_ms", "tpot_mean_ms"] {
                    out.push_str(&format!(", {k}: {}", p[k].as_f64().unwrap()));
                }
            }
            out.push_str("}\n");
            i += 1;
        }
    }
    out
}

fn truth(dir: &std::path::Path, base: &str, tau_layer: f64) -> std::path::PathBuf {
    let text = std::fs::read_to_string(workspace_root().join(format!("engine/profiles/hardware/{base}.yaml"))).unwrap();
    let text = text
        .replace(&format!("name: {base}\n"), &format!("name: truth-{base}\n"))
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("tau_layer_us:") {
                format!("  tau_layer_us: {tau_layer}\n  eager_layer_us: 2000")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let p = dir.join(format!("truth-{base}.yaml"));
    std::fs::write(&p, text).unwrap();
    p
}

fn predict(dir: &std::path::Path, file: &std::path::Path, profile: &std::path::Path) -> serde_json::Value {
    let o = sweep(&["predict", "--points", file.to_str().unwrap(), "--json", "--profile", profile.to_str().unwrap()], dir);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    serde_json::from_str(&so).unwrap()
}

fn cost(profile: &std::path::Path, key: &str) -> f64 {
    let g = engine::GpuSpec::from_file(profile).unwrap();
    match key {
        "tau_layer_us" => g.cost.tau_layer_us,
        "eager_layer_us" => g.cost.eager_layer_us,
        _ => unreachable!(),
    }
}

#[test]
fn a_joint_fit_finds_each_gpus_parameters_and_the_shared_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shape = d.join("shape.yaml");
    std::fs::write(&shape, points(None)).unwrap();
    // "Published": each GPU's points predicted with its truth profile.
    let th = predict(d, &shape, &truth(d, "h200", 60.0));
    let tb = predict(d, &shape, &truth(d, "b200", 90.0));
    let merged = serde_json::Value::Array(vec![th[0].clone(), tb[1].clone(), tb[2].clone()]);
    let published = d.join("published.yaml");
    std::fs::write(&published, points(Some(&merged))).unwrap();

    let out = d.join("profiles");
    std::fs::create_dir_all(&out).unwrap();
    let md = d.join("fit.md");
    let args = [
        "calibrate",
        "fit",
        "--points",
        published.to_str().unwrap(),
        "--params",
        "tau_layer_us",
        "--shared-params",
        "eager_layer_us",
        "--restarts",
        "2",
        "--max-evals",
        "40",
        "--out",
        out.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ];
    let o = sweep(&args, d);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}\n{se}");
    let (h, b) = (out.join("h200-fitted.yaml"), out.join("b200-fitted.yaml"));
    for (p, want) in [(&h, 60.0), (&b, 90.0)] {
        let got = cost(p, "tau_layer_us");
        assert!((got / want - 1.0).abs() < 0.1, "{}: tau_layer_us {got}, truth {want}\n{so}", p.display());
        let e = cost(p, "eager_layer_us");
        assert!((e / 2000.0 - 1.0).abs() < 0.1, "{}: eager_layer_us {e}, truth 2000 (shared)", p.display());
    }
    assert_eq!(cost(&h, "eager_layer_us"), cost(&b, "eager_layer_us"), "one shared value for both GPUs");
    // The profiles say what they were fitted to; the table is written.
    let g = engine::GpuSpec::from_file(&b).unwrap();
    let f = g.fit.unwrap();
    assert_eq!((f.base_profile.as_str(), f.config_key.as_str(), f.points.len()), ("b200", "dsr1-b200", 2));
    assert_eq!(f.models, vec!["deepseek-v3".to_string()]);
    assert!(std::fs::read_to_string(&md).unwrap().contains("| dsr1-h200 256/256 c2 | h200 | tput_total_per_gpu |"));
    // Predicted again with the fitted profile, every published metric is close.
    let again = predict(d, &published, &b);
    for p in again.as_array().unwrap().iter().filter(|p| p["config"] == "dsr1-b200") {
        for (k, r) in p["residual_pct"].as_object().unwrap() {
            // TTFT moves in whole decode steps (the recv interval's polls): a looser bound.
            let bound = if k == "ttft_mean_ms" { 10.0 } else { 5.0 };
            assert!(r.as_f64().unwrap().abs() < bound, "{k}: {r} % after the fit");
        }
    }
}

#[test]
fn a_joint_fit_refuses_what_it_cannot_do_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let f = d.join("p.yaml");
    std::fs::write(&f, points(None)).unwrap();
    let o = sweep(&["calibrate", "fit", "--points", f.to_str().unwrap(), "--exclude", "dsr1-h300", "--out", d.to_str().unwrap()], d);
    let (_, se) = text(&o);
    assert!(!o.status.success());
    assert!(se.contains("--exclude dsr1-h300: no point has this id or config key"), "{se}");
    let o = sweep(&["calibrate", "fit", "--points", f.to_str().unwrap(), "--results", "x.yaml", "--config", "k"], d);
    let (_, se) = text(&o);
    assert!(!o.status.success() && se.contains("cannot be used with"), "{se}");
    let o = sweep(&["calibrate", "fit", "--points", f.to_str().unwrap(), "--params", "tau_layr_us", "--out", d.to_str().unwrap()], d);
    let (_, se) = text(&o);
    assert!(!o.status.success() && se.contains("unknown parameter tau_layr_us"), "{se}");
    let o = sweep(
        &["calibrate", "fit", "--points", f.to_str().unwrap(), "--params", "tau_layer_us,osl_scale", "--out", d.to_str().unwrap()],
        d,
    );
    let (_, se) = text(&o);
    assert!(!o.status.success() && se.contains("osl_scale: a workload scale"), "{se}");
    let o = sweep(&["calibrate", "fit", "--points", f.to_str().unwrap(), "--params", "eager_layer_us", "--out", d.to_str().unwrap()], d);
    let (_, se) = text(&o);
    assert!(!o.status.success() && se.contains("in both --params and --shared-params"), "{se}");
    let o = sweep(&["calibrate", "fit", "--points", f.to_str().unwrap(), "--weights", "ttft_p50=0", "--base", "h200"], d);
    let (_, se) = text(&o);
    assert!(!o.status.success() && se.contains("--weights, --base") && se.contains("not used by a joint fit"), "{se}");
}
