//! Weight shapes that calibration measures, taken from a model's architecture.

use serde::{Deserialize, Serialize};

/// The parts of a model's architecture that fix its GEMM and attention shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelShape {
    pub name: String,
    pub layers: u64,
    pub hidden: u64,
    pub q_heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    /// Dense FFN width (0 when every layer is MoE).
    pub ffn: u64,
    pub vocab: u64,
    /// Extra attention GEMMs (low-rank projections) as (name, n, k); when empty, attention is
    /// the plain fused QKV and output projections.
    #[serde(default)]
    pub attn_gemms: Vec<(String, u64, u64)>,
    pub moe: Option<MoeShape>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoeShape {
    pub experts: u64,
    pub top_k: u64,
    pub expert_ffn: u64,
    pub shared_experts: u64,
}

/// One GEMM weight `W[N,K]` of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GemmShape {
    pub name: String,
    pub n: u64,
    pub k: u64,
}

impl ModelShape {
    /// Llama-3.1-8B: 32 layers, hidden 4096, 32 query / 8 KV heads of 128, FFN 14336.
    pub fn llama_3_1_8b() -> Self {
        ModelShape {
            name: "llama-3.1-8b".into(),
            layers: 32,
            hidden: 4096,
            q_heads: 32,
            kv_heads: 8,
            head_dim: 128,
            ffn: 14336,
            vocab: 128_256,
            attn_gemms: vec![],
            moe: None,
        }
    }

    /// DeepSeek-V4-Flash (spec §5.1): 43 MoE layers, hidden 4096, 256 experts top-6 of width
    /// 2048 plus one shared, compressed MQA with q_lora 1024 and a 512-wide KV projection.
    pub fn deepseek_v4_flash() -> Self {
        ModelShape {
            name: "deepseek-v4-flash".into(),
            layers: 43,
            hidden: 4096,
            q_heads: 64,
            kv_heads: 1,
            head_dim: 512,
            ffn: 0,
            vocab: 129_280,
            attn_gemms: vec![
                ("q_a_proj".into(), 1024, 4096),
                ("q_b_proj".into(), 64 * 512, 1024),
                ("kv_proj".into(), 512, 4096),
                // Grouped low-rank output: 8 groups of 4096 → 1024, timed as one 8192 × 4096 GEMM.
                ("o_a_proj".into(), 8 * 1024, 4096),
                ("o_b_proj".into(), 4096, 8 * 1024),
            ],
            moe: Some(MoeShape { experts: 256, top_k: 6, expert_ffn: 2048, shared_experts: 1 }),
        }
    }

    /// A built-in shape by name.
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "llama-3.1-8b" => Some(Self::llama_3_1_8b()),
            "deepseek-v4-flash" => Some(Self::deepseek_v4_flash()),
            _ => None,
        }
    }

    pub fn builtin_names() -> &'static [&'static str] {
        &["llama-3.1-8b", "deepseek-v4-flash"]
    }

    /// The per-token weight GEMMs: attention projections, dense or shared FFN, one expert,
    /// LM head.
    pub fn gemms(&self) -> Vec<GemmShape> {
        let g = |name: &str, n: u64, k: u64| GemmShape { name: format!("{}/{name}", self.name), n, k };
        let mut out = Vec::new();
        if self.attn_gemms.is_empty() {
            let qkv = (self.q_heads + 2 * self.kv_heads) * self.head_dim;
            out.push(g("qkv_proj", qkv, self.hidden));
            out.push(g("o_proj", self.hidden, self.q_heads * self.head_dim));
        } else {
            for (name, n, k) in &self.attn_gemms {
                out.push(g(name, *n, *k));
            }
        }
        if self.ffn > 0 {
            out.push(g("gate_up_proj", 2 * self.ffn, self.hidden));
            out.push(g("down_proj", self.hidden, self.ffn));
        }
        if let Some(moe) = &self.moe {
            // A shared expert and a routed expert have the same shape: measured once.
            out.push(g("expert_gate_up", 2 * moe.expert_ffn, self.hidden));
            out.push(g("expert_down", self.hidden, moe.expert_ffn));
        }
        out.push(g("lm_head", self.vocab, self.hidden));
        out
    }

    /// Bytes one token moves per layer through the elementwise kernels when each is one fused
    /// pass (bf16): norms (2 × read + write), residual adds (2 × two reads + write), rotary on
    /// q and k (read + write) and SiLU-and-multiply (two reads + write); `attn_tp` and `tp`
    /// split the head and FFN dimensions.
    pub fn elementwise_bytes_per_token(&self, attn_tp: u64, tp: u64) -> f64 {
        let h = self.hidden as f64;
        let qkv = ((self.q_heads + 2 * self.kv_heads) * self.head_dim) as f64;
        let ffn = if self.ffn > 0 { self.ffn } else { self.moe.as_ref().map_or(0, |m| m.expert_ffn) } as f64;
        2.0 * (10.0 * h + 2.0 * qkv / attn_tp.max(1) as f64 + 3.0 * ffn / tp.max(1) as f64)
    }

    /// Parameters in one layer's dense (non-routed) GEMMs.
    pub fn dense_layer_params(&self) -> u64 {
        self.gemms().iter().filter(|s| !s.name.ends_with("lm_head") && !s.name.contains("expert_")).map(|s| s.n * s.k).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_8b_shapes_add_up_to_its_parameter_count() {
        let m = ModelShape::llama_3_1_8b();
        let names: Vec<_> = m.gemms().iter().map(|g| g.name.clone()).collect();
        assert_eq!(
            names,
            ["llama-3.1-8b/qkv_proj", "llama-3.1-8b/o_proj", "llama-3.1-8b/gate_up_proj", "llama-3.1-8b/down_proj", "llama-3.1-8b/lm_head"]
        );
        // 32 layers of 218M plus the 525M LM head (embeddings aside): about 7.5B.
        let total = m.layers * m.dense_layer_params() + m.vocab * m.hidden;
        assert!((7.4e9..7.6e9).contains(&(total as f64)), "{total}");
    }

    #[test]
    fn moe_model_lists_one_expert_and_no_dense_ffn() {
        let m = ModelShape::deepseek_v4_flash();
        let g = m.gemms();
        assert!(g.iter().any(|s| s.name.ends_with("expert_gate_up") && s.n == 4096));
        assert!(!g.iter().any(|s| s.name.ends_with("gate_up_proj")));
    }
}
