//! A corpus measured the way its published statistics are defined, and the side-by-side
//! comparison behind `sweep trace stats --against`. The definitions (docs/traces.md) are the
//! ones the `--like` generator calibrates on.

use serde::Serialize;

use super::published::{PublishedStats, Tolerance};
use super::stats::percentile;
use super::{Request, Subagent, Trace};

/// Raw per-request and per-session samples of one corpus (add one trace at a time).
#[derive(Debug, Default, Clone)]
pub struct CorpusMeasure {
    pub traces: u64,
    pub main_turns: u64,
    pub subagent_groups: u64,
    pub inner_requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    main_isl: Vec<f64>,
    sub_isl: Vec<f64>,
    main_osl: Vec<f64>,
    new_prefill: Vec<f64>,
    hit_blocks: u64,
    blocks: u64,
    turns: Vec<f64>,
    gaps: Vec<f64>,
    idle_s: f64,
    span_s: f64,
    time_avg_context: Vec<f64>,
    sessions_with_subagents: u64,
    groups_per_session: Vec<f64>,
    inner_per_group: Vec<f64>,
    peak_groups: Vec<f64>,
    seen: Vec<bool>,
}

/// Peak concurrent groups: a sweep line over each group's [first inner start, last inner end].
fn peak_concurrent(groups: &[&Subagent]) -> i32 {
    let mut ev: Vec<(f64, i32)> = Vec::with_capacity(groups.len() * 2);
    for g in groups {
        let start = g.inner().map(|r| r.t).fold(f64::INFINITY, f64::min);
        let end = g.inner().map(|r| end_of(r.t, r.api_time)).fold(f64::NEG_INFINITY, f64::max);
        ev.push((start, 1));
        ev.push((end, -1));
    }
    // Ends before starts at the same instant: touching groups do not overlap.
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut live, mut peak) = (0i32, 0i32);
    for (_, d) in ev {
        live += d;
        peak = peak.max(live);
    }
    peak
}

fn end_of(t: f64, api: Option<f64>) -> f64 {
    t + api.unwrap_or(0.0)
}

impl CorpusMeasure {
    /// Adds one trace: its main turns, its subagent groups, then every request in time order.
    pub fn add(&mut self, trace: &Trace) {
        self.traces += 1;
        let main: Vec<_> = trace.main_requests().collect();
        self.add_main(&main);
        let groups: Vec<_> = trace.subagents().collect();
        self.add_groups(&groups);
        self.walk(trace);
    }

    /// Main turns: count, input and output lengths, inter-turn gaps and the time-averaged context.
    fn add_main(&mut self, main: &[&Request]) {
        self.main_turns += main.len() as u64;
        self.turns.push(main.len() as f64);
        for r in main {
            self.main_isl.push(r.input_tokens as f64);
            self.main_osl.push(r.output_tokens as f64);
        }
        // Inter-turn gap: end of a main turn to the start of the next (clamped at 0).
        for w in main.windows(2) {
            self.gaps.push((w[1].t - end_of(w[0].t, w[0].api_time)).max(0.0));
        }
        // Time-averaged context: the latest main turn's input, held until the next main turn
        // starts (the last one until it ends), averaged over the session's main timeline.
        if let (Some(first), Some(last)) = (main.first(), main.last()) {
            let span = end_of(last.t, last.api_time) - first.t;
            if span > 0.0 {
                let mut area = 0.0;
                for (i, r) in main.iter().enumerate() {
                    let until = main.get(i + 1).map_or(end_of(r.t, r.api_time), |n| n.t);
                    area += r.input_tokens as f64 * (until - r.t).max(0.0);
                }
                self.time_avg_context.push(area / span);
            } else {
                self.time_avg_context.push(first.input_tokens as f64);
            }
        }
    }

    /// Subagent groups: per session, their count and peak concurrency; per group, its inner
    /// requests and their inputs.
    fn add_groups(&mut self, groups: &[&Subagent]) {
        self.subagent_groups += groups.len() as u64;
        if !groups.is_empty() {
            self.sessions_with_subagents += 1;
            self.groups_per_session.push(groups.len() as f64);
            self.peak_groups.push(peak_concurrent(groups) as f64);
        }
        for g in groups {
            self.inner_requests += g.requests.len() as u64;
            self.inner_per_group.push(g.requests.len() as f64);
            for r in g.inner() {
                self.sub_isl.push(r.input_tokens as f64);
            }
        }
    }

    /// Every request in global time order (ties: file order): token totals, the ideal cache
    /// walk (hits and new prefill) and the idle time between in-flight intervals.
    fn walk(&mut self, trace: &Trace) {
        let mut all: Vec<_> = trace.all_requests().collect();
        all.sort_by(|a, b| a.t.total_cmp(&b.t));
        let block = trace.block_size.max(1) as u64;
        // Trace-local ids are small dense integers: a flat bitmap beats a hash set by far.
        self.seen.clear();
        let mut busy_until = f64::NEG_INFINITY;
        let mut busy = 0.0;
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for r in &all {
            self.input_tokens += r.input_tokens;
            self.output_tokens += r.output_tokens;
            let hits = self.hits(&r.hash_ids);
            self.hit_blocks += hits;
            self.blocks += r.hash_ids.len() as u64;
            self.new_prefill.push(r.input_tokens.saturating_sub(hits * block) as f64);
            // Union of in-flight intervals, walking by start time.
            let end = end_of(r.t, r.api_time);
            if r.t > busy_until {
                busy += end - r.t;
                busy_until = end;
            } else if end > busy_until {
                busy += end - busy_until;
                busy_until = end;
            }
            lo = lo.min(r.t);
            hi = hi.max(end);
        }
        if hi > lo {
            self.span_s += hi - lo;
            self.idle_s += (hi - lo) - busy;
        }
    }

    /// Blocks of `hash_ids` an ideal cache already holds; marks all of them held.
    fn hits(&mut self, hash_ids: &[u64]) -> u64 {
        let mut hits = 0u64;
        for &h in hash_ids {
            let h = h as usize;
            if h >= self.seen.len() {
                self.seen.resize((h + 1).max(self.seen.len() * 2), false);
            }
            if std::mem::replace(&mut self.seen[h], true) {
                hits += 1;
            }
        }
        hits
    }

    /// The measured value of a published row key (`counts.traces`, `distributions.main_isl.p50`, …).
    pub fn value(&self, key: &str) -> Option<f64> {
        let pct = |v: &[f64], stat: &str| -> Option<f64> {
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            match stat {
                "p50" => Some(percentile(&s, 50.0)),
                "p90" => Some(percentile(&s, 90.0)),
                "p99" => Some(percentile(&s, 99.0)),
                "mean" => Some(if s.is_empty() { f64::NAN } else { s.iter().sum::<f64>() / s.len() as f64 }),
                _ => None,
            }
        };
        let frac = |n: usize, d: usize| if d == 0 { f64::NAN } else { n as f64 / d as f64 };
        let rest = key.strip_prefix("counts.").map(|k| ("counts", k)).or_else(|| key.strip_prefix("distributions.").map(|k| ("d", k)))?;
        match rest {
            ("counts", k) => Some(match k {
                "traces" => self.traces,
                "main_turns" => self.main_turns,
                "subagent_groups" => self.subagent_groups,
                "subagent_inner_requests" => self.inner_requests,
                "total_requests" => self.main_turns + self.inner_requests,
                "total_input_tokens" => self.input_tokens,
                "total_output_tokens" => self.output_tokens,
                _ => return None,
            } as f64),
            (_, k) => {
                let (name, stat) = k.rsplit_once('.').unwrap_or((k, ""));
                match name {
                    "main_isl" => pct(&self.main_isl, stat),
                    "subagent_isl" => pct(&self.sub_isl, stat),
                    "main_osl" => pct(&self.main_osl, stat),
                    "new_prefill_tokens_per_turn" => pct(&self.new_prefill, stat),
                    "main_turns_per_session" => pct(&self.turns, stat),
                    "inter_turn_gap_s" => pct(&self.gaps, stat),
                    "per_session_with_subagents" => match stat {
                        "groups_p50" => pct(&self.groups_per_session, "p50"),
                        "inner_requests_per_group_p50" => pct(&self.inner_per_group, "p50"),
                        "peak_concurrent_groups_p50" => pct(&self.peak_groups, "p50"),
                        _ => None,
                    },
                    _ => match k {
                        "ideal_prefix_hit_rate" => {
                            Some(if self.blocks == 0 { f64::NAN } else { self.hit_blocks as f64 / self.blocks as f64 })
                        }
                        "turns_with_gap_over_300s" => Some(frac(self.gaps.iter().filter(|&&g| g > 300.0).count(), self.gaps.len())),
                        "turns_with_gap_over_1800s" => Some(frac(self.gaps.iter().filter(|&&g| g > 1800.0).count(), self.gaps.len())),
                        "session_waiting_time_fraction" => Some(if self.span_s > 0.0 { self.idle_s / self.span_s } else { f64::NAN }),
                        "time_averaged_context_tokens_mean" => pct(&self.time_avg_context, "mean"),
                        "sessions_with_subagents" => Some(frac(self.sessions_with_subagents as usize, self.traces as usize)),
                        _ => None,
                    },
                }
            }
        }
    }
}

/// One compared row.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    pub row: String,
    pub published: f64,
    pub measured: f64,
    /// Relative deviation (measured / published − 1), or the absolute difference for
    /// absolute-tolerance rows.
    pub deviation: f64,
    pub tolerance: Tolerance,
    pub pass: bool,
}

/// Compare every listed row of `published` with the measurement.
pub fn compare(published: &PublishedStats, m: &CorpusMeasure) -> Vec<Compared> {
    published
        .rows()
        .into_iter()
        .map(|r| {
            let measured = m.value(&r.key).unwrap_or(f64::NAN);
            let (deviation, pass) = match r.tolerance {
                Tolerance::Relative(t) => {
                    let d = if r.published == 0.0 { measured } else { measured / r.published - 1.0 };
                    (d, d.abs() <= t)
                }
                Tolerance::Absolute(t) => {
                    let d = measured - r.published;
                    (d, d.abs() <= t)
                }
            };
            Compared { row: r.key, published: r.published, measured, deviation, tolerance: r.tolerance, pass: pass && measured.is_finite() }
        })
        .collect()
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 1000.0 || v == v.round() {
        format!("{:.0}", v)
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.4}")
    }
}

/// The side-by-side Markdown table.
pub fn markdown(rows: &[Compared]) -> String {
    let mut out = String::from("| row | published | measured | deviation | tolerance | verdict |\n|---|---:|---:|---:|---:|---|\n");
    for r in rows {
        let (dev, tol) = match r.tolerance {
            Tolerance::Relative(t) => (format!("{:+.2} %", r.deviation * 100.0), format!("± {:.0} %", t * 100.0)),
            Tolerance::Absolute(t) => (format!("{:+.2} pt", r.deviation * 100.0), format!("± {:.1} pt", t * 100.0)),
        };
        let row = r.row.strip_prefix("distributions.").unwrap_or(&r.row);
        out.push_str(&format!(
            "| {row} | {} | {} | {dev} | {tol} | {} |\n",
            num(r.published),
            num(r.measured),
            if r.pass { "ok" } else { "MISS" }
        ));
    }
    let missed = rows.iter().filter(|r| !r.pass).count();
    out.push_str(&format!("\n{} rows, {} within tolerance, {} missed\n", rows.len(), rows.len() - missed, missed));
    out
}
