//! KV cache figures by layout (MLA, GQA, DeepSeek-V4's compressed layers): pool bytes
//! per token, bytes read per request, attention FLOPs.

use super::CostModel;
use crate::profiles::KvLayout;

impl CostModel {
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

    /// Attention score FLOPs (whole rank, split by attention TP) for `q` query tokens
    /// ending at context `c`. DeepSeek-V4's lightning indexer is not in it: see
    /// [`indexer_flops`](Self::indexer_flops).
    pub fn attn_flops(&self, q: u64, c: u64, prefill: bool) -> f64 {
        let heads = self.model.heads as f64;
        let avg = causal_mean_context(q, c);
        let qf = q as f64;
        match &self.model.kv {
            KvLayout::Mla { layers, decode_dim, prefill_dim, .. } => {
                let dim = if prefill { *prefill_dim } else { *decode_dim } as f64;
                2.0 * heads * dim * qf * avg * *layers as f64
            }
            KvLayout::Gqa { layers, head_dim, .. } => 2.0 * heads * 2.0 * *head_dim as f64 * qf * avg * *layers as f64,
            KvLayout::Dsv4 { window, window_layers, csa_layers, csa_ratio, csa_topk, hca_layers, hca_ratio, qk_dim, v_dim, .. } => {
                let compressed = avg / *csa_ratio as f64;
                let rows = *window_layers as f64 * avg.min(*window as f64)
                    + *csa_layers as f64 * compressed.min(*csa_topk as f64)
                    + *hca_layers as f64 * avg / *hca_ratio as f64;
                qf * 2.0 * heads * (*qk_dim + *v_dim) as f64 * rows
            }
        }
    }

    /// Lightning-indexer FLOPs on *each* GPU of an attention-TP group for `q` query
    /// tokens ending at context `c`: every query scores every compressed row of every CSA
    /// layer with all index heads. SGLang builds the indexer from replicated linears and
    /// runs all heads on every rank (FP8 MQA logits), so TP does not split this work.
    pub fn indexer_flops(&self, q: u64, c: u64) -> f64 {
        match &self.model.kv {
            KvLayout::Dsv4 { csa_layers, csa_ratio, indexer_heads, indexer_dim, .. } => {
                let avg = causal_mean_context(q, c);
                q as f64 * *csa_layers as f64 * 2.0 * (*indexer_heads * *indexer_dim) as f64 * avg / *csa_ratio as f64
            }
            _ => 0.0,
        }
    }
}

/// The mean context `q` query tokens ending at context `c` attend under a causal mask.
fn causal_mean_context(q: u64, c: u64) -> f64 {
    c as f64 - q as f64 / 2.0
}
