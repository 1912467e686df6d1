//! Distributions fitted to published percentiles (and a mean), for the `--like` generator.
//!
//! A [`QuantileFn`] is a quantile function whose logarithm is piecewise linear in the normal
//! score `z = Φ⁻¹(p)` through the published knots: between two knots the distribution is exactly
//! a log-normal through both, so one pair of knots gives the log-normal of `statrs`. Beyond the
//! outer knots the nearest segment's log-normal continues (its `σ` is the tail slope) unless a
//! mean is also published: then one tail's slope is solved so the mean matches. Values are
//! clamped to `[lo, hi]` (e.g. the corpus's input-length filter).

use statrs::distribution::{ContinuousCDF, LogNormal, Normal};

/// Points of the midpoint grid used for means: fine enough that the solved mean is exact to
/// well under the 2 % count tolerance, cheap enough to solve in microseconds.
const MEAN_GRID: usize = 4096;

fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("unit normal")
}

/// Why no distribution fits the published percentiles and mean.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantileError {
    #[error("a distribution needs at least one percentile")]
    NoPercentiles,
    #[error("percentile knot ({p}, {x}) must have 0 < p < 1 and a positive finite value")]
    BadKnot { p: f64, x: f64 },
    #[error("percentiles must increase with p: p{} = {x} is below p{} = {prev_x}", .p * 100.0, .prev_p * 100.0)]
    NotIncreasing { p: f64, x: f64, prev_p: f64, prev_x: f64 },
    #[error("log-normal (median {median}, σ {sigma}): {source}")]
    LogNormal {
        median: f64,
        sigma: f64,
        #[source]
        source: statrs::distribution::LogNormalError,
    },
    #[error("mean {target} must be positive")]
    MeanNotPositive { target: f64 },
    #[error("no tail fits mean {target:.1} with these percentiles (reachable about {min:.1}–{max:.1})")]
    MeanUnreachable { target: f64, min: f64, max: f64 },
    #[error("neither percentiles nor a mean")]
    Nothing,
}

/// A fitted continuous distribution given by its quantile function.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantileFn {
    /// Knots: normal score and ln(value), increasing in both.
    z: Vec<f64>,
    lnx: Vec<f64>,
    /// `σ` of the log-normal tails below the first and above the last knot.
    pub lo_slope: f64,
    pub hi_slope: f64,
    pub lo: f64,
    pub hi: f64,
}

impl QuantileFn {
    /// Through percentile knots `(p in (0,1), value > 0)`. With one knot the tails take
    /// `default_sigma`; with more, each tail continues its nearest segment.
    pub fn from_percentiles(knots: &[(f64, f64)], default_sigma: f64, lo: f64, hi: f64) -> Result<Self, QuantileError> {
        if knots.is_empty() {
            return Err(QuantileError::NoPercentiles);
        }
        let n = std_normal();
        let mut pts: Vec<(f64, f64)> = knots.to_vec();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut z = Vec::with_capacity(pts.len());
        let mut lnx = Vec::with_capacity(pts.len());
        for (i, &(p, x)) in pts.iter().enumerate() {
            if !(p > 0.0 && p < 1.0 && x > 0.0 && x.is_finite()) {
                return Err(QuantileError::BadKnot { p, x });
            }
            if i > 0 && (p <= pts[i - 1].0 || x < pts[i - 1].1) {
                return Err(QuantileError::NotIncreasing { p, x, prev_p: pts[i - 1].0, prev_x: pts[i - 1].1 });
            }
            z.push(n.inverse_cdf(p));
            lnx.push(x.ln());
        }
        let k = z.len();
        let (lo_slope, hi_slope) = if k == 1 {
            (default_sigma, default_sigma)
        } else {
            ((lnx[1] - lnx[0]) / (z[1] - z[0]), (lnx[k - 1] - lnx[k - 2]) / (z[k - 1] - z[k - 2]))
        };
        Ok(Self { z, lnx, lo_slope, hi_slope, lo, hi })
    }

    /// The log-normal with this median and `σ` (statrs' parametrisation: location ln(median)).
    pub fn lognormal(median: f64, sigma: f64, lo: f64, hi: f64) -> Result<Self, QuantileError> {
        let d = LogNormal::new(median.ln(), sigma).map_err(|source| QuantileError::LogNormal { median, sigma, source })?;
        // Two knots of the statrs distribution fix location and scale exactly.
        Self::from_percentiles(&[(0.5, d.inverse_cdf(0.5)), (0.9, d.inverse_cdf(0.9))], sigma, lo, hi)
    }

    /// Value at probability `p` (clamped to `[lo, hi]`).
    pub fn quantile(&self, p: f64) -> f64 {
        let p = p.clamp(1e-12, 1.0 - 1e-12);
        self.at_z(std_normal().inverse_cdf(p))
    }

    fn at_z(&self, zz: f64) -> f64 {
        let k = self.z.len();
        let l = if zz <= self.z[0] {
            self.lnx[0] + (zz - self.z[0]) * self.lo_slope
        } else if zz >= self.z[k - 1] {
            self.lnx[k - 1] + (zz - self.z[k - 1]) * self.hi_slope
        } else {
            let i = self.z.partition_point(|&v| v <= zz) - 1;
            let f = (zz - self.z[i]) / (self.z[i + 1] - self.z[i]);
            self.lnx[i] + f * (self.lnx[i + 1] - self.lnx[i])
        };
        l.exp().clamp(self.lo, self.hi)
    }

    /// Mean over a midpoint grid of probabilities (the generator samples the same way).
    pub fn mean(&self) -> f64 {
        (0..MEAN_GRID).map(|i| self.quantile((i as f64 + 0.5) / MEAN_GRID as f64)).sum::<f64>() / MEAN_GRID as f64
    }

    /// Solve one tail's slope so the mean is `target`: the upper tail when the knots allow it,
    /// else the lower one. With a single knot both tails move together (a log-normal).
    pub fn with_mean(mut self, target: f64) -> Result<Self, QuantileError> {
        if !(target > 0.0 && target.is_finite()) {
            return Err(QuantileError::MeanNotPositive { target });
        }
        let solve = |f: &mut Self, set: fn(&mut Self, f64)| -> bool {
            let (mut a, mut b) = (0.0f64, 6.0f64);
            set(f, a);
            let ma = f.mean();
            set(f, b);
            let mb = f.mean();
            if !(ma <= target && target <= mb) {
                return false;
            }
            for _ in 0..60 {
                let m = 0.5 * (a + b);
                set(f, m);
                if f.mean() < target { a = m } else { b = m }
            }
            set(f, 0.5 * (a + b));
            true
        };
        if self.z.len() == 1 {
            if solve(&mut self, |f, s| {
                f.lo_slope = s;
                f.hi_slope = s
            }) {
                return Ok(self);
            }
        } else {
            let keep = self.lo_slope;
            if solve(&mut self, |f, s| f.hi_slope = s) {
                return Ok(self);
            }
            // The upper tail alone cannot lower the mean enough: flatten it and stretch the
            // lower tail (a larger σ there lowers the mean).
            self.hi_slope = 0.0;
            self.lo_slope = keep;
            let (mut a, mut b) = (0.0f64, 6.0f64);
            let mean_at = |f: &mut Self, s: f64| {
                f.lo_slope = s;
                f.mean()
            };
            let (ma, mb) = (mean_at(&mut self, a), mean_at(&mut self, b));
            if ma >= target && target >= mb {
                for _ in 0..60 {
                    let m = 0.5 * (a + b);
                    if mean_at(&mut self, m) > target { a = m } else { b = m }
                }
                self.lo_slope = 0.5 * (a + b);
                return Ok(self);
            }
        }
        Err(QuantileError::MeanUnreachable { target, min: self.min_mean(), max: self.max_mean() })
    }

    fn min_mean(&self) -> f64 {
        let mut f = self.clone();
        f.hi_slope = 0.0;
        f.lo_slope = 6.0;
        f.mean()
    }

    fn max_mean(&self) -> f64 {
        let mut f = self.clone();
        f.hi_slope = 6.0;
        f.lo_slope = 0.0;
        f.mean()
    }
}

/// Fit from whatever a stats file lists: percentiles (any of p50/p90/p99), a mean, both or
/// either. One percentile plus a mean gives the log-normal with that median and mean.
pub fn fit(pcts: &[(f64, f64)], mean: Option<f64>, default_sigma: f64, lo: f64, hi: f64) -> Result<QuantileFn, QuantileError> {
    match (pcts.len(), mean) {
        (0, Some(m)) => QuantileFn::lognormal(m / (default_sigma * default_sigma / 2.0).exp(), default_sigma, lo, hi)?.with_mean(m),
        (0, None) => Err(QuantileError::Nothing),
        (1, Some(m)) if pcts[0].0 == 0.5 && m > pcts[0].1 => {
            let sigma = (2.0 * (m / pcts[0].1).ln()).sqrt();
            QuantileFn::lognormal(pcts[0].1, sigma, lo, hi)?.with_mean(m)
        }
        (_, Some(m)) => QuantileFn::from_percentiles(pcts, default_sigma, lo, hi)?.with_mean(m),
        (_, None) => QuantileFn::from_percentiles(pcts, default_sigma, lo, hi),
    }
}

/// `n` stratified probabilities: one uniform draw inside each of `n` equal slices, shuffled, so
/// a sample of `n` reproduces the distribution's quantiles for any seed.
pub fn stratified(n: usize, rng: &mut impl rand::Rng) -> Vec<f64> {
    use rand::seq::SliceRandom;
    let mut v: Vec<f64> = (0..n).map(|i| (i as f64 + rng.random::<f64>()) / n as f64).collect();
    v.shuffle(rng);
    v
}

/// Round `values` to integers ≥ `min` whose sum is exactly `total` (when reachable): the
/// difference is spread over the largest values first, in proportion to their excess over `min`,
/// so medians barely move.
pub fn integer_total(values: &[f64], min: u64, total: u64) -> Vec<u64> {
    let mut out: Vec<u64> = values.iter().map(|v| (v.round().max(min as f64)) as u64).collect();
    let floor = min * out.len() as u64;
    if out.is_empty() || total < floor {
        return out;
    }
    for _ in 0..8 {
        let sum: u64 = out.iter().sum();
        if sum == total {
            break;
        }
        let excess: u64 = out.iter().map(|&v| v - min).sum();
        if excess == 0 {
            break;
        }
        let scale = (total - floor) as f64 / excess as f64;
        for v in out.iter_mut() {
            *v = min + ((*v - min) as f64 * scale).round() as u64;
        }
    }
    // The last few units, one each, on the largest values.
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| out[b].cmp(&out[a]));
    let mut sum: i64 = out.iter().sum::<u64>() as i64;
    let mut i = 0;
    while sum != total as i64 && i < 10 * out.len() {
        let j = order[i % order.len()];
        if sum < total as i64 {
            out[j] += 1;
            sum += 1;
        } else if out[j] > min {
            out[j] -= 1;
            sum -= 1;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn two_knots_are_the_statrs_lognormal() {
        let q = QuantileFn::from_percentiles(&[(0.5, 64000.0), (0.9, 196326.0)], 1.0, 0.0, f64::INFINITY).unwrap();
        let sigma = (196326.0f64 / 64000.0).ln() / std_normal().inverse_cdf(0.9);
        let d = LogNormal::new(64000f64.ln(), sigma).unwrap();
        for p in [0.01, 0.1, 0.5, 0.75, 0.9, 0.99] {
            let (a, b) = (q.quantile(p), d.inverse_cdf(p));
            assert!((a / b - 1.0).abs() < 1e-9, "p{p}: {a} vs {b}");
        }
        // And its mean is the log-normal mean.
        let want = 64000.0 * (sigma * sigma / 2.0).exp();
        assert!((q.mean() / want - 1.0).abs() < 0.01, "{} vs {want}", q.mean());
    }

    #[test]
    fn knots_are_hit_exactly_and_clamped() {
        let q = QuantileFn::from_percentiles(&[(0.5, 254080.0), (0.9, 651008.0), (0.99, 897672.0)], 1.0, 64.0, 990016.0).unwrap();
        for (p, x) in [(0.5, 254080.0), (0.9, 651008.0), (0.99, 897672.0)] {
            assert!((q.quantile(p) / x - 1.0).abs() < 1e-9);
        }
        assert_eq!(q.quantile(0.999999), 990016.0);
        assert!(q.quantile(0.7) > 254080.0 && q.quantile(0.7) < 651008.0);
    }

    #[test]
    fn mean_is_solved_on_a_tail_without_moving_the_knots() {
        // Main OSL of the published corpus: the log-normal through p50/p90 has mean ≈ 1,545.
        let q = fit(&[(0.5, 616.0), (0.9, 3502.0)], Some(1374.0), 1.0, 1.0, 1e6).unwrap();
        assert!((q.mean() / 1374.0 - 1.0).abs() < 1e-3, "{}", q.mean());
        assert!((q.quantile(0.5) / 616.0 - 1.0).abs() < 1e-9);
        assert!((q.quantile(0.9) / 3502.0 - 1.0).abs() < 1e-9);
        assert!(q.hi_slope < q.lo_slope, "a lighter upper tail lowers the mean");
        // Median and mean alone: the log-normal with σ = √(2 ln(mean/median)).
        let q = fit(&[(0.5, 16.0)], Some(24.77), 1.0, 1.0, 1e9).unwrap();
        assert!((q.mean() / 24.77 - 1.0).abs() < 1e-3);
        assert!((q.quantile(0.5) - 16.0).abs() < 1e-9);
        // An impossible mean is an error that says what is reachable.
        let e = fit(&[(0.5, 616.0), (0.9, 3502.0)], Some(100.0), 1.0, 1.0, 1e6).unwrap_err().to_string();
        assert!(e.contains("reachable"), "{e}");
    }

    #[test]
    fn non_increasing_percentiles_are_rejected() {
        let e = QuantileFn::from_percentiles(&[(0.5, 10.0), (0.9, 5.0)], 1.0, 0.0, 1e9).unwrap_err().to_string();
        assert!(e.contains("p90") && e.contains("p50"), "{e}");
    }

    #[test]
    fn stratified_samples_reproduce_quantiles() {
        let q = QuantileFn::lognormal(65.0, 1.268, 20.0, 1e9).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut xs: Vec<f64> = stratified(393, &mut rng).into_iter().map(|u| q.quantile(u)).collect();
        xs.sort_by(f64::total_cmp);
        let p50 = super::super::stats::percentile(&xs, 50.0);
        let p90 = super::super::stats::percentile(&xs, 90.0);
        assert!((p50 / 65.0 - 1.0).abs() < 0.03, "{p50}");
        assert!((p90 / q.quantile(0.9) - 1.0).abs() < 0.03, "{p90}");
    }

    #[test]
    fn integer_totals_are_exact_and_respect_the_minimum() {
        let v = [20.0, 25.5, 60.0, 300.0, 1200.0];
        let out = integer_total(&v, 20, 1700);
        assert_eq!(out.iter().sum::<u64>(), 1700);
        assert!(out.iter().all(|&x| x >= 20));
        assert_eq!(out[0], 20);
        let out = integer_total(&v, 20, 1000);
        assert_eq!(out.iter().sum::<u64>(), 1000);
    }
}
