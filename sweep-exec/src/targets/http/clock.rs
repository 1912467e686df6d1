//! The client's clock: Unix nanoseconds from a monotonic source, scaled to a time-scaled server.

use std::time::{Duration, Instant};

pub(super) fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// A monotonic clock reported as Unix nanoseconds (anchored once per run). Against a
/// time-scaled server (`sweep engine serve --time-scale K`) it runs K times faster than wall
/// time, so think delays shrink and measured latencies are in the server's time, as the virtual
/// clock would see them.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    pub(super) t0: Instant,
    epoch: u64,
    scale: f64,
}

impl Clock {
    pub(super) fn new(scale: f64) -> Self {
        Clock { t0: Instant::now(), epoch: unix_ns(), scale: if scale > 0.0 { scale } else { 1.0 } }
    }
    pub(super) fn now(&self) -> u64 {
        self.epoch + (self.t0.elapsed().as_nanos() as f64 * self.scale) as u64
    }
    pub(super) fn instant(&self, ns: u64) -> Instant {
        self.t0 + Duration::from_nanos((ns.saturating_sub(self.epoch) as f64 / self.scale) as u64)
    }
}
