//! The gsm8k eval as InferenceX runs it (lm-eval's `local-chat-completions` with InferenceX's
//! `gsm8k.yaml` and `run_lm_eval.sh` settings), without Python.
//!
//! - [`data`]: the GSM8K splits (embedded, or a folder);
//! - [`pyrandom`]: CPython's generator, for lm-eval's few-shot draws;
//! - [`task`]: prompts (5-shot chat turns), the request body, the output budget;
//! - [`score`]: the filters, `exact_match` and the mean with its standard error (pure);
//! - [`record`]: the files of an eval, read back (executes nothing: the gate, reports and the
//!   verifier use it);
//! - [`write`]: writing those files;
//! - [`runner`]: asking a server, with retries, resumable through `samples.jsonl`.
//!
//! An eval point of `sweep run` calls [`runner::run`] with an [`runner::EvalConfig`] for the
//! server it launched, or [`write::not_applicable`] for the reference engine.

pub mod data;
mod folders;
pub mod pyrandom;
pub mod record;
pub mod reply;
pub mod score;
pub mod task;
pub mod write;
