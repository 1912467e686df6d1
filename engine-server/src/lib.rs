//! `sweep engine serve`: the reference engine ([`engine`], sans-I/O) in real time behind SGLang's
//! HTTP API, with the tokenizers its chat endpoint needs.
//!
//! [`server`] drives one [`engine::Engine`] on a wall clock (optionally time-scaled) from an
//! engine thread, serves SGLang's OpenAI-compatible routes, metrics and admin endpoints through
//! axum and hyper, and streams tokens as SGLang does; [`tokenize`] turns chat requests into
//! token ids (built-in vocabulary, Hugging Face tokenizers, fastokens) and prompts into the
//! engine's block hashes. The engine crate itself knows no clock, socket, thread or tokenizer;
//! everything that does lives here.

pub mod server;
pub mod tokenize;
