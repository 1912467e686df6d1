//! The noise model the gate and `sweep compare` judge a change against.
//!
//! Most of the variation between two runs of one recipe is *which sessions* each point replays:
//! the seed picks the traces, their order and where each lane starts, and one long-context
//! session more or less moves a point's P90s by several per cent. A bootstrap over the requests
//! of one run cannot see that (they all share the run's sessions and its batch composition), so
//! the gate uses seed replicates: each point is also replayed with other seeds (on the virtual
//! clock, `sweep run --seed-replicates N`), and a metric's value is the mean over the point's seeds
//! with the spread between seeds as its noise. Two runs are compared with Welch's t-test,
//! one-sided in the bad direction at `ALPHA`, with Student's t from `statrs`; a regression also
//! has to exceed a practical floor (`MIN_CHANGE_PCT`). Without replicates on both sides the
//! gate falls back to the request bootstrap and says that seed noise is not modelled.
//! `docs/gate.md` gives the assumptions and the measured false-alarm rate and power.

use crate::pareto::{VIEWS, View};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::BTreeMap;

/// One-sided false-alarm probability of one regression check when the model holds.
pub const ALPHA: f64 = 0.005;
/// A worse change smaller than this (per cent of the baseline) never fails the gate: below it a
/// difference is not worth a failed merge, and it guards against a spread under-estimated from
/// few seeds.
pub const MIN_CHANGE_PCT: f64 = 1.0;
/// The power the reported minimum detectable change is computed for.
pub const POWER: f64 = 0.95;

/// A point's metrics under one seed: tok/s/GPU and each view's x.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedSample {
    pub seed: u64,
    pub y: f64,
    pub x: BTreeMap<View, f64>,
}

/// The metric a check compares: `tput_per_gpu` (y) or a view's x.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Tput,
    View(View),
}

impl Metric {
    /// The metrics the gate checks, in report order.
    pub const GATED: [Metric; 4] =
        [Metric::Tput, Metric::View(View::E2eNormIntvtyP90), Metric::View(View::IntvtyP90), Metric::View(View::E2elP90)];
    pub fn key(self) -> &'static str {
        match self {
            Metric::Tput => "tput_per_gpu",
            Metric::View(v) => v.key(),
        }
    }
    pub fn higher_is_better(self) -> bool {
        match self {
            Metric::Tput => true,
            Metric::View(v) => v.higher_is_better(),
        }
    }
    pub fn of(self, s: &SeedSample) -> Option<f64> {
        match self {
            Metric::Tput => Some(s.y),
            Metric::View(v) => s.x.get(&v).copied(),
        }
    }
}

/// Mean, sample variance and count of a metric over a point's seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub var: f64,
    pub n: usize,
}

impl Spread {
    pub fn of(samples: &[SeedSample], m: Metric) -> Option<Spread> {
        let v: Vec<f64> = samples.iter().filter_map(|s| m.of(s)).filter(|x| x.is_finite()).collect();
        if v.len() < 2 {
            return None;
        }
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Some(Spread { mean, var, n })
    }
}

/// Both runs' values of a metric and what the noise model makes of their difference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub base: f64,
    pub new: f64,
    pub change_pct: f64,
    /// The smallest worse change (per cent of the base) that fails the check.
    pub threshold_pct: f64,
    /// The worse change the check catches with probability `POWER`.
    pub detectable_pct: f64,
    /// The change is worse than `threshold_pct`.
    pub beyond_noise: bool,
    /// The change is in the bad direction.
    pub worse: bool,
    /// `seed replicates (4 + 4 seeds)` or `request bootstrap (seed noise not modelled)`.
    pub model: String,
}

fn pct(change: f64, base: f64) -> f64 {
    if base != 0.0 { 100.0 * change / base.abs() } else { 0.0 }
}

fn judgement(base: f64, new: f64, higher_is_better: bool, threshold: f64, detectable: f64, model: String) -> Judgement {
    let change = new - base;
    let worse = if higher_is_better { change < 0.0 } else { change > 0.0 };
    let threshold_pct = pct(threshold, base).max(MIN_CHANGE_PCT);
    let change_pct = pct(change, base);
    Judgement {
        base,
        new,
        change_pct,
        threshold_pct,
        detectable_pct: pct(detectable, base).max(MIN_CHANGE_PCT),
        beyond_noise: change_pct.abs() > threshold_pct,
        worse,
        model,
    }
}

/// Welch's test of two points' seed replicates on one metric.
pub fn welch(base: &[SeedSample], new: &[SeedSample], m: Metric) -> Option<Judgement> {
    let (b, n) = (Spread::of(base, m)?, Spread::of(new, m)?);
    let (vb, vn) = (b.var / b.n as f64, n.var / n.n as f64);
    let se = (vb + vn).sqrt();
    // Welch–Satterthwaite degrees of freedom; with no spread on either side the difference is exact.
    let dof = if se > 0.0 { (vb + vn).powi(2) / (vb.powi(2) / (b.n - 1) as f64 + vn.powi(2) / (n.n - 1) as f64) } else { f64::INFINITY };
    let t = |p: f64| if dof.is_finite() { StudentsT::new(0.0, 1.0, dof).map(|d| d.inverse_cdf(p)).unwrap_or(f64::INFINITY) } else { 0.0 };
    let threshold = t(1.0 - ALPHA) * se;
    let detectable = threshold + t(POWER) * se;
    Some(judgement(b.mean, n.mean, m.higher_is_better(), threshold, detectable, format!("seed replicates ({} + {} seeds)", b.n, n.n)))
}

/// The fallback without replicates: the points' 95 % request-bootstrap intervals.
pub fn bootstrap(base: f64, new: f64, base_ci: (f64, f64), new_ci: (f64, f64), m: Metric) -> Judgement {
    let half = |ci: (f64, f64)| (ci.1 - ci.0).abs() / 2.0;
    let se = (half(base_ci).powi(2) + half(new_ci).powi(2)).sqrt() / 1.96;
    let z = |p: f64| statrs::distribution::Normal::standard().inverse_cdf(p);
    let threshold = z(1.0 - ALPHA) * se;
    judgement(base, new, m.higher_is_better(), threshold, threshold + z(POWER) * se, "request bootstrap (seed noise not modelled)".into())
}

/// The seeds a point's replicates use: derived from the run seed so that two runs with
/// different seeds share none.
pub fn replicate_seeds(seed: u64, n: usize) -> Vec<u64> {
    (1..=n as u64)
        .map(|k| {
            // SplitMix64 of (seed, k): well spread, stable across versions.
            let mut z = seed.wrapping_add(k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .collect()
}

/// The seed samples of a point: the primary run and its replicates, keyed by view.
pub fn sample(seed: u64, y: f64, x: &BTreeMap<View, f64>) -> SeedSample {
    SeedSample { seed, y, x: VIEWS.iter().filter_map(|v| x.get(v).map(|val| (*v, *val))).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(ys: &[f64]) -> Vec<SeedSample> {
        ys.iter().enumerate().map(|(i, y)| SeedSample { seed: i as u64, y: *y, x: BTreeMap::new() }).collect()
    }

    #[test]
    fn welch_matches_a_hand_computed_test() {
        // base mean 100, sample variance 16/3 (n 4); new mean 93, the same spread:
        // se = sqrt(2 · 16/3 / 4) = 1.633, dof 6, t(0.995, 6) = 3.707 → threshold 6.05 %.
        let j = welch(&samples(&[98.0, 102.0, 98.0, 102.0]), &samples(&[91.0, 95.0, 91.0, 95.0]), Metric::Tput).unwrap();
        assert!((j.threshold_pct - 6.054).abs() < 0.01, "{j:?}");
        assert!(j.worse && j.beyond_noise);
        // The same drop with four times the spread is within noise.
        let j = welch(&samples(&[96.0, 104.0, 96.0, 104.0]), &samples(&[89.0, 97.0, 89.0, 97.0]), Metric::Tput).unwrap();
        assert!(j.worse && !j.beyond_noise, "{j:?}");
        assert!(j.detectable_pct > j.threshold_pct);
    }

    #[test]
    fn exact_equal_runs_are_within_noise_and_tiny_changes_hit_the_floor() {
        let a = samples(&[100.0, 100.0, 100.0]);
        let j = welch(&a, &a, Metric::Tput).unwrap();
        assert!(!j.beyond_noise && j.change_pct == 0.0);
        let j = welch(&a, &samples(&[99.5, 99.5, 99.5]), Metric::Tput).unwrap();
        assert!(j.worse && !j.beyond_noise, "a 0.5 % change is under the floor: {j:?}");
        let j = welch(&a, &samples(&[98.0, 98.0, 98.0]), Metric::Tput).unwrap();
        assert!(j.beyond_noise, "{j:?}");
    }

    #[test]
    fn one_seed_is_not_a_spread() {
        assert!(welch(&samples(&[1.0]), &samples(&[1.0, 2.0]), Metric::Tput).is_none());
    }

    #[test]
    fn replicate_seeds_differ_between_runs_and_are_stable() {
        let a = replicate_seeds(42, 3);
        assert_eq!(a, replicate_seeds(42, 3));
        let b = replicate_seeds(43, 3);
        assert!(a.iter().all(|s| !b.contains(s) && *s != 42 && *s != 43));
    }
}
