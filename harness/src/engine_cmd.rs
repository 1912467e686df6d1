//! `sweep engine serve <SGLang flags>`: the reference engine as a real
//! OpenAI-compatible HTTP server (real time, or `--time-scale K` times faster).

use anyhow::Context;
use clap::{Args, Subcommand};
use engine_server::server::engine_core::{EngineCore, engine_env};
use engine_server::server::{ServeConfig, Server, shutdown_signal};

/// Arguments of `sweep engine`.
#[derive(Debug, Args)]
pub struct EngineArgs {
    #[command(subcommand)]
    pub command: EngineCommand,
}

#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Serve the reference engine over HTTP with SGLang's API, flags and metrics.
    ///
    /// Takes `python -m sglang.launch_server` flags (both 0.5.5 and 0.5.23 spellings)
    /// and `SGLANG_*` variables, plus: --hardware NAME|YAML (GPU profile of the cost
    /// model, default h200), --engine-model NAME|YAML (model profile, default the one
    /// matching --model-path), --chat-template deepseek-v4|deepseek-v3|chatml,
    /// --time-scale K (engine time runs K times faster than wall time),
    /// --router-args="FLAGS" (the recipe's sglang-router flags, modelled in process),
    /// --tokenizer-cache-mb N (memo of the incremental chat encoder, default 512),
    /// --max-request-body-mb N (default 64), --mean-output-tokens N (mean length of
    /// replies that end on their own, default 256), --header-read-timeout S (30),
    /// --body-read-timeout S (60), --keep-alive-timeout S (5), --max-connections N (503
    /// beyond; default from the open-file limit), --drain-timeout S (10). Binds
    /// 127.0.0.1:30000 by default. SIGTERM or Ctrl-C drains open streams, then exits 0.
    Serve {
        /// SGLang server flags, e.g. `--tp 4 --tokenizer-path DIR --enable-metrics`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        flags: Vec<String>,
    },
}

pub fn run(args: EngineArgs) -> anyhow::Result<()> {
    match args.command {
        EngineCommand::Serve { flags } => serve(flags),
    }
}

fn serve(flags: Vec<String>) -> anyhow::Result<()> {
    let (cfg, rest) = ServeConfig::from_argv(&flags, |k| std::env::var(k).ok()).context("invalid `sweep engine serve` flags")?;
    let env = engine_env(std::env::vars());
    let core = EngineCore::from_args(&rest, &cfg.router_args, &env, cfg.engine_model.as_deref(), &cfg.hardware, cfg.seed)
        .context("cannot build the engine from these flags")?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    rt.block_on(async move {
        let server = Server::start(cfg.clone(), core).await.context("cannot start the engine server")?;
        // Listen before the banner: a signal sent as soon as the banner is seen must drain.
        let signal = shutdown_signal().context("cannot listen for SIGTERM / SIGINT")?;
        eprintln!(
            "sweep engine: serving {} on http://{} (tokenizer: {}, time scale {}x); Ctrl-C to stop",
            cfg.served_model_name, server.addr, cfg.tokenizer_backend, cfg.time_scale
        );
        let name = signal.await;
        let grace = server.drain_timeout();
        eprintln!("sweep engine: received {name}; draining {} open streams (up to {} s)", server.open_streams(), grace.as_secs_f64());
        let r = server.drain(grace).await;
        eprintln!(
            "sweep engine: drained: {} of {} streams finished, {} cut with an error event; {} connections dropped",
            r.open_at_start.saturating_sub(r.cut),
            r.open_at_start,
            r.cut,
            r.dropped_connections
        );
        Ok(())
    })
}
