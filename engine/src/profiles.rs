//! Model and hardware profiles (`profiles/{models,hardware}/*.yaml`), embedded in the
//! binary so the engine works from any directory; files on disk can override them.
//!
//! This is the engine's only YAML module.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Which SGLang defaults apply (page size, running cap, speculative defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelFamily {
    DeepseekV4,
    DeepseekV3,
    Llama,
    Generic,
}

/// Non-routed parameter counts (whole model, not per GPU).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenseParams {
    pub attention: f64,
    pub shared_experts: f64,
    pub dense_ffn: f64,
    pub lm_head: f64,
    pub embedding: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BytesPerParam {
    pub attention: f64,
    pub ffn: f64,
    pub head: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experts {
    pub routed: u32,
    pub top_k: u32,
    pub params_per_expert: f64,
    pub bytes_per_param: f64,
}

/// KV cache layout: drives pool bytes per token, KV bytes read per step and
/// attention FLOPs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "layout", rename_all = "snake_case", deny_unknown_fields)]
pub enum KvLayout {
    /// Multi-head latent attention (one latent KV row per token per layer,
    /// replicated on every attention-TP rank).
    Mla { layers: u32, bytes_per_token_per_layer: u64, decode_dim: u32, prefill_dim: u32 },
    /// Grouped-query attention (KV heads split over attention TP).
    Gqa { layers: u32, kv_heads: u32, head_dim: u32, bytes_per_elem: u32 },
    /// DeepSeek-V4 hybrid: sliding window on every layer, C4 compressed rows with a
    /// top-k indexer (CSA) and C128 rows (HCA).
    Dsv4 {
        window: u32,
        row_bytes: u32,
        window_layers: u32,
        csa_layers: u32,
        csa_ratio: u32,
        csa_topk: u32,
        indexer_row_bytes: u32,
        indexer_heads: u32,
        indexer_dim: u32,
        hca_layers: u32,
        hca_ratio: u32,
        swa_pool_ratio: f64,
        qk_dim: u32,
        v_dim: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftKind {
    Mtp,
    Dspark,
}

/// The speculative draft network shipped with the model (MTP layer or DSpark head).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraftSpec {
    pub kind: DraftKind,
    pub layers: u32,
    pub dense_params: f64,
    pub dense_bytes_per_param: f64,
    #[serde(default)]
    pub expert_params: f64,
    #[serde(default)]
    pub expert_bytes_per_param: f64,
    #[serde(default)]
    pub top_k: u32,
    #[serde(default)]
    pub routed: u32,
}

/// Extra device weights such as V4.1's Engram table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraWeights {
    pub name: String,
    pub bytes: f64,
    /// When this environment variable is "1"/"true", the table lives in host memory.
    #[serde(default)]
    pub host_resident_env: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SglangDefaults {
    pub page_size: u32,
    #[serde(default)]
    pub max_running_requests: Option<u32>,
    pub spec_steps: u32,
    pub spec_topk: u32,
    pub spec_draft_tokens: u32,
    #[serde(default)]
    pub dspark_block_size: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    Bf16,
    Fp8,
    Fp4,
}

/// A model profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub architecture: String,
    pub model_type: String,
    pub family: ModelFamily,
    pub context_length: u64,
    pub layers: u32,
    pub moe_layers: u32,
    pub hidden_size: u32,
    pub vocab_size: u32,
    pub heads: u32,
    pub params: DenseParams,
    pub bytes_per_param: BytesPerParam,
    #[serde(default)]
    pub experts: Option<Experts>,
    pub compute_dtype: Dtype,
    pub kv: KvLayout,
    #[serde(default)]
    pub draft: Option<DraftSpec>,
    #[serde(default)]
    pub extra_weights: Vec<ExtraWeights>,
    pub sglang_defaults: SglangDefaults,
    /// Field paths whose values are estimates or third-party reports.
    #[serde(default)]
    pub unconfirmed: Vec<String>,
    #[serde(default)]
    pub sources: Vec<String>,
}

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
    pub allreduce_latency_us: f64,
    pub a2a_latency_us: f64,
    #[serde(default)]
    pub calibrated: bool,
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
    pub measured: Option<crate::calibrate::MeasuredCurves>,
    /// How `cost` was fitted to measured serving results by `sweep calibrate fit`: the points,
    /// trace set, seed, loss and per-point residuals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitRecord>,
}

/// The record a fitted profile keeps of its fit (`sweep calibrate fit`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitRecord {
    /// Config key whose recipes were replayed.
    pub config_key: String,
    pub model_profile: String,
    /// The datasheet profile the fit started from (its datasheet section is kept unchanged).
    pub base_profile: String,
    /// Where the measured points came from.
    pub results: String,
    /// Trace set the replays used (predictions should use the same one).
    pub traces: String,
    /// Trace orders each point was replayed with (rotations of the set), metrics averaged.
    #[serde(default = "one_u32", skip_serializing_if = "is_one_u32")]
    pub trace_orders: u32,
    /// Workload scales fitted with the cost parameters (1 = the trace as recorded).
    #[serde(default)]
    pub workload: WorkloadScales,
    pub seed: u64,
    /// Profiling seconds per simulated point during the fit.
    pub duration_s: f64,
    pub restarts: u32,
    pub evaluations: u64,
    pub wall_s: f64,
    pub loss: f64,
    /// How the loss is computed (weights per metric).
    pub loss_definition: String,
    /// Fitted parameters with their bounds.
    pub parameters: std::collections::BTreeMap<String, FitParameter>,
    /// Per point, per metric: measured, predicted (by this profile), residual.
    pub points: Vec<FitPoint>,
    /// How the trace set was made, when it was synthesized (`sweep trace gen --like`): it lives
    /// outside the repository and is regenerated byte for byte from this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusRecord>,
    /// The coarse pass of a two-level fit (`--coarse-duration`), when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarse: Option<CoarseRecord>,
}

/// A synthesized trace set: the statistics file and seed it was generated from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusRecord {
    /// The published statistics file (`sweep trace gen --like`).
    pub like: String,
    pub seed: u64,
    /// Size of the generated file, bytes.
    pub bytes: u64,
    /// The command that regenerates it.
    pub command: String,
}

/// The coarse pass of a two-level fit: the search ran at a shorter duration against targets
/// corrected by the full / short ratio of the start point, then polished at the full duration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoarseRecord {
    pub duration_s: f64,
    /// Evaluations at the coarse duration, and at the full duration (start, polish).
    pub evaluations: u64,
    pub full_evaluations: u64,
}

/// How the replayed workload was changed to match the measured runs.
///
/// Output tokens become `osl_scale · R · (out / R)^osl_exp` with `R` =
/// [`WorkloadScales::OSL_REF`] tokens (`osl_exp` 1: plain proportional scaling); input tokens
/// (and the tokens per hashed block, so prefix reuse keeps its structure) are multiplied by
/// `isl_scale`; every recorded time by `delay_scale`, and then each end-to-start delay is capped
/// at `delay_cap_s`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadScales {
    /// Output tokens per request relative to the trace's recorded `out` (at `out` = R).
    pub osl_scale: f64,
    /// Recorded inter-turn delays (end-to-start, spawn offsets) are multiplied by this.
    pub delay_scale: f64,
    /// Exponent of the output-length transform: above 1 long outputs grow more than short ones.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub osl_exp: f64,
    /// Input tokens (and tokens per hashed block) relative to the trace's recorded `in`.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub isl_scale: f64,
    /// Longest end-to-start delay after scaling, seconds (None: no cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_cap_s: Option<f64>,
}

fn one_u32() -> u32 {
    1
}

fn is_one_u32(x: &u32) -> bool {
    *x == 1
}

fn one() -> f64 {
    1.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

impl Default for WorkloadScales {
    fn default() -> Self {
        WorkloadScales { osl_scale: 1.0, delay_scale: 1.0, osl_exp: 1.0, isl_scale: 1.0, delay_cap_s: None }
    }
}

impl WorkloadScales {
    /// Reference output length of the `osl_exp` transform (tokens): the exponent pivots here.
    pub const OSL_REF: f64 = 1000.0;

    pub fn is_identity(&self) -> bool {
        *self == WorkloadScales::default()
    }

    /// The transformed output length of a request that recorded `out` tokens (at least 1).
    pub fn osl(&self, out: u64) -> u64 {
        let o = out as f64;
        let x =
            if self.osl_exp == 1.0 { o * self.osl_scale } else { self.osl_scale * Self::OSL_REF * (o / Self::OSL_REF).powf(self.osl_exp) };
        (x.round() as u64).max(1)
    }

    /// One line for reports: what differs from the recorded workload.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.osl_exp == 1.0 {
            parts.push(format!("output tokens x{:.3}", self.osl_scale));
        } else {
            parts.push(format!("output tokens {:.3} x {}·(out/{})^{:.3}", self.osl_scale, Self::OSL_REF, Self::OSL_REF, self.osl_exp));
        }
        if self.isl_scale != 1.0 {
            parts.push(format!("input tokens x{:.3}", self.isl_scale));
        }
        parts.push(format!("inter-turn delays x{:.4}", self.delay_scale));
        if let Some(c) = self.delay_cap_s {
            parts.push(format!("capped at {c:.2} s"));
        }
        parts.join(", ")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitParameter {
    pub value: f64,
    pub lower: f64,
    pub upper: f64,
    /// The base profile's value.
    pub start: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitPoint {
    pub id: String,
    pub arm: String,
    pub conc: u32,
    pub metrics: std::collections::BTreeMap<String, FitResidual>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitResidual {
    pub measured: f64,
    pub predicted: f64,
    /// (predicted − measured) / measured × 100.
    pub residual_pct: f64,
    pub weight: f64,
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

/// A profile could not be read or found.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid profile {path}: {message}")]
    Parse { path: String, message: String },
    #[error("unknown {kind} profile '{name}'; known: {known}")]
    Unknown { kind: &'static str, name: String, known: String },
    #[error("invalid profile {path}: {message}")]
    Invalid { path: String, message: String },
}

const EMBEDDED_MODELS: &[(&str, &str)] = &[
    ("profiles/models/deepseek-v4-flash.yaml", include_str!("../profiles/models/deepseek-v4-flash.yaml")),
    ("profiles/models/deepseek-v4.1-flash.yaml", include_str!("../profiles/models/deepseek-v4.1-flash.yaml")),
    ("profiles/models/deepseek-v3.yaml", include_str!("../profiles/models/deepseek-v3.yaml")),
    ("profiles/models/llama-3.1-8b.yaml", include_str!("../profiles/models/llama-3.1-8b.yaml")),
];

const EMBEDDED_HARDWARE: &[(&str, &str)] = &[
    ("profiles/hardware/h200.yaml", include_str!("../profiles/hardware/h200.yaml")),
    ("profiles/hardware/h200-measured.yaml", include_str!("../profiles/hardware/h200-measured.yaml")),
    ("profiles/hardware/b200.yaml", include_str!("../profiles/hardware/b200.yaml")),
    ("profiles/hardware/gb300.yaml", include_str!("../profiles/hardware/gb300.yaml")),
    ("profiles/hardware/gb300-fitted-dsv41flash.yaml", include_str!("../profiles/hardware/gb300-fitted-dsv41flash.yaml")),
];

fn parse_yaml<T: for<'de> Deserialize<'de>>(path: &str, text: &str) -> Result<T, ProfileError> {
    serde_yaml_ng::from_str(text).map_err(|e| ProfileError::Parse {
        path: path.to_string(),
        message: match e.location() {
            Some(l) => format!("line {} column {}: {e}", l.line(), l.column()),
            None => e.to_string(),
        },
    })
}

fn norm(s: &str) -> String {
    s.to_ascii_lowercase().replace('_', "-")
}

impl ModelSpec {
    /// Parses one model profile (the path is only used in error messages).
    pub fn from_yaml(path: &str, text: &str) -> Result<ModelSpec, ProfileError> {
        let m: ModelSpec = parse_yaml(path, text)?;
        m.validate(path)?;
        Ok(m)
    }

    pub fn from_file(path: &Path) -> Result<ModelSpec, ProfileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io { path: p.clone(), source })?;
        ModelSpec::from_yaml(&p, &text)
    }

    fn validate(&self, path: &str) -> Result<(), ProfileError> {
        let bad = |message: String| ProfileError::Invalid { path: path.to_string(), message };
        if self.layers == 0 || self.hidden_size == 0 {
            return Err(bad("layers and hidden_size must be > 0".into()));
        }
        if self.moe_layers > self.layers {
            return Err(bad(format!("moe_layers ({}) exceeds layers ({})", self.moe_layers, self.layers)));
        }
        if self.moe_layers > 0 && self.experts.is_none() {
            return Err(bad("moe_layers > 0 needs an `experts` section".into()));
        }
        if let Some(e) = &self.experts
            && (e.top_k == 0 || e.top_k > e.routed)
        {
            return Err(bad(format!("experts.top_k must be in 1..={} (got {})", e.routed, e.top_k)));
        }
        if self.sglang_defaults.page_size == 0 {
            return Err(bad("sglang_defaults.page_size must be > 0".into()));
        }
        Ok(())
    }

    /// All embedded model profiles.
    pub fn builtin() -> Vec<ModelSpec> {
        EMBEDDED_MODELS.iter().map(|(p, t)| ModelSpec::from_yaml(p, t).expect("embedded profile is valid")).collect()
    }

    /// Finds a profile by name, alias or HF path (case-insensitive); a path ending
    /// in `.yaml`/`.yml` is read from disk.
    pub fn lookup(name: &str) -> Result<ModelSpec, ProfileError> {
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            return ModelSpec::from_file(Path::new(name));
        }
        let n = norm(name);
        let all = ModelSpec::builtin();
        let hit = all.iter().find(|m| {
            norm(&m.name) == n
                || m.aliases.iter().any(|a| norm(a) == n)
                // "org/Model" given, alias without org, or the reverse
                || m.aliases.iter().any(|a| norm(a.rsplit('/').next().unwrap_or(a)) == norm(n.rsplit('/').next().unwrap_or(&n)))
        });
        hit.cloned().ok_or_else(|| ProfileError::Unknown {
            kind: "model",
            name: name.to_string(),
            known: all.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Whole-model weight bytes (without draft or extra tables).
    pub fn weight_bytes(&self) -> f64 {
        let p = &self.params;
        let b = &self.bytes_per_param;
        let experts =
            self.experts.as_ref().map_or(0.0, |e| e.routed as f64 * self.moe_layers as f64 * e.params_per_expert * e.bytes_per_param);
        p.attention * b.attention + (p.shared_experts + p.dense_ffn) * b.ffn + (p.lm_head + p.embedding) * b.head + experts
    }

    /// Draft network weight bytes.
    pub fn draft_bytes(&self) -> f64 {
        self.draft.as_ref().map_or(0.0, |d| d.dense_params * d.dense_bytes_per_param + d.expert_params * d.expert_bytes_per_param)
    }
}

impl GpuSpec {
    pub fn from_yaml(path: &str, text: &str) -> Result<GpuSpec, ProfileError> {
        let g: GpuSpec = parse_yaml(path, text)?;
        let c = &g.cost;
        if !(c.eta_bw > 0.0 && c.eta_bw <= 1.0 && c.eta_flops > 0.0 && c.eta_flops <= 1.0) {
            return Err(ProfileError::Invalid {
                path: path.to_string(),
                message: "cost.eta_bw and cost.eta_flops must be in (0, 1]".into(),
            });
        }
        if g.datasheet.memory_bytes <= 0.0 || g.datasheet.hbm_bandwidth <= 0.0 {
            return Err(ProfileError::Invalid {
                path: path.to_string(),
                message: "datasheet.memory_bytes and hbm_bandwidth must be > 0".into(),
            });
        }
        Ok(g)
    }

    pub fn from_file(path: &Path) -> Result<GpuSpec, ProfileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io { path: p.clone(), source })?;
        GpuSpec::from_yaml(&p, &text)
    }

    pub fn builtin() -> Vec<GpuSpec> {
        EMBEDDED_HARDWARE.iter().map(|(p, t)| GpuSpec::from_yaml(p, t).expect("embedded profile is valid")).collect()
    }

    pub fn lookup(name: &str) -> Result<GpuSpec, ProfileError> {
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            return GpuSpec::from_file(Path::new(name));
        }
        let n = norm(name);
        let all = GpuSpec::builtin();
        all.iter().find(|g| norm(&g.name) == n || g.aliases.iter().any(|a| norm(a) == n)).cloned().ok_or_else(|| ProfileError::Unknown {
            kind: "hardware",
            name: name.to_string(),
            known: all.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_profiles_parse_and_look_up_by_alias() {
        assert_eq!(ModelSpec::builtin().len(), 4);
        assert_eq!(GpuSpec::builtin().len(), 5);
        let m = ModelSpec::lookup("deepseek-ai/DeepSeek-V4.1-Flash").unwrap();
        assert_eq!(m.name, "deepseek-v4.1-flash");
        assert!(m.unconfirmed.iter().any(|u| u == "kv"));
        assert_eq!(ModelSpec::lookup("DSV3").unwrap().name, "deepseek-v3");
        assert_eq!(GpuSpec::lookup("H200").unwrap().name, "h200");
        let fitted = GpuSpec::lookup("gb300-fitted").unwrap();
        assert_eq!(fitted.name, "gb300-fitted-dsv41flash");
        let f = fitted.fit.as_ref().expect("a fitted profile records its fit");
        assert_eq!(f.points.len(), 3);
        assert_eq!(fitted.datasheet, GpuSpec::lookup("gb300").unwrap().datasheet, "the datasheet is kept");
        assert!(fitted.cost.calibrated);
        // The committed fit replays the synthesized corpus as generated, with cost parameters in
        // their physical ranges.
        assert!(f.workload.is_identity(), "{:?}", f.workload);
        let c = f.corpus.as_ref().expect("the corpus it replayed is recorded");
        assert!(c.like.ends_with("cc-traces-weka-062126.stats.yaml") && c.command.contains("--like"));
        assert!(fitted.cost.eta_bw <= 1.0 && fitted.cost.eta_flops <= 1.0);
        assert!(fitted.cost.tau_step_us < 10_000.0 && fitted.cost.a2a_latency_us < 100.0);
        let e = ModelSpec::lookup("gpt-9").unwrap_err().to_string();
        assert!(e.contains("deepseek-v4-flash"), "{e}");
    }

    #[test]
    fn weight_totals_match_published_sizes() {
        let v4 = ModelSpec::lookup("deepseek-v4-flash").unwrap();
        let gb = (v4.weight_bytes() + v4.draft_bytes()) / 1e9;
        assert!((150.0..=170.0).contains(&gb), "V4-Flash {gb} GB (spec: 158-167)");
        let v3 = ModelSpec::lookup("deepseek-v3").unwrap();
        let gb = v3.weight_bytes() / 1e9;
        assert!((660.0..=720.0).contains(&gb), "V3 {gb} GB (about 690)");
        let l = ModelSpec::lookup("llama-3.1-8b").unwrap();
        let gb = l.weight_bytes() / 1e9;
        assert!((15.5..=16.5).contains(&gb), "Llama 8B {gb} GB");
    }

    #[test]
    fn bad_profile_names_line_and_field() {
        let err = ModelSpec::from_yaml("x.yaml", "name: a\nlayerz: 3\n").unwrap_err();
        let s = err.to_string();
        assert!(s.contains("x.yaml") && s.contains("layerz"), "{s}");
    }
}
