//! Statistics: the snapshot (`stats`), the gauges as SGLang samples them, the
//! `/server_info` description, and the consistency checks tests run.

use super::{Engine, KvStats, Phase};
use crate::args::{FlagStatus, RouterConfig};
use crate::cost::StepCost;
use crate::limits::Limits;
use crate::profiles::CostParams;
use crate::time::Time;
use serde::Serialize;

/// Per-rank figures in a stats snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RankStats {
    pub running: u32,
    pub queued: u32,
    pub chunked: bool,
    pub capacity_tokens: u64,
    pub used_tokens: u64,
    pub evictable_tokens: u64,
    pub token_usage: f64,
    pub new_token_ratio: f64,
    pub cached_nodes: usize,
}

/// Gauges as SGLang samples them: refreshed on every prefill batch and every
/// `--decode-log-interval` decode iterations.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SampledGauges {
    pub num_running_reqs: u32,
    pub num_queue_reqs: u32,
    pub num_used_tokens: u64,
    pub token_usage: f64,
    pub gen_throughput: f64,
    pub cache_hit_rate: f64,
    pub spec_accept_length: f64,
    pub spec_accept_rate: f64,
    pub num_retracted_reqs: u32,
    pub is_cuda_graph: bool,
    pub new_token_ratio: f64,
}

/// Engine statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EngineStats {
    pub now: Time,
    pub ranks: Vec<RankStats>,
    pub num_running: u32,
    pub num_queued: u32,
    /// Max over ranks of (used − evictable) / capacity.
    pub token_usage: f64,
    /// Cached / (cached + computed) prompt tokens of the latest prefill batch.
    pub last_cache_hit_rate: f64,
    /// Over the whole run (first admissions only).
    pub cache_hit_rate: f64,
    /// Mean accept length (incl. bonus) over the last `decode_log_interval` verify steps.
    pub spec_accept_length: f64,
    pub avg_spec_accept_length: f64,
    pub spec_verify_calls_total: u64,
    pub prompt_tokens_total: u64,
    pub cached_tokens_total: u64,
    pub generation_tokens_total: u64,
    pub num_requests_total: u64,
    pub num_aborted_requests_total: u64,
    pub num_retracted_requests_total: u64,
    pub num_retracted_input_tokens_total: u64,
    pub num_retracted_output_tokens_total: u64,
    pub prefill_batches: u64,
    pub decode_iterations: u64,
    pub cuda_graph_passes: u64,
    pub eager_passes: u64,
    pub busy_time: Time,
    /// Energy one GPU drew above idle over every step so far, joules (the profile's power model).
    pub gpu_active_energy_j: f64,
    pub evicted_tokens_total: u64,
    /// Pool size, peaks, eviction and re-prefill figures.
    pub kv: KvStats,
    pub sampled: SampledGauges,
    pub last_step: Option<StepCost>,
}

impl Engine {
    pub(super) fn sample_gauges(&mut self) {
        let s = self.stats_snapshot_inner();
        let (acc_sum, acc_n) = self.accept_window.iter().fold((0u64, 0u64), |(a, n), &(x, _)| (a + x as u64, n + 1));
        let accept = if acc_n > 0 { acc_sum as f64 / acc_n as f64 } else { 0.0 };
        let drafts = self.limits.speculative.as_ref().map_or(0, |sp| sp.accept.max_accept - 1);
        let (gen_sum, dur) = self.gen_window.iter().fold((0u64, Time::ZERO), |(g, d), &(x, t)| (g + x, d + t));
        self.stats.sampled = SampledGauges {
            num_running_reqs: s.num_running,
            num_queue_reqs: s.num_queued,
            num_used_tokens: s.ranks.iter().map(|r| r.used_tokens).sum(),
            token_usage: (s.token_usage * 100.0).round() / 100.0,
            gen_throughput: if dur > Time::ZERO { gen_sum as f64 / dur.as_secs_f64() } else { 0.0 },
            cache_hit_rate: self.stats.last_cache_hit_rate,
            spec_accept_length: accept,
            spec_accept_rate: if drafts > 0 && acc_n > 0 { (accept - 1.0) / drafts as f64 } else { 0.0 },
            num_retracted_reqs: self.ranks.iter().map(|r| r.retracted_last).sum(),
            is_cuda_graph: self.last_graph,
            new_token_ratio: self.ranks.first().map_or(0.0, |r| r.new_token_ratio),
        };
    }

    /// The gauges SGLang rewrites while its scheduler is idle (`check_memory` in the idle
    /// loop): running and queued requests, KV use, and a generation throughput of 0. Sampling
    /// otherwise happens only on batches, so without this the gauges keep their last busy values.
    pub fn sample_idle_gauges(&mut self) {
        let s = self.stats_snapshot_inner();
        let g = &mut self.stats.sampled;
        g.num_running_reqs = s.num_running;
        g.num_queue_reqs = s.num_queued;
        g.num_used_tokens = s.ranks.iter().map(|r| r.used_tokens).sum();
        g.token_usage = (s.token_usage * 100.0).round() / 100.0;
        g.gen_throughput = 0.0;
    }

    fn stats_snapshot_inner(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.now = self.now;
        s.ranks = (0..self.ranks.len())
            .map(|i| {
                let r = &self.ranks[i];
                let cap = self.limits.max_total_num_tokens;
                let used = r.tree.total_units() * self.unit_tokens + r.own_used;
                let evictable = self.evictable_tokens(i);
                RankStats {
                    running: r.running.len() as u32,
                    queued: r.waiting.len() as u32 + u32::from(r.chunked.is_some()),
                    chunked: r.chunked.is_some(),
                    capacity_tokens: cap,
                    used_tokens: used - evictable,
                    evictable_tokens: evictable,
                    token_usage: (used - evictable) as f64 / cap as f64,
                    new_token_ratio: r.new_token_ratio,
                    cached_nodes: r.tree.node_count(),
                }
            })
            .collect();
        s.kv = self.kv_stats();
        s.num_running = s.ranks.iter().map(|r| r.running).sum();
        s.num_queued = s.ranks.iter().map(|r| r.queued).sum();
        s.token_usage = s.ranks.iter().map(|r| r.token_usage).fold(0.0, f64::max);
        s.cache_hit_rate = if s.prompt_tokens_total > 0 { s.cached_tokens_total as f64 / s.prompt_tokens_total as f64 } else { 0.0 };
        let (a, n) = self.accept_window.iter().fold((0u64, 0u64), |(a, n), &(x, _)| (a + x as u64, n + 1));
        s.spec_accept_length = if n > 0 { a as f64 / n as f64 } else { 0.0 };
        s.avg_spec_accept_length = if s.spec_verify_calls_total > 0 {
            let tot: u64 = self.total_accepted();
            tot as f64 / s.spec_verify_calls_total as f64
        } else {
            0.0
        };
        s
    }

    fn total_accepted(&self) -> u64 {
        self.accept_total
    }

    /// A consistent snapshot of queues, KV use, cache and speculation figures.
    pub fn stats(&self) -> EngineStats {
        self.stats_snapshot_inner()
    }

    /// Internal consistency checks (tests): KV within capacity, caps respected.
    pub fn check_invariants(&self) {
        for (i, r) in self.ranks.iter().enumerate() {
            r.tree.check_invariants();
            let used = r.tree.total_units() * self.unit_tokens + r.own_used;
            assert!(used <= self.limits.max_total_num_tokens, "rank {i}: KV {used} > capacity {}", self.limits.max_total_num_tokens);
            assert!(
                r.running.len() <= self.limits.max_running_requests_per_dp as usize,
                "rank {i}: {} running > cap {}",
                r.running.len(),
                self.limits.max_running_requests_per_dp
            );
            let own: u64 = self.reqs.iter().filter(|q| q.phase != Phase::Done && q.rank as usize == i).map(|q| q.own).sum();
            assert_eq!(own, r.own_used, "rank {i}: own allocation drift");
        }
    }
}

/// The engine as `/server_info` and reports describe it.
#[derive(Clone, Debug, Serialize)]
pub struct EngineInfo {
    /// Always `predicted`: timings come from the cost model.
    pub result_kind: &'static str,
    pub model_profile: String,
    pub hardware_profile: String,
    pub model_path: Option<String>,
    pub served_model_name: String,
    pub limits: Limits,
    pub cost_params: CostParams,
    pub cost_calibrated: bool,
    pub unconfirmed_model_facts: Vec<String>,
    pub tp_size: u32,
    pub attn_dp_size: u32,
    pub ep_size: u32,
    pub schedule_policy: &'static str,
    pub modelled_flags: Vec<String>,
    pub front_end_flags: Vec<String>,
    pub accepted_not_modelled_flags: Vec<String>,
    pub unknown_flags: Vec<String>,
    pub router: Option<RouterConfig>,
    pub warnings: Vec<String>,
    pub launch_command: String,
}

impl Engine {
    /// Static description for `/server_info`, reports and result labels.
    pub fn info(&self) -> EngineInfo {
        let split = self.cfg.flag_split();
        let get = |s: FlagStatus| split.get(&s).cloned().unwrap_or_default();
        EngineInfo {
            result_kind: "predicted",
            model_profile: self.model.name.clone(),
            hardware_profile: self.gpu.name.clone(),
            model_path: self.cfg.model_path.clone(),
            served_model_name: self
                .cfg
                .served_model_name
                .clone()
                .or_else(|| self.cfg.model_path.clone())
                .unwrap_or_else(|| self.model.name.clone()),
            limits: self.limits.clone(),
            cost_params: self.gpu.cost.clone(),
            cost_calibrated: self.gpu.cost.calibrated,
            unconfirmed_model_facts: self.model.unconfirmed.clone(),
            tp_size: self.cfg.tp_size,
            attn_dp_size: self.cfg.attn_dp_size,
            ep_size: self.cfg.ep_size,
            schedule_policy: self.cfg.schedule_policy.as_str(),
            modelled_flags: get(FlagStatus::Modelled),
            front_end_flags: get(FlagStatus::FrontEnd),
            accepted_not_modelled_flags: get(FlagStatus::AcceptedNotModelled),
            unknown_flags: get(FlagStatus::Unknown),
            router: self.cfg.router.clone(),
            warnings: self.cfg.warnings.clone(),
            launch_command: self.cfg.launch_command.clone(),
        }
    }
}
