//! The reference engine: a simulated, SGLang-compatible serving engine.
//!
//! The core is a sans-IO state machine; shells (the HTTP server, the virtual-clock
//! loop in the harness) own time and I/O.

pub mod calibrate;
