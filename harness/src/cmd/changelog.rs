//! `sweep changelog check|append`: the append-only rules and atomic appends.

use super::RepoArgs;
use crate::changelog::{self, Changelog, NewEntry};
use crate::plan::matrix::Scenario;
use crate::problem::{Problem, Problems};
use crate::recipe::Master;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Check perf-changelog.yaml: the entry schema, and with --base the append-only byte rules
    /// (historical bytes unchanged, entries added only at the end, one blank line between
    /// entries, canonical pr-links) and that the added entries' keys resolve.
    Check {
        /// Base revision (e.g. origin/main) the file must be an append of.
        #[arg(long)]
        base: Option<String>,
        #[command(flatten)]
        repo: RepoArgs,
    },
    /// Append an entry atomically (the file is only replaced when the result is a valid append).
    Append {
        /// Config keys (or `*` patterns) the entry selects.
        #[arg(long = "config-keys", required_unless_present = "from", num_args = 1..)]
        config_keys: Vec<String>,
        /// Take the config keys from a finished run directory; its gate must have passed.
        #[arg(long)]
        from: Option<std::path::PathBuf>,
        /// Description lines (repeat for several lines).
        #[arg(long, required = true)]
        description: Vec<String>,
        /// https://github.com/<owner>/<repo>/pull/<number>
        #[arg(long = "pr-link", required = true)]
        pr_link: String,
        /// Restrict to fixed-seq-len and/or agentic-coding.
        #[arg(long = "scenario-type")]
        scenario_type: Vec<String>,
        #[arg(long)]
        evals_only: bool,
        #[arg(long)]
        all_evals: bool,
        #[arg(long)]
        append_only: bool,
        #[command(flatten)]
        repo: RepoArgs,
    },
}

fn resolve_keys(master: &Master, file: &std::path::Path, entries: &[changelog::Entry]) -> Problems {
    let mut p = Problems::default();
    for e in entries {
        for pat in &e.config_keys {
            if changelog::resolve_pattern(pat, master.keys()).is_empty() {
                p.push(Problem::new(
                    file,
                    Some(e.line),
                    "",
                    format!("config key `{pat}` matches no master config"),
                    "fix the key (only `*` is a wildcard here) or add the config to the master file",
                ));
            }
        }
    }
    p
}

pub fn check(base: Option<&str>, repo: &RepoArgs) -> Result<String, Problems> {
    let repo = repo.repo()?;
    let head = Changelog::load(&repo.changelog)?;
    let Some(rev) = base else {
        return Ok(format!("ok: {} entries in {}", head.entries.len(), repo.changelog.display()));
    };
    let base_bytes = changelog::git_show(rev, &repo.changelog).map_err(|e| {
        Problems::one(Problem::new(&repo.changelog, None, "", e.to_string(), "pass a revision that has this file (e.g. origin/main)"))
    })?;
    let base = Changelog::parse(&repo.changelog, &base_bytes)?;
    let delta = changelog::check_append(&base, &head)?;
    if !repo.master_files.is_empty() {
        let master = repo.master()?;
        let p = resolve_keys(&master, &repo.changelog, &delta.appended);
        if !p.is_empty() {
            return Err(p);
        }
    }
    Ok(format!(
        "ok: {} entr{} appended since {rev}, {} pr-link correction(s)",
        delta.appended.len(),
        if delta.appended.len() == 1 { "y" } else { "ies" },
        delta.corrections
    ))
}

/// The config keys of a run whose gate passed (`sweep gate` wrote `gate.json`).
/// Appends `e` after checking that every key resolves in the master config; the message to print.
pub fn append_entry(repo: &crate::repo::Repo, e: &NewEntry) -> Result<String, Problems> {
    if !repo.master_files.is_empty() {
        let master = repo.master()?;
        for k in &e.config_keys {
            if changelog::resolve_pattern(k, master.keys()).is_empty() {
                return Err(Problems::one(Problem::new(
                    &repo.master_files[0],
                    None,
                    "",
                    format!("config key `{k}` matches no master config"),
                    "add the config first, or fix the key",
                )));
            }
        }
    }
    let d = changelog::append(&repo.changelog, e)?;
    Ok(format!(
        "appended entry for {} to {} (line {})",
        e.config_keys.join(", "),
        repo.changelog.display(),
        d.appended.first().map(|x| x.line).unwrap_or(0)
    ))
}

pub fn keys_from_run(run: &std::path::Path) -> Result<Vec<String>, Problems> {
    let bad = |m: String, fix: &str| Problems::one(Problem::new(run, None, "", m, fix));
    let summary = crate::results::RunSummary::load(run).map_err(|e| bad(e.to_string(), "pass a run directory written by `sweep run`"))?;
    let gate: serde_json::Value = std::fs::read_to_string(run.join("gate.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| bad("the run has no gate.json".into(), "run `sweep gate RUN` first"))?;
    if gate["passed"] != serde_json::Value::Bool(true) {
        return Err(bad(
            "the run's gate failed: only passing runs are recorded in the changelog".into(),
            "fix the failing checks (see gate.txt) and run again",
        ));
    }
    let mut keys: Vec<String> = summary.points.iter().map(|p| p.config_key.clone()).collect();
    keys.sort();
    keys.dedup();
    Ok(keys)
}

pub fn run(cmd: &Command) -> anyhow::Result<std::process::ExitCode> {
    let res = match cmd {
        Command::Check { base, repo } => check(base.as_deref(), repo),
        Command::Append { config_keys, from, description, pr_link, scenario_type, evals_only, all_evals, append_only, repo } => (|| {
            let repo = repo.repo()?;
            let mut config_keys = config_keys.clone();
            if let Some(run) = from {
                config_keys.extend(keys_from_run(run)?);
            }
            let mut scns = Vec::new();
            for s in scenario_type {
                scns.push(Scenario::parse(s).ok_or_else(|| {
                    Problems::one(Problem::new(
                        &repo.changelog,
                        None,
                        "",
                        format!("unknown scenario type `{s}`"),
                        "use fixed-seq-len or agentic-coding",
                    ))
                })?);
            }
            let e = NewEntry {
                config_keys,
                description: description.clone(),
                pr_link: pr_link.clone(),
                scenario_type: (!scns.is_empty()).then_some(scns),
                evals_only: *evals_only,
                all_evals: *all_evals,
                append_only: *append_only,
            };
            append_entry(&repo, &e)
        })(
        ),
    };
    match res {
        Ok(msg) => {
            crate::outln!("{msg}");
            Ok(std::process::ExitCode::SUCCESS)
        }
        Err(p) => {
            eprintln!("{p}");
            Ok(std::process::ExitCode::FAILURE)
        }
    }
}
