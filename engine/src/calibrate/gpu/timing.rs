//! Timing on the device: CUDA events around an enqueued body, and replays of a captured
//! CUDA graph of `n` copies of an operation.

use cudarc::driver::result as drv;
use cudarc::driver::sys as drv_sys;

use super::{Ctx, Gpu, GpuError, Result};

impl Gpu {
    /// Elapsed ms of `body` enqueued once between two events.
    pub fn time_once(&self, body: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        // SAFETY: events and stream are valid for the life of self.
        unsafe { drv::event::record(self.ev0, self.stream.cu_stream()) }.at("event record")?;
        body()?;
        unsafe { drv::event::record(self.ev1, self.stream.cu_stream()) }.at("event record")?;
        unsafe { drv::event::synchronize(self.ev1) }.at("event sync")?;
        let ms = unsafe { drv::event::elapsed(self.ev0, self.ev1) }.at("event elapsed")?;
        Ok(ms as f64)
    }

    /// Median µs per operation: `op(i)` enqueued `n` times into a CUDA graph, the graph
    /// replayed `replays` times. `n` is sized from one eager run so a replay lasts about
    /// `target_ms`.
    pub fn time_graph(&self, target_ms: f64, replays: usize, op: &mut dyn FnMut(usize) -> Result<()>) -> Result<f64> {
        for i in 0..3 {
            op(i)?;
        }
        self.sync()?;
        let one = self.time_once(&mut || op(0))?;
        let n = ((target_ms / one.max(1e-3)).ceil() as usize).clamp(1, 256);
        self.graph_replay_us(n, replays, op)
    }

    /// Median µs per operation for a graph of exactly `n` operations.
    pub fn graph_replay_us(&self, n: usize, replays: usize, op: &mut dyn FnMut(usize) -> Result<()>) -> Result<f64> {
        self.stream.begin_capture(drv_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).at("begin graph capture")?;
        let mut captured = Ok(());
        for i in 0..n {
            captured = op(i);
            if captured.is_err() {
                break;
            }
        }
        let graph = self.stream.end_capture(drv_sys::CUgraphInstantiate_flags(0)).at("end graph capture")?;
        captured?;
        let graph = graph.ok_or_else(|| GpuError::Other("captured an empty graph".into()))?;
        graph.upload().at("graph upload")?;
        graph.launch().at("graph launch")?;
        self.sync()?;
        let mut times = Vec::with_capacity(replays);
        for _ in 0..replays {
            let ms = self.time_once(&mut || graph.launch().at("graph launch"))?;
            times.push(ms * 1e3 / n as f64);
        }
        Ok(median(&mut times))
    }
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}
