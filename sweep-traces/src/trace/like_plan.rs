//! Calibration and assembly of a `--like` plan (see `like.rs` for the model).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::against::CorpusMeasure;
use super::fit::{QuantileFn, stratified};
use super::like::{LikeError, PlannedGroup, PlannedRequest, PlannedSession, Population, Solved, pct, round_ms as ms};
use super::published::{Pcts, PublishedStats};
use super::{Entry, InnerRequest, Request, Subagent, Trace};

pub(crate) struct Planner {
    pub n: usize,
    pub turns: Vec<u64>,
    pub sub_sessions: Vec<usize>,
    pub groups_per: Vec<u64>,
    pub inner_per: Vec<u64>,
    pub main_pop: Population,
    pub sub_pop: Population,
    pub main_isl: QuantileFn,
    pub sub_isl: QuantileFn,
    pub sys: Vec<u32>,
    pub sub_sys: Vec<u32>,
    pub main_out: Vec<u32>,
    pub sub_out: Vec<u32>,
    pub gap_fn: QuantileFn,
    pub gap_u: Vec<f64>,
    pub gap_w: Vec<f64>,
    pub seed: u64,
    pub max_peak: u64,
}

/// Per-request token plan of both populations for one set of growth/rewrite parameters.
struct Tokens {
    main_blocks: Vec<u32>,
    sub_blocks: Vec<u32>,
    main_rw: Vec<u32>,
    sub_rw: Vec<u32>,
    sys_eff: Vec<u32>,
    sub_sys_eff: Vec<u32>,
}

fn bisect(mut lo: f64, mut hi: f64, steps: usize, log: bool, mut too_low: impl FnMut(f64) -> bool) -> f64 {
    for _ in 0..steps {
        let mid = if log { (lo.ln() * 0.5 + hi.ln() * 0.5).exp() } else { 0.5 * (lo + hi) };
        if too_low(mid) { lo = mid } else { hi = mid }
    }
    if log { (lo.ln() * 0.5 + hi.ln() * 0.5).exp() } else { 0.5 * (lo + hi) }
}

impl Planner {
    fn tokens(&self, sigma: f64, p_rw: f64, med_rw: f64) -> Tokens {
        let main_blocks = self.main_pop.blocks(sigma, &self.main_isl);
        let sub_blocks = self.sub_pop.blocks(sigma, &self.sub_isl);
        let mut i = 0;
        let sys_eff: Vec<u32> = self
            .turns
            .iter()
            .enumerate()
            .map(|(s, &m)| {
                let first = main_blocks[i];
                i += m as usize;
                self.sys[s].min(first.saturating_sub(1))
            })
            .collect();
        // Subagent prefix per session: its groups' first requests must hold it plus one block.
        let (mut g, mut j) = (0usize, 0usize);
        let mut sub_sys_eff = Vec::with_capacity(self.groups_per.len());
        let mut protect_groups = Vec::with_capacity(self.inner_per.len());
        for (s, &gs) in self.groups_per.iter().enumerate() {
            let mut min_first = u32::MAX;
            for k in 0..gs as usize {
                min_first = min_first.min(sub_blocks[j]);
                j += self.inner_per[g + k] as usize;
            }
            let eff = self.sub_sys[s].min(min_first.saturating_sub(super::like::MAIN_SHARED + 1));
            sub_sys_eff.push(eff);
            for _ in 0..gs {
                protect_groups.push(super::like::MAIN_SHARED + eff);
            }
            g += gs as usize;
        }
        let main_rw = self.main_pop.rewrites(&main_blocks, &sys_eff, p_rw, med_rw);
        let sub_rw = self.sub_pop.rewrites(&sub_blocks, &protect_groups, p_rw, med_rw);
        Tokens { main_blocks, sub_blocks, main_rw, sub_rw, sys_eff, sub_sys_eff }
    }

    /// New prefill tokens per request, as the ideal-cache walk will count them.
    fn new_prefill(&self, t: &Tokens) -> Vec<f64> {
        let mut out = Vec::with_capacity(t.main_blocks.len() + t.sub_blocks.len());
        let mut i = 0;
        for &m in &self.turns {
            for k in 0..m as usize {
                let b = t.main_blocks[i + k];
                let new = if k == 0 { b } else { b - t.main_blocks[i + k - 1] + t.main_rw[i + k] };
                out.push(new as f64 * 64.0);
            }
            i += m as usize;
        }
        let (mut g, mut j) = (0usize, 0usize);
        for (s, &gs) in self.groups_per.iter().enumerate() {
            for k in 0..gs as usize {
                let l = self.inner_per[g + k] as usize;
                for q in 0..l {
                    let b = t.sub_blocks[j + q];
                    let new = if q == 0 {
                        let seen = super::like::MAIN_SHARED + if k == 0 { 0 } else { t.sub_sys_eff[s] };
                        b.saturating_sub(seen)
                    } else {
                        b - t.sub_blocks[j + q - 1] + t.sub_rw[j + q]
                    };
                    out.push(new as f64 * 64.0);
                }
                j += l;
            }
            g += gs as usize;
        }
        out
    }

    /// Solves the model's free parameters for the published rows: the peak draw, then the new
    /// prefill rows, then timing.
    pub fn calibrate(&mut self, stats: &PublishedStats, warnings: &mut Vec<String>) -> Result<Solved, LikeError> {
        let d = &stats.distributions;
        let mut s = Solved {
            growth_sigma: 0.8,
            rewrite_probability: 0.03,
            rewrite_median_blocks: 8.0,
            gap_tail_sigma: self.gap_fn.hi_slope,
            gap_position_bias: 0.0,
            peak_median: 2.0,
        };
        if let Some(target) = d.per_session_with_subagents.and_then(|p| p.peak_concurrent_groups_p50) {
            s.peak_median = self.solve_peak_median(target, s.peak_median);
        }
        if let Some(np) = d.new_prefill_tokens_per_turn {
            self.solve_new_prefill(np, &mut s);
        }
        self.solve_timing(d.session_waiting_time_fraction, d.time_averaged_context_tokens_mean, &mut s);
        if s.gap_position_bias.abs() > 0.999 {
            warnings.push("time_averaged_context_tokens_mean: at the end of the gap-position range; the target may be out of reach".into());
        }
        Ok(s)
    }

    /// Peak concurrent groups: the median draw whose session median matches (the first best on
    /// a 0.1 grid from 1 to 10; `start` when none beats infinity).
    fn solve_peak_median(&self, target: f64, start: f64) -> f64 {
        let mut best = (f64::INFINITY, start);
        for step in 0..=90 {
            let m = 1.0 + step as f64 * 0.1;
            let peaks: Vec<f64> = self.peaks(m).into_iter().map(|p| p as f64).collect();
            let err = (pct(&peaks, 50.0) - target).abs();
            if err < best.0 {
                best = (err, m);
            }
        }
        best.1
    }

    /// New prefill per request at `s`, reusing the blocks of the last growth spread asked for
    /// (`cache`): only the rewrites change with the rewrite parameters.
    fn new_prefill_at(&self, s: &Solved, cache: &mut Option<(f64, Tokens)>) -> Vec<f64> {
        if cache.as_ref().is_none_or(|c| c.0 != s.growth_sigma) {
            *cache = Some((s.growth_sigma, self.tokens(s.growth_sigma, 0.0, 1.0)));
        }
        let base = &cache.as_ref().expect("set").1;
        let main_rw = self.main_pop.rewrites(&base.main_blocks, &base.sys_eff, s.rewrite_probability, s.rewrite_median_blocks);
        let protect: Vec<u32> = self
            .groups_per
            .iter()
            .zip(&base.sub_sys_eff)
            .flat_map(|(&g, &e)| std::iter::repeat_n(super::like::MAIN_SHARED + e, g as usize))
            .collect();
        let sub_rw = self.sub_pop.rewrites(&base.sub_blocks, &protect, s.rewrite_probability, s.rewrite_median_blocks);
        let t = Tokens {
            main_blocks: base.main_blocks.clone(),
            sub_blocks: base.sub_blocks.clone(),
            main_rw,
            sub_rw,
            sys_eff: base.sys_eff.clone(),
            sub_sys_eff: base.sub_sys_eff.clone(),
        };
        self.new_prefill(&t)
    }

    /// New prefill: rewrite size for p99, rewrite rate for the mean, growth spread for p50. Each
    /// moves its own row most, so a few rounds of one-dimensional solves converge.
    fn solve_new_prefill(&self, np: Pcts, s: &mut Solved) {
        let mut cache: Option<(f64, Tokens)> = None;
        for _round in 0..4 {
            if let Some(target) = np.p99 {
                s.rewrite_median_blocks = bisect(0.5, 20_000.0, 20, true, |v| {
                    let mut t = *s;
                    t.rewrite_median_blocks = v;
                    pct(&self.new_prefill_at(&t, &mut cache), 99.0) < target
                });
            }
            if let Some(target) = np.mean {
                s.rewrite_probability = bisect(0.0, 0.9, 20, false, |v| {
                    let mut t = *s;
                    t.rewrite_probability = v;
                    let x = self.new_prefill_at(&t, &mut cache);
                    x.iter().sum::<f64>() / (x.len().max(1) as f64) < target
                });
            }
            if let Some(target) = np.p50 {
                s.growth_sigma = bisect(0.02, 3.0, 16, false, |v| {
                    let mut t = *s;
                    t.growth_sigma = v;
                    pct(&self.new_prefill_at(&t, &mut cache), 50.0) > target
                });
            }
        }
    }

    /// Timing: the gap tail beyond the last knot for the waiting fraction (`wait`), where long
    /// gaps fall for the time-averaged context (`ctx`), measured on whole light sessions.
    fn solve_timing(&self, wait: Option<f64>, ctx: Option<f64>, s: &mut Solved) {
        let tokens = self.tokens(s.growth_sigma, s.rewrite_probability, s.rewrite_median_blocks);
        let measure = |s: &Solved| -> CorpusMeasure {
            let mut m = CorpusMeasure::default();
            for sess in self.sessions(s, &tokens) {
                m.add(&light_trace(&sess));
            }
            m
        };
        for _round in 0..if wait.is_some() || ctx.is_some() { 2 } else { 0 } {
            if let Some(target) = wait {
                s.gap_tail_sigma = bisect(0.0, 8.0, 24, false, |v| {
                    let mut t = *s;
                    t.gap_tail_sigma = v;
                    measure(&t).value("distributions.session_waiting_time_fraction").unwrap_or(0.0) < target
                });
            }
            if let Some(target) = ctx {
                s.gap_position_bias = bisect(-1.0, 1.0, 18, false, |v| {
                    let mut t = *s;
                    t.gap_position_bias = v;
                    measure(&t).value("distributions.time_averaged_context_tokens_mean").unwrap_or(0.0) < target
                });
            }
        }
    }

    /// Peak concurrent groups per subagent session for a median draw `m`.
    fn peaks(&self, m: f64) -> Vec<u64> {
        let mut r = ChaCha8Rng::seed_from_u64(self.seed ^ 0x9e37_79b9_7f4a_7c15);
        let us = stratified(self.groups_per.len(), &mut r);
        let d = QuantileFn::lognormal(m, 0.5, 1.0, 1e6).expect("valid");
        self.groups_per.iter().zip(us).map(|(&g, u)| (d.quantile(u).round() as u64).clamp(1, self.max_peak).min(g)).collect()
    }

    /// The final sessions.
    pub fn build(&self, s: &Solved) -> Vec<PlannedSession> {
        let tokens = self.tokens(s.growth_sigma, s.rewrite_probability, s.rewrite_median_blocks);
        self.sessions(s, &tokens)
    }

    fn sessions(&self, s: &Solved, t: &Tokens) -> Vec<PlannedSession> {
        let mut gap_fn = self.gap_fn.clone();
        gap_fn.hi_slope = s.gap_tail_sigma;
        let peaks = self.peaks(s.peak_median);
        let mut out = Vec::with_capacity(self.n);
        let (mut i, mut gi) = (0usize, 0usize);
        // The next subagent group and its first inner request; the next subagent session.
        let mut next = (0usize, 0usize);
        let mut sub_k = 0usize;
        for (sess, &m) in self.turns.iter().enumerate() {
            let m = m as usize;
            let mut r = ChaCha8Rng::seed_from_u64(self.seed.wrapping_mul(0x100_0000_01b3) ^ sess as u64);
            let (gap_at, pos) = self.arrange_gaps(&gap_fn, s.gap_position_bias, gi, m);
            let main = self.main_turns(t, i, &gap_at, &mut r);
            let mut session = PlannedSession { main, groups: Vec::new(), sys_blocks: t.sys_eff[sess], sub_prefix_blocks: 0 };
            if sub_k < self.sub_sessions.len() && self.sub_sessions[sub_k] == sess {
                session.sub_prefix_blocks = t.sub_sys_eff[sub_k];
                let sizes = batch_sizes(self.groups_per[sub_k] as usize, peaks[sub_k].max(1) as usize, &mut r);
                self.add_groups(&mut session, t, &sizes, &pos, &mut next, &mut r);
                sub_k += 1;
            }
            out.push(session);
            i += m;
            gi += m.saturating_sub(1);
        }
        out
    }

    /// A session's `m - 1` gaps (from `gi` on), arranged: larger keys take larger gaps; the bias
    /// `b` pushes them late (or early). Returns the gap before each turn, and the turns after a
    /// gap by descending key (the largest gap first).
    fn arrange_gaps(&self, gap_fn: &QuantileFn, b: f64, gi: usize, m: usize) -> (Vec<f64>, Vec<(f64, usize)>) {
        let mut gaps: Vec<f64> = self.gap_u[gi..gi + m - 1].iter().map(|&u| gap_fn.quantile(u)).collect();
        gaps.sort_by(|a, b| b.total_cmp(a));
        let mut pos: Vec<(f64, usize)> = (1..m)
            .map(|k| {
                let x = (k - 1) as f64 / (m - 1).max(1) as f64;
                let lean = if b >= 0.0 { x } else { 1.0 - x };
                ((1.0 - b.abs()) * self.gap_w[gi + k - 1] + b.abs() * lean, k)
            })
            .collect();
        pos.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut gap_at = vec![0.0; m];
        for (rank, &(_, k)) in pos.iter().enumerate() {
            gap_at[k] = gaps[rank];
        }
        (gap_at, pos)
    }

    /// A session's main turns from request `i` on: each starts its gap after the previous one
    /// ends; API time grows with input and output, spread by one normal draw per turn.
    fn main_turns(&self, t: &Tokens, i: usize, gap_at: &[f64], r: &mut ChaCha8Rng) -> Vec<PlannedRequest> {
        let m = gap_at.len();
        let mut main: Vec<PlannedRequest> = Vec::with_capacity(m);
        let mut t_now = 0.0;
        for k in 0..m {
            let blocks = t.main_blocks[i + k];
            let out_tok = self.main_out[i + k];
            if k > 0 {
                let prev: &PlannedRequest = &main[k - 1];
                t_now = ms(prev.t + prev.api + gap_at[k]);
            }
            let z: f64 = StandardNormal.sample(r);
            let api = ms((1.0 + blocks as f64 * 64.0 / 60_000.0 + out_tok as f64 / 55.0) * (0.25 * z).exp()).max(0.05);
            main.push(PlannedRequest { t: t_now, api, blocks, out: out_tok, rewrite: t.main_rw[i + k] });
        }
        main
    }

    /// A subagent session's groups in batches of `sizes`: batch b spawns after the b-th largest
    /// gap's turn (`pos`), never before the previous batch has finished.
    fn add_groups(
        &self,
        session: &mut PlannedSession,
        t: &Tokens,
        sizes: &[usize],
        pos: &[(f64, usize)],
        next: &mut (usize, usize),
        r: &mut ChaCha8Rng,
    ) {
        let mut anchors: Vec<usize> = pos.iter().map(|&(_, k)| k - 1).collect();
        if anchors.is_empty() {
            anchors.push(0);
        }
        let mut chosen: Vec<usize> = (0..sizes.len()).map(|b| anchors[b % anchors.len()]).collect();
        chosen.sort_unstable();
        let mut prev_end = f64::NEG_INFINITY;
        for (bi, &size) in sizes.iter().enumerate() {
            let a = &session.main[chosen[bi]];
            let spawn = ms((a.t + a.api + 1.0).max(prev_end + 1.0));
            let mut batch_end = spawn;
            for _ in 0..size {
                let group = self.group(t, spawn, next, r);
                let last = group.inner.last().expect("groups have requests");
                batch_end = batch_end.max(last.t + last.api);
                session.groups.push(group);
            }
            prev_end = batch_end;
        }
    }

    /// The group `next.0`, its inner requests from `next.1` on, back to back from `spawn` with
    /// short pauses (two normal draws per request); advances `next`.
    fn group(&self, t: &Tokens, spawn: f64, next: &mut (usize, usize), r: &mut ChaCha8Rng) -> PlannedGroup {
        let (g, j) = *next;
        let l = self.inner_per[g] as usize;
        let mut inner = Vec::with_capacity(l);
        let mut tt = spawn;
        for q in 0..l {
            let blocks = t.sub_blocks[j + q];
            let out_tok = self.sub_out[j + q];
            let z: f64 = StandardNormal.sample(r);
            let api = ms((0.6 + blocks as f64 * 64.0 / 80_000.0 + out_tok as f64 / 80.0) * (0.25 * z).exp()).max(0.05);
            inner.push(PlannedRequest { t: tt, api, blocks, out: out_tok, rewrite: t.sub_rw[j + q] });
            let zt: f64 = StandardNormal.sample(r);
            tt = ms(tt + api + (0.3 + 1.5 * (0.8 * zt).exp()).min(60.0));
        }
        *next = (g + 1, j + l);
        PlannedGroup { inner }
    }
}

/// Batch sizes of a session's `n_groups` subagent groups: the first holds `peak` groups, the
/// rest 1..=peak.
fn batch_sizes(n_groups: usize, peak: usize, r: &mut ChaCha8Rng) -> Vec<usize> {
    let mut sizes = vec![peak.min(n_groups)];
    while sizes.iter().sum::<usize>() < n_groups {
        let left = n_groups - sizes.iter().sum::<usize>();
        sizes.push(r.random_range(1..=peak).min(left));
    }
    sizes
}

/// The session as a trace without hash ids (enough for every timing and count statistic).
pub(crate) fn light_trace(s: &PlannedSession) -> Trace {
    let req = |p: &PlannedRequest| Request {
        t: p.t,
        model: String::new(),
        input_tokens: p.blocks as u64 * 64,
        output_tokens: p.out as u64,
        hash_ids: Vec::new(),
        api_time: Some(p.api),
        think_time: None,
        ttft: None,
        input_types: None,
        output_types: None,
        stop: None,
    };
    let mut requests: Vec<Entry> = s.main.iter().map(|p| Entry::Streaming(req(p))).collect();
    for g in &s.groups {
        requests.push(Entry::Subagent(Subagent {
            t: g.inner[0].t,
            agent_id: String::new(),
            subagent_type: String::new(),
            duration_ms: None,
            total_tokens: None,
            tool_use_count: None,
            status: None,
            models: Vec::new(),
            requests: g.inner.iter().map(|p| InnerRequest::NonStreaming(req(p))).collect(),
            tool_tokens: 0,
            system_tokens: 0,
        }));
    }
    Trace {
        id: String::new(),
        models: Vec::new(),
        block_size: 64,
        hash_id_scope: "local".into(),
        tool_tokens: 0,
        system_tokens: 0,
        requests,
        totals: None,
    }
}
