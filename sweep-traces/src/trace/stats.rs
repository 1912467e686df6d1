//! Corpus statistics: the distributions that characterise an AgentX trace set, and a side-by-side
//! table for several sets (`sweep trace stats`).

use std::collections::HashSet;

use serde::Serialize;

use super::Trace;

/// Percentile by linear interpolation at rank `(n−1)·p/100` over sorted values (the AgentX rule).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // `p / 100` inside the rank, as the AgentX statistics compute it (bit for bit).
    crate::metrics::at_rank(sorted, (sorted.len() - 1) as f64 * p / 100.0)
}

/// Summary of one distribution.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct DistSummary {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl DistSummary {
    pub fn of(values: &mut [f64]) -> Self {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let mean = if n == 0 { f64::NAN } else { values.iter().sum::<f64>() / n as f64 };
        Self {
            n,
            mean,
            p50: percentile(values, 50.0),
            p90: percentile(values, 90.0),
            p99: percentile(values, 99.0),
            max: values.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Raw samples gathered from a set of traces (streaming-friendly: add one trace at a time).
#[derive(Debug, Default, Clone)]
pub struct Collector {
    pub isl: Vec<f64>,
    pub osl: Vec<f64>,
    pub think: Vec<f64>,
    pub api: Vec<f64>,
    pub turns: Vec<f64>,
    pub first_isl: Vec<f64>,
    pub new_blocks: Vec<f64>,
    pub hit_rate: Vec<f64>,
    pub duration: Vec<f64>,
    pub subagents_per_trace: Vec<f64>,
    pub inner_per_subagent: Vec<f64>,
    pub traces: usize,
    pub traces_with_subagents: usize,
    pub requests: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    hit_blocks: u64,
    total_blocks: u64,
}

/// Named distributions of a trace set.
#[derive(Debug, Clone, Serialize)]
pub struct TraceStats {
    pub name: String,
    pub traces: usize,
    pub requests: usize,
    pub traces_with_subagents: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Σ hit blocks / Σ blocks over all requests (theoretical prefix-cache hit rate).
    pub theoretical_cache_hit_rate: f64,
    pub rows: Vec<(String, DistSummary)>,
}

impl Collector {
    pub fn add(&mut self, t: &Trace) {
        self.traces += 1;
        let main: Vec<_> = t.main_requests().collect();
        self.turns.push(main.len() as f64);
        if let Some(r) = main.first() {
            self.first_isl.push(r.input_tokens as f64);
        }
        let (lo, hi) = t.time_span();
        self.duration.push(hi - lo);
        for w in main.windows(2) {
            let lcp = lcp(&w[0].hash_ids, &w[1].hash_ids);
            self.new_blocks.push((w[1].hash_ids.len() - lcp) as f64);
        }
        let subs: Vec<_> = t.subagents().collect();
        self.subagents_per_trace.push(subs.len() as f64);
        if !subs.is_empty() {
            self.traces_with_subagents += 1;
        }
        for s in &subs {
            self.inner_per_subagent.push(s.requests.len() as f64);
        }
        // Global recorded-time order for the seen-set walk; the first request has no think time.
        let mut all: Vec<_> = t.all_requests().collect();
        all.sort_by(|a, b| a.t.total_cmp(&b.t));
        let mut seen: HashSet<u64> = HashSet::new();
        for (i, r) in all.iter().enumerate() {
            self.requests += 1;
            self.isl.push(r.input_tokens as f64);
            self.osl.push(r.output_tokens as f64);
            self.input_tokens += r.input_tokens;
            self.output_tokens += r.output_tokens;
            if i > 0
                && let Some(th) = r.think_time
            {
                self.think.push(th);
            }
            if let Some(a) = r.api_time {
                self.api.push(a);
            }
            let mut hits = 0u64;
            for h in &r.hash_ids {
                if !seen.insert(*h) {
                    hits += 1;
                }
            }
            if !r.hash_ids.is_empty() {
                self.hit_rate.push(hits as f64 / r.hash_ids.len() as f64);
            }
            self.hit_blocks += hits;
            self.total_blocks += r.hash_ids.len() as u64;
        }
    }

    pub fn finish(mut self, name: &str) -> TraceStats {
        let rows = vec![
            ("ISL (tokens)".to_string(), DistSummary::of(&mut self.isl)),
            ("OSL (tokens)".to_string(), DistSummary::of(&mut self.osl)),
            ("think time (s)".to_string(), DistSummary::of(&mut self.think)),
            ("turns per trace".to_string(), DistSummary::of(&mut self.turns)),
            ("api time (s)".to_string(), DistSummary::of(&mut self.api)),
            ("first ISL (tokens)".to_string(), DistSummary::of(&mut self.first_isl)),
            ("new blocks per turn".to_string(), DistSummary::of(&mut self.new_blocks)),
            ("prefix hit per request".to_string(), DistSummary::of(&mut self.hit_rate)),
            ("trace span (s)".to_string(), DistSummary::of(&mut self.duration)),
            ("subagents per trace".to_string(), DistSummary::of(&mut self.subagents_per_trace)),
            ("inner requests per subagent".to_string(), DistSummary::of(&mut self.inner_per_subagent)),
        ];
        TraceStats {
            name: name.to_string(),
            traces: self.traces,
            requests: self.requests,
            traces_with_subagents: self.traces_with_subagents,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            theoretical_cache_hit_rate: if self.total_blocks == 0 { f64::NAN } else { self.hit_blocks as f64 / self.total_blocks as f64 },
            rows,
        }
    }
}

/// Length of the longest common prefix of two id lists.
pub fn lcp<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Statistics of an in-memory trace set.
pub fn stats_of(name: &str, traces: &[Trace]) -> TraceStats {
    let mut c = Collector::default();
    for t in traces {
        c.add(t);
    }
    c.finish(name)
}

impl TraceStats {
    pub fn row(&self, name: &str) -> Option<&DistSummary> {
        self.rows.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }
}

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{:.0}", v)
    } else if v.abs() >= 1.0 {
        format!("{:.2}", v)
    } else {
        format!("{:.3}", v)
    }
}

/// A Markdown table with the sets side by side: one row per (distribution, statistic); when there
/// are two or more sets, each later set also gets its ratio to the first.
pub fn markdown_table(sets: &[TraceStats]) -> String {
    let mut out = String::new();
    out.push_str("| distribution | stat |");
    for (i, s) in sets.iter().enumerate() {
        out.push_str(&format!(" {} |", s.name));
        if i > 0 {
            out.push_str(&format!(" {} / {} |", s.name, sets[0].name));
        }
    }
    out.push('\n');
    out.push_str("|---|---|");
    for i in 0..sets.len() {
        out.push_str("---:|");
        if i > 0 {
            out.push_str("---:|");
        }
    }
    out.push('\n');
    let mut line = |label: &str, stat: &str, vals: Vec<f64>| {
        out.push_str(&format!("| {label} | {stat} |"));
        for (i, v) in vals.iter().enumerate() {
            out.push_str(&format!(" {} |", fmt_num(*v)));
            if i > 0 {
                let r = v / vals[0];
                out.push_str(&format!(" {} |", if r.is_finite() { format!("{r:.3}") } else { "-".into() }));
            }
        }
        out.push('\n');
    };
    line("traces", "count", sets.iter().map(|s| s.traces as f64).collect());
    line("requests", "count", sets.iter().map(|s| s.requests as f64).collect());
    line("traces with subagents", "count", sets.iter().map(|s| s.traces_with_subagents as f64).collect());
    line("theoretical prefix-cache hit", "Σhit/Σblocks", sets.iter().map(|s| s.theoretical_cache_hit_rate).collect());
    if let Some(first) = sets.first() {
        for (name, _) in &first.rows {
            for (stat, get) in [
                ("p50", (|s: &DistSummary| s.p50) as fn(&DistSummary) -> f64),
                ("p90", |s: &DistSummary| s.p90),
                ("p99", |s: &DistSummary| s.p99),
                ("mean", |s: &DistSummary| s.mean),
            ] {
                line(name, stat, sets.iter().map(|s| s.row(name).map(get).unwrap_or(f64::NAN)).collect());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_linear_interpolation() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!((percentile(&v, 90.0) - 9.1).abs() < 1e-12);
        assert_eq!(percentile(&v, 50.0), 5.5);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 10.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn lcp_counts_common_prefix() {
        assert_eq!(lcp(&[1, 2, 3], &[1, 2, 4, 5]), 2);
        assert_eq!(lcp::<u32>(&[], &[1]), 0);
        assert_eq!(lcp(&[1, 2], &[1, 2]), 2);
    }
}
