//! The live client's flags (`sweep replay --url`, `sweep run` on live targets): synthesis
//! tokenizer, timeouts, readiness and the request dialect.

use std::path::PathBuf;
use std::time::Duration;

use crate::targets::dialect::DialectArgs;
use crate::targets::gpu_monitor::MonitorChoice;
use crate::targets::http::ClientOptions;

#[derive(clap::Args, Clone, Debug)]
pub struct ClientArgs {
    /// Synthesis tokenizer for live targets (`tokenizer.json` or its folder), so prompts have the
    /// trace's token counts on the server, and outputs can be counted when the server sends no
    /// `usage` (default: the one the server reports, if readable here).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// A request still running after this many seconds (wall time) is a `timeout` error.
    #[arg(long, default_value_t = 14_400.0, value_name = "SECONDS")]
    pub request_timeout: f64,
    /// A stream that sends nothing for this many seconds is a `stall` error.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub stall_timeout: f64,
    /// Seconds to wait for the server to be ready (`/health`, a listed model, one answered
    /// one-token request) before the first primer.
    #[arg(long, default_value_t = 600.0, value_name = "SECONDS")]
    pub ready_timeout: f64,
    /// GPU power sampling during live points, as InferenceX samples it (nvidia-smi once a
    /// second, integrated over the profiling window into `agg.json`'s power keys). `auto`
    /// samples when the server runs on this host (a launched server, a loopback URL);
    /// elsewhere it records `power_valid` 0 and why.
    #[arg(long, value_enum, default_value_t = MonitorChoice::Auto, value_name = "HOW")]
    pub gpu_monitor: MonitorChoice,
    #[command(flatten)]
    pub dialect: DialectArgs,
}

impl Default for ClientArgs {
    fn default() -> Self {
        ClientArgs {
            tokenizer: None,
            request_timeout: 14_400.0,
            stall_timeout: 300.0,
            ready_timeout: 600.0,
            gpu_monitor: MonitorChoice::Auto,
            dialect: DialectArgs::default(),
        }
    }
}

fn seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(v > 0.0 && v.is_finite(), "{flag} {v}: must be a positive number of seconds");
    Ok(Duration::from_secs_f64(v))
}

impl ClientArgs {
    /// The client's options (a point's recipe `client-args` merge under them later, see
    /// [`ClientOptions::for_point`]).
    pub fn options(&self) -> anyhow::Result<ClientOptions> {
        let base = ClientOptions {
            tokenizer: self.tokenizer.clone(),
            request_timeout: seconds("--request-timeout", self.request_timeout)?,
            stall_timeout: seconds("--stall-timeout", self.stall_timeout)?,
            ready_timeout: seconds("--ready-timeout", self.ready_timeout)?,
            gpu_monitor: self.gpu_monitor,
            ..Default::default()
        };
        base.with_flags(self.dialect.clone(), &[]).map_err(anyhow::Error::msg)
    }

    /// The same flags as a command line (what a Slurm job repeats).
    pub fn argv(&self) -> Vec<String> {
        let mut v = self.shaping_argv();
        v.extend(["--request-timeout".into(), self.request_timeout.to_string()]);
        v.extend(["--stall-timeout".into(), self.stall_timeout.to_string()]);
        v.extend(["--ready-timeout".into(), self.ready_timeout.to_string()]);
        if let Some(p) = clap::ValueEnum::to_possible_value(&self.gpu_monitor) {
            v.extend(["--gpu-monitor".into(), p.get_name().to_string()]);
        }
        v
    }

    /// The flags that shape the requests sent (tokenizer, dialect), as a command line: part of
    /// a run's identity.
    pub fn shaping_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(t) = &self.tokenizer {
            v.extend(["--tokenizer".into(), t.display().to_string()]);
        }
        let d = &self.dialect;
        if let Some(f) = d.max_tokens_field {
            let name = clap::ValueEnum::to_possible_value(&f).map(|p| p.get_name().to_string()).unwrap_or_default();
            v.extend(["--max-tokens-field".into(), name]);
        }
        if let Some(j) = &d.extra_body {
            v.extend(["--extra-body".into(), j.clone()]);
        }
        if d.no_ignore_eos {
            v.push("--no-ignore-eos".into());
        }
        if let Some(c) = d.context_length {
            v.extend(["--context-length".into(), c.to_string()]);
        }
        v
    }
}
