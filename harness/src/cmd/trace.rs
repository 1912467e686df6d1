//! `sweep trace gen|stats`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use std::process::ExitCode;

use crate::trace::TraceSource;
use crate::trace::read::{ReadOptions, TraceFormat};
use crate::trace::stats::{Collector, TraceStats, markdown_table};
use crate::trace::synth::{Generator, SynthParams};

/// Work with AgentX traces.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Generate a synthetic AgentX trace set (Weka JSONL; gzip when the output ends in `.gz`).
    Gen(GenArgs),
    /// Print ISL, OSL, think time, turns, reuse and subagent distributions side by side.
    Stats(StatsArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// RNG seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Number of traces.
    #[arg(long, default_value_t = 200)]
    pub traces: usize,
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
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    match &args.command {
        TraceCommand::Gen(g) => gen_cmd(g)?,
        TraceCommand::Stats(s) => stats_cmd(s)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn gen_cmd(g: &GenArgs) -> anyhow::Result<()> {
    let generator = Generator::new(SynthParams {
        traces: g.traces,
        seed: g.seed,
        ..SynthParams::default()
    });
    match &g.output {
        Some(path) => {
            write_atomic(path, |w| {
                for t in generator.traces() {
                    serde_json::to_writer(&mut *w, &t)?;
                    w.write_all(b"\n")?;
                }
                Ok(())
            })?;
            eprintln!(
                "wrote {} synthetic traces (seed {}) to {}",
                g.traces,
                g.seed,
                path.display()
            );
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            for t in generator.traces() {
                serde_json::to_writer(&mut w, &t)?;
                w.write_all(b"\n")?;
            }
            w.flush()?;
        }
    }
    Ok(())
}

/// Write through a temp file in the same directory, then rename (gzip when the name ends in `.gz`).
pub fn write_atomic(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    {
        let file = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
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
    }
    // Temp files are created private; results are ordinary files.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Statistics of one named set (`synthetic[:N[:SEED]]` or a path).
pub fn set_stats(spec: &str, opts: &ReadOptions) -> anyhow::Result<(TraceStats, Vec<String>)> {
    let source: TraceSource = spec.parse().map_err(anyhow::Error::msg)?;
    let name = match &source {
        TraceSource::Synthetic { seed, .. } => format!("synthetic (seed {seed})"),
        TraceSource::Files(_) => Path::new(spec)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(spec)
            .to_string(),
    };
    let mut c = Collector::default();
    let mut warnings = Vec::new();
    source.for_each(opts, &mut warnings, |t| {
        c.add(&t);
        Ok(())
    })?;
    Ok((c.finish(&name), warnings))
}

fn stats_cmd(s: &StatsArgs) -> anyhow::Result<()> {
    let opts = ReadOptions {
        format: s.format,
        skip_invalid: s.skip_invalid,
        ..ReadOptions::default()
    };
    let mut sets = Vec::new();
    for spec in &s.sets {
        let (st, warnings) = set_stats(spec, &opts)?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        sets.push(st);
    }
    if s.json {
        println!("{}", serde_json::to_string_pretty(&sets)?);
    } else {
        print!("{}", markdown_table(&sets));
    }
    Ok(())
}
