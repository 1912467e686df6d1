//! The reference engine: a simulated, SGLang-compatible serving engine.
//!
//! The core is a sans-IO state machine; shells (the HTTP server, the virtual-clock
//! loop in the harness) own time and I/O.

pub mod args;
pub mod cost;
pub mod kv;
pub mod profiles;
pub mod prompt;
pub mod rng;
pub mod spec_decode;
pub mod time;

pub use args::EngineConfig;
pub use profiles::{GpuSpec, ModelSpec};
pub use prompt::Prompt;
pub use time::Time;
