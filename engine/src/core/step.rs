//! One step: launching it (batches on every rank, its cost, speculative accept draws)
//! and completing it (tokens streamed, prefills joining the running batch).

use super::recv::LastMode;
use super::{Engine, FinishReason, InFlight, Output, Phase, RankBatch, RequestError};
use crate::cost::{DraftLoad, RankLoad};
use crate::time::Time;

impl Engine {
    /// Starts the step at `t`: builds every rank's batch, prices it with the cost
    /// model and puts it in flight; ends requests that can never start when nothing runs.
    pub(super) fn launch(&mut self, t: Time) {
        debug_assert!(self.in_flight.is_none());
        self.now = self.now.max(t);
        for r in &mut self.ranks {
            r.batch = RankBatch::default();
        }
        self.poll_inbox();
        // Prefill-decode interval: decode-only rounds after a prefill while the
        // running batches are large enough.
        let min_bs = self.cfg.prefill_decode_interval_min_bs.max(1) as usize;
        let hold_prefill = self.decode_interval_left > 0 && self.ranks.iter().any(|r| r.running.len() >= min_bs);
        if !hold_prefill {
            self.decode_interval_left = 0;
        }
        let (any_prefill, any_decode) = self.build_batches(t, hold_prefill);
        self.note_kv_peak();
        if !any_prefill && !any_decode && hold_prefill {
            // The held decode rounds had nothing to run (e.g. the batch was
            // retracted away): prefill may go now.
            self.decode_interval_left = 0;
            return self.launch(t);
        }
        if !any_prefill && !any_decode {
            if !self.recv.inbox.is_empty() {
                // The idle loop polls at once.
                self.recv.last_mode = LastMode::Idle;
                return self.launch(t);
            }
            self.recv.last_mode = LastMode::Idle;
            self.go_idle(t);
            return;
        }
        self.recv.last_mode = match (any_prefill, self.limits.speculative.is_some()) {
            (true, _) => LastMode::Extend,
            (false, true) => LastMode::Verify,
            (false, false) => LastMode::Decode,
        };
        if hold_prefill && any_decode {
            self.decode_interval_left -= 1;
        } else if any_prefill && self.cfg.prefill_decode_interval > 0 {
            self.decode_interval_left = self.cfg.prefill_decode_interval;
        }
        let dur = self.price_step();
        self.draw_accepts();
        self.in_flight = Some(InFlight { start: t, end: t + dur, prefill: any_prefill });
    }

    /// Builds each rank's prefill batch (unless held) and decode batch; returns
    /// whether any rank prefills and whether any decodes.
    fn build_batches(&mut self, t: Time, hold_prefill: bool) -> (bool, bool) {
        let n = self.ranks.len();
        let mut any_prefill = false;
        if !hold_prefill {
            for i in 0..n {
                if self.build_prefill(i, t) {
                    any_prefill = true;
                }
            }
        }
        // With speculation + DP attention, prefill and decode steps are global.
        let spec_dp = self.limits.speculative.is_some() && n > 1;
        let mut any_decode = false;
        for i in 0..n {
            if !self.ranks[i].batch.prefill.is_empty() && !self.mixed_chunk() {
                continue;
            }
            if spec_dp && any_prefill {
                continue;
            }
            if self.build_decode(i) {
                any_decode = true;
            }
        }
        (any_prefill, any_decode)
    }

    /// Nothing to run: resets the new-token ratio and ends the queued requests that
    /// can never start.
    fn go_idle(&mut self, t: Time) {
        // SGLang's idle housekeeping.
        let init = (self.cfg.env.init_new_token_ratio * self.cfg.schedule_conservativeness).min(1.0);
        for r in &mut self.ranks {
            if r.running.is_empty() {
                r.new_token_ratio = init;
            }
        }
        // Nothing runs anywhere, so nothing will free KV: a request that still
        // cannot start never will. End it instead of hanging the shell.
        for i in 0..self.ranks.len() {
            if self.ranks[i].running.is_empty() && self.ranks[i].chunked.is_none() {
                let stuck = std::mem::take(&mut self.ranks[i].waiting);
                for s in stuck {
                    self.finish(s, t, FinishReason::Abort, Some(RequestError::OutOfMemory), true);
                    self.stats.num_aborted_requests_total += 1;
                }
            }
        }
    }

    /// The step's duration from the cost model over every rank's load; counts graph
    /// and eager passes and busy time.
    fn price_step(&mut self) -> Time {
        let mut loads = std::mem::take(&mut self.loads);
        let mut graph_all = true;
        for (i, load) in loads.iter_mut().enumerate() {
            *load = self.rank_load(i);
            graph_all &= load.graph;
        }
        let cost = self.cost.step(&loads);
        self.loads = loads;
        if graph_all {
            self.stats.cuda_graph_passes += 1;
        } else {
            self.stats.eager_passes += 1;
        }
        self.last_graph = graph_all;
        let dur = cost.total.max(Time(1));
        self.stats.busy_time += dur;
        if let Some(p) = &self.gpu.power {
            self.stats.gpu_active_energy_j += p.step_active_joules(&cost);
        }
        self.stats.last_step = Some(cost);
        dur
    }

    /// What one rank's batch asks of the GPU (an idle rank runs a graph of nothing).
    fn rank_load(&self, i: usize) -> RankLoad {
        let rk = &self.ranks[i];
        if !rk.batch.prefill.is_empty() {
            self.prefill_load(i)
        } else if rk.batch.decode {
            self.decode_load(i)
        } else {
            RankLoad { graph: true, ..RankLoad::default() }
        }
    }

    /// A prefill batch, eager, with the running requests' decode rows under mixed chunk.
    fn prefill_load(&self, i: usize) -> RankLoad {
        let rk = &self.ranks[i];
        let mut l = RankLoad::default();
        for &(s, take) in &rk.batch.prefill {
            let r = &self.reqs[s as usize];
            let end = r.kv; // already includes `take`
            l.tokens += take;
            if end >= r.target {
                l.logits += 1;
            }
            l.kv_read_bytes += self.cost.kv_read_bytes(end);
            l.attn_flops += self.cost.attn_flops(take, end, true);
            l.indexer_flops += self.cost.indexer_flops(take, end);
            l.prefix += end - take;
        }
        if rk.batch.decode {
            // Mixed chunk: one decode row per running request, unpadded.
            for &s in &rk.running {
                let r = &self.reqs[s as usize];
                let c = r.prompt_len + r.generated as u64;
                l.tokens += 1;
                l.logits += 1;
                l.kv_read_bytes += self.cost.kv_read_bytes(c);
                l.attn_flops += self.cost.attn_flops(1, c + 1, false);
                l.indexer_flops += self.cost.indexer_flops(1, c + 1);
            }
        }
        l.graph = false;
        l
    }

    /// A decode (or verify) batch, padded to its CUDA-graph batch size.
    fn decode_load(&self, i: usize) -> RankLoad {
        let rk = &self.ranks[i];
        let spec = self.limits.speculative.as_ref();
        let b = rk.running.len() as u32;
        let (bs, graph) = self.limits.padded_decode_bs(b);
        let width = spec.map_or(1, |s| s.num_draft_tokens) as u64;
        let mut kv_read = 0.0;
        let (mut attn, mut indexer) = (0.0, 0.0);
        for &s in &rk.running {
            let r = &self.reqs[s as usize];
            let c = r.prompt_len + r.generated as u64;
            kv_read += self.cost.kv_read_bytes(c);
            attn += self.cost.attn_flops(width, c + width, false);
            indexer += self.cost.indexer_flops(width, c + width);
        }
        let draft = spec.map(|s| match s.dspark_block_size {
            Some(g) => DraftLoad { passes: 1, tokens: bs as u64 * g as u64 },
            None => DraftLoad { passes: s.num_steps + 1, tokens: bs as u64 * s.eagle_topk as u64 },
        });
        RankLoad {
            tokens: bs as u64 * width,
            logits: bs as u64 * width,
            kv_read_bytes: kv_read,
            attn_flops: attn,
            indexer_flops: indexer,
            prefix: 0,
            graph,
            draft,
        }
    }

    /// Speculative accept length: one draw per rank's verify step.
    fn draw_accepts(&mut self) {
        if let Some(s) = &self.limits.speculative {
            for rk in &mut self.ranks {
                if rk.batch.decode {
                    rk.batch.accept = s.accept.sample(&mut self.rng);
                }
            }
        }
    }

    /// Ends the step in flight at `t`: tokens for the decode rows, the prefills'
    /// KV cached and their first tokens, then the step's statistics.
    pub(super) fn complete(&mut self, t: Time, prefill: bool, start: Time, out: &mut Vec<Output>) {
        let interval = self.cfg.stream_interval.max(1);
        let mut step_gen = 0u64;
        let (hit, computed) = (self.batch_hit, self.batch_computed);
        self.batch_hit = 0;
        self.batch_computed = 0;
        for i in 0..self.ranks.len() {
            let batch = std::mem::take(&mut self.ranks[i].batch);
            if batch.decode {
                step_gen += self.complete_decode(i, batch.accept, t, interval, out);
            }
            if !batch.prefill.is_empty() {
                step_gen += self.complete_prefill(i, &batch.prefill, t, interval, out);
            }
        }
        self.record_step(t, start, prefill, hit, computed, step_gen);
        self.now = self.now.max(t);
    }

    /// Gives each running request of rank `i` its tokens (`accept` under speculation);
    /// returns the tokens generated.
    fn complete_decode(&mut self, i: usize, accept: u32, t: Time, interval: u32, out: &mut Vec<Output>) -> u64 {
        let a = if self.limits.speculative.is_some() {
            self.accept_window.push((accept, self.ranks[i].running.len() as u32));
            self.stats.spec_verify_calls_total += 1;
            self.accept_total += accept as u64;
            accept
        } else {
            1
        };
        let mut step_gen = 0;
        let running = std::mem::take(&mut self.ranks[i].running);
        let mut keep = Vec::with_capacity(running.len());
        for s in running {
            if self.reqs[s as usize].aborted {
                self.release(s);
                continue;
            }
            let k = {
                let r = &mut self.reqs[s as usize];
                if self.limits.speculative.is_some() {
                    r.verify_ct += 1;
                }
                (a as u64).min(r.remaining_new()) as u32
            };
            step_gen += k as u64;
            if self.emit(s, k, t, interval, out) {
                keep.push(s);
            }
        }
        // Requests that finished were removed by `emit`.
        self.ranks[i].running = keep;
        step_gen
    }

    /// Caches the prefilled KV of rank `i`'s batch; a request whose last chunk ran
    /// samples its first token and joins the running batch. Returns the tokens generated.
    fn complete_prefill(&mut self, i: usize, prefill: &[(u32, u64)], t: Time, interval: u32, out: &mut Vec<Output>) -> u64 {
        let mut step_gen = 0;
        for &(s, take) in prefill {
            self.ranks[i].prefill_tokens_done += take;
            let (aborted, done) = {
                let r = &self.reqs[s as usize];
                (r.aborted, r.kv >= r.target)
            };
            if aborted {
                if self.ranks[i].chunked == Some(s) {
                    self.ranks[i].chunked = None;
                }
                self.release(s);
                continue;
            }
            let kv = self.reqs[s as usize].kv;
            self.cache_prefix(s, kv, true);
            if !done {
                continue; // still chunked
            }
            // Last chunk: sample a token, join the running batch.
            self.reqs[s as usize].phase = Phase::Running;
            step_gen += 1;
            if self.emit(s, 1, t, interval, out) {
                self.ranks[i].running.push(s);
            }
        }
        step_gen
    }

    /// Step counters, the cache hit of a prefill batch, the throughput and accept
    /// windows, and the sampled gauges when SGLang would log them.
    fn record_step(&mut self, t: Time, start: Time, prefill: bool, hit: u64, computed: u64, step_gen: u64) {
        if prefill {
            self.stats.prefill_batches += 1;
            self.stats.last_cache_hit_rate = if hit + computed > 0 { hit as f64 / (hit + computed) as f64 } else { 0.0 };
        } else {
            self.stats.decode_iterations += 1;
        }
        self.gen_window.push((step_gen, t - start));
        let w = self.cfg.decode_log_interval.max(1) as usize;
        if self.gen_window.len() > w {
            self.gen_window.remove(0);
        }
        if self.accept_window.len() > w {
            let drop = self.accept_window.len() - w;
            self.accept_window.drain(..drop);
        }
        if prefill || self.stats.decode_iterations.is_multiple_of(w as u64) {
            self.sample_gauges();
        }
    }

    /// Adds `k` tokens to a running request, streams them per the interval and
    /// finishes it when done. Returns true if it keeps running.
    fn emit(&mut self, slot: u32, k: u32, t: Time, interval: u32, out: &mut Vec<Output>) -> bool {
        let (finished, reason) = {
            let r = &mut self.reqs[slot as usize];
            r.generated += k;
            // The newest token has no KV yet (written by the next step).
            r.kv = r.prompt_len + r.generated as u64 - 1;
            r.unsent += k;
            let stop = r.eos_after.is_some_and(|e| r.generated >= e);
            if stop {
                (true, FinishReason::Stop)
            } else if r.generated >= r.max_new {
                (true, FinishReason::Length)
            } else {
                (false, FinishReason::Length)
            }
        };
        {
            let r = &mut self.reqs[slot as usize];
            if r.eos_after.is_some_and(|e| r.generated > e) {
                // A speculative step can overshoot EOS: stop at the EOS token.
                let extra = r.generated - r.eos_after.unwrap_or(0);
                r.generated -= extra;
                r.unsent -= extra.min(r.unsent);
                r.kv = r.prompt_len + r.generated as u64 - 1;
            }
            if r.unsent > 0 && (!r.sent_first || r.unsent >= interval || finished) {
                out.push(Output::Tokens { id: r.id, time: t, count: r.unsent, first: !r.sent_first, generated: r.generated });
                r.sent_first = true;
                r.unsent = 0;
            }
        }
        if finished {
            self.finish(slot, t, reason, None, false);
            out.append(&mut self.pending);
            return false;
        }
        let kv = self.reqs[slot as usize].kv;
        self.set_own(slot, kv);
        true
    }
}
