//! Effective limits: flags resolved against the model and GPU the way SGLang's
//! server-args post-processing and memory configurator do (engine spec §1.1–1.9).

use crate::args::{EngineConfig, SpecAlgorithm};
use crate::cost::{CostModel, Parallelism};
use crate::profiles::{DraftKind, GpuSpec, ModelFamily, ModelSpec};
use crate::spec_decode::{AcceptModel, AcceptSource, DEFAULT_ACCEPT_FRACTION};
use serde::Serialize;

/// Speculative decoding as resolved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpecLimits {
    pub algorithm: SpecAlgorithm,
    pub num_steps: u32,
    pub eagle_topk: u32,
    pub num_draft_tokens: u32,
    /// DSpark gamma (drafts per block), when DSpark.
    pub dspark_block_size: Option<u32>,
    /// Tokens allocated per request per verify step.
    pub kv_window: u32,
    pub accept: AcceptModel,
}

/// Resolved limits, reported in `/server_info`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Limits {
    pub page_size: u32,
    pub context_length: u64,
    pub attn_dp_size: u32,
    /// KV pool per attention-DP rank, tokens (`max_total_num_tokens`).
    pub max_total_num_tokens: u64,
    pub max_running_requests: u32,
    pub max_running_requests_per_dp: u32,
    /// `None`: chunking disabled.
    pub chunked_prefill_size: Option<u64>,
    pub chunked_prefill_size_per_dp: Option<u64>,
    pub max_prefill_tokens: u64,
    pub max_req_len: u64,
    pub max_req_input_len: u64,
    pub mem_fraction_static: f64,
    pub cuda_graph_max_bs_decode: u32,
    pub cuda_graph_bs_decode: Vec<u32>,
    pub cuda_graph_decode_enabled: bool,
    pub weight_bytes_per_gpu: f64,
    pub kv_bytes_per_token_per_gpu: f64,
    pub kv_budget_bytes_per_gpu: f64,
    pub speculative: Option<SpecLimits>,
}

/// The configuration cannot run on this model and GPU.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "not enough memory for the KV cache: weights take {weights_gb:.1} GB per GPU of {usable_gb:.1} GB allowed by --mem-fraction-static {frac}; {}",
        match suggest {
            Some(f) => format!("try --mem-fraction-static {f:.2} or more GPUs (--tp-size)"),
            None => "the weights do not fit this GPU: use more GPUs (--tp-size) or host-resident tables".to_string(),
        }
    )]
    NoKvMemory { weights_gb: f64, usable_gb: f64, frac: f64, suggest: Option<f64> },
    #[error("{0}")]
    Invalid(String),
}

fn capture_sizes(max_bs: u32, spec: bool) -> Vec<u32> {
    let mut v: Vec<u32> = if spec {
        let mut v: Vec<u32> = (1..=8).collect();
        v.extend((10..=32).step_by(2));
        v.extend((36..=64).step_by(4));
        v.extend((72..=256).step_by(8));
        v.extend((272..=max_bs.max(272)).step_by(16));
        v
    } else {
        let mut v = vec![1, 2, 4, 8, 12];
        v.extend((16..=256).step_by(8));
        v.extend((272..=512).step_by(16));
        v.extend((544..=max_bs.max(544)).step_by(32));
        v
    };
    v.retain(|&b| b <= max_bs);
    if v.last() != Some(&max_bs) {
        v.push(max_bs);
    }
    v
}

/// SGLang's default `--chunked-prefill-size` by GPU memory.
fn default_chunk(gpu_gb: f64) -> i64 {
    if gpu_gb < 20.0 {
        2048
    } else if gpu_gb < 60.0 {
        4096
    } else if gpu_gb < 160.0 {
        8192
    } else {
        16384
    }
}

/// SGLang's default largest decode CUDA-graph batch by GPU memory and TP size.
fn default_graph_bs(gpu_gb: f64, tp_size: u32) -> u32 {
    if gpu_gb < 20.0 {
        8
    } else if gpu_gb < 35.0 {
        if tp_size < 4 { 48 } else { 160 }
    } else if gpu_gb < 60.0 {
        if tp_size < 4 { 32 } else { 160 }
    } else if gpu_gb < 160.0 {
        if tp_size < 4 { 256 } else { 512 }
    } else {
        512
    }
}

/// Speculative decoding: draft counts from the flags or the model's defaults, checked
/// against what the model supports, and the accept-length model.
fn resolve_speculative(cfg: &EngineConfig, model: &ModelSpec) -> Result<Option<SpecLimits>, ConfigError> {
    let Some(s) = &cfg.speculative else {
        return Ok(None);
    };
    let d = &model.sglang_defaults;
    let (steps, topk, draft, gamma) = if s.algorithm == SpecAlgorithm::Dspark {
        let gamma = s.dspark_block_size.or(d.dspark_block_size).unwrap_or(7).max(1);
        (1, 1, gamma + 1, Some(gamma))
    } else if s.algorithm == SpecAlgorithm::Dflash {
        (1, 1, s.num_draft_tokens.unwrap_or(d.spec_draft_tokens), None)
    } else if s.num_steps.is_none() && s.eagle_topk.is_none() && s.num_draft_tokens.is_none() {
        (d.spec_steps, d.spec_topk, d.spec_draft_tokens, None)
    } else {
        let steps = s.num_steps.unwrap_or(d.spec_steps).max(1);
        let topk = s.eagle_topk.unwrap_or(1).max(1);
        (steps, topk, s.num_draft_tokens.unwrap_or(steps + 1).max(2), None)
    };
    if model.family == ModelFamily::DeepseekV4 && !matches!(s.algorithm, SpecAlgorithm::Eagle | SpecAlgorithm::Dspark) {
        return Err(ConfigError::Invalid(format!("{} supports only EAGLE/NEXTN (topk 1) and DSPARK speculative decoding", model.name)));
    }
    if model.family == ModelFamily::DeepseekV4 && topk != 1 {
        return Err(ConfigError::Invalid("DeepSeek-V4 speculative decoding needs --speculative-eagle-topk 1".into()));
    }
    if s.algorithm == SpecAlgorithm::Dspark && model.draft.as_ref().is_some_and(|d| d.kind != DraftKind::Dspark) {
        return Err(ConfigError::Invalid(format!("DSPARK needs a DSpark draft head; the {} profile has an MTP draft", model.name)));
    }
    let max_accept = match gamma {
        Some(g) => g + 1,
        None => steps + 1,
    };
    let (mean, source) = match (cfg.env.simulate_acc_len, cfg.assumed_accept_length) {
        (Some(x), _) => (x, AcceptSource::SimulateEnv),
        (None, Some(x)) => (x, AcceptSource::Configured),
        (None, None) => (1.0 + DEFAULT_ACCEPT_FRACTION * (max_accept - 1) as f64, AcceptSource::Assumed),
    };
    Ok(Some(SpecLimits {
        algorithm: s.algorithm,
        num_steps: steps,
        eagle_topk: topk,
        num_draft_tokens: draft,
        dspark_block_size: gamma,
        kv_window: (steps * topk).max(draft),
        accept: AcceptModel { mean, method: cfg.env.simulate_acc_method, max_accept, source },
    }))
}

/// `--mem-fraction-static`, or SGLang's default: what is left after activations, CUDA
/// graphs and the per-GPU reserve.
fn mem_fraction(cfg: &EngineConfig, gpu_mem: f64, chunk: Option<u64>, default_graph_bs: u32, attn_dp: u32) -> f64 {
    cfg.mem_fraction_static.unwrap_or_else(|| {
        let gpu_gb = gpu_mem / 1e9;
        let act_tokens = chunk.unwrap_or(2048).max(2048) as f64;
        let mut graph_mb = 2.0 * cfg.cuda_graph_max_bs_decode.unwrap_or(default_graph_bs) as f64;
        if attn_dp > 1 {
            graph_mb *= 2.0;
        }
        let mut reserved = 512e6 + 1.5e6 * act_tokens + graph_mb * 1e6 + (cfg.tp_size * cfg.pp_size) as f64 / 8.0 * 1e9;
        if gpu_gb > 60.0 {
            reserved = reserved.max(10e9);
        }
        ((gpu_mem - reserved) / gpu_mem).clamp(0.05, 0.95)
    })
}

/// The KV pool per rank in tokens (whole pages): the budget left after the weights,
/// capped by `--max-total-tokens`.
fn kv_capacity(cfg: &EngineConfig, gpu_mem: f64, frac: f64, weights: f64, kv_per_token: f64, page: u32) -> Result<u64, ConfigError> {
    let kv_budget = gpu_mem * frac - weights;
    if kv_budget <= 0.0 || kv_budget / kv_per_token < page as f64 {
        return Err(ConfigError::NoKvMemory {
            weights_gb: weights / 1e9,
            usable_gb: gpu_mem * frac / 1e9,
            frac,
            suggest: Some((weights + 0.1 * gpu_mem) / gpu_mem).filter(|f| *f <= 0.95),
        });
    }
    let mut capacity = (kv_budget / kv_per_token).floor() as u64 / page as u64 * page as u64;
    if let Some(m) = cfg.max_total_tokens {
        capacity = capacity.min(m / page as u64 * page as u64);
    }
    if capacity < page as u64 {
        return Err(ConfigError::Invalid(format!(
            "KV pool of {capacity} tokens is smaller than one page ({page}); raise --max-total-tokens"
        )));
    }
    Ok(capacity)
}

/// Running cap: given (global, split over attention-DP ranks) or derived from the pool;
/// returns (per rank, global).
fn running_caps(cfg: &EngineConfig, model: &ModelSpec, capacity: u64, context: u64, attn_dp: u32, spec: bool) -> (u32, u32) {
    let global = cfg.max_running_requests.or(if model.family == ModelFamily::DeepseekV4 {
        model.sglang_defaults.max_running_requests
    } else if spec {
        Some(48)
    } else {
        None
    });
    let per_rank = match global {
        Some(n) => (n / attn_dp).max(1),
        None => {
            let derived = ((capacity as f64 / context as f64 * 512.0) as u64).clamp(2048, 4096);
            derived.min(capacity / 2).max(1) as u32
        }
    };
    let per_rank = per_rank.min((capacity / 2).max(1) as u32);
    (per_rank, global.unwrap_or(per_rank * attn_dp))
}

/// The largest decode CUDA-graph batch and the captured batch sizes.
fn decode_graphs(cfg: &EngineConfig, default_graph_bs: u32, per_rank: u32, spec: bool) -> (u32, Vec<u32>) {
    let graph_max = cfg.cuda_graph_max_bs_decode.unwrap_or(default_graph_bs.min(per_rank.max(1))).max(1);
    let graph_list = match &cfg.cuda_graph_bs_decode {
        Some(l) if !l.is_empty() => {
            let mut l: Vec<u32> = l.iter().copied().filter(|&b| b <= graph_max).collect();
            if l.last() != Some(&graph_max) {
                l.push(graph_max);
            }
            l
        }
        _ => capture_sizes(graph_max, spec),
    };
    (graph_max, graph_list)
}

impl Limits {
    /// Resolves the flags against the model and GPU, in SGLang's order: chunking,
    /// speculation, memory fraction, KV pool, running caps, CUDA graphs.
    pub fn resolve(cfg: &EngineConfig, model: &ModelSpec, gpu: &GpuSpec) -> Result<(Limits, CostModel), ConfigError> {
        let attn_dp = cfg.attn_dp_size.max(1);
        if cfg.disable_radix_cache && cfg.schedule_policy == crate::args::SchedulePolicy::ShortestPrefillFirst {
            return Err(ConfigError::Invalid(
                "--schedule-policy shortest-prefill-first needs the radix cache; drop --disable-radix-cache or choose another policy"
                    .into(),
            ));
        }
        let par = Parallelism {
            tp: cfg.tp_size,
            attn_dp,
            ep: cfg.ep_size,
            moe_a2a: !matches!(cfg.moe_a2a_backend.as_str(), "none" | ""),
            dp_lm_head: cfg.enable_dp_lm_head,
        };
        let cost = CostModel::new(model, gpu, par, &cfg.env.raw);
        let gpu_mem = gpu.datasheet.memory_bytes;
        let gpu_gb = gpu_mem / 1e9;
        let page = cfg.page_size.unwrap_or(model.sglang_defaults.page_size).max(1);
        let context = cfg.context_length.unwrap_or(model.context_length);
        let chunk = cfg.chunked_prefill_size.unwrap_or(default_chunk(gpu_gb));
        let chunk = (chunk > 0).then_some(chunk as u64);
        let speculative = resolve_speculative(cfg, model)?;

        // Memory: weights + KV within gpu_mem × frac.
        let graph_bs = default_graph_bs(gpu_gb, cfg.tp_size);
        let frac = mem_fraction(cfg, gpu_mem, chunk, graph_bs, attn_dp);
        let weights = cost.weight_bytes_per_gpu();
        let kv_budget = gpu_mem * frac - weights;
        let kv_per_token = cost.kv_bytes_per_token_per_gpu();
        let capacity = kv_capacity(cfg, gpu_mem, frac, weights, kv_per_token, page)?;

        let (per_rank, max_running) = running_caps(cfg, model, capacity, context, attn_dp, speculative.is_some());
        let (graph_max, graph_list) = decode_graphs(cfg, graph_bs, per_rank, speculative.is_some());

        let max_req_len = (context - 1).min(capacity - 1);
        Ok((
            Limits {
                page_size: page,
                context_length: context,
                attn_dp_size: attn_dp,
                max_total_num_tokens: capacity,
                max_running_requests: max_running,
                max_running_requests_per_dp: per_rank,
                chunked_prefill_size: chunk,
                chunked_prefill_size_per_dp: chunk.map(|c| (c / attn_dp as u64).max(page as u64)),
                max_prefill_tokens: cfg.max_prefill_tokens,
                max_req_len,
                max_req_input_len: max_req_len.saturating_sub(5),
                mem_fraction_static: frac,
                cuda_graph_max_bs_decode: graph_max,
                cuda_graph_bs_decode: graph_list,
                cuda_graph_decode_enabled: !cfg.disable_cuda_graph_decode,
                weight_bytes_per_gpu: weights,
                kv_bytes_per_token_per_gpu: kv_per_token,
                kv_budget_bytes_per_gpu: kv_budget,
                speculative,
            },
            cost,
        ))
    }

    /// Batch size a decode of `b` requests runs at, and whether it uses a graph.
    pub fn padded_decode_bs(&self, b: u32) -> (u32, bool) {
        if !self.cuda_graph_decode_enabled || b > self.cuda_graph_max_bs_decode {
            return (b, false);
        }
        let i = self.cuda_graph_bs_decode.partition_point(|&x| x < b);
        (self.cuda_graph_bs_decode.get(i).copied().unwrap_or(b), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn resolve(args: &[&str], model: &str, gpu: &str) -> Result<Limits, ConfigError> {
        let cfg = EngineConfig::from_args(args, &BTreeMap::new()).unwrap();
        Limits::resolve(&cfg, &ModelSpec::lookup(model).unwrap(), &GpuSpec::lookup(gpu).unwrap()).map(|x| x.0)
    }

    #[test]
    fn running_cap_defaults_and_dp_split() {
        let l = resolve(&["--tp", "8"], "deepseek-v4-flash", "h200").unwrap();
        assert_eq!(l.max_running_requests_per_dp, 256);
        let l = resolve(&["--tp", "8", "--speculative-algorithm", "EAGLE"], "deepseek-v3", "h200").unwrap();
        assert_eq!(l.max_running_requests_per_dp, 48);
        let l = resolve(&["--tp", "8", "--attn-dp-size", "4", "--max-running-requests", "100"], "deepseek-v4-flash", "h200").unwrap();
        assert_eq!(l.max_running_requests_per_dp, 25);
    }

    #[test]
    fn pool_size_formula_and_max_total_tokens() {
        let args = ["--tp", "8", "--mem-fraction-static", "0.85"];
        let l = resolve(&args, "deepseek-v4-flash", "h200").unwrap();
        let expect = ((150.76e9 * 0.85 - l.weight_bytes_per_gpu) / l.kv_bytes_per_token_per_gpu).floor() as u64 / 256 * 256;
        assert_eq!(l.max_total_num_tokens, expect);
        assert_eq!(l.page_size, 256);
        let l2 =
            resolve(&["--tp", "8", "--mem-fraction-static", "0.85", "--max-total-tokens", "100000"], "deepseek-v4-flash", "h200").unwrap();
        assert_eq!(l2.max_total_num_tokens, 99_840);
    }

    #[test]
    fn weights_that_do_not_fit_give_an_actionable_error() {
        let e = resolve(&["--tp", "1"], "deepseek-v4-flash", "h200").unwrap_err();
        assert!(matches!(e, ConfigError::NoKvMemory { .. }));
        assert!(e.to_string().contains("--mem-fraction-static"));
    }

    #[test]
    fn graph_padding_and_capture_list() {
        let l = resolve(&["--tp", "8", "--cuda-graph-max-bs", "64"], "deepseek-v4-flash", "h200").unwrap();
        assert_eq!(l.padded_decode_bs(9), (12, true));
        assert_eq!(l.padded_decode_bs(12), (12, true));
        assert_eq!(l.padded_decode_bs(64), (64, true));
        assert_eq!(l.padded_decode_bs(65), (65, false));
    }

    #[test]
    fn dspark_window_from_block_size() {
        let mut env = BTreeMap::new();
        env.insert("SGLANG_SIMULATE_ACC_LEN".to_string(), "3.51".to_string());
        env.insert("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE".to_string(), "1".to_string());
        let cfg = EngineConfig::from_args(
            &[
                "--tp-size",
                "2",
                "--ep-size",
                "2",
                "--speculative-algorithm",
                "DSPARK",
                "--speculative-dspark-block-size",
                "5",
                "--mem-fraction-static",
                "0.8",
            ],
            &env,
        )
        .unwrap();
        let (l, _) = Limits::resolve(&cfg, &ModelSpec::lookup("deepseek-v4.1-flash").unwrap(), &GpuSpec::lookup("gb300").unwrap()).unwrap();
        let s = l.speculative.unwrap();
        assert_eq!((s.num_steps, s.num_draft_tokens, s.accept.max_accept), (1, 6, 6));
        assert_eq!(s.accept.source, AcceptSource::SimulateEnv);
        assert_eq!(l.chunked_prefill_size, Some(16384), "GB300 default chunk");
    }
}
