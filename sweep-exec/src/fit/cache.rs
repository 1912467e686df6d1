//! What a fit keeps between evaluations (the recorded pool, the memo) and its time counters.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{Evaluation, MeasuredPoint};
use crate::plan::PlanPoint;
use crate::workload::TracePlan;

/// What a fit keeps between evaluations: the compiled trace set, the evaluations already made,
/// and counters of where the time goes.
#[derive(Default)]
pub struct FitCache {
    /// The trace set compiled as recorded (scales 1), reused by every candidate that does not
    /// change the workload; set up front when the traces were compiled while reading.
    pub recorded_pool: std::sync::OnceLock<Vec<Arc<TracePlan>>>,
    /// Evaluations by candidate ([`Candidate::key`]): Nelder–Mead clamps trial points onto the
    /// box's faces and restarts revisit points, and a repeat costs nothing.
    pub(super) memo: Mutex<std::collections::HashMap<Vec<u64>, Evaluation>>,
    pub timings: FitTimings,
}

impl FitCache {
    /// A cache whose recorded pool is already compiled ([`load_pool`]).
    pub fn with_pool(pool: Vec<Arc<TracePlan>>) -> Self {
        let c = FitCache::default();
        c.recorded_pool.set(pool).expect("a fresh cache has no pool");
        c
    }
}

/// Counters of a fit (`sweep calibrate fit --timings`).
#[derive(Debug, Default)]
pub struct FitTimings {
    /// Candidates asked for, answered from the memo, and stopped early (loss bound exceeded).
    pub candidates: std::sync::atomic::AtomicU64,
    pub memo_hits: std::sync::atomic::AtomicU64,
    pub pruned: std::sync::atomic::AtomicU64,
    /// Trace sets compiled for workload-scaled candidates, and their seconds.
    pub compiles: Mutex<(u64, f64)>,
    /// Per point (problem order): simulations run and seconds of setup, replay and aggregate.
    pub points: Mutex<BTreeMap<usize, PointTiming>>,
}

/// Simulations of one point and their seconds by stage (summed over threads: CPU time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PointTiming {
    pub sims: u64,
    pub setup_s: f64,
    pub replay_s: f64,
    pub aggregate_s: f64,
}

impl FitTimings {
    pub(super) fn add(&self, point: usize, t: [f64; 3]) {
        let mut m = self.points.lock().expect("lock");
        let e = m.entry(point).or_default();
        e.sims += 1;
        e.setup_s += t[0];
        e.replay_s += t[1];
        e.aggregate_s += t[2];
    }

    /// Simulations run so far, over all points.
    pub fn simulations(&self) -> u64 {
        self.points.lock().expect("lock").values().map(|p| p.sims).sum()
    }

    /// A Markdown table of the counters.
    pub fn table(&self, points: &[(PlanPoint, MeasuredPoint)]) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let compiles = *self.compiles.lock().expect("lock");
        let mut o = format!(
            "candidates {}, answered from the memo {}, stopped early {}; trace sets compiled {} ({:.1} s)\n\n| point | simulations | setup s | replay s | aggregate s | s per simulation |\n|---|---:|---:|---:|---:|---:|\n",
            self.candidates.load(Relaxed),
            self.memo_hits.load(Relaxed),
            self.pruned.load(Relaxed),
            compiles.0,
            compiles.1,
        );
        for (i, t) in self.points.lock().expect("lock").iter() {
            let id = points.get(*i).map_or("?", |(p, _)| p.id.rsplit('/').next().unwrap_or(&p.id));
            let all = t.setup_s + t.replay_s + t.aggregate_s;
            o.push_str(&format!(
                "| {id} | {} | {:.2} | {:.2} | {:.2} | {:.3} |\n",
                t.sims,
                t.setup_s,
                t.replay_s,
                t.aggregate_s,
                all / (t.sims.max(1) as f64)
            ));
        }
        o
    }
}
