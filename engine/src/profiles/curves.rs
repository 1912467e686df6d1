//! Measured GPU curves (the `measured:` section of a hardware profile) and their interpolation.
//!
//! A calibration run stores, per weight shape and dtype, GEMM times across M (tokens per step),
//! a batched expert GEMM across routed tokens, a decode-attention kernel across KV sizes,
//! copy bandwidth and launch overheads. The cost model asks these curves first and falls back
//! to datasheet rooflines when a shape is missing.

use serde::{Deserialize, Serialize};

/// Element type of a GEMM's operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Bf16,
    Fp8,
}

impl Dtype {
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Bf16 => 2.0,
            Dtype::Fp8 => 1.0,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp8 => "fp8",
        }
    }
}

/// Everything a calibration run measured on one GPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MeasuredCurves {
    /// UTC date of the run (YYYY-MM-DD).
    pub date: String,
    pub device: String,
    /// NVIDIA driver version, e.g. "580.159.04".
    pub driver: String,
    /// CUDA version the driver supports, e.g. "13.0".
    pub cuda_driver: String,
    pub cublas: String,
    pub nvrtc: String,
    pub sm_count: u32,
    pub memory_bytes: u64,
    /// How the numbers were taken (events, warm-up, medians, graph replays).
    pub method: String,
    pub copy: CopyPoint,
    pub gemm: Vec<GemmCurve>,
    #[serde(default)]
    pub moe: Vec<MoeCurve>,
    pub attention: Option<AttentionCurve>,
    pub launch: LaunchOverheads,
    /// Results checked against a CPU reference before timing.
    #[serde(default)]
    pub checks: Vec<CheckResult>,
    /// Parameters derived from the curves (see [`Fitted`]).
    #[serde(default)]
    pub fitted: Fitted,
    /// Causal prefill attention (flash kernel) per layer, by chunk size and cached prefix;
    /// measured by the peer run (the cudarc run has no tensor-core attention kernel).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill_attention: Vec<PrefillAttentionPoint>,
    /// The same measurements through PyTorch on the same GPU in the same session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerRun>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct PrefillAttentionPoint {
    pub tokens: u64,
    /// Cached prefix the chunk attends besides itself (0: a chunk from an empty cache).
    #[serde(default)]
    pub ctx: u64,
    pub us: f64,
    pub tflops: f64,
}

/// A peer framework's run of the same shapes with the same method.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PeerRun {
    /// e.g. "PyTorch 2.11.0+cu130 (CUDA 13.0)".
    pub name: String,
    pub copy: CopyPoint,
    pub gemm: Vec<GemmCurve>,
    #[serde(default)]
    pub moe: Vec<MoeCurve>,
    pub attention: Option<AttentionCurve>,
    /// One layer of the peer's own chain, timed alone (see [`PeerLayer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<PeerLayer>,
    /// The same kernels under steady load (see [`SustainedLoad`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained: Option<SustainedLoad>,
    /// The peer chain's per-layer terms, derived from `layer` and the peer's curves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted: Option<Fitted>,
}

/// Kernels timed at the first replays after idle and after ~0.5 s back to back. The curves
/// are short bursts at the boost clock; under steady load the board power limit lowers the
/// SM clock, which slows tensor-core-bound work most and bandwidth-bound work less.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SustainedLoad {
    /// One prefill layer (tensor-core bound), `tokens` from an empty cache.
    pub prefill_layer: SustainedPoint,
    /// Decode attention reading `kv_bytes` of K and V (bandwidth bound).
    pub decode_attention: SustainedPoint,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct SustainedPoint {
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub batch: u64,
    #[serde(default)]
    pub ctx: u64,
    #[serde(default)]
    pub kv_bytes: u64,
    pub burst_us: f64,
    pub steady_us: f64,
}

/// One layer of the peer framework's model chain as a CUDA graph.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct PeerLayer {
    /// Decode, batch 1, 1K context.
    pub decode_us: f64,
    pub prefill_tokens: u64,
    /// Prefill of `prefill_tokens` (prefix 0).
    pub prefill_us: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CopyPoint {
    /// Bytes of one copy's source buffer; bandwidths count read + write.
    pub bytes: u64,
    /// The faster of the two copies below: the bandwidth ceiling.
    pub us: f64,
    pub gbps: f64,
    /// SM copy kernel (16-byte accesses) replayed in a graph.
    #[serde(default)]
    pub kernel_gbps: f64,
    /// cuMemcpyDtoDAsync, eager, events around 10 copies.
    #[serde(default)]
    pub memcpy_gbps: f64,
}

/// GEMM `Y[M,N] = X[M,K] · W[N,K]ᵀ` for one weight shape and dtype.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GemmCurve {
    /// What the weight is in the model (e.g. "qkv_proj", "lm_head").
    pub name: String,
    pub n: u64,
    pub k: u64,
    pub dtype: Dtype,
    /// Sorted by `m`.
    pub points: Vec<GemmPoint>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct GemmPoint {
    pub m: u64,
    pub us: f64,
    pub tflops: f64,
}

/// Batched expert GEMM: `tokens · top_k` routed rows spread evenly over the experts they hit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MoeCurve {
    pub name: String,
    pub n: u64,
    pub k: u64,
    pub dtype: Dtype,
    pub experts: u64,
    pub top_k: u64,
    pub points: Vec<MoePoint>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct MoePoint {
    pub tokens: u64,
    pub active_experts: u64,
    pub rows_per_expert: u64,
    pub us: f64,
    pub tflops: f64,
    /// Weight bytes touched per microsecond, in GB/s.
    pub weight_gbps: f64,
}

/// Decode attention (one query token per request) over a bf16 KV cache.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AttentionCurve {
    pub kv_heads: u64,
    pub q_per_kv: u64,
    pub head_dim: u64,
    /// Sorted by `kv_bytes`.
    pub points: Vec<AttentionPoint>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct AttentionPoint {
    pub batch: u64,
    pub ctx: u64,
    /// K + V bytes read by one layer's kernel.
    pub kv_bytes: u64,
    pub us: f64,
    pub gbps: f64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct LaunchOverheads {
    /// Back-to-back eager launches of an empty kernel, per launch (GPU-side spacing).
    pub eager_launch_us: f64,
    /// An empty kernel node inside a replayed CUDA graph, per node.
    pub graph_node_us: f64,
    /// Replaying a one-node graph, per replay.
    pub graph_launch_us: f64,
    /// One decode layer's kernel chain (batch 1, 1K context) replayed as a graph.
    pub layer_chain_us: f64,
    /// Kernels in that chain.
    pub layer_chain_kernels: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckResult {
    pub name: String,
    /// ‖out − ref‖ / ‖ref‖ against a float64 CPU reference.
    pub rel_err: f64,
    pub tolerance: f64,
    pub pass: bool,
}

/// Interpolates `y` at `x` over points sorted by `x`: linear between neighbours, flat below
/// the first point (the launch floor), proportional beyond the last (constant rate).
fn interp_rate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= last.0 {
        return Some(last.1 * x / last.0);
    }
    let i = points.partition_point(|p| p.0 <= x);
    let (a, b) = (points[i - 1], points[i]);
    let t = (x - a.0) / (b.0 - a.0);
    Some(a.1 + t * (b.1 - a.1))
}

impl GemmCurve {
    /// Time in µs for `m` rows, interpolated between measured M.
    pub fn time_us(&self, m: f64) -> Option<f64> {
        let pts: Vec<(f64, f64)> = self.points.iter().map(|p| (p.m as f64, p.us)).collect();
        interp_rate(&pts, m)
    }
}

impl MoeCurve {
    /// Time in µs for `tokens` routed tokens (each to `top_k` experts).
    pub fn time_us(&self, tokens: f64) -> Option<f64> {
        let pts: Vec<(f64, f64)> = self.points.iter().map(|p| (p.tokens as f64, p.us)).collect();
        interp_rate(&pts, tokens)
    }
}

impl AttentionCurve {
    /// Time in µs for one layer's decode attention of `batch` requests reading `kv_bytes` of
    /// K and V in all. The kernel's speed depends on the split of the bytes into requests,
    /// not only on their total: for each measured batch size, time is interpolated over bytes
    /// per request; between measured batch sizes the achieved bandwidth is interpolated in
    /// log(batch); outside them the nearest batch size's bandwidth holds.
    pub fn time_us(&self, batch: f64, kv_bytes: f64) -> Option<f64> {
        if kv_bytes <= 0.0 {
            return Some(0.0);
        }
        let b = batch.max(1.0);
        let per_req = kv_bytes / b;
        let mut batches: Vec<u64> = self.points.iter().map(|p| p.batch).collect();
        batches.sort_unstable();
        batches.dedup();
        // Bandwidth (bytes/µs) of measured batch `mb` at `per_req` bytes per request.
        let bw_at = |mb: u64| -> Option<f64> {
            let pts: Vec<(f64, f64)> =
                self.points.iter().filter(|p| p.batch == mb).map(|p| (p.kv_bytes as f64 / mb as f64, p.us)).collect();
            let us = interp_rate(&pts, per_req)?;
            Some(mb as f64 * per_req / us)
        };
        let lo = batches.iter().rev().find(|&&x| x as f64 <= b).or(batches.first())?;
        let hi = batches.iter().find(|&&x| x as f64 >= b).or(batches.last())?;
        let bw = if lo == hi {
            bw_at(*lo)?
        } else {
            let (bl, bh) = (bw_at(*lo)?, bw_at(*hi)?);
            let t = (b.ln() - (*lo as f64).ln()) / ((*hi as f64).ln() - (*lo as f64).ln());
            bl + t * (bh - bl)
        };
        Some(kv_bytes / bw)
    }
}

impl MeasuredCurves {
    /// Time of `Y[M,N] = X[M,K]·W[N,K]ᵀ`: the exact shape's curve when measured, otherwise the
    /// nearest measured shape of the same dtype (by weight size) scaled by weight size, since
    /// both the weight-read and the FLOP terms grow with N·K. `None` when the dtype has no curve.
    pub fn gemm_time_us(&self, n: u64, k: u64, dtype: Dtype, m: f64) -> Option<f64> {
        if let Some(c) = self.gemm.iter().find(|c| c.n == n && c.k == k && c.dtype == dtype) {
            return c.time_us(m);
        }
        let size = (n * k) as f64;
        let nearest = self.gemm.iter().filter(|c| c.dtype == dtype).min_by(|a, b| {
            let da = ((a.n * a.k) as f64 / size).ln().abs();
            let db = ((b.n * b.k) as f64 / size).ln().abs();
            da.total_cmp(&db)
        })?;
        Some(nearest.time_us(m)? * size / (nearest.n * nearest.k) as f64)
    }

    /// FLOP rate (TFLOP/s) of causal prefill attention for a chunk of `tokens` from an empty
    /// cache, interpolated between measured chunks and flat beyond them. `None` without points.
    pub fn prefill_attention_tflops_at(&self, tokens: f64, ctx: f64) -> Option<f64> {
        // A chunk after a cached prefix runs another kernel configuration (a bottom-right mask
        // over a longer key range) at its own rate: interpolate the prefix points by work
        // (score FLOPs ∝ tokens · (ctx + tokens / 2)), flat beyond them.
        let mut pts: Vec<(f64, f64)> = self
            .prefill_attention
            .iter()
            .filter(|p| p.ctx > 0)
            .map(|p| (p.tokens as f64 * (p.ctx as f64 + p.tokens as f64 / 2.0), p.tflops))
            .collect();
        if ctx <= 0.0 || pts.is_empty() {
            return self.prefill_attention_tflops(tokens);
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let w = tokens * (ctx + tokens / 2.0);
        let (first, last) = (pts[0], pts[pts.len() - 1]);
        if w <= first.0 {
            return Some(first.1);
        }
        if w >= last.0 {
            return Some(last.1);
        }
        let i = pts.partition_point(|p| p.0 <= w);
        let (a, b) = (pts[i - 1], pts[i]);
        Some(a.1 + (w - a.0) / (b.0 - a.0) * (b.1 - a.1))
    }

    /// FLOP rate of causal prefill attention from an empty cache (see
    /// [`Self::prefill_attention_tflops_at`] for chunks after a prefix).
    pub fn prefill_attention_tflops(&self, tokens: f64) -> Option<f64> {
        let pts: Vec<(f64, f64)> = self.prefill_attention.iter().filter(|p| p.ctx == 0).map(|p| (p.tokens as f64, p.tflops)).collect();
        let (first, last) = (pts.first()?, pts.last()?);
        if tokens <= first.0 {
            return Some(first.1);
        }
        if tokens >= last.0 {
            return Some(last.1);
        }
        let i = pts.partition_point(|p| p.0 <= tokens);
        let (a, b) = (pts[i - 1], pts[i]);
        Some(a.1 + (tokens - a.0) / (b.0 - a.0) * (b.1 - a.1))
    }

    /// These curves with the peer run's kernels (GEMMs, expert GEMMs, decode attention, copy)
    /// in place of the cudarc ones: for predicting an engine that runs the peer's kernels.
    /// `None` without a peer run.
    pub fn with_peer_kernels(&self) -> Option<MeasuredCurves> {
        let p = self.peer.as_ref()?;
        let mut c = self.clone();
        c.copy = p.copy.clone();
        c.gemm = p.gemm.clone();
        if !p.moe.is_empty() {
            c.moe = p.moe.clone();
        }
        if p.attention.is_some() {
            c.attention = p.attention.clone();
        }
        if let Some(f) = p.fitted {
            c.fitted = f;
        }
        Some(c)
    }

    /// Best measured GEMM throughput for a dtype (TFLOP/s), over all shapes and M.
    pub fn peak_tflops(&self, dtype: Dtype) -> Option<f64> {
        self.gemm.iter().filter(|c| c.dtype == dtype).flat_map(|c| c.points.iter().map(|p| p.tflops)).reduce(f64::max)
    }
}

/// Cost-model parameters derived from the curves against a datasheet: what fraction of the
/// datasheet's bandwidth and FLOP rate the GPU reached, and the per-layer fixed cost.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Fitted {
    /// Measured copy bandwidth / datasheet HBM bandwidth.
    pub eta_bw: f64,
    /// Best measured bf16 GEMM rate / datasheet bf16 rate.
    pub eta_f_bf16: f64,
    /// Best measured fp8 GEMM rate / datasheet fp8 rate.
    pub eta_f_fp8: f64,
    /// Decode-attention bandwidth at the largest KV size / datasheet HBM bandwidth.
    pub eta_bw_attention: f64,
    /// One decode layer's graph time at batch 1 beyond streaming its weights at copy
    /// bandwidth: the per-layer fixed cost under CUDA graphs.
    pub tau_layer_us: f64,
    /// Per-kernel cost inside a CUDA graph.
    pub tau_kernel_us: f64,
    /// The same layer's graph time minus its GEMMs and attention from the curves: what the
    /// small kernels (norms, rotary, residual adds, SiLU) cost per layer.
    #[serde(default)]
    pub tau_elementwise_us: f64,
    /// Elementwise traffic relative to fused kernels (norms, rotary, residual adds, SiLU each
    /// one pass): 1 for the calibrated chain; an unfused framework chain moves more.
    #[serde(default = "one")]
    pub elementwise_traffic: f64,
    /// Extra time under steady load per unit of tensor-core time at the best measured GEMM
    /// rate (FLOPs / peak): the power limit holds the SM clock below the boost clock the
    /// curves were measured at. 0: not measured.
    #[serde(default)]
    pub sustained_compute: f64,
    /// Extra time under steady load per unit of KV-streaming time at copy bandwidth.
    #[serde(default)]
    pub sustained_bandwidth: f64,
}

fn one() -> f64 {
    1.0
}

impl Default for Fitted {
    fn default() -> Self {
        Fitted {
            eta_bw: 0.0,
            eta_f_bf16: 0.0,
            eta_f_fp8: 0.0,
            eta_bw_attention: 0.0,
            tau_layer_us: 0.0,
            tau_kernel_us: 0.0,
            tau_elementwise_us: 0.0,
            elementwise_traffic: 1.0,
            sustained_compute: 0.0,
            sustained_bandwidth: 0.0,
        }
    }
}

impl MeasuredCurves {
    /// Derives the roofline parameters against a datasheet (GB/s, bf16 and fp8 TFLOP/s).
    /// `layer_weight_bytes` is the weight size of the layer whose chain was timed,
    /// `layer_gemms` its GEMM shapes `(n, k)` (bf16, M = 1) and `attn_kv_bytes` the KV bytes
    /// its attention read (batch 1, 1K context).
    pub fn fit(
        &self,
        hbm_gbps: f64,
        bf16_tflops: f64,
        fp8_tflops: f64,
        layer_weight_bytes: f64,
        layer_gemms: &[(u64, u64)],
        attn_kv_bytes: f64,
    ) -> Fitted {
        let attn_gbps = self.attention.as_ref().and_then(|a| a.points.iter().max_by_key(|p| p.kv_bytes)).map_or(0.0, |p| p.gbps);
        let stream_us = if self.copy.gbps > 0.0 { layer_weight_bytes / (self.copy.gbps * 1e3) } else { 0.0 };
        let parts: Option<f64> = layer_gemms
            .iter()
            .map(|&(n, k)| self.gemm_time_us(n, k, Dtype::Bf16, 1.0))
            .sum::<Option<f64>>()
            .zip(self.attention.as_ref().and_then(|a| a.time_us(1.0, attn_kv_bytes)))
            .map(|(g, a)| g + a);
        Fitted {
            eta_bw: self.copy.gbps / hbm_gbps,
            eta_f_bf16: self.peak_tflops(Dtype::Bf16).unwrap_or(0.0) / bf16_tflops,
            eta_f_fp8: self.peak_tflops(Dtype::Fp8).unwrap_or(0.0) / fp8_tflops,
            eta_bw_attention: attn_gbps / hbm_gbps,
            tau_layer_us: (self.launch.layer_chain_us - stream_us).max(0.0),
            tau_kernel_us: self.launch.graph_node_us,
            tau_elementwise_us: parts.map_or(0.0, |p| (self.launch.layer_chain_us - p).max(0.0)),
            elementwise_traffic: 1.0,
            sustained_compute: 0.0,
            sustained_bandwidth: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve() -> GemmCurve {
        let pts = [(1u64, 10.0), (16, 10.0), (256, 20.0), (4096, 200.0)];
        GemmCurve {
            name: "w".into(),
            n: 4096,
            k: 4096,
            dtype: Dtype::Bf16,
            points: pts.iter().map(|&(m, us)| GemmPoint { m, us, tflops: 2.0 * m as f64 * 4096.0 * 4096.0 / us / 1e6 }).collect(),
        }
    }

    #[test]
    fn interpolation_is_exact_at_points_linear_between_and_proportional_beyond() {
        let c = curve();
        assert_eq!(c.time_us(16.0), Some(10.0));
        assert_eq!(c.time_us(256.0), Some(20.0));
        assert_eq!(c.time_us(136.0), Some(15.0));
        assert_eq!(c.time_us(0.5), Some(10.0));
        assert_eq!(c.time_us(8192.0), Some(400.0));
    }

    #[test]
    fn unknown_shape_scales_the_nearest_curve_and_unknown_dtype_falls_back() {
        let mc = MeasuredCurves { gemm: vec![curve()], ..Default::default() };
        assert_eq!(mc.gemm_time_us(4096, 4096, Dtype::Bf16, 256.0), Some(20.0));
        // Twice the weight: twice the time.
        assert_eq!(mc.gemm_time_us(8192, 4096, Dtype::Bf16, 256.0), Some(40.0));
        assert_eq!(mc.gemm_time_us(4096, 4096, Dtype::Fp8, 256.0), None);
    }

    #[test]
    fn attention_interpolates_per_request_bytes_then_batch() {
        let pt = |batch: u64, ctx: u64, us: f64| AttentionPoint { batch, ctx, kv_bytes: batch * ctx * 1000, us, gbps: 0.0 };
        let a = AttentionCurve {
            kv_heads: 8,
            q_per_kv: 4,
            head_dim: 128,
            // Batch 1: 1 byte/µs per 1000-byte token; batch 8: four times the bandwidth.
            points: vec![pt(1, 1000, 1000.0), pt(1, 2000, 2000.0), pt(8, 1000, 2000.0), pt(8, 2000, 4000.0)],
        };
        // Exact points.
        assert_eq!(a.time_us(1.0, 1e6), Some(1000.0));
        assert_eq!(a.time_us(8.0, 16e6), Some(4000.0));
        // Between contexts at a measured batch: linear.
        assert_eq!(a.time_us(1.0, 1.5e6), Some(1500.0));
        // Between batches: bandwidth interpolated in log(batch): batch 2.83 is halfway.
        let t = a.time_us(8f64.sqrt(), 8f64.sqrt() * 1e6).unwrap();
        let bw = 8f64.sqrt() * 1e6 / t;
        assert!((bw - 2500.0).abs() < 1e-6, "{bw}");
        // Beyond the largest batch: its bandwidth.
        assert_eq!(a.time_us(64.0, 64e6), Some(16000.0));
    }

    #[test]
    fn prefill_attention_rate_by_chunk_and_prefix() {
        let pt = |tokens: u64, ctx: u64, tflops: f64| PrefillAttentionPoint { tokens, ctx, us: 0.0, tflops };
        let mc = MeasuredCurves {
            prefill_attention: vec![pt(1024, 0, 200.0), pt(4096, 0, 500.0), pt(1024, 3584, 300.0), pt(2048, 7168, 400.0)],
            ..Default::default()
        };
        // From an empty cache: by chunk, ignoring the prefix points.
        assert_eq!(mc.prefill_attention_tflops_at(2560.0, 0.0), Some(350.0));
        // After a prefix: by work tokens · (ctx + tokens / 2), 4M and 16M at the two points.
        assert_eq!(mc.prefill_attention_tflops_at(1024.0, 3584.0), Some(300.0));
        let w = 10.0 * (1 << 20) as f64;
        let r = mc.prefill_attention_tflops_at(1024.0, w / 1024.0 - 512.0).unwrap();
        assert!((r - 350.0).abs() < 1e-9, "{r}");
        assert_eq!(mc.prefill_attention_tflops_at(8192.0, 65536.0), Some(400.0));
    }

    #[test]
    fn measured_curves_round_trip_through_yaml() {
        let mc = MeasuredCurves { date: "2026-11-29".into(), gemm: vec![curve()], ..Default::default() };
        let y = serde_yaml_ng::to_string(&mc).unwrap();
        let back: MeasuredCurves = serde_yaml_ng::from_str(&y).unwrap();
        assert_eq!(back, mc);
    }
}
