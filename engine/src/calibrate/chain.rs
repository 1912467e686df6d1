//! A dense model's real decode step on the GPU (every layer, then the LM head), captured
//! as one CUDA graph per (batch, context) and timed, for checking the cost model's steps.

use super::gpu::{DevBuf, Gpu, GpuError, Result, bf16_to_f32};
use super::shapes::ModelShape;
use super::steps::{StepMeasurement, StepMode};

/// Device buffers of one dense model (bf16), laid out as a serving engine holds them.
struct DenseWeights {
    qkv: DevBuf,
    o: DevBuf,
    gate_up: DevBuf,
    down: DevBuf,
    norms: DevBuf,
    lm_head: DevBuf,
}

/// KV pool bytes: each layer's K and V get their own region while the pool holds them all,
/// otherwise regions wrap (each then far larger than L2, so reads still come from HBM).
const POOL_BYTES: usize = 60 << 30;

/// A dense model's decode step on the device: weights, activations for up to `max_b`
/// requests, and one KV pool.
struct DecodeChain<'g> {
    gpu: &'g Gpu,
    /// Layers, hidden size, head size, query heads, KV heads, FFN width, vocabulary.
    l: usize,
    h: usize,
    d: usize,
    hq: usize,
    hkv: usize,
    f: usize,
    v: usize,
    qkv_n: usize,
    ws: DenseWeights,
    x: DevBuf,
    hbuf: DevBuf,
    qkv: DevBuf,
    attn: DevBuf,
    tmp: DevBuf,
    gu: DevBuf,
    act: DevBuf,
    logits: DevBuf,
    pool: DevBuf,
}

impl<'g> DecodeChain<'g> {
    /// Allocates and fills everything (weights, then activations, then the pool).
    fn new(gpu: &'g Gpu, m: &ModelShape, max_b: usize, seed: u64) -> Result<Self> {
        let (l, h, d) = (m.layers as usize, m.hidden as usize, m.head_dim as usize);
        let (hq, hkv, f, v) = (m.q_heads as usize, m.kv_heads as usize, m.ffn as usize, m.vocab as usize);
        let qkv_n = (hq + 2 * hkv) * d;
        let alloc_fill = |elems: usize, s: u64, scale: f32| -> Result<DevBuf> {
            let b = gpu.alloc(elems * 2)?;
            gpu.fill_bf16(&b, elems, s, scale)?;
            Ok(b)
        };
        // Weights scaled so activations stay finite through 32 layers of random weights.
        let ws = DenseWeights {
            qkv: alloc_fill(l * qkv_n * h, seed + 51, 0.02)?,
            o: alloc_fill(l * h * hq * d, seed + 52, 0.02)?,
            gate_up: alloc_fill(l * 2 * f * h, seed + 53, 0.02)?,
            down: alloc_fill(l * h * f, seed + 54, 0.02)?,
            norms: alloc_fill((2 * l + 1) * h, seed + 55, 1.0)?,
            lm_head: alloc_fill(v * h, seed + 56, 0.02)?,
        };
        Ok(DecodeChain {
            x: alloc_fill(max_b * h, seed + 57, 1.0)?,
            hbuf: gpu.alloc(max_b * h * 2)?,
            qkv: gpu.alloc(max_b * qkv_n * 2)?,
            attn: gpu.alloc(max_b * hq * d * 2)?,
            tmp: gpu.alloc(max_b * h * 2)?,
            gu: gpu.alloc(max_b * 2 * f * 2)?,
            act: gpu.alloc(max_b * f * 2)?,
            logits: gpu.alloc(max_b * v * 2)?,
            pool: alloc_fill(POOL_BYTES / 2, seed + 58, 1.0)?,
            gpu,
            l,
            h,
            d,
            hq,
            hkv,
            f,
            v,
            qkv_n,
            ws,
        })
    }

    /// Enqueues one decoder layer for `b` requests at context `c`, K and V at `kc`, `vc`.
    #[allow(clippy::too_many_arguments)] // the step's geometry, shared by every layer
    fn layer(&self, b: usize, c: usize, layer: usize, kc: u64, vc: u64, scratch: u64, splits: usize) -> Result<()> {
        let (gpu, ws, h, f, hq, d, qkv_n) = (self.gpu, &self.ws, self.h, self.f, self.hq, self.d, self.qkv_n);
        let nrm = ws.norms.ptr + (2 * layer * h * 2) as u64;
        gpu.rmsnorm(b, h, self.x.ptr, nrm, self.hbuf.ptr)?;
        let wq = ws.qkv.ptr + (layer * qkv_n * h * 2) as u64;
        gpu.gemm_bf16(b, qkv_n, h, wq, self.hbuf.ptr, self.qkv.ptr)?;
        gpu.rope_kv_append(b, self.qkv.ptr, qkv_n, kc, vc, c, c - 1)?;
        gpu.decode_attention(b, c, self.qkv.ptr, qkv_n, kc, vc, self.attn.ptr, hq * d, scratch, splits)?;
        let wo = ws.o.ptr + (layer * h * hq * d * 2) as u64;
        gpu.gemm_bf16(b, h, hq * d, wo, self.attn.ptr, self.tmp.ptr)?;
        gpu.add_inplace(b * h, self.x.ptr, self.tmp.ptr)?;
        gpu.rmsnorm(b, h, self.x.ptr, nrm + (h * 2) as u64, self.hbuf.ptr)?;
        let wgu = ws.gate_up.ptr + (layer * 2 * f * h * 2) as u64;
        gpu.gemm_bf16(b, 2 * f, h, wgu, self.hbuf.ptr, self.gu.ptr)?;
        gpu.silu_mul(b, f, self.gu.ptr, self.act.ptr)?;
        let wd = ws.down.ptr + (layer * h * f * 2) as u64;
        gpu.gemm_bf16(b, h, f, wd, self.act.ptr, self.tmp.ptr)?;
        gpu.add_inplace(b * h, self.x.ptr, self.tmp.ptr)
    }

    /// Enqueues the final norm and the LM head.
    fn head(&self, b: usize) -> Result<()> {
        let nrm = self.ws.norms.ptr + (2 * self.l * self.h * 2) as u64;
        self.gpu.rmsnorm(b, self.h, self.x.ptr, nrm, self.hbuf.ptr)?;
        self.gpu.gemm_bf16(b, self.v, self.h, self.ws.lm_head.ptr, self.hbuf.ptr, self.logits.ptr)
    }

    /// Median µs of the step (`layers` layers, the head if asked) for `b` requests at
    /// context `c`, after one eager run whose activations must stay finite.
    fn time(&self, b: usize, c: usize, layers: usize, with_head: bool) -> Result<f64> {
        let gpu = self.gpu;
        let kv = b * self.hkv * c * self.d * 2;
        let splits = gpu.attn_splits(b, c);
        let scratch = gpu.alloc(gpu.attn_scratch_bytes(b, splits))?;
        let regions = (POOL_BYTES / (2 * kv)).max(1);
        let mut step = |_: usize| -> Result<()> {
            for layer in 0..layers {
                let base = self.pool.ptr + ((layer % regions) * 2 * kv) as u64;
                self.layer(b, c, layer, base, base + kv as u64, scratch.ptr, splits)?;
            }
            if with_head {
                self.head(b)?;
            }
            Ok(())
        };
        step(0)?;
        gpu.sync()?;
        // The residual stream must stay finite, or the timings would be of NaN arithmetic.
        let xs: Vec<u16> = gpu.download(&self.x, b * self.h)?;
        if xs.iter().any(|&u| !bf16_to_f32(u).is_finite()) {
            return Err(GpuError::Other("decode step produced non-finite activations".into()));
        }
        gpu.graph_replay_us(1, 7, &mut step)
    }
}

/// Runs the decode-step chain of `m` (all layers, then the LM head) as one CUDA graph per
/// (batch, context) and times its replays. Returns the one-layer chain time at batch 1 with a
/// 1K context, the kernels per layer, and the step measurements.
pub(super) fn run_decode_steps(
    gpu: &Gpu,
    m: &ModelShape,
    steps: &[(u64, u64)],
    seed: u64,
    log: &mut dyn FnMut(&str),
) -> Result<(f64, u32, Vec<StepMeasurement>)> {
    let max_b = steps.iter().map(|s| s.0).max().unwrap_or(1) as usize;
    let chain = DecodeChain::new(gpu, m, max_b, seed)?;
    let mut out = Vec::new();
    let layer_us = chain.time(1, 1024, 1, false)?;
    let kernels = 12;
    log(&format!("layer chain (batch 1, ctx 1024, 12 kernels): {:.1} µs", layer_us));
    for &(b, c) in steps {
        let us = chain.time(b as usize, c as usize, chain.l, true)?;
        log(&format!("decode step batch {b:>4} ctx {c:>6}: {:>9.1} µs", us));
        out.push(StepMeasurement {
            mode: StepMode::Decode,
            batch: b,
            ctx: c,
            tokens: b,
            measured_us: us,
            runner: "sweep calibrate (cudarc, CUDA graph)".into(),
        });
    }
    Ok((layer_us, kernels, out))
}
