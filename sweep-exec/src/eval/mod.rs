//! The gsm8k eval's execution: asking a server ([`runner`]) and an eval point of `sweep run`
//! ([`point`]). Its questions, scores and files are `sweep_results::eval`, re-exported here.

pub use sweep_results::eval::*;

mod attempt;
pub mod point;
pub mod runner;
