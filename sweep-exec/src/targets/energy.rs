//! The engine's predicted energy over a point's profiling window: its energy counter read when
//! profiling starts and ends on the virtual clock, and the power keys it gives the point.

use engine::{Engine, Time};
use serde_json::json;

use super::sim::SimRun;
use crate::workload::Action;

/// One GPU's cumulative energy, joules, at the profiling window's edges (none without a power
/// model): the engine prices a step when it starts, so a mark is exact to within one step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EnergyMarks {
    pub start: Option<f64>,
    pub end: Option<f64>,
}

impl EnergyMarks {
    /// Records the mark of a profiling action before the ledger takes it.
    pub(super) fn see(&mut self, engine: &Engine, action: &Action) {
        match action {
            Action::ProfilingStarted { at, .. } => self.start = engine.gpu_energy_j(Time(*at)),
            Action::ProfilingEnded { at } => self.end = engine.gpu_energy_j(Time(*at)),
            _ => {}
        }
    }

    /// One GPU's energy over the window `(start, end)` of a run that stopped at `now`: a window
    /// still open at the end runs to its deadline at idle power.
    pub fn window_j(&self, engine: &Engine, window: (u64, u64), now: u64) -> Option<f64> {
        let start = self.start?;
        let end = match self.end {
            Some(e) => e,
            None => {
                let idle = engine.gpu().power.as_ref()?.idle_w;
                engine.gpu_energy_j(Time(now))? + idle * window.1.saturating_sub(now) as f64 / 1e9
            }
        };
        Some(end - start)
    }
}

/// The engine's predicted energy over the profiling window, every GPU of the point, with the
/// power model it came from.
pub(super) fn predicted_power(run: &SimRun, engine: &Engine, gpus: u32) -> Option<crate::power::PointPower> {
    let per_gpu = run.energy_marks.window_j(engine, run.profiling?, run.end_ns)?;
    let mut model = serde_json::to_value(engine.gpu().power.as_ref()?).ok()?;
    model["hardware_profile"] = json!(engine.gpu().name);
    Some(crate::power::PointPower::Predicted { total_gpu_energy_j: per_gpu * f64::from(gpus.max(1)), model })
}
