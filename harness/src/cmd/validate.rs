//! `sweep validate`: every configuration check over the repository, all problems listed.

use super::RepoArgs;
use crate::changelog::{self, Changelog};
use crate::golden_al::GoldenAl;
use crate::problem::{Problem, Problems};
use crate::recipe::serving::Recipe;
use crate::recipe::{Master, Runners};
use crate::repo::Repo;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub repo: RepoArgs,
}

/// What was checked, for the success line.
#[derive(Debug, Default, PartialEq)]
pub struct ValidationSummary {
    pub master_configs: usize,
    pub master_files: usize,
    pub recipes: usize,
    pub recipe_points: usize,
    pub changelog_entries: Option<usize>,
    pub golden_files: Option<usize>,
    pub warnings: Vec<String>,
}

pub fn check(args: &Args) -> Result<ValidationSummary, Problems> {
    let repo = args.repo.repo()?;
    let mut p = Problems::default();
    let mut s = ValidationSummary { master_files: repo.master_files.len(), ..Default::default() };
    let master = if repo.master_files.is_empty() { None } else { p.take(Master::load(&repo.master_files)) };
    let runners = repo.runners_file.as_deref().and_then(|f| p.take(Runners::load(f)));
    let golden = repo.golden_dir.as_deref().and_then(|d| p.take(GoldenAl::load_dir(d)));
    s.golden_files = golden.as_ref().map(|g| g.files.len());
    if let Some(m) = &master {
        s.master_configs = m.len();
        if let Some(r) = &runners {
            s.warnings.extend(unknown_runner_labels(&repo, m, r));
        }
    }
    let changelog_given = args.repo.changelog.is_some() || repo.changelog.is_file();
    if changelog_given
        && (args.repo.changelog.is_some() || args.repo.master.is_empty())
        && let Some(cl) = p.take(Changelog::load(&repo.changelog))
    {
        s.changelog_entries = Some(cl.entries.len());
        if let Some(m) = &master {
            check_latest_entry(&cl, m, &mut p);
        }
    }
    // Serving recipes (only for the repository's own master config).
    if let Some(m) = &master
        && args.repo.master.is_empty()
    {
        check_recipes(&repo, m, golden.as_ref(), &mut s, &mut p);
    }
    p.into_result(s)
}

/// A warning for each master entry whose runner label runners.yaml does not list.
fn unknown_runner_labels(repo: &Repo, m: &Master, r: &Runners) -> Vec<String> {
    let mut warnings = Vec::new();
    for e in &m.entries {
        if !r.labels.contains_key(&e.runner) {
            warnings.push(format!(
                "{}: runner label `{}` is not in {}",
                e.key,
                e.runner,
                repo.runners_file.as_ref().map(|f| f.display().to_string()).unwrap_or_default()
            ));
        }
    }
    warnings
}

/// The latest changelog entry's config keys must each match a master config.
fn check_latest_entry(cl: &Changelog, m: &Master, p: &mut Problems) {
    let Some(last) = cl.entries.last() else { return };
    for pat in &last.config_keys {
        if changelog::resolve_pattern(pat, m.keys()).is_empty() {
            p.push(Problem::new(
                &cl.file,
                Some(last.line),
                "",
                format!("config key `{pat}` of the latest entry matches no master config"),
                "fix the key or add the config to the master file",
            ));
        }
    }
}

/// Every serving recipe: its config key is in the master config and names its file, it matches
/// the master entry, and each of its points resolves.
fn check_recipes(repo: &Repo, m: &Master, golden: Option<&GoldenAl>, s: &mut ValidationSummary, p: &mut Problems) {
    for f in repo.recipe_files() {
        let Some(r) = p.take(Recipe::load(&f)) else { continue };
        s.recipes += 1;
        let Some(e) = m.get(&r.config_key) else {
            p.push(Problem::new(
                &f,
                None,
                "config-key",
                format!("recipe config key `{}` is not in the master config", r.config_key),
                "add the config to recipes/master.yaml or fix the key",
            ));
            continue;
        };
        if f.file_stem().map(|x| x.to_string_lossy() != r.config_key).unwrap_or(true) {
            p.push(Problem::new(
                &f,
                None,
                "config-key",
                format!("recipe for `{}` is in a file with another name", r.config_key),
                format!("rename the file to recipes/{}.yaml", r.config_key),
            ));
        }
        if p.take(r.match_master(e)).is_none() {
            continue;
        }
        for (ai, a) in r.arms.iter().enumerate() {
            for pi in 0..a.points.len() {
                let Some(launch) = p.take(r.resolve(ai, pi, &e.model_prefix, golden)) else { continue };
                s.recipe_points += 1;
                // The flags as `sweep run` reads them: what run would refuse, validate refuses. The
                // reference engine reads SGLang's flags; other servers' flags are theirs.
                if e.framework != "sglang" {
                    continue;
                }
                if let Err(err) = crate::targets::sim::engine_config(&launch) {
                    p.push(Problem::new(
                        &f,
                        r.line(&a.points[pi].path),
                        format!("arms[{ai}].points[{pi}]"),
                        format!("{} c{}: {err}", a.name, launch.conc),
                        "fix or remove the flag in the recipe (`sweep engine serve --help` lists the flags the engine reads)",
                    ));
                }
            }
        }
    }
}

pub fn run(args: &Args) -> anyhow::Result<std::process::ExitCode> {
    match check(args) {
        Ok(s) => {
            for w in &s.warnings {
                eprintln!("warning: {w}");
            }
            let mut parts = vec![format!("{} master configs in {} file(s)", s.master_configs, s.master_files)];
            if s.recipes > 0 {
                parts.push(format!("{} serving recipes ({} points resolved)", s.recipes, s.recipe_points));
            }
            if let Some(n) = s.changelog_entries {
                parts.push(format!("{n} changelog entries"));
            }
            if let Some(n) = s.golden_files {
                parts.push(format!("{n} golden AL files"));
            }
            crate::outln!("ok: {}", parts.join(", "));
            Ok(std::process::ExitCode::SUCCESS)
        }
        Err(p) => {
            eprintln!("{p}");
            Ok(std::process::ExitCode::FAILURE)
        }
    }
}
