use clap::{Parser, Subcommand};
use harness::engine_cmd;

/// Plan, run and report LLM-serving recipe sweeps (AgentX, InferenceX-compatible).
#[derive(Parser)]
#[command(name = "sweep", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The reference engine: `sweep engine serve <SGLang flags>`.
    Engine(engine_cmd::EngineArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Engine(args) => engine_cmd::run(args),
    }
}
