//! A hardware profile: datasheet facts, cost-model parameters, and what was measured
//! or fitted on the GPU.

use super::curves::MeasuredCurves;
use super::fit::FitRecord;
use super::model::Dtype;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flops {
    pub bf16: f64,
    pub fp8: f64,
    #[serde(default)]
    pub fp4: Option<f64>,
}

/// Published facts about one GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Datasheet {
    pub memory_bytes: f64,
    pub hbm_bandwidth: f64,
    pub flops: Flops,
    /// Per direction, bytes/s.
    pub nvlink_bandwidth: f64,
    pub gpus_per_node: u32,
    /// GPU architecture (`hopper`, `blackwell`): a GPU with no published point borrows the
    /// fitted cost parameters of one of the same architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Roofline {
    /// `t = fixed + max(memory, compute, comm bytes) + comm latency`
    Max,
    /// Conservative upper bound: every term summed.
    Sum,
}

/// Cost-model parameters (calibratable, kept apart from the datasheet).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostParams {
    pub roofline: Roofline,
    pub eta_bw: f64,
    pub eta_flops: f64,
    pub tau_layer_us: f64,
    pub tau_step_us: f64,
    pub eager_overhead_us: f64,
    /// Host cost per layer of a step outside CUDA graphs (the framework's Python and
    /// launches, paid layer by layer): what makes an eager prefill of a deep model slow
    /// whatever its size. 0 in profiles fitted before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub eager_layer_us: f64,
    pub allreduce_latency_us: f64,
    pub a2a_latency_us: f64,
    #[serde(default)]
    pub calibrated: bool,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// A hardware profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub datasheet: Datasheet,
    pub cost: CostParams,
    /// Curves measured on this GPU by `sweep calibrate gpu`; when present the cost model
    /// sums measured operator times instead of the datasheet roofline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredCurves>,
    /// How `cost` was fitted to measured serving results by `sweep calibrate fit`: the points,
    /// trace set, seed, loss and per-point residuals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitRecord>,
    /// Board power against the step's work; a GPU without one predicts no energy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<super::PowerModel>,
}

impl GpuSpec {
    /// Peak dense FLOP/s for a compute dtype, falling back to the next wider type
    /// the GPU supports (FP4 weights on Hopper run through FP8).
    pub fn peak_flops(&self, dtype: Dtype) -> f64 {
        match dtype {
            Dtype::Fp4 => self.datasheet.flops.fp4.unwrap_or(self.datasheet.flops.fp8),
            Dtype::Fp8 => self.datasheet.flops.fp8,
            Dtype::Bf16 => self.datasheet.flops.bf16,
        }
    }
}
