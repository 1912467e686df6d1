//! The resulting configuration: [`EngineConfig`] and the choices its flags take.

use super::defs::{FlagRecord, FlagStatus};
use super::env::EngineEnv;
use super::router::RouterConfig;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulePolicy {
    Fcfs,
    Lpm,
    DfsWeight,
    Random,
    Lof,
    RoutingKey,
    Hrrn,
    ShortestPrefillFirst,
}

impl SchedulePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulePolicy::Fcfs => "fcfs",
            SchedulePolicy::Lpm => "lpm",
            SchedulePolicy::DfsWeight => "dfs-weight",
            SchedulePolicy::Random => "random",
            SchedulePolicy::Lof => "lof",
            SchedulePolicy::RoutingKey => "routing-key",
            SchedulePolicy::Hrrn => "hrrn",
            SchedulePolicy::ShortestPrefillFirst => "shortest-prefill-first",
        }
    }
    /// Policies that need prefix matches to order the queue.
    pub fn is_cache_aware(self) -> bool {
        matches!(self, SchedulePolicy::Lpm | SchedulePolicy::DfsWeight | SchedulePolicy::Hrrn | SchedulePolicy::ShortestPrefillFirst)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadBalanceMethod {
    RoundRobin,
    TotalRequests,
    TotalTokens,
    FollowBootstrapRoom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SpecAlgorithm {
    Eagle,
    Eagle3,
    Standalone,
    Ngram,
    Dflash,
    Dspark,
    Uno,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccMethod {
    MatchExpected,
    Multinomial,
}

/// Speculative decoding as given (unset counts resolved against the model later).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpecArgs {
    pub algorithm: SpecAlgorithm,
    pub num_steps: Option<u32>,
    pub eagle_topk: Option<u32>,
    pub num_draft_tokens: Option<u32>,
    pub dspark_block_size: Option<u32>,
}

/// The engine configuration as given by flags and environment. Values left `None`
/// are resolved against the model and GPU by [`crate::Engine::new`] (see
/// [`crate::Limits`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineConfig {
    pub model_path: Option<String>,
    pub served_model_name: Option<String>,
    pub tp_size: u32,
    pub dp_size: u32,
    pub attn_dp_size: u32,
    pub ep_size: u32,
    pub pp_size: u32,
    pub max_running_requests: Option<u32>,
    pub max_total_tokens: Option<u64>,
    pub mem_fraction_static: Option<f64>,
    pub chunked_prefill_size: Option<i64>,
    pub max_prefill_tokens: u64,
    pub prefill_max_requests: Option<u32>,
    pub max_queued_requests: Option<u32>,
    pub page_size: Option<u32>,
    pub context_length: Option<u64>,
    pub allow_auto_truncate: bool,
    pub schedule_policy: SchedulePolicy,
    pub schedule_conservativeness: f64,
    pub enable_mixed_chunk: bool,
    pub prefill_decode_interval: u32,
    pub prefill_decode_interval_min_bs: u32,
    pub disable_overlap_schedule: bool,
    pub disable_radix_cache: bool,
    pub stream_interval: u32,
    /// `--scheduler-recv-interval`: decode steps between polls for new requests.
    pub scheduler_recv_interval: u32,
    /// `--swa-prefix-tails N`: sliding-window KV kept at the last N tokens of each prompt, so a
    /// later request may branch there (0: only at the ends of cached sequences).
    pub swa_prefix_tails: u32,
    /// `--enable-decoder-swa-bounded-replay`: a prefix whose window KV is gone is reused by
    /// recomputing a bounded tail instead of the whole prefix.
    pub swa_bounded_replay: bool,
    pub cuda_graph_max_bs_decode: Option<u32>,
    pub cuda_graph_bs_decode: Option<Vec<u32>>,
    pub disable_cuda_graph_decode: bool,
    pub load_balance_method: LoadBalanceMethod,
    pub moe_a2a_backend: String,
    pub enable_dp_lm_head: bool,
    pub speculative: Option<SpecArgs>,
    /// Mean accept length to assume when speculation is on and
    /// `SGLANG_SIMULATE_ACC_LEN` is unset (e.g. the recipe's golden AL).
    pub assumed_accept_length: Option<f64>,
    pub decode_log_interval: u32,
    pub enable_metrics: bool,
    pub enable_cache_report: bool,
    pub random_seed: Option<u64>,
    pub env: EngineEnv,
    pub router: Option<RouterConfig>,
    pub flags: Vec<FlagRecord>,
    pub env_records: Vec<FlagRecord>,
    pub warnings: Vec<String>,
    pub launch_command: String,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            model_path: None,
            served_model_name: None,
            tp_size: 1,
            dp_size: 1,
            attn_dp_size: 1,
            ep_size: 1,
            pp_size: 1,
            max_running_requests: None,
            max_total_tokens: None,
            mem_fraction_static: None,
            chunked_prefill_size: None,
            max_prefill_tokens: 16384,
            prefill_max_requests: None,
            max_queued_requests: None,
            page_size: None,
            context_length: None,
            allow_auto_truncate: false,
            schedule_policy: SchedulePolicy::Fcfs,
            schedule_conservativeness: 1.0,
            enable_mixed_chunk: false,
            prefill_decode_interval: 0,
            prefill_decode_interval_min_bs: 1,
            disable_overlap_schedule: false,
            disable_radix_cache: false,
            stream_interval: 1,
            scheduler_recv_interval: 1,
            swa_prefix_tails: 0,
            swa_bounded_replay: false,
            cuda_graph_max_bs_decode: None,
            cuda_graph_bs_decode: None,
            disable_cuda_graph_decode: false,
            load_balance_method: LoadBalanceMethod::RoundRobin,
            moe_a2a_backend: "none".into(),
            enable_dp_lm_head: false,
            speculative: None,
            assumed_accept_length: None,
            decode_log_interval: 40,
            enable_metrics: false,
            enable_cache_report: false,
            random_seed: None,
            env: EngineEnv::default(),
            router: None,
            flags: Vec::new(),
            env_records: Vec::new(),
            warnings: Vec::new(),
            launch_command: String::new(),
        }
    }
}

impl EngineConfig {
    pub(super) fn spec_mut(&mut self) -> &mut SpecArgs {
        self.speculative.get_or_insert(SpecArgs {
            // placeholder until --speculative-algorithm is seen (checked after parsing)
            algorithm: SpecAlgorithm::Uno,
            num_steps: None,
            eagle_topk: None,
            num_draft_tokens: None,
            dspark_block_size: None,
        })
    }

    /// Flags and variables by status, for `/server_info` and reports.
    pub fn flag_split(&self) -> BTreeMap<FlagStatus, Vec<String>> {
        let mut m: BTreeMap<FlagStatus, Vec<String>> = BTreeMap::new();
        for f in self.flags.iter().chain(self.env_records.iter()) {
            m.entry(f.status).or_default().push(f.given.clone());
        }
        m
    }
}
