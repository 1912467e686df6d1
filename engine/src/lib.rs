//! The reference engine: a simulated, SGLang-compatible serving engine.
//!
//! The core is a sans-IO state machine; shells (the HTTP server, the virtual-clock
//! loop in the harness) own time and I/O.

pub mod args;
pub mod calibrate;
pub mod core;
pub mod cost;
pub mod kv;
pub mod limits;
pub mod profiles;
pub mod prompt;
pub mod rng;
pub mod spec_decode;
pub mod time;

pub use args::EngineConfig;
pub use core::{
    Engine, EngineStats, FinishReason, Output, RankStats, Request, RequestError, RequestId,
    SampledGauges, SubmitError, Usage,
};
pub use limits::{ConfigError, Limits, SpecLimits};
pub use profiles::{GpuSpec, ModelSpec};
pub use prompt::Prompt;
pub use time::Time;
