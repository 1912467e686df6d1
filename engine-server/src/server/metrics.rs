//! The core `sglang:` Prometheus set (spec §4.1) with SGLang's names, types, labels
//! and histogram buckets.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::driver::CoreStats;

type Labels = Vec<(String, String)>;
type G = Family<Labels, Gauge<f64, AtomicU64>>;
type C = Family<Labels, Counter<f64, AtomicU64>>;
type H = Family<Labels, Histogram, fn() -> Histogram>;

pub const TTFT_BUCKETS: &[f64] = &[0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0];
pub const ITL_BUCKETS: &[f64] = &[
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0,
    4.0, 6.0, 8.0,
];
pub const E2E_BUCKETS: &[f64] =
    &[0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0, 600.0, 1200.0, 1800.0, 2400.0];
pub const QUEUE_BUCKETS: &[f64] = &[
    0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
    1000.0, 2000.0, 3000.0,
];
pub const TOKEN_BUCKETS: &[f64] =
    &[100.0, 300.0, 500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0, 32000.0, 64000.0, 128000.0, 256000.0, 512000.0, 1048576.0];

fn ttft() -> Histogram {
    Histogram::new(TTFT_BUCKETS.iter().copied())
}
fn itl() -> Histogram {
    Histogram::new(ITL_BUCKETS.iter().copied())
}
fn e2e() -> Histogram {
    Histogram::new(E2E_BUCKETS.iter().copied())
}
fn queue() -> Histogram {
    Histogram::new(QUEUE_BUCKETS.iter().copied())
}
fn tokens() -> Histogram {
    Histogram::new(TOKEN_BUCKETS.iter().copied())
}

/// What one finished request reports.
#[derive(Clone, Debug, Default)]
pub struct FinishedRequest {
    pub streaming: bool,
    /// Ended before the engine finished it (client gone, drain): SGLang's tokenizer manager
    /// counts it in `num_aborted_requests_total` and, when the scheduler's abort output comes
    /// back, as a finished request like any other (tokens so far, latency until the abort). Its
    /// finish reason `abort` is no metric label in SGLang, so none is added here.
    pub aborted: bool,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub e2e: f64,
    /// `None` when the request left before the engine reported it (aborted while queued or
    /// between outputs): SGLang observes queue time in the scheduler, not for such requests.
    pub queue_time: Option<f64>,
}

/// The registry and the handles the server writes.
pub struct Metrics {
    registry: Registry,
    sched: Labels,
    front: Labels,
    gauges: Vec<(&'static str, G)>,
    prompt_tokens: C,
    generation_tokens: C,
    cached_tokens: C,
    num_requests: C,
    num_aborted: C,
    num_so: C,
    /// Scheduler totals exported as counters (0.5.23 names), with the core's running total.
    totals: Vec<(&'static str, C)>,
    ttft: H,
    itl: H,
    e2e: H,
    queue: H,
    prompt_hist: H,
    gen_hist: H,
}

const GAUGES: &[(&str, &str)] = &[
    ("num_running_reqs", "The number of running requests"),
    ("num_queue_reqs", "The number of requests in the waiting queue"),
    ("num_used_tokens", "The number of used tokens"),
    ("token_usage", "The token usage"),
    ("gen_throughput", "The generation throughput (token/s)"),
    ("cache_hit_rate", "The prefix cache hit rate"),
    ("spec_accept_length", "The average acceptance length of speculative decoding"),
    ("spec_accept_rate", "The acceptance rate of speculative decoding"),
    ("num_retracted_reqs", "The number of retracted requests"),
    ("num_paused_reqs", "The number of paused requests by async weight sync"),
    ("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue"),
    ("utilization", "The utilization"),
    ("max_running_requests_under_SLO", "The maximum number of running requests under SLO"),
    ("is_cuda_graph", "Whether the batch is using CUDA graph"),
    ("max_total_num_tokens", "Maximum total number of tokens in the KV pool"),
    ("context_len", "The context length"),
];

const TOTALS: &[(&str, &str)] = &[
    ("evicted_tokens", "Number of tokens evicted from the radix cache"),
    ("num_retracted_requests", "Number of retracted requests"),
    ("num_retracted_input_tokens", "Number of input tokens of retracted requests"),
    ("num_retracted_output_tokens", "Number of output tokens of retracted requests"),
];

impl Metrics {
    pub fn new(model_name: &str) -> Metrics {
        let mut registry = Registry::default();
        let sched: Labels =
            [("engine_type", "unified"), ("model_name", model_name), ("moe_ep_rank", "0"), ("pp_rank", "0"), ("tp_rank", "0")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let front: Labels = vec![("model_name".into(), model_name.into()), ("engine_type".into(), "unified".into())];
        let mut gauges = Vec::new();
        for (name, help) in GAUGES {
            let g = G::default();
            registry.register(format!("sglang:{name}"), *help, g.clone());
            gauges.push((*name, g));
        }
        let mut counter = |name: &str, help: &str| {
            let c = C::default();
            registry.register(format!("sglang:{name}"), help, c.clone());
            c
        };
        let prompt_tokens = counter("prompt_tokens", "Number of prefill tokens processed.");
        let generation_tokens = counter("generation_tokens", "Number of generation tokens processed.");
        let cached_tokens = counter("cached_tokens", "Number of cached prompt tokens.");
        let num_requests = counter("num_requests", "Number of requests processed.");
        let num_aborted = counter("num_aborted_requests", "Number of requests aborted.");
        let num_so = counter("num_so_requests", "Number of structured output requests processed.");
        let totals = TOTALS.iter().map(|(name, help)| (*name, counter(name, help))).collect();
        let mut hist = |name: &str, help: &str, f: fn() -> Histogram| {
            let h = H::new_with_constructor(f);
            registry.register(format!("sglang:{name}"), help, h.clone());
            h
        };
        let ttft = hist("time_to_first_token_seconds", "Histogram of time to first token in seconds", ttft);
        let itl = hist("inter_token_latency_seconds", "Histogram of inter-token latency in seconds", itl);
        let e2e = hist("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", e2e);
        let queue = hist("queue_time_seconds", "Histogram of queueing time in seconds", queue);
        let prompt_hist = hist("prompt_tokens_histogram", "Histogram of prompt token length", tokens);
        let gen_hist = hist("generation_tokens_histogram", "Histogram of generation token length", tokens);
        Metrics {
            registry,
            sched,
            front,
            gauges,
            prompt_tokens,
            generation_tokens,
            cached_tokens,
            num_requests,
            num_aborted,
            num_so,
            totals,
            ttft,
            itl,
            e2e,
            queue,
            prompt_hist,
            gen_hist,
        }
    }

    fn with(&self, extra: &[(&str, &str)]) -> Labels {
        let mut l = self.front.clone();
        l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        l
    }

    fn streaming(&self, s: bool) -> Labels {
        self.with(&[("is_streaming", if s { "true" } else { "false" })])
    }

    pub fn observe_ttft(&self, secs: f64) {
        self.ttft.get_or_create(&self.front).observe(secs);
    }

    /// One output chunk of `n` tokens after `interval` seconds: observed once per
    /// token at `interval / n`, as SGLang does.
    pub fn observe_chunk(&self, interval: f64, n: u32) {
        let h = self.itl.get_or_create(&self.front);
        for _ in 0..n {
            h.observe(interval / n.max(1) as f64);
        }
    }

    pub fn finish(&self, r: &FinishedRequest) {
        let sl = self.streaming(r.streaming);
        self.prompt_tokens.get_or_create(&sl).inc_by(r.prompt_tokens as f64);
        self.generation_tokens.get_or_create(&sl).inc_by(r.completion_tokens as f64);
        self.cached_tokens.get_or_create(&self.with(&[("cache_source", "device")])).inc_by(r.cached_tokens as f64);
        self.num_requests.get_or_create(&sl).inc();
        self.e2e.get_or_create(&self.front).observe(r.e2e);
        if let Some(q) = r.queue_time {
            self.queue.get_or_create(&self.front).observe(q);
        }
        self.prompt_hist.get_or_create(&self.front).observe(r.prompt_tokens as f64);
        self.gen_hist.get_or_create(&self.front).observe(r.completion_tokens as f64);
        // Last: once a scrape shows the abort, every figure of the request is in (a scrape is
        // not a snapshot, so the next one is).
        if r.aborted {
            self.num_aborted.get_or_create(&self.front).inc();
        }
    }

    /// Copies the scheduler's gauges.
    pub fn set_core(&self, s: &CoreStats) {
        for (name, g) in &self.gauges {
            let v = match *name {
                "num_running_reqs" => s.num_running_reqs as f64,
                "num_queue_reqs" => s.num_queue_reqs as f64,
                "num_used_tokens" => s.num_used_tokens as f64,
                "token_usage" => s.token_usage,
                "gen_throughput" => s.gen_throughput,
                "cache_hit_rate" => s.cache_hit_rate,
                "spec_accept_length" => s.spec_accept_length,
                "spec_accept_rate" => s.spec_accept_rate,
                "num_retracted_reqs" => s.num_retracted_reqs as f64,
                "is_cuda_graph" => s.is_cuda_graph as u8 as f64,
                "max_total_num_tokens" => s.max_total_num_tokens as f64,
                "context_len" => s.context_length as f64,
                // Paused / grammar queues / SLO caps do not exist here; utilization
                // reports 0 as SGLang does when the SLO cap is unset.
                _ => 0.0,
            };
            g.get_or_create(&self.sched).set(v);
        }
        for (name, c) in &self.totals {
            let v = match *name {
                "evicted_tokens" => s.evicted_tokens_total,
                "num_retracted_requests" => s.num_retracted_requests_total,
                "num_retracted_input_tokens" => s.num_retracted_input_tokens_total,
                _ => s.num_retracted_output_tokens_total,
            } as f64;
            // The core keeps totals; a counter only moves forward by the difference.
            let c = c.get_or_create(&self.sched);
            let d = v - c.get();
            if d > 0.0 {
                c.inc_by(d);
            }
        }
    }

    /// Touches the counters so they are exported before the first request.
    pub fn init(&self, s: &CoreStats) {
        self.set_core(s);
        for streaming in [false, true] {
            let sl = self.streaming(streaming);
            let _ = self.prompt_tokens.get_or_create(&sl);
            let _ = self.generation_tokens.get_or_create(&sl);
            let _ = self.num_requests.get_or_create(&sl);
        }
        let _ = self.cached_tokens.get_or_create(&self.with(&[("cache_source", "device")]));
        let _ = self.num_aborted.get_or_create(&self.front);
        let _ = self.num_so.get_or_create(&self.front);
        for h in [&self.ttft, &self.itl, &self.e2e, &self.queue, &self.prompt_hist, &self.gen_hist] {
            let _ = h.get_or_create(&self.front);
        }
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        encode(&mut s, &self.registry).expect("metrics encode into a String");
        s
    }
}
