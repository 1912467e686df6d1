//! GPU calibration: measure the GPU the engine models, store the curves in a hardware
//! profile, and check the cost model's step times against real ones.
//!
//! The data types, interpolation and step predictions build everywhere; the measurement
//! itself (`gpu`, `measure`) needs the cargo feature `cuda` and loads CUDA at run time.

pub mod steps;

#[cfg(feature = "cuda")]
mod chain;
#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(feature = "cuda")]
pub mod measure;

// What a calibration run measures and stores is profile data (the cost model reads it
// too); it is reachable from here as calibration's output.
pub use crate::profiles::{curves, shapes};
pub use curves::{Dtype, MeasuredCurves};
pub use shapes::ModelShape;
pub use steps::{StepComparison, StepMeasurement, StepMode};
