//! A page per point (`<point>/report.html`, linked from the run's summary and charts): its
//! headline numbers with intervals, the distributions of TTFT, ITL and E2EL (histogram with the
//! CDF over it and p50 / p90 / p99 marked), and the point over time — requests in flight and
//! throughput from the client's records, running and queued requests and KV use from the
//! server (`timeseries.json` sampled by the reference engine, or the `/metrics` scrape of a live
//! server in `server_metrics_export.json`) — then its flags and profiles, collapsed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::axis::Axis;
use super::chart::{axes, titles};
use super::error::ReportError;
use super::html::STYLE;
use super::scene::{Anchor, Item, Rgb, Scene};
use crate::gate::fmt_num;
use crate::metrics::Stats;
use crate::records::{Record, RecordPhase};
use crate::results::{PointResult, RunSummary, point_dir};

const W: f64 = 430.0;
const ML: f64 = 70.0;
const MR: f64 = 54.0;
const MT: f64 = 50.0;
const PH: f64 = 220.0;
const SERIES: [Rgb; 4] = [Rgb(31, 119, 180), Rgb(214, 39, 40), Rgb(44, 160, 44), Rgb(255, 127, 14)];

fn esc(s: &str) -> String {
    crate::html::escape(s)
}

/// A point's server-side time series, on the records' clock.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeSeries {
    /// Where they come from, in words.
    pub source: String,
    pub series: Vec<Series>,
}

/// `(name, panel, (t_ns, value) samples)`; panels: `requests`, `kv`, `throughput`.
pub type Series = (String, &'static str, Vec<(u64, f64)>);

impl TimeSeries {
    /// From the reference engine's `timeseries.json`.
    fn from_engine(v: &Value, gpus: f64) -> Option<TimeSeries> {
        let t: Vec<u64> = v["t_ns"].as_array()?.iter().filter_map(Value::as_u64).collect();
        let col = |k: &str| -> Vec<f64> { v[k].as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default() };
        let zip = |vals: Vec<f64>| -> Vec<(u64, f64)> { t.iter().copied().zip(vals).collect() };
        // Counters to rates per GPU over each interval.
        let rate = |vals: Vec<f64>| -> Vec<(u64, f64)> {
            t.windows(2)
                .zip(vals.windows(2))
                .map(|(tw, vw)| (tw[0], if tw[1] > tw[0] { (vw[1] - vw[0]).max(0.0) / ((tw[1] - tw[0]) as f64 / 1e9) / gpus } else { 0.0 }))
                .collect()
        };
        let mut series = vec![
            ("running".to_string(), "requests", zip(col("running"))),
            ("queued".to_string(), "requests", zip(col("queued"))),
            ("KV in use by requests".to_string(), "kv", zip(col("kv_usage").into_iter().map(|x| x * 100.0).collect())),
        ];
        let cap = v["kv_capacity_tokens"].as_f64().unwrap_or(0.0);
        if cap > 0.0 {
            let cached: Vec<f64> = col("kv_cached_tokens").into_iter().map(|x| x / cap * 100.0).collect();
            series.push(("idle cached KV (evictable)".to_string(), "kv", zip(cached)));
        }
        series.push(("server output".to_string(), "throughput", rate(col("generation_tokens_total"))));
        Some(TimeSeries { source: v["source"].as_str().unwrap_or("reference engine").to_string(), series })
    }

    /// From a live server's `/metrics` scrape (`server_metrics_export.json`): SGLang or vLLM
    /// gauges, summed (queues) or maxed (KV use) over ranks and endpoints per second.
    fn from_scrape(v: &Value, gpus: f64) -> Option<TimeSeries> {
        let gauge = |names: &[&str], sum: bool, scale: f64| -> Vec<(u64, f64)> {
            let mut by: std::collections::BTreeMap<u64, f64> = std::collections::BTreeMap::new();
            for n in names {
                for s in v["metrics"][*n]["series"].as_array().into_iter().flatten() {
                    for sl in s["timeslices"].as_array().into_iter().flatten() {
                        let (Some(t), Some(x)) = (sl["start_ns"].as_u64(), sl["avg"].as_f64().or(sl["rate"].as_f64())) else { continue };
                        let e = by.entry(t / 1_000_000_000 * 1_000_000_000).or_insert(0.0);
                        *e = if sum { *e + x * scale } else { e.max(x * scale) };
                    }
                }
            }
            by.into_iter().collect()
        };
        let series: Vec<Series> = vec![
            ("running".into(), "requests", gauge(&["sglang:num_running_reqs", "vllm:num_requests_running"], true, 1.0)),
            ("queued".into(), "requests", gauge(&["sglang:num_queue_reqs", "vllm:num_requests_waiting"], true, 1.0)),
            (
                "KV in use (fullest rank)".into(),
                "kv",
                gauge(&["sglang:token_usage", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"], false, 100.0),
            ),
            ("server output".into(), "throughput", gauge(&["sglang:generation_tokens", "vllm:generation_tokens"], true, 1.0 / gpus)),
        ];
        let series: Vec<_> = series.into_iter().filter(|s| !s.2.is_empty()).collect();
        (!series.is_empty()).then(|| TimeSeries { source: "the server's /metrics, scraped every second".into(), series })
    }

    /// A point folder's server time series, if the target gave any.
    pub fn load(dir: &Path, gpus: u32) -> Option<TimeSeries> {
        let read = |n: &str| -> Option<Value> { serde_json::from_str(&std::fs::read_to_string(dir.join(n)).ok()?).ok() };
        let g = gpus.max(1) as f64;
        read("timeseries.json")
            .and_then(|v| TimeSeries::from_engine(&v, g))
            .or_else(|| read("server_metrics_export.json").and_then(|v| TimeSeries::from_scrape(&v, g)))
    }
}

/// A bucket width that gives about 120 buckets: 1, 2, 5, 10, 15, 30, 60, 120 or 300 s.
fn bucket_s(span_s: f64) -> f64 {
    let raw = span_s / 120.0;
    [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0].into_iter().find(|b| *b >= raw).unwrap_or(600.0)
}

/// What the client saw over time, in buckets from the first request's start: requests in flight
/// (time-averaged), output and total tok/s/GPU (each request's output spread over its decode,
/// its input over its prefill).
pub struct ClientSeries {
    pub t0_ns: u64,
    pub bucket_s: f64,
    pub in_flight: Vec<f64>,
    pub output: Vec<f64>,
    pub total: Vec<f64>,
    /// Where profiling starts, seconds from `t0_ns` (warmup before it).
    pub profiling_s: Option<f64>,
}

impl ClientSeries {
    pub fn of(records: &[Record], gpus: u32) -> Option<ClientSeries> {
        let t0 = records.iter().map(|r| r.start_ns).min()?;
        let t1 = records.iter().map(|r| r.end_ns).max()?;
        let span = (t1.saturating_sub(t0)) as f64 / 1e9;
        let b = bucket_s(span.max(1.0));
        let n = ((span / b).ceil() as usize).max(1);
        let (mut fl, mut out, mut tot) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let sec = |t: u64| t.saturating_sub(t0) as f64 / 1e9;
        // Adds `amount` spread evenly over [a, z) seconds into `v` (a rate per second of bucket).
        let spread = |v: &mut Vec<f64>, a: f64, z: f64, amount: f64| {
            if z <= a {
                let i = ((a / b) as usize).min(n - 1);
                v[i] += amount / b;
                return;
            }
            let per_s = amount / (z - a);
            let (i0, i1) = ((a / b) as usize, ((z / b) as usize).min(n - 1));
            for (i, x) in v.iter_mut().enumerate().take(i1 + 1).skip(i0.min(n - 1)) {
                let (lo, hi) = (a.max(i as f64 * b), z.min((i + 1) as f64 * b));
                if hi > lo {
                    *x += per_s * (hi - lo) / b;
                }
            }
        };
        let g = gpus.max(1) as f64;
        for r in records {
            let (s, e) = (sec(r.start_ns), sec(r.end_ns));
            spread(&mut fl, s, e, e - s);
            if !r.ok() {
                continue;
            }
            let first = r.first_token_ns.map(sec).unwrap_or(e);
            let last = r.last_chunk_ns.map(sec).unwrap_or(e);
            let (i, o) = (r.input_tokens.unwrap_or(0) as f64 / g, r.output_tokens.unwrap_or(0) as f64 / g);
            spread(&mut out, first, last, o);
            spread(&mut tot, first, last, o);
            spread(&mut tot, s, first, i);
        }
        let profiling_s = records.iter().filter(|r| r.phase == RecordPhase::Profiling).map(|r| r.start_ns).min().map(sec);
        Some(ClientSeries { t0_ns: t0, bucket_s: b, in_flight: fl, output: out, total: tot, profiling_s })
    }

    fn xy(&self, v: &[f64]) -> Vec<(f64, f64)> {
        v.iter().enumerate().map(|(i, y)| ((i as f64 + 0.5) * self.bucket_s, *y)).collect()
    }

    /// Server samples `(t_ns, value)` averaged into the client's buckets, so both read alike.
    fn rebucket(&self, pts: &[(u64, f64)]) -> Vec<(f64, f64)> {
        let mut acc: std::collections::BTreeMap<usize, (f64, usize)> = std::collections::BTreeMap::new();
        for (t, v) in pts {
            let i = (t.saturating_sub(self.t0_ns) as f64 / 1e9 / self.bucket_s) as usize;
            let e = acc.entry(i).or_insert((0.0, 0));
            e.0 += v;
            e.1 += 1;
        }
        acc.into_iter().map(|(i, (s, n))| ((i as f64 + 0.5) * self.bucket_s, s / n as f64)).collect()
    }
}

/// A time-series panel: lines against seconds, the warmup shaded.
fn series_panel(
    title: &str,
    sub: &str,
    y_title: &str,
    lines: &[(String, Vec<(f64, f64)>)],
    warmup_end: Option<f64>,
    ymax: Option<f64>,
) -> Scene {
    let xs: Vec<f64> = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).chain([0.0]).collect();
    let mut ys: Vec<f64> = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).chain([0.0]).collect();
    if let Some(m) = ymax {
        ys.push(m);
    }
    let xa = Axis::fit_with(&xs, ML, W - MR, Some(false));
    let ya = Axis::fit_with(&ys, MT + PH, MT, Some(false));
    let mut items = Vec::new();
    titles(&mut items, title, sub, ML);
    axes(&mut items, &xa, &ya, "seconds from the first request", y_title);
    if let Some(w) = warmup_end.filter(|w| *w > 0.0) {
        let b = super::scene::Bounds::new(xa.px(0.0), MT, xa.px(w), MT + PH);
        items.push(Item::Rect { b, fill: Some(Rgb(200, 200, 200)), stroke: None, opacity: 0.35 });
        items.push(Item::Text {
            at: (b.x0 + 4.0, MT + 10.0),
            text: "warmup".into(),
            size: 10.0,
            anchor: Anchor::Start,
            color: Rgb::GREY,
            bold: false,
            vertical: false,
            class: "",
        });
    }
    legend_lines(&mut items, lines, &xa, &ya)
}

/// Draws `lines` and a legend under the plot; returns the scene.
fn legend_lines(items: &mut Vec<Item>, lines: &[(String, Vec<(f64, f64)>)], xa: &Axis, ya: &Axis) -> Scene {
    let mut ly = MT + PH + 56.0;
    let mut lx = 20.0;
    for (i, (name, pts)) in lines.iter().enumerate() {
        let color = SERIES[i % SERIES.len()];
        items.push(Item::Line {
            pts: pts.iter().map(|(x, y)| (xa.px(*x), ya.px(*y))).collect(),
            color,
            width: 1.6,
            dash: false,
            opacity: 1.0,
            class: "series",
        });
        let w = 30.0 + super::scene::text_width(name, 11.0) + 14.0;
        if lx + w > W - 10.0 {
            lx = 20.0;
            ly += 16.0;
        }
        items.push(Item::line(vec![(lx, ly), (lx + 22.0, ly)], color, 2.0));
        items.push(Item::Text {
            at: (lx + 28.0, ly),
            text: name.clone(),
            size: 11.0,
            anchor: Anchor::Start,
            color: Rgb::BLACK,
            bold: false,
            vertical: false,
            class: "legend",
        });
        lx += w;
    }
    let items = std::mem::take(items);
    Scene { w: W, h: ly + 14.0, items }
}

/// Histogram of `values` (bars, left axis: requests) with its CDF over it (right axis) and
/// p50 / p90 / p99 marked. Logarithmic bins when the values span more than 20×.
fn distribution(title: &str, unit: &str, values: &[f64]) -> Scene {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    v.sort_by(f64::total_cmp);
    let st = Stats::of(v.clone());
    let sub = format!("{} requests · p50 {} · p90 {} · p99 {} {unit}", v.len(), fmt_v(st.p50), fmt_v(st.p90), fmt_v(st.p99));
    let xa = Axis::fit_with(&v, ML, W - MR, None);
    let (edges, counts) = histogram(&v, &xa);
    let ya = Axis::fit_with(&counts.iter().map(|c| *c as f64).chain([0.0]).collect::<Vec<_>>(), MT + PH, MT, Some(false));
    let mut items = Vec::new();
    titles(&mut items, title, &sub, ML);
    axes(&mut items, &xa, &ya, &xa.title(&format!("{title} ({unit})")), "requests per bin");
    for (i, c) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
        let b = super::scene::Bounds::new(xa.px(edges[i]) + 0.5, ya.px(*c as f64), xa.px(edges[i + 1]) - 0.5, ya.px(0.0));
        items.push(Item::Rect { b, fill: Some(BAR_COLOR), stroke: None, opacity: 1.0 });
    }
    cdf_line(&mut items, &v, &xa);
    if !v.is_empty() {
        percentile_marks(&mut items, &st, &xa);
    }
    let h = distribution_legend(&mut items);
    Scene { w: W, h, items }
}

/// The histogram's bars.
const BAR_COLOR: Rgb = Rgb(158, 192, 222);
/// The CDF's line and right-hand axis.
const CDF_COLOR: Rgb = Rgb(214, 39, 40);

/// The bin edges over `xa`'s range (logarithmic on a log axis) and how many of the sorted
/// values `v` fall in each bin.
fn histogram(v: &[f64], xa: &Axis) -> (Vec<f64>, Vec<usize>) {
    const BINS: usize = 40;
    let edges: Vec<f64> = (0..=BINS)
        .map(|i| {
            let t = i as f64 / BINS as f64;
            if xa.log { 10f64.powf(xa.lo.log10() + t * (xa.hi.log10() - xa.lo.log10())) } else { xa.lo + t * (xa.hi - xa.lo) }
        })
        .collect();
    let mut counts = vec![0usize; BINS];
    for x in v {
        let i = edges.partition_point(|e| e <= x).saturating_sub(1).min(BINS - 1);
        counts[i] += 1;
    }
    (edges, counts)
}

/// The CDF of the sorted values `v` on a right-hand 0–100 % axis.
fn cdf_line(items: &mut Vec<Item>, v: &[f64], xa: &Axis) {
    let (top, bottom) = (MT, MT + PH);
    let cy = |q: f64| bottom - q * (bottom - top);
    let n = v.len().max(1);
    let step = (n / 300).max(1);
    let mut cdf: Vec<(f64, f64)> = v.iter().enumerate().step_by(step).map(|(i, x)| (xa.px(*x), cy((i + 1) as f64 / n as f64))).collect();
    if let Some(last) = v.last() {
        cdf.push((xa.px(*last), cy(1.0)));
    }
    items.push(Item::Line { pts: cdf, color: CDF_COLOR, width: 1.8, dash: false, opacity: 1.0, class: "cdf" });
    for q in [0.0, 0.25, 0.5, 0.75, 1.0] {
        items.push(Item::line(vec![(W - MR, cy(q)), (W - MR + 4.0, cy(q))], Rgb::GREY, 1.0));
        items.push(Item::Text {
            at: (W - MR + 7.0, cy(q)),
            text: format!("{:.0} %", q * 100.0),
            size: 10.0,
            anchor: Anchor::Start,
            color: CDF_COLOR,
            bold: false,
            vertical: false,
            class: "tick",
        });
    }
}

/// Percentile markers, their labels on separate rows so they never overprint.
fn percentile_marks(items: &mut Vec<Item>, st: &Stats, xa: &Axis) {
    for (k, (name, x)) in [("p50", st.p50), ("p90", st.p90), ("p99", st.p99)].into_iter().enumerate() {
        let px = xa.px(x);
        items.push(Item::Line {
            pts: vec![(px, MT), (px, MT + PH)],
            color: Rgb::BLACK,
            width: 1.0,
            dash: true,
            opacity: 0.8,
            class: "pct",
        });
        let right = px + 30.0 < W - MR;
        items.push(Item::Text {
            at: (if right { px + 3.0 } else { px - 3.0 }, MT + 10.0 + k as f64 * 13.0),
            text: name.into(),
            size: 10.0,
            anchor: if right { Anchor::Start } else { Anchor::End },
            color: Rgb::BLACK,
            bold: false,
            vertical: false,
            class: "pctl",
        });
    }
}

/// The legend under a distribution (bars and CDF); returns the scene's height.
fn distribution_legend(items: &mut Vec<Item>) -> f64 {
    let ly = MT + PH + 56.0;
    items.push(Item::Rect {
        b: super::scene::Bounds::new(20.0, ly - 5.0, 42.0, ly + 5.0),
        fill: Some(BAR_COLOR),
        stroke: None,
        opacity: 1.0,
    });
    items.push(Item::Text {
        at: (48.0, ly),
        text: "requests per bin".into(),
        size: 11.0,
        anchor: Anchor::Start,
        color: Rgb::BLACK,
        bold: false,
        vertical: false,
        class: "legend",
    });
    items.push(Item::line(vec![(170.0, ly), (192.0, ly)], CDF_COLOR, 2.0));
    items.push(Item::Text {
        at: (198.0, ly),
        text: "CDF (right axis)".into(),
        size: 11.0,
        anchor: Anchor::Start,
        color: Rgb::BLACK,
        bold: false,
        vertical: false,
        class: "legend",
    });
    ly + 14.0
}

fn fmt_v(x: f64) -> String {
    if x >= 100.0 {
        fmt_num(x)
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

/// The successful profiling records' TTFT, ITL, E2EL and E2EL per output token in seconds, ISL
/// and OSL in tokens.
fn per_request(records: &[Record]) -> [(&'static str, &'static str, Vec<f64>); 6] {
    let ok: Vec<&Record> = records.iter().filter(|r| r.phase == RecordPhase::Profiling && r.ok()).collect();
    [
        ("TTFT", "s", ok.iter().filter_map(|r| r.ttft_ns()).map(|x| x as f64 / 1e9).collect()),
        ("ITL", "s", ok.iter().filter_map(|r| r.itl_ns()).map(|x| x / 1e9).collect()),
        ("E2EL", "s", ok.iter().filter_map(|r| r.e2el_ns()).map(|x| x as f64 / 1e9).collect()),
        (
            "E2EL / OSL",
            "s/token",
            ok.iter()
                .filter_map(|r| match (r.e2el_ns(), r.output_tokens) {
                    (Some(e), Some(o)) if e > 0 && o > 0 => Some(e as f64 / 1e9 / o as f64),
                    _ => None,
                })
                .collect(),
        ),
        ("ISL", "tokens", ok.iter().filter_map(|r| r.input_tokens).map(|x| x as f64).collect()),
        ("OSL", "tokens", ok.iter().filter_map(|r| r.output_tokens).map(|x| x as f64).collect()),
    ]
}

/// The page of point `p`, from its records and server time series.
pub fn point_page(run: &RunSummary, p: &PointResult, records: &[Record], ts: Option<&TimeSeries>) -> String {
    let up = "../".repeat(p.id.replace(':', "_").split('/').count());
    let mut o = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{} — sweep</title><style>{STYLE}</style></head><body>\n",
        esc(&p.id)
    );
    o.push_str(&format!("<p><a href=\"{up}report.html\">← run <code>{}</code></a></p>\n", esc(&run.run_id)));
    o.push_str(&format!("<h1>{}</h1>\n", esc(&p.id)));
    o.push_str(&format!(
        "<p class=\"meta\">{} · concurrency {} · {} GPU(s) · <span class=\"kind {}\">{}</span> · status: <b>{}</b> · frontier: {}</p>\n",
        esc(&p.arm),
        p.conc,
        p.gpus,
        esc(&p.result_kind),
        esc(&p.result_kind),
        esc(&super::status_text(p)),
        esc(&super::frontier_cell(run, p))
    ));
    headline(&mut o, p);
    let stats = per_request(records);
    o.push_str("<h2>Latency and length distributions</h2>\n<table id=\"distributions\"><tr><th>metric</th><th>n</th><th>mean</th><th>p50</th><th>p75</th><th>p90</th><th>p95</th><th>p99</th><th>max</th></tr>\n");
    for (name, unit, v) in &stats {
        let s = Stats::of(v.clone());
        let max = v.iter().copied().fold(0.0, f64::max);
        o.push_str(&format!(
            "<tr><td>{name} ({unit})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            s.n,
            fmt_v(s.mean),
            fmt_v(s.p50),
            fmt_v(s.p75),
            fmt_v(s.p90),
            fmt_v(s.p95),
            fmt_v(s.p99),
            fmt_v(max)
        ));
    }
    o.push_str("</table>\n<p class=\"note\">Successful profiling requests. ITL = (E2EL − TTFT) / (OSL − 1), per request: P90 interactivity is 1 / its P90; P90 E2E-normalised interactivity (the frontier's x) is 1 / the P90 of E2EL / OSL.</p>\n<div class=\"panels\" id=\"distribution-charts\">\n");
    for (i, (name, unit, v)) in stats.iter().take(4).enumerate() {
        o.push_str(&distribution(name, unit, v).svg(&format!("dist-{i}")));
    }
    o.push_str("</div>\n");
    over_time(&mut o, p, records, ts);
    o.push_str("<h2>Details</h2>\n");
    if let Some(s) = &p.summary
        && (!s.invalid_reasons.is_empty() || !s.submission_invalid_reasons.is_empty())
    {
        o.push_str(&format!(
            "<p class=\"fail\">Invalid: {}; not submittable: {}</p>\n",
            esc(&s.invalid_reasons.join(", ")),
            esc(&s.submission_invalid_reasons.join(", "))
        ));
    }
    if let Some(l) = &p.launch {
        let env: Vec<String> = l.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        o.push_str(&format!(
            "<details><summary>Server command and environment</summary><pre>{}\n\n{}{}</pre></details>\n",
            esc(&crate::recipe::serving::shell_quote(&l.worker_argv)),
            esc(&env.join("\n")),
            l.router_argv.as_ref().map(|r| format!("\n\nrouter: {}", esc(&crate::recipe::serving::shell_quote(r)))).unwrap_or_default()
        ));
    }
    o.push_str(&format!(
        "<details><summary>Profiles and provenance</summary><p>{}</p><pre>{}</pre></details>\n",
        esc(&p.provenance()),
        esc(&serde_json::to_string_pretty(&p.profiles).unwrap_or_default())
    ));
    o.push_str("</body></html>\n");
    o
}

/// The headline numbers with their intervals.
fn headline(o: &mut String, p: &PointResult) {
    let Some(s) = &p.summary else { return };
    let ci = |c: (f64, f64)| format!(" <span class=\"ci\">({}–{})</span>", fmt_num(c.0), fmt_num(c.1));
    let pp = p.pareto.as_ref();
    let xci = |v| pp.and_then(|pp| pp.x_ci.get(&v).copied()).map(ci).unwrap_or_default();
    o.push_str("<table id=\"headline\"><tr><th>tok/s/GPU (total)</th><th>output tok/s/GPU</th><th>P90 interactivity</th><th>P90 E2E-norm. interactivity</th><th>E2EL p90 (s)</th><th>requests ok / failed</th><th>frontier probability</th></tr>\n");
    o.push_str(&format!(
        "<tr><td>{}{}</td><td>{}{}</td><td>{:.1}{}</td><td>{:.1}{}</td><td>{:.2}{}</td><td>{} / {}</td><td>{}</td></tr></table>\n<p class=\"note\">95 % bootstrap intervals in brackets.</p>\n",
        fmt_num(s.tput_per_gpu),
        pp.map(|pp| ci(pp.y_ci)).unwrap_or_default(),
        fmt_num(s.output_tput_per_gpu),
        pp.filter(|pp| pp.y_out_ci.1 > 0.0).map(|pp| ci(pp.y_out_ci)).unwrap_or_default(),
        s.intvty_p90,
        xci(crate::pareto::View::IntvtyP90),
        s.e2e_norm_intvty_p90,
        xci(crate::pareto::View::E2eNormIntvtyP90),
        s.e2el.p90,
        xci(crate::pareto::View::E2elP90),
        s.requests_ok,
        s.requests_error,
        pp.map(|pp| format!("{:.2}", pp.p_frontier)).unwrap_or_else(|| "-".into())
    ));
}

/// The point over time: requests, throughput and KV use.
fn over_time(o: &mut String, p: &PointResult, records: &[Record], ts: Option<&TimeSeries>) {
    o.push_str("<h2>Over time</h2>\n");
    let Some(cs) = ClientSeries::of(records, p.gpus) else {
        o.push_str("<p>No records.</p>\n");
        return;
    };
    let warm = cs.profiling_s;
    let server = |panel: &str| -> Vec<(String, Vec<(f64, f64)>)> {
        ts.map(|t| t.series.iter().filter(|s| s.1 == panel).map(|(n, _, pts)| (format!("{n} (server)"), cs.rebucket(pts))).collect())
            .unwrap_or_default()
    };
    let mut req = vec![("in flight (client, average per bucket)".to_string(), cs.xy(&cs.in_flight))];
    req.extend(server("requests"));
    // Output and total apart: cached input makes the total tens of times the output.
    let mut out = vec![("output (client)".to_string(), cs.xy(&cs.output))];
    out.extend(server("throughput"));
    let total = vec![("input (cached included) + output (client)".to_string(), cs.xy(&cs.total))];
    let sub = format!("averages over {} s; warmup shaded", cs.bucket_s);
    o.push_str("<div class=\"panels\" id=\"time-series\">\n");
    o.push_str(&series_panel("Requests", &sub, "requests", &req, warm, Some(p.conc as f64)).svg("ts-requests"));
    o.push_str(&series_panel("Output throughput", &sub, "output tok/s/GPU", &out, warm, None).svg("ts-output"));
    o.push_str(&series_panel("Total throughput", &sub, "tok/s/GPU", &total, warm, None).svg("ts-total"));
    let kv = server("kv");
    if kv.is_empty() {
        o.push_str("</div>\n<p class=\"note\">The target reported no KV time series (no <code>timeseries.json</code> or <code>/metrics</code> scrape in this point's folder).</p>\n");
    } else {
        o.push_str(&series_panel("KV cache use", &sub, "% of the KV pool", &kv, warm, Some(100.0)).svg("ts-kv"));
        o.push_str("</div>\n");
    }
    if let Some(t) = ts {
        o.push_str(&format!("<p class=\"note\">Server series: {}.</p>\n", esc(&t.source)));
    }
}

/// Writes `<point>/report.html` for every point with records; returns the pages.
pub fn write_point_pages(run: &RunSummary, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let todo: Vec<&PointResult> = run.points.iter().filter(|p| p.summary.is_some()).collect();
    let one = |p: &PointResult| -> Result<Option<PathBuf>, ReportError> {
        let pd = point_dir(dir, &p.id);
        let Some(f) = crate::records::export_path(&pd) else { return Ok(None) };
        let records = crate::records::read_jsonl(&f)?;
        let ts = TimeSeries::load(&pd, p.gpus);
        let page = pd.join("report.html");
        crate::problem::atomic_write(&page, point_page(run, p, &records, ts.as_ref()).as_bytes())
            .map_err(|source| ReportError::Write { path: page.clone(), source })?;
        Ok(Some(page))
    };
    // Reading records is most of the time: one thread per core.
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(todo.len().max(1));
    let chunks: Vec<Vec<&PointResult>> = (0..threads).map(|t| todo.iter().skip(t).step_by(threads).copied().collect()).collect();
    let results: Vec<Result<Option<PathBuf>, ReportError>> = std::thread::scope(|s| {
        let hs: Vec<_> = chunks.iter().map(|c| s.spawn(move || c.iter().map(|p| one(p)).collect::<Vec<_>>())).collect();
        hs.into_iter().flat_map(|h| h.join().unwrap_or_else(|_| vec![Err(ReportError::PageThreadPanicked)])).collect()
    });
    let mut out = Vec::new();
    for r in results {
        if let Some(p) = r? {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}
