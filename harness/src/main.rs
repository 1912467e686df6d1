use clap::{Parser, Subcommand};
use harness::{cmd, engine_cmd};
use std::process::ExitCode;

mod calibrate;
mod stderr_log;

/// Plan, run and report LLM-serving recipe sweeps (AgentX, InferenceX-compatible).
#[derive(Parser)]
#[command(name = "sweep", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Check the master config, serving recipes, golden AL curves and changelog; list every problem.
    Validate(cmd::validate::Args),
    /// Show the sweep a PR label would run (canary, matrices, fail-fast, resolved commands).
    Plan(cmd::plan::Args),
    /// Run the sweep a label selects (default: reference engine on the virtual clock); report and gate.
    Run(Box<cmd::run::Args>),
    /// Predict every point of a config on the virtual clock with a fitted hardware profile.
    Predict(cmd::predict::PredictArgs),
    /// Replay one point (C session trees for D seconds) against a server or the reference engine.
    Replay(cmd::replay::Args),
    /// The gsm8k eval as InferenceX runs it, against a server (or recorded not applicable for
    /// the reference engine); results, reports and the threshold gate.
    Eval(cmd::eval::Args),
    /// Check or append to perf-changelog.yaml.
    #[command(subcommand)]
    Changelog(cmd::changelog::Command),
    /// The reference engine: `sweep engine serve <SGLang flags>`.
    Engine(engine_cmd::EngineArgs),
    /// Regenerate a run's charts, report.md and report.html.
    Report(cmd::results::ReportArgs),
    /// CI verdict for a run: gate.json, JUnit XML and the exit code.
    Gate(cmd::results::GateArgs),
    /// Merge the points of several run directories (CI matrix jobs, Slurm jobs) into one run.
    Collect(cmd::results::CollectArgs),
    /// Per-point deltas between two runs, judged by the gate's noise model (seed replicates, else bootstrap intervals).
    Compare(cmd::results::CompareArgs),
    /// Runs recorded in the results store: filter by config, label, hardware, kind, date; one point across runs.
    History(cmd::store::HistoryArgs),
    /// Record existing run folders and InferenceX-style agentic result artifacts in the results store.
    Import(cmd::store::ImportArgs),
    /// The results store: check, migrate, remove runs.
    #[command(subcommand)]
    Store(cmd::store::StoreCommand),
    /// Measure a GPU into a hardware profile and check the cost model against it.
    #[command(subcommand)]
    Calibrate(calibrate::CalibrateCommand),
    /// Generate synthetic AgentX traces, compare trace-set statistics, dry-run the replay workload.
    #[command(subcommand)]
    Trace(cmd::trace::TraceCommand),
    /// InferenceX's PR verifier (Checks 0–12, and 13: nothing in the tree it cannot read) decided from the repository at two revisions, a run's artifacts and PR facts.
    Verify(cmd::verify::Args),
    /// Web dashboard of the results store: runs, Pareto curves per config across runs, run vs baseline (read-only).
    Serve(cmd::serve::Args),
}

fn main() -> ExitCode {
    stderr_log::init();
    let result = match Cli::parse().command {
        Command::Validate(a) => cmd::validate::run(&a),
        Command::Plan(a) => cmd::plan::run(&a),
        Command::Run(a) => cmd::run::run(&a),
        Command::Predict(a) => cmd::predict::run(&a),
        Command::Replay(a) => cmd::replay::run(&a),
        Command::Eval(a) => cmd::eval::run(&a),
        Command::Changelog(c) => cmd::changelog::run(&c),
        Command::Engine(a) => engine_cmd::run(a).map(|()| ExitCode::SUCCESS),
        Command::Report(a) => cmd::results::report(&a),
        Command::Gate(a) => cmd::results::gate(&a),
        Command::Collect(a) => cmd::results::collect(&a),
        Command::Compare(a) => cmd::results::compare(&a),
        Command::History(a) => cmd::store::history(&a),
        Command::Import(a) => cmd::store::import(&a),
        Command::Store(c) => cmd::store::store_cmd(&c),
        Command::Calibrate(c) => calibrate::run(c).map(|()| ExitCode::SUCCESS),
        Command::Trace(t) => cmd::trace::run(&t),
        Command::Verify(a) => cmd::verify::run(&a),
        Command::Serve(a) => cmd::serve::run(&a),
    };
    result.unwrap_or_else(|e| {
        // The error and its causes on one line each, without a backtrace: these are the user's
        // to act on (panics still print theirs under RUST_BACKTRACE).
        let text = format!("{e:#}");
        if text.starts_with("error") {
            eprintln!("{text}")
        } else {
            eprintln!("error: {text}")
        }
        ExitCode::FAILURE
    })
}
