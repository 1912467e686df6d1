//! Step-time predictions for a dense model, from measured curves or from a datasheet
//! roofline, and their comparison with step times measured on the GPU.

use serde::{Deserialize, Serialize};

use super::curves::{Dtype, MeasuredCurves};
use super::shapes::ModelShape;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepMode {
    /// One new token for each of `batch` requests with `ctx` tokens of context.
    Decode,
    /// One request's chunk of `tokens` new tokens after `ctx` cached ones.
    Prefill,
}

/// One step's GPU time, measured by running the model's operator chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepMeasurement {
    pub mode: StepMode,
    pub batch: u64,
    /// Context per request (decode) or cached prefix (prefill).
    pub ctx: u64,
    /// Tokens computed in the step (batch for decode, chunk size for prefill).
    pub tokens: u64,
    pub measured_us: f64,
    /// What ran the chain (e.g. the cudarc runner or the PyTorch script).
    pub runner: String,
}

/// Datasheet numbers and derates of the roofline step model (spec §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    pub hbm_gbps: f64,
    pub bf16_tflops: f64,
    pub eta_bw: f64,
    pub eta_f: f64,
    pub tau_layer_us: f64,
}

impl Roofline {
    /// H200 SXM datasheet (4.8 TB/s, 989 dense bf16 TFLOP/s) with the spec's mid-range derates.
    pub fn h200_datasheet() -> Self {
        Roofline {
            hbm_gbps: 4800.0,
            bf16_tflops: 989.0,
            eta_bw: 0.8,
            eta_f: 0.6,
            tau_layer_us: 20.0,
        }
    }
}

/// Bytes and FLOPs of one step of a dense bf16 model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepWork {
    pub weight_bytes: f64,
    pub kv_bytes: f64,
    pub act_bytes: f64,
    pub gemm_flops: f64,
    pub attn_flops: f64,
}

/// Activation bytes per token per layer moved by the elementwise kernels and GEMM inputs /
/// outputs (norms, residual adds, rotary, SiLU), in elements.
fn act_elems_per_token_layer(m: &ModelShape) -> f64 {
    let (h, d) = (m.hidden as f64, m.head_dim as f64);
    let qkv = (m.q_heads + 2 * m.kv_heads) as f64 * d;
    let attn = m.q_heads as f64 * d;
    let f = m.ffn as f64;
    // norms 2·(2h), adds 2·(3h), GEMM in/out: qkv (h + qkv), o (attn + h), gate_up (h + 2f),
    // down (f + h), attention q/out (2·attn), rotary (2·qkv), SiLU (3f).
    4.0 * h + 6.0 * h + (h + qkv) + (attn + h) + (h + 2.0 * f) + (f + h) + 2.0 * attn + 2.0 * qkv + 3.0 * f
}

/// The work of a step. Decode: `batch` tokens over `ctx` context each; prefill: `tokens` new
/// tokens of one request after `ctx` cached ones (logits for the last token only).
pub fn step_work(m: &ModelShape, s: &StepMeasurement) -> StepWork {
    let l = m.layers as f64;
    let t = s.tokens as f64;
    let (hq, hkv, d) = (m.q_heads as f64, m.kv_heads as f64, m.head_dim as f64);
    let layer_params = m.dense_layer_params() as f64;
    let head_params = (m.vocab * m.hidden) as f64;
    let kv_per_token_layer = 2.0 * hkv * d * 2.0;
    let (kv_tokens, attn_pairs, lm_rows) = match s.mode {
        StepMode::Decode => {
            let b = s.batch as f64;
            (b * s.ctx as f64, b * s.ctx as f64, b)
        }
        StepMode::Prefill => {
            let (p, e) = (s.ctx as f64, t);
            (p + e, e * (p + e / 2.0), 1.0)
        }
    };
    StepWork {
        weight_bytes: 2.0 * (l * layer_params + head_params),
        kv_bytes: l * kv_tokens * kv_per_token_layer,
        act_bytes: 2.0 * t * l * act_elems_per_token_layer(m),
        gemm_flops: 2.0 * (t * l * layer_params + lm_rows * head_params),
        // QKᵀ and PV: 2 FLOPs per multiply-add, two products.
        attn_flops: 4.0 * hq * d * attn_pairs * l,
    }
}

/// Roofline prediction (spec §7.4, GPU part only: no τ_step host overhead, no comm).
pub fn predict_roofline(m: &ModelShape, s: &StepMeasurement, r: &Roofline) -> f64 {
    let w = step_work(m, s);
    let bytes = w.weight_bytes + w.kv_bytes + w.act_bytes;
    let t_mem = bytes / (r.hbm_gbps * 1e3 * r.eta_bw);
    let t_flop = (w.gemm_flops + w.attn_flops) / (r.bf16_tflops * 1e6 * r.eta_f);
    m.layers as f64 * r.tau_layer_us + t_mem.max(t_flop)
}

/// Kernels per layer in the decode chain (norms, GEMMs, rotary/KV append, attention ×2,
/// adds, SiLU) and in the prefill chain (one attention kernel).
pub const DECODE_KERNELS_PER_LAYER: f64 = 12.0;

/// Prediction from measured curves: each GEMM from its shape's curve at M, decode attention
/// from the attention curve at its KV bytes, the elementwise kernels at copy bandwidth plus
/// one graph node each. Prefill attention has no measured kernel here and is taken at the
/// best measured bf16 GEMM rate. `None` when a curve is missing.
pub fn predict_measured(m: &ModelShape, s: &StepMeasurement, c: &MeasuredCurves) -> Option<f64> {
    let l = m.layers as f64;
    let t = s.tokens as f64;
    let (h, d) = (m.hidden, m.head_dim);
    let qkv_n = (m.q_heads + 2 * m.kv_heads) * d;
    let g = |n: u64, k: u64, rows: f64| c.gemm_time_us(n, k, Dtype::Bf16, rows);
    let mut layer = g(qkv_n, h, t)? + g(h, m.q_heads * d, t)?;
    if m.ffn > 0 {
        layer += g(2 * m.ffn, h, t)? + g(h, m.ffn, t)?;
    }
    let w = step_work(m, s);
    let attn = match s.mode {
        StepMode::Decode => c.attention.as_ref()?.time_us(w.kv_bytes / l)?,
        StepMode::Prefill => w.attn_flops / l / (c.peak_tflops(Dtype::Bf16)? * 1e6),
    };
    // Elementwise kernels: 6 per layer besides GEMMs and attention.
    let elementwise = w.act_bytes / l / (c.copy.gbps * 1e3) + 6.0 * c.launch.graph_node_us;
    let lm_rows = match s.mode {
        StepMode::Decode => s.batch as f64,
        StepMode::Prefill => 1.0,
    };
    let head = g(m.vocab, h, lm_rows)?;
    Some(l * (layer + attn + elementwise) + head)
}

/// One row of the predicted-vs-measured table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepComparison {
    pub step: StepMeasurement,
    pub predicted_measured_us: Option<f64>,
    pub predicted_datasheet_us: f64,
}

impl StepComparison {
    /// Signed relative error of the measured-profile prediction.
    pub fn err_measured(&self) -> Option<f64> {
        self.predicted_measured_us
            .map(|p| p / self.step.measured_us - 1.0)
    }
    pub fn err_datasheet(&self) -> f64 {
        self.predicted_datasheet_us / self.step.measured_us - 1.0
    }
}

pub fn compare(
    m: &ModelShape,
    steps: &[StepMeasurement],
    measured: &MeasuredCurves,
    datasheet: &Roofline,
) -> Vec<StepComparison> {
    steps
        .iter()
        .map(|s| StepComparison {
            step: s.clone(),
            predicted_measured_us: predict_measured(m, s, measured),
            predicted_datasheet_us: predict_roofline(m, s, datasheet),
        })
        .collect()
}

/// Median and worst absolute relative error; `None` for an empty list.
pub fn error_summary(errs: &[f64]) -> Option<(f64, f64)> {
    if errs.is_empty() {
        return None;
    }
    let mut a: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
    a.sort_by(f64::total_cmp);
    let n = a.len();
    let med = if n % 2 == 1 {
        a[n / 2]
    } else {
        (a[n / 2 - 1] + a[n / 2]) / 2.0
    };
    Some((med, a[n - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::curves::*;

    fn decode(batch: u64, ctx: u64) -> StepMeasurement {
        StepMeasurement {
            mode: StepMode::Decode,
            batch,
            ctx,
            tokens: batch,
            measured_us: 1.0,
            runner: "test".into(),
        }
    }

    #[test]
    fn decode_work_of_llama_8b_matches_hand_counts() {
        let m = ModelShape::llama_3_1_8b();
        let w = step_work(&m, &decode(1, 4096));
        // ~7.5B bf16 parameters read once: ~15 GB.
        assert!((14.9e9..15.1e9).contains(&w.weight_bytes), "{}", w.weight_bytes);
        // 4096 tokens × 32 layers × (K + V: 8 heads × 128 × 2 B × 2) = 512 MiB.
        assert_eq!(w.kv_bytes, 4096.0 * 32.0 * 4096.0);
    }

    #[test]
    fn roofline_is_memory_bound_for_small_decode_and_compute_bound_for_big_prefill() {
        let m = ModelShape::llama_3_1_8b();
        let r = Roofline::h200_datasheet();
        let t1 = predict_roofline(&m, &decode(1, 1024), &r);
        // 15 GB at 3.84 TB/s ≈ 3.9 ms plus 32 × 20 µs.
        assert!((4300.0..4800.0).contains(&t1), "{t1}");
        let pf = StepMeasurement {
            mode: StepMode::Prefill,
            batch: 1,
            ctx: 0,
            tokens: 8192,
            measured_us: 1.0,
            runner: "test".into(),
        };
        let w = step_work(&m, &pf);
        let t = predict_roofline(&m, &pf, &r);
        let compute = (w.gemm_flops + w.attn_flops) / (989.0 * 0.6 * 1e6);
        assert!((t - 640.0 - compute).abs() < 1e-6);
    }

    #[test]
    fn measured_prediction_sums_the_curves() {
        let m = ModelShape::llama_3_1_8b();
        // Flat curves: every GEMM 10 µs, attention 5 µs, no elementwise cost.
        let flat = |n: u64, k: u64| GemmCurve {
            name: String::new(),
            n,
            k,
            dtype: Dtype::Bf16,
            points: vec![GemmPoint {
                m: 1,
                us: 10.0,
                tflops: 1.0,
            }],
        };
        let shapes: Vec<_> = m.gemms().iter().map(|s| flat(s.n, s.k)).collect();
        let c = MeasuredCurves {
            gemm: shapes,
            attention: Some(AttentionCurve {
                kv_heads: 8,
                q_per_kv: 4,
                head_dim: 128,
                points: vec![AttentionPoint {
                    batch: 1,
                    ctx: 1 << 30,
                    kv_bytes: 1 << 40,
                    us: 5.0,
                    gbps: 1.0,
                }],
            }),
            copy: CopyPoint {
                bytes: 1,
                us: 1.0,
                gbps: f64::INFINITY,
                memcpy_gbps: f64::INFINITY,
            },
            ..Default::default()
        };
        // Decode batch 1: M=1 below the first point is flat; the head too.
        let p = predict_measured(&m, &decode(1, 1024), &c).unwrap();
        assert!((p - (32.0 * (4.0 * 10.0 + 5.0) + 10.0)).abs() < 1e-9, "{p}");
        // No curves at all: no prediction.
        assert_eq!(
            predict_measured(&m, &decode(1, 1024), &MeasuredCurves::default()),
            None
        );
    }

    #[test]
    fn error_summary_takes_absolute_median_and_worst() {
        assert_eq!(error_summary(&[0.1, -0.3, 0.05]), Some((0.1, 0.3)));
        assert_eq!(error_summary(&[]), None);
    }
}
