use clap::{Parser, Subcommand};

/// Plan, run and report LLM-serving recipe sweeps (AgentX, InferenceX-compatible).
#[derive(Parser)]
#[command(name = "sweep", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate synthetic AgentX traces and compare trace-set statistics.
    Trace(harness::trace::cli::TraceArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Trace(args) => harness::trace::cli::run(args),
    }
}
