//! Per-iteration step time: a roofline over HBM bytes, FLOPs and NVLink bytes, plus
//! fixed per-layer / per-step costs and communication latency (engine spec §7).
//!
//! ```text
//! t_rank = L·τ_layer + τ_step (+ eager overhead)
//!        + max(bytes / (BW·η_bw), FLOPs / (F·η_f), comm_bytes / BW_nvl)   (roofline: max)
//!        + comm latency
//! t_step = max over attention-DP ranks (lockstep), + draft passes under speculation
//! ```
//! Weights per GPU: dense / (attention) TP plus the routed experts hit by the step's
//! tokens (`1 − (1 − k/E)^T`, T summed over all ranks because MoE is shared).

use crate::profiles::curves::{Dtype as CurveDtype, MeasuredCurves};
use crate::profiles::shapes::ModelShape;
use crate::profiles::{DraftKind, GpuSpec, KvLayout, ModelSpec, Roofline};
use crate::time::Time;
use serde::Serialize;

/// How the GPUs are split.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Parallelism {
    pub tp: u32,
    pub attn_dp: u32,
    pub ep: u32,
    /// MoE uses all-to-all (DeepEP-style backends) rather than all-reduce.
    pub moe_a2a: bool,
    pub dp_lm_head: bool,
}

impl Parallelism {
    pub fn attn_tp(&self) -> u32 {
        (self.tp / self.attn_dp).max(1)
    }
}

/// What one attention-DP rank runs in a step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RankLoad {
    /// Tokens through the model on this rank (padded to the graph size for decode).
    pub tokens: u64,
    /// Positions that need logits (LM head).
    pub logits: u64,
    /// KV bytes read per GPU.
    pub kv_read_bytes: f64,
    /// Attention score FLOPs of the whole rank.
    pub attn_flops: f64,
    /// Cached prefix tokens behind the rank's prefill chunks (summed): chunks after a prefix
    /// run prefill attention at a rate of their own.
    pub prefix: u64,
    /// Runs under a CUDA graph (no eager overhead).
    pub graph: bool,
    /// Speculative draft work on this rank.
    pub draft: Option<DraftLoad>,
}

/// Draft work of a speculative round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DraftLoad {
    /// Sequential draft forwards (EAGLE steps + the draft extend; 1 for DSpark).
    pub passes: u32,
    /// Tokens per draft forward.
    pub tokens: u64,
}

/// Time of one step with its parts (for reports and calibration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepCost {
    pub total: Time,
    pub fixed_s: f64,
    pub memory_s: f64,
    pub compute_s: f64,
    pub comm_bytes_s: f64,
    pub comm_latency_s: f64,
    pub draft_s: f64,
}

/// Precomputed per-GPU constants for one (model, GPU, parallelism).
#[derive(Clone, Debug)]
pub struct CostModel {
    pub model: ModelSpec,
    pub gpu: GpuSpec,
    pub par: Parallelism,
    bw: f64,
    flops: f64,
    nvl: f64,
    dense_read: f64,
    expert_bytes: f64,
    local_experts: f64,
    tp_moe: f64,
    attn_dense_flops_per_token: f64,
    moe_flops_per_token: f64,
    lm_head_flops_per_token: f64,
    lm_split: f64,
    extra_device_bytes: f64,
    measured: Option<MeasuredPath>,
    sustained: SustainedTerm,
}

/// Steady-load slowdown (measured curves only): the curves are short bursts at the boost
/// clock, but back-to-back steps run at the clock the board power limit allows. Seconds added
/// per unit of work, precomputed so the step does no curve lookups for it.
#[derive(Clone, Copy, Debug, Default)]
struct SustainedTerm {
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
    fn new(c: &MeasuredCurves, p: &MeasuredPath, model: &ModelSpec, par: &Parallelism) -> SustainedTerm {
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

    fn seconds(&self, r: &RankLoad, t_all: f64, attn_tp: f64) -> f64 {
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
struct MeasuredPath {
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
    fn new(model: &ModelSpec, par: &Parallelism, lm_split: f64) -> Option<MeasuredPath> {
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

fn experts_hit_fraction(k: f64, e: f64, t: f64) -> f64 {
    if t <= 0.0 { 0.0 } else { 1.0 - (1.0 - k / e).powf(t) }
}

impl CostModel {
    /// `env` decides where optional tables live (e.g. V4.1's Engram on the host).
    pub fn new(model: &ModelSpec, gpu: &GpuSpec, par: Parallelism, env: &std::collections::BTreeMap<String, String>) -> CostModel {
        let p = &model.params;
        let b = &model.bytes_per_param;
        let tp = par.tp as f64;
        let attn_tp = par.attn_tp() as f64;
        let lm_split = if par.dp_lm_head { attn_tp } else { tp };
        let dense_read =
            p.attention * b.attention / attn_tp + (p.shared_experts + p.dense_ffn) * b.ffn / tp + p.lm_head * b.head / lm_split;
        let (expert_bytes, local_experts, moe_flops_experts) = match &model.experts {
            Some(e) => (
                e.params_per_expert * e.bytes_per_param,
                e.routed as f64 / par.ep as f64,
                e.top_k as f64 * e.params_per_expert * model.moe_layers as f64,
            ),
            None => (0.0, 0.0, 0.0),
        };
        let extra_device_bytes = model
            .extra_weights
            .iter()
            .filter(|x| {
                !x.host_resident_env.as_ref().is_some_and(|k| env.get(k).is_some_and(|v| matches!(v.as_str(), "1" | "true" | "True")))
            })
            .map(|x| x.bytes)
            .sum::<f64>();
        let measured = gpu.measured.as_ref().and_then(|_| MeasuredPath::new(model, &par, lm_split));
        let sustained = gpu
            .measured
            .as_ref()
            .zip(measured.as_ref())
            .map_or_else(SustainedTerm::default, |(c, p)| SustainedTerm::new(c, p, model, &par));
        CostModel {
            model: model.clone(),
            gpu: gpu.clone(),
            par,
            bw: gpu.datasheet.hbm_bandwidth * gpu.cost.eta_bw,
            flops: gpu.peak_flops(model.compute_dtype) * gpu.cost.eta_flops,
            nvl: gpu.datasheet.nvlink_bandwidth,
            dense_read,
            expert_bytes,
            local_experts,
            tp_moe: (par.tp / par.ep).max(1) as f64,
            attn_dense_flops_per_token: 2.0 * p.attention,
            moe_flops_per_token: 2.0 * (p.shared_experts + p.dense_ffn + moe_flops_experts),
            lm_head_flops_per_token: 2.0 * p.lm_head,
            lm_split,
            extra_device_bytes,
            measured,
            sustained,
        }
    }

    /// Whether step times come from measured operator curves (else the datasheet roofline).
    pub fn uses_measured_curves(&self) -> bool {
        self.measured.is_some()
    }

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
    fn measured_body(&self, c: &MeasuredCurves, p: &MeasuredPath, r: &RankLoad, t_all: f64) -> (f64, f64) {
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
        let attn_compute = r.attn_flops / attn_tp / rate;
        ops += attn_compute.max(kv_s);
        let elementwise =
            layers * (c.fitted.tau_elementwise_us * 1e-6 + c.fitted.elementwise_traffic * t * p.elementwise_bytes_per_token / self.bw);
        // Steady load: tensor-core and KV-streaming work runs below the curves' boost clock.
        ops += self.sustained.seconds(r, t_all, attn_tp);
        (elementwise, ops)
    }

    /// Weight bytes resident on one GPU (model + draft + device-resident tables).
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        let m = &self.model;
        let p = &m.params;
        let b = &m.bytes_per_param;
        let tp = self.par.tp as f64;
        let attn_tp = self.par.attn_tp() as f64;
        let experts = m.experts.as_ref().map_or(0.0, |e| e.routed as f64 * m.moe_layers as f64 * e.params_per_expert * e.bytes_per_param);
        p.attention * b.attention / attn_tp
            + (p.shared_experts + p.dense_ffn) * b.ffn / tp
            + (p.lm_head + p.embedding) * b.head / self.lm_split
            + experts / tp
            + m.draft_bytes() / tp
            + self.extra_device_bytes / tp
    }

    /// Device-resident extra tables (whole model), for reports.
    pub fn extra_device_bytes(&self) -> f64 {
        self.extra_device_bytes
    }

    /// KV pool bytes per token on one GPU (what sizes `max_total_num_tokens`).
    pub fn kv_bytes_per_token_per_gpu(&self) -> f64 {
        match &self.model.kv {
            KvLayout::Mla { layers, bytes_per_token_per_layer, .. } => (*layers as u64 * bytes_per_token_per_layer) as f64,
            KvLayout::Gqa { layers, kv_heads, head_dim, bytes_per_elem } => {
                let total = 2.0 * (*kv_heads * *head_dim * *bytes_per_elem * *layers) as f64;
                total / self.par.attn_tp().min(*kv_heads).max(1) as f64
            }
            KvLayout::Dsv4 {
                window_layers,
                row_bytes,
                csa_layers,
                csa_ratio,
                indexer_row_bytes,
                hca_layers,
                hca_ratio,
                swa_pool_ratio,
                ..
            } => {
                let row = *row_bytes as f64;
                *csa_layers as f64 * (row + *indexer_row_bytes as f64) / *csa_ratio as f64
                    + *hca_layers as f64 * row / *hca_ratio as f64
                    + swa_pool_ratio * *window_layers as f64 * row
            }
        }
    }

    /// KV bytes one GPU reads for one request attending a context of `c` tokens.
    pub fn kv_read_bytes(&self, c: u64) -> f64 {
        let cf = c as f64;
        match &self.model.kv {
            KvLayout::Mla { layers, bytes_per_token_per_layer, .. } => cf * (*layers as u64 * bytes_per_token_per_layer) as f64,
            KvLayout::Gqa { .. } => cf * self.kv_bytes_per_token_per_gpu(),
            KvLayout::Dsv4 {
                window,
                row_bytes,
                window_layers,
                csa_layers,
                csa_ratio,
                csa_topk,
                indexer_row_bytes,
                hca_layers,
                hca_ratio,
                ..
            } => {
                let row = *row_bytes as f64;
                let compressed = cf / *csa_ratio as f64;
                *window_layers as f64 * cf.min(*window as f64) * row
                    + *csa_layers as f64 * compressed * *indexer_row_bytes as f64
                    + *csa_layers as f64 * compressed.min(*csa_topk as f64) * row
                    + *hca_layers as f64 * (cf / *hca_ratio as f64) * row
            }
        }
    }

    /// Attention score FLOPs (whole rank) for `q` query tokens ending at context `c`.
    pub fn attn_flops(&self, q: u64, c: u64, prefill: bool) -> f64 {
        let heads = self.model.heads as f64;
        let avg = c as f64 - q as f64 / 2.0;
        let qf = q as f64;
        match &self.model.kv {
            KvLayout::Mla { layers, decode_dim, prefill_dim, .. } => {
                let dim = if prefill { *prefill_dim } else { *decode_dim } as f64;
                2.0 * heads * dim * qf * avg * *layers as f64
            }
            KvLayout::Gqa { layers, head_dim, .. } => 2.0 * heads * 2.0 * *head_dim as f64 * qf * avg * *layers as f64,
            KvLayout::Dsv4 {
                window,
                window_layers,
                csa_layers,
                csa_ratio,
                csa_topk,
                indexer_heads,
                indexer_dim,
                hca_layers,
                hca_ratio,
                qk_dim,
                v_dim,
                ..
            } => {
                let compressed = avg / *csa_ratio as f64;
                let rows = *window_layers as f64 * avg.min(*window as f64)
                    + *csa_layers as f64 * compressed.min(*csa_topk as f64)
                    + *hca_layers as f64 * avg / *hca_ratio as f64;
                let idx = *csa_layers as f64 * 2.0 * (*indexer_heads * *indexer_dim) as f64 * compressed;
                qf * (2.0 * heads * (*qk_dim + *v_dim) as f64 * rows + idx)
            }
        }
    }

    fn expert_read(&self, t_moe: f64) -> f64 {
        match &self.model.experts {
            Some(e) => {
                self.model.moe_layers as f64
                    * self.local_experts
                    * experts_hit_fraction(e.top_k as f64, e.routed as f64, t_moe)
                    * self.expert_bytes
                    / self.tp_moe
            }
            None => 0.0,
        }
    }

    fn draft_time(&self, d: &DraftLoad) -> f64 {
        let Some(spec) = &self.model.draft else {
            return 0.0;
        };
        let c = &self.gpu.cost;
        let tp = self.par.tp as f64;
        let t = d.tokens as f64;
        let experts = if spec.routed > 0 && spec.expert_params > 0.0 {
            spec.expert_params * spec.expert_bytes_per_param * experts_hit_fraction(spec.top_k as f64, spec.routed as f64, t)
        } else {
            0.0
        };
        // The draft shares the target's LM head.
        let bytes = (spec.dense_params * spec.dense_bytes_per_param + experts) / tp
            + self.model.params.lm_head * self.model.bytes_per_param.head / self.lm_split;
        let per_pass = spec.layers as f64 * c.tau_layer_us * 1e-6 + bytes / self.bw;
        let passes = match spec.kind {
            DraftKind::Mtp => d.passes as f64,
            DraftKind::Dspark => d.passes.max(1) as f64,
        };
        per_pass * passes
    }

    /// Step time for the loads of all attention-DP ranks (one entry per rank).
    pub fn step(&self, ranks: &[RankLoad]) -> StepCost {
        let c = &self.gpu.cost;
        let m = &self.model;
        let tp = self.par.tp as f64;
        let attn_tp = self.par.attn_tp() as f64;
        let hidden = m.hidden_size as f64;
        let t_all: f64 = ranks.iter().map(|r| r.tokens as f64).sum();
        let any_eager = ranks.iter().any(|r| r.tokens > 0 && !r.graph);
        let expert_read = self.expert_read(t_all);
        let moe_flops = self.moe_flops_per_token * t_all / tp;
        let layers = m.layers as f64;
        let moe_layers = m.moe_layers as f64;
        let a_ar = c.allreduce_latency_us * 1e-6;
        let a_a2a = c.a2a_latency_us * 1e-6;

        let mut best = StepCost::default();
        let mut best_t = -1.0f64;
        let measured = self.gpu.measured.as_ref().zip(self.measured.as_ref());
        for r in ranks {
            let t = r.tokens as f64;
            // With measured curves the per-layer cost is inside the operator times.
            let mut fixed = if measured.is_some() { c.tau_step_us * 1e-6 } else { layers * c.tau_layer_us * 1e-6 + c.tau_step_us * 1e-6 };
            // Lockstep: an eager rank makes the whole step eager.
            if any_eager {
                fixed += c.eager_overhead_us * 1e-6;
            }
            let bytes = self.dense_read + expert_read + r.kv_read_bytes;
            let mut mem = bytes / self.bw;
            let flops = self.attn_dense_flops_per_token * t / attn_tp
                + moe_flops
                + self.lm_head_flops_per_token * r.logits as f64 / self.lm_split
                + r.attn_flops / attn_tp;
            let mut compute = flops / self.flops;
            // Communication: attention all-reduce inside the attention-TP group,
            // then MoE all-reduce / DP gather-scatter / all-to-all.
            let (mut comm_b, mut comm_l) = (0.0, 0.0);
            if attn_tp > 1.0 {
                comm_l += layers * a_ar;
                comm_b += layers * 2.0 * (attn_tp - 1.0) / attn_tp * t * hidden * 2.0 / self.nvl;
            }
            if tp > 1.0 && moe_layers > 0.0 {
                if self.par.moe_a2a && self.par.ep > 1 {
                    let k = m.experts.as_ref().map_or(0, |e| e.top_k) as f64;
                    comm_l += 2.0 * moe_layers * a_a2a;
                    comm_b += 2.0 * moe_layers * t * k * hidden * 3.0 / self.nvl;
                } else if self.par.attn_dp > 1 {
                    comm_l += 2.0 * moe_layers * a_ar;
                    comm_b += 2.0 * moe_layers * (tp - 1.0) / tp * t_all * hidden * 2.0 / self.nvl;
                } else {
                    comm_l += moe_layers * a_ar;
                    comm_b += moe_layers * 2.0 * (tp - 1.0) / tp * t * hidden * 2.0 / self.nvl;
                }
            } else if tp > 1.0 && attn_tp <= 1.0 {
                // dense model under DP attention: gather/scatter around the MLP
                comm_l += 2.0 * layers * a_ar;
                comm_b += 2.0 * layers * (tp - 1.0) / tp * t_all * hidden * 2.0 / self.nvl;
            } else if tp > 1.0 {
                comm_l += layers * a_ar;
                comm_b += layers * 2.0 * (tp - 1.0) / tp * t * hidden * 2.0 / self.nvl;
            }
            let draft = r.draft.as_ref().map_or(0.0, |d| self.draft_time(d));
            let body = if let Some((curves, path)) = measured {
                // Kernels run back to back: bandwidth-bound and operator times add up.
                (mem, compute) = self.measured_body(curves, path, r, t_all);
                match c.roofline {
                    Roofline::Max => (mem + compute).max(comm_b),
                    Roofline::Sum => mem + compute + comm_b,
                }
            } else {
                match c.roofline {
                    Roofline::Max => mem.max(compute).max(comm_b),
                    Roofline::Sum => mem + compute + comm_b,
                }
            };
            let total = fixed + body + comm_l + draft;
            if total > best_t {
                best_t = total;
                best = StepCost {
                    total: Time::from_secs_f64(total),
                    fixed_s: fixed,
                    memory_s: mem,
                    compute_s: compute,
                    comm_bytes_s: comm_b,
                    comm_latency_s: comm_l,
                    draft_s: draft,
                };
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn model(name: &str, gpu: &str, par: Parallelism) -> CostModel {
        CostModel::new(&ModelSpec::lookup(name).unwrap(), &GpuSpec::lookup(gpu).unwrap(), par, &BTreeMap::new())
    }

    fn tp8() -> Parallelism {
        Parallelism { tp: 8, attn_dp: 1, ep: 8, moe_a2a: false, dp_lm_head: false }
    }

    fn decode(cm: &CostModel, b: u64, c: u64) -> RankLoad {
        RankLoad {
            tokens: b,
            logits: b,
            kv_read_bytes: b as f64 * cm.kv_read_bytes(c),
            attn_flops: b as f64 * cm.attn_flops(1, c, false),
            prefix: 0,
            graph: true,
            draft: None,
        }
    }

    fn within(x: f64, target: f64, tol: f64) -> bool {
        (x - target).abs() <= tol * target
    }

    #[test]
    fn v4_flash_kv_read_matches_spec() {
        let cm = model("deepseek-v4-flash", "h200", tp8());
        let a = cm.kv_read_bytes(4096) / 1e6;
        let b = cm.kv_read_bytes(32768) / 1e6;
        assert!((a - 12.7).abs() <= 0.1, "{a} MB at 4K");
        assert!((b - 35.0).abs() <= 0.5, "{b} MB at 32K");
        let pool = cm.kv_bytes_per_token_per_gpu();
        assert!((6000.0..6700.0).contains(&pool), "{pool} B/token (about 6.3 KB)");
    }

    /// Spec §7.6 worked examples, within 15 %.
    #[test]
    fn worked_examples_within_tolerance() {
        let cm = model("deepseek-v4-flash", "h200", tp8());
        let t = cm.step(&[decode(&cm, 64, 4096)]).total.as_millis_f64();
        assert!(within(t, 7.0, 0.15), "V4 TP8 b64 {t} ms");
        let t1 = cm.step(&[decode(&cm, 1, 4096)]).total.as_millis_f64();
        assert!(within(t1, 3.0, 0.15), "V4 TP8 b1 {t1} ms");
        let pre = RankLoad {
            tokens: 8192,
            logits: 1,
            kv_read_bytes: cm.kv_read_bytes(8192),
            attn_flops: cm.attn_flops(8192, 8192, true),
            prefix: 0,
            graph: false,
            draft: None,
        };
        let tp = cm.step(&[pre]).total.as_millis_f64();
        assert!((35.0 * 0.85..=40.0 * 1.15).contains(&tp), "V4 TP8 prefill 8K {tp} ms");
        assert!(tp > t, "prefill 8K exceeds decode b64");

        let dp = model("deepseek-v4-flash", "h200", Parallelism { tp: 8, attn_dp: 8, ep: 8, moe_a2a: false, dp_lm_head: false });
        let loads: Vec<RankLoad> = (0..8).map(|_| decode(&dp, 64, 4096)).collect();
        let tdp = dp.step(&loads).total.as_millis_f64();
        assert!(within(tdp, 9.0, 0.15), "V4 DP8 64/rank {tdp} ms");

        let v3 = model("deepseek-v3", "h200", tp8());
        let t3 = v3.step(&[decode(&v3, 64, 4096)]).total.as_millis_f64();
        assert!(within(t3, 24.0, 0.15), "V3 TP8 b64 {t3} ms");
    }

    #[test]
    fn decode_time_monotone_in_batch_and_context() {
        let cm = model("deepseek-v4-flash", "h200", tp8());
        let mut prev = 0.0;
        for b in [1u64, 2, 4, 8, 16, 32, 64, 128, 256] {
            let t = cm.step(&[decode(&cm, b, 4096)]).total.as_secs_f64();
            assert!(t >= prev, "b={b}");
            prev = t;
        }
        let mut prev = 0.0;
        for c in [128u64, 1024, 4096, 32768, 262144, 1 << 20] {
            let t = cm.step(&[decode(&cm, 32, c)]).total.as_secs_f64();
            assert!(t >= prev, "c={c}");
            prev = t;
        }
    }

    #[test]
    fn engram_table_counts_only_when_on_device() {
        let m = ModelSpec::lookup("deepseek-v4.1-flash").unwrap();
        let g = GpuSpec::lookup("gb300").unwrap();
        let par = Parallelism { tp: 4, attn_dp: 1, ep: 1, moe_a2a: false, dp_lm_head: false };
        let dev = CostModel::new(&m, &g, par, &BTreeMap::new());
        let mut env = BTreeMap::new();
        env.insert("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE".into(), "1".into());
        let host = CostModel::new(&m, &g, par, &env);
        let diff = dev.weight_bytes_per_gpu() - host.weight_bytes_per_gpu();
        assert!((diff - 50e9).abs() < 1e6, "{diff}");
    }
}
