//! Generating one reply: its planned length and ids, the ids each core output adds,
//! their text split into reasoning and content, stop conditions, usage and metrics.

use std::time::Instant;

use serde_json::Value;

use super::Gen;
use super::wire::{CachedDetails, ReasoningDetails, Usage};
use crate::server::AppState;
use crate::server::api::{ChatRequest, GenParams};
use crate::server::driver::{CoreFinish, Nanos};
use crate::server::metrics::FinishedRequest;
use crate::tokenize::ChatEncoder;

/// Reply ids drawn at submission (beyond this, drawn as they stream).
const PLANNED_MAX: u64 = 65_536;

pub(super) fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The reply decided at submission.
pub(super) struct Plan {
    /// Tokens the reply will have (the cap, or its natural end).
    pub(super) max_new: u64,
    /// The reply ends on its own (EOS) at `max_new` rather than by the cap.
    pub(super) natural_stop: bool,
    /// Where the core emits EOS, when the request does not ignore it.
    pub(super) eos_after: Option<u64>,
    pub(super) reasoning_budget: u64,
    /// The reply's first ids (see [`Gen::planned`]).
    pub(super) planned: Vec<u32>,
    /// The generator state after those draws; later ids continue from it.
    pub(super) rng: u64,
}

impl Plan {
    /// Draws the reply's length and first ids from the request's seed.
    pub(super) fn new(
        st: &AppState,
        req: &ChatRequest,
        params: &GenParams,
        id: u64,
        prompt_tokens: u64,
        thinking: bool,
        enc: &ChatEncoder,
    ) -> Plan {
        let mut rng = st.cfg.seed ^ req.seed.unwrap_or(id).wrapping_mul(0xA24B_AED4_963E_E407);
        splitmix(&mut rng);
        // Room left in the context bounds the reply (SGLang clamps max_new_tokens).
        let room = st.context_length().saturating_sub(prompt_tokens + 1).max(1);
        let cap = params.max_tokens.unwrap_or(room).min(room);
        // A reply that ends on its own (no ignore_eos): geometric length with the
        // configured mean, never below min_tokens; the core emits EOS there.
        let eos_after = (!req.ignore_eos).then(|| {
            let p = 1.0 / st.cfg.mean_output_tokens.max(1) as f64;
            let u = (splitmix(&mut rng) >> 11) as f64 / (1u64 << 53) as f64;
            let natural = ((1.0 - u).ln() / (1.0 - p).ln()).ceil().max(1.0) as u64;
            natural.max(params.min_tokens).max(1)
        });
        let (max_new, natural_stop) = match eos_after {
            Some(n) if n < cap => (n, true),
            _ => (cap, false),
        };
        let reasoning_budget = if thinking && st.cfg.reasoning_parser.is_some() { max_new / 2 } else { 0 };
        // Draw the reply's ids up front (bounded): the same ids it will stream. Without a
        // reasoning split the next turn's template renders exactly these ids (plus EOS)
        // after this prompt, so the engine can cache them for the next turn.
        let planned: Vec<u32> = {
            let tok = enc.tokenizer();
            let alphabet = tok.alphabet();
            let n = max_new.min(PLANNED_MAX);
            (0..n)
                .map(|k| {
                    if natural_stop && k + 1 == max_new {
                        tok.eos_id().unwrap_or(0)
                    } else {
                        alphabet[(splitmix(&mut rng) % alphabet.len() as u64) as usize]
                    }
                })
                .collect()
        };
        Plan { max_new, natural_stop, eos_after, reasoning_budget, planned, rng }
    }
}

/// Text produced by one core output.
pub(super) struct Step {
    pub(super) reasoning: String,
    pub(super) content: String,
}

impl Gen {
    pub(super) fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            total_tokens: self.prompt_tokens + self.produced,
            completion_tokens: self.produced,
            prompt_tokens_details: self.st.cfg.enable_cache_report.then_some(CachedDetails { cached_tokens: self.cached_tokens }),
            reasoning_tokens: self.reasoning_tokens,
            completion_tokens_details: (self.reasoning_tokens > 0).then_some(ReasoningDetails { reasoning_tokens: self.reasoning_tokens }),
        }
    }

    /// Generates `n` ids, updates counters and returns their text.
    pub(super) fn tokens(&mut self, n: u32) -> Step {
        let tok = self.enc.tokenizer().clone();
        let alphabet = tok.alphabet();
        let mut r_ids = Vec::new();
        let mut c_ids = Vec::new();
        for _ in 0..n {
            let k = self.produced;
            self.produced += 1;
            let last = self.produced == self.max_new;
            let id = match self.planned.get(k as usize) {
                Some(&id) => id,
                None if last && self.natural_stop => tok.eos_id().unwrap_or(0),
                None => alphabet[(splitmix(&mut self.rng) % alphabet.len() as u64) as usize],
            };
            if self.stop_ids.contains(&id) && self.finish.is_none() {
                self.finish = Some(("stop".into(), Value::from(id)));
                break;
            }
            if last && self.natural_stop {
                // EOS ends the reply and has no text.
                continue;
            }
            if k < self.reasoning_budget {
                self.reasoning_tokens += 1;
                r_ids.push(id);
            } else {
                c_ids.push(id);
            }
        }
        let mut step = Step { reasoning: self.detok_reasoning.push(&tok, &r_ids), content: self.detok_content.push(&tok, &c_ids) };
        if self.produced == self.max_new || self.finish.is_some() {
            step.reasoning.push_str(&self.detok_reasoning.finish(&tok));
            step.content.push_str(&self.detok_content.finish(&tok));
        }
        // Stop strings apply to the content; the text after the match is dropped.
        if !self.stops.is_empty() && self.finish.is_none() && !step.content.is_empty() {
            let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
            let mut from = self.content.len().saturating_sub(longest);
            while !self.content.is_char_boundary(from) {
                from -= 1;
            }
            let window = format!("{}{}", &self.content[from..], step.content);
            if let Some((pos, s)) =
                self.stops.iter().filter_map(|s| window.find(s.as_str()).map(|p| (p, s.clone()))).min_by_key(|(p, _)| *p)
            {
                let keep = (from + pos).saturating_sub(self.content.len());
                step.content.truncate(keep.min(step.content.len()));
                self.finish = Some(("stop".into(), Value::from(s)));
            }
        }
        self.reasoning.push_str(&step.reasoning);
        self.content.push_str(&step.content);
        step
    }

    pub(super) fn finished(&mut self, reason: CoreFinish) {
        if self.finish.is_none() {
            self.finish = Some(match reason {
                CoreFinish::Stop | CoreFinish::Length if self.natural_stop => {
                    ("stop".into(), self.enc.tokenizer().eos_id().map(Value::from).unwrap_or(Value::Null))
                }
                CoreFinish::Length => ("length".into(), Value::Null),
                CoreFinish::Stop => ("stop".into(), self.enc.tokenizer().eos_id().map(Value::from).unwrap_or(Value::Null)),
                CoreFinish::Abort => ("abort".into(), Value::Null),
            });
        }
    }

    /// Records the request in the metrics; `aborted`: it ended before the core finished it.
    pub(super) fn record(&self, aborted: bool) {
        if let Some(m) = &self.st.metrics {
            let scale = self.st.cfg.time_scale;
            let e2e = if scale == 1.0 {
                self.arrived.elapsed().as_secs_f64()
            } else if aborted {
                // Cut short between outputs: the engine time now, from the wall time elapsed.
                self.arrived.elapsed().as_secs_f64() * scale
            } else {
                self.last_t.saturating_sub(self.arrival_t) as f64 / 1e9
            };
            m.finish(&FinishedRequest {
                streaming: self.streaming,
                aborted,
                prompt_tokens: self.prompt_tokens,
                completion_tokens: self.produced,
                cached_tokens: self.cached_tokens,
                e2e,
                queue_time: self.queue_time,
            });
        }
    }

    pub(super) fn observe_output(&mut self, n: u32, at: Nanos) {
        let now = Instant::now();
        if let Some(m) = &self.st.metrics {
            // Real time: when the output reached the front end, as SGLang measures. Under a time
            // scale, engine time: wall-clock delays in delivering it would count K times over.
            let (ttft, gap) = if self.st.cfg.time_scale == 1.0 {
                ((now - self.arrived).as_secs_f64(), (now - self.last_chunk).as_secs_f64())
            } else {
                (at.saturating_sub(self.arrival_t) as f64 / 1e9, at.saturating_sub(self.last_t) as f64 / 1e9)
            };
            if self.first {
                m.observe_ttft(ttft);
            } else {
                m.observe_chunk(gap, n);
            }
        }
        self.last_chunk = now;
        self.last_t = at;
    }
}
