//! What a fit replays ([`FitProblem`]) and how it evaluates candidates: memoised, in parallel,
//! and point by point when only losses below a bound matter.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine::GpuSpec;
use engine::profiles::WorkloadScales;

use super::cache::FitCache;
use super::objective::{Evaluation, Level, loss, point_loss};
use super::parallel::parallel_map;
use super::simulate::{mean_summary, rotated, simulate_point_timed};
use super::space::Candidate;
use super::traces::compile;
use super::{MeasuredPoint, Metric, PointError};
use crate::metrics::Summary;
use crate::plan::PlanPoint;
use crate::trace::Trace;
use crate::workload::TracePlan;

/// What a fit replays: the measured points with their plan points, the trace set and settings.
pub struct FitProblem {
    pub points: Vec<(PlanPoint, MeasuredPoint)>,
    /// The trace set as read, for candidates that change the workload (may be empty when no
    /// workload scale is fitted: the recorded pool in `cache` is then all a fit needs).
    pub traces: Vec<Trace>,
    /// Description of the trace set (recorded in the profile).
    pub trace_set: String,
    pub model: Option<String>,
    pub base: GpuSpec,
    pub base_scales: WorkloadScales,
    pub seed: u64,
    /// Profiling seconds per point (None: the plan's).
    pub duration_s: Option<f64>,
    /// Simulations run at once.
    pub jobs: usize,
    /// Loss weight of each metric.
    pub weights: BTreeMap<Metric, f64>,
    /// Trace orders each point is replayed with, its metrics averaged ([`simulate_point_orders`]).
    pub orders: usize,
    /// What evaluations reuse, and where their time goes.
    pub cache: FitCache,
}

impl FitProblem {
    /// Evaluates candidates exactly; all (candidate, point, order) simulations share `jobs`
    /// threads.
    pub fn evaluate(&self, cands: &[Candidate]) -> Vec<Evaluation> {
        self.evaluate_bounded(cands, f64::INFINITY)
    }

    /// Evaluates candidates when only losses below `bound` need to be exact: a candidate is
    /// simulated point by point (each point's orders at once) and stops as soon as the points
    /// done already put its loss at or above `bound` (its evaluation is then incomplete and its
    /// loss a lower bound). The points are visited in a fixed order, so the result does not
    /// depend on thread timing. With several candidates, or no finite bound, everything runs at
    /// once.
    pub fn evaluate_bounded(&self, cands: &[Candidate], bound: f64) -> Vec<Evaluation> {
        self.evaluate_at(&self.full_level(), cands, bound)
    }

    /// The level a plain evaluation runs at: the problem's duration and measured targets.
    pub(super) fn full_level(&self) -> Level<'_> {
        Level { tag: 0, duration_s: self.duration_s, targets: &self.points }
    }

    pub(super) fn evaluate_at(&self, level: &Level, cands: &[Candidate], bound: f64) -> Vec<Evaluation> {
        use std::sync::atomic::Ordering::Relaxed;
        let t = &self.cache.timings;
        t.candidates.fetch_add(cands.len() as u64, Relaxed);
        let keys: Vec<Vec<u64>> = cands
            .iter()
            .map(|c| {
                let mut k = c.key();
                k.push(level.tag);
                k
            })
            .collect();
        let mut out: Vec<Option<Evaluation>> = {
            let memo = self.cache.memo.lock().expect("lock");
            keys.iter().map(|k| memo.get(k).filter(|e| e.complete || e.loss >= bound).cloned()).collect()
        };
        t.memo_hits.fetch_add(out.iter().filter(|e| e.is_some()).count() as u64, Relaxed);
        let todo: Vec<usize> = (0..cands.len()).filter(|&i| out[i].is_none()).collect();
        if todo.is_empty() {
            return out.into_iter().map(|e| e.expect("answered")).collect();
        }
        let fresh: Vec<Evaluation> = if todo.len() == 1 && bound.is_finite() && self.points.len() > 1 {
            vec![self.evaluate_staged(level, &cands[todo[0]], bound)]
        } else {
            let sel: Vec<&Candidate> = todo.iter().map(|&i| &cands[i]).collect();
            self.evaluate_all(level, &sel)
        };
        let mut memo = self.cache.memo.lock().expect("lock");
        for (i, e) in todo.into_iter().zip(fresh) {
            memo.insert(keys[i].clone(), e.clone());
            out[i] = Some(e);
        }
        out.into_iter().map(|e| e.expect("answered")).collect()
    }

    /// The trace pool of a candidate: the shared recorded pool, or its own scaled compile.
    fn pool(&self, c: &Candidate) -> Vec<Arc<TracePlan>> {
        if c.scales.is_identity() {
            return self.cache.recorded_pool.get_or_init(|| compile(&self.traces, WorkloadScales::default(), self.seed)).clone();
        }
        let t0 = std::time::Instant::now();
        let p = compile(&self.traces, c.scales, self.seed);
        let mut cs = self.cache.timings.compiles.lock().expect("lock");
        cs.0 += 1;
        cs.1 += t0.elapsed().as_secs_f64();
        p
    }

    /// One simulation: candidate `c`'s point `p` from trace order `k`.
    fn simulate(&self, level: &Level, c: &Candidate, pool: &[Arc<TracePlan>], p: usize, k: usize) -> Result<Summary, PointError> {
        let orders = self.orders.max(1);
        let (r, t) =
            simulate_point_timed(&self.points[p].0, &c.gpu, self.model.as_deref(), &rotated(pool, k, orders), self.seed, level.duration_s);
        self.cache.timings.add(p, t);
        r
    }

    /// The mean over orders of one point's simulations (any failed order fails the point).
    fn combine(runs: Vec<Result<Summary, PointError>>) -> Result<Summary, PointError> {
        let v = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
        mean_summary(&v).ok_or(PointError::NoTraceOrder)
    }

    /// Every (candidate, point, order) simulation at once.
    fn evaluate_all(&self, level: &Level, cands: &[&Candidate]) -> Vec<Evaluation> {
        let jobs = self.jobs.max(1);
        let pools: Vec<Vec<Arc<TracePlan>>> = parallel_map(jobs, cands.len(), |i| self.pool(cands[i]));
        let (n, o) = (self.points.len(), self.orders.max(1));
        let mut flat = parallel_map(jobs, cands.len() * n * o, |t| {
            let (c, p, k) = (t / (n * o), t / o % n, t % o);
            self.simulate(level, cands[c], &pools[c], p, k)
        })
        .into_iter();
        cands
            .iter()
            .map(|_| {
                let summaries: Vec<_> = (0..n).map(|_| Self::combine(flat.by_ref().take(o).collect())).collect();
                Evaluation { loss: loss(level.targets, &summaries, &self.weights), summaries, complete: true }
            })
            .collect()
    }

    /// One candidate, point by point (see [`FitProblem::evaluate_bounded`]).
    fn evaluate_staged(&self, level: &Level, c: &Candidate, bound: f64) -> Evaluation {
        let pool = self.pool(c);
        let o = self.orders.max(1);
        let den: f64 =
            level.targets.iter().map(|(_, m)| m.metrics.keys().map(|k| self.weights.get(k).copied().unwrap_or(0.0)).sum::<f64>()).sum();
        let mut summaries: Vec<Result<Summary, PointError>> = vec![Err(PointError::Pruned); self.points.len()];
        let mut num = 0.0;
        for (done, p) in self.stage_order().into_iter().enumerate() {
            let runs = parallel_map(self.jobs.max(1), o, |k| self.simulate(level, c, &pool, p, k));
            summaries[p] = Self::combine(runs);
            num += point_loss(&level.targets[p].1, &summaries[p], &self.weights).0;
            let lb = if den > 0.0 { num / den } else { 0.0 };
            if done + 1 < self.points.len() && lb >= bound {
                self.cache.timings.pruned.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Evaluation { loss: lb, summaries, complete: false };
            }
        }
        Evaluation { loss: loss(level.targets, &summaries, &self.weights), summaries, complete: true }
    }

    /// The order in which a bounded evaluation visits the points: lowest concurrency first, the
    /// cheapest simulations (fewest requests in flight), so a hopeless candidate is found out
    /// before the expensive points run.
    pub fn stage_order(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.points.len()).collect();
        v.sort_by_key(|&i| (self.points[i].0.conc, i));
        v
    }

    pub(super) fn base_candidate(&self) -> Candidate {
        Candidate { gpu: self.base.clone(), scales: self.base_scales }
    }
}
