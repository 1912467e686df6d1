//! Per-iteration step time: a roofline over HBM bytes, FLOPs and NVLink bytes, plus
//! fixed per-layer / per-step costs and communication latency (engine spec §7).
//!
//! ```text
//! t_rank = L·τ_layer + τ_step (+ eager overhead + L·eager per layer)
//!        + max(bytes / (BW·η_bw), FLOPs / (F·η_f), comm_bytes / BW_nvl)   (roofline: max)
//!        + comm latency
//! t_step = max over attention-DP ranks (lockstep), + draft passes under speculation
//! ```
//! Weights per GPU: dense / (attention) TP plus the routed experts hit by the step's
//! tokens (`1 − (1 − k/E)^T`, T summed over all ranks because MoE is shared).
//!
//! With curves measured on the GPU (`measured.rs`) operator times replace the roofline
//! body; the KV layouts' bytes and FLOPs are `kv.rs`.

use crate::profiles::{DraftKind, GpuSpec, ModelSpec, Roofline};
use crate::time::Time;
use measured::{MeasuredPath, SustainedTerm};
use serde::Serialize;

mod kv;
mod measured;
#[cfg(test)]
mod tests;

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
    /// Attention score FLOPs of the whole rank (split by attention TP).
    pub attn_flops: f64,
    /// DeepSeek-V4 lightning-indexer FLOPs on each GPU (not split by TP; FP8).
    pub indexer_flops: f64,
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
    /// FP8 tensor-core rate of the indexer's logits (FLOP/s).
    indexer_rate: f64,
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

/// What all ranks of a step share: the tokens through the shared MoE, the expert
/// weights they read, and whether any rank runs eager.
struct SharedLoad {
    t_all: f64,
    any_eager: bool,
    expert_read: f64,
    moe_flops: f64,
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
            indexer_rate: gpu.peak_flops(crate::profiles::Dtype::Fp8) * gpu.cost.eta_flops,
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

    /// Step time for the loads of all attention-DP ranks (one entry per rank): the
    /// slowest rank's, as the ranks run in lockstep.
    pub fn step(&self, ranks: &[RankLoad]) -> StepCost {
        let t_all: f64 = ranks.iter().map(|r| r.tokens as f64).sum();
        let shared = SharedLoad {
            t_all,
            any_eager: ranks.iter().any(|r| r.tokens > 0 && !r.graph),
            expert_read: self.expert_read(t_all),
            moe_flops: self.moe_flops_per_token * t_all / self.par.tp as f64,
        };
        let mut best = StepCost::default();
        let mut best_t = -1.0f64;
        for r in ranks {
            let (total, cost) = self.rank_step(r, &shared);
            if total > best_t {
                best_t = total;
                best = cost;
            }
        }
        best
    }

    /// One rank's step time (seconds) and its parts.
    fn rank_step(&self, r: &RankLoad, s: &SharedLoad) -> (f64, StepCost) {
        let c = &self.gpu.cost;
        let attn_tp = self.par.attn_tp() as f64;
        let layers = self.model.layers as f64;
        let measured = self.gpu.measured.as_ref().zip(self.measured.as_ref());
        let t = r.tokens as f64;
        // With measured curves the per-layer cost is inside the operator times.
        let mut fixed = if measured.is_some() { c.tau_step_us * 1e-6 } else { layers * c.tau_layer_us * 1e-6 + c.tau_step_us * 1e-6 };
        // Lockstep: an eager rank makes the whole step eager.
        if s.any_eager {
            fixed += (c.eager_overhead_us + layers * c.eager_layer_us) * 1e-6;
        }
        let bytes = self.dense_read + s.expert_read + r.kv_read_bytes;
        let mut mem = bytes / self.bw;
        let flops = self.attn_dense_flops_per_token * t / attn_tp
            + s.moe_flops
            + self.lm_head_flops_per_token * r.logits as f64 / self.lm_split
            + r.attn_flops / attn_tp;
        let mut compute = flops / self.flops + r.indexer_flops / self.indexer_rate;
        let (comm_b, comm_l) = self.comm(t, s.t_all);
        let draft = r.draft.as_ref().map_or(0.0, |d| self.draft_time(d));
        let body = if let Some((curves, path)) = measured {
            // Kernels run back to back: bandwidth-bound and operator times add up.
            (mem, compute) = self.measured_body(curves, path, r, s.t_all);
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
        let cost = StepCost {
            total: Time::from_secs_f64(total),
            fixed_s: fixed,
            memory_s: mem,
            compute_s: compute,
            comm_bytes_s: comm_b,
            comm_latency_s: comm_l,
            draft_s: draft,
        };
        (total, cost)
    }

    /// Communication of a rank's step, (bytes s, latency s): attention all-reduce inside
    /// the attention-TP group, then MoE all-reduce / DP gather-scatter / all-to-all.
    fn comm(&self, t: f64, t_all: f64) -> (f64, f64) {
        let c = &self.gpu.cost;
        let m = &self.model;
        let tp = self.par.tp as f64;
        let attn_tp = self.par.attn_tp() as f64;
        let hidden = m.hidden_size as f64;
        let layers = m.layers as f64;
        let moe_layers = m.moe_layers as f64;
        let a_ar = c.allreduce_latency_us * 1e-6;
        let a_a2a = c.a2a_latency_us * 1e-6;
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
        (comm_b, comm_l)
    }
}
