//! The parameter space: which parameters a fit can move, their bounds, a candidate's values and
//! the unit-cube coordinates the search moves in.

use engine::GpuSpec;
use engine::profiles::WorkloadScales;

use super::FitError;

/// A fitted parameter: where it lives and its bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Param {
    pub name: &'static str,
    pub lower: f64,
    pub upper: f64,
    pub what: &'static str,
}

impl Param {
    /// A workload transform rather than a cost parameter: candidates that move it replay their
    /// own scaled compile of the trace set.
    pub fn is_workload(&self) -> bool {
        self.what.starts_with("workload:")
    }
}

/// Every parameter a fit can move. Bounds span the spec's ranges (engine spec §7.4) with room
/// on both sides; all are positive, so they are searched on a log scale.
pub const PARAMS: &[Param] = &[
    Param {
        name: "eta_bw",
        lower: 0.3,
        upper: 0.95,
        what: "HBM bandwidth efficiency (memory-bound steps: decode; no kernel streams above ~95 % of the datasheet)",
    },
    Param { name: "eta_flops", lower: 0.05, upper: 1.0, what: "FLOP efficiency (compute-bound steps: prefill)" },
    Param { name: "tau_layer_us", lower: 5.0, upper: 200.0, what: "fixed cost per layer per step (kernel launches, norms, mHC)" },
    Param { name: "tau_step_us", lower: 50.0, upper: 20000.0, what: "fixed cost per step (sampling, scheduling, streaming)" },
    Param { name: "eager_overhead_us", lower: 100.0, upper: 300000.0, what: "extra cost of a step outside CUDA graphs (prefill)" },
    Param { name: "eager_layer_us", lower: 50.0, upper: 10000.0, what: "host cost per layer of a step outside CUDA graphs (framework)" },
    Param { name: "allreduce_latency_us", lower: 2.0, upper: 100.0, what: "latency per all-reduce (TP)" },
    Param { name: "a2a_latency_us", lower: 5.0, upper: 300.0, what: "latency per all-to-all / DP gather (EP, DP attention)" },
    Param { name: "osl_scale", lower: 0.5, upper: 20.0, what: "workload: output tokens relative to the trace's recorded out" },
    Param { name: "delay_scale", lower: 0.002, upper: 2.0, what: "workload: recorded inter-turn delays multiplied by this" },
    Param { name: "osl_exp", lower: 0.5, upper: 2.0, what: "workload: exponent of output length about 1,000 recorded tokens" },
    Param {
        name: "isl_scale",
        lower: 0.5,
        upper: 6.0,
        what: "workload: input tokens (and tokens per hashed block) relative to the trace's",
    },
    Param { name: "delay_cap_s", lower: 0.05, upper: 600.0, what: "workload: longest end-to-start delay after scaling, s" },
];

/// The default parameter set: the cost model's efficiencies, fixed costs and the EP/DP latency.
pub const DEFAULT_PARAMS: &[&str] = &["eta_bw", "eta_flops", "tau_layer_us", "tau_step_us", "a2a_latency_us"];

/// A joint fit's default per-GPU parameters (`sweep calibrate fit --points`).
pub const JOINT_GPU_PARAMS: &[&str] = &["eta_bw", "tau_layer_us", "tau_step_us"];

/// A joint fit's default parameters shared by every GPU: the framework's host costs.
pub const JOINT_SHARED_PARAMS: &[&str] = &["eager_layer_us"];

pub fn param(name: &str) -> Result<Param, FitError> {
    PARAMS.iter().copied().find(|p| p.name == name).ok_or_else(|| {
        FitError::Params(format!("unknown parameter {name}; known: {}", PARAMS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")))
    })
}

/// A candidate: cost parameters (inside a hardware profile) and workload scales.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub gpu: GpuSpec,
    pub scales: WorkloadScales,
}

impl Candidate {
    /// What tells two candidates apart in a fit: the bits of every fittable parameter.
    pub fn key(&self) -> Vec<u64> {
        PARAMS.iter().map(|p| self.get(p.name).to_bits()).collect()
    }

    pub fn get(&self, name: &str) -> f64 {
        let c = &self.gpu.cost;
        match name {
            "eta_bw" => c.eta_bw,
            "eta_flops" => c.eta_flops,
            "tau_layer_us" => c.tau_layer_us,
            "tau_step_us" => c.tau_step_us,
            "eager_overhead_us" => c.eager_overhead_us,
            "eager_layer_us" => c.eager_layer_us,
            "allreduce_latency_us" => c.allreduce_latency_us,
            "a2a_latency_us" => c.a2a_latency_us,
            "osl_scale" => self.scales.osl_scale,
            "delay_scale" => self.scales.delay_scale,
            "osl_exp" => self.scales.osl_exp,
            "isl_scale" => self.scales.isl_scale,
            // No cap is the same as the largest cap the search allows.
            "delay_cap_s" => self.scales.delay_cap_s.unwrap_or(f64::INFINITY),
            _ => f64::NAN,
        }
    }

    pub fn set(&mut self, name: &str, v: f64) {
        let c = &mut self.gpu.cost;
        match name {
            "eta_bw" => c.eta_bw = v,
            "eta_flops" => c.eta_flops = v,
            "tau_layer_us" => c.tau_layer_us = v,
            "tau_step_us" => c.tau_step_us = v,
            "eager_overhead_us" => c.eager_overhead_us = v,
            "eager_layer_us" => c.eager_layer_us = v,
            "allreduce_latency_us" => c.allreduce_latency_us = v,
            "a2a_latency_us" => c.a2a_latency_us = v,
            "osl_scale" => self.scales.osl_scale = v,
            "delay_scale" => self.scales.delay_scale = v,
            "osl_exp" => self.scales.osl_exp = v,
            "isl_scale" => self.scales.isl_scale = v,
            "delay_cap_s" => self.scales.delay_cap_s = v.is_finite().then_some(v),
            _ => {}
        }
    }
}

pub(super) fn to_unit(p: &Param, v: f64) -> f64 {
    ((v.clamp(p.lower, p.upper) / p.lower).ln() / (p.upper / p.lower).ln()).clamp(0.0, 1.0)
}

pub(super) fn from_unit(p: &Param, u: f64) -> f64 {
    p.lower * (p.upper / p.lower).powf(u.clamp(0.0, 1.0))
}
