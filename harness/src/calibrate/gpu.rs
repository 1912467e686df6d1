//! `sweep calibrate gpu`: measure the GPU into a hardware profile (feature `cuda`).

use anyhow::Result;
#[cfg(not(feature = "cuda"))]
use anyhow::bail;
#[cfg(feature = "cuda")]
use {
    super::{load_model, profile_yaml},
    anyhow::Context,
    engine::GpuSpec,
    engine::calibrate::shapes::ModelShape,
    harness::problem::atomic_write,
};

use super::GpuArgs;

#[cfg(not(feature = "cuda"))]
pub(super) fn gpu(_a: GpuArgs) -> Result<()> {
    bail!("this sweep was built without GPU support; rebuild with `cargo build --release --features cuda`")
}

#[cfg(feature = "cuda")]
pub(super) fn gpu(a: GpuArgs) -> Result<()> {
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
    atomic_write(&a.out, profile_yaml(&gpu)?.as_bytes())?;
    let steps_out = a.steps_out.unwrap_or_else(|| a.out.with_file_name(format!("{}-steps.json", a.name)));
    atomic_write(&steps_out, serde_json::to_string_pretty(&run.steps)?.as_bytes())?;
    harness::outln!("measured profile written to {} (steps: {})", a.out.display(), steps_out.display());
    harness::outln!(
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
