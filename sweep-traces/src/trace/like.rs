//! `sweep trace gen --like STATS`: a synthetic corpus with the statistics a stats file publishes.
//!
//! Two phases. The *plan* holds every request's scalars (input blocks, output, start, API time,
//! rewritten tail) and is calibrated on itself, cheaply, before anything is written; the writer
//! (`like_write.rs`) then turns each session into hash ids and JSON, one session at a time.
//! The model (docs/traces.md, "The published corpus, synthesized"):
//! - counts are exact: per-session turns, groups and inner requests are stratified draws from
//!   fitted distributions, then nudged to the published totals;
//! - input lengths are exact by construction: every request gets a rank in its population (main
//!   turns, subagent inner requests), the rank's quantile of the fitted distribution is its input,
//!   and ranks grow along each conversation, so contexts only grow (new tokens = growth plus a
//!   rewritten tail) while the population reproduces the fitted percentiles;
//! - the spread of per-turn growth and the rewritten tails are solved for the new-prefill
//!   p50 / mean / p99; the gap tail beyond p99 for the waiting-time fraction; where long gaps
//!   fall in a session for the time-averaged context.

use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use sha2::{Digest, Sha256};

use super::fit::{QuantileError, QuantileFn, fit, integer_total, stratified};
use super::published::PublishedStats;
use super::stats::percentile;

/// Why a corpus cannot be planned from a stats file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LikeError {
    #[error("a corpus needs at least one trace")]
    NoTraces,
    /// A distribution (`what`: its row of the stats file) that no fit reaches.
    #[error("{what}: {source}")]
    Fit {
        what: &'static str,
        #[source]
        source: QuantileError,
    },
}

impl LikeError {
    fn fit(what: &'static str) -> impl FnOnce(QuantileError) -> LikeError {
        move |source| LikeError::Fit { what, source }
    }
}

/// One planned request (times rounded to ms so the plan and the written file agree exactly).
#[derive(Debug, Clone, Copy, Default)]
pub struct PlannedRequest {
    pub t: f64,
    pub api: f64,
    pub blocks: u32,
    pub out: u32,
    /// Blocks cut from the end of the previous context of this conversation before growing.
    pub rewrite: u32,
}

#[derive(Debug, Clone, Default)]
pub struct PlannedGroup {
    pub inner: Vec<PlannedRequest>,
}

#[derive(Debug, Clone, Default)]
pub struct PlannedSession {
    pub main: Vec<PlannedRequest>,
    pub groups: Vec<PlannedGroup>,
    /// Leading blocks of the main context that rewrites never touch (tools + system prompt).
    pub sys_blocks: u32,
    /// Subagent system-prompt blocks shared by the session's groups (after main's first 3).
    pub sub_prefix_blocks: u32,
}

/// Solved model parameters (reported by `sweep trace gen --like`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Solved {
    /// σ of the log-normal step between a conversation's consecutive input ranks (mean 1).
    pub growth_sigma: f64,
    /// Probability that a request rewrites the tail of its conversation's previous context.
    pub rewrite_probability: f64,
    /// Median rewritten tail, blocks (log-normal, σ = `REWRITE_SIGMA`).
    pub rewrite_median_blocks: f64,
    /// σ of the inter-turn gap's log-normal tail above its last published knot.
    pub gap_tail_sigma: f64,
    /// Where long gaps fall: −1 early in a session, 0 anywhere, +1 late (large contexts).
    pub gap_position_bias: f64,
    /// Median of the per-session draw that bounds concurrent subagent groups.
    pub peak_median: f64,
}

/// Rewritten tails are tightly spread: the p99 of new prefill sits near their median, and the
/// rate sets the mean almost independently.
const REWRITE_SIGMA: f64 = 0.5;
/// Leading main-context blocks (the common system prefix) that subagent contexts start with.
pub(crate) const MAIN_SHARED: u32 = 3;

/// A calibrated plan of a whole corpus.
#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub sessions: Vec<PlannedSession>,
    pub solved: Solved,
    pub warnings: Vec<String>,
}

fn sub_seed(seed: u64, what: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(b"sweep-like-v1");
    h.update(seed.to_le_bytes());
    h.update(what.as_bytes());
    u64::from_le_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

fn rng(seed: u64, what: &str) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(sub_seed(seed, what))
}

pub(crate) fn round_ms(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Fixed random inputs of a population of conversations (so calibration moves parameters only).
pub(crate) struct Population {
    /// Conversation lengths.
    lens: Vec<u64>,
    /// Per request: a standard normal for the growth step, a uniform and a normal for rewrites.
    z_step: Vec<f64>,
    u_rw: Vec<f64>,
    z_rw: Vec<f64>,
    /// Per conversation: its level inside a rank slice.
    level: Vec<f64>,
}

impl Population {
    pub(crate) fn new(lens: Vec<u64>, rng: &mut ChaCha8Rng) -> Self {
        let n: usize = lens.iter().sum::<u64>() as usize;
        let z_step = (0..n).map(|_| StandardNormal.sample(rng)).collect();
        let u_rw = (0..n).map(|_| rng.random::<f64>()).collect();
        let z_rw = (0..n).map(|_| StandardNormal.sample(rng)).collect();
        let level = (0..lens.len()).map(|_| rng.random::<f64>()).collect();
        Self { lens, z_step, u_rw, z_rw, level }
    }

    /// Input blocks of every request (flat, conversation by conversation): request k of a
    /// conversation sits at "turn position" τ (steps of mean 1, spread `sigma`); its score is the
    /// share of the population's requests at earlier positions, plus the conversation's level in
    /// that position's slice; the global rank of the score picks the quantile of `dist`.
    pub(crate) fn blocks(&self, sigma: f64, dist: &QuantileFn) -> Vec<u32> {
        let total: usize = self.z_step.len();
        let max_len = self.lens.iter().copied().max().unwrap_or(0) as usize;
        // alive[j] = conversations with more than j requests; cum[j] = share before position j.
        let mut alive = vec![0f64; max_len + 2];
        for &l in &self.lens {
            for a in alive.iter_mut().take(l as usize) {
                *a += 1.0;
            }
        }
        let mut cum = vec![0f64; max_len + 2];
        for j in 1..cum.len() {
            cum[j] = cum[j - 1] + alive[j - 1] / total as f64;
        }
        let h = |tau: f64| -> (f64, f64) {
            let j = (tau.floor() as usize).min(max_len);
            let f = tau - j as f64;
            let width = alive[j].max(1.0) / total as f64;
            (cum[j] + f * width, width)
        };
        let mut score = Vec::with_capacity(total);
        let mut i = 0;
        for (c, &l) in self.lens.iter().enumerate() {
            let mut tau = 0.0f64;
            for k in 0..l as usize {
                if k > 0 {
                    tau += (sigma * self.z_step[i] - sigma * sigma / 2.0).exp();
                }
                let (base, width) = h(tau);
                score.push(base + self.level[c] * width);
                i += 1;
            }
        }
        let mut order: Vec<u32> = (0..total as u32).collect();
        order.sort_by(|&a, &b| score[a as usize].total_cmp(&score[b as usize]));
        let mut blocks = vec![0u32; total];
        for (rank, &idx) in order.iter().enumerate() {
            let u = (rank as f64 + 0.5) / total as f64;
            blocks[idx as usize] = ((dist.quantile(u) / 64.0).round() as u32).max(1);
        }
        // Scores grow along a conversation but ties can reorder equal ranks: keep contexts growing.
        let mut i = 0;
        for &l in &self.lens {
            for k in 1..l as usize {
                blocks[i + k] = blocks[i + k].max(blocks[i + k - 1]);
            }
            i += l as usize;
        }
        blocks
    }

    /// Rewritten tail per request given each conversation's protected prefix.
    pub(crate) fn rewrites(&self, blocks: &[u32], protect: &[u32], p: f64, median: f64) -> Vec<u32> {
        let mut out = vec![0u32; blocks.len()];
        let mut i = 0;
        for (c, &l) in self.lens.iter().enumerate() {
            for k in 1..l as usize {
                let j = i + k;
                if self.u_rw[j] < p {
                    let room = blocks[j - 1].saturating_sub(protect[c]);
                    let r = (median * (REWRITE_SIGMA * self.z_rw[j]).exp()).round().max(1.0) as u32;
                    out[j] = r.min(room);
                }
            }
            i += l as usize;
        }
        out
    }
}

/// What the stats file asks for, with defaults for unlisted rows (the shared 200-trace corpus).
struct Targets {
    /// Traces planned over traces published: published counts scale by it.
    scale: f64,
    /// The published trace count (the planned one when none is published).
    pub_n: f64,
    main_turns: Option<u64>,
    groups: Option<u64>,
    inner: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    min_turns: u64,
    cap: f64,
    max_peak: u64,
}

impl Targets {
    fn of(stats: &PublishedStats, n: usize) -> Targets {
        let c = &stats.counts;
        let published_traces = c.traces.map(|t| t as usize);
        Targets {
            scale: n as f64 / published_traces.unwrap_or(n) as f64,
            pub_n: published_traces.unwrap_or(n) as f64,
            main_turns: c.main_turns,
            groups: c.subagent_groups,
            inner: c.subagent_inner_requests.or_else(|| c.total_requests.zip(c.main_turns).map(|(t, m)| t.saturating_sub(m))),
            input_tokens: c.total_input_tokens,
            output_tokens: c.total_output_tokens,
            min_turns: stats.filters.min_requests_per_session.unwrap_or(1).max(1),
            cap: stats.filters.max_request_input_tokens.map_or(2_000_000.0, |v| v as f64),
            max_peak: stats.filters.max_peak_concurrent_subagent_groups.unwrap_or(u64::MAX).max(1),
        }
    }

    /// A published count scaled to the planned traces.
    fn scaled(&self, v: u64) -> u64 {
        (v as f64 * self.scale).round() as u64
    }
}

/// Fit what is listed; without percentiles a derived mean alone gives a log-normal, and only
/// with neither do the defaults apply. A mean the percentiles cannot reach is dropped with a
/// warning (the percentiles are the published rows).
fn fit_listed(
    name: &'static str,
    listed: &[(f64, f64)],
    default: &[(f64, f64)],
    mean: Option<f64>,
    lo: f64,
    hi: f64,
    warnings: &mut Vec<String>,
) -> Result<QuantileFn, LikeError> {
    let knots = if listed.is_empty() && mean.is_none() { default } else { listed };
    match fit(knots, mean, 1.0, lo, hi) {
        Ok(f) => Ok(f),
        Err(e) if mean.is_some() && !knots.is_empty() => {
            warnings.push(format!("{name}: {e}; keeping the percentiles"));
            fit(knots, None, 1.0, lo, hi).map_err(LikeError::fit(name))
        }
        Err(e) => Err(LikeError::Fit { what: name, source: e }),
    }
}

fn knots_or(p: Option<super::published::Pcts>, default: &[(f64, f64)]) -> (Vec<(f64, f64)>, Option<f64>) {
    match p {
        Some(p) if !p.knots().is_empty() || p.mean.is_some() => (p.knots(), p.mean),
        _ => (default.to_vec(), None),
    }
}

impl Plan {
    /// Plan a corpus like `stats` (`traces` overrides the published count; counts scale with it).
    /// Each phase draws from its own named generator, so none moves another's draws.
    pub fn new(stats: &PublishedStats, traces: Option<usize>, seed: u64) -> Result<Plan, LikeError> {
        let n = traces.or(stats.counts.traces.map(|t| t as usize)).unwrap_or(super::DEFAULT_SYNTHETIC_TRACES);
        if n == 0 {
            return Err(LikeError::NoTraces);
        }
        let tg = Targets::of(stats, n);
        let mut warnings = Vec::new();
        let turns = session_turns(stats, &tg, n, seed, &mut warnings)?;
        let sub = Subagents::plan(stats, &tg, n, seed, &mut warnings)?;
        let (n_main, n_inner): (u64, u64) = (turns.iter().sum(), sub.inner_per.iter().sum());
        let dists = TokenDists::fit(stats, &tg, n_main, n_inner, &mut warnings)?;

        let mut r = rng(seed, "populations");
        let main_pop = Population::new(turns.clone(), &mut r);
        let sub_pop = Population::new(sub.inner_per.clone(), &mut r);
        let sys: Vec<u32> = (0..n).map(|_| r.random_range(200..280)).collect();
        let sub_sys: Vec<u32> = (0..sub.sessions.len()).map(|_| r.random_range(40..120)).collect();

        // Outputs: stratified over each population, shuffled.
        let mut r = rng(seed, "outputs");
        let main_out: Vec<u32> =
            stratified(n_main as usize, &mut r).into_iter().map(|u| dists.main_osl.quantile(u).round().max(1.0) as u32).collect();
        let sub_out: Vec<u32> =
            stratified(n_inner as usize, &mut r).into_iter().map(|u| dists.sub_osl.quantile(u).round().max(1.0) as u32).collect();

        let gap_fn = gap_distribution(stats, &mut warnings)?;
        let n_gaps = (n_main as usize).saturating_sub(n);
        let mut r = rng(seed, "gaps");
        let gap_u = stratified(n_gaps, &mut r);
        let gap_w: Vec<f64> = (0..n_gaps).map(|_| r.random::<f64>()).collect();

        let mut plan = Planner {
            gap_fn,
            gap_u,
            gap_w,
            n,
            turns,
            sub_sessions: sub.sessions,
            groups_per: sub.groups_per,
            inner_per: sub.inner_per,
            main_pop,
            sub_pop,
            main_isl: dists.main_isl,
            sub_isl: dists.sub_isl,
            sys,
            sub_sys,
            main_out,
            sub_out,
            seed,
            max_peak: tg.max_peak,
        };
        let solved = plan.calibrate(stats, &mut warnings)?;
        let sessions = plan.build(&solved);
        Ok(Plan { seed, sessions, solved, warnings })
    }
}

/// Main turns per session: stratified draws from the fitted distribution, nudged to the
/// published total.
fn session_turns(stats: &PublishedStats, tg: &Targets, n: usize, seed: u64, warnings: &mut Vec<String>) -> Result<Vec<u64>, LikeError> {
    let d = &stats.distributions;
    let listed = d.main_turns_per_session.map(|p| p.knots()).unwrap_or_default();
    let turns_mean = tg.main_turns.map(|m| m as f64 / tg.pub_n).or(d.main_turns_per_session.and_then(|p| p.mean));
    let turns_fn =
        fit_listed("main_turns_per_session", &listed, &[(0.5, 51.0), (0.9, 173.0)], turns_mean, tg.min_turns as f64, 1e6, warnings)?;
    let mut r = rng(seed, "turns");
    let raw: Vec<f64> = stratified(n, &mut r).into_iter().map(|u| turns_fn.quantile(u)).collect();
    Ok(match tg.main_turns {
        Some(m) => integer_total(&raw, tg.min_turns, tg.scaled(m)),
        None => raw.iter().map(|v| (v.round() as u64).max(tg.min_turns)).collect(),
    })
}

/// Which sessions have subagents, their groups, and each group's inner requests.
struct Subagents {
    /// Sessions with subagents, ascending.
    sessions: Vec<usize>,
    /// Groups of each of those sessions.
    groups_per: Vec<u64>,
    /// Inner requests of each group, session by session.
    inner_per: Vec<u64>,
}

impl Subagents {
    /// One generator draws the sessions, then the groups, then the inner requests.
    fn plan(stats: &PublishedStats, tg: &Targets, n: usize, seed: u64, warnings: &mut Vec<String>) -> Result<Subagents, LikeError> {
        let d = &stats.distributions;
        let frac = d.sessions_with_subagents.unwrap_or(0.045);
        let n_sub = ((frac * n as f64).round() as usize).min(n);
        let mut idx: Vec<usize> = (0..n).collect();
        let mut r = rng(seed, "subagent-sessions");
        idx.shuffle(&mut r);
        let mut sessions: Vec<usize> = idx[..n_sub].to_vec();
        sessions.sort_unstable();
        let per = d.per_session_with_subagents.unwrap_or_default();
        let groups_mean = tg.groups.map(|g| g as f64 / (frac * tg.pub_n).max(1.0));
        let listed: Vec<(f64, f64)> = per.groups_p50.map(|v| (0.5, v)).into_iter().collect();
        let groups_fn = fit_listed("per_session_with_subagents.groups_p50", &listed, &[(0.5, 3.0)], groups_mean, 1.0, 1e5, warnings)?;
        let raw: Vec<f64> = stratified(n_sub, &mut r).into_iter().map(|u| groups_fn.quantile(u)).collect();
        let groups_per = match tg.groups {
            Some(g) if n_sub > 0 => integer_total(&raw, 1, tg.scaled(g)),
            _ => raw.iter().map(|v| (v.round() as u64).max(1)).collect(),
        };
        let n_groups: usize = groups_per.iter().sum::<u64>() as usize;
        let inner_mean = tg.inner.zip(tg.groups).map(|(i, g)| i as f64 / g.max(1) as f64);
        let listed: Vec<(f64, f64)> = per.inner_requests_per_group_p50.map(|v| (0.5, v)).into_iter().collect();
        let inner_fn =
            fit_listed("per_session_with_subagents.inner_requests_per_group_p50", &listed, &[(0.5, 11.0)], inner_mean, 1.0, 1e5, warnings)?;
        let raw: Vec<f64> = stratified(n_groups, &mut r).into_iter().map(|u| inner_fn.quantile(u)).collect();
        let inner_per = match tg.inner {
            Some(i) if n_groups > 0 => integer_total(&raw, 1, tg.scaled(i)),
            _ => raw.iter().map(|v| (v.round() as u64).max(1)).collect(),
        };
        Ok(Subagents { sessions, groups_per, inner_per })
    }
}

/// The token distributions: inputs and outputs of main turns and of subagent requests. The
/// published totals set the means of what is not listed (subagent outputs, main inputs).
struct TokenDists {
    main_isl: QuantileFn,
    sub_isl: QuantileFn,
    main_osl: QuantileFn,
    sub_osl: QuantileFn,
}

impl TokenDists {
    fn fit(stats: &PublishedStats, tg: &Targets, n_main: u64, n_inner: u64, warnings: &mut Vec<String>) -> Result<TokenDists, LikeError> {
        let d = &stats.distributions;
        let (k, _) = knots_or(d.subagent_isl, &[(0.5, 30_000.0), (0.9, 80_000.0)]);
        let sub_isl = fit(&k, None, 1.0, 2048.0, tg.cap).map_err(LikeError::fit("subagent_isl"))?;
        let listed = d.main_osl.map(|p| p.knots()).unwrap_or_default();
        let main_osl =
            fit_listed("main_osl", &listed, &[(0.5, 215.0), (0.9, 849.0)], d.main_osl.and_then(|p| p.mean), 1.0, 128_000.0, warnings)?;
        let sub_out_mean = tg
            .output_tokens
            .map(|o| (tg.scaled(o) as f64 - n_main as f64 * main_osl.mean()) / n_inner.max(1) as f64)
            .filter(|m| *m > 1.0)
            .unwrap_or(400.0);
        let sub_osl = fit(&[], Some(sub_out_mean), 1.0, 1.0, 128_000.0).map_err(LikeError::fit("subagent output"))?;
        let listed = d.main_isl.map(|p| p.knots()).unwrap_or_default();
        let main_in_mean = tg.input_tokens.map(|i| (tg.scaled(i) as f64 - n_inner as f64 * sub_isl.mean()) / n_main.max(1) as f64);
        let main_isl = fit_listed(
            "main_isl",
            &listed,
            &[(0.5, 103_443.0), (0.9, 201_209.0), (0.99, 495_148.0)],
            main_in_mean,
            8192.0,
            tg.cap,
            warnings,
        )?;
        Ok(TokenDists { main_isl, sub_isl, main_osl, sub_osl })
    }
}

/// Inter-turn gaps: the published percentiles plus the two threshold shares as knots (a knot
/// that contradicts the others is dropped with a warning).
fn gap_distribution(stats: &PublishedStats, warnings: &mut Vec<String>) -> Result<QuantileFn, LikeError> {
    let d = &stats.distributions;
    let (mut k, _) = knots_or(d.inter_turn_gap_s, &[(0.5, 10.0), (0.9, 149.0), (0.99, 2007.0)]);
    for (share, at) in [(d.turns_with_gap_over_300s, 300.0), (d.turns_with_gap_over_1800s, 1800.0)] {
        if let Some(f) = share.filter(|f| *f > 0.0 && *f < 1.0) {
            k.push((1.0 - f, at));
        }
    }
    k.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut knots: Vec<(f64, f64)> = Vec::new();
    for (p, x) in k {
        if knots.last().is_some_and(|l: &(f64, f64)| x < l.1 || p <= l.0) {
            warnings.push(format!("inter_turn_gap_s: the knot {x} s at p{} contradicts the others; ignored", p * 100.0));
            continue;
        }
        knots.push((p, x));
    }
    fit(&knots, None, 1.5, 0.0, 60.0 * 86_400.0).map_err(LikeError::fit("inter_turn_gap_s"))
}

pub(crate) use super::like_plan::Planner;

/// Percentile helper on an unsorted copy.
pub(crate) fn pct(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, p)
}
