//! The search driver: bounded Nelder–Mead restarts over the unit cube, single- or two-level,
//! keeping the best full-duration evaluation.

use super::nelder_mead;
use super::objective::{Evaluation, Level, corrected_targets};
use super::problem::FitProblem;
use super::space::{Candidate, Param, from_unit, to_unit};

/// Settings of the search.
#[derive(Clone, Debug)]
pub struct FitOptions {
    pub params: Vec<Param>,
    pub restarts: u32,
    /// Evaluations per restart.
    pub max_evals: usize,
    pub seed: u64,
    /// Start values of the first restart (default: the base profile's).
    pub start: Vec<(String, f64)>,
    /// A two-level search: restarts at a shorter duration, then a polish at the full one.
    pub coarse: Option<CoarseOptions>,
}

/// The coarse pass of a two-level fit. Simulation cost grows linearly with the duration, so the
/// restarts run at `duration_s` against targets corrected by the start point's short / full
/// ratio ([`corrected_targets`]), then one Nelder–Mead at the full duration starts from the
/// coarse optimum with a small simplex (`polish_step`) for `polish_evals` evaluations. Only
/// full-duration evaluations can become the result.
#[derive(Clone, Copy, Debug)]
pub struct CoarseOptions {
    pub duration_s: f64,
    pub polish_evals: usize,
    pub polish_step: f64,
}

/// A finished fit.
#[derive(Clone, Debug)]
pub struct FitOutcome {
    pub best: Candidate,
    pub evaluation: Evaluation,
    /// The base profile's evaluation (for the before / after table).
    pub base_evaluation: Evaluation,
    pub evaluations: u64,
    /// Best loss of each restart (a two-level fit: each coarse restart's, then the polish's).
    pub restart_losses: Vec<f64>,
    /// Evaluations at the coarse duration and at the full one, of a two-level fit.
    pub coarse_evaluations: Option<(u64, u64)>,
}

/// Runs the search: restart 0 starts from the base profile, later restarts alternately from a
/// seeded random point of the box and from the best point so far with a seeded jolt.
/// `progress(evals_done, best_loss)` is called after every batch.
pub fn fit(problem: &FitProblem, opts: &FitOptions, progress: impl FnMut(u64, f64)) -> FitOutcome {
    let base = problem.base_candidate();
    let base_evaluation = problem.evaluate(std::slice::from_ref(&base)).remove(0);
    let u0: Vec<f64> = opts
        .params
        .iter()
        .map(|p| to_unit(p, opts.start.iter().find(|(n, _)| n == p.name).map_or_else(|| base.get(p.name), |(_, v)| *v)))
        .collect();
    let mut s = Search {
        problem,
        opts,
        base,
        best: (base_evaluation.loss, base_evaluation.clone(), u0.clone()),
        u0,
        evals: 1,
        full_evals: 1,
        restart_losses: Vec::new(),
        rng: engine::rng::Rng::new(opts.seed),
        progress,
    };
    (s.progress)(1, base_evaluation.loss);
    let full = problem.full_level();
    let coarse_evaluations = match opts.coarse {
        None => {
            s.restarts(&full);
            None
        }
        Some(c) => Some(s.two_level(&full, c)),
    };
    FitOutcome {
        best: s.candidate(&s.best.2),
        evaluation: s.best.1,
        base_evaluation,
        evaluations: s.evals,
        restart_losses: s.restart_losses,
        coarse_evaluations,
    }
}

/// The best point one Nelder–Mead run has seen at its own level: loss and unit coordinates.
type LevelBest = (f64, Vec<f64>);

/// A fit in progress: the best full-level evaluation so far (the result: loss, evaluation,
/// unit coordinates), evaluation counts (all, and at the full duration), the best loss of each
/// restart, and the generator of the restarts' starts.
struct Search<'a, P> {
    problem: &'a FitProblem,
    opts: &'a FitOptions,
    base: Candidate,
    /// The first restart's start.
    u0: Vec<f64>,
    best: (f64, Evaluation, Vec<f64>),
    evals: u64,
    full_evals: u64,
    restart_losses: Vec<f64>,
    rng: engine::rng::Rng,
    progress: P,
}

impl<P: FnMut(u64, f64)> Search<'_, P> {
    /// The candidate at unit coordinates `u`: the base with the fitted parameters moved.
    fn candidate(&self, u: &[f64]) -> Candidate {
        let mut c = self.base.clone();
        for (p, x) in self.opts.params.iter().zip(u) {
            c.set(p.name, from_unit(p, *x));
        }
        c
    }

    /// Counts a batch of evaluations; full-level ones compete for the result.
    fn offer(&mut self, level: &Level, xs: &[Vec<f64>], ev: &[Evaluation], level_best: &mut LevelBest) {
        self.evals += xs.len() as u64;
        if level.tag == 0 {
            self.full_evals += xs.len() as u64;
        }
        for (u, e) in xs.iter().zip(ev) {
            if e.complete && e.loss < level_best.0 {
                *level_best = (e.loss, u.clone());
            }
            if level.tag == 0 && e.complete && e.loss < self.best.0 {
                self.best = (e.loss, e.clone(), u.clone());
            }
        }
        (self.progress)(self.evals, self.best.0);
    }

    /// One Nelder–Mead at `level`.
    fn nelder_mead(
        &mut self,
        level: &Level,
        start: &[f64],
        max_evals: usize,
        step: f64,
        level_best: &mut LevelBest,
    ) -> nelder_mead::Minimum {
        let problem = self.problem;
        nelder_mead::minimize(
            |xs: &[Vec<f64>], bound: f64| {
                let cands: Vec<Candidate> = xs.iter().map(|u| self.candidate(u)).collect();
                let ev = problem.evaluate_at(level, &cands, bound);
                self.offer(level, xs, &ev, level_best);
                ev.iter().map(|e| e.loss).collect()
            },
            start,
            nelder_mead::Options { max_evals, step, ..Default::default() },
        )
    }

    /// Restart `r`'s start: the first start, a seeded random point (odd restarts) or the best
    /// point so far with a seeded jolt (even ones).
    fn restart_start(&mut self, r: u32, best_u: &[f64]) -> Vec<f64> {
        match r {
            0 => self.u0.clone(),
            r if r % 2 == 1 => self.opts.params.iter().map(|_| self.rng.next_f64()).collect(),
            _ => best_u.iter().map(|u| (u + (self.rng.next_f64() - 0.5) * 0.3).clamp(0.0, 1.0)).collect(),
        }
    }

    /// Every restart at `level`, each recording its best loss; the best point they found.
    fn restarts(&mut self, level: &Level) -> Vec<f64> {
        let step = nelder_mead::Options::default().step;
        let mut level_best = (f64::INFINITY, self.u0.clone());
        for r in 0..self.opts.restarts.max(1) {
            let start = self.restart_start(r, &level_best.1);
            let m = self.nelder_mead(level, &start, self.opts.max_evals, step, &mut level_best);
            self.restart_losses.push(m.f);
        }
        level_best.1
    }

    /// A two-level search ([`CoarseOptions`]): the start point at both durations anchors the
    /// corrected targets, the restarts run at the coarse level, and a polish at `full` starts
    /// from their best point. Returns the evaluations at the coarse and at the full duration.
    fn two_level(&mut self, full: &Level, c: CoarseOptions) -> (u64, u64) {
        let problem = self.problem;
        let (e0, fe0) = (self.evals, self.full_evals);
        let c0 = vec![self.candidate(&self.u0)];
        let f0 = problem.evaluate_at(full, &c0, f64::INFINITY);
        let raw = Level { tag: 1, duration_s: Some(c.duration_s), targets: &problem.points };
        let s0 = problem.evaluate_at(&raw, &c0, f64::INFINITY);
        self.evals += 2;
        self.full_evals += 1;
        if f0[0].complete && f0[0].loss < self.best.0 {
            self.best = (f0[0].loss, f0[0].clone(), self.u0.clone());
        }
        let targets = corrected_targets(&problem.points, &f0[0], &s0[0]);
        let coarse = Level { tag: 2, duration_s: Some(c.duration_s), targets: &targets };
        let coarse_best = self.restarts(&coarse);
        let mut polish_best = (f64::INFINITY, coarse_best.clone());
        let m = self.nelder_mead(full, &coarse_best, c.polish_evals, c.polish_step, &mut polish_best);
        self.restart_losses.push(m.f);
        let full_n = self.full_evals - fe0;
        (self.evals - e0 - full_n, full_n)
    }
}
