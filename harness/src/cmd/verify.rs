//! `sweep verify`: the PR verifier's Checks 0–12 (and 13, the tree) from the repository at two revisions, a run's
//! artifacts and the forge's facts. Exit 0 on PASS, 1 on REJECTED, 2 when it cannot verify.

use crate::verify::{self, Date, Options, PrFacts, output};
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The verifier's comment: marker, verdict header, one row per check.
    Text,
    Json,
    /// GitHub workflow annotations (`::error file=…,line=…::…`).
    Github,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The pull request's base (e.g. origin/main); the diff starts at its merge base with --head.
    #[arg(long)]
    pub base: String,
    /// The signed-off head.
    #[arg(long, default_value = "HEAD")]
    pub head: String,
    /// A run directory (or downloaded artifacts): eval results, images, the sweep's outcome.
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// What only the forge knows (signer, CODEOWNERS teams, check runs, comments, recipe links);
    /// format in docs/verify.md. Without it the forge's checks are N/A.
    #[arg(long = "pr-facts")]
    pub pr_facts: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// The repository (default: the one containing the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// The review date for MODELS.md's deprecations (default: today, UTC).
    #[arg(long = "review-date")]
    pub review_date: Option<String>,
    /// MODELS.md to use when the base revision has none.
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// thresholds.yaml to use when the base revision has none.
    #[arg(long)]
    pub thresholds: Option<PathBuf>,
    /// Also write the output to this file (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn options(a: &Args) -> anyhow::Result<Options> {
    let review_date = match &a.review_date {
        Some(d) => Date::parse(d).with_context(|| format!("--review-date {d}: not a date; use YYYY-MM-DD"))?,
        None => Date::today(),
    };
    let facts = match &a.pr_facts {
        Some(p) => Some(PrFacts::load(p).map_err(|e| anyhow::anyhow!("{e}"))?),
        None => None,
    };
    Ok(Options {
        dir: a.root.clone().unwrap_or_else(|| PathBuf::from(".")),
        base: a.base.clone(),
        head: a.head.clone(),
        run: a.run.clone(),
        facts,
        review_date,
        models: a.models.clone(),
        thresholds: a.thresholds.clone(),
    })
}

pub fn run(a: &Args) -> anyhow::Result<ExitCode> {
    let report = match options(a).and_then(|o| verify::verify(&o).map_err(anyhow::Error::from)) {
        Ok(r) => r,
        Err(e) => {
            // Not a verdict: the inputs could not be read. Exit 2 keeps it apart from REJECTED.
            eprintln!("error: cannot verify: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let text = match a.format {
        Format::Text => output::text(&report),
        Format::Json => output::json(&report) + "\n",
        Format::Github => output::github(&report),
    };
    crate::out!("{text}");
    if let Some(out) = &a.out {
        crate::problem::atomic_write(out, text.as_bytes()).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(if report.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
