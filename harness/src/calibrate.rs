//! `sweep calibrate`: measure a GPU into a hardware profile (`gpu`, feature `cuda`) and check
//! the cost model's step times against step times measured on it (`check`, runs anywhere).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use engine::GpuSpec;
use engine::ModelSpec;
use engine::calibrate::curves::{
    AttentionCurve, CopyPoint, Fitted, GemmCurve, MeasuredCurves, MoeCurve, PeerLayer, PeerRun, PrefillAttentionPoint, SustainedLoad,
};
use engine::calibrate::shapes::ModelShape;
use engine::calibrate::steps::{self, StepComparison, StepMeasurement};
use serde::Deserialize;

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
        CalibrateCommand::Gpu(a) => gpu(a),
        CalibrateCommand::ImportPeer(a) => import_peer(a),
        CalibrateCommand::Check(a) => check(a),
        CalibrateCommand::Report(a) => report(a),
        CalibrateCommand::Fit(a) => harness::cmd::fit::run(&a),
    }
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn load_model(name: &str) -> Result<ModelShape> {
    if let Some(m) = ModelShape::builtin(name) {
        return Ok(m);
    }
    let p = Path::new(name);
    if !p.exists() {
        bail!("--model {name}: neither a built-in model ({}) nor an existing YAML file", ModelShape::builtin_names().join(", "));
    }
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    serde_yaml_ng::from_str(&text).with_context(|| {
        format!("{}: not a model shape (fields: name, layers, hidden, q_heads, kv_heads, head_dim, ffn, vocab, moe)", p.display())
    })
}

/// Writes `text` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".{}.tmp{}", path.file_name().and_then(|n| n.to_str()).unwrap_or("out"), std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
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

fn load_steps(path: &Path) -> Result<Vec<StepMeasurement>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!("{}: expected a JSON list of step measurements (mode, batch, ctx, tokens, measured_us, runner)", path.display())
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
    let base = GpuSpec::lookup(&a.base).with_context(|| format!("--base {}", a.base))?;
    let dense = opts.models.iter().find(|m| m.moe.is_none()).cloned().unwrap_or_else(ModelShape::llama_3_1_8b);
    // cudarc panics when a CUDA library cannot be loaded; turn that into an error with the fix.
    let run = std::panic::catch_unwind(|| measure::run(&opts, &mut |line| eprintln!("{line}")))
        .map_err(|p| {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            anyhow::anyhow!(
                "could not load CUDA ({msg}); put the folders of libcuda (the driver's), libcublas, \
                 libcublasLt and libnvrtc (CUDA 13) on LD_LIBRARY_PATH"
            )
        })?
        .context("GPU calibration")?;
    let mut curves = run.curves;
    let ds = &base.datasheet;
    let layer_gemms: Vec<(u64, u64)> = dense.gemms().iter().filter(|g| !g.name.ends_with("lm_head")).map(|g| (g.n, g.k)).collect();
    let attn_bytes = (1024 * 2 * dense.kv_heads * dense.head_dim * 2) as f64;
    curves.fitted = curves.fit(
        ds.hbm_bandwidth / 1e9,
        ds.flops.bf16 / 1e12,
        ds.flops.fp8 / 1e12,
        2.0 * dense.dense_layer_params() as f64,
        &layer_gemms,
        attn_bytes,
    );
    let f = curves.fitted;
    let mut gpu = base.clone();
    gpu.name = a.name.clone();
    gpu.aliases = vec![];
    gpu.cost.eta_bw = f.eta_bw.min(1.0);
    gpu.cost.eta_flops = f.eta_f_bf16.min(1.0);
    gpu.cost.tau_layer_us = f.tau_layer_us;
    gpu.cost.calibrated = true;
    gpu.measured = Some(curves);
    write_atomic(&a.out, &profile_yaml(&gpu)?)?;
    let steps_out = a.steps_out.unwrap_or_else(|| a.out.with_file_name(format!("{}-steps.json", a.name)));
    write_atomic(&steps_out, &serde_json::to_string_pretty(&run.steps)?)?;
    println!("measured profile written to {} (steps: {})", a.out.display(), steps_out.display());
    println!(
        "copy {:.0} GB/s (eta_bw {:.2}); bf16 peak {:.0} TFLOP/s (eta {:.2}); fp8 peak {:.0} TFLOP/s (eta {:.2}); \
         tau_layer {:.1} µs, elementwise {:.1} µs per layer",
        f.eta_bw * ds.hbm_bandwidth / 1e9,
        f.eta_bw,
        f.eta_f_bf16 * ds.flops.bf16 / 1e12,
        f.eta_f_bf16,
        f.eta_f_fp8 * ds.flops.fp8 / 1e12,
        f.eta_f_fp8,
        f.tau_layer_us,
        f.tau_elementwise_us
    );
    Ok(())
}

/// What scripts/calibrate_torch.py writes (the parts imported).
#[derive(Deserialize)]
struct PeerJson {
    device: String,
    torch: String,
    cuda: Option<String>,
    copy: CopyPoint,
    gemm: Vec<PeerGemm>,
    #[serde(default)]
    moe: Vec<MoeCurve>,
    attention: Option<AttentionCurve>,
    #[serde(default)]
    attention_prefill: Vec<PrefillAttentionPoint>,
    layer: Option<PeerLayer>,
    #[serde(default)]
    sustained: Option<SustainedLoad>,
}

#[derive(Deserialize)]
struct PeerGemm {
    name: String,
    n: u64,
    k: u64,
    dtype: engine::calibrate::Dtype,
    points: Vec<PeerGemmPoint>,
}

#[derive(Deserialize)]
struct PeerGemmPoint {
    m: u64,
    us: Option<f64>,
    tflops: Option<f64>,
}

/// The peer chain's per-layer terms from one layer timed alone (the peer script runs the
/// Llama-3.1-8B shape): at decode, what the layer costs beyond its GEMMs and attention; at
/// prefill, how much more elementwise traffic than one fused pass per kernel it moves.
fn peer_fitted(m: &MeasuredCurves, layer: &PeerLayer, shape: &ModelShape) -> Option<Fitted> {
    use engine::calibrate::Dtype;
    let pc = m.with_peer_kernels()?;
    let gemms: Vec<(u64, u64)> = shape.gemms().iter().filter(|g| !g.name.ends_with("lm_head")).map(|g| (g.n, g.k)).collect();
    let gemm_us = |rows: f64| -> Option<f64> { gemms.iter().map(|&(n, k)| pc.gemm_time_us(n, k, Dtype::Bf16, rows)).sum() };
    let kv = (1024 * 2 * shape.kv_heads * shape.head_dim * 2) as f64;
    let tau = (layer.decode_us - gemm_us(1.0)? - pc.attention.as_ref()?.time_us(1.0, kv)?).max(0.0);
    let t = layer.prefill_tokens as f64;
    let attn_flops = attn_flops_of(shape, t);
    let attn_us = attn_flops / (pc.prefill_attention_tflops(t)? * 1e6);
    let rest = layer.prefill_us - gemm_us(t)? - attn_us - tau;
    let fused_us = t * shape.elementwise_bytes_per_token(1, 1) / (pc.copy.gbps * 1e3);
    let (sustained_compute, sustained_bandwidth) = m
        .peer
        .as_ref()
        .and_then(|p| p.sustained)
        .map_or((0.0, 0.0), |s| sustained_terms(&pc, &s, &gemms, attn_flops_of(shape, s.prefill_layer.tokens as f64)));
    Some(Fitted {
        tau_elementwise_us: tau,
        elementwise_traffic: (rest / fused_us).max(0.0),
        sustained_compute,
        sustained_bandwidth,
        ..m.fitted
    })
}

/// Causal attention score FLOPs of one layer for a chunk of `t` tokens from an empty cache.
fn attn_flops_of(shape: &ModelShape, t: f64) -> f64 {
    4.0 * (shape.q_heads * shape.head_dim) as f64 * t * t / 2.0
}

/// The steady-load terms: the prefill layer's extra time per unit of its tensor-core time at
/// the best measured GEMM rate, and decode attention's extra time per unit of its streaming
/// time at copy bandwidth.
fn sustained_terms(pc: &MeasuredCurves, s: &SustainedLoad, gemms: &[(u64, u64)], attn_flops: f64) -> (f64, f64) {
    use engine::calibrate::Dtype;
    let (p, a) = (&s.prefill_layer, &s.decode_attention);
    let flops = 2.0 * p.tokens as f64 * gemms.iter().map(|&(n, k)| (n * k) as f64).sum::<f64>() + attn_flops;
    let compute = pc.peak_tflops(Dtype::Bf16).map_or(0.0, |tf| (p.steady_us - p.burst_us) / (flops / (tf * 1e6)));
    let stream_us = a.kv_bytes as f64 / (pc.copy.gbps * 1e3);
    let bandwidth = if stream_us > 0.0 { (a.steady_us - a.burst_us) / stream_us } else { 0.0 };
    (compute.max(0.0), bandwidth.max(0.0))
}

fn import_peer(a: ImportPeerArgs) -> Result<()> {
    let path = a.profile.display().to_string();
    let mut g = GpuSpec::from_file(&a.profile).with_context(|| format!("reading {path}"))?;
    let text = std::fs::read_to_string(&a.peer).with_context(|| format!("reading {}", a.peer.display()))?;
    let p: PeerJson = serde_json::from_str(&text).with_context(|| {
        format!("{}: not the JSON of scripts/calibrate_torch.py --out (device, torch, copy, gemm, attention)", a.peer.display())
    })?;
    let m = g.measured.as_mut().with_context(|| format!("{path} has no measured section; run `sweep calibrate gpu` first"))?;
    if p.device != m.device {
        bail!("{} was measured on {}, the profile on {}: import runs from the same GPU only", a.peer.display(), p.device, m.device);
    }
    let gemm = p
        .gemm
        .into_iter()
        .map(|c| GemmCurve {
            name: c.name,
            n: c.n,
            k: c.k,
            dtype: c.dtype,
            // Points PyTorch refused (e.g. an fp8 layout at M = 1) have no time.
            points: c
                .points
                .into_iter()
                .filter_map(|q| Some(engine::calibrate::curves::GemmPoint { m: q.m, us: q.us?, tflops: q.tflops? }))
                .collect(),
        })
        .collect();
    m.peer = Some(PeerRun {
        name: format!("PyTorch {} (CUDA {})", p.torch, p.cuda.unwrap_or_default()),
        copy: p.copy,
        gemm,
        moe: p.moe,
        attention: p.attention,
        layer: p.layer,
        sustained: p.sustained,
        fitted: None,
    });
    m.prefill_attention = p.attention_prefill;
    if let Some(layer) = p.layer {
        let f = peer_fitted(m, &layer, &ModelShape::llama_3_1_8b());
        if let (Some(f), Some(peer)) = (f, m.peer.as_mut()) {
            peer.fitted = Some(f);
            // The steady-load terms are the GPU's (its power limit), relative to the measured
            // peak rate and copy bandwidth, so the profile's own curves take them too.
            m.fitted.sustained_compute = f.sustained_compute;
            m.fitted.sustained_bandwidth = f.sustained_bandwidth;
        }
    }
    write_atomic(&a.profile, &profile_yaml(&g)?)?;
    println!("{}: peer run and prefill-attention curve imported", path);
    Ok(())
}

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

/// The profile's ceilings and curves as Markdown, next to the datasheet and the peer run.
pub fn report_markdown(g: &GpuSpec, ms: &[u64]) -> Result<String> {
    use engine::calibrate::Dtype;
    let m = g.measured.as_ref().context("profile has no measured section")?;
    let peer = m.peer.as_ref();
    let pname = peer.map_or("peer (not run)".to_string(), |p| p.name.clone());
    let ds = &g.datasheet;
    let f = &m.fitted;
    let mut s = format!(
        "Measured {} on {} ({} SMs), driver {}, CUDA {}, cuBLAS {}, NVRTC {}; peer: {}.\n\n",
        m.date, m.device, m.sm_count, m.driver, m.cuda_driver, m.cublas, m.nvrtc, pname
    );
    let peer_peak = |d: Dtype| {
        peer.and_then(|p| p.gemm.iter().filter(|c| c.dtype == d).flat_map(|c| c.points.iter().map(|q| q.tflops)).reduce(f64::max))
    };
    let opt = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.0}"));
    s.push_str("| ceiling | datasheet | sweep (cudarc) | ratio to datasheet | ");
    s.push_str(&format!("{pname} | sweep / peer |\n|---|---:|---:|---:|---:|---:|\n"));
    let rows = [
        (
            "HBM copy, GB/s (read + write; best of SM kernel and memcpy)",
            ds.hbm_bandwidth / 1e9,
            m.copy.gbps,
            peer.map(|p| p.copy.gbps.max(p.copy.memcpy_gbps)),
        ),
        ("  SM copy kernel in a graph, GB/s", ds.hbm_bandwidth / 1e9, m.copy.kernel_gbps, peer.map(|p| p.copy.gbps)),
        ("  memcpy (eager), GB/s", ds.hbm_bandwidth / 1e9, m.copy.memcpy_gbps, peer.map(|p| p.copy.memcpy_gbps)),
        (
            "dense bf16 GEMM, best TFLOP/s over shapes and M",
            ds.flops.bf16 / 1e12,
            m.peak_tflops(Dtype::Bf16).unwrap_or(0.0),
            peer_peak(Dtype::Bf16),
        ),
        (
            "dense fp8 GEMM, best TFLOP/s over shapes and M",
            ds.flops.fp8 / 1e12,
            m.peak_tflops(Dtype::Fp8).unwrap_or(0.0),
            peer_peak(Dtype::Fp8),
        ),
    ];
    for (name, d, v, p) in rows {
        s.push_str(&format!(
            "| {name} | {d:.0} | {v:.0} | {:.2} | {} | {} |\n",
            v / d,
            opt(p),
            p.map_or("n/a".into(), |p| format!("{:.2}", v / p))
        ));
    }
    s.push_str(&format!(
        "\nFitted: eta_bw {:.2}, eta_flops bf16 {:.2} / fp8 {:.2}, decode-attention bandwidth {:.2} of datasheet; \
         per layer at batch 1: tau_layer {:.1} µs beyond weight streaming, elementwise kernels {:.1} µs; \
         launch: eager {:.2} µs, graph node {:.2} µs, graph replay {:.2} µs; one decode layer (batch 1, 1K context, \
         {} kernels) {:.1} µs.\n",
        f.eta_bw,
        f.eta_f_bf16,
        f.eta_f_fp8,
        f.eta_bw_attention,
        f.tau_layer_us,
        f.tau_elementwise_us,
        m.launch.eager_launch_us,
        m.launch.graph_node_us,
        m.launch.graph_launch_us,
        m.launch.layer_chain_kernels,
        m.launch.layer_chain_us
    ));
    if let Some((pl, pf)) = peer.and_then(|p| p.layer.zip(p.fitted)) {
        s.push_str(&format!(
            "\nPeer chain, one layer as a graph: decode (batch 1, 1K context) {:.1} µs, of which {:.1} µs beyond \
             its GEMMs and attention; prefill of {} tokens {:.1} µs, elementwise traffic {:.1}× one fused pass per kernel.\n",
            pl.decode_us, pf.tau_elementwise_us, pl.prefill_tokens, pl.prefill_us, pf.elementwise_traffic
        ));
    }
    s.push_str(&format!(
        "\nGEMM `Y[M,N] = X[M,K]·W[N,K]ᵀ`, µs (TFLOP/s); ratio = peer time / sweep time.\n\n\
         | weight | N×K | dtype | M | sweep µs | sweep TFLOP/s | {pname} µs | peer TFLOP/s | ratio |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|\n"
    ));
    for c in &m.gemm {
        let pc = peer.and_then(|p| p.gemm.iter().find(|q| q.n == c.n && q.k == c.k && q.dtype == c.dtype));
        for q in c.points.iter().filter(|q| ms.contains(&q.m)) {
            let pp = pc.and_then(|pc| pc.points.iter().find(|x| x.m == q.m));
            s.push_str(&format!(
                "| {} | {}×{} | {} | {} | {:.1} | {:.0} | {} | {} | {} |\n",
                c.name,
                c.n,
                c.k,
                c.dtype.as_str(),
                q.m,
                q.us,
                q.tflops,
                pp.map_or("n/a".into(), |x| format!("{:.1}", x.us)),
                pp.map_or("n/a".into(), |x| format!("{:.0}", x.tflops)),
                pp.map_or("n/a".into(), |x| format!("{:.2}", x.us / q.us))
            ));
        }
    }
    if !m.moe.is_empty() {
        s.push_str(&format!(
            "\nBatched expert GEMM (tokens × top-k rows spread evenly over the experts hit), µs.\n\n\
             | experts | dtype | tokens | experts hit | rows each | sweep µs | weight GB/s | TFLOP/s | {pname} µs |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|\n"
        ));
        for c in &m.moe {
            let pc = peer.and_then(|p| p.moe.iter().find(|q| q.n == c.n && q.k == c.k && q.dtype == c.dtype));
            for q in c.points.iter().filter(|q| ms.contains(&q.tokens)) {
                let pp = pc.and_then(|pc| pc.points.iter().find(|x| x.tokens == q.tokens));
                s.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.0} | {} |\n",
                    c.name,
                    c.dtype.as_str(),
                    q.tokens,
                    q.active_experts,
                    q.rows_per_expert,
                    q.us,
                    q.weight_gbps,
                    q.tflops,
                    pp.map_or("n/a".into(), |x| format!("{:.1}", x.us))
                ));
            }
        }
    }
    if let Some(a) = &m.attention {
        let pa = peer.and_then(|p| p.attention.as_ref());
        s.push_str(&format!(
            "\nDecode attention, one layer ({} KV heads × {} query heads each × {}, bf16 KV), µs (GB/s of K + V).\n\n\
             | batch | context | KV MB | sweep split-K kernel µs | GB/s | {pname} SDPA µs | GB/s |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
            a.kv_heads, a.q_per_kv, a.head_dim
        ));
        let mut pts = a.points.clone();
        pts.sort_by_key(|p| (p.batch, p.ctx));
        for q in pts {
            let pp = pa.and_then(|pa| pa.points.iter().find(|x| x.batch == q.batch && x.ctx == q.ctx));
            s.push_str(&format!(
                "| {} | {} | {:.0} | {:.1} | {:.0} | {} | {} |\n",
                q.batch,
                q.ctx,
                q.kv_bytes as f64 / 1e6,
                q.us,
                q.gbps,
                pp.map_or("n/a".into(), |x| format!("{:.1}", x.us)),
                pp.map_or("n/a".into(), |x| format!("{:.0}", x.gbps))
            ));
        }
    }
    if !m.prefill_attention.is_empty() {
        s.push_str(&format!(
            "\nCausal prefill attention (flash, {pname}), one layer, prefix 0.\n\n| tokens | µs | TFLOP/s |\n|---:|---:|---:|\n"
        ));
        for q in &m.prefill_attention {
            s.push_str(&format!("| {} | {:.1} | {:.0} |\n", q.tokens, q.us, q.tflops));
        }
    }
    s.push_str("\nCorrectness checks (fresh random inputs, outputs poisoned first, float64 CPU reference):");
    for c in &m.checks {
        s.push_str(&format!(" {} {:.1e}{};", c.name, c.rel_err, if c.pass { "" } else { " FAILED" }));
    }
    s.push('\n');
    Ok(s)
}

fn report(a: ReportArgs) -> Result<()> {
    let g = load_profile(&a.profile)?;
    let md = report_markdown(&g, &a.ms)?;
    print!("{md}");
    if let Some(p) = &a.markdown {
        write_atomic(p, &md)?;
    }
    Ok(())
}

fn check(a: CheckArgs) -> Result<()> {
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
        write_atomic(&p, &profile_yaml(&g).unwrap()).unwrap();
        assert_eq!(GpuSpec::from_file(&p).unwrap(), g);
    }
}
