//! `sweep replay`: one point, outside any plan: C live AgentX session trees for D seconds, or with
//! `--isl/--osl` InferenceX's fixed-length random workload, against a server (`--url`) or the
//! reference engine with SGLang flags on the virtual clock (`--engine`).

use super::select_args::Server;
use crate::metrics::{self, PointContext};
use crate::recipe::serving::Launch;
use crate::records::{self, Record};
use crate::results::{Status, write_json};
use crate::targets::gpu_monitor::{Monitor, is_loopback};
use crate::targets::http::HttpTarget;
use crate::targets::ledger::ProgressLines;
use crate::targets::sim::{self, ProfileChoice, Progress};
use crate::workload::fixed::FixedConfig;
use crate::workload::{TracePlan, WorkloadConfig};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub server: super::select_args::ServerArgs,
    /// Live session trees.
    #[arg(long)]
    pub concurrency: u32,
    /// Profiling duration, seconds.
    #[arg(long, default_value_t = 3600.0)]
    pub duration: f64,
    #[arg(long, default_value = "synthetic")]
    pub traces: crate::targets::pools::TraceSpec,
    /// GPUs behind the server (per-GPU throughput).
    #[arg(long, default_value_t = 1)]
    pub gpus: u32,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Id in every cache-bust marker. Default: random for `--url` (so a second run against the
    /// same server misses the first run's cache), `replay-c<C>` for `--engine`.
    #[arg(long)]
    pub benchmark_id: Option<String>,
    /// Output folder (default reports/<UTC timestamp>-replay-c<C>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Hardware profile for --engine (name or .yaml; default h200).
    #[arg(long, default_value = "h200")]
    pub hardware: String,
    /// Model profile for --engine (default: from --model-path).
    #[arg(long)]
    pub model: Option<String>,
    /// With --url: the server's time runs this many times faster than wall time (default: its
    /// `/server_info.time_scale`, 1 for a real engine). Think delays shrink by this factor and
    /// latencies are recorded in the server's time.
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// One-token warmup requests per lane after the primers (AgentX: 10; its fast mode: 1).
    #[arg(long, default_value_t = 10)]
    pub warmup_per_lane: u32,
    /// With --url: more servers whose /metrics are scraped (workers, DP ranks), besides --url.
    #[arg(long, num_args = 1..)]
    pub server_metrics: Vec<String>,
    /// With --url: the client's tokenizer, timeouts, readiness and request dialect.
    #[command(flatten)]
    pub client: super::client_args::ClientArgs,
    #[command(flatten)]
    pub fixed: super::fixed_args::FixedArgs,
}

/// Errors in `--engine`'s flag string.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SplitError {
    #[error("--engine: {0:?} does not split as a shell would: close every quote and do not end with a lone backslash")]
    Unbalanced(String),
}

/// Splits a flag string as a POSIX shell would (single and double quotes, backslash escapes),
/// without expanding anything.
pub fn shell_split(s: &str) -> Result<Vec<String>, SplitError> {
    shlex::split(s).ok_or_else(|| SplitError::Unbalanced(s.to_string()))
}

/// The live spinner on a terminal; plain lines every 30 s otherwise (a CI log shows nothing of
/// a hidden spinner).
struct Bar {
    bar: indicatif::ProgressBar,
    lines: Option<std::sync::Mutex<ProgressLines>>,
}

impl Bar {
    fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}

fn bar() -> Bar {
    use std::io::IsTerminal;
    let b = indicatif::ProgressBar::new_spinner();
    b.set_style(indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("template"));
    let lines =
        (!std::io::stderr().is_terminal()).then(|| std::sync::Mutex::new(ProgressLines::new("replay", std::time::Duration::from_secs(30))));
    Bar { bar: b, lines }
}

fn show(bar: &Bar, p: &Progress, clock: &str, secs: f64) {
    if let Some(l) = &bar.lines {
        l.lock().expect("lock").update(p, secs);
    }
    let b = &bar.bar;
    let tps = if secs > 0.0 { p.output_tokens as f64 / secs } else { 0.0 };
    b.set_message(format!(
        "{} | {clock} {secs:.0} s | {} sent, {} done, {} errors | {tps:.0} output tok/s",
        if p.profiling { "profiling" } else { "warmup/drain" },
        p.sent,
        p.done,
        p.errors
    ));
    b.tick();
}

pub fn run(a: &Args) -> anyhow::Result<ExitCode> {
    // Parsed once: the fixed-length scenario (with its goodput SLOs) replays no traces.
    let fixed = match a.fixed.config(a.concurrency)? {
        Some(f) => Some((f, a.fixed.goodput()?)),
        None => None,
    };
    let pool = match fixed {
        Some(_) => Vec::new(),
        None => match a.traces.source() {
            Some(source) => crate::targets::pools::compile(source, a.traces.as_str(), a.seed)?,
            None => anyhow::bail!(
                "--traces auto: a replay has no plan point whose model family picks a corpus; name the trace set (e.g. like:cc-traces-weka-062126 or synthetic)"
            ),
        },
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let name = match &fixed {
        Some((f, _)) => format!("replay-{}-{}-c{}", f.isl, f.osl, a.concurrency),
        None => format!("replay-c{}", a.concurrency),
    };
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("reports").join(format!("{}-{name}", super::run::utc_stamp(now))));
    let created = !out.exists();
    std::fs::create_dir_all(&out).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    let r = replay_into(a, &pool, fixed, &out);
    if r.is_err() && created {
        // A replay that never started leaves no empty folder behind (remove_dir keeps a folder
        // that holds anything).
        let _ = std::fs::remove_dir(&out);
    }
    r
}

/// The replay and its files in `out`.
fn replay_into(a: &Args, pool: &[Arc<TracePlan>], fixed: Option<(FixedConfig, Goodput)>, out: &Path) -> anyhow::Result<ExitCode> {
    let cfg = workload_config(a);
    let mut ctx = PointContext {
        num_gpus: a.gpus.max(1),
        trace_set: a.traces.to_string(),
        seed: a.seed,
        benchmark_id: cfg.run_id.clone(),
        concurrency: a.concurrency,
        ..Default::default()
    };
    ctx.identity.insert("conc".into(), a.concurrency.into());
    let b = bar();
    let interrupt = Arc::new(AtomicBool::new(false));
    super::install_interrupt(interrupt.clone(), "stopping the replay; the records so far are kept");
    let scenario = match fixed {
        Some((f, goodput)) => Scenario::Fixed(f, goodput),
        None => Scenario::Agentx(pool, cfg),
    };
    let (records, status) = match a.server.server() {
        Server::Engine(flags) => replay_engine(a, flags, scenario, &mut ctx, &b, &interrupt)?,
        Server::Url(url) => replay_url(a, url, scenario, &mut ctx, &b, out, &interrupt)?,
    };
    b.finish_and_clear();
    if let Status::Failed { reason } = &status {
        ctx.failed = Some(reason.clone());
    }
    // One point, plain: the AIPerf file as the cross-checks and comparisons read it.
    records::write_jsonl(&out.join(records::EXPORT), &records)?;
    if let Some(sm) = &ctx.server_metrics {
        write_json(&out.join("server_metrics.json"), sm)?;
    }
    if let Some(ts) = &ctx.timeseries {
        write_json(&out.join("timeseries.json"), ts)?;
    }
    let (mut agg, s) = metrics::aggregate(&records, &ctx).map_err(|e| anyhow::anyhow!("aggregate: {e}"))?;
    if ctx.client_cpu_seconds.is_some() {
        // The whole process, start-up and aggregation included, as `time` would count it.
        let cpu = crate::targets::scrape::process_cpu_seconds();
        metrics::set_client_cpu(&mut agg, cpu);
        ctx.client_cpu_seconds = Some(cpu);
    }
    write_json(&out.join("agg.json"), &agg)?;
    if let Some(bs) = agg.get("benchmark_serving") {
        write_json(&out.join("benchmark_serving.json"), bs)?;
        print_serving(bs);
    }
    print_result(&ctx, &status, &s);
    crate::outln!("wrote {}", out.display());
    Ok(match status {
        Status::Interrupted { .. } => ExitCode::from(130),
        Status::Done if s.valid => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// The workload of the replay: `--concurrency` lanes for `--duration`, and its cache-bust id.
fn workload_config(a: &Args) -> WorkloadConfig {
    WorkloadConfig {
        concurrency: a.concurrency.max(1),
        seed: a.seed,
        run_id: a.benchmark_id.clone().unwrap_or_else(|| {
            if matches!(a.server.server(), Server::Engine(_)) {
                format!("replay-c{}", a.concurrency)
            } else {
                crate::workload::random_benchmark_id()
            }
        }),
        duration_ns: (a.duration.max(0.0) * 1e9) as u64,
        warmup_requests_per_lane: a.warmup_per_lane,
        ..WorkloadConfig::default()
    }
}

/// What the replay plays: AgentX traces, or the fixed-length random workload.
enum Scenario<'p> {
    Agentx(&'p [Arc<TracePlan>], WorkloadConfig),
    Fixed(FixedConfig, Goodput),
}

/// `--goodput` SLOs in ms by metric.
type Goodput = std::collections::BTreeMap<String, f64>;

/// benchmark_serving's result lines (its own labels, ms).
fn print_serving(bs: &serde_json::Value) {
    let f = |k: &str| bs[k].as_f64().unwrap_or(0.0);
    crate::outln!("{:=^50}", " Serving Benchmark Result ");
    crate::outln!("{:<40} {}", "Successful requests:", bs["completed"]);
    crate::outln!("{:<40} {:.2}", "Benchmark duration (s):", f("duration"));
    crate::outln!("{:<40} {}", "Total input tokens:", bs["total_input_tokens"]);
    crate::outln!("{:<40} {}", "Total generated tokens:", bs["total_output_tokens"]);
    crate::outln!("{:<40} {:.2}", "Request throughput (req/s):", f("request_throughput"));
    if !bs["request_goodput:"].is_null() {
        crate::outln!("{:<40} {:.2}", "Request goodput (req/s):", f("request_goodput:"));
    }
    crate::outln!("{:<40} {:.2}", "Output token throughput (tok/s):", f("output_throughput"));
    crate::outln!("{:<40} {:.2}", "Total Token throughput (tok/s):", f("total_token_throughput"));
    for (k, name) in [("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL")] {
        crate::outln!(
            "{:<40} {:.2} / {:.2} / {:.2}",
            format!("{name} mean / median / P99 (ms):"),
            f(&format!("mean_{k}_ms")),
            f(&format!("median_{k}_ms")),
            f(&format!("p99_{k}_ms"))
        );
    }
    crate::outln!("{}", "=".repeat(50));
}

/// The replay on the reference engine on the virtual clock (`--engine FLAGS`).
fn replay_engine(
    a: &Args,
    flags: &str,
    scenario: Scenario,
    ctx: &mut PointContext,
    b: &Bar,
    cancel: &AtomicBool,
) -> anyhow::Result<(Vec<Record>, Status)> {
    let argv = shell_split(flags)?;
    let env = std::env::vars().filter(|(k, _)| k.starts_with("SGLANG_")).collect();
    let launch = Launch {
        arm: String::new(),
        conc: a.concurrency,
        worker_argv: argv,
        env,
        router_argv: None,
        router_env: Default::default(),
        golden_al: None,
        client_args: Vec::new(),
    };
    let choice = ProfileChoice { model: a.model.clone(), hardware: Some(a.hardware.clone()) };
    let mut engine = sim::build_engine(&launch, None, None, &choice, a.seed)?;
    ctx.result_kind = "predicted".into();
    ctx.target = "sim".into();
    let progress = |p: &Progress| show(b, p, "virtual", p.now_ns as f64 / 1e9);
    let o = match scenario {
        Scenario::Agentx(pool, cfg) => sim::run_point(&mut engine, pool, cfg, ctx.clone(), cancel, progress),
        Scenario::Fixed(f, goodput) => {
            let mut o = crate::targets::fixed::run_point(&mut engine, f, ctx.clone(), cancel, progress);
            if let Some(m) = o.ctx.fixed.as_mut() {
                m.goodput = goodput;
            }
            o
        }
    };
    *ctx = o.ctx;
    Ok((o.records, o.status))
}

/// The replay against a server in real time (`--url`); its `/metrics` export goes into `out`.
fn replay_url(
    a: &Args,
    url: &str,
    scenario: Scenario,
    ctx: &mut PointContext,
    b: &Bar,
    out: &Path,
    cancel: &AtomicBool,
) -> anyhow::Result<(Vec<Record>, Status)> {
    // One thread for the I/O (synthesis runs on the blocking pool): cross-thread wake-ups for
    // every streamed chunk cost about 40 % of the client's CPU.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let t0 = std::time::Instant::now();
    let monitor = Monitor::start(a.client.gpu_monitor, is_loopback(url), out);
    let run = rt.block_on(async {
        let opts = a.client.options()?;
        let mut t = HttpTarget::connect(url, url, &opts, ctx).await.map_err(anyhow::Error::msg)?;
        let mut wl: Box<dyn crate::workload::Machine> = match scenario {
            Scenario::Agentx(pool, cfg) => Box::new(t.workload(cfg, pool, ctx).map_err(anyhow::Error::msg)?),
            Scenario::Fixed(f, goodput) => {
                let w = t.fixed_workload(f, ctx).map_err(anyhow::Error::msg)?;
                if let Some(m) = ctx.fixed.as_mut() {
                    m.goodput = goodput;
                }
                Box::new(w)
            }
        };
        if let Some(k) = a.time_scale {
            anyhow::ensure!(k > 0.0 && k.is_finite(), "--time-scale {k}: must be > 0 (1 = real time)");
            t.time_scale = k;
        }
        t.metrics_urls.extend(a.server_metrics.iter().map(|u| u.trim_end_matches('/').to_string()));
        ctx.target = url.to_string();
        let scale = t.time_scale;
        let clock = if scale == 1.0 { "real".to_string() } else { format!("server (x{scale}) ") };
        Ok::<_, anyhow::Error>(
            crate::targets::http::replay(&t, wl.as_mut(), cancel, || Ok(()), |p| show(b, p, &clock, t0.elapsed().as_secs_f64() * scale))
                .await,
        )
    })?;
    let scale = a.time_scale.or_else(|| ctx.profiles["time_scale"].as_f64()).unwrap_or(1.0);
    ctx.power = monitor.finish(ctx.result_kind == "predicted", scale);
    if let Some(export) = run.fill(ctx) {
        write_json(&out.join("server_metrics_export.json"), &export)?;
    }
    let st = match &run.stopped {
        Some(s) => Status::Failed { reason: s.clone() },
        None => crate::targets::point_status(run.interrupted, run.outcome.as_ref(), ctx, "the workload stopped before finishing"),
    };
    Ok((run.records, st))
}

/// The point's status and headline figures.
fn print_result(ctx: &PointContext, status: &Status, s: &metrics::Summary) {
    match status {
        Status::Failed { reason } => crate::outln!("status: failed: {reason} ({})", ctx.result_kind),
        Status::Interrupted { .. } => {
            crate::outln!("status: interrupted; the records so far are kept, the aggregate is not valid ({})", ctx.result_kind)
        }
        Status::Done => crate::outln!("status: done ({})", ctx.result_kind),
        st => crate::outln!("status: {st:?} ({})", ctx.result_kind),
    }
    if let Some(cpu) = ctx.client_cpu_seconds {
        crate::outln!("client CPU {cpu:.2} s, peak {:.0} % of the cores", ctx.client_cpu_max.unwrap_or(0.0) * 100.0);
    }
    if let Some(h) = ctx.server_metrics.as_ref().and_then(|m| m["cache_hit_rate"].as_f64()) {
        crate::outln!("server-reported cache hit rate {:.1} %", h * 100.0);
    }
    crate::outln!(
        "requests ok {} / errors {}; {} tok/s/GPU; P90 interactivity {:.1} tok/s/user; TTFT p50 {:.2} s p90 {:.2} s; E2EL p90 {:.2} s",
        s.requests_ok,
        s.requests_error,
        crate::gate::fmt_num(s.tput_per_gpu),
        s.intvty_p90,
        s.ttft.p50,
        s.ttft.p90,
        s.e2el.p90
    );
    if !s.valid {
        crate::outln!("invalid: {}", s.invalid_reasons.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_flags_split_like_a_shell() {
        let v = shell_split(r#"--model-path a/b --served-model-name 'my model' --x "q \"z\"" c\ d  "#).unwrap();
        assert_eq!(v, ["--model-path", "a/b", "--served-model-name", "my model", "--x", "q \"z\"", "c d"]);
        assert_eq!(shell_split("''").unwrap(), [""]);
        assert!(matches!(shell_split("--a 'open"), Err(SplitError::Unbalanced(_))));
        assert!(shell_split("--a \"x").unwrap_err().to_string().contains("close every quote"));
        assert!(shell_split("x\\").is_err());
    }
}
