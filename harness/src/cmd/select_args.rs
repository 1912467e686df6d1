//! Flag groups several commands share, each resolved once into the value the command uses:
//! the server a replay or an eval talks to (`--url` or `--engine`), and the label selection that
//! builds a plan (`sweep plan`, `sweep run`).

use crate::plan::{Labels, PlanRequest};

/// `--url URL` or `--engine "FLAGS"`: exactly one (clap enforces it).
#[derive(clap::Args, Clone, Debug, Default)]
#[group(required = true, multiple = false)]
pub struct ServerArgs {
    /// An OpenAI-compatible server, e.g. http://127.0.0.1:30000.
    #[arg(long)]
    pub url: Option<String>,
    /// SGLang server flags for the reference engine on the virtual clock, e.g.
    /// "--model-path deepseek-ai/DeepSeek-V3 --tp 8" (SGLANG_* variables are read from the
    /// environment). It is simulated: it measures nothing and answers no math (an eval on it is
    /// recorded `not_applicable`).
    #[arg(long, allow_hyphen_values = true)]
    pub engine: Option<String>,
}

/// Where a command's requests go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server<'a> {
    /// A running server, in real time.
    Url(&'a str),
    /// The reference engine with these flags, on the virtual clock.
    Engine(&'a str),
}

impl ServerArgs {
    pub fn server(&self) -> Server<'_> {
        match (&self.url, &self.engine) {
            (_, Some(flags)) => Server::Engine(flags),
            (Some(url), None) => Server::Url(url),
            // clap's group requires one of them; an empty engine is the one left.
            (None, None) => Server::Engine(""),
        }
    }
}

/// The PR labels and what narrows the configs they select.
#[derive(clap::Args, Clone, Debug)]
pub struct LabelArgs {
    /// PR labels: exactly one primary (e.g. full-sweep-fail-fast) plus modifiers
    /// (all-evals, evals-only, agentx-fast); separate words or comma-separated.
    #[arg(required = true, num_args = 1..)]
    pub labels: Vec<String>,
    /// Base revision: the entries appended to perf-changelog.yaml since it select the configs
    /// (default: the latest entry).
    #[arg(long)]
    pub base: Option<String>,
    /// Throughput only: leave out the eval points (the generator's `--no-evals`).
    #[arg(long)]
    pub no_evals: bool,
}

impl LabelArgs {
    /// The plan request these flags make; a bad label set is refused with its reason.
    pub fn request(&self) -> anyhow::Result<PlanRequest> {
        let labels = Labels::parse(&self.labels).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(PlanRequest { labels, base: self.base.clone(), no_evals: self.no_evals })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        s: ServerArgs,
        #[command(flatten)]
        l: LabelArgs,
    }

    #[test]
    fn one_server_and_the_labels_resolve_once() {
        let c = Cli::try_parse_from(["x", "--url", "http://h:1", "full-sweep-fail-fast", "agentx-fast"]).unwrap();
        assert_eq!(c.s.server(), Server::Url("http://h:1"));
        assert!(c.l.request().is_ok());
        let c = Cli::try_parse_from(["x", "--engine", "--tp 8", "full-sweep-fail-fast"]).unwrap();
        assert_eq!(c.s.server(), Server::Engine("--tp 8"));
        assert!(Cli::try_parse_from(["x", "--url", "u", "--engine", "e", "full-sweep-fail-fast"]).is_err(), "one of them");
        assert!(Cli::try_parse_from(["x", "full-sweep-fail-fast"]).is_err(), "one is required");
        let c = Cli::try_parse_from(["x", "--url", "u", "not-a-label"]).unwrap();
        assert!(c.l.request().is_err());
    }
}
