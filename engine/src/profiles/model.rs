//! A model profile: the architecture facts the cost model and the limits need.

use serde::{Deserialize, Serialize};

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

impl ModelSpec {
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
