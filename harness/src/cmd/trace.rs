//! `sweep trace gen|stats|dry-run|conversations`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use std::process::ExitCode;

use crate::trace::TraceSource;
use crate::trace::published::PublishedStats;
use crate::trace::read::{ReadOptions, TraceFormat};
use crate::trace::stats::{Collector, TraceStats, markdown_table};
use crate::trace::synth::{Generator, SynthParams};

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Generate a synthetic AgentX trace set (Weka JSONL; gzip when the output ends in `.gz`).
    Gen(GenArgs),
    /// Print ISL, OSL, think time, turns, reuse and subagent distributions side by side.
    Stats(StatsArgs),
    /// Run the replay workload for one point against an idealised server (no engine) and print
    /// what it would send: warmup, profiled requests, plays, prefix reuse.
    DryRun(DryRunArgs),
    /// List the conversations the replay plays for each trace, as the reference replay builds
    /// them: the root, each subagent's conversations and the agents found among flattened
    /// requests, with the root turns that spawn and join them (JSON lines with `--json`).
    Conversations(ConversationsArgs),
}

#[derive(Debug, clap::Args)]
pub struct ConversationsArgs {
    /// Trace set: a file, a directory, `synthetic[:N[:SEED]]` or `like:NAME[:N[:SEED]]`.
    pub set: String,
    /// One JSON object per conversation: trace, conversation, kind, request keys (outer index;
    /// inner index for a subagent's), spawning and joining root turns, predecessors per turn.
    #[arg(long)]
    pub json: bool,
    /// Skip malformed traces with a warning instead of failing.
    #[arg(long)]
    pub skip_invalid: bool,
}

#[derive(Debug, clap::Args)]
pub struct DryRunArgs {
    /// Trace set: a file, a directory or `synthetic[:N[:SEED]]`.
    #[arg(default_value = "synthetic")]
    pub set: String,
    /// Lanes (live session trees).
    #[arg(long, default_value_t = 1)]
    pub concurrency: u32,
    /// Seed for t* draws and prompt contents.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Run id mixed into the cache-bust markers.
    #[arg(long, default_value = "sweep")]
    pub run_id: String,
    #[command(flatten)]
    pub workload: super::workload_args::WorkloadArgs,
    /// Idealised server: fixed time to first token, ms.
    #[arg(long, default_value_t = 300.0)]
    pub ttft_ms: f64,
    /// Idealised server: prefill rate, prompt tokens per second.
    #[arg(long, default_value_t = 50_000.0)]
    pub prefill_tokens_per_s: f64,
    /// Idealised server: time per output token, ms.
    #[arg(long, default_value_t = 15.0)]
    pub ms_per_output_token: f64,
    /// Skip malformed traces with a warning instead of failing.
    #[arg(long)]
    pub skip_invalid: bool,
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// RNG seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Number of traces (default 200; with `--like`, the stats file's count, and counts scale
    /// with a different number).
    #[arg(long)]
    pub traces: Option<usize>,
    /// Generate a corpus with the statistics of this stats file (e.g. the published
    /// `cc-traces-weka-062126.stats.yaml`); only the rows it lists are targeted.
    #[arg(long, value_name = "STATS.yaml")]
    pub like: Option<PathBuf>,
    /// Output file (`.jsonl` or `.jsonl.gz`); stdout when absent.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Trace sets: each a file or directory, or `synthetic[:N[:SEED]]` for a generated set.
    #[arg(required = true)]
    pub sets: Vec<String>,
    /// Record format of the files.
    #[arg(long, value_enum, default_value_t = TraceFormat::Auto)]
    pub format: TraceFormat,
    /// Skip malformed traces with a warning instead of failing.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
    /// Compare one set with a stats file row by row (published, measured, deviation, tolerance,
    /// verdict); exits non-zero when a row misses its tolerance.
    #[arg(long, value_name = "STATS.yaml")]
    pub against: Option<PathBuf>,
}

pub fn run(command: &TraceCommand) -> anyhow::Result<ExitCode> {
    match command {
        TraceCommand::Gen(g) => gen_cmd(g)?,
        TraceCommand::Stats(s) => return stats_cmd(s),
        TraceCommand::DryRun(d) => return dry_run_cmd(d),
        TraceCommand::Conversations(c) => conversations_cmd(c)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn gen_cmd(g: &GenArgs) -> anyhow::Result<()> {
    if let Some(like) = &g.like {
        return like_cmd(g, like);
    }
    let traces = g.traces.unwrap_or(crate::trace::DEFAULT_SYNTHETIC_TRACES);
    let generator = Generator::new(SynthParams { traces, seed: g.seed, ..SynthParams::default() });
    match &g.output {
        Some(path) => {
            write_atomic(path, |w| {
                for t in generator.traces() {
                    serde_json::to_writer(&mut *w, &t)?;
                    w.write_all(b"\n")?;
                }
                Ok(())
            })?;
            eprintln!("wrote {} synthetic traces (seed {}) to {}", traces, g.seed, path.display());
        }
        None => super::reader_may_stop((|| {
            let mut w = std::io::BufWriter::new(std::io::stdout().lock());
            for t in generator.traces() {
                serde_json::to_writer(&mut w, &t)?;
                w.write_all(b"\n")?;
            }
            Ok(w.flush()?)
        })())?,
    }
    Ok(())
}

fn like_cmd(g: &GenArgs, like: &Path) -> anyhow::Result<()> {
    use crate::trace::like::Plan;
    use crate::trace::like_write::{ParallelGz, write_jsonl};
    let stats = PublishedStats::load(like).map_err(|e| anyhow::anyhow!("{e}"))?;
    let started = std::time::Instant::now();
    let plan = Plan::new(&stats, g.traces, g.seed).map_err(|e| anyhow::anyhow!("{}: {e}", like.display()))?;
    for w in &plan.warnings {
        eprintln!("warning: {}: {w}", like.display());
    }
    let planned = started.elapsed();
    let s = &plan.solved;
    eprintln!(
        "plan: {} traces, growth σ {:.3}, rewrite p {:.4} median {:.1} blocks, gap tail σ {:.3}, gap position bias {:+.3}, peak median {:.1} ({:.2} s)",
        plan.sessions.len(),
        s.growth_sigma,
        s.rewrite_probability,
        s.rewrite_median_blocks,
        s.gap_tail_sigma,
        s.gap_position_bias,
        s.peak_median,
        planned.as_secs_f64()
    );
    match &g.output {
        Some(path) => {
            crate::problem::atomic_write_with(path, |f| -> anyhow::Result<()> {
                let file = std::io::BufWriter::with_capacity(1 << 20, f);
                if path.extension().is_some_and(|e| e == "gz") {
                    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
                    let mut gz = ParallelGz::new(file, threads);
                    write_jsonl(&plan, &mut gz)?;
                    gz.finish()?.flush()?;
                } else {
                    let mut file = file;
                    write_jsonl(&plan, &mut file)?;
                    file.flush()?;
                }
                Ok(())
            })?;
            eprintln!(
                "wrote {} traces like {} (seed {}) to {} in {:.2} s",
                plan.sessions.len(),
                like.display(),
                g.seed,
                path.display(),
                started.elapsed().as_secs_f64()
            );
        }
        None => super::reader_may_stop(write_jsonl(&plan, &mut std::io::BufWriter::new(std::io::stdout().lock())).map_err(Into::into))?,
    }
    Ok(())
}

/// Writes `path` atomically through `body` (gzip when the name ends in `.gz`).
fn write_atomic(path: &Path, body: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>) -> anyhow::Result<()> {
    crate::problem::atomic_write_with(path, |f| {
        let file = std::io::BufWriter::with_capacity(1 << 20, f);
        if path.extension().is_some_and(|e| e == "gz") {
            // Level 1: generated corpora compress ~10× at a fraction of the default level's time.
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            body(&mut gz)?;
            gz.finish()?.flush()?;
        } else {
            let mut file = file;
            body(&mut file)?;
            file.flush()?;
        }
        Ok(())
    })
}

/// Statistics of one named set (`synthetic[:N[:SEED]]`, `like:NAME[:N[:SEED]]` or a path).
pub fn set_stats(spec: &str, opts: &ReadOptions) -> anyhow::Result<(TraceStats, Vec<String>)> {
    let source: TraceSource = spec.parse().map_err(anyhow::Error::msg)?;
    let name = match &source {
        TraceSource::Synthetic { seed, .. } => format!("synthetic (seed {seed})"),
        TraceSource::Files(_) => Path::new(spec).file_name().and_then(|n| n.to_str()).unwrap_or(spec).to_string(),
        TraceSource::Like { seed, .. } => format!("{} (seed {seed})", spec.split(':').take(2).collect::<Vec<_>>().join(":")),
    };
    let mut c = Collector::default();
    let mut warnings = Vec::new();
    source.for_each(opts, &mut warnings, |t| {
        c.add(&t);
        Ok(())
    })?;
    Ok((c.finish(&name), warnings))
}

fn stats_cmd(s: &StatsArgs) -> anyhow::Result<ExitCode> {
    let opts = ReadOptions { format: s.format, skip_invalid: s.skip_invalid, ..ReadOptions::default() };
    if let Some(against) = &s.against {
        return against_cmd(s, against, &opts);
    }
    let mut sets = Vec::new();
    for spec in &s.sets {
        let (st, warnings) = set_stats(spec, &opts)?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        sets.push(st);
    }
    if s.json {
        crate::outln!("{}", serde_json::to_string_pretty(&sets)?);
    } else {
        crate::out!("{}", markdown_table(&sets));
    }
    Ok(ExitCode::SUCCESS)
}

fn against_cmd(s: &StatsArgs, against: &Path, opts: &ReadOptions) -> anyhow::Result<ExitCode> {
    use crate::trace::against::{CorpusMeasure, compare, markdown};
    let [set] = s.sets.as_slice() else {
        anyhow::bail!("--against compares one trace set with the stats file; {} sets were given", s.sets.len());
    };
    let stats = PublishedStats::load(against).map_err(|e| anyhow::anyhow!("{e}"))?;
    let source: TraceSource = set.parse().map_err(anyhow::Error::msg)?;
    let mut m = CorpusMeasure::default();
    let mut warnings = Vec::new();
    source.for_each(opts, &mut warnings, |t| {
        m.add(&t);
        Ok(())
    })?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let rows = compare(&stats, &m);
    if s.json {
        crate::outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        crate::outln!("{} against {}\n", set, against.display());
        crate::out!("{}", markdown(&rows));
    }
    let missed: Vec<&str> = rows.iter().filter(|r| !r.pass).map(|r| r.row.as_str()).collect();
    if missed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{} row(s) outside tolerance: {}", missed.len(), missed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}

fn dry_run_cmd(d: &DryRunArgs) -> anyhow::Result<ExitCode> {
    use crate::trace::stats::DistSummary;
    use crate::workload::driver::{Service, drive};
    use crate::workload::{Outcome, Phase, RequestKind, Workload, compile_pool};

    let source: TraceSource = d.set.parse().map_err(anyhow::Error::msg)?;
    let opts = ReadOptions { skip_invalid: d.skip_invalid, ..ReadOptions::default() };
    let mut warnings = Vec::new();
    let pool = compile_pool(&source, &opts, d.seed, &mut warnings)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let cfg = d.workload.config(d.concurrency, d.seed, &d.run_id);
    let started = std::time::Instant::now();
    let mut wl = Workload::new(cfg, pool)?;
    let (ttft, prefill, tpot) = (d.ttft_ms * 1e6, d.prefill_tokens_per_s.max(1.0), d.ms_per_output_token * 1e6);
    let log = drive(
        &mut wl,
        0,
        |r| Service {
            duration_ns: (ttft + r.prompt.total_tokens() as f64 / prefill * 1e9 + r.max_tokens.saturating_sub(1) as f64 * tpot) as u64,
            failure: None,
        },
        |_, _| {},
    );
    let wall = started.elapsed();
    let prof: Vec<_> = log.records.iter().filter(|r| r.spec.phase == Phase::Profiling && !r.cancelled).collect();
    let (mut hit, mut blocks) = (0u64, 0u64);
    for r in &prof {
        let (h, b) = r.spec.theoretical_hit();
        hit += u64::from(h);
        blocks += u64::from(b);
    }
    let mut isl: Vec<f64> = prof.iter().map(|r| r.spec.prompt.total_tokens() as f64).collect();
    let mut osl: Vec<f64> = prof.iter().map(|r| r.spec.max_tokens as f64).collect();
    let (isl, osl) = (DistSummary::of(&mut isl), DistSummary::of(&mut osl));
    let count = |k: RequestKind| log.records.iter().filter(|r| r.spec.kind == k).count();
    let st = wl.stats();
    crate::outln!("dry run: {} at concurrency {} (seed {}), idealised server (predicted, no engine)", source.name(), d.concurrency, d.seed);
    crate::outln!("outcome: {:?}", log.outcome.as_ref().unwrap_or(&Outcome::Completed));
    crate::outln!("warmup: {} primers + {} one-token requests", count(RequestKind::Primer), count(RequestKind::LaneWarmup));
    crate::outln!(
        "profiling: {} requests completed, {} cancelled at the grace, {} from subagents",
        prof.len(),
        log.records.iter().filter(|r| r.cancelled).count(),
        prof.iter().filter(|r| r.spec.stream > 0).count()
    );
    crate::outln!("plays started: {} ({} recycles)", st.plays_started, st.plays_started.saturating_sub(u64::from(d.concurrency)));
    crate::outln!(
        "ISL tokens: mean {:.0}, p50 {:.0}, p90 {:.0}; OSL: mean {:.0}, p50 {:.0}, p90 {:.0}",
        isl.mean,
        isl.p50,
        isl.p90,
        osl.mean,
        osl.p50,
        osl.p90
    );
    crate::outln!("theoretical prefix-cache hit: {:.2} %", if blocks == 0 { 0.0 } else { 100.0 * hit as f64 / blocks as f64 });
    if let (Some(a), Some(b)) = (log.profiling_start, log.profiling_deadline) {
        crate::outln!("profiling window: {:.0} s to {:.0} s (virtual)", a as f64 / 1e9, b as f64 / 1e9);
    }
    crate::outln!(
        "idle caps: {} global shifts, {} per-tree shifts; short-warmup lanes: {}",
        st.global_idle_shifts,
        st.tree_idle_shifts,
        st.short_warmup_lanes
    );
    crate::outln!("wall time: {:.3} s for {} events", wall.as_secs_f64(), log.events);
    Ok(match log.outcome {
        Some(Outcome::Completed) | None => ExitCode::SUCCESS,
        Some(_) => ExitCode::FAILURE,
    })
}

fn conversations_cmd(c: &ConversationsArgs) -> anyhow::Result<()> {
    super::reader_may_stop(list_conversations(c))
}

fn list_conversations(c: &ConversationsArgs) -> anyhow::Result<()> {
    use crate::workload::{SourceKind, TracePlan};
    let source: TraceSource = c.set.parse().map_err(anyhow::Error::msg)?;
    let opts = ReadOptions { skip_invalid: c.skip_invalid, ..ReadOptions::default() };
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let (mut traces, mut convs, mut subagent, mut flat, mut orphans) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut warnings = Vec::new();
    source.for_each(&opts, &mut warnings, |t| {
        let plan = match TracePlan::build(&t, 0) {
            Ok(p) => p,
            Err(e) => {
                writeln!(w, "{e} (skipped)").map_err(|e| io(&c.set, e))?;
                return Ok(());
            }
        };
        traces += 1;
        orphans += plan.orphans;
        if !c.json {
            writeln!(w, "{}", plan_line(&plan)).map_err(|e| io(&c.set, e))?;
        }
        for s in &plan.streams {
            convs += 1;
            match s.kind {
                SourceKind::Subagent => subagent += 1,
                SourceKind::Flat => flat += 1,
                SourceKind::Main | SourceKind::Random => {}
            }
            let line = if c.json { conversation_json(&plan, s).to_string() } else { conversation_line(&plan, s) };
            writeln!(w, "{line}").map_err(|e| io(&c.set, e))?;
        }
        Ok(())
    })?;
    if !c.json {
        writeln!(
            w,
            "{traces} traces, {convs} conversations: {traces} roots, {subagent} of subagents, {flat} flattened agents; {orphans} orphan subagents dropped"
        )?;
    }
    w.flush()?;
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// A trace's line: how many conversations of each kind its plan has.
fn plan_line(plan: &crate::workload::TracePlan) -> String {
    use crate::workload::SourceKind;
    let n_sub = plan.streams.iter().filter(|s| s.kind == SourceKind::Subagent).count();
    let n_flat = plan.streams.iter().filter(|s| s.kind == SourceKind::Flat).count();
    format!(
        "{}: {} conversations ({} of subagents, {} flattened agents; {} found in all){}",
        plan.id,
        plan.streams.len(),
        n_sub,
        n_flat,
        plan.flat_agents,
        if plan.orphans > 0 { format!(", {} orphan subagents dropped", plan.orphans) } else { String::new() }
    )
}

/// One conversation as JSON: its requests, where it is spawned and joined, and each turn's
/// predecessors by conversation id.
fn conversation_json(plan: &crate::workload::TracePlan, s: &crate::workload::StreamPlan) -> serde_json::Value {
    let b = s.branch.map(|b| &plan.branches[b as usize]);
    let keys: Vec<u32> = s.turns.iter().map(|t| t.inner_idx.unwrap_or(t.outer_idx)).collect();
    let preds: Vec<Vec<(String, u32)>> = s
        .turns
        .iter()
        .map(|t| {
            let mut p: Vec<(String, u32)> =
                t.preds.iter().map(|&(ps, pi)| (plan.streams[ps as usize].conversation_id.to_string(), pi)).collect();
            p.sort();
            p
        })
        .collect();
    serde_json::json!({
        "trace": &*plan.id,
        "conversation": &*s.conversation_id,
        "kind": s.kind,
        "requests": keys,
        "spawn": b.map(|b| b.spawn_turn),
        "join": b.and_then(|b| b.join_turn),
        "at_issue": b.map(|b| b.at_issue),
        "preds": preds,
    })
}

/// One conversation as a text line: id, kind, turns and where it is spawned and joined.
fn conversation_line(plan: &crate::workload::TracePlan, s: &crate::workload::StreamPlan) -> String {
    use crate::workload::SourceKind;
    let place = match s.branch.map(|b| &plan.branches[b as usize]) {
        None => String::new(),
        Some(b) => format!(
            "  spawned by turn {} ({}), {}",
            b.spawn_turn,
            if b.at_issue { "when sent" } else { "on completion" },
            match b.join_turn {
                Some(j) => format!("joined by turn {j}"),
                None => "background".into(),
            }
        ),
    };
    let kind = match s.kind {
        SourceKind::Main => "root",
        SourceKind::Subagent => "subagent",
        SourceKind::Flat => "flattened",
        SourceKind::Random => "random",
    };
    format!("  {:<44} {:<9} {:>4} turns{place}", &*s.conversation_id, kind, s.turns.len())
}

fn io(set: &str, e: std::io::Error) -> crate::trace::TraceError {
    crate::trace::TraceError::Io { path: format!("{set} (output)"), source: e }
}
