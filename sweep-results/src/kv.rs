//! Per-point KV figures: pool size, peak use, eviction, re-prefill, retraction and the
//! prefix hit rate against the ideal (infinite-cache) one.
//!
//! Virtual-clock points take them from the engine itself (`server_metrics.kv`); live
//! points from the server's `/metrics` where it exports them (SGLang 0.5.23 names).
//! A figure the source does not give stays `None`: nothing is estimated here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KvSummary {
    /// `engine` (virtual clock) or `/metrics`.
    pub source: String,
    /// KV pool over all attention-DP ranks, tokens.
    pub pool_tokens: Option<u64>,
    /// Highest tokens held by requests (idle cache excluded), all ranks together.
    pub peak_used_tokens: Option<u64>,
    /// Highest per-rank used / pool (sampled gauge on live servers).
    pub peak_token_usage: Option<f64>,
    pub evicted_tokens: Option<u64>,
    /// Prefill paid again: evicted prefixes at first admissions plus retraction recompute.
    pub reprefilled_tokens: Option<u64>,
    pub retractions: Option<u64>,
    pub prefix_hit_rate: Option<f64>,
    /// The hit rate of the same requests had nothing been evicted.
    pub ideal_prefix_hit_rate: Option<f64>,
}

impl KvSummary {
    /// From an aggregate's `server_metrics` block (either source); `None` if it has no KV figure.
    pub fn from_server_metrics(m: &Value) -> Option<KvSummary> {
        let kv = m.get("kv")?;
        let u = |k: &str| kv.get(k).and_then(Value::as_u64);
        let f = |k: &str| kv.get(k).and_then(Value::as_f64);
        let s = KvSummary {
            source: kv.get("source").and_then(Value::as_str).unwrap_or("engine").to_string(),
            pool_tokens: u("pool_tokens"),
            peak_used_tokens: u("peak_used_tokens"),
            peak_token_usage: f("peak_token_usage"),
            evicted_tokens: u("evicted_tokens"),
            reprefilled_tokens: u("reprefilled_tokens"),
            retractions: u("retractions"),
            prefix_hit_rate: f("prefix_hit_rate"),
            ideal_prefix_hit_rate: f("ideal_prefix_hit_rate"),
        };
        let any = s.pool_tokens.is_some() || s.evicted_tokens.is_some() || s.retractions.is_some() || s.prefix_hit_rate.is_some();
        any.then_some(s)
    }

    /// Cells for the report's KV table: pool, peak, usage, evicted, re-prefilled,
    /// retractions, hit rate / ideal.
    pub fn cells(&self) -> [String; 7] {
        let tok = |x: Option<u64>| x.map_or("-".to_string(), human_tokens);
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1} %", v * 100.0));
        [
            tok(self.pool_tokens),
            tok(self.peak_used_tokens),
            pct(self.peak_token_usage),
            tok(self.evicted_tokens),
            tok(self.reprefilled_tokens),
            self.retractions.map_or("-".into(), |x| x.to_string()),
            format!("{} / {}", pct(self.prefix_hit_rate), pct(self.ideal_prefix_hit_rate)),
        ]
    }
}

pub const HEADERS: [&str; 7] =
    ["KV pool (tokens)", "peak used", "peak usage", "evicted", "re-prefilled", "retractions", "prefix hit / ideal"];

fn human_tokens(x: u64) -> String {
    match x {
        0..1_000 => x.to_string(),
        1_000..1_000_000 => format!("{:.1}K", x as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2}M", x as f64 / 1e6),
        _ => format!("{:.2}G", x as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_figures_stay_absent() {
        assert_eq!(KvSummary::from_server_metrics(&json!({"present": false})), None);
        let live = json!({"kv": {"source": "/metrics", "pool_tokens": 2_000_000u64, "evicted_tokens": 512u64}});
        let s = KvSummary::from_server_metrics(&live).unwrap();
        assert_eq!(s.source, "/metrics");
        assert_eq!(s.ideal_prefix_hit_rate, None);
        assert_eq!(s.cells(), ["2.00M", "-", "-", "512", "-", "-", "- / -"].map(String::from));
    }
}
