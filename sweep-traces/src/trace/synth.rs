//! Synthetic AgentX traces, calibrated on 200 real Claude Code sessions (kv-cache-tester corpus).
//!
//! Each trace is generated from a seeded RNG and its index alone, so a set can be streamed one trace
//! at a time. The model (documented with the measured fit in `docs/traces.md`):
//! - per-trace attributes — main-agent turn count, first input length, context limit — are drawn by
//!   stratified sampling over the whole set (each of N traces gets its own 1/N slice of the
//!   distribution, then slices are shuffled), so a set of N traces reproduces the corpus quantiles
//!   closely for any seed instead of only on average;
//! - per-turn values — input growth, output length, think time — come from the corpus's empirical
//!   quantile functions (log-linear between the stored quantiles);
//! - context grows by the growth draw (at least the previous output), sheds its last block now and
//!   then (edit of the tail), and compacts back to the system prefix plus a summary when it passes
//!   the trace's context limit — which gives the corpus's prefix reuse (≈ 97 %) and its resets;
//! - API time follows output length (`≈ 2.2 s + out/60 tok/s`, log-normal noise);
//! - a few traces carry subagent groups (own system prefix shared by the trace's subagents, short
//!   think times, join on the next main turn or run in the background).

use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use sha2::{Digest, Sha256};

use super::{Entry, InnerRequest, Request, Subagent, Trace};

/// Percentile points of the quantile tables below.
const P: [f64; 16] = [0.0, 1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 98.0, 99.0, 100.0];
/// Main-agent turns per trace.
const TURNS: [f64; 16] = [3.0, 3.99, 4.0, 5.0, 10.0, 22.0, 36.0, 51.0, 67.4, 84.0, 119.2, 173.1, 229.25, 306.48, 346.93, 514.0];
/// First request's input length (tokens).
const FIRST_ISL: [f64; 16] = [
    8979.0, 9920.0, 12928.0, 15350.0, 17980.0, 18947.0, 20038.0, 21534.0, 54476.0, 89377.0, 129583.0, 246233.0, 301403.0, 431099.0,
    627179.0, 829382.0,
];
/// Output length per request (tokens).
const OSL: [f64; 16] = [1.0, 65.0, 92.0, 108.0, 129.0, 150.0, 176.0, 214.0, 270.0, 354.0, 499.0, 852.0, 1478.5, 2495.5, 3590.35, 13736.0];
/// End-to-start think time between turns (s).
const THINK: [f64; 16] = [0.0, 3.0, 4.0, 4.0, 5.0, 6.0, 8.0, 10.0, 14.0, 23.0, 51.0, 155.0, 364.0, 1051.44, 2078.86, 20000.0];
/// Growth of the input between consecutive main turns when it grows (tokens).
const GROWTH: [f64; 16] =
    [14.0, 106.0, 152.0, 190.0, 275.0, 367.0, 475.0, 621.0, 839.0, 1226.5, 1848.0, 3426.5, 6136.0, 10068.6, 14362.45, 60000.0];
/// Tools + system prompt tokens.
const SYSTEM: [f64; 16] = [
    8437.0, 8632.0, 10620.0, 11988.0, 12573.0, 13169.0, 14731.0, 14938.0, 15201.0, 15385.0, 15494.0, 15774.0, 16685.0, 17498.0, 21131.0,
    21881.0,
];
/// Subagent inner output length (tokens).
const INNER_OSL: [f64; 16] =
    [20.0, 60.0, 100.0, 122.0, 150.0, 175.0, 200.0, 228.0, 250.0, 280.0, 320.0, 392.0, 600.0, 2000.0, 4767.0, 8000.0];
/// Subagent inner think time (s).
const INNER_THINK: [f64; 16] = [0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.5, 4.0, 5.0, 32.6, 50.0, 70.0, 75.6, 120.0];
/// Subagent groups per trace, among traces that have any.
const GROUPS: [u32; 9] = [1, 1, 2, 3, 3, 4, 4, 6, 12];
/// Inner requests per subagent group.
const INNER: [u32; 36] =
    [14, 19, 2, 11, 10, 11, 11, 12, 8, 7, 8, 12, 15, 5, 15, 8, 11, 12, 7, 4, 5, 11, 6, 10, 12, 6, 8, 24, 13, 4, 12, 17, 11, 14, 22, 18];
/// Main models, weighted by the corpus's request counts.
const MODELS: [(&str, u32); 5] = [
    ("claude-opus-4-5-20251101", 8159),
    ("claude-opus-4-6", 2905),
    ("claude-sonnet-4-5-20250929", 2415),
    ("claude-sonnet-4-20250514", 994),
    ("claude-opus-4-1-20250805", 87),
];
const SUBAGENT_MODEL: &str = "claude-haiku-4-5-20251001";

/// Generator parameters (defaults: calibrated on the real corpus).
#[derive(Debug, Clone)]
pub struct SynthParams {
    pub traces: usize,
    pub seed: u64,
    /// Fraction of traces whose context limit is large (1M-context sessions).
    pub big_context_fraction: f64,
    /// Context size after a compaction (tokens), uniform in this range.
    pub compact_to: (f64, f64),
    /// Context limit of ordinary traces (tokens), uniform in this range.
    pub context_limit: (f64, f64),
    /// Probability that a turn rewrites the last block of the previous context.
    pub tail_edit_probability: f64,
    /// Fraction of traces with subagent groups.
    pub subagent_trace_fraction: f64,
    /// Probability that a subagent group runs in the background (nothing joins it).
    pub background_probability: f64,
    /// Within-trace correlation of think times (Gaussian copula; the marginal is unchanged): real
    /// sessions have a pace — some are interactive, some wait minutes between turns.
    pub think_correlation: f64,
}

impl Default for SynthParams {
    fn default() -> Self {
        Self {
            traces: 200,
            seed: 42,
            big_context_fraction: 0.1,
            compact_to: (50_000.0, 80_000.0),
            context_limit: (140_000.0, 175_000.0),
            tail_edit_probability: 0.035,
            subagent_trace_fraction: 0.045,
            background_probability: 0.06,
            think_correlation: 0.35,
        }
    }
}

/// Inverse CDF from a quantile table: log-linear between points (linear where a point is ≤ 0).
fn quantile(table: &[f64; 16], u: f64) -> f64 {
    let x = (u.clamp(0.0, 1.0)) * 100.0;
    for i in 0..P.len() - 1 {
        if x <= P[i + 1] {
            let f = (x - P[i]) / (P[i + 1] - P[i]);
            let (a, b) = (table[i], table[i + 1]);
            return if a > 0.0 && b > 0.0 { (a.ln() + f * (b.ln() - a.ln())).exp() } else { a + f * (b - a) };
        }
    }
    table[15]
}

/// Standard normal CDF (Abramowitz–Stegun 7.1.26; |error| < 1.5e-7).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 { 0.5 * (1.0 + erf) } else { 0.5 * (1.0 - erf) }
}

/// Per-trace attributes drawn by stratified sampling.
#[derive(Debug, Clone, Copy)]
struct Strata {
    turns: f64,
    first: f64,
    limit: f64,
    subagents: bool,
}

/// A deterministic synthetic trace set: `trace(i)` for `i < traces`.
#[derive(Debug, Clone)]
pub struct Generator {
    params: SynthParams,
    strata: Vec<Strata>,
}

fn stratified(n: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|i| (i as f64 + rng.random::<f64>()) / n as f64).collect();
    v.shuffle(rng);
    v
}

fn sub_seed(seed: u64, what: &str, index: u64) -> u64 {
    let mut h = Sha256::new();
    h.update(b"sweep-synth-v1");
    h.update(seed.to_le_bytes());
    h.update(what.as_bytes());
    h.update(index.to_le_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

impl Generator {
    pub fn new(params: SynthParams) -> Self {
        let n = params.traces;
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(params.seed, "strata", 0));
        let turns = stratified(n, &mut rng);
        let first = stratified(n, &mut rng);
        let limit = stratified(n, &mut rng);
        let n_sub = (params.subagent_trace_fraction * n as f64).round() as usize;
        let mut sub: Vec<bool> = (0..n).map(|i| i < n_sub).collect();
        sub.shuffle(&mut rng);
        let strata = (0..n)
            .map(|i| {
                let first = quantile(&FIRST_ISL, first[i]);
                let big = first > 200_000.0 || limit[i] > 1.0 - params.big_context_fraction;
                let limit = if big {
                    // Large-context sessions: 220K–900K, most near the low end.
                    let u = (limit[i] * 7919.0).fract();
                    (220_000.0 * (-(1.0 - u).ln() * 0.35).exp()).min(900_000.0)
                } else {
                    let (lo, hi) = params.context_limit;
                    lo + (hi - lo) * ((limit[i] * 104_729.0).fract())
                };
                Strata { turns: quantile(&TURNS, turns[i]).round().max(1.0), first, limit: limit.max(first * 1.1), subagents: sub[i] }
            })
            .collect();
        Self { params, strata }
    }

    pub fn len(&self) -> usize {
        self.strata.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strata.is_empty()
    }

    /// All traces, generated in order.
    pub fn traces(&self) -> impl Iterator<Item = Trace> + '_ {
        (0..self.len()).map(|i| self.trace(i))
    }

    /// Trace `index` (deterministic from the seed and the index).
    pub fn trace(&self, index: usize) -> Trace {
        let p = &self.params;
        let s = self.strata[index];
        let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(p.seed, "trace", index as u64));
        let model = pick_model(&mut rng);
        let system = quantile(&SYSTEM, rng.random());
        let tool_tokens = (system * 0.82).round() as u64;
        let system_tokens = system.round() as u64 - tool_tokens;
        let sys_blocks = (system / 64.0).floor() as usize;
        let n = s.turns as usize;
        let pace: f64 = rand_distr::StandardNormal.sample(&mut rng);
        let rho = p.think_correlation.clamp(0.0, 0.999);
        let anchors = subagent_anchors(&mut rng, s.subagents, n);
        let mut a = MainAgent::new(s.first.max(system + 256.0).round() as u64);
        for k in 0..n {
            let think = if k == 0 { 0.0 } else { quantile(&THINK, think_u(&mut rng, pace, rho)).round() };
            if k > 0 {
                a.t = a.prev_end + think;
                self.grow(&mut a, &mut rng, s.limit, sys_blocks);
            }
            a.request(&mut rng, model, think, k + 1 == n);
            let here = anchors.iter().filter(|&&x| x == k).count();
            if here > 0 {
                self.spawn_groups(&mut a, &mut rng, here);
            }
        }
        let mut models = vec![model.to_string()];
        if a.has_sub {
            models.push(SUBAGENT_MODEL.to_string());
        }
        Trace {
            id: format!("synth-{:016x}-{index:04}", p.seed),
            models,
            block_size: 64,
            hash_id_scope: "local".into(),
            tool_tokens,
            system_tokens,
            requests: a.entries,
            totals: None,
        }
    }

    /// The context before a main turn after the first: grown by the growth draw (at least the
    /// previous output); compacted back to the system prefix past the trace's limit, else its
    /// last block rewritten now and then.
    fn grow(&self, a: &mut MainAgent, rng: &mut ChaCha8Rng, limit: f64, sys_blocks: usize) {
        let p = &self.params;
        let g = quantile(&GROWTH, rng.random()).max(a.prev_out as f64 + 32.0);
        let mut next = a.input + g.round() as u64;
        if next as f64 > limit {
            let (lo, hi) = p.compact_to;
            next = rng.random_range(lo..hi).round() as u64;
            a.ids.truncate(sys_blocks.min(a.ids.len()));
        } else if rng.random::<f64>() < p.tail_edit_probability {
            a.ids.pop();
        }
        a.input = next;
        let want = (a.input / 64) as usize;
        a.ids.truncate(want);
        fresh_ids(&mut a.next_id, &mut a.ids, want);
    }

    /// `here` subagent groups anchored on the main turn just made run in parallel; the next main
    /// turn joins them unless every one of them runs in the background.
    fn spawn_groups(&self, a: &mut MainAgent, rng: &mut ChaCha8Rng, here: usize) {
        a.has_sub = true;
        if a.sa_prefix.is_empty() {
            let sa_sys = rng.random_range(8_300..9_400u64);
            fresh_ids(&mut a.next_id, &mut a.sa_prefix, (sa_sys / 64) as usize);
        }
        let mut join_at = a.prev_end;
        let mut background = true;
        for _ in 0..here {
            a.sa_counter += 1;
            let start = a.prev_end + quantile(&INNER_THINK, rng.random()).round();
            let (sa, end) = self.subagent(rng, a.sa_counter, start, &a.sa_prefix, &mut a.next_id);
            if rng.random::<f64>() >= self.params.background_probability {
                background = false;
                join_at = join_at.max(end);
            }
            a.entries.push(Entry::Subagent(sa));
        }
        if !background {
            a.prev_end = join_at;
        }
    }

    fn subagent(&self, rng: &mut ChaCha8Rng, counter: usize, start: f64, prefix: &[u64], next_id: &mut u64) -> (Subagent, f64) {
        let inner = INNER[rng.random_range(0..INNER.len())] as usize;
        let api_noise = LogNormal::new(0.0, 0.3).expect("valid");
        let growth = Exp::new(1.0 / 3_500.0).expect("valid");
        let mut ids: Vec<u64> = prefix.to_vec();
        let mut input = (prefix.len() as u64) * 64 + rng.random_range(300..10_000u64);
        let mut t = start;
        let mut reqs = Vec::with_capacity(inner);
        let mut total = 0u64;
        let mut end = start;
        let mut prev_out = 0u64;
        for j in 0..inner {
            let think = if j == 0 { 0.0 } else { quantile(&INNER_THINK, rng.random()).round() };
            if j > 0 {
                t = end + think;
                input += (prev_out + 32).max(Distribution::<f64>::sample(&growth, rng).round() as u64);
            }
            let want = (input / 64) as usize;
            while ids.len() < want {
                ids.push(*next_id);
                *next_id += 1;
            }
            let out = quantile(&INNER_OSL, rng.random()).round().max(1.0) as u64;
            let api = ((1.2 + out as f64 / 120.0) * api_noise.sample(rng) * 100.0).round() / 100.0;
            total += input + out;
            reqs.push(InnerRequest::NonStreaming(Request {
                t,
                model: SUBAGENT_MODEL.to_string(),
                input_tokens: input,
                output_tokens: out,
                hash_ids: ids.clone(),
                api_time: Some(api),
                think_time: Some(think),
                ttft: None,
                input_types: None,
                output_types: None,
                stop: Some(if j + 1 == inner { "end_turn" } else { "tool_use" }.to_string()),
            }));
            end = t + api;
            prev_out = out;
        }
        let sa = Subagent {
            t: start,
            agent_id: format!("agent_{counter:03}"),
            subagent_type: "Explore".into(),
            duration_ms: Some(((end - start) * 1000.0).round()),
            total_tokens: Some(total),
            tool_use_count: Some(inner as u64 - 1),
            status: Some("completed".into()),
            models: vec![SUBAGENT_MODEL.to_string()],
            requests: reqs,
            tool_tokens: (prefix.len() as u64 * 64 * 9) / 10,
            system_tokens: (prefix.len() as u64 * 64) / 10,
        };
        (sa, end)
    }
}

/// A main model, weighted by the corpus's request counts.
fn pick_model(rng: &mut ChaCha8Rng) -> &'static str {
    let total_w: u32 = MODELS.iter().map(|m| m.1).sum();
    let mut pick = rng.random_range(0..total_w);
    let mut model = MODELS[0].0;
    for (m, w) in MODELS {
        if pick < w {
            model = m;
            break;
        }
        pick -= w;
    }
    model
}

/// A think-time quantile: the trace's pace and a fresh normal draw, correlated by `rho`.
fn think_u(rng: &mut ChaCha8Rng, pace: f64, rho: f64) -> f64 {
    let e: f64 = rand_distr::StandardNormal.sample(rng);
    normal_cdf(rho * pace + (1.0 - rho * rho).sqrt() * e)
}

/// Main turn indices after which a subagent group spawns (skewed early); none unless the trace
/// has subagents and at least two turns.
fn subagent_anchors(rng: &mut ChaCha8Rng, subagents: bool, n: usize) -> Vec<usize> {
    let mut anchors: Vec<usize> = Vec::new();
    if subagents && n >= 2 {
        let groups = GROUPS[rng.random_range(0..GROUPS.len())] as usize;
        for _ in 0..groups {
            let u: f64 = rng.random();
            anchors.push(((u * u) * (n - 1) as f64) as usize);
        }
        anchors.sort_unstable();
    }
    anchors
}

/// Appends fresh block ids to `ids` until it holds `upto`.
fn fresh_ids(next_id: &mut u64, ids: &mut Vec<u64>, upto: usize) {
    while ids.len() < upto {
        ids.push(*next_id);
        *next_id += 1;
    }
}

/// One trace's main agent while it is generated: its context (input tokens and block ids), the
/// clock, the subagents' shared prefix and the entries so far.
struct MainAgent {
    next_id: u64,
    ids: Vec<u64>,
    input: u64,
    /// Start of the current turn, and the end the next turn's think time counts from.
    t: f64,
    prev_end: f64,
    prev_out: u64,
    sa_counter: usize,
    sa_prefix: Vec<u64>,
    has_sub: bool,
    entries: Vec<Entry>,
}

impl MainAgent {
    fn new(input: u64) -> MainAgent {
        let mut a = MainAgent {
            next_id: 1,
            ids: Vec::new(),
            input,
            t: 0.0,
            prev_end: 0.0,
            prev_out: 0,
            sa_counter: 0,
            sa_prefix: Vec::new(),
            has_sub: false,
            entries: Vec::new(),
        };
        fresh_ids(&mut a.next_id, &mut a.ids, (input / 64) as usize);
        a
    }

    /// The main turn at the current context: output and API time (`≈ 2.2 s + out/60 tok/s`,
    /// log-normal noise) drawn.
    fn request(&mut self, rng: &mut ChaCha8Rng, model: &str, think: f64, last: bool) {
        let api_noise = LogNormal::new(0.0, 0.3).expect("valid");
        let out = quantile(&OSL, rng.random()).round().max(1.0) as u64;
        let api = ((2.2 + out as f64 / 60.0) * api_noise.sample(rng) * 100.0).round() / 100.0;
        self.entries.push(Entry::NonStreaming(Request {
            t: self.t,
            model: model.to_string(),
            input_tokens: self.input,
            output_tokens: out,
            hash_ids: self.ids.clone(),
            api_time: Some(api),
            think_time: Some(think),
            ttft: None,
            input_types: None,
            output_types: None,
            stop: Some(if last { "end_turn" } else { "tool_use" }.to_string()),
        }));
        self.prev_out = out;
        self.prev_end = self.t + api;
    }
}

/// Generate the default synthetic set (`traces` traces from `seed`).
pub fn generate(traces: usize, seed: u64) -> Vec<Trace> {
    Generator::new(SynthParams { traces, seed, ..SynthParams::default() }).traces().collect()
}
