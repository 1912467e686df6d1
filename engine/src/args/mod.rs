//! SGLang server flags and `SGLANG_*` environment variables → [`EngineConfig`].
//!
//! Both the 0.5.23 and the 0.5.5 spellings are accepted. Every flag is either
//! *modelled* (it changes the simulation), *front-end* (it is honoured by the HTTP
//! shell, not the scheduler) or *accepted but not modelled* (parsed and reported so
//! that results say what the simulation ignored). An unknown flag is an error that
//! names the nearest known flag, unless `--allow-unknown-flags` is given, in which
//! case it is recorded and reported as unknown.
//!
//! The flag and variable tables are `defs.rs`; reading argv against them is
//! `parse.rs`, the variables `env.rs`, the router's flags `router.rs`; what they
//! produce is `config.rs`.

mod config;
mod defs;
mod env;
mod parse;
mod router;
#[cfg(test)]
mod tests;

pub use config::{AccMethod, EngineConfig, LoadBalanceMethod, SchedulePolicy, SpecAlgorithm, SpecArgs};
pub use defs::{FlagRecord, FlagStatus};
pub use env::EngineEnv;
pub use input_limits::text::{EXCERPT_CHARS, edit_distance, excerpt, excerpt_quoted};
pub use parse::ArgsError;
pub use router::{RouterConfig, RouterPolicy};
