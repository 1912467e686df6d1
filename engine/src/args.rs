//! SGLang server flags and `SGLANG_*` environment variables → [`EngineConfig`].
//!
//! Both the 0.5.23 and the 0.5.5 spellings are accepted. Every flag is either
//! *modelled* (it changes the simulation), *front-end* (it is honoured by the HTTP
//! shell, not the scheduler) or *accepted but not modelled* (parsed and reported so
//! that results say what the simulation ignored). An unknown flag is an error that
//! names the nearest known flag, unless `--allow-unknown-flags` is given, in which
//! case it is recorded and reported as unknown.

use serde::Serialize;
use std::collections::BTreeMap;

/// How the engine treats a flag or variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagStatus {
    /// Changes the simulated behaviour or timing.
    Modelled,
    /// Honoured by the HTTP shell (API shape, metrics, auth), not by the scheduler.
    FrontEnd,
    /// Parsed and reported, no effect on the simulation.
    AcceptedNotModelled,
    /// Not known to the engine (only with `--allow-unknown-flags`, or any unknown env var).
    Unknown,
}

/// One flag or variable as given, with its canonical name and status.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlagRecord {
    pub given: String,
    pub canonical: String,
    pub value: Option<String>,
    pub status: FlagStatus,
}

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

/// `SGLANG_*` variables the engine honours.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineEnv {
    pub simulate_acc_len: Option<f64>,
    pub simulate_acc_method: AccMethod,
    pub simulate_acc_token_mode: String,
    pub init_new_token_ratio: f64,
    pub min_new_token_ratio_factor: f64,
    pub new_token_ratio_decay_steps: u32,
    pub retract_decode_steps: u32,
    pub clip_max_new_tokens_estimation: u64,
    pub max_new_tokens_limit: Option<u64>,
    pub radix_force_miss: bool,
    pub in_batch_prefix_caching_check_threshold: u64,
    pub in_batch_prefix_caching_deprioritize_threshold: u64,
    /// Raw values, for model-specific switches (e.g. where extra weight tables live).
    pub raw: BTreeMap<String, String>,
}

impl Default for EngineEnv {
    fn default() -> Self {
        EngineEnv {
            simulate_acc_len: None,
            simulate_acc_method: AccMethod::MatchExpected,
            simulate_acc_token_mode: "fixed".into(),
            init_new_token_ratio: 0.7,
            min_new_token_ratio_factor: 0.14,
            new_token_ratio_decay_steps: 600,
            retract_decode_steps: 20,
            clip_max_new_tokens_estimation: 4096,
            max_new_tokens_limit: None,
            radix_force_miss: false,
            in_batch_prefix_caching_check_threshold: 32,
            in_batch_prefix_caching_deprioritize_threshold: 32,
            raw: BTreeMap::new(),
        }
    }
}

/// SGLang router (`sglang_router.launch_router`) settings, when it fronts the engine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouterConfig {
    pub policy: RouterPolicy,
    pub dp_aware: bool,
    pub cache_threshold: f64,
    pub balance_abs_threshold: u64,
    pub balance_rel_threshold: f64,
    pub eviction_interval_secs: u64,
    pub max_tree_size: u64,
    pub flags: Vec<FlagRecord>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterPolicy {
    CacheAware,
    RoundRobin,
    Random,
    PowerOfTwo,
}

impl Default for RouterConfig {
    /// sglang-router `RouterArgs` defaults: cache_threshold 0.3,
    /// balance_abs_threshold 64, balance_rel_threshold 1.5, eviction_interval_secs
    /// 120, max_tree_size 2^26.
    fn default() -> Self {
        RouterConfig {
            policy: RouterPolicy::CacheAware,
            dp_aware: false,
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
            eviction_interval_secs: 120,
            max_tree_size: 1 << 26,
            flags: Vec::new(),
        }
    }
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

/// A flag or variable could not be accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgsError {
    #[error(
        "unknown flag '{flag}'{}; pass --allow-unknown-flags to accept it with a warning",
        suggestion.as_ref().map(|s| format!(" (did you mean '{s}'?)")).unwrap_or_default()
    )]
    UnknownFlag { flag: String, suggestion: Option<String> },
    #[error("flag '{flag}' needs a value")]
    MissingValue { flag: String },
    #[error("flag '{flag}' does not take a value (got '{value}')")]
    UnexpectedValue { flag: String, value: String },
    #[error("invalid value '{value}' for {name}: {reason}")]
    InvalidValue { name: String, value: String, reason: String },
    #[error("unexpected positional argument '{0}'; SGLang flags start with --")]
    Positional(String),
    #[error("{0}")]
    Conflict(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    Bool,
    Value,
    /// One or more values until the next flag (e.g. `--cuda-graph-bs 1 2 4`).
    List,
}

use Arity::*;
use FlagStatus::*;

/// (canonical name, other spellings, arity, status)
const FLAGS: &[(&str, &[&str], Arity, FlagStatus)] = &[
    ("model-path", &["model"], Value, FrontEnd),
    ("tokenizer-path", &[], Value, FrontEnd),
    ("served-model-name", &[], Value, FrontEnd),
    ("tp-size", &["tensor-parallel-size", "tp"], Value, Modelled),
    ("dp-size", &["data-parallel-size", "dp"], Value, Modelled),
    ("attn-dp-size", &[], Value, Modelled),
    ("enable-dp-attention", &[], Bool, Modelled),
    ("ep-size", &["expert-parallel-size", "ep"], Value, Modelled),
    ("pp-size", &["pipeline-parallel-size", "pp"], Value, AcceptedNotModelled),
    ("max-running-requests", &[], Value, Modelled),
    ("max-total-tokens", &[], Value, Modelled),
    ("mem-fraction-static", &[], Value, Modelled),
    ("chunked-prefill-size", &[], Value, Modelled),
    ("max-prefill-tokens", &[], Value, Modelled),
    ("prefill-max-requests", &[], Value, Modelled),
    ("max-queued-requests", &[], Value, Modelled),
    ("page-size", &[], Value, Modelled),
    ("context-length", &[], Value, Modelled),
    ("allow-auto-truncate", &[], Bool, FrontEnd),
    ("schedule-policy", &[], Value, Modelled),
    ("schedule-conservativeness", &[], Value, Modelled),
    ("enable-mixed-chunk", &[], Bool, Modelled),
    ("prefill-decode-interval", &[], Value, Modelled),
    ("prefill-decode-interval-min-bs", &[], Value, Modelled),
    ("num-continuous-decode-steps", &[], Value, AcceptedNotModelled),
    // Overlap is always assumed on: the per-step CPU cost is in tau_step.
    ("disable-overlap-schedule", &[], Bool, AcceptedNotModelled),
    ("enable-priority-scheduling", &[], Bool, AcceptedNotModelled),
    ("priority-scheduling-preemption-threshold", &[], Value, AcceptedNotModelled),
    ("schedule-low-priority-values-first", &[], Bool, AcceptedNotModelled),
    ("disable-priority-preemption", &[], Bool, AcceptedNotModelled),
    ("retraction-policy", &[], Value, Modelled),
    ("radix-eviction-policy", &[], Value, Modelled),
    ("disable-radix-cache", &[], Bool, Modelled),
    ("stream-interval", &[], Value, Modelled),
    ("enable-dynamic-chunking", &[], Bool, AcceptedNotModelled),
    ("enable-prefill-delayer", &[], Bool, AcceptedNotModelled),
    ("min-free-slots-delay", &[], Value, AcceptedNotModelled),
    ("cuda-graph-max-bs-decode", &["cuda-graph-max-bs"], Value, Modelled),
    ("cuda-graph-max-bs-prefill", &[], Value, AcceptedNotModelled),
    ("cuda-graph-bs-decode", &["cuda-graph-bs"], List, Modelled),
    ("cuda-graph-config", &[], Value, AcceptedNotModelled),
    ("disable-cuda-graph", &[], Bool, Modelled),
    ("cuda-graph-backend-decode", &[], Value, Modelled),
    // Prefill always runs eager in the cost model, which is what "disabled" asks for.
    ("cuda-graph-backend-prefill", &[], Value, AcceptedNotModelled),
    ("load-balance-method", &[], Value, Modelled),
    ("moe-a2a-backend", &[], Value, Modelled),
    ("enable-dp-lm-head", &[], Bool, Modelled),
    ("enable-dp-attention-local-control-broadcast", &[], Bool, AcceptedNotModelled),
    ("speculative-algorithm", &[], Value, Modelled),
    ("speculative-num-steps", &[], Value, Modelled),
    ("speculative-eagle-topk", &[], Value, Modelled),
    ("speculative-num-draft-tokens", &[], Value, Modelled),
    ("speculative-dspark-block-size", &[], Value, Modelled),
    ("speculative-draft-model-path", &[], Value, AcceptedNotModelled),
    ("speculative-accept-threshold-single", &[], Value, AcceptedNotModelled),
    ("speculative-accept-threshold-acc", &[], Value, AcceptedNotModelled),
    ("speculative-adaptive", &[], Bool, AcceptedNotModelled),
    ("tokenizer-worker-num", &[], Value, FrontEnd),
    ("detokenizer-worker-num", &[], Value, FrontEnd),
    ("tokenizer-backend", &[], Value, FrontEnd),
    ("enable-cache-report", &[], Bool, FrontEnd),
    ("stream-response-default-include-usage", &[], Bool, FrontEnd),
    ("reasoning-parser", &[], Value, FrontEnd),
    ("tool-call-parser", &[], Value, FrontEnd),
    ("enable-metrics", &[], Bool, FrontEnd),
    ("enable-metrics-for-all-schedulers", &[], Bool, FrontEnd),
    ("decode-log-interval", &[], Value, FrontEnd),
    ("bucket-time-to-first-token", &[], List, FrontEnd),
    ("bucket-inter-token-latency", &[], List, FrontEnd),
    ("bucket-e2e-request-latency", &[], List, FrontEnd),
    ("prompt-tokens-buckets", &[], List, FrontEnd),
    ("generation-tokens-buckets", &[], List, FrontEnd),
    ("extra-metric-labels", &[], Value, FrontEnd),
    ("tokenizer-metrics-allowed-custom-labels", &[], List, FrontEnd),
    ("api-key", &[], Value, FrontEnd),
    ("host", &[], Value, FrontEnd),
    ("port", &[], Value, FrontEnd),
    ("random-seed", &[], Value, Modelled),
    ("trust-remote-code", &[], Bool, AcceptedNotModelled),
    ("watchdog-timeout", &[], Value, AcceptedNotModelled),
    ("log-level", &[], Value, AcceptedNotModelled),
    ("kv-cache-dtype", &[], Value, AcceptedNotModelled),
    ("quantization", &[], Value, AcceptedNotModelled),
    ("dtype", &[], Value, AcceptedNotModelled),
    ("attention-backend", &[], Value, AcceptedNotModelled),
    ("enable-decoder-swa-bounded-replay", &[], Bool, AcceptedNotModelled),
    ("swa-prefix-tails", &[], Value, AcceptedNotModelled),
    ("swa-full-tokens-ratio", &[], Value, AcceptedNotModelled),
    ("skip-server-warmup", &[], Bool, AcceptedNotModelled),
    ("allow-unknown-flags", &[], Bool, FrontEnd),
];

/// Environment variables: (name, status). Anything else is recorded as unknown.
const ENVS: &[(&str, FlagStatus)] = &[
    ("SGLANG_SIMULATE_ACC_LEN", Modelled),
    ("SGLANG_SIMULATE_ACC_METHOD", Modelled),
    ("SGLANG_SIMULATE_ACC_TOKEN_MODE", FrontEnd),
    ("SGLANG_SIMULATE_ACC_GREEDY", AcceptedNotModelled),
    ("SGLANG_DSPARK_SIMULATE_FOLD", AcceptedNotModelled),
    ("SGLANG_SIMULATE_UNIFORM_EXPERTS", AcceptedNotModelled),
    ("SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS", AcceptedNotModelled),
    ("SGLANG_INIT_NEW_TOKEN_RATIO", Modelled),
    ("SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR", Modelled),
    ("SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS", Modelled),
    ("SGLANG_RETRACT_DECODE_STEPS", Modelled),
    ("SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", Modelled),
    ("SGLANG_MAX_NEW_TOKENS_LIMIT", Modelled),
    ("SGLANG_RADIX_FORCE_MISS", Modelled),
    ("IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD", Modelled),
    ("IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD", Modelled),
    ("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE", Modelled),
    ("SGLANG_DSV41_ENGRAM_HOST_TABLE_LAYOUT", AcceptedNotModelled),
    ("SGLANG_HEALTH_CHECK_TIMEOUT", FrontEnd),
    ("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", FrontEnd),
    ("SGLANG_DEFAULT_THINKING", FrontEnd),
    ("SGLANG_DSV41_REASONING_EFFORT", FrontEnd),
    ("SGLANG_TIMEOUT_KEEP_ALIVE", FrontEnd),
    ("SGLANG_DISABLE_CONSECUTIVE_PREFILL_OVERLAP", AcceptedNotModelled),
    ("SGLANG_DSPARK_OPT_MARKOV_W2_BF16", AcceptedNotModelled),
    ("SGLANG_DSPARK_FOLDED_SAMPLING", AcceptedNotModelled),
    ("SGLANG_RAGGED_VERIFY_MODE", AcceptedNotModelled),
    ("SGLANG_NUMA_BIND_V2", AcceptedNotModelled),
    ("NCCL_CUMEM_ENABLE", AcceptedNotModelled),
    ("PYTORCH_CUDA_ALLOC_CONF", AcceptedNotModelled),
];

fn lookup_flag(name: &str) -> Option<(&'static str, Arity, FlagStatus)> {
    let n = name.replace('_', "-");
    FLAGS.iter().find(|(c, al, _, _)| *c == n || al.contains(&n.as_str())).map(|&(c, _, a, s)| (c, a, s))
}

/// Levenshtein distance; also used for the harness's "did you mean" hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

fn suggest(name: &str) -> Option<String> {
    let n = name.replace('_', "-");
    FLAGS
        .iter()
        .flat_map(|(c, al, _, _)| std::iter::once(*c).chain(al.iter().copied()))
        .map(|c| (edit_distance(&n, c), c))
        .min()
        .filter(|(d, c)| *d <= (c.len() / 3).max(3))
        .map(|(_, c)| format!("--{c}"))
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, ArgsError>
where
    T::Err: std::fmt::Display,
{
    v.trim().parse::<T>().map_err(|e| ArgsError::InvalidValue { name: name.to_string(), value: v.to_string(), reason: e.to_string() })
}

fn parse_bool_env(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

impl EngineConfig {
    /// Parses SGLang server argv (without the program name / `-m sglang.launch_server`)
    /// and an environment map.
    pub fn from_args<S: AsRef<str>>(argv: &[S], env: &BTreeMap<String, String>) -> Result<EngineConfig, ArgsError> {
        let argv: Vec<&str> = argv.iter().map(|s| s.as_ref()).collect();
        let mut cfg = EngineConfig { launch_command: argv.join(" "), ..EngineConfig::default() };
        let allow_unknown = argv.iter().any(|a| *a == "--allow-unknown-flags" || *a == "--allow_unknown_flags");
        let mut enable_dp_attention = false;
        let mut attn_dp_given: Option<u32> = None;
        let mut lb_given = false;
        let mut i = 0;
        while i < argv.len() {
            let arg = argv[i];
            let Some(stripped) = arg.strip_prefix("--") else {
                return Err(ArgsError::Positional(arg.to_string()));
            };
            let (name, inline) = match stripped.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (stripped, None),
            };
            i += 1;
            let Some((canon, arity, status)) = lookup_flag(name) else {
                if !allow_unknown {
                    return Err(ArgsError::UnknownFlag { flag: format!("--{name}"), suggestion: suggest(name) });
                }
                // Take a following non-flag token as its value.
                let value = inline.or_else(|| {
                    if i < argv.len() && !argv[i].starts_with("--") {
                        i += 1;
                        Some(argv[i - 1].to_string())
                    } else {
                        None
                    }
                });
                cfg.warnings.push(format!("unknown flag --{name} accepted (--allow-unknown-flags); it has no effect"));
                cfg.flags.push(FlagRecord { given: format!("--{name}"), canonical: name.to_string(), value, status: Unknown });
                continue;
            };
            let value: Option<String> = match arity {
                Bool => {
                    if let Some(v) = inline {
                        return Err(ArgsError::UnexpectedValue { flag: format!("--{name}"), value: v });
                    }
                    None
                }
                Value => Some(match inline {
                    Some(v) => v,
                    None => {
                        if i >= argv.len() || (argv[i].starts_with("--") && argv[i].len() > 2) {
                            return Err(ArgsError::MissingValue { flag: format!("--{name}") });
                        }
                        i += 1;
                        argv[i - 1].to_string()
                    }
                }),
                List => {
                    let mut vals: Vec<String> = inline.into_iter().collect();
                    while i < argv.len() && !argv[i].starts_with("--") {
                        vals.push(argv[i].to_string());
                        i += 1;
                    }
                    if vals.is_empty() {
                        return Err(ArgsError::MissingValue { flag: format!("--{name}") });
                    }
                    Some(vals.join(" "))
                }
            };
            let v = value.as_deref().unwrap_or("");
            let flag = format!("--{canon}");
            match canon {
                "model-path" => cfg.model_path = Some(v.to_string()),
                "served-model-name" => cfg.served_model_name = Some(v.to_string()),
                "tp-size" => cfg.tp_size = parse_num(&flag, v)?,
                "dp-size" => cfg.dp_size = parse_num(&flag, v)?,
                "attn-dp-size" => attn_dp_given = Some(parse_num(&flag, v)?),
                "enable-dp-attention" => enable_dp_attention = true,
                "ep-size" => cfg.ep_size = parse_num(&flag, v)?,
                "pp-size" => cfg.pp_size = parse_num(&flag, v)?,
                "max-running-requests" => cfg.max_running_requests = Some(parse_num(&flag, v)?),
                "max-total-tokens" => cfg.max_total_tokens = Some(parse_num(&flag, v)?),
                "mem-fraction-static" => {
                    let f: f64 = parse_num(&flag, v)?;
                    if !(f > 0.0 && f <= 1.0) {
                        return Err(ArgsError::InvalidValue { name: flag, value: v.into(), reason: "must be in (0, 1]".into() });
                    }
                    cfg.mem_fraction_static = Some(f)
                }
                "chunked-prefill-size" => cfg.chunked_prefill_size = Some(parse_num(&flag, v)?),
                "max-prefill-tokens" => cfg.max_prefill_tokens = parse_num(&flag, v)?,
                "prefill-max-requests" => cfg.prefill_max_requests = Some(parse_num(&flag, v)?),
                "max-queued-requests" => cfg.max_queued_requests = Some(parse_num(&flag, v)?),
                "page-size" => {
                    let p: u32 = parse_num(&flag, v)?;
                    if p == 0 {
                        return Err(ArgsError::InvalidValue { name: flag, value: v.into(), reason: "must be >= 1".into() });
                    }
                    cfg.page_size = Some(p)
                }
                "context-length" => cfg.context_length = Some(parse_num(&flag, v)?),
                "allow-auto-truncate" => cfg.allow_auto_truncate = true,
                "schedule-policy" => {
                    cfg.schedule_policy = match v {
                        "fcfs" => SchedulePolicy::Fcfs,
                        "lpm" => SchedulePolicy::Lpm,
                        "dfs-weight" => SchedulePolicy::DfsWeight,
                        "random" => SchedulePolicy::Random,
                        "lof" => SchedulePolicy::Lof,
                        "routing-key" => SchedulePolicy::RoutingKey,
                        "hrrn" => SchedulePolicy::Hrrn,
                        "shortest-prefill-first" => SchedulePolicy::ShortestPrefillFirst,
                        "priority" => {
                            return Err(ArgsError::InvalidValue {
                                name: flag,
                                value: v.into(),
                                reason: "SGLang rejects it at start-up; use --enable-priority-scheduling with fcfs or lof".into(),
                            });
                        }
                        _ => {
                            return Err(ArgsError::InvalidValue {
                                name: flag,
                                value: v.into(),
                                reason: "choose fcfs, lpm, dfs-weight, random, lof, routing-key, hrrn or shortest-prefill-first".into(),
                            });
                        }
                    }
                }
                "schedule-conservativeness" => cfg.schedule_conservativeness = parse_num(&flag, v)?,
                "enable-mixed-chunk" => cfg.enable_mixed_chunk = true,
                "prefill-decode-interval" => cfg.prefill_decode_interval = parse_num(&flag, v)?,
                "prefill-decode-interval-min-bs" => cfg.prefill_decode_interval_min_bs = parse_num(&flag, v)?,
                "disable-overlap-schedule" => cfg.disable_overlap_schedule = true,
                "retraction-policy" if !matches!(v, "length" | "priority") => {
                    return Err(ArgsError::InvalidValue { name: flag, value: v.into(), reason: "choose length or priority".into() });
                }
                "radix-eviction-policy" if !matches!(v, "lru" | "lfu" | "slru" | "priority" | "tlru") => {
                    return Err(ArgsError::InvalidValue {
                        name: flag,
                        value: v.into(),
                        reason: "choose lru, lfu, slru, priority or tlru".into(),
                    });
                }
                "radix-eviction-policy" if v != "lru" => {
                    cfg.warnings.push(format!("--radix-eviction-policy {v} is simulated as lru"));
                }
                "disable-radix-cache" => cfg.disable_radix_cache = true,
                "stream-interval" => {
                    cfg.stream_interval = parse_num::<u32>(&flag, v)?.max(1);
                }
                "cuda-graph-max-bs-decode" => cfg.cuda_graph_max_bs_decode = Some(parse_num(&flag, v)?),
                "cuda-graph-bs-decode" => {
                    let mut l = Vec::new();
                    for t in v.split_whitespace() {
                        l.push(parse_num::<u32>(&flag, t)?);
                    }
                    l.sort_unstable();
                    l.dedup();
                    cfg.cuda_graph_bs_decode = Some(l);
                }
                "disable-cuda-graph" => cfg.disable_cuda_graph_decode = true,
                "cuda-graph-backend-decode" => cfg.disable_cuda_graph_decode = v == "disabled" || v == "none",
                "load-balance-method" => {
                    lb_given = true;
                    cfg.load_balance_method = match v {
                        "auto" | "round_robin" => LoadBalanceMethod::RoundRobin,
                        "total_requests" | "shortest_queue" => LoadBalanceMethod::TotalRequests,
                        "total_tokens" | "minimum_tokens" => LoadBalanceMethod::TotalTokens,
                        "follow_bootstrap_room" => LoadBalanceMethod::FollowBootstrapRoom,
                        _ => {
                            return Err(ArgsError::InvalidValue {
                                name: flag,
                                value: v.into(),
                                reason: "choose auto, round_robin, total_requests, total_tokens or follow_bootstrap_room (0.5.5: shortest_queue, minimum_tokens)".into(),
                            });
                        }
                    }
                }
                "moe-a2a-backend" => cfg.moe_a2a_backend = v.to_string(),
                "enable-dp-lm-head" => cfg.enable_dp_lm_head = true,
                "speculative-algorithm" => {
                    let alg = match v.to_ascii_uppercase().as_str() {
                        "EAGLE" | "NEXTN" => SpecAlgorithm::Eagle,
                        "EAGLE3" => SpecAlgorithm::Eagle3,
                        "STANDALONE" => SpecAlgorithm::Standalone,
                        "NGRAM" => SpecAlgorithm::Ngram,
                        "DFLASH" => SpecAlgorithm::Dflash,
                        "DSPARK" => SpecAlgorithm::Dspark,
                        "UNO" => SpecAlgorithm::Uno,
                        _ => {
                            return Err(ArgsError::InvalidValue {
                                name: flag,
                                value: v.into(),
                                reason: "choose EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK or UNO".into(),
                            });
                        }
                    };
                    cfg.spec_mut().algorithm = alg;
                }
                "speculative-num-steps" => cfg.spec_mut().num_steps = Some(parse_num(&flag, v)?),
                "speculative-eagle-topk" => cfg.spec_mut().eagle_topk = Some(parse_num(&flag, v)?),
                "speculative-num-draft-tokens" => cfg.spec_mut().num_draft_tokens = Some(parse_num(&flag, v)?),
                "speculative-dspark-block-size" => cfg.spec_mut().dspark_block_size = Some(parse_num(&flag, v)?),
                "decode-log-interval" => cfg.decode_log_interval = parse_num::<u32>(&flag, v)?.max(1),
                "enable-metrics" => cfg.enable_metrics = true,
                "enable-cache-report" => cfg.enable_cache_report = true,
                "random-seed" => cfg.random_seed = Some(parse_num(&flag, v)?),
                _ => {}
            }
            cfg.flags.push(FlagRecord { given: format!("--{name}"), canonical: canon.to_string(), value, status });
        }
        // Speculative counts given without an algorithm are an SGLang start-up error.
        if let Some(s) = &cfg.speculative
            && s.algorithm == SpecAlgorithm::Uno
            && !cfg.flags.iter().any(|f| f.canonical == "speculative-algorithm")
        {
            return Err(ArgsError::Conflict("speculative-* counts given without --speculative-algorithm".into()));
        }
        // 0.5.5 `--enable-dp-attention --dp-size N` means N attention-DP groups in one
        // replica: rewritten to --attn-dp-size N, dp_size 1.
        if enable_dp_attention {
            if attn_dp_given.is_none() {
                attn_dp_given = Some(cfg.dp_size);
            }
            cfg.dp_size = 1;
        }
        if let Some(a) = attn_dp_given {
            cfg.attn_dp_size = a.max(1);
        }
        if cfg.tp_size == 0 || cfg.ep_size == 0 || cfg.dp_size == 0 {
            return Err(ArgsError::Conflict("--tp-size, --ep-size and --dp-size must be >= 1".into()));
        }
        if !cfg.tp_size.is_multiple_of(cfg.attn_dp_size) {
            return Err(ArgsError::Conflict(format!(
                "--tp-size {} must be divisible by the attention-DP size {}",
                cfg.tp_size, cfg.attn_dp_size
            )));
        }
        if !cfg.tp_size.is_multiple_of(cfg.ep_size) {
            return Err(ArgsError::Conflict(format!("--tp-size {} must be divisible by --ep-size {}", cfg.tp_size, cfg.ep_size)));
        }
        if cfg.dp_size > 1 {
            cfg.warnings.push(format!(
                "--dp-size {} (full replicas) is simulated as {} attention-DP ranks sharing one MoE",
                cfg.dp_size, cfg.dp_size
            ));
            cfg.attn_dp_size *= cfg.dp_size;
            cfg.tp_size *= cfg.dp_size;
            cfg.dp_size = 1;
        }
        let _ = lb_given;
        cfg.apply_env(env)?;
        Ok(cfg)
    }

    fn spec_mut(&mut self) -> &mut SpecArgs {
        self.speculative.get_or_insert(SpecArgs {
            // placeholder until --speculative-algorithm is seen (checked after parsing)
            algorithm: SpecAlgorithm::Uno,
            num_steps: None,
            eagle_topk: None,
            num_draft_tokens: None,
            dspark_block_size: None,
        })
    }

    fn apply_env(&mut self, env: &BTreeMap<String, String>) -> Result<(), ArgsError> {
        for (k, v) in env {
            let status = ENVS.iter().find(|(n, _)| n == k).map(|&(_, s)| s).unwrap_or(Unknown);
            let e = &mut self.env;
            match k.as_str() {
                "SGLANG_SIMULATE_ACC_LEN" => {
                    let x: f64 = parse_num(k, v)?;
                    e.simulate_acc_len = (x > 0.0).then_some(x);
                }
                "SGLANG_SIMULATE_ACC_METHOD" => {
                    e.simulate_acc_method = match v.as_str() {
                        "match-expected" => AccMethod::MatchExpected,
                        "multinomial" => AccMethod::Multinomial,
                        _ => {
                            return Err(ArgsError::InvalidValue {
                                name: k.clone(),
                                value: v.clone(),
                                reason: "choose match-expected or multinomial".into(),
                            });
                        }
                    }
                }
                "SGLANG_SIMULATE_ACC_TOKEN_MODE" => e.simulate_acc_token_mode = v.clone(),
                "SGLANG_INIT_NEW_TOKEN_RATIO" => e.init_new_token_ratio = parse_num(k, v)?,
                "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR" => e.min_new_token_ratio_factor = parse_num(k, v)?,
                "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS" => e.new_token_ratio_decay_steps = parse_num::<u32>(k, v)?.max(1),
                "SGLANG_RETRACT_DECODE_STEPS" => e.retract_decode_steps = parse_num(k, v)?,
                "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION" => e.clip_max_new_tokens_estimation = parse_num(k, v)?,
                "SGLANG_MAX_NEW_TOKENS_LIMIT" => e.max_new_tokens_limit = Some(parse_num(k, v)?),
                "SGLANG_RADIX_FORCE_MISS" => e.radix_force_miss = parse_bool_env(v),
                "IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD" => e.in_batch_prefix_caching_check_threshold = parse_num(k, v)?,
                "IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD" => e.in_batch_prefix_caching_deprioritize_threshold = parse_num(k, v)?,
                _ => {}
            }
            e.raw.insert(k.clone(), v.clone());
            self.env_records.push(FlagRecord { given: k.clone(), canonical: k.clone(), value: Some(v.clone()), status });
        }
        Ok(())
    }

    /// Parses the SGLang router's argv (`python -m sglang_router.launch_router ...`)
    /// and attaches it: with `--dp-aware` the router picks the attention-DP rank.
    pub fn with_router_args<S: AsRef<str>>(mut self, argv: &[S]) -> Result<EngineConfig, ArgsError> {
        self.router = Some(RouterConfig::from_args(argv)?);
        Ok(self)
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

impl PartialOrd for FlagStatus {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for FlagStatus {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (*self as u8).cmp(&(*other as u8))
    }
}

impl RouterConfig {
    /// Parses sglang-router flags; routing-relevant ones are modelled, the rest
    /// (timeouts, URLs, headers, health checks) are accepted and recorded.
    pub fn from_args<S: AsRef<str>>(argv: &[S]) -> Result<RouterConfig, ArgsError> {
        let argv: Vec<&str> = argv.iter().map(|s| s.as_ref()).collect();
        let mut r = RouterConfig::default();
        let mut i = 0;
        while i < argv.len() {
            let Some(name) = argv[i].strip_prefix("--") else {
                return Err(ArgsError::Positional(argv[i].to_string()));
            };
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n.replace('_', "-"), Some(v.to_string())),
                None => (name.replace('_', "-"), None),
            };
            i += 1;
            let mut vals: Vec<String> = inline.into_iter().collect();
            // --worker-urls takes many values, other flags at most one
            while i < argv.len() && !argv[i].starts_with("--") && (vals.is_empty() || name == "worker-urls") {
                vals.push(argv[i].to_string());
                i += 1;
            }
            let v = vals.first().cloned().unwrap_or_default();
            let flag = format!("--{name}");
            let status = match name.as_str() {
                "policy" => {
                    r.policy = match v.as_str() {
                        "cache_aware" => RouterPolicy::CacheAware,
                        "round_robin" => RouterPolicy::RoundRobin,
                        "random" => RouterPolicy::Random,
                        "power_of_two" => RouterPolicy::PowerOfTwo,
                        _ => {
                            return Err(ArgsError::InvalidValue {
                                name: flag,
                                value: v,
                                reason: "choose cache_aware, round_robin, random or power_of_two".into(),
                            });
                        }
                    };
                    Modelled
                }
                "dp-aware" => {
                    r.dp_aware = true;
                    Modelled
                }
                "cache-threshold" => {
                    r.cache_threshold = parse_num(&flag, &v)?;
                    Modelled
                }
                "balance-abs-threshold" => {
                    r.balance_abs_threshold = parse_num(&flag, &v)?;
                    Modelled
                }
                "balance-rel-threshold" => {
                    r.balance_rel_threshold = parse_num(&flag, &v)?;
                    Modelled
                }
                "eviction-interval" | "eviction-interval-secs" => {
                    r.eviction_interval_secs = parse_num(&flag, &v)?;
                    Modelled
                }
                "max-tree-size" => {
                    r.max_tree_size = parse_num(&flag, &v)?;
                    Modelled
                }
                _ => AcceptedNotModelled,
            };
            r.flags.push(FlagRecord { given: flag.clone(), canonical: flag, value: (!vals.is_empty()).then(|| vals.join(" ")), status });
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<EngineConfig, ArgsError> {
        EngineConfig::from_args(args, &BTreeMap::new())
    }

    #[test]
    fn both_spellings_parse_to_the_same_config() {
        let a = parse(&["--cuda-graph-max-bs", "256"]).unwrap();
        let b = parse(&["--cuda-graph-max-bs-decode", "256"]).unwrap();
        assert_eq!(a.cuda_graph_max_bs_decode, Some(256));
        assert_eq!(a.cuda_graph_max_bs_decode, b.cuda_graph_max_bs_decode);
        let c = parse(&["--tensor-parallel-size", "4", "--expert-parallel-size=2"]).unwrap();
        assert_eq!((c.tp_size, c.ep_size), (4, 2));
        let d = parse(&["--tp", "8"]).unwrap();
        assert_eq!(d.tp_size, 8);
    }

    #[test]
    fn enable_dp_attention_rewrites_dp_size() {
        let c = parse(&["--tp-size", "8", "--enable-dp-attention", "--dp-size", "8"]).unwrap();
        assert_eq!((c.attn_dp_size, c.dp_size, c.tp_size), (8, 1, 8));
    }

    #[test]
    fn continuous_decode_steps_accepted_and_inert() {
        let a = parse(&["--num-continuous-decode-steps", "4"]).unwrap();
        let mut b = parse(&[]).unwrap();
        b.flags = a.flags.clone();
        b.launch_command = a.launch_command.clone();
        assert_eq!(a, b);
        assert_eq!(a.flags[0].status, FlagStatus::AcceptedNotModelled);
    }

    #[test]
    fn unknown_flag_suggests_nearest_and_can_be_allowed() {
        let e = parse(&["--max-runing-requests", "4"]).unwrap_err();
        assert_eq!(e, ArgsError::UnknownFlag { flag: "--max-runing-requests".into(), suggestion: Some("--max-running-requests".into()) });
        assert!(e.to_string().contains("did you mean '--max-running-requests'"));
        let c = parse(&["--allow-unknown-flags", "--frobnicate", "3", "--tp", "2"]).unwrap();
        assert_eq!(c.tp_size, 2);
        assert!(c.flags.iter().any(|f| f.status == FlagStatus::Unknown && f.value.as_deref() == Some("3")));
        assert_eq!(c.warnings.len(), 1);
    }

    #[test]
    fn old_load_balance_names_are_aliases() {
        assert_eq!(parse(&["--load-balance-method", "shortest_queue"]).unwrap().load_balance_method, LoadBalanceMethod::TotalRequests);
        assert_eq!(parse(&["--load-balance-method", "minimum_tokens"]).unwrap().load_balance_method, LoadBalanceMethod::TotalTokens);
    }

    #[test]
    fn env_variables_are_parsed_and_recorded() {
        let mut env = BTreeMap::new();
        env.insert("SGLANG_SIMULATE_ACC_LEN".to_string(), "3.51".to_string());
        env.insert("SGLANG_SIMULATE_ACC_METHOD".to_string(), "multinomial".to_string());
        env.insert("SGLANG_NUMA_BIND_V2".to_string(), "0".to_string());
        env.insert("HOME".to_string(), "/root".to_string());
        let c = EngineConfig::from_args(&["--speculative-algorithm", "NEXTN"], &env).unwrap();
        assert_eq!(c.env.simulate_acc_len, Some(3.51));
        assert_eq!(c.env.simulate_acc_method, AccMethod::Multinomial);
        assert_eq!(c.speculative.as_ref().unwrap().algorithm, SpecAlgorithm::Eagle);
        let split = c.flag_split();
        assert!(split[&FlagStatus::AcceptedNotModelled].contains(&"SGLANG_NUMA_BIND_V2".into()));
        assert!(split[&FlagStatus::Unknown].contains(&"HOME".into()));
    }

    #[test]
    fn bad_values_name_the_flag() {
        let e = parse(&["--mem-fraction-static", "1.5"]).unwrap_err().to_string();
        assert!(e.contains("--mem-fraction-static") && e.contains("(0, 1]"), "{e}");
        let e = parse(&["--tp-size"]).unwrap_err();
        assert_eq!(e, ArgsError::MissingValue { flag: "--tp-size".into() });
    }

    #[test]
    fn router_defaults_and_flags() {
        let r = RouterConfig::from_args(&[
            "--policy",
            "cache_aware",
            "--dp-aware",
            "--worker-urls",
            "http://a",
            "http://b",
            "--disable-retries",
            "--request-timeout-secs",
            "14400",
        ])
        .unwrap();
        assert!(r.dp_aware);
        assert_eq!(r.cache_threshold, 0.3);
        assert_eq!(r.balance_abs_threshold, 64);
        assert_eq!(r.flags.iter().filter(|f| f.status == FlagStatus::Modelled).count(), 2);
    }
}
