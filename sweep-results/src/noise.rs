//! The noise model the gate and `sweep compare` judge a change against.
//!
//! Most of the variation between two runs of one recipe is *which sessions* each point replays:
//! the seed picks the traces, their order and where each lane starts, and one long-context
//! session more or less moves a point's P90s by several per cent. A bootstrap over the requests
//! of one run cannot see that (they all share the run's sessions and its batch composition), so
//! the gate uses seed replicates: besides the run's own seed, each point is replayed with the
//! shared gate seeds (`sweep run --seed-replicates N`, the same N seeds in every run).
//!
//! - Two runs that share at least `MIN_PAIRED` seeds are compared seed by seed (common random
//!   numbers): the mean of the per-seed differences, tested with Student's t on their spread. The
//!   sessions cancel out, so a different `--seed` cannot fail the gate, and what is left is the
//!   change itself and the measurement noise of a real server.
//! - Otherwise, with at least two seeds on each side, Welch's t-test on the two sets of seeds.
//! - Otherwise the request bootstrap of the points, labelled "seed noise not modelled".
//!
//! Every test is one-sided in the bad direction at `ALPHA` (`statrs` for the quantiles), and a
//! regression also has to exceed a practical floor, `MIN_CHANGE_PCT`. `docs/gate.md` gives the
//! assumptions and the measured false-alarm rate and power.

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
/// Seeds two runs must share to be compared seed by seed.
pub const MIN_PAIRED: usize = 3;

/// A point's metrics under one seed: tok/s/GPU and each view's x.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedSample {
    pub seed: u64,
    pub y: f64,
    pub x: BTreeMap<View, f64>,
    /// GPU energy per output token (J) under this seed, where the point's power is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub j_out: Option<f64>,
}

/// The metric a check compares: `tput_per_gpu` (y) or a view's x.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Tput,
    View(View),
    /// GPU energy per output token: checked on seed replicates only (there is no request
    /// bootstrap of an energy integral).
    JoulesPerOutputToken,
}

impl Metric {
    /// The metrics the gate checks, in report order.
    pub const GATED: [Metric; 5] = [
        Metric::Tput,
        Metric::View(View::E2eNormIntvtyP90),
        Metric::View(View::IntvtyP90),
        Metric::View(View::E2elP90),
        Metric::JoulesPerOutputToken,
    ];
    pub fn key(self) -> &'static str {
        match self {
            Metric::Tput => "tput_per_gpu",
            Metric::View(v) => v.key(),
            Metric::JoulesPerOutputToken => "joules_per_output_token",
        }
    }
    pub fn higher_is_better(self) -> bool {
        match self {
            Metric::Tput => true,
            Metric::View(v) => v.higher_is_better(),
            Metric::JoulesPerOutputToken => false,
        }
    }
    pub fn of(self, s: &SeedSample) -> Option<f64> {
        match self {
            Metric::Tput => Some(s.y),
            Metric::View(v) => s.x.get(&v).copied(),
            Metric::JoulesPerOutputToken => s.j_out,
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

/// The judgement of one metric of a point in two runs: paired on shared seeds, else Welch on
/// both sets of seeds; `None` when either side has fewer than two seeds.
pub fn judge(base: &[SeedSample], new: &[SeedSample], m: Metric) -> Option<Judgement> {
    paired(base, new, m).or_else(|| welch(base, new, m))
}

/// Student's t quantile; a zero spread makes the difference exact.
fn t_quantile(p: f64, dof: f64) -> f64 {
    if !dof.is_finite() {
        return 0.0;
    }
    StudentsT::new(0.0, 1.0, dof).map(|d| d.inverse_cdf(p)).unwrap_or(f64::INFINITY)
}

/// The paired test over the seeds both points were replayed with.
pub fn paired(base: &[SeedSample], new: &[SeedSample], m: Metric) -> Option<Judgement> {
    let pairs: Vec<(f64, f64)> = base
        .iter()
        .filter_map(|b| {
            let n = new.iter().find(|n| n.seed == b.seed)?;
            Some((m.of(b)?, m.of(n)?))
        })
        .filter(|(b, n)| b.is_finite() && n.is_finite())
        .collect();
    if pairs.len() < MIN_PAIRED {
        return None;
    }
    let k = pairs.len() as f64;
    let (bm, nm) = (pairs.iter().map(|p| p.0).sum::<f64>() / k, pairs.iter().map(|p| p.1).sum::<f64>() / k);
    let dm = nm - bm;
    let var = pairs.iter().map(|(b, n)| (n - b - dm).powi(2)).sum::<f64>() / (k - 1.0);
    let se = (var / k).sqrt();
    let dof = if se > 0.0 { k - 1.0 } else { f64::INFINITY };
    let threshold = t_quantile(1.0 - ALPHA, dof) * se;
    let detectable = threshold + t_quantile(POWER, dof) * se;
    Some(judgement(bm, nm, m.higher_is_better(), threshold, detectable, format!("paired on {} shared seeds", pairs.len())))
}

/// Welch's test of two points' seed replicates on one metric.
pub fn welch(base: &[SeedSample], new: &[SeedSample], m: Metric) -> Option<Judgement> {
    let (b, n) = (Spread::of(base, m)?, Spread::of(new, m)?);
    let (vb, vn) = (b.var / b.n as f64, n.var / n.n as f64);
    let se = (vb + vn).sqrt();
    // Welch–Satterthwaite degrees of freedom; with no spread on either side the difference is exact.
    let dof = if se > 0.0 { (vb + vn).powi(2) / (vb.powi(2) / (b.n - 1) as f64 + vn.powi(2) / (n.n - 1) as f64) } else { f64::INFINITY };
    let threshold = t_quantile(1.0 - ALPHA, dof) * se;
    let detectable = threshold + t_quantile(POWER, dof) * se;
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

/// The shared gate seeds a point is also replayed with: the same in every run (so that runs can
/// be compared seed by seed), never the run's own seed.
pub fn replicate_seeds(run_seed: u64, n: usize) -> Vec<u64> {
    (1u64..)
        .map(|k| {
            // SplitMix64 of k: well spread, stable across versions.
            let mut z = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .filter(|s| *s != run_seed)
        .take(n)
        .collect()
}

/// The seed samples of a point: the primary run and its replicates, keyed by view.
pub fn sample(seed: u64, y: f64, x: &BTreeMap<View, f64>, j_out: Option<f64>) -> SeedSample {
    SeedSample { seed, y, x: VIEWS.iter().filter_map(|v| x.get(v).map(|val| (*v, *val))).collect(), j_out }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(ys: &[f64]) -> Vec<SeedSample> {
        ys.iter().enumerate().map(|(i, y)| SeedSample { seed: i as u64, y: *y, x: BTreeMap::new(), j_out: None }).collect()
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
    fn replicate_seeds_are_shared_between_runs_and_skip_the_run_seed() {
        let a = replicate_seeds(42, 3);
        assert_eq!(a, replicate_seeds(7, 3));
        assert_eq!(a.len(), 3);
        let b = replicate_seeds(a[0], 3);
        assert!(!b.contains(&a[0]) && b[..2] == a[1..]);
    }

    fn seeded(pairs: &[(u64, f64)]) -> Vec<SeedSample> {
        pairs.iter().map(|(s, y)| SeedSample { seed: *s, y: *y, x: BTreeMap::new(), j_out: None }).collect()
    }

    #[test]
    fn shared_seeds_cancel_the_sessions() {
        // Seeds move the value by ±10 %; the new run is 3 % worse on every shared seed.
        let base = seeded(&[(1, 100.0), (2, 110.0), (3, 90.0), (4, 105.0), (42, 95.0)]);
        let new = seeded(&[(1, 97.0), (2, 106.7), (3, 87.3), (4, 101.85), (7, 120.0)]);
        let j = judge(&base, &new, Metric::Tput).unwrap();
        assert!(j.model.starts_with("paired on 4"), "{j:?}");
        assert!(j.worse && j.beyond_noise, "{j:?}");
        // Unpaired, the same runs are within the seed noise.
        let w = welch(&base, &new, Metric::Tput).unwrap();
        assert!(!w.beyond_noise, "{w:?}");
        // Equal runs under different primary seeds: no change on the shared seeds.
        let same = seeded(&[(1, 100.0), (2, 110.0), (3, 90.0), (4, 105.0), (7, 80.0)]);
        let j = judge(&base, &same, Metric::Tput).unwrap();
        assert!(!j.beyond_noise && j.change_pct == 0.0, "{j:?}");
    }

    #[test]
    fn more_joules_per_token_on_the_shared_seeds_is_a_regression_and_fewer_is_not() {
        let with_j = |pairs: &[(u64, f64)]| -> Vec<SeedSample> {
            pairs.iter().map(|(s, j)| SeedSample { seed: *s, y: 1000.0, x: BTreeMap::new(), j_out: Some(*j) }).collect()
        };
        let base = with_j(&[(1, 0.50), (2, 0.55), (3, 0.45), (4, 0.52)]);
        let worse = with_j(&[(1, 0.53), (2, 0.583), (3, 0.477), (4, 0.551)]);
        let j = judge(&base, &worse, Metric::JoulesPerOutputToken).unwrap();
        assert!(j.model.starts_with("paired on 4"), "{j:?}");
        assert!(j.worse && j.beyond_noise, "6 % more energy a token: {j:?}");
        let better = with_j(&[(1, 0.47), (2, 0.517), (3, 0.423), (4, 0.489)]);
        let j = judge(&base, &better, Metric::JoulesPerOutputToken).unwrap();
        assert!(!j.worse, "{j:?}");
        // A point without power on either side is not judged on it.
        assert!(judge(&samples(&[1.0, 2.0, 3.0]), &samples(&[1.0, 2.0, 3.0]), Metric::JoulesPerOutputToken).is_none());
    }
}
