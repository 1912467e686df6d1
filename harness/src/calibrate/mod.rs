//! `sweep calibrate`: measure a GPU into a hardware profile (`gpu`, feature `cuda`) and check
//! the cost model's step times against step times measured on it (`check`, runs anywhere).
//!
//! Here: the subcommands, their arguments and what they share (model shapes, profiles, atomic
//! writes); measuring is `gpu.rs`, the peer import `peer.rs`, the step-time comparison
//! `check.rs` and the profile's tables `report.rs`.

mod check;
mod gpu;
mod peer;
mod report;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use engine::GpuSpec;
use engine::calibrate::shapes::ModelShape;
use engine::calibrate::steps::StepMeasurement;

#[derive(Subcommand)]
pub enum CalibrateCommand {
    /// Measure the GPU (copy bandwidth, GEMM curves per weight shape and M, expert GEMMs,
    /// decode attention, launch overheads, real decode steps) into a hardware profile.
    Gpu(GpuArgs),
    /// Add a peer framework's run of the same measurements (scripts/calibrate_torch.py) to a
    /// measured profile: side-by-side figures and the prefill-attention curve.
    ImportPeer(ImportPeerArgs),
    /// Compare step times measured on a GPU with the cost model's predictions from a measured
    /// profile and from the datasheet profile.
    Check(CheckArgs),
    /// Print a measured profile's ceilings and curves as Markdown tables, side by side with
    /// the datasheet and the peer run.
    Report(ReportArgs),
    /// Fit the cost model to measured serving results (a run directory or a results table) by
    /// replaying the same recipes on the virtual clock; writes a fitted hardware profile.
    Fit(Box<harness::cmd::fit::FitArgs>),
}

#[derive(Args)]
pub struct ReportArgs {
    /// Measured hardware profile (name or YAML).
    #[arg(long, default_value = "h200-measured")]
    pub profile: String,
    /// M values shown in the GEMM table.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128,1024,4096,16384")]
    pub ms: Vec<u64>,
    /// Write the tables here as well as printing them.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

#[derive(Args)]
pub struct ImportPeerArgs {
    /// Measured hardware profile to update in place.
    #[arg(long)]
    pub profile: PathBuf,
    /// JSON written by scripts/calibrate_torch.py --out.
    #[arg(long)]
    pub peer: PathBuf,
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
    /// Datasheet profile of this GPU (name or YAML) whose datasheet and host-side costs the
    /// measured profile keeps.
    #[arg(long, default_value = "h200")]
    pub base: String,
    /// Where the profile YAML goes (e.g. engine/profiles/hardware/h200-measured.yaml).
    #[arg(long)]
    pub out: PathBuf,
    /// Where the measured step times go (JSON); default: next to --out as <name>-steps.json.
    #[arg(long)]
    pub steps_out: Option<PathBuf>,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Measured hardware profile (name or YAML, from `sweep calibrate gpu`).
    #[arg(long, default_value = "h200-measured")]
    pub profile: String,
    /// Datasheet hardware profile to compare with (name or YAML).
    #[arg(long, default_value = "h200")]
    pub datasheet: String,
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

pub fn run(cmd: CalibrateCommand) -> Result<()> {
    match cmd {
        CalibrateCommand::Gpu(a) => gpu::gpu(a),
        CalibrateCommand::ImportPeer(a) => peer::import_peer(a),
        CalibrateCommand::Check(a) => check::check(a),
        CalibrateCommand::Report(a) => report::report(a),
        CalibrateCommand::Fit(a) => harness::cmd::fit::run(&a),
    }
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) fn load_model(name: &str) -> Result<ModelShape> {
    if let Some(m) = ModelShape::builtin(name) {
        return Ok(m);
    }
    let p = Path::new(name);
    if !p.exists() {
        bail!("--model {name}: neither a built-in model ({}) nor an existing YAML file", ModelShape::builtin_names().join(", "));
    }
    harness::yaml::load_typed(p).map_err(|e| anyhow::anyhow!("{e}")).with_context(|| {
        format!("{}: not a model shape (fields: name, layers, hidden, q_heads, kv_heads, head_dim, ffn, vocab, moe)", p.display())
    })
}

pub fn load_profile(name: &str) -> Result<GpuSpec> {
    let g = GpuSpec::lookup(name).with_context(|| format!("hardware profile {name}"))?;
    if g.measured.is_none() {
        bail!("hardware profile {name} has no `measured` section; write one with `sweep calibrate gpu --out <file>`");
    }
    Ok(g)
}

/// The YAML of a measured profile, with a header saying where it came from.
pub fn profile_yaml(g: &GpuSpec) -> Result<String> {
    let m = g.measured.as_ref().context("profile has no measured section")?;
    let header = format!(
        "# Hardware profile measured by `sweep calibrate gpu` on {} ({}), driver {}, CUDA {}, cuBLAS {}.\n\
         # datasheet: published facts; cost: roofline parameters fitted from the curves (used where no\n\
         # curve applies); measured: the curves the cost model sums per operator.\n",
        m.device, m.date, m.driver, m.cuda_driver, m.cublas
    );
    Ok(format!("{header}{}", serde_yaml_ng::to_string(g)?))
}

pub(super) fn load_steps(path: &Path) -> Result<Vec<StepMeasurement>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!("{}: expected a JSON list of step measurements (mode, batch, ctx, tokens, measured_us, runner)", path.display())
    })
}
