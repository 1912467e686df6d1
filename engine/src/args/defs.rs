//! The flag and variable tables: every SGLang flag (with its other spellings, arity
//! and status) and `SGLANG_*` variable the engine knows, and lookups by name.

use input_limits::text::edit_distance;
use serde::Serialize;

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

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Arity {
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
    ("enable-decoder-swa-bounded-replay", &[], Bool, Modelled),
    ("swa-prefix-tails", &[], Value, Modelled),
    ("swa-full-tokens-ratio", &[], Value, AcceptedNotModelled),
    ("skip-server-warmup", &[], Bool, AcceptedNotModelled),
    // InferenceX's DeepSeek-R1 FP8 B200 launch script (kernel choices and scheduler polling).
    ("enable-flashinfer-allreduce-fusion", &[], Bool, AcceptedNotModelled),
    ("moe-runner-backend", &[], Value, AcceptedNotModelled),
    ("scheduler-recv-interval", &[], Value, Modelled),
    ("allow-unknown-flags", &[], Bool, FrontEnd),
];

/// Environment variables: (name, status). Anything else is recorded as unknown.
pub(super) const ENVS: &[(&str, FlagStatus)] = &[
    ("SGLANG_SIMULATE_ACC_LEN", Modelled),
    ("SGLANG_SIMULATE_ACC_METHOD", Modelled),
    ("SGLANG_SIMULATE_ACC_TOKEN_MODE", FrontEnd),
    ("SGLANG_SIMULATE_ACC_GREEDY", AcceptedNotModelled),
    ("SGLANG_DSPARK_SIMULATE_FOLD", AcceptedNotModelled),
    ("SGLANG_SIMULATE_UNIFORM_EXPERTS", AcceptedNotModelled),
    ("SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS", AcceptedNotModelled),
    ("SGLANG_INIT_NEW_TOKEN_RATIO", Modelled),
    ("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DEFAULT", Modelled),
    ("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE", Modelled),
    ("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_TARGET_VERIFY", Modelled),
    ("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_NONE", AcceptedNotModelled),
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
    ("SGL_ENABLE_JIT_DEEPGEMM", AcceptedNotModelled),
    ("SGLANG_ENABLE_FLASHINFER_GEMM", AcceptedNotModelled),
    ("TORCH_CUDA_ARCH_LIST", AcceptedNotModelled),
];

pub(super) fn lookup_flag(name: &str) -> Option<(&'static str, Arity, FlagStatus)> {
    let n = name.replace('_', "-");
    FLAGS.iter().find(|(c, al, _, _)| *c == n || al.contains(&n.as_str())).map(|&(c, _, a, s)| (c, a, s))
}

pub(super) fn suggest(name: &str) -> Option<String> {
    let n = name.replace('_', "-");
    FLAGS
        .iter()
        .flat_map(|(c, al, _, _)| std::iter::once(*c).chain(al.iter().copied()))
        .map(|c| (edit_distance(&n, c), c))
        .min()
        .filter(|(d, c)| *d <= (c.len() / 3).max(3))
        .map(|(_, c)| format!("--{c}"))
}
