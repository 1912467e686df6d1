//! The measured-curve path: a step's operators timed from the GPU's measured curves
//! (GEMMs by shape and dtype, routed experts, attention, elementwise traffic) and the
//! steady-load slowdown those short bursts do not show.

use super::{CostModel, Parallelism, RankLoad};
use crate::profiles::ModelSpec;
use crate::profiles::curves::{Dtype as CurveDtype, MeasuredCurves};
use crate::profiles::shapes::ModelShape;

/// Steady-load slowdown (measured curves only): the curves are short bursts at the boost
/// clock, but back-to-back steps run at the clock the board power limit allows. Seconds added
/// per unit of work, precomputed so the step does no curve lookups for it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SustainedTerm {
    /// Per token through the dense GEMMs (tensor-core time at the best measured rate).
    per_token: f64,
    per_logit: f64,
    /// Per routed token (whole step) through this GPU's share of the experts.
    per_expert_token: f64,
    per_attn_flop: f64,
    /// Per KV byte read.
    per_kv_byte: f64,
}

impl SustainedTerm {
    pub(super) fn new(c: &MeasuredCurves, p: &MeasuredPath, model: &ModelSpec, par: &Parallelism) -> SustainedTerm {
        let f = &c.fitted;
        if f.sustained_compute <= 0.0 && f.sustained_bandwidth <= 0.0 {
            return SustainedTerm::default();
        }
        // Tensor-core seconds per FLOP of a GEMM's dtype at its best measured rate.
        let peak = |d: Option<CurveDtype>| {
            d.and_then(|d| c.peak_tflops(d)).or_else(|| c.peak_tflops(CurveDtype::Bf16)).map_or(0.0, |tf| 1.0 / (tf * 1e12))
        };
        let gemm = |g: &StepGemm| 2.0 * (g.n * g.k) as f64 * peak(g.dtype);
        let per_expert_token = match (&p.experts, &model.experts) {
            (Some((gu, dn)), Some(e)) => {
                let share = e.top_k as f64 / (par.ep as f64 * (par.tp / par.ep).max(1) as f64);
                gu.count * (gemm(gu) + gemm(dn)) * share
            }
            _ => 0.0,
        };
        let s = f.sustained_compute;
        SustainedTerm {
            per_token: s * p.gemms.iter().map(|g| g.count * gemm(g)).sum::<f64>(),
            per_logit: s * gemm(&p.head),
            per_expert_token: s * per_expert_token,
            per_attn_flop: s * peak(Some(CurveDtype::Bf16)),
            per_kv_byte: if c.copy.gbps > 0.0 { f.sustained_bandwidth / (c.copy.gbps * 1e9) } else { 0.0 },
        }
    }

    pub(super) fn seconds(&self, r: &RankLoad, t_all: f64, attn_tp: f64) -> f64 {
        self.per_token * r.tokens as f64
            + self.per_logit * r.logits as f64
            + self.per_expert_token * t_all
            + self.per_attn_flop * r.attn_flops / attn_tp
            + self.per_kv_byte * r.kv_read_bytes
    }
}

/// One per-GPU GEMM of a step, timed from the measured curve of its shape and dtype.
#[derive(Clone, Debug)]
struct StepGemm {
    n: u64,
    k: u64,
    /// `None` when the weights' storage type has no measured curve (e.g. FP4): roofline.
    dtype: Option<CurveDtype>,
    bytes_per_param: f64,
    /// Times per step (layers holding this weight).
    count: f64,
}

/// What the measured-curve path needs: the model's per-GPU GEMM shapes (from its
/// architecture, split by tensor parallelism), its routed-expert shapes and the bytes its
/// elementwise kernels move per token per layer.
#[derive(Clone, Debug)]
pub(super) struct MeasuredPath {
    gemms: Vec<StepGemm>,
    head: StepGemm,
    experts: Option<(StepGemm, StepGemm)>,
    elementwise_bytes_per_token: f64,
}

fn curve_dtype(bytes_per_param: f64) -> Option<CurveDtype> {
    if (bytes_per_param - 2.0).abs() < 1e-9 {
        Some(CurveDtype::Bf16)
    } else if (bytes_per_param - 1.0).abs() < 1e-9 {
        Some(CurveDtype::Fp8)
    } else {
        None
    }
}

impl MeasuredPath {
    /// Shapes come from the model's built-in architecture description; a model without one
    /// keeps the datasheet roofline.
    pub(super) fn new(model: &ModelSpec, par: &Parallelism, lm_split: f64) -> Option<MeasuredPath> {
        let shape = ModelShape::builtin(&model.name)?;
        let (tp, attn_tp) = (par.tp as u64, par.attn_tp() as u64);
        let b = &model.bytes_per_param;
        let layers = model.layers as f64;
        let dense_layers = (model.layers - model.moe_layers) as f64;
        let shared = shape.moe.as_ref().map_or(0, |m| m.shared_experts) as f64;
        let mut gemms = Vec::new();
        let mut experts = (None, None);
        let mut head = None;
        for g in shape.gemms() {
            let name = g.name.rsplit('/').next().unwrap_or(&g.name).to_string();
            let mk = |n: u64, k: u64, bpp: f64, count: f64| StepGemm {
                n: n.max(1),
                k: k.max(1),
                dtype: curve_dtype(bpp),
                bytes_per_param: bpp,
                count,
            };
            match name.as_str() {
                "lm_head" => {
                    head = Some(mk((g.n as f64 / lm_split) as u64, g.k, b.head, 1.0));
                }
                "qkv_proj" | "q_b_proj" | "o_a_proj" => gemms.push(mk(g.n / attn_tp, g.k, b.attention, layers)),
                "o_proj" | "o_b_proj" => gemms.push(mk(g.n, g.k / attn_tp, b.attention, layers)),
                // Low-rank down-projections are small and replicated.
                "q_a_proj" | "kv_proj" => gemms.push(mk(g.n, g.k, b.attention, layers)),
                "gate_up_proj" => gemms.push(mk(g.n / tp, g.k, b.ffn, dense_layers)),
                "down_proj" => gemms.push(mk(g.n, g.k / tp, b.ffn, dense_layers)),
                "expert_gate_up" => {
                    let moe = model.moe_layers as f64;
                    if shared > 0.0 {
                        gemms.push(mk(g.n / tp, g.k, b.ffn, moe * shared));
                    }
                    let bpp = model.experts.as_ref().map_or(b.ffn, |e| e.bytes_per_param);
                    experts.0 = Some(mk(g.n, g.k, bpp, moe));
                }
                "expert_down" => {
                    let moe = model.moe_layers as f64;
                    if shared > 0.0 {
                        gemms.push(mk(g.n, g.k / tp, b.ffn, moe * shared));
                    }
                    let bpp = model.experts.as_ref().map_or(b.ffn, |e| e.bytes_per_param);
                    experts.1 = Some(mk(g.n, g.k, bpp, moe));
                }
                _ => gemms.push(mk(g.n, g.k, b.attention, layers)),
            }
        }
        Some(MeasuredPath {
            gemms,
            head: head?,
            experts: match experts {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            },
            elementwise_bytes_per_token: shape.elementwise_bytes_per_token(attn_tp, tp),
        })
    }
}

impl CostModel {
    /// Time (s) of one GEMM from its measured curve, or the roofline when there is none.
    fn gemm_s(&self, c: &MeasuredCurves, g: &StepGemm, rows: f64) -> f64 {
        if rows <= 0.0 {
            return 0.0;
        }
        if let Some(us) = g.dtype.and_then(|d| c.gemm_time_us(g.n, g.k, d, rows)) {
            return us * 1e-6;
        }
        let bytes = (g.n * g.k) as f64 * g.bytes_per_param;
        (bytes / self.bw).max(2.0 * rows * (g.n * g.k) as f64 / self.flops)
    }

    /// The measured-curve body of one rank's step: operator times summed as the kernels run
    /// one after another (Vidur-style), returning (bandwidth-bound s, operator s).
    pub(super) fn measured_body(&self, c: &MeasuredCurves, p: &MeasuredPath, r: &RankLoad, t_all: f64) -> (f64, f64) {
        let m = &self.model;
        let t = r.tokens as f64;
        let layers = m.layers as f64;
        let attn_tp = self.par.attn_tp() as f64;
        let mut ops: f64 = p.gemms.iter().map(|g| g.count * self.gemm_s(c, g, t)).sum();
        ops += self.gemm_s(c, &p.head, r.logits as f64);
        if let (Some((gu, dn)), Some(e)) = (&p.experts, &m.experts) {
            let share = 1.0 / (self.par.ep as f64 * self.tp_moe);
            let curve = |g: &StepGemm| {
                c.moe.iter().find(|mc| mc.n == g.n && mc.k == g.k && Some(mc.dtype) == g.dtype).and_then(|mc| mc.time_us(t_all))
            };
            ops += match (curve(gu), curve(dn)) {
                (Some(a), Some(b)) if t_all > 0.0 => gu.count * (a + b) * 1e-6 * share,
                _ => {
                    let flops = 2.0 * e.top_k as f64 * e.params_per_expert * m.moe_layers as f64 * t_all / self.par.tp as f64;
                    (self.expert_read(t_all) / self.bw).max(flops / self.flops)
                }
            };
        }
        // Attention: KV reads from the decode-attention curve, score FLOPs at the measured
        // prefill-attention rate (or the best GEMM rate).
        let kv_s = if r.kv_read_bytes > 0.0 {
            c.attention
                .as_ref()
                .and_then(|a| a.time_us(r.logits.max(1) as f64, r.kv_read_bytes / layers))
                .map_or(r.kv_read_bytes / self.bw, |us| layers * us * 1e-6)
        } else {
            0.0
        };
        let rate = c
            .prefill_attention_tflops_at(t, r.prefix as f64)
            .or_else(|| c.peak_tflops(CurveDtype::Bf16))
            .map_or(self.flops, |tf| tf * 1e12);
        let attn_compute = r.attn_flops / attn_tp / rate + r.indexer_flops / self.indexer_rate;
        ops += attn_compute.max(kv_s);
        let elementwise =
            layers * (c.fitted.tau_elementwise_us * 1e-6 + c.fitted.elementwise_traffic * t * p.elementwise_bytes_per_token / self.bw);
        // Steady load: tensor-core and KV-streaming work runs below the curves' boost clock.
        ops += self.sustained.seconds(r, t_all, attn_tp);
        (elementwise, ops)
    }
}
