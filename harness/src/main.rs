use clap::{Parser, Subcommand};

mod calibrate;

/// Plan, run and report LLM-serving recipe sweeps (AgentX, InferenceX-compatible).
#[derive(Parser)]
#[command(name = "sweep", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure a GPU into a hardware profile and check the cost model against it.
    #[command(subcommand)]
    Calibrate(calibrate::CalibrateCommand),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Calibrate(c) => calibrate::run(c),
    }
}
