//! The SGLang router's flags (`sglang_router.launch_router`) → [`RouterConfig`].

use super::config::EngineConfig;
use super::defs::{FlagRecord, FlagStatus::*};
use super::parse::{ArgsError, parse_num};
use serde::Serialize;

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

impl EngineConfig {
    /// Parses the SGLang router's argv (`python -m sglang_router.launch_router ...`)
    /// and attaches it: with `--dp-aware` the router picks the attention-DP rank.
    pub fn with_router_args<S: AsRef<str>>(mut self, argv: &[S]) -> Result<EngineConfig, ArgsError> {
        self.router = Some(RouterConfig::from_args(argv)?);
        Ok(self)
    }
}
