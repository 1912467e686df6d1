//! Simulated speculative acceptance (`SGLANG_SIMULATE_ACC_*` semantics).
//!
//! One accept length (accepted drafts + the bonus token) is drawn per verify step
//! and applied to every request of the batch, clamped to `[1, max_accept]`.

use crate::args::AccMethod;
use crate::rng::Rng;
use serde::Serialize;

/// Where the mean accept length came from (reported in `/server_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptSource {
    /// `SGLANG_SIMULATE_ACC_LEN`.
    SimulateEnv,
    /// Configured by the caller (e.g. the recipe's golden acceptance length).
    Configured,
    /// No information: a built-in assumption (see [`DEFAULT_ACCEPT_FRACTION`]).
    Assumed,
}

/// Without any acceptance information, assume 60 % of the drafts are accepted
/// (mean = 1 + 0.6 × drafts); reported as `assumed`.
pub const DEFAULT_ACCEPT_FRACTION: f64 = 0.6;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AcceptModel {
    pub mean: f64,
    pub method: AccMethod,
    /// steps + 1 (EAGLE/MTP) or gamma + 1 (DSpark).
    pub max_accept: u32,
    pub source: AcceptSource,
}

impl AcceptModel {
    /// Draws one accept length.
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        let x = self.mean;
        let v = match self.method {
            AccMethod::MatchExpected => {
                let f = x.floor();
                if rng.next_f64() < x - f { f + 1.0 } else { f }
            }
            AccMethod::Multinomial => (x + rng.normal()).round(),
        };
        (v.max(1.0) as u32).clamp(1, self.max_accept.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(m: &AcceptModel, n: usize, seed: u64) -> f64 {
        let mut r = Rng::new(seed);
        (0..n).map(|_| m.sample(&mut r) as f64).sum::<f64>() / n as f64
    }

    #[test]
    fn match_expected_has_exact_mean_and_two_values() {
        let m = AcceptModel { mean: 3.39, method: AccMethod::MatchExpected, max_accept: 4, source: AcceptSource::SimulateEnv };
        let mut r = Rng::new(42);
        for _ in 0..1000 {
            assert!(matches!(m.sample(&mut r), 3 | 4));
        }
        let mean = mean_of(&m, 10_000, 42);
        assert!((mean - 3.39).abs() < 0.02, "{mean}");
    }

    #[test]
    fn clamped_to_window() {
        let m = AcceptModel { mean: 6.0, method: AccMethod::MatchExpected, max_accept: 4, source: AcceptSource::SimulateEnv };
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| m.sample(&mut r) == 4));
    }

    #[test]
    fn multinomial_is_biased_by_the_clamp() {
        let m = AcceptModel { mean: 3.5, method: AccMethod::Multinomial, max_accept: 4, source: AcceptSource::SimulateEnv };
        let mean = mean_of(&m, 20_000, 3);
        assert!(mean < 3.4 && mean > 2.8, "{mean}");
    }
}
