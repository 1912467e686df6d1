//! The fixed-sequence-length scenario's flags (`sweep replay --isl N --osl N`), named as
//! `benchmark_serving.py` names them.

use crate::workload::fixed::{Api, FixedConfig};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct FixedArgs {
    /// Fixed-sequence-length scenario (InferenceX's random dataset) instead of an AgentX replay:
    /// the input length. Needs --osl.
    #[arg(long, requires = "osl", allow_negative_numbers = true, help_heading = "Fixed-seq-len scenario")]
    pub isl: Option<i64>,
    /// The output length (`--ignore-eos`: every request generates its drawn length).
    #[arg(long, requires = "isl", allow_negative_numbers = true, help_heading = "Fixed-seq-len scenario")]
    pub osl: Option<i64>,
    /// Lengths are drawn uniformly in [ratio × ISL, ISL] and [ratio × OSL, OSL].
    #[arg(long, default_value_t = 0.8, help_heading = "Fixed-seq-len scenario")]
    pub random_range_ratio: f64,
    /// Requests of the main run (default 10 × concurrency, as InferenceX).
    #[arg(long, help_heading = "Fixed-seq-len scenario")]
    pub num_prompts: Option<u32>,
    /// Warmup requests, copies of the first prompt (default 2 × concurrency, as InferenceX).
    #[arg(long, help_heading = "Fixed-seq-len scenario")]
    pub num_warmups: Option<u32>,
    /// Seed of numpy's generator that draws the lengths (benchmark_serving's `--seed`).
    #[arg(long, default_value_t = 0, help_heading = "Fixed-seq-len scenario")]
    pub random_seed: u32,
    /// `completions` (benchmark_serving `--backend vllm`, InferenceX's) or `chat` (`openai-chat`).
    #[arg(long, value_enum, default_value_t = Api::Completions, help_heading = "Fixed-seq-len scenario")]
    pub api: Api,
    /// The tokenizer's vocab_size (the range of the token offsets drawn after the lengths).
    #[arg(long, default_value_t = crate::workload::fixed::DEEPSEEK_VOCAB_SIZE, help_heading = "Fixed-seq-len scenario")]
    pub vocab_size: u32,
    /// Goodput SLOs in ms, e.g. `ttft:500 tpot:50 e2el:20000` (benchmark_serving's `--goodput`).
    #[arg(long, num_args = 1.., help_heading = "Fixed-seq-len scenario")]
    pub goodput: Vec<String>,
}

impl FixedArgs {
    /// The scenario, when --isl/--osl ask for it; errors name the flag.
    pub fn config(&self, concurrency: u32) -> anyhow::Result<Option<FixedConfig>> {
        let (Some(isl), Some(osl)) = (self.isl, self.osl) else { return Ok(None) };
        let len = |flag: &str, v: i64| -> anyhow::Result<u32> {
            anyhow::ensure!(v > 0, "--{flag} {v}: must be at least 1 token");
            u32::try_from(v).map_err(|_| anyhow::anyhow!("--{flag} {v}: too long"))
        };
        let cfg = FixedConfig {
            range_ratio: self.random_range_ratio,
            num_prompts: self.num_prompts.unwrap_or(concurrency.saturating_mul(10)),
            num_warmups: self.num_warmups.unwrap_or(concurrency.saturating_mul(2)),
            seed: self.random_seed,
            vocab_size: self.vocab_size,
            api: self.api,
            ..FixedConfig::inferencex(len("isl", isl)?, len("osl", osl)?, concurrency)
        };
        cfg.validate().map_err(|e| anyhow::anyhow!("{}", e.to_string().replace("fixed-seq-len `", "--").replace("`:", ":")))?;
        Ok(Some(cfg))
    }

    /// `--goodput` as benchmark_serving parses it: `KEY:VALUE` with KEY ttft, tpot or e2el.
    pub fn goodput(&self) -> anyhow::Result<std::collections::BTreeMap<String, f64>> {
        let mut out = std::collections::BTreeMap::new();
        for item in &self.goodput {
            let (k, v) = item.split_once(':').ok_or_else(|| anyhow::anyhow!("--goodput {item}: expected KEY:VALUE, e.g. ttft:500"))?;
            anyhow::ensure!(["ttft", "tpot", "e2el"].contains(&k), "--goodput {item}: KEY must be ttft, tpot or e2el");
            let v: f64 = v.parse().map_err(|_| anyhow::anyhow!("--goodput {item}: VALUE must be a number of ms"))?;
            anyhow::ensure!(v >= 0.0 && v.is_finite(), "--goodput {item}: VALUE must be ≥ 0 ms");
            out.insert(k.to_string(), v);
        }
        Ok(out)
    }
}
