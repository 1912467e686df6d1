//! `sweep calibrate import-peer`: a peer framework's run of the same measurements, added to a
//! measured profile with the per-layer and steady-load terms fitted from it.

use anyhow::{Context, Result, bail};
use engine::GpuSpec;
use engine::calibrate::curves::{
    AttentionCurve, CopyPoint, Fitted, GemmCurve, MeasuredCurves, MoeCurve, PeerLayer, PeerRun, PrefillAttentionPoint, SustainedLoad,
};
use engine::calibrate::shapes::ModelShape;
use serde::Deserialize;

use super::{ImportPeerArgs, profile_yaml};
use harness::problem::atomic_write;

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

pub(super) fn import_peer(a: ImportPeerArgs) -> Result<()> {
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
    atomic_write(&a.profile, profile_yaml(&g)?.as_bytes())?;
    harness::outln!("{}: peer run and prefill-attention curve imported", path);
    Ok(())
}
