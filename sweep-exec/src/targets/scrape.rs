//! Live-point instrumentation: the server's Prometheus `/metrics` scraped every second
//! (SGLang `sglang:*` and vLLM `vllm:*` names, spec `agentx.md` §8.3 and §9) and the harness's
//! own CPU use sampled from `getrusage`, so a saturated client is flagged instead of being
//! mistaken for a slow server.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// One sample of a scraped text exposition.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Full sample name (`sglang:prompt_tokens_total`, `…_sum`, `…_count`).
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Metric kinds the exporter distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Only engine metrics are kept (frontend / process metrics are not what §9 asks for).
pub fn wanted(name: &str) -> bool {
    name.starts_with("sglang:") || name.starts_with("vllm:")
}

fn parse_labels(s: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i] == b',' || b[i] == b' ') {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let eq = s[i..].find('=')? + i;
        let key = s[i..eq].trim().to_string();
        i = eq + 1;
        if b.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
        let mut val = String::new();
        while i < b.len() && b[i] != b'"' {
            if b[i] == b'\\' && i + 1 < b.len() {
                i += 1;
                val.push(match b[i] {
                    b'n' => '\n',
                    c => c as char,
                });
            } else {
                // Label values are UTF-8; copy whole characters.
                let ch = s[i..].chars().next()?;
                val.push(ch);
                i += ch.len_utf8() - 1;
            }
            i += 1;
        }
        i += 1;
        out.insert(key, val);
    }
    Some(out)
}

/// Parses Prometheus / OpenMetrics text: `(samples of wanted metrics, metric family kinds)`.
/// Histogram buckets are skipped (sum and count carry what the aggregate uses).
pub fn parse(text: &str) -> (Vec<Sample>, BTreeMap<String, Kind>) {
    let mut samples = Vec::new();
    let mut kinds = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(n), Some(t)) = (it.next(), it.next())
                && wanted(n)
            {
                let k = match t {
                    "counter" => Kind::Counter,
                    "histogram" | "summary" => Kind::Histogram,
                    _ => Kind::Gauge,
                };
                kinds.insert(n.to_string(), k);
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, labels, rest) = match line.find('{') {
            Some(o) => {
                let Some(c) = line.rfind('}') else { continue };
                (&line[..o], parse_labels(&line[o + 1..c]), &line[c + 1..])
            }
            None => {
                let sp = line.find(' ').unwrap_or(line.len());
                (&line[..sp], Some(BTreeMap::new()), &line[sp..])
            }
        };
        if !wanted(name) || name.ends_with("_bucket") || name.ends_with("_created") {
            continue;
        }
        let Some(labels) = labels else { continue };
        let Some(value) = rest.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) else { continue };
        samples.push(Sample { name: name.to_string(), labels, value });
    }
    (samples, kinds)
}

/// The family a sample belongs to and its role in it.
fn family<'a>(name: &'a str, kinds: &BTreeMap<String, Kind>) -> (&'a str, Kind, &'static str) {
    if let Some(k) = kinds.get(name) {
        return (name, *k, "");
    }
    for (suffix, role) in [("_total", "total"), ("_sum", "sum"), ("_count", "count")] {
        if let Some(base) = name.strip_suffix(suffix)
            && let Some(k) = kinds.get(base)
        {
            return (base, *k, role);
        }
    }
    // No TYPE line: `_total` names are counters, the rest gauges.
    if name.ends_with("_total") { (name, Kind::Counter, "total") } else { (name, Kind::Gauge, "") }
}

/// One scrape of one endpoint.
#[derive(Clone, Debug)]
pub struct Scrape {
    /// Harness clock (Unix ns, scaled like the records).
    pub at_ns: u64,
    pub endpoint: String,
    pub samples: Vec<Sample>,
}

/// Every scrape of a point, plus failures.
#[derive(Clone, Debug, Default)]
pub struct Scrapes {
    pub scrapes: Vec<Scrape>,
    pub kinds: BTreeMap<String, Kind>,
    pub failures: u64,
    pub last_error: Option<String>,
}

/// One series being assembled: labels, kind, and time series per role (`total`, `sum`, …).
type Series = (BTreeMap<String, String>, Kind, BTreeMap<&'static str, Vec<(u64, f64)>>);

fn series_key(name: &str, labels: &BTreeMap<String, String>) -> String {
    let mut k = name.to_string();
    for (a, b) in labels {
        k.push_str(&format!("|{a}={b}"));
    }
    k
}

impl Scrapes {
    pub fn add(&mut self, at_ns: u64, endpoint: &str, text: &str) {
        let (samples, kinds) = parse(text);
        self.kinds.extend(kinds);
        self.scrapes.push(Scrape { at_ns, endpoint: endpoint.to_string(), samples });
    }

    /// `server_metrics_export.json` (spec §8.3) over scrapes taken in `[from_ns, to_ns]`, with the
    /// last scrape before `from_ns` as the counters' baseline (so the window's deltas are exact).
    pub fn export(&self, from_ns: u64, to_ns: u64) -> Value {
        // (family, series key) → (labels, kind, role-wise time series)
        let mut series: BTreeMap<(String, String), Series> = BTreeMap::new();
        let mut first_ns: BTreeMap<String, u64> = BTreeMap::new();
        let baseline: BTreeMap<&str, u64> = {
            let mut b = BTreeMap::new();
            for s in self.scrapes.iter().filter(|s| s.at_ns < from_ns) {
                b.insert(s.endpoint.as_str(), s.at_ns);
            }
            b
        };
        for s in &self.scrapes {
            let in_window = s.at_ns >= from_ns && s.at_ns <= to_ns;
            let is_base = baseline.get(s.endpoint.as_str()) == Some(&s.at_ns);
            if !in_window && !is_base {
                continue;
            }
            first_ns.entry(format!("{}/metrics", s.endpoint)).or_insert(s.at_ns);
            for x in &s.samples {
                let (fam, kind, role) = family(&x.name, &self.kinds);
                let mut labels = x.labels.clone();
                labels.insert("endpoint_url".into(), format!("{}/metrics", s.endpoint));
                let key = series_key(fam, &labels);
                let e = series.entry((fam.to_string(), key)).or_insert_with(|| (labels, kind, BTreeMap::new()));
                e.2.entry(if role.is_empty() { "value" } else { role }).or_default().push((s.at_ns, x.value));
            }
        }
        let mut metrics: Map<String, Value> = Map::new();
        for ((fam, _), (labels, kind, roles)) in series {
            let entry = match kind {
                Kind::Counter => {
                    let pts = roles.get("total").or(roles.get("value")).cloned().unwrap_or_default();
                    counter_json(&pts)
                }
                Kind::Gauge => {
                    let pts = roles.get("value").or(roles.get("total")).cloned().unwrap_or_default();
                    gauge_json(&pts, from_ns)
                }
                Kind::Histogram => {
                    let (sum, count) = (roles.get("sum").cloned().unwrap_or_default(), roles.get("count").cloned().unwrap_or_default());
                    hist_json(&sum, &count)
                }
            };
            let Some((stats, slices)) = entry else { continue };
            let v = metrics.entry(fam).or_insert_with(|| json!({"series": []}));
            v["series"].as_array_mut().expect("series array").push(json!({"labels": labels, "stats": stats, "timeslices": slices}));
        }
        let info: Map<String, Value> = first_ns.into_iter().map(|(k, v)| (k, json!({"first_update_ns": v}))).collect();
        json!({"summary": {"endpoint_info": info, "scrapes": self.scrapes.len(), "scrape_failures": self.failures, "last_error": self.last_error}, "metrics": metrics})
    }
}

fn span_s(pts: &[(u64, f64)]) -> f64 {
    match (pts.first(), pts.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => (b.0 - a.0) as f64 / 1e9,
        _ => 0.0,
    }
}

/// Counter: window total and rate; one timeslice per scrape interval. A reset (value going
/// down, e.g. a restarted server) counts from zero.
fn counter_json(pts: &[(u64, f64)]) -> Option<(Value, Vec<Value>)> {
    if pts.is_empty() {
        return None;
    }
    let mut total = 0.0;
    let mut slices = Vec::new();
    for w in pts.windows(2) {
        let d = if w[1].1 >= w[0].1 { w[1].1 - w[0].1 } else { w[1].1 };
        total += d;
        let dt = (w[1].0 - w[0].0) as f64 / 1e9;
        slices.push(json!({"start_ns": w[0].0, "total": d, "rate": if dt > 0.0 { d / dt } else { 0.0 }}));
    }
    let span = span_s(pts);
    Some((json!({"total": total, "rate": if span > 0.0 { total / span } else { 0.0 }}), slices))
}

fn gauge_json(pts: &[(u64, f64)], from_ns: u64) -> Option<(Value, Vec<Value>)> {
    // The baseline scrape (before the window) is not a window observation for a gauge.
    let pts: Vec<(u64, f64)> = pts.iter().copied().filter(|p| p.0 >= from_ns).collect();
    if pts.is_empty() {
        return None;
    }
    let avg = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let max = pts.iter().map(|p| p.1).fold(f64::MIN, f64::max);
    let slices = pts.iter().map(|p| json!({"start_ns": p.0, "avg": p.1, "max": p.1})).collect();
    Some((json!({"avg": avg, "max": max}), slices))
}

fn hist_json(sum: &[(u64, f64)], count: &[(u64, f64)]) -> Option<(Value, Vec<Value>)> {
    if sum.is_empty() || count.is_empty() {
        return None;
    }
    let (s, _) = counter_json(sum)?;
    let (c, _) = counter_json(count)?;
    let (ts, tc) = (s["total"].as_f64().unwrap_or(0.0), c["total"].as_f64().unwrap_or(0.0));
    let slices = sum
        .windows(2)
        .zip(count.windows(2))
        .map(|(a, b)| json!({"start_ns": a[0].0, "sum": (a[1].1 - a[0].1).max(0.0), "count": (b[1].1 - b[0].1).max(0.0)}))
        .collect();
    Some((json!({"sum": ts, "count": tc, "avg": if tc > 0.0 { ts / tc } else { 0.0 }}), slices))
}

/// Sum of a counter family's window totals over series whose labels pass `keep`
/// (names with or without `_total`).
fn counter_sum(export: &Value, names: &[&str], keep: impl Fn(&Value) -> bool) -> Option<f64> {
    let mut found = false;
    let mut s = 0.0;
    for n in names {
        for cand in [n.to_string(), format!("{n}_total")] {
            if let Some(series) = export["metrics"][&cand]["series"].as_array() {
                for x in series.iter().filter(|x| keep(&x["labels"])) {
                    if let Some(t) = x["stats"]["total"].as_f64() {
                        s += t;
                        found = true;
                    }
                }
            }
        }
    }
    found.then_some(s)
}

fn gauge_stat(export: &Value, name: &str, stat: &str) -> Option<f64> {
    let series = export["metrics"][name]["series"].as_array()?;
    let v: Vec<f64> = series.iter().filter_map(|x| x["stats"][stat].as_f64()).collect();
    if v.is_empty() {
        return None;
    }
    Some(if stat == "max" { v.iter().copied().fold(f64::MIN, f64::max) } else { v.iter().sum::<f64>() / v.len() as f64 })
}

fn hist_mean(export: &Value, name: &str) -> Option<f64> {
    let series = export["metrics"][name]["series"].as_array()?;
    let (s, c) = series
        .iter()
        .fold((0.0, 0.0), |(s, c), x| (s + x["stats"]["sum"].as_f64().unwrap_or(0.0), c + x["stats"]["count"].as_f64().unwrap_or(0.0)));
    (c > 0.0).then(|| s / c)
}

/// The aggregate's `server_metrics` block from an export: server-reported cache hit rate
/// (SGLang: Σ device-source cached tokens / Σ prompt tokens, spec checklist 41; vLLM: prefix-cache
/// hits / queries), token counters, queue and KV gauges and server-side latency means.
pub fn summary(export: &Value) -> Value {
    let any = |_: &Value| true;
    let device = |l: &Value| l.get("cache_source").and_then(Value::as_str).is_none_or(|s| s == "device");
    let mut m = Map::new();
    m.insert("present".into(), json!(export["metrics"].as_object().is_some_and(|o| !o.is_empty())));
    m.insert("source".into(), json!("/metrics scrape (1 s)"));
    m.insert("scrapes".into(), export["summary"]["scrapes"].clone());
    m.insert("scrape_failures".into(), export["summary"]["scrape_failures"].clone());
    let prompt = counter_sum(export, &["sglang:prompt_tokens", "vllm:prompt_tokens"], any);
    let cached = counter_sum(export, &["sglang:cached_tokens"], device);
    let gen_tokens = counter_sum(export, &["sglang:generation_tokens", "vllm:generation_tokens"], any);
    let (hits, queries) = (
        counter_sum(export, &["vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"], any),
        counter_sum(export, &["vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"], any),
    );
    let hit_rate = match (cached, prompt, hits, queries) {
        (Some(c), Some(p), _, _) if p > 0.0 => Some(c / p),
        (_, _, Some(h), Some(q)) if q > 0.0 => Some(h / q),
        _ => None,
    };
    m.insert("cache_hit_rate".into(), json!(hit_rate));
    m.insert("prompt_tokens_total".into(), json!(prompt));
    m.insert("cached_tokens_total".into(), json!(cached.or(hits)));
    m.insert("generation_tokens_total".into(), json!(gen_tokens));
    m.insert("num_requests_total".into(), json!(counter_sum(export, &["sglang:num_requests", "vllm:request_success"], any)));
    for (out, names) in [
        ("token_usage", ["sglang:token_usage", "vllm:kv_cache_usage_perc"]),
        ("num_running_reqs", ["sglang:num_running_reqs", "vllm:num_requests_running"]),
        ("num_queue_reqs", ["sglang:num_queue_reqs", "vllm:num_requests_waiting"]),
    ] {
        let pick = |stat| names.iter().find_map(|n| gauge_stat(export, n, stat));
        m.insert(out.into(), json!({"avg": pick("avg"), "max": pick("max")}));
    }
    m.insert("spec_accept_length".into(), json!(gauge_stat(export, "sglang:spec_accept_length", "avg")));
    m.insert("kv".into(), kv_summary(export, hit_rate));
    for (out, names) in [
        ("ttft_mean_s", ["sglang:time_to_first_token_seconds", "vllm:time_to_first_token_seconds"]),
        ("e2e_mean_s", ["sglang:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds"]),
        ("itl_mean_s", ["sglang:inter_token_latency_seconds", "vllm:inter_token_latency_seconds"]),
        ("queue_time_mean_s", ["sglang:queue_time_seconds", "vllm:request_queue_time_seconds"]),
    ] {
        m.insert(out.into(), json!(names.iter().find_map(|n| hist_mean(export, n))));
    }
    Value::Object(m)
}

/// KV figures a live server exports (SGLang 0.5.23 names). Re-prefill and the ideal hit
/// rate have no metric and stay null; peak use is the sampled gauge's highest value.
fn kv_summary(export: &Value, hit_rate: Option<f64>) -> Value {
    let any = |_: &Value| true;
    let series = |name: &str| export["metrics"][name]["series"].as_array().cloned().unwrap_or_default();
    let maxes = |name: &str| series(name).iter().filter_map(|x| x["stats"]["max"].as_f64()).collect::<Vec<f64>>();
    // One series per DP rank: the pool is their sum; peak tokens only when there is one rank
    // (per-rank maxima need not coincide in time).
    let pool = maxes("sglang:max_total_num_tokens");
    let used = maxes("sglang:num_used_tokens");
    let usage = maxes("sglang:token_usage");
    json!({
        "source": "/metrics",
        "pool_tokens": (!pool.is_empty()).then(|| pool.iter().sum::<f64>() as u64),
        "peak_used_tokens": (used.len() == 1).then(|| used[0] as u64),
        "peak_token_usage": usage.iter().copied().reduce(f64::max),
        "evicted_tokens": counter_sum(export, &["sglang:evicted_tokens"], any).map(|x| x as u64),
        "reprefilled_tokens": Value::Null,
        "retractions": counter_sum(export, &["sglang:num_retracted_requests"], any).map(|x| x as u64),
        "prefix_hit_rate": hit_rate,
        "ideal_prefix_hit_rate": Value::Null,
    })
}

/// CPU time (user + system) of this process so far, seconds.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Samples the process's CPU use; `busy` is the share of the cores the process may use.
#[derive(Clone, Debug)]
pub struct CpuSampler {
    cores: f64,
    start_cpu: f64,
    start: std::time::Instant,
    last_cpu: f64,
    last: std::time::Instant,
    /// Highest busy share over ≥ 1 s intervals.
    pub max_busy: f64,
}

impl Default for CpuSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuSampler {
    pub fn new() -> Self {
        let now = std::time::Instant::now();
        let cpu = process_cpu_seconds();
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as f64;
        CpuSampler { cores, start_cpu: cpu, start: now, last_cpu: cpu, last: now, max_busy: 0.0 }
    }

    /// Takes a sample when at least a second has passed since the last one.
    pub fn tick(&mut self) {
        let now = std::time::Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        if dt < 1.0 {
            return;
        }
        let cpu = process_cpu_seconds();
        self.max_busy = self.max_busy.max((cpu - self.last_cpu) / (dt * self.cores));
        self.last_cpu = cpu;
        self.last = now;
    }

    /// CPU seconds used since the sampler started.
    pub fn cpu_seconds(&self) -> f64 {
        process_cpu_seconds() - self.start_cpu
    }

    pub fn wall_seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    pub fn cores(&self) -> f64 {
        self.cores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"# HELP sglang:prompt_tokens Number of prefill tokens processed.
# TYPE sglang:prompt_tokens counter
sglang:prompt_tokens_total{model_name="m",is_streaming="true"} 1000
# TYPE sglang:cached_tokens counter
sglang:cached_tokens_total{model_name="m",cache_source="device"} 600
sglang:cached_tokens_total{model_name="m",cache_source="host"} 77
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",tp_rank="0"} 0.5
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} 1
sglang:time_to_first_token_seconds_sum{model_name="m"} 2.0
sglang:time_to_first_token_seconds_count{model_name="m"} 4
# TYPE process_cpu_seconds counter
process_cpu_seconds_total 3
# EOF
"#;

    fn b() -> String {
        A.replace("} 1000", "} 5000")
            .replace("} 600", "} 3800")
            .replace("} 77", "} 1077")
            .replace("} 0.5", "} 0.9")
            .replace("} 2.0", "} 5.0")
            .replace("} 4\n", "} 10\n")
    }

    #[test]
    fn parses_engine_metrics_only() {
        let (s, k) = parse(A);
        assert!(s.iter().all(|x| wanted(&x.name)), "{s:?}");
        assert_eq!(s.len(), 6, "{s:?}");
        assert_eq!(k["sglang:prompt_tokens"], Kind::Counter);
        assert_eq!(k["sglang:time_to_first_token_seconds"], Kind::Histogram);
        assert_eq!(s[0].labels["is_streaming"], "true");
    }

    #[test]
    fn window_deltas_give_the_device_cache_hit_rate_and_server_ttft() {
        let mut sc = Scrapes::default();
        sc.add(1_000, "http://h:1", A);
        sc.add(2_000_000_000, "http://h:1", &b());
        let e = sc.export(1_000_000_000, 3_000_000_000);
        let p = &e["metrics"]["sglang:prompt_tokens"]["series"][0];
        assert_eq!(p["stats"]["total"], 4000.0);
        assert_eq!(p["labels"]["endpoint_url"], "http://h:1/metrics");
        let s = summary(&e);
        // Device-source cached tokens only: (3800 − 600) / (5000 − 1000).
        assert!((s["cache_hit_rate"].as_f64().unwrap() - 0.8).abs() < 1e-12, "{s}");
        // Histogram means from window deltas: (5 − 2) / (10 − 4).
        assert!((s["ttft_mean_s"].as_f64().unwrap() - 0.5).abs() < 1e-12, "{s}");
        // The baseline gauge reading (before the window) is not an observation.
        assert_eq!(s["token_usage"]["avg"], 0.9);
        assert!(e["metrics"].get("process_cpu_seconds").is_none());
    }

    #[test]
    fn vllm_names_give_a_hit_rate_too() {
        let t = |h: f64, q: f64| {
            format!(
                "# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total{{model_name=\"m\"}} {h}\n# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total{{model_name=\"m\"}} {q}\n"
            )
        };
        let mut sc = Scrapes::default();
        sc.add(0, "u", &t(0.0, 0.0));
        sc.add(1_000_000_000, "u", &t(30.0, 120.0));
        let s = summary(&sc.export(0, 2_000_000_000));
        assert!((s["cache_hit_rate"].as_f64().unwrap() - 0.25).abs() < 1e-12, "{s}");
    }

    #[test]
    fn cpu_seconds_grow_with_work() {
        let c = CpuSampler::new();
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 200 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(c.cpu_seconds() > 0.05, "{}", c.cpu_seconds());
    }
}
