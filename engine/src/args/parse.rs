//! Parsing SGLang server argv: flags read one by one against the table, applied to
//! the configuration, then the parallelism they describe resolved.

use super::config::{EngineConfig, LoadBalanceMethod, SchedulePolicy, SpecAlgorithm};
use super::defs::{
    Arity::{self, *},
    FlagRecord,
    FlagStatus::{self, *},
    lookup_flag, suggest,
};
use input_limits::text::excerpt;
use std::collections::BTreeMap;

/// A flag or variable could not be accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgsError {
    #[error(
        "unknown flag '{}'{}; pass --allow-unknown-flags to accept it with a warning",
        excerpt(.flag),
        suggestion.as_ref().map(|s| format!(" (did you mean '{s}'?)")).unwrap_or_default()
    )]
    UnknownFlag { flag: String, suggestion: Option<String> },
    #[error("flag '{}' needs a value", excerpt(.flag))]
    MissingValue { flag: String },
    #[error("flag '{}' does not take a value (got '{}')", excerpt(.flag), excerpt(.value))]
    UnexpectedValue { flag: String, value: String },
    #[error("invalid value '{}' for {}: {}", excerpt(.value), excerpt(.name), excerpt(.reason))]
    InvalidValue { name: String, value: String, reason: String },
    #[error("unexpected positional argument '{}'; SGLang flags start with --", excerpt(.0))]
    Positional(String),
    #[error("{0}")]
    Conflict(String),
}

pub(super) fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, ArgsError>
where
    T::Err: std::fmt::Display,
{
    v.trim().parse::<T>().map_err(|e| ArgsError::InvalidValue { name: name.to_string(), value: v.to_string(), reason: e.to_string() })
}

fn invalid(flag: &str, v: &str, reason: &str) -> ArgsError {
    ArgsError::InvalidValue { name: flag.to_string(), value: v.to_string(), reason: reason.to_string() }
}

/// One flag as read from argv.
struct Given<'a> {
    /// The name as written, without `--`.
    name: &'a str,
    value: Option<String>,
    /// Canonical name and status from the table; `None` for an unknown flag.
    known: Option<(&'static str, FlagStatus)>,
}

/// Parallelism flags whose meaning depends on each other, resolved after parsing.
#[derive(Default)]
struct Topology {
    enable_dp_attention: bool,
    attn_dp_size: Option<u32>,
}

/// Reads the flag at `argv[*i]` and its values, moving `i` past them.
fn read_flag<'a>(argv: &[&'a str], i: &mut usize, allow_unknown: bool) -> Result<Given<'a>, ArgsError> {
    let arg = argv[*i];
    let Some(stripped) = arg.strip_prefix("--") else {
        return Err(ArgsError::Positional(arg.to_string()));
    };
    let (name, inline) = match stripped.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (stripped, None),
    };
    *i += 1;
    let Some((canon, arity, status)) = lookup_flag(name) else {
        if !allow_unknown {
            return Err(ArgsError::UnknownFlag { flag: format!("--{name}"), suggestion: suggest(name) });
        }
        // Take a following non-flag token as its value.
        let value = inline.or_else(|| {
            if *i < argv.len() && !argv[*i].starts_with("--") {
                *i += 1;
                Some(argv[*i - 1].to_string())
            } else {
                None
            }
        });
        return Ok(Given { name, value, known: None });
    };
    let value = read_value(argv, i, name, arity, inline)?;
    Ok(Given { name, value, known: Some((canon, status)) })
}

/// A known flag's value by its arity: none, one (inline or the next token), or the
/// tokens up to the next flag.
fn read_value(argv: &[&str], i: &mut usize, name: &str, arity: Arity, inline: Option<String>) -> Result<Option<String>, ArgsError> {
    Ok(match arity {
        Bool => {
            if let Some(v) = inline {
                return Err(ArgsError::UnexpectedValue { flag: format!("--{name}"), value: v });
            }
            None
        }
        Value => Some(match inline {
            Some(v) => v,
            None => {
                if *i >= argv.len() || (argv[*i].starts_with("--") && argv[*i].len() > 2) {
                    return Err(ArgsError::MissingValue { flag: format!("--{name}") });
                }
                *i += 1;
                argv[*i - 1].to_string()
            }
        }),
        List => {
            let mut vals: Vec<String> = inline.into_iter().collect();
            while *i < argv.len() && !argv[*i].starts_with("--") {
                vals.push(argv[*i].to_string());
                *i += 1;
            }
            if vals.is_empty() {
                return Err(ArgsError::MissingValue { flag: format!("--{name}") });
            }
            Some(vals.join(" "))
        }
    })
}

fn schedule_policy(flag: &str, v: &str) -> Result<SchedulePolicy, ArgsError> {
    Ok(match v {
        "fcfs" => SchedulePolicy::Fcfs,
        "lpm" => SchedulePolicy::Lpm,
        "dfs-weight" => SchedulePolicy::DfsWeight,
        "random" => SchedulePolicy::Random,
        "lof" => SchedulePolicy::Lof,
        "routing-key" => SchedulePolicy::RoutingKey,
        "hrrn" => SchedulePolicy::Hrrn,
        "shortest-prefill-first" => SchedulePolicy::ShortestPrefillFirst,
        "priority" => {
            return Err(invalid(flag, v, "SGLang rejects it at start-up; use --enable-priority-scheduling with fcfs or lof"));
        }
        _ => return Err(invalid(flag, v, "choose fcfs, lpm, dfs-weight, random, lof, routing-key, hrrn or shortest-prefill-first")),
    })
}

fn load_balance_method(flag: &str, v: &str) -> Result<LoadBalanceMethod, ArgsError> {
    Ok(match v {
        "auto" | "round_robin" => LoadBalanceMethod::RoundRobin,
        "total_requests" | "shortest_queue" => LoadBalanceMethod::TotalRequests,
        "total_tokens" | "minimum_tokens" => LoadBalanceMethod::TotalTokens,
        "follow_bootstrap_room" => LoadBalanceMethod::FollowBootstrapRoom,
        _ => {
            return Err(invalid(
                flag,
                v,
                "choose auto, round_robin, total_requests, total_tokens or follow_bootstrap_room (0.5.5: shortest_queue, minimum_tokens)",
            ));
        }
    })
}

fn spec_algorithm(flag: &str, v: &str) -> Result<SpecAlgorithm, ArgsError> {
    Ok(match v.to_ascii_uppercase().as_str() {
        "EAGLE" | "NEXTN" => SpecAlgorithm::Eagle,
        "EAGLE3" => SpecAlgorithm::Eagle3,
        "STANDALONE" => SpecAlgorithm::Standalone,
        "NGRAM" => SpecAlgorithm::Ngram,
        "DFLASH" => SpecAlgorithm::Dflash,
        "DSPARK" => SpecAlgorithm::Dspark,
        "UNO" => SpecAlgorithm::Uno,
        _ => return Err(invalid(flag, v, "choose EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK or UNO")),
    })
}

/// `--cuda-graph-bs 1 2 4`: sorted, without repeats.
fn batch_sizes(flag: &str, v: &str) -> Result<Vec<u32>, ArgsError> {
    let mut l = Vec::new();
    for t in v.split_whitespace() {
        l.push(parse_num::<u32>(flag, t)?);
    }
    l.sort_unstable();
    l.dedup();
    Ok(l)
}

impl EngineConfig {
    /// Parses SGLang server argv (without the program name / `-m sglang.launch_server`)
    /// and an environment map.
    pub fn from_args<S: AsRef<str>>(argv: &[S], env: &BTreeMap<String, String>) -> Result<EngineConfig, ArgsError> {
        let argv: Vec<&str> = argv.iter().map(|s| s.as_ref()).collect();
        let mut cfg = EngineConfig { launch_command: argv.join(" "), ..EngineConfig::default() };
        let allow_unknown = argv.iter().any(|a| *a == "--allow-unknown-flags" || *a == "--allow_unknown_flags");
        let mut topology = Topology::default();
        let mut i = 0;
        while i < argv.len() {
            let Given { name, value, known } = read_flag(&argv, &mut i, allow_unknown)?;
            let Some((canon, status)) = known else {
                cfg.warnings.push(format!("unknown flag --{name} accepted (--allow-unknown-flags); it has no effect"));
                cfg.flags.push(FlagRecord { given: format!("--{name}"), canonical: name.to_string(), value, status: Unknown });
                continue;
            };
            cfg.apply_flag(canon, value.as_deref().unwrap_or(""), &mut topology)?;
            cfg.flags.push(FlagRecord { given: format!("--{name}"), canonical: canon.to_string(), value, status });
        }
        cfg.check_speculative()?;
        cfg.resolve_parallelism(topology)?;
        cfg.apply_env(env)?;
        Ok(cfg)
    }

    /// Sets what one known flag (canonical name `canon`, value `v`) changes.
    fn apply_flag(&mut self, canon: &str, v: &str, topology: &mut Topology) -> Result<(), ArgsError> {
        let flag = format!("--{canon}");
        match canon {
            "model-path" => self.model_path = Some(v.to_string()),
            "served-model-name" => self.served_model_name = Some(v.to_string()),
            "tp-size" => self.tp_size = parse_num(&flag, v)?,
            "dp-size" => self.dp_size = parse_num(&flag, v)?,
            "attn-dp-size" => topology.attn_dp_size = Some(parse_num(&flag, v)?),
            "enable-dp-attention" => topology.enable_dp_attention = true,
            "ep-size" => self.ep_size = parse_num(&flag, v)?,
            "pp-size" => self.pp_size = parse_num(&flag, v)?,
            "max-running-requests" => self.max_running_requests = Some(parse_num(&flag, v)?),
            "max-total-tokens" => self.max_total_tokens = Some(parse_num(&flag, v)?),
            "mem-fraction-static" => {
                let f: f64 = parse_num(&flag, v)?;
                if !(f > 0.0 && f <= 1.0) {
                    return Err(invalid(&flag, v, "must be in (0, 1]"));
                }
                self.mem_fraction_static = Some(f)
            }
            "chunked-prefill-size" => self.chunked_prefill_size = Some(parse_num(&flag, v)?),
            "max-prefill-tokens" => self.max_prefill_tokens = parse_num(&flag, v)?,
            "prefill-max-requests" => self.prefill_max_requests = Some(parse_num(&flag, v)?),
            "max-queued-requests" => self.max_queued_requests = Some(parse_num(&flag, v)?),
            "page-size" => {
                let p: u32 = parse_num(&flag, v)?;
                if p == 0 {
                    return Err(invalid(&flag, v, "must be >= 1"));
                }
                self.page_size = Some(p)
            }
            "context-length" => self.context_length = Some(parse_num(&flag, v)?),
            "allow-auto-truncate" => self.allow_auto_truncate = true,
            "schedule-policy" => self.schedule_policy = schedule_policy(&flag, v)?,
            "schedule-conservativeness" => self.schedule_conservativeness = parse_num(&flag, v)?,
            "enable-mixed-chunk" => self.enable_mixed_chunk = true,
            "prefill-decode-interval" => self.prefill_decode_interval = parse_num(&flag, v)?,
            "prefill-decode-interval-min-bs" => self.prefill_decode_interval_min_bs = parse_num(&flag, v)?,
            "disable-overlap-schedule" => self.disable_overlap_schedule = true,
            "retraction-policy" if !matches!(v, "length" | "priority") => {
                return Err(invalid(&flag, v, "choose length or priority"));
            }
            "radix-eviction-policy" if !matches!(v, "lru" | "lfu" | "slru" | "priority" | "tlru") => {
                return Err(invalid(&flag, v, "choose lru, lfu, slru, priority or tlru"));
            }
            "radix-eviction-policy" if v != "lru" => {
                self.warnings.push(format!("--radix-eviction-policy {v} is simulated as lru"));
            }
            "disable-radix-cache" => self.disable_radix_cache = true,
            "enable-decoder-swa-bounded-replay" => self.swa_bounded_replay = true,
            "stream-interval" => self.stream_interval = parse_num::<u32>(&flag, v)?.max(1),
            "scheduler-recv-interval" => self.scheduler_recv_interval = parse_num::<u32>(&flag, v)?.max(1),
            "swa-prefix-tails" => self.swa_prefix_tails = parse_num(&flag, v)?,
            "cuda-graph-max-bs-decode" => self.cuda_graph_max_bs_decode = Some(parse_num(&flag, v)?),
            "cuda-graph-bs-decode" => self.cuda_graph_bs_decode = Some(batch_sizes(&flag, v)?),
            "disable-cuda-graph" => self.disable_cuda_graph_decode = true,
            "cuda-graph-backend-decode" => self.disable_cuda_graph_decode = v == "disabled" || v == "none",
            "load-balance-method" => self.load_balance_method = load_balance_method(&flag, v)?,
            "moe-a2a-backend" => self.moe_a2a_backend = v.to_string(),
            "enable-dp-lm-head" => self.enable_dp_lm_head = true,
            "speculative-algorithm" => self.spec_mut().algorithm = spec_algorithm(&flag, v)?,
            "speculative-num-steps" => self.spec_mut().num_steps = Some(parse_num(&flag, v)?),
            "speculative-eagle-topk" => self.spec_mut().eagle_topk = Some(parse_num(&flag, v)?),
            "speculative-num-draft-tokens" => self.spec_mut().num_draft_tokens = Some(parse_num(&flag, v)?),
            "speculative-dspark-block-size" => self.spec_mut().dspark_block_size = Some(parse_num(&flag, v)?),
            "decode-log-interval" => self.decode_log_interval = parse_num::<u32>(&flag, v)?.max(1),
            "enable-metrics" => self.enable_metrics = true,
            "enable-cache-report" => self.enable_cache_report = true,
            "random-seed" => self.random_seed = Some(parse_num(&flag, v)?),
            _ => {}
        }
        Ok(())
    }

    /// Speculative counts given without an algorithm are an SGLang start-up error.
    fn check_speculative(&self) -> Result<(), ArgsError> {
        if let Some(s) = &self.speculative
            && s.algorithm == SpecAlgorithm::Uno
            && !self.flags.iter().any(|f| f.canonical == "speculative-algorithm")
        {
            return Err(ArgsError::Conflict("speculative-* counts given without --speculative-algorithm".into()));
        }
        Ok(())
    }

    /// Attention-DP and replica counts from the parallelism flags, checked against
    /// the TP size.
    fn resolve_parallelism(&mut self, topology: Topology) -> Result<(), ArgsError> {
        let mut attn_dp = topology.attn_dp_size;
        // 0.5.5 `--enable-dp-attention --dp-size N` means N attention-DP groups in one
        // replica: rewritten to --attn-dp-size N, dp_size 1.
        if topology.enable_dp_attention {
            if attn_dp.is_none() {
                attn_dp = Some(self.dp_size);
            }
            self.dp_size = 1;
        }
        if let Some(a) = attn_dp {
            self.attn_dp_size = a.max(1);
        }
        if self.tp_size == 0 || self.ep_size == 0 || self.dp_size == 0 {
            return Err(ArgsError::Conflict("--tp-size, --ep-size and --dp-size must be >= 1".into()));
        }
        if !self.tp_size.is_multiple_of(self.attn_dp_size) {
            return Err(ArgsError::Conflict(format!(
                "--tp-size {} must be divisible by the attention-DP size {}",
                self.tp_size, self.attn_dp_size
            )));
        }
        if !self.tp_size.is_multiple_of(self.ep_size) {
            return Err(ArgsError::Conflict(format!("--tp-size {} must be divisible by --ep-size {}", self.tp_size, self.ep_size)));
        }
        if self.dp_size > 1 {
            self.warnings.push(format!(
                "--dp-size {} (full replicas) is simulated as {} attention-DP ranks sharing one MoE",
                self.dp_size, self.dp_size
            ));
            self.attn_dp_size *= self.dp_size;
            self.tp_size *= self.dp_size;
            self.dp_size = 1;
        }
        Ok(())
    }
}
