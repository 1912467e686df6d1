//! The reference engine: a simulated, SGLang-compatible serving engine.
//!
//! [`Engine`] reproduces SGLang's scheduler (prefill-first iterations that never mix
//! with decode, chunked prefill, admission with the decaying new-token-ratio
//! reservation, page-granular radix prefix cache with locks and LRU leaf eviction,
//! retraction on KV exhaustion, speculative decoding with `SGLANG_SIMULATE_ACC_*`
//! acceptance, attention-DP ranks in lockstep, the SGLang router's cache-aware
//! DP routing) and times every iteration with a roofline cost model of a
//! [`ModelSpec`] on a [`GpuSpec`] ([`cost`]). Results it produces are *predicted*,
//! labelled with the two profiles.
//!
//! # Driving contract (sans-IO)
//!
//! The engine owns no clock, thread or socket, and this crate depends on no async runtime, HTTP
//! stack or tokenizer: Cargo keeps it so. Its shell (the harness's discrete-event loop on a
//! virtual clock, or the HTTP server of the `engine-server` crate in real time) calls:
//!
//! 1. [`Engine::new`]`(config, model, gpu, seed)` — `config` from
//!    [`EngineConfig::from_args`] (SGLang argv + environment map); limits are
//!    resolved like SGLang's server-args post-processing ([`Engine::limits`]).
//! 2. [`Engine::submit`]`(now, request)` — queue a request that arrived at `now`.
//!    Errors ([`SubmitError`]) carry SGLang's messages and HTTP status codes: prompt
//!    longer than the context, longer than the KV pool allows, queue full, …
//!    `now` must not be earlier than the last `advance`, and events due before
//!    `now` must have been processed (`next_event_time() >= now`).
//! 3. [`Engine::next_event_time`] — when the current step ends, or when queued work
//!    can start; `None` when idle. A shell sleeps (or jumps the virtual clock) until
//!    the earlier of this and its own next event.
//! 4. [`Engine::advance`]`(to, &mut out)` — processes every step ending at or
//!    before `to` and launches the next ones, appending [`Output`]s in time order:
//!    [`Output::Tokens`] (the first token, and each later chunk with the step's
//!    end time and token count — several per step under speculative decoding or
//!    `--stream-interval`), and exactly one [`Output::Finished`] per accepted
//!    request (reason, prompt / cached / completion tokens, error if any).
//! 5. [`Engine::abort`]`(now, id)` — client disconnect; the request finishes with
//!    reason `abort` (reported at the next `advance`) and its KV is released at the
//!    step boundary.
//! 6. [`Engine::stats`] — queues, KV use, cache hit rate, speculative acceptance and
//!    counters; `stats().sampled` holds the gauges as SGLang samples them (every
//!    prefill batch and every `--decode-log-interval` decode iterations).
//!    [`Engine::info`] gives the `/server_info` view: resolved limits, profiles,
//!    and the modelled / front-end / accepted-but-not-modelled flag split.
//!
//! Requests submitted at the same instant before `advance` are scheduled together,
//! as SGLang drains its queue each iteration. A request arriving while a step runs
//! waits for the step boundary (the overlap scheduler's one-batch lag is folded into
//! the per-step cost instead). Time is integer nanoseconds ([`Time`]); every random
//! choice comes from the seeded generator in [`rng`], so the same inputs and seed
//! give identical outputs.
//!
//! # Prompts
//!
//! A [`Prompt`] is one chained hash per full block of tokens plus the token count
//! (see [`prompt`]), built from token ids or from precomputed block ids (AgentX
//! 64-token `hash_ids`). The radix cache ([`kv`]) works in units of one page (or
//! one block when blocks are larger), so matching and inserting a 600K-token prompt
//! costs a few hash comparisons per tree node on its path, not per token. All
//! requests of an engine must use one block size that divides the page size or is a
//! multiple of it. [`Request::continuation`] declares the block hashes of the output
//! so that a finished turn's cached output can match the next turn's prompt.
//!
//! # Simplifications (documented, not hidden)
//!
//! - `routing-key` orders like `fcfs`; priority scheduling and `--disable-overlap-schedule`
//!   are accepted but not modelled; `shortest-prefill-first` does not cap an in-progress
//!   chunk for shorter waiters.
//! - `--dp-size N` (full replicas) is simulated as N attention-DP ranks.
//! - CUDA-graph padding pads the token-dependent terms; padded rows read no KV.
//! - The DeepSeek-V4 per-request sliding-window state is not charged to the pool.

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
/// The YAML limits live below the engine, shared with the harness's inputs.
pub use input_limits::yaml as yaml_limits;

pub use args::{EngineConfig, FlagRecord, FlagStatus, RouterConfig};
pub use core::{
    Engine, EngineInfo, EngineStats, FinishReason, KvStats, Output, RankStats, Request, RequestError, RequestId, SampledGauges,
    SubmitError, Usage,
};
pub use limits::{ConfigError, Limits, SpecLimits};
pub use profiles::{GpuSpec, ModelSpec};
pub use prompt::Prompt;
pub use time::Time;
