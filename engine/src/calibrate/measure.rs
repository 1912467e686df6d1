//! The calibration sweep on a real GPU: ceilings, GEMM and attention curves, launch overheads,
//! and a real decode-step chain of a dense model for checking the cost model (`chain.rs`).

use super::chain::run_decode_steps;
use super::curves::*;
use super::gpu::{AttnLayout, DevBuf, Gpu, GpuError, Result, correctness_checks};
use super::shapes::ModelShape;
use super::steps::StepMeasurement;

/// What to measure.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    pub device: usize,
    /// Models whose weight shapes are measured (deduplicated by shape).
    pub models: Vec<ModelShape>,
    /// M values (tokens per step) for GEMM and expert curves.
    pub ms: Vec<u64>,
    /// Decode-attention sweep: batch sizes and context lengths.
    pub attn_batches: Vec<u64>,
    pub attn_ctx: Vec<u64>,
    /// Decode steps (batch, context) run as real GPU work on the first dense model; empty skips.
    pub steps: Vec<(u64, u64)>,
    pub seed: u64,
}

impl CalibrateOptions {
    pub fn full(models: Vec<ModelShape>, device: usize, seed: u64) -> Self {
        let ms = [1u64, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];
        let mut steps = Vec::new();
        for b in [1u64, 8, 32, 64, 128, 256] {
            for c in [1024u64, 4096, 16384, 65536] {
                if b * c <= 2 << 20 {
                    steps.push((b, c));
                }
            }
        }
        CalibrateOptions {
            device,
            models,
            ms: ms.to_vec(),
            attn_batches: vec![1, 8, 32, 128],
            attn_ctx: (10..=18).map(|p| 1u64 << p).collect(),
            steps,
            seed,
        }
    }

    /// A short sweep for smoke runs.
    pub fn quick(models: Vec<ModelShape>, device: usize, seed: u64) -> Self {
        CalibrateOptions {
            device,
            models,
            ms: vec![1, 16, 256, 4096],
            attn_batches: vec![1, 32],
            attn_ctx: vec![1024, 32768],
            steps: vec![(1, 1024), (32, 4096)],
            seed,
        }
    }
}

/// A calibration run's results.
pub struct CalibrationRun {
    pub curves: MeasuredCurves,
    pub steps: Vec<StepMeasurement>,
}

const GEMM_TARGET_MS: f64 = 3.0;
const REPLAYS: usize = 9;

/// Runs the whole sweep, reporting progress lines through `log`.
pub fn run(opts: &CalibrateOptions, log: &mut dyn FnMut(&str)) -> Result<CalibrationRun> {
    let gpu = open(opts)?;
    let (device, sm_count, memory_bytes) = gpu.describe()?;
    let (cuda_driver, cublas, nvrtc) = gpu.versions()?;
    log(&format!(
        "{device}: {sm_count} SMs, {:.0} GiB; CUDA {cuda_driver}, cuBLAS {cublas}, NVRTC {nvrtc}",
        memory_bytes as f64 / (1u64 << 30) as f64
    ));
    let checks = check(&gpu, opts.seed, log)?;

    let copy = measure_copy(&gpu, opts.seed)?;
    log(&format!("copy: kernel {:.0} GB/s, memcpy {:.0} GB/s (read + write)", copy.kernel_gbps, copy.memcpy_gbps));
    let mut launch = measure_launch(&gpu)?;
    log(&format!(
        "launch: eager {:.2} µs, graph node {:.2} µs, graph replay {:.2} µs",
        launch.eager_launch_us, launch.graph_node_us, launch.graph_launch_us
    ));
    let gemm = measure_gemms(&gpu, opts, log)?;
    let moe = measure_moes(&gpu, opts, log)?;
    let attention = measure_attention(&gpu, &opts.attn_batches, &opts.attn_ctx, opts.seed)?;
    for p in &attention.points {
        log(&format!("attn batch {:>4} ctx {:>7}: {:>9.1} µs {:>6.0} GB/s", p.batch, p.ctx, p.us, p.gbps));
    }

    let mut steps = Vec::new();
    if !opts.steps.is_empty() {
        let dense = opts.models.iter().find(|m| m.moe.is_none() && m.head_dim == 128).cloned().unwrap_or_else(ModelShape::llama_3_1_8b);
        let (chain_us, kernels, s) = run_decode_steps(&gpu, &dense, &opts.steps, opts.seed, log)?;
        launch.layer_chain_us = chain_us;
        launch.layer_chain_kernels = kernels;
        steps = s;
    }

    let curves = MeasuredCurves {
        date: today_utc(),
        device,
        driver: driver_version(),
        cuda_driver,
        cublas,
        nvrtc,
        sm_count,
        memory_bytes,
        method: format!(
            "CUDA events around replays of a captured CUDA graph of n copies of each operation \
             (n sized for ~{GEMM_TARGET_MS} ms), after 3 eager warm-ups; median of {REPLAYS} replays / n; \
             random inputs (never zeros); weights rotated over copies totalling >= 512 MB so each \
             operation reads them from HBM; bf16 through cublasGemmEx, fp8 e4m3 -> bf16 through \
             cublasLtMatmul; attention by an NVRTC split-K kernel"
        ),
        copy,
        gemm,
        moe,
        attention: Some(attention),
        launch,
        checks,
        fitted: Fitted::default(),
        prefill_attention: Vec::new(),
        peer: None,
    };
    Ok(CalibrationRun { curves, steps })
}

/// Opens the device with the attention kernel compiled for the first model whose layout
/// it supports (Llama 3.1 8B's otherwise).
fn open(opts: &CalibrateOptions) -> Result<Gpu> {
    let attn_model =
        opts.models.iter().find(|m| m.head_dim == 128 && m.q_heads % m.kv_heads == 0).cloned().unwrap_or_else(ModelShape::llama_3_1_8b);
    let layout =
        AttnLayout { kv_heads: attn_model.kv_heads as u32, q_per_kv: (attn_model.q_heads / attn_model.kv_heads) as u32, head_dim: 128 };
    Gpu::new(opts.device, layout)
}

/// Runs the correctness checks; a failed one stops the run before anything is timed.
fn check(gpu: &Gpu, seed: u64, log: &mut dyn FnMut(&str)) -> Result<Vec<CheckResult>> {
    let checks = correctness_checks(gpu, seed)?;
    for c in &checks {
        log(&format!(
            "check {:<20} rel err {:.2e} (tolerance {:.0e}) {}",
            c.name,
            c.rel_err,
            c.tolerance,
            if c.pass { "ok" } else { "FAILED" }
        ));
    }
    if let Some(bad) = checks.iter().find(|c| !c.pass) {
        return Err(GpuError::Other(format!(
            "correctness check {} failed (relative error {:.3e}); refusing to time a wrong kernel",
            bad.name, bad.rel_err
        )));
    }
    Ok(checks)
}

/// GEMM curves of every distinct weight shape of the models, bf16 and FP8.
fn measure_gemms(gpu: &Gpu, opts: &CalibrateOptions, log: &mut dyn FnMut(&str)) -> Result<Vec<GemmCurve>> {
    let mut gemm = Vec::new();
    let mut seen = Vec::new();
    for model in &opts.models {
        for shape in model.gemms() {
            if seen.contains(&(shape.n, shape.k)) {
                continue;
            }
            seen.push((shape.n, shape.k));
            for dtype in [Dtype::Bf16, Dtype::Fp8] {
                let c = measure_gemm(gpu, log, &shape.name, shape.n, shape.k, dtype, &opts.ms, opts.seed)?;
                let best = c.points.iter().map(|p| p.tflops).fold(0.0, f64::max);
                log(&format!(
                    "gemm {:<32} {:>6}x{:<6} {}: M={} {:.1} µs, best {:.0} TFLOP/s",
                    shape.name,
                    shape.n,
                    shape.k,
                    dtype.as_str(),
                    c.points.first().map_or(0, |p| p.m),
                    c.points.first().map_or(f64::NAN, |p| p.us),
                    best
                ));
                gemm.push(c);
            }
        }
    }
    Ok(gemm)
}

/// Routed-expert curves of the MoE models, bf16 and FP8.
fn measure_moes(gpu: &Gpu, opts: &CalibrateOptions, log: &mut dyn FnMut(&str)) -> Result<Vec<MoeCurve>> {
    let mut moe = Vec::new();
    for model in &opts.models {
        if let Some(m) = &model.moe {
            for (name, n, k) in [("expert_gate_up", 2 * m.expert_ffn, model.hidden), ("expert_down", model.hidden, m.expert_ffn)] {
                for dtype in [Dtype::Bf16, Dtype::Fp8] {
                    let name = format!("{}/{name}", model.name);
                    let c = measure_moe(gpu, log, &name, n, k, dtype, m.experts, m.top_k, &opts.ms, opts.seed)?;
                    log(&format!(
                        "moe  {:<32} {}: T={} {:.1} µs, T={} {:.1} µs",
                        name,
                        dtype.as_str(),
                        c.points.first().map_or(0, |p| p.tokens),
                        c.points.first().map_or(f64::NAN, |p| p.us),
                        c.points.last().map_or(0, |p| p.tokens),
                        c.points.last().map_or(0.0, |p| p.us)
                    ));
                    moe.push(c);
                }
            }
        }
    }
    Ok(moe)
}

fn today_utc() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10].to_string()
}

/// The NVIDIA driver version, from nvidia-smi or /proc; "unknown" when neither answers.
fn driver_version() -> String {
    if let Ok(out) = std::process::Command::new("nvidia-smi").args(["--query-gpu=driver_version", "--format=csv,noheader"]).output()
        && out.status.success()
    {
        let v = String::from_utf8_lossy(&out.stdout);
        if let Some(line) = v.lines().next().filter(|l| !l.trim().is_empty()) {
            return line.trim().to_string();
        }
    }
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|s| {
            s.split_whitespace().find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.')).map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into())
}

fn measure_copy(gpu: &Gpu, seed: u64) -> Result<CopyPoint> {
    let bytes = 2usize << 30;
    let src = gpu.alloc(bytes)?;
    let dst = gpu.alloc(bytes)?;
    gpu.fill_bf16(&src, bytes / 2, seed + 11, 1.0)?;
    let us = gpu.time_graph(20.0, REPLAYS, &mut |_| gpu.copy_kernel(dst.ptr, src.ptr, bytes))?;
    gpu.copy(dst.ptr, src.ptr, bytes)?;
    let mut memcpy = Vec::new();
    for _ in 0..REPLAYS {
        let ms = gpu.time_once(&mut || {
            for _ in 0..10 {
                gpu.copy(dst.ptr, src.ptr, bytes)?;
            }
            Ok(())
        })?;
        memcpy.push(ms * 1e3 / 10.0);
    }
    let memcpy_us = super::gpu::median(&mut memcpy);
    let best = us.min(memcpy_us);
    Ok(CopyPoint {
        bytes: bytes as u64,
        us: best,
        gbps: 2.0 * bytes as f64 / best / 1e3,
        kernel_gbps: 2.0 * bytes as f64 / us / 1e3,
        memcpy_gbps: 2.0 * bytes as f64 / memcpy_us / 1e3,
    })
}

fn measure_launch(gpu: &Gpu) -> Result<LaunchOverheads> {
    let n = 2000;
    gpu.empty_kernel()?;
    gpu.sync()?;
    let ms = gpu.time_once(&mut || {
        for _ in 0..n {
            gpu.empty_kernel()?;
        }
        Ok(())
    })?;
    let graph_node_us = gpu.graph_replay_us(n, REPLAYS, &mut |_| gpu.empty_kernel())?;
    let graph_launch_us = gpu.graph_replay_us(1, 51, &mut |_| gpu.empty_kernel())?;
    Ok(LaunchOverheads {
        eager_launch_us: ms * 1e3 / n as f64,
        graph_node_us,
        graph_launch_us,
        layer_chain_us: 0.0,
        layer_chain_kernels: 0,
    })
}

/// Copies of a weight so that a rotation through them reads from HBM (≥ 512 MB in all).
fn weight_copies(bytes: usize) -> usize {
    (512usize << 20).div_ceil(bytes).clamp(1, 16)
}

fn fill(gpu: &Gpu, buf: &DevBuf, dtype: Dtype, elems: usize, seed: u64) -> Result<()> {
    match dtype {
        Dtype::Bf16 => gpu.fill_bf16(buf, elems, seed, 1.0),
        Dtype::Fp8 => gpu.fill_fp8(buf, elems, seed),
    }
}

#[allow(clippy::too_many_arguments)]
fn measure_gemm(
    gpu: &Gpu,
    log: &mut dyn FnMut(&str),
    name: &str,
    n: u64,
    k: u64,
    dtype: Dtype,
    ms: &[u64],
    seed: u64,
) -> Result<GemmCurve> {
    let (n, k) = (n as usize, k as usize);
    let eb = dtype.bytes() as usize;
    let max_m = *ms.iter().max().unwrap_or(&1) as usize;
    let wbytes = n * k * eb;
    let copies = weight_copies(wbytes);
    let w = gpu.alloc(wbytes * copies)?;
    fill(gpu, &w, dtype, n * k * copies, seed + 21)?;
    let x = gpu.alloc(max_m * k * eb)?;
    fill(gpu, &x, dtype, max_m * k, seed + 22)?;
    let y = gpu.alloc(max_m * n * 2)?;
    let mut points = Vec::new();
    for &m in ms {
        let mu = m as usize;
        let timed = || -> Result<f64> {
            Ok(match dtype {
                Dtype::Bf16 => gpu.time_graph(GEMM_TARGET_MS, REPLAYS, &mut |i| {
                    let wp = w.ptr + ((i % copies) * wbytes) as u64;
                    gpu.gemm_bf16(mu, n, k, wp, x.ptr, y.ptr)
                })?,
                Dtype::Fp8 => {
                    let plan = gpu.plan_fp8(1, mu, n, k)?;
                    gpu.time_graph(GEMM_TARGET_MS, REPLAYS, &mut |i| {
                        let wp = w.ptr + ((i % copies) * wbytes) as u64;
                        gpu.gemm_fp8(&plan, wp, x.ptr, y.ptr)
                    })?
                }
            })
        };
        // A shape the library refuses at one M (e.g. an fp8 layout) leaves a gap, not a failed run.
        let us = match timed() {
            Ok(us) => us,
            Err(e) => {
                log(&format!("gemm {name} {} M={m}: skipped: {e}", dtype.as_str()));
                continue;
            }
        };
        points.push(GemmPoint { m, us, tflops: 2.0 * m as f64 * n as f64 * k as f64 / us / 1e6 });
    }
    Ok(GemmCurve { name: name.to_string(), n: n as u64, k: k as u64, dtype, points })
}

/// Expected experts hit by `tokens` tokens routed uniformly to `top_k` of `experts`.
pub fn experts_hit(experts: u64, top_k: u64, tokens: u64) -> u64 {
    let e = experts as f64;
    let f = 1.0 - (1.0 - top_k as f64 / e).powf(tokens as f64);
    ((e * f).round() as u64).clamp(1, (tokens * top_k).min(experts))
}

#[allow(clippy::too_many_arguments)]
fn measure_moe(
    gpu: &Gpu,
    log: &mut dyn FnMut(&str),
    name: &str,
    n: u64,
    k: u64,
    dtype: Dtype,
    experts: u64,
    top_k: u64,
    tokens: &[u64],
    seed: u64,
) -> Result<MoeCurve> {
    let (nu, ku) = (n as usize, k as usize);
    let eb = dtype.bytes() as usize;
    let wbytes = nu * ku * eb;
    let w = gpu.alloc(wbytes * experts as usize)?;
    fill(gpu, &w, dtype, nu * ku * experts as usize, seed + 31)?;
    let max_rows = tokens.iter().map(|t| t * top_k).max().unwrap_or(1) as usize + experts as usize;
    let x = gpu.alloc(max_rows * ku * eb)?;
    fill(gpu, &x, dtype, max_rows * ku, seed + 32)?;
    let y = gpu.alloc(max_rows * nu * 2)?;
    let mut points = Vec::new();
    for &t in tokens {
        let active = experts_hit(experts, top_k, t) as usize;
        let rows = ((t * top_k) as usize).div_ceil(active);
        // Rotate which experts are hit so consecutive calls do not reuse L2-resident weights.
        let groups = (experts as usize / active).max(1);
        let timed = || -> Result<f64> {
            Ok(match dtype {
                Dtype::Bf16 => gpu.time_graph(GEMM_TARGET_MS, REPLAYS, &mut |i| {
                    let wp = w.ptr + ((i % groups) * active * wbytes) as u64;
                    gpu.gemm_bf16_batched(active, rows, nu, ku, wp, x.ptr, y.ptr)
                })?,
                Dtype::Fp8 => {
                    let plan = gpu.plan_fp8(active, rows, nu, ku)?;
                    gpu.time_graph(GEMM_TARGET_MS, REPLAYS, &mut |i| {
                        let wp = w.ptr + ((i % groups) * active * wbytes) as u64;
                        gpu.gemm_fp8(&plan, wp, x.ptr, y.ptr)
                    })?
                }
            })
        };
        let us = match timed() {
            Ok(us) => us,
            Err(e) => {
                log(&format!("moe {name} {} T={t}: skipped: {e}", dtype.as_str()));
                continue;
            }
        };
        let flops = 2.0 * (active * rows) as f64 * n as f64 * k as f64;
        points.push(MoePoint {
            tokens: t,
            active_experts: active as u64,
            rows_per_expert: rows as u64,
            us,
            tflops: flops / us / 1e6,
            weight_gbps: (active * wbytes) as f64 / us / 1e3,
        });
    }
    Ok(MoeCurve { name: name.to_string(), n, k, dtype, experts, top_k, points })
}

fn measure_attention(gpu: &Gpu, batches: &[u64], ctxs: &[u64], seed: u64) -> Result<AttentionCurve> {
    let a = gpu.attn;
    let (hkv, d) = (a.kv_heads as usize, a.head_dim as usize);
    let hq = hkv * a.q_per_kv as usize;
    let per_token = hkv * d * 2; // K bytes per token of one request
    let pool_bytes: usize = 8 << 30;
    let k_pool = gpu.alloc(pool_bytes)?;
    let v_pool = gpu.alloc(pool_bytes)?;
    gpu.fill_bf16(&k_pool, pool_bytes / 2, seed + 41, 1.0)?;
    gpu.fill_bf16(&v_pool, pool_bytes / 2, seed + 42, 1.0)?;
    let max_b = *batches.iter().max().unwrap_or(&1) as usize;
    let q = gpu.alloc(max_b * hq * d * 2)?;
    gpu.fill_bf16(&q, max_b * hq * d, seed + 43, 1.0)?;
    let out = gpu.alloc(max_b * hq * d * 2)?;
    let mut points = Vec::new();
    for &b in batches {
        for &c in ctxs {
            let (bu, cu) = (b as usize, c as usize);
            let kv = bu * cu * per_token;
            if kv > pool_bytes {
                continue;
            }
            let splits = gpu.attn_splits(bu, cu);
            let scratch = gpu.alloc(gpu.attn_scratch_bytes(bu, splits))?;
            // Rotate through the pool so small caches are not served from L2.
            let slots = (pool_bytes / kv).max(1);
            let us = gpu.time_graph(GEMM_TARGET_MS, REPLAYS, &mut |i| {
                let off = ((i % slots) * kv) as u64;
                gpu.decode_attention(bu, cu, q.ptr, hq * d, k_pool.ptr + off, v_pool.ptr + off, out.ptr, hq * d, scratch.ptr, splits)
            })?;
            let bytes = 2 * kv;
            points.push(AttentionPoint { batch: b, ctx: c, kv_bytes: bytes as u64, us, gbps: bytes as f64 / us / 1e3 });
        }
    }
    points.sort_by_key(|p| (p.kv_bytes, p.batch));
    Ok(AttentionCurve { kv_heads: hkv as u64, q_per_kv: a.q_per_kv as u64, head_dim: d as u64, points })
}
