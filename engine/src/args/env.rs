//! `SGLANG_*` environment variables: what the engine honours and how each is read.

use super::config::{AccMethod, EngineConfig};
use super::defs::{ENVS, FlagRecord, FlagStatus::Unknown};
use super::parse::{ArgsError, parse_num};
use serde::Serialize;
use std::collections::BTreeMap;

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
    /// `SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_{DEFAULT,DECODE,TARGET_VERIFY}`: what an extend,
    /// a decode and a verify step add to the recv-interval counter.
    pub recv_skipper_weight_default: u32,
    pub recv_skipper_weight_decode: u32,
    pub recv_skipper_weight_target_verify: u32,
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
            recv_skipper_weight_default: 1000,
            recv_skipper_weight_decode: 1,
            recv_skipper_weight_target_verify: 1,
            raw: BTreeMap::new(),
        }
    }
}

fn parse_bool_env(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

impl EngineConfig {
    pub(super) fn apply_env(&mut self, env: &BTreeMap<String, String>) -> Result<(), ArgsError> {
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
                "SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DEFAULT" => e.recv_skipper_weight_default = parse_num(k, v)?,
                "SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE" => e.recv_skipper_weight_decode = parse_num(k, v)?,
                "SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_TARGET_VERIFY" => e.recv_skipper_weight_target_verify = parse_num(k, v)?,
                _ => {}
            }
            e.raw.insert(k.clone(), v.clone());
            self.env_records.push(FlagRecord { given: k.clone(), canonical: k.clone(), value: Some(v.clone()), status });
        }
        Ok(())
    }
}
