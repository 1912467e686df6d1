//! A minimal fixed-cost core: FCFS admission up to a running cap, prefill-first
//! iterations (a prefill batch never shares an iteration with decode), one token per
//! running request per decode step, constant per-token prefill and per-step decode
//! costs, no prefix cache. It exists so the HTTP shell can be exercised on its own;
//! `sweep engine serve` drives the SGLang-faithful core when it is built in.

use std::collections::{HashMap, VecDeque};

use super::driver::{Core, CoreError, CoreEvent, CoreFinish, CoreRequest, CoreStats, Nanos, ReqId};

/// Costs and caps of [`SimpleCore`].
#[derive(Clone, Debug)]
pub struct SimpleConfig {
    pub max_running_requests: usize,
    pub max_queued_requests: Option<usize>,
    pub prefill_ns_per_token: u64,
    pub prefill_ns_fixed: u64,
    pub decode_step_ns: u64,
    pub context_length: u64,
    pub max_total_tokens: u64,
}

impl Default for SimpleConfig {
    fn default() -> Self {
        SimpleConfig {
            max_running_requests: 256,
            max_queued_requests: None,
            prefill_ns_per_token: 20_000,
            prefill_ns_fixed: 5_000_000,
            decode_step_ns: 10_000_000,
            context_length: 1_048_576,
            max_total_tokens: 4_000_000,
        }
    }
}

impl SimpleConfig {
    /// Reads the capacity flags this core models (`--max-running-requests`,
    /// `--max-queued-requests`, `--max-total-tokens`, `--context-length`); other
    /// flags are left to the full engine's parser.
    pub fn from_argv(
        argv: &[String],
        context_length: Option<u64>,
    ) -> Result<SimpleConfig, super::args::ArgsError> {
        let mut c = SimpleConfig::default();
        if let Some(l) = context_length {
            c.context_length = l;
        }
        let mut i = 0;
        while i < argv.len() {
            let (flag, inline) = match argv[i].split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (argv[i].as_str(), None),
            };
            let known = matches!(
                flag,
                "--max-running-requests" | "--max-queued-requests" | "--max-total-tokens"
            );
            if known {
                let v = inline.or_else(|| argv.get(i + 1).cloned()).ok_or_else(|| {
                    super::args::ArgsError::MissingValue { flag: flag.into() }
                })?;
                let n: u64 = v.parse().map_err(|_| super::args::ArgsError::Invalid {
                    flag: flag.into(),
                    value: v.clone(),
                    reason: "expected a positive integer".into(),
                })?;
                match flag {
                    "--max-running-requests" => c.max_running_requests = n.max(1) as usize,
                    "--max-queued-requests" => c.max_queued_requests = Some(n as usize),
                    _ => c.max_total_tokens = n.max(2),
                }
                if !argv[i].contains('=') {
                    i += 1;
                }
            }
            i += 1;
        }
        Ok(c)
    }
}

struct Req {
    prompt: u64,
    max_new: u64,
    generated: u64,
    arrived: Nanos,
}

/// See the module docs.
pub struct SimpleCore {
    cfg: SimpleConfig,
    waiting: VecDeque<ReqId>,
    running: Vec<ReqId>,
    reqs: HashMap<ReqId, Req>,
    /// End of the iteration in flight and what it was.
    busy_until: Option<(Nanos, Step)>,
    pending_aborts: Vec<ReqId>,
}

#[derive(Clone)]
enum Step {
    Prefill(Vec<ReqId>),
    Decode,
}

impl SimpleCore {
    pub fn new(cfg: SimpleConfig) -> SimpleCore {
        SimpleCore {
            cfg,
            waiting: VecDeque::new(),
            running: Vec::new(),
            reqs: HashMap::new(),
            busy_until: None,
            pending_aborts: Vec::new(),
        }
    }

    fn used_tokens(&self) -> u64 {
        self.running
            .iter()
            .map(|id| self.reqs[id].prompt + self.reqs[id].generated)
            .sum()
    }

    fn schedule(&mut self, now: Nanos) {
        if self.busy_until.is_some() {
            return;
        }
        let mut batch = Vec::new();
        let mut tokens = 0;
        let mut used = self.used_tokens();
        while let Some(&id) = self.waiting.front() {
            let r = &self.reqs[&id];
            if self.running.len() + batch.len() >= self.cfg.max_running_requests
                || used + r.prompt + r.max_new > self.cfg.max_total_tokens
            {
                break;
            }
            used += r.prompt + r.max_new;
            tokens += r.prompt;
            batch.push(id);
            self.waiting.pop_front();
        }
        if !batch.is_empty() {
            let t = now + self.cfg.prefill_ns_fixed + tokens * self.cfg.prefill_ns_per_token;
            self.busy_until = Some((t, Step::Prefill(batch)));
        } else if !self.running.is_empty() {
            self.busy_until = Some((now + self.cfg.decode_step_ns, Step::Decode));
        }
    }
}

impl Core for SimpleCore {
    fn submit(&mut self, now: Nanos, req: CoreRequest) -> Result<(), CoreError> {
        if let Some(cap) = self.cfg.max_queued_requests
            && self.waiting.len() >= cap
        {
            return Err(CoreError {
                status: 503,
                message: "The request queue is full.".into(),
            });
        }
        let prompt = req.input_ids.len() as u64;
        if prompt + 1 > self.cfg.max_total_tokens {
            return Err(CoreError {
                status: 400,
                message: format!(
                    "Input length ({prompt} tokens) exceeds the maximum allowed length ({} tokens). Use a shorter input or enable --allow-auto-truncate.",
                    self.cfg.max_total_tokens.saturating_sub(6)
                ),
            });
        }
        let max_new = req
            .max_new_tokens
            .min(self.cfg.max_total_tokens - prompt)
            .max(1);
        self.reqs.insert(
            req.id,
            Req {
                prompt,
                max_new,
                generated: 0,
                arrived: now,
            },
        );
        self.waiting.push_back(req.id);
        self.schedule(now);
        Ok(())
    }

    fn abort(&mut self, now: Nanos, id: ReqId) {
        if let Some(pos) = self.waiting.iter().position(|&w| w == id) {
            self.waiting.remove(pos);
            self.reqs.remove(&id);
        } else if self.reqs.contains_key(&id) {
            // Leaves at the end of the iteration in flight.
            self.pending_aborts.push(id);
        }
        self.schedule(now);
    }

    fn next_event_time(&self) -> Option<Nanos> {
        self.busy_until.as_ref().map(|(t, _)| *t)
    }

    fn advance(&mut self, now: Nanos) -> Vec<CoreEvent> {
        let mut out = Vec::new();
        while let Some((t, step)) = self.busy_until.clone() {
            if t > now {
                break;
            }
            self.busy_until = None;
            let emitted: Vec<ReqId> = match step {
                Step::Prefill(batch) => {
                    self.running.extend(&batch);
                    batch
                }
                Step::Decode => self.running.clone(),
            };
            for id in emitted {
                let r = self.reqs.get_mut(&id).expect("running request exists");
                r.generated += 1;
                out.push(CoreEvent::Tokens { id, n: 1 });
                if r.generated >= r.max_new {
                    out.push(CoreEvent::Finished {
                        id,
                        reason: CoreFinish::Length,
                        cached_tokens: 0,
                        queue_time: t.saturating_sub(r.arrived) as f64 * 1e-9,
                    });
                    self.reqs.remove(&id);
                    self.running.retain(|&x| x != id);
                }
            }
            for id in std::mem::take(&mut self.pending_aborts) {
                if self.reqs.remove(&id).is_some() {
                    self.running.retain(|&x| x != id);
                }
            }
            self.schedule(t);
        }
        out
    }

    fn flush_cache(&mut self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    fn stats(&self) -> CoreStats {
        let used = self.used_tokens();
        CoreStats {
            num_running_reqs: self.running.len() as u64,
            num_queue_reqs: self.waiting.len() as u64,
            num_used_tokens: used,
            token_usage: (used as f64 / self.cfg.max_total_tokens as f64 * 100.0).round() / 100.0,
            max_total_num_tokens: self.cfg.max_total_tokens,
            context_length: self.cfg.context_length,
            max_req_input_len: self
                .cfg
                .context_length
                .min(self.cfg.max_total_tokens)
                .saturating_sub(6),
            ..CoreStats::default()
        }
    }

    fn server_info(&self) -> serde_json::Value {
        serde_json::json!({
            "core": "simple-fixed-cost",
            "max_running_requests": self.cfg.max_running_requests,
            "max_total_num_tokens": self.cfg.max_total_tokens,
            "context_length": self.cfg.context_length,
            "decode_step_ms": self.cfg.decode_step_ns as f64 * 1e-6,
            "prefill_us_per_token": self.cfg.prefill_ns_per_token as f64 * 1e-3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_requests_all_finish_once_with_their_lengths() {
        let mut c = SimpleCore::new(SimpleConfig {
            max_running_requests: 64,
            ..SimpleConfig::default()
        });
        let mut produced = HashMap::new();
        let mut finished = HashMap::new();
        let mut now = 0;
        for id in 0..300u64 {
            c.submit(
                now,
                CoreRequest {
                    id,
                    input_ids: vec![1; 10 + id as usize],
                    max_new_tokens: 1 + id % 17,
                    ignore_eos: true,
                },
            )
            .unwrap();
            if id % 50 == 7 {
                c.abort(now, id);
            }
            now += 1_000_000;
            for ev in c.advance(now) {
                match ev {
                    CoreEvent::Tokens { id, n } => *produced.entry(id).or_insert(0) += n as u64,
                    CoreEvent::Finished { id, .. } => {
                        assert!(finished.insert(id, ()).is_none(), "{id} finished twice")
                    }
                    CoreEvent::Failed { .. } => panic!(),
                }
            }
        }
        while let Some(t) = c.next_event_time() {
            for ev in c.advance(t) {
                match ev {
                    CoreEvent::Tokens { id, n } => *produced.entry(id).or_insert(0) += n as u64,
                    CoreEvent::Finished { id, .. } => {
                        assert!(finished.insert(id, ()).is_none(), "{id} finished twice")
                    }
                    CoreEvent::Failed { .. } => panic!(),
                }
            }
        }
        for id in 0..300u64 {
            if id % 50 != 7 {
                assert_eq!(produced[&id], 1 + id % 17, "request {id}");
                assert!(finished.contains_key(&id));
            }
        }
        assert!(c.flush_cache());
    }
}
