//! A GPU's board power as a function of what a step asks of it: the cost model knows, step by
//! step, how long the tensor cores and HBM are busy, and power follows that activity.
//!
//! ```text
//! P(step) = min(limit, idle + active + compute · compute_s / t + memory · memory_s / t)
//! P(no step) = idle
//! ```
//! `active` is what any running kernel adds (clocks and voltage up, SMs and caches awake);
//! `compute` and `memory` what full tensor-core and full HBM use add on top. Energy is power
//! integrated over the virtual clock; NVLink traffic and the host are not counted, as
//! InferenceX's `nvidia-smi power.draw` does not count them either.

use serde::{Deserialize, Serialize};

use crate::cost::StepCost;

/// Board power of one GPU, in watts, and where the figures come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerModel {
    /// No kernel running.
    pub idle_w: f64,
    /// Added while any kernel runs.
    pub active_w: f64,
    /// Added at full tensor-core use.
    pub compute_w: f64,
    /// Added at full HBM bandwidth.
    pub memory_w: f64,
    /// The board's power limit (TDP): no step draws more.
    pub limit_w: f64,
    /// `measured …` (with how and when) or `datasheet …` (the TDP's source, and that the
    /// split is assumed): predictions carry it.
    pub source: String,
}

impl PowerModel {
    /// Mean board power over a step with these parts.
    pub fn step_watts(&self, c: &StepCost) -> f64 {
        let t = c.total.as_secs_f64();
        if t <= 0.0 {
            return self.idle_w;
        }
        let share = |x: f64| (x / t).clamp(0.0, 1.0);
        let p = self.idle_w + self.active_w + self.compute_w * share(c.compute_s) + self.memory_w * share(c.memory_s);
        p.min(self.limit_w)
    }

    /// Energy of one step above idle, joules.
    pub fn step_active_joules(&self, c: &StepCost) -> f64 {
        (self.step_watts(c) - self.idle_w) * c.total.as_secs_f64()
    }

    /// The checks a profile's power block must pass: finite, non-negative, idle below the limit.
    pub fn problem(&self) -> Option<String> {
        let all = [
            ("idle_w", self.idle_w),
            ("active_w", self.active_w),
            ("compute_w", self.compute_w),
            ("memory_w", self.memory_w),
            ("limit_w", self.limit_w),
        ];
        if let Some((k, v)) = all.iter().find(|(_, v)| !v.is_finite() || *v < 0.0) {
            return Some(format!("power.{k} is {v}: give a finite number of watts, 0 or more"));
        }
        (self.idle_w >= self.limit_w).then(|| format!("power.idle_w ({}) must be below power.limit_w ({})", self.idle_w, self.limit_w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    fn h200() -> PowerModel {
        PowerModel { idle_w: 80.0, active_w: 120.0, compute_w: 450.0, memory_w: 250.0, limit_w: 700.0, source: "test".into() }
    }

    fn step(total_s: f64, compute_s: f64, memory_s: f64) -> StepCost {
        StepCost { total: Time::from_secs_f64(total_s), compute_s, memory_s, ..StepCost::default() }
    }

    #[test]
    fn a_step_draws_what_its_busy_shares_ask_and_never_more_than_the_limit() {
        let m = h200();
        // Memory-bound decode: HBM busy 80 % of the step, tensor cores 10 %.
        let decode = step(0.010, 0.001, 0.008);
        assert!((m.step_watts(&decode) - (80.0 + 120.0 + 45.0 + 200.0)).abs() < 1e-9);
        // A compute-bound prefill at full tensor-core use with HBM also busy hits the limit.
        assert_eq!(m.step_watts(&step(0.5, 0.5, 0.4)), 700.0);
        // Host-bound: nothing busy but the launch, active power only.
        assert!((m.step_watts(&step(0.1, 0.0, 0.0)) - 200.0).abs() < 1e-9);
        assert!((m.step_active_joules(&decode) - (445.0 - 80.0) * 0.010).abs() < 1e-9);
    }

    #[test]
    fn a_power_block_with_a_negative_or_inverted_figure_is_refused() {
        let mut m = h200();
        assert_eq!(m.problem(), None);
        m.memory_w = -1.0;
        assert!(m.problem().unwrap().contains("power.memory_w"));
        m = h200();
        m.idle_w = 800.0;
        assert!(m.problem().unwrap().contains("below power.limit_w"));
    }
}
