//! Model and hardware profiles (`profiles/{models,hardware}/*.yaml`), embedded in the
//! binary so the engine works from any directory; files on disk can override them.
//!
//! This is the engine's only YAML module. A model profile is `model.rs`, a hardware
//! profile `hardware.rs` with the curves measured on the GPU (`curves.rs`) and the
//! record of a fit (`fit.rs`); `shapes.rs` lists a model's weight shapes; reading and
//! lookup are `load.rs`. The cost model and calibration build on these; none of them
//! depends on either.

pub mod curves;
mod fit;
mod hardware;
mod load;
mod model;
mod power;
pub mod shapes;
#[cfg(test)]
mod tests;

pub use fit::{CoarseRecord, CorpusRecord, FitParameter, FitPoint, FitRecord, FitResidual, WorkloadScales};
pub use hardware::{CostParams, Datasheet, Flops, GpuSpec, Roofline};
pub use load::ProfileError;
pub use model::{
    BytesPerParam, DenseParams, DraftKind, DraftSpec, Dtype, Experts, ExtraWeights, KvLayout, ModelFamily, ModelSpec, SglangDefaults,
};
pub use power::PowerModel;
