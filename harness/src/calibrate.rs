//! `sweep calibrate`: measure a GPU into a hardware profile (`gpu`, feature `cuda`) and check
//! the cost model's step times against step times measured on it (`check`, runs anywhere).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use engine::calibrate::curves::{Fitted, MeasuredCurves};
use engine::calibrate::shapes::ModelShape;
use engine::calibrate::steps::{self, Roofline, StepComparison, StepMeasurement};
use serde::{Deserialize, Serialize};

#[derive(Subcommand)]
pub enum CalibrateCommand {
    /// Measure the GPU (copy bandwidth, GEMM curves per weight shape and M, expert GEMMs,
    /// decode attention, launch overheads, real decode steps) into a hardware profile.
    Gpu(GpuArgs),
    /// Compare step times measured on a GPU with the cost model's predictions from a measured
    /// profile and from the datasheet roofline.
    Check(CheckArgs),
}

#[derive(Args)]
pub struct GpuArgs {
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Model whose weight shapes are measured (repeatable). Built in: llama-3.1-8b,
    /// deepseek-v4-flash; or a YAML file with a model shape.
    #[arg(long = "model", default_values_t = ["llama-3.1-8b".to_string(), "deepseek-v4-flash".to_string()])]
    pub models: Vec<String>,
    /// A short sweep (4 M values, 2 decode steps) for smoke runs.
    #[arg(long)]
    pub quick: bool,
    /// Skip the real decode-step runs.
    #[arg(long)]
    pub no_steps: bool,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Profile name written into the file.
    #[arg(long, default_value = "h200-measured")]
    pub name: String,
    /// Where the profile YAML goes (e.g. engine/profiles/hardware/h200-measured.yaml).
    #[arg(long)]
    pub out: PathBuf,
    /// Where the measured step times go (JSON); default: next to --out as <name>-steps.json.
    #[arg(long)]
    pub steps_out: Option<PathBuf>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Measured hardware profile (from `sweep calibrate gpu`).
    #[arg(long)]
    pub profile: PathBuf,
    /// Step-time measurements (JSON lists; repeatable: one per runner).
    #[arg(long = "steps", required = true)]
    pub steps: Vec<PathBuf>,
    /// Model the steps ran (built-in name or YAML shape file).
    #[arg(long, default_value = "llama-3.1-8b")]
    pub model: String,
    /// Write the table as Markdown here as well as printing it.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// The datasheet numbers the measured profile is set against (H200 SXM, spec §7.7).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Datasheet {
    pub hbm_gbps: f64,
    pub bf16_tflops: f64,
    pub fp8_tflops: f64,
    pub memory_gb: f64,
    pub nvlink_gbps: f64,
}

impl Datasheet {
    pub fn h200() -> Self {
        Datasheet {
            hbm_gbps: 4800.0,
            bf16_tflops: 989.0,
            fp8_tflops: 1979.0,
            memory_gb: 141.0,
            nvlink_gbps: 900.0,
        }
    }
}

/// The file `sweep calibrate gpu` writes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MeasuredProfileFile {
    pub name: String,
    /// Always "measured" for these files.
    pub source: String,
    pub datasheet: Datasheet,
    pub fitted: Fitted,
    pub measured: MeasuredCurves,
}

pub fn run(cmd: CalibrateCommand) -> Result<()> {
    match cmd {
        CalibrateCommand::Gpu(a) => gpu(a),
        CalibrateCommand::Check(a) => check(a),
    }
}

fn load_model(name: &str) -> Result<ModelShape> {
    if let Some(m) = ModelShape::builtin(name) {
        return Ok(m);
    }
    let p = Path::new(name);
    if !p.exists() {
        bail!(
            "--model {name}: neither a built-in model ({}) nor an existing YAML file",
            ModelShape::builtin_names().join(", ")
        );
    }
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    serde_yaml_ng::from_str(&text).with_context(|| {
        format!(
            "{}: not a model shape (fields: name, layers, hidden, q_heads, kv_heads, head_dim, ffn, vocab, moe)",
            p.display()
        )
    })
}

/// Writes `text` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("out"),
        std::process::id()
    ));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

pub fn load_profile(path: &Path) -> Result<MeasuredProfileFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml_ng::from_str(&text).with_context(|| {
        format!(
            "{}: not a measured hardware profile (expected name, source, datasheet, fitted, measured; \
             write one with `sweep calibrate gpu`)",
            path.display()
        )
    })
}

fn load_steps(path: &Path) -> Result<Vec<StepMeasurement>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected a JSON list of step measurements (mode, batch, ctx, tokens, measured_us, runner)",
            path.display()
        )
    })
}

#[cfg(not(feature = "cuda"))]
fn gpu(_a: GpuArgs) -> Result<()> {
    bail!("this sweep was built without GPU support; rebuild with `cargo build --release --features cuda`")
}

#[cfg(feature = "cuda")]
fn gpu(a: GpuArgs) -> Result<()> {
    use engine::calibrate::measure::{self, CalibrateOptions};
    let models = a.models.iter().map(|m| load_model(m)).collect::<Result<Vec<_>>>()?;
    let opts = if a.quick {
        let mut o = CalibrateOptions::quick(models, a.device, a.seed);
        if a.no_steps {
            o.steps.clear();
        }
        o
    } else {
        let mut o = CalibrateOptions::full(models, a.device, a.seed);
        if a.no_steps {
            o.steps.clear();
        }
        o
    };
    let dense = opts
        .models
        .iter()
        .find(|m| m.moe.is_none())
        .cloned()
        .unwrap_or_else(ModelShape::llama_3_1_8b);
    let run = measure::run(&opts, &mut |line| eprintln!("{line}")).context("GPU calibration")?;
    let ds = Datasheet::h200();
    let layer_bytes = 2.0 * dense.dense_layer_params() as f64;
    let fitted = run.curves.fit(ds.hbm_gbps, ds.bf16_tflops, ds.fp8_tflops, layer_bytes);
    let file = MeasuredProfileFile {
        name: a.name.clone(),
        source: "measured".into(),
        datasheet: ds,
        fitted,
        measured: run.curves,
    };
    let header = format!(
        "# Hardware profile measured by `sweep calibrate gpu` on {} ({}), driver {}, CUDA {}, cuBLAS {}.\n\
         # measured: curves; fitted: roofline parameters derived from them against the datasheet.\n",
        file.measured.device,
        file.measured.date,
        file.measured.driver,
        file.measured.cuda_driver,
        file.measured.cublas
    );
    let yaml = serde_yaml_ng::to_string(&file)?;
    write_atomic(&a.out, &format!("{header}{yaml}"))?;
    let steps_out = a.steps_out.unwrap_or_else(|| a.out.with_file_name(format!("{}-steps.json", a.name)));
    write_atomic(&steps_out, &serde_json::to_string_pretty(&run.steps)?)?;
    println!(
        "measured profile written to {} (steps: {})",
        a.out.display(),
        steps_out.display()
    );
    println!(
        "copy {:.0} GB/s (eta_bw {:.2}); bf16 peak {:.0} TFLOP/s (eta {:.2}); fp8 peak {:.0} TFLOP/s (eta {:.2}); \
         tau_layer {:.1} µs",
        file.measured.copy.gbps,
        fitted.eta_bw,
        fitted.eta_f_bf16 * ds.bf16_tflops,
        fitted.eta_f_bf16,
        fitted.eta_f_fp8 * ds.fp8_tflops,
        fitted.eta_f_fp8,
        fitted.tau_layer_us
    );
    Ok(())
}

/// The predicted-vs-measured table as Markdown, with the error summary per profile.
pub fn comparison_markdown(rows: &[StepComparison], datasheet: &Roofline) -> String {
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
        s.push_str(&format!(
            "Datasheet profile (HBM {:.0} GB/s, bf16 {:.0} TFLOP/s, eta_bw {}, eta_f {}, tau_layer {} µs): \
             median |error| {:.1} %, worst {:.1} %.\n",
            datasheet.hbm_gbps,
            datasheet.bf16_tflops,
            datasheet.eta_bw,
            datasheet.eta_f,
            datasheet.tau_layer_us,
            100.0 * med,
            100.0 * worst
        ));
    }
    s
}

fn check(a: CheckArgs) -> Result<()> {
    let profile = load_profile(&a.profile)?;
    let model = load_model(&a.model)?;
    let mut all = Vec::new();
    for p in &a.steps {
        all.extend(load_steps(p)?);
    }
    if all.is_empty() {
        bail!("no step measurements in {:?}", a.steps);
    }
    let datasheet = Roofline::h200_datasheet();
    let rows = steps::compare(&model, &all, &profile.measured, &datasheet);
    let md = comparison_markdown(&rows, &datasheet);
    print!("{md}");
    if let Some(p) = &a.markdown {
        write_atomic(p, &md)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::calibrate::steps::StepMode;

    #[test]
    fn unknown_model_error_names_the_built_ins() {
        let e = load_model("no-such-model").unwrap_err().to_string();
        assert!(e.contains("llama-3.1-8b") && e.contains("no-such-model"), "{e}");
    }

    #[test]
    fn markdown_reports_errors_per_row_and_summary() {
        let step = StepMeasurement {
            mode: StepMode::Decode,
            batch: 1,
            ctx: 1024,
            tokens: 1,
            measured_us: 1000.0,
            runner: "r".into(),
        };
        let rows = vec![StepComparison {
            step,
            predicted_measured_us: Some(1100.0),
            predicted_datasheet_us: 800.0,
        }];
        let md = comparison_markdown(&rows, &Roofline::h200_datasheet());
        assert!(md.contains("+10.0 %"), "{md}");
        assert!(md.contains("-20.0 %"), "{md}");
        assert!(md.contains("median |error| 10.0 %, worst 10.0 %"), "{md}");
    }

    #[test]
    fn profile_round_trips_and_bad_profile_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.yaml");
        let f = MeasuredProfileFile {
            name: "x".into(),
            source: "measured".into(),
            datasheet: Datasheet::h200(),
            fitted: Fitted::default(),
            measured: MeasuredCurves::default(),
        };
        write_atomic(&p, &serde_yaml_ng::to_string(&f).unwrap()).unwrap();
        assert_eq!(load_profile(&p).unwrap(), f);
        std::fs::write(&p, "name: [").unwrap();
        let e = format!("{:#}", load_profile(&p).unwrap_err());
        assert!(e.contains("x.yaml") && e.contains("sweep calibrate gpu"), "{e}");
    }
}
