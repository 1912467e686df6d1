//! InferenceX's fixed-sequence-length scenario as a sans-IO state machine: the random workload of
//! `benchmark_serving.py` (`--dataset-name random --request-rate inf --max-concurrency C
//! --ignore-eos`, `num-prompts` 10 × C, `num-warmups` 2 × C), driven by the same drivers and
//! ledger as the AgentX replay through [`super::Machine`].
//!
//! What it reproduces, in `benchmark_serving`'s order:
//! - lengths: `np.random.seed(seed)`, then input lengths uniform in [⌊ratio·ISL⌋, ISL], output
//!   lengths in [⌊ratio·OSL⌋, OSL], and the token offsets, each a `randint` of `num_prompts` draws
//!   from numpy's legacy generator ([`numpy::RandomState`]): the same seed gives the same lengths,
//!   request by request;
//! - warmup: `num_warmups` copies of request 0 (its prompt and output length), at most C at once,
//!   all awaited before the main run; their records are `warmup` and never measured;
//! - main run: every request sent in order through a C-slot semaphore (a closed loop: the next
//!   starts when one ends), the benchmark's duration from the first send to the last end;
//! - failures are counted, never retried; the run fails when more than 5 % of the requests failed
//!   (`benchmark_serving`'s `max_failure_rate`).
//!
//! What it cannot reproduce: the prompt's text. `benchmark_serving` decodes the token ids
//! `(offset + i + j) mod vocab` with the model's tokenizer and re-encodes them until the count
//! matches; here every prompt is synthesized content of exactly the drawn length in the target's
//! own vocabulary (unique per request, so no two prompts share a prefix, as with random tokens).

pub mod numpy;

use std::collections::HashMap;
use std::sync::Arc;

use super::{Action, Event, Failure, Machine, Outcome, Phase, RequestId, RequestKind, RequestSpec, SourceKind, WorkloadStats};
use crate::prompt::{ConversationPlan, TraceIds, TurnPrompt};

/// The profiling window's end is not known until the last request ends: the window is open
/// until the machine's `ProfilingEnded`.
pub const OPEN_DEADLINE: u64 = u64::MAX;

pub use crate::metrics::serving::MAX_FAILURE_RATE;

/// Which OpenAI endpoint the requests go to (`benchmark_serving --backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// `/v1/chat/completions` with the conversation's messages (AgentX; `--backend openai-chat`).
    #[default]
    Chat,
    /// `/v1/completions` with the prompt as text (`--backend vllm`, `sglang`, `openai`: what
    /// InferenceX's fixed-length launch scripts use).
    Completions,
}

/// The scenario's parameters (defaults: InferenceX's workflow).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FixedConfig {
    pub isl: u32,
    pub osl: u32,
    /// `--random-range-ratio`: lengths are drawn in [⌊ratio·L⌋, L].
    pub range_ratio: f64,
    pub num_prompts: u32,
    pub num_warmups: u32,
    /// `--max-concurrency`.
    pub concurrency: u32,
    /// `--seed` (numpy's global generator).
    pub seed: u32,
    /// The tokenizer's `vocab_size` (the range of the token offsets drawn after the lengths).
    pub vocab_size: u32,
    pub api: Api,
}

impl FixedConfig {
    /// A point as InferenceX runs it: range ratio 0.8, 10 × C prompts, 2 × C warmups, seed 0,
    /// the completions endpoint (`--backend vllm`).
    pub fn inferencex(isl: u32, osl: u32, concurrency: u32) -> Self {
        FixedConfig {
            isl,
            osl,
            range_ratio: 0.8,
            num_prompts: concurrency.saturating_mul(10),
            num_warmups: concurrency.saturating_mul(2),
            concurrency,
            seed: 0,
            vocab_size: DEEPSEEK_VOCAB_SIZE,
            api: Api::Completions,
        }
    }

    /// Checks what `benchmark_serving` would accept, with the field to fix.
    pub fn validate(&self) -> Result<(), FixedError> {
        if self.isl == 0 {
            return Err(FixedError::Field("isl", "must be at least 1 token".into()));
        }
        if self.osl == 0 {
            return Err(FixedError::Field("osl", "must be at least 1 token".into()));
        }
        if !(self.range_ratio > 0.0 && self.range_ratio <= 1.0) {
            return Err(FixedError::Field("random-range-ratio", format!("{} is outside (0, 1]; InferenceX uses 0.8", self.range_ratio)));
        }
        if self.concurrency == 0 {
            return Err(FixedError::Field("concurrency", "must be at least 1".into()));
        }
        if self.num_prompts == 0 {
            return Err(FixedError::Field("num-prompts", "must be at least 1".into()));
        }
        if self.vocab_size == 0 {
            return Err(FixedError::Field("vocab-size", "must be at least 1".into()));
        }
        Ok(())
    }
}

/// `vocab_size` of the DeepSeek-V3/R1 tokenizer as `transformers` reports it (the base
/// vocabulary without added tokens).
pub const DEEPSEEK_VOCAB_SIZE: u32 = 128_000;

/// A fixed-length configuration that cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FixedError {
    #[error("fixed-seq-len `{0}`: {1}")]
    Field(&'static str, String),
}

/// One drawn request: its prompt length, output length and token offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Drawn {
    pub input_len: u32,
    pub output_len: u32,
    pub offset: u32,
}

/// The requests `benchmark_serving`'s `sample_random_requests` draws (prefix length 0), in order.
pub fn sample(cfg: &FixedConfig) -> Vec<Drawn> {
    let n = cfg.num_prompts as usize;
    let mut rs = numpy::RandomState::new(cfg.seed);
    let mut uniform = |len: u32| {
        // Python's `int(seq_len * range_ratio)`: truncation of the double product.
        let lower = (f64::from(len) * cfg.range_ratio) as i64;
        rs.randint(lower, i64::from(len) + 1, n)
    };
    let ins = uniform(cfg.isl);
    let outs = uniform(cfg.osl);
    let offsets = rs.randint(0, i64::from(cfg.vocab_size), n);
    (0..n).map(|i| Drawn { input_len: ins[i] as u32, output_len: outs[i] as u32, offset: offsets[i] as u32 }).collect()
}

/// A drawn request ready to send: its one-turn prompt (content unique to the request).
struct Prepared {
    drawn: Drawn,
    prompt: Arc<ConversationPlan>,
    name: Arc<str>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    NotStarted,
    Warmup { sent: u32, done: u32 },
    Main { next: u32, done: u32, failed: u32 },
    Done,
}

/// The fixed-length closed loop.
pub struct FixedWorkload {
    cfg: FixedConfig,
    requests: Vec<Prepared>,
    stage: Stage,
    inflight: HashMap<RequestId, u32>,
    next_id: RequestId,
    stats: WorkloadStats,
    source: Arc<str>,
}

impl FixedWorkload {
    pub fn new(cfg: FixedConfig) -> Result<Self, FixedError> {
        cfg.validate()?;
        let key = crate::prompt::sha_key(&[b"fixed-seq-len", &cfg.seed.to_le_bytes(), &cfg.isl.to_le_bytes(), &cfg.osl.to_le_bytes()]);
        let requests = sample(&cfg)
            .into_iter()
            .enumerate()
            .map(|(i, drawn)| {
                let req = crate::trace::Request {
                    t: 0.0,
                    model: String::new(),
                    input_tokens: u64::from(drawn.input_len),
                    output_tokens: u64::from(drawn.output_len),
                    hash_ids: Vec::new(),
                    api_time: None,
                    think_time: None,
                    ttft: None,
                    input_types: None,
                    output_types: None,
                    stop: None,
                };
                let conv = crate::prompt::mix64(key ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let plan = ConversationPlan::build(key, conv, 64, Some(0), &[&req], &[(0, 0)], &mut TraceIds::default());
                Prepared { drawn, prompt: Arc::new(plan), name: format!("random-{i}").into() }
            })
            .collect();
        let source = format!("random-{}-{}", cfg.isl, cfg.osl).into();
        Ok(FixedWorkload {
            cfg,
            requests,
            stage: Stage::NotStarted,
            inflight: HashMap::new(),
            next_id: 1,
            stats: WorkloadStats::default(),
            source,
        })
    }

    pub fn config(&self) -> &FixedConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &WorkloadStats {
        &self.stats
    }

    /// The drawn requests, in order.
    pub fn drawn(&self) -> impl Iterator<Item = &Drawn> {
        self.requests.iter().map(|r| &r.drawn)
    }

    fn send(&mut self, index: u32, phase: Phase, out: &mut Vec<Action>) {
        let id = self.next_id;
        self.next_id += 1;
        let r = &self.requests[index as usize];
        let spec = RequestSpec {
            id,
            lane: (id - 1) as u32 % self.cfg.concurrency,
            play: u64::from(index),
            pass: 0,
            phase,
            kind: if phase == Phase::Warmup { RequestKind::LaneWarmup } else { RequestKind::Turn },
            conversation_id: r.name.clone(),
            correlation_id: format!("{}-{id}", r.name).into(),
            root_correlation_id: r.name.clone(),
            turn_index: 0,
            stream: 0,
            max_tokens: u64::from(r.drawn.output_len),
            recorded_output_tokens: u64::from(r.drawn.output_len),
            prompt: TurnPrompt { conversation: r.prompt.clone(), turn: 0, marker: None },
            source_trace_id: self.source.clone(),
            source_outer_idx: index,
            source_kind: SourceKind::Random,
            api: self.cfg.api,
        };
        self.inflight.insert(id, index);
        self.stats.sent += 1;
        if phase == Phase::Warmup {
            self.stats.warmup_sent += 1;
        }
        out.push(Action::Send(Box::new(spec)));
    }

    fn start_main(&mut self, now: u64, out: &mut Vec<Action>) {
        self.stage = Stage::Main { next: 0, done: 0, failed: 0 };
        out.push(Action::ProfilingStarted { at: now, deadline: OPEN_DEADLINE });
        self.fill(now, out);
    }

    /// Sends requests while a slot is free and any is left; ends the run when all are back.
    fn fill(&mut self, now: u64, out: &mut Vec<Action>) {
        let c = self.cfg.concurrency as usize;
        match self.stage {
            Stage::Warmup { mut sent, done } => {
                while self.inflight.len() < c && sent < self.cfg.num_warmups {
                    self.send(0, Phase::Warmup, out);
                    sent += 1;
                }
                self.stage = Stage::Warmup { sent, done };
                if done == self.cfg.num_warmups {
                    self.start_main(now, out);
                }
            }
            Stage::Main { mut next, done, failed } => {
                while self.inflight.len() < c && next < self.cfg.num_prompts {
                    self.send(next, Phase::Profiling, out);
                    next += 1;
                }
                self.stage = Stage::Main { next, done, failed };
                if done == self.cfg.num_prompts {
                    self.finish(now, failed, out);
                }
            }
            Stage::NotStarted | Stage::Done => {}
        }
    }

    fn finish(&mut self, now: u64, failed: u32, out: &mut Vec<Action>) {
        self.stage = Stage::Done;
        out.push(Action::ProfilingEnded { at: now });
        let total = u64::from(self.cfg.num_prompts);
        let outcome = if f64::from(failed) / total as f64 > MAX_FAILURE_RATE {
            Outcome::Aborted { failed: u64::from(failed), total }
        } else {
            Outcome::Completed
        };
        out.push(Action::Finished(outcome));
    }

    fn on_done(&mut self, now: u64, id: RequestId, failure: Option<Failure>, out: &mut Vec<Action>) {
        if self.inflight.remove(&id).is_none() {
            return;
        }
        match &mut self.stage {
            // Warmup outcomes are not looked at (`benchmark_serving` discards them).
            Stage::Warmup { done, .. } => *done += 1,
            Stage::Main { done, failed, .. } => {
                *done += 1;
                match failure {
                    None => self.stats.profiling_completed += 1,
                    Some(f) => {
                        *failed += 1;
                        self.stats.profiling_failed += 1;
                        if f == Failure::ContextOverflow {
                            self.stats.context_overflows += 1;
                        }
                    }
                }
            }
            Stage::NotStarted | Stage::Done => return,
        }
        self.fill(now, out);
    }
}

impl Machine for FixedWorkload {
    fn concurrency(&self) -> u32 {
        self.cfg.concurrency
    }

    fn handle(&mut self, now: u64, event: Event, out: &mut Vec<Action>) {
        match event {
            Event::Start if self.stage == Stage::NotStarted => {
                if self.cfg.num_warmups == 0 {
                    self.start_main(now, out);
                } else {
                    self.stage = Stage::Warmup { sent: 0, done: 0 };
                    self.fill(now, out);
                }
            }
            Event::Completed(id) => self.on_done(now, id, None, out),
            Event::Failed(id, f) => self.on_done(now, id, Some(f), out),
            Event::Start | Event::Wake => {}
        }
    }

    fn handle_done_at(&mut self, now: u64, _at: u64, id: RequestId, failure: Option<Failure>, out: &mut Vec<Action>) {
        self.on_done(now, id, failure, out);
    }
}

#[cfg(test)]
mod tests;
