//! Correctness before timing: the GEMM paths and the attention kernel against float64
//! CPU references, and the host-side number decoding they need.

use super::{Gpu, Result};
use crate::calibrate::curves::CheckResult;

/// bf16 bits → f32.
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// FP8 e4m3 (finite) bits → f32.
pub fn fp8_e4m3_to_f32(b: u8) -> f32 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xF) as i32;
    let m = (b & 7) as f32;
    if e == 0 { s * m / 8.0 * 2f32.powi(-6) } else { s * (1.0 + m / 8.0) * 2f32.powi(e - 7) }
}

/// ‖out − ref‖ / ‖ref‖; NaN or infinity anywhere gives infinity.
pub fn rel_err(out: &[f64], reference: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (o, r) in out.iter().zip(reference) {
        if !o.is_finite() {
            return f64::INFINITY;
        }
        num += (o - r) * (o - r);
        den += r * r;
    }
    (num / den).sqrt()
}

/// Checks the GEMM paths and the attention kernel against float64 CPU references on fresh
/// random inputs, with outputs poisoned first so unwritten elements fail.
pub fn correctness_checks(gpu: &Gpu, seed: u64) -> Result<Vec<CheckResult>> {
    let mut out = Vec::new();
    for b in [1usize, BATCH] {
        out.push(check_gemm_bf16(gpu, seed, b)?);
    }
    for b in [1usize, BATCH] {
        out.push(check_gemm_fp8(gpu, seed, b)?);
    }
    out.push(check_decode_attention(gpu, seed)?);
    Ok(out)
}

/// GEMM problem size (M, N, K) of the checks, and the batch of the batched ones.
const GEMM: (usize, usize, usize) = (96, 320, 512);
const BATCH: usize = 3;

fn check(name: &str, got: &[f64], want: &[f64]) -> CheckResult {
    let e = rel_err(got, want);
    CheckResult { name: name.into(), rel_err: e, tolerance: 1e-2, pass: e < 1e-2 }
}

/// bf16 GEMM (`b` = 1) or batched GEMM.
fn check_gemm_bf16(gpu: &Gpu, seed: u64, b: usize) -> Result<CheckResult> {
    let (m, n, k) = GEMM;
    let w = gpu.alloc(b * n * k * 2)?;
    let x = gpu.alloc(b * m * k * 2)?;
    let y = gpu.alloc(b * m * n * 2)?;
    gpu.fill_bf16(&w, b * n * k, seed + 1, 1.0)?;
    gpu.fill_bf16(&x, b * m * k, seed + 2, 1.0)?;
    gpu.memset(&y, 0xFF)?;
    if b == 1 {
        gpu.gemm_bf16(m, n, k, w.ptr, x.ptr, y.ptr)?;
    } else {
        gpu.gemm_bf16_batched(b, m, n, k, w.ptr, x.ptr, y.ptr)?;
    }
    let wh: Vec<u16> = gpu.download(&w, b * n * k)?;
    let xh: Vec<u16> = gpu.download(&x, b * m * k)?;
    let yh: Vec<u16> = gpu.download(&y, b * m * n)?;
    let (got, want) = gemm_ref(b, m, n, k, |i| bf16_to_f32(wh[i]), |i| bf16_to_f32(xh[i]), &yh);
    Ok(check(if b == 1 { "gemm_bf16" } else { "gemm_bf16_batched" }, &got, &want))
}

/// FP8 GEMM (`b` = 1) or batched FP8 GEMM.
fn check_gemm_fp8(gpu: &Gpu, seed: u64, b: usize) -> Result<CheckResult> {
    let (m, n, k) = GEMM;
    let w = gpu.alloc(b * n * k)?;
    let x = gpu.alloc(b * m * k)?;
    let y = gpu.alloc(b * m * n * 2)?;
    gpu.fill_fp8(&w, b * n * k, seed + 3)?;
    gpu.fill_fp8(&x, b * m * k, seed + 4)?;
    gpu.memset(&y, 0xFF)?;
    let plan = gpu.plan_fp8(b, m, n, k)?;
    gpu.gemm_fp8(&plan, w.ptr, x.ptr, y.ptr)?;
    let wh: Vec<u8> = gpu.download(&w, b * n * k)?;
    let xh: Vec<u8> = gpu.download(&x, b * m * k)?;
    let yh: Vec<u16> = gpu.download(&y, b * m * n)?;
    let (got, want) = gemm_ref(b, m, n, k, |i| fp8_e4m3_to_f32(wh[i]), |i| fp8_e4m3_to_f32(xh[i]), &yh);
    Ok(check(if b == 1 { "gemm_fp8" } else { "gemm_fp8_batched" }, &got, &want))
}

/// Decode attention with a context that leaves partial chunks.
fn check_decode_attention(gpu: &Gpu, seed: u64) -> Result<CheckResult> {
    let a = gpu.attn;
    let (bsz, ctx) = (3usize, 1000usize);
    let (hkv, g, d) = (a.kv_heads as usize, a.q_per_kv as usize, a.head_dim as usize);
    let hq = hkv * g;
    let q = gpu.alloc(bsz * hq * d * 2)?;
    let kc = gpu.alloc(bsz * hkv * ctx * d * 2)?;
    let vc = gpu.alloc(bsz * hkv * ctx * d * 2)?;
    let o = gpu.alloc(bsz * hq * d * 2)?;
    gpu.fill_bf16(&q, bsz * hq * d, seed + 5, 1.0)?;
    gpu.fill_bf16(&kc, bsz * hkv * ctx * d, seed + 6, 1.0)?;
    gpu.fill_bf16(&vc, bsz * hkv * ctx * d, seed + 7, 1.0)?;
    gpu.memset(&o, 0xFF)?;
    let splits = gpu.attn_splits(bsz, ctx);
    let scratch = gpu.alloc(gpu.attn_scratch_bytes(bsz, splits))?;
    gpu.decode_attention(bsz, ctx, q.ptr, hq * d, kc.ptr, vc.ptr, o.ptr, hq * d, scratch.ptr, splits)?;
    let qh: Vec<u16> = gpu.download(&q, bsz * hq * d)?;
    let kh: Vec<u16> = gpu.download(&kc, bsz * hkv * ctx * d)?;
    let vh: Vec<u16> = gpu.download(&vc, bsz * hkv * ctx * d)?;
    let oh: Vec<u16> = gpu.download(&o, bsz * hq * d)?;
    let mut got = Vec::new();
    let mut want = Vec::new();
    let scale = 1.0 / (d as f64).sqrt();
    for b in 0..bsz {
        for h in 0..hq {
            let kvh = h / g;
            let base = (b * hkv + kvh) * ctx * d;
            let qrow = &qh[(b * hq + h) * d..][..d];
            let scores: Vec<f64> = (0..ctx)
                .map(|t| (0..d).map(|j| bf16_to_f32(qrow[j]) as f64 * bf16_to_f32(kh[base + t * d + j]) as f64).sum::<f64>() * scale)
                .collect();
            let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
            let sum: f64 = p.iter().sum();
            for j in 0..d {
                let r: f64 = (0..ctx).map(|t| p[t] * bf16_to_f32(vh[base + t * d + j]) as f64).sum::<f64>() / sum;
                want.push(r);
                got.push(bf16_to_f32(oh[(b * hq + h) * d + j]) as f64);
            }
        }
    }
    Ok(check("decode_attention", &got, &want))
}

/// Reference for `b` problems `Y = X·Wᵀ`; returns (device result, reference) as f64.
fn gemm_ref(b: usize, m: usize, n: usize, k: usize, w: impl Fn(usize) -> f32, x: impl Fn(usize) -> f32, y: &[u16]) -> (Vec<f64>, Vec<f64>) {
    let mut got = Vec::with_capacity(b * m * n);
    let mut want = Vec::with_capacity(b * m * n);
    for p in 0..b {
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for t in 0..k {
                    s += x(p * m * k + i * k + t) as f64 * w(p * n * k + j * k + t) as f64;
                }
                want.push(s);
                got.push(bf16_to_f32(y[p * m * n + i * n + j]) as f64);
            }
        }
    }
    (got, want)
}
