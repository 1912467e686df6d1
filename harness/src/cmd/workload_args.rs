//! The workload's flags (`sweep trace dry-run`): the AgentX replay settings, InferenceX's defaults.

use crate::workload::{PrimerOutput, WorkloadConfig};

/// Command-line flags for the workload (flatten into a run command).
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// Profiling duration, seconds (AgentX: 3600; fast mode 1200).
    #[arg(long, default_value_t = 3600.0)]
    pub benchmark_duration: f64,
    /// Grace for requests in flight at the deadline, seconds.
    #[arg(long, default_value_t = 30.0)]
    pub benchmark_grace_period: f64,
    /// Lower bound of the t* window as a fraction of the trace span.
    #[arg(long, default_value_t = 0.25)]
    pub trajectory_start_min_ratio: f64,
    /// Upper bound of the t* window as a fraction of the trace span.
    #[arg(long, default_value_t = 0.75)]
    pub trajectory_start_max_ratio: f64,
    /// One-token warmup requests per lane after its primers, played on through the live trees
    /// with no delays (fast mode: 1).
    #[arg(long, default_value_t = 10)]
    pub warmup_requests_per_lane: u32,
    /// Maximum wait for outstanding warmup requests, seconds.
    #[arg(long, default_value_t = 1800.0)]
    pub warmup_grace_period: f64,
    /// Output length of primer requests.
    #[arg(long, value_enum, default_value_t = PrimerOutput::One)]
    pub primer_output: PrimerOutput,
    /// Start every lane at turn 0 with no primers or warmup requests.
    #[arg(long)]
    pub no_warmup: bool,
    /// Global idle cap, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub system_idle_gap_cap_seconds: f64,
    /// Per-tree idle cap, seconds.
    #[arg(long, default_value_t = 300.0)]
    pub trace_idle_gap_cap_seconds: f64,
    /// Live abort when failed/total profiling records exceeds this.
    #[arg(long, default_value_t = 0.10)]
    pub failed_request_threshold: f64,
}

fn s2ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9).round() as u64
}

impl WorkloadArgs {
    pub fn config(&self, concurrency: u32, seed: u64, run_id: &str) -> WorkloadConfig {
        WorkloadConfig {
            concurrency,
            seed,
            run_id: run_id.to_string(),
            duration_ns: s2ns(self.benchmark_duration),
            grace_ns: s2ns(self.benchmark_grace_period),
            start_min_ratio: self.trajectory_start_min_ratio,
            start_max_ratio: self.trajectory_start_max_ratio,
            warmup: !self.no_warmup,
            warmup_requests_per_lane: self.warmup_requests_per_lane,
            warmup_grace_ns: s2ns(self.warmup_grace_period),
            primer_output: self.primer_output,
            system_idle_cap_ns: s2ns(self.system_idle_gap_cap_seconds),
            trace_idle_cap_ns: s2ns(self.trace_idle_gap_cap_seconds),
            failed_request_threshold: self.failed_request_threshold,
        }
    }
}
