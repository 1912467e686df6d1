//! The results store on the command line: `sweep history`, `sweep import`, `sweep store
//! check|migrate|remove`, the `--store`/`--no-store` flags of the commands that record runs, and
//! baselines resolved from the store (`--baseline last-pass|RUN_ID|DIR`).

use crate::results::RunSummary;
use crate::store::{self, Location, Mode, RunFilter, RunPoint, RunRow, Store};
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the store is.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct StoreArg {
    /// The results store: a SQLite file, or postgres://USER@HOST:PORT/DB for a team (default:
    /// $SWEEP_STORE, else reports/sweep.db in the repository).
    #[arg(long, value_name = "PATH|URL")]
    pub store: Option<String>,
}

impl StoreArg {
    /// The store's location; the default is under `repo_root` (else the repository found from
    /// the current directory, else the current directory).
    pub fn location(&self, repo_root: Option<&Path>) -> Location {
        let found;
        let root = match repo_root {
            Some(r) => Some(r),
            None => {
                found = std::env::current_dir().ok().and_then(|d| crate::repo::Repo::discover(&d).ok()).map(|r| r.root);
                found.as_deref()
            }
        };
        Location::resolve(self.store.as_deref(), root)
    }
}

/// The flags of commands that record a run when it is finished.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RecordArgs {
    #[command(flatten)]
    pub at: StoreArg,
    /// Do not record the run in the results store.
    #[arg(long)]
    pub no_store: bool,
}

/// Records a finished run folder; a failure is a warning (the folder is complete either way).
/// The line to print, if any.
pub fn record_quietly(dir: &Path, args: &RecordArgs, repo_root: Option<&Path>, source: &str) -> Option<String> {
    if args.no_store {
        return None;
    }
    let loc = args.at.location(repo_root);
    let result = Store::open(&loc, Mode::Write).and_then(|mut s| s.record_dir(dir, source));
    match result {
        Ok(rec) => Some(format!("store:  {loc} (run {} recorded, {} point(s))", crate::out::shown(&rec.run.run_id), rec.points.len())),
        Err(e) => {
            eprintln!(
                "warning: the run was not recorded in the results store: {e}; the run folder is complete: record it later with `sweep import {}`",
                dir.display()
            );
            None
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Runs with a point of this config key (or glob: `dsv41flash-*`).
    #[arg(long)]
    pub config: Option<String>,
    /// Runs carrying this label (e.g. full-sweep-fail-fast).
    #[arg(long)]
    pub label: Option<String>,
    /// Runs with a point on this hardware: part of a runner label or hardware profile (gb300, h200-fitted).
    #[arg(long)]
    pub hardware: Option<String>,
    /// Runs with results of this kind.
    #[arg(long, value_parser = ["measured", "predicted"])]
    pub kind: Option<String>,
    /// Finished at or after: YYYY-MM-DD, an RFC 3339 time, or an age (30d, 12h).
    #[arg(long)]
    pub since: Option<String>,
    /// Finished before: YYYY-MM-DD (that whole day included), an RFC 3339 time, or an age.
    #[arg(long)]
    pub until: Option<String>,
    /// Runs whose gate verdict is this.
    #[arg(long, value_parser = ["pass", "fail", "incomplete"])]
    pub gate: Option<String>,
    /// One point across runs: its metrics, intervals and frontier membership per run. A full id
    /// (config/point), or the point part with an exact --config.
    #[arg(long)]
    pub point: Option<String>,
    /// Newest N runs (0: all).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// JSON (the store's records) instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub at: StoreArg,
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// Run folders, folders of them, or InferenceX-style agentic result folders (agg.json and,
    /// when kept, profile_export.jsonl); the artifact folders under one argument form one run.
    #[arg(required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// The run id of imported artifacts (default: the argument folder's name).
    #[arg(long, value_parser = |s: &str| store::check_run_id(s).map(|_| s.to_string()))]
    pub run_id: Option<String>,
    /// The config key of imported artifacts' points (default: the aggregate's point id, else
    /// <model prefix>-<precision>-<hw>-<framework>).
    #[arg(long)]
    pub config: Option<String>,
    #[command(flatten)]
    pub at: StoreArg,
}

#[derive(clap::Subcommand, Debug)]
pub enum StoreCommand {
    /// Schema version, orphan rows, and runs recorded here whose folder or files are gone; exits 1 on problems.
    Check {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: StoreArg,
    },
    /// Create the store or bring it to this sweep's schema version.
    Migrate {
        #[command(flatten)]
        at: StoreArg,
    },
    /// Remove runs (and everything recorded with them) from the store; their folders are kept.
    Remove {
        #[arg(required = true, num_args = 1..)]
        runs: Vec<String>,
        #[command(flatten)]
        at: StoreArg,
    },
}

/// A time given on the command line: a date (UTC midnight; `end_of_day` for the next one), an
/// RFC 3339 time, or an age before `now`.
pub fn parse_when(s: &str, now: i64, end_of_day: bool) -> anyhow::Result<i64> {
    let unix = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    if s.len() == 10
        && let Ok(t) = humantime::parse_rfc3339(&format!("{s}T00:00:00Z"))
    {
        return Ok(unix(t) + if end_of_day { 86_400 } else { 0 });
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Ok(unix(t));
    }
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(now - d.as_secs() as i64);
    }
    anyhow::bail!("`{s}`: expected a date (2026-11-01), an RFC 3339 time (2026-11-01T10:00:00Z) or an age (30d, 12h)")
}

/// `2026-11-29 16:46` (UTC).
pub fn fmt_time(unix: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix.max(0) as u64);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    format!("{} {}", &s[..10], &s[11..16])
}

fn filter_of(a: &HistoryArgs) -> anyhow::Result<RunFilter> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    Ok(RunFilter {
        config: a.config.clone(),
        label: a.label.clone(),
        hardware: a.hardware.clone(),
        kind: a.kind.clone(),
        since: a.since.as_deref().map(|s| parse_when(s, now, false)).transpose().context("--since")?,
        until: a.until.as_deref().map(|s| parse_when(s, now, true)).transpose().context("--until")?,
        gate: a.gate.clone(),
        limit: (a.limit > 0).then_some(a.limit),
    })
}

/// Rows of cells as an aligned table (numbers right-aligned where `right[i]`).
fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    // Stored text reaches the terminal escaped (a run id or label written by another tool).
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| crate::out::shown(c).into_owned()).collect()).collect();
    let rows = &rows;
    let n = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            if i > 0 {
                s.push_str("  ");
            }
            if right.get(i).copied().unwrap_or(false) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// The history table of runs.
pub fn runs_table(runs: &[RunRow]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                fmt_time(r.finished_unix),
                r.run_id.clone(),
                if r.result_kind.is_empty() { "-".into() } else { r.result_kind.clone() },
                r.gate.clone().unwrap_or_else(|| "-".into()),
                format!("{}/{}", r.points_ok, r.points_total),
                if r.labels.is_empty() { "-".into() } else { r.labels.join(",") },
                r.configs.join(", "),
            ]
        })
        .collect();
    table(
        &["finished (UTC)", "run", "kind", "gate", "ok/points", "labels", "configs"],
        &rows,
        &[false, false, false, false, true, false, false],
    )
}

/// A value with its interval: `7,314 [7,102–7,530]`.
fn with_ci(c: &store::Ci) -> String {
    let v = crate::gate::fmt_value(c.value);
    match (c.lo, c.hi) {
        (Some(lo), Some(hi)) => format!("{v} [{}–{}]", crate::gate::fmt_value(lo), crate::gate::fmt_value(hi)),
        _ => v,
    }
}

/// The table of one point across runs.
pub fn point_table(points: &[RunPoint]) -> String {
    let opt = |x: Option<f64>| x.map(crate::gate::fmt_value).unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|rp| {
            let p = &rp.point;
            let front = match (p.frontier.get(&crate::pareto::View::E2eNormIntvtyP90), p.p_frontier) {
                (Some(f), Some(pf)) => format!("{} (p = {pf:.2})", if f.on_frontier { "yes" } else { "no" }),
                (Some(f), None) => (if f.on_frontier { "yes" } else { "no" }).to_string(),
                _ => "-".into(),
            };
            let (tput, out, intv, norm, ttft, e2el, joules) = match &p.metrics {
                Some(m) => (
                    with_ci(&m.tput_per_gpu),
                    opt(m.output_tput_per_gpu),
                    with_ci(&m.intvty_p90),
                    with_ci(&m.e2e_norm_intvty_p90),
                    opt(m.ttft_p90),
                    with_ci(&m.e2el_p90),
                    m.power.as_ref().map_or_else(|| "-".into(), |w| format!("{:.3} ({})", w.joules_per_output_token, w.source)),
                ),
                None => Default::default(),
            };
            let status = if p.valid { "ok".to_string() } else { p.status.clone() };
            vec![
                fmt_time(rp.finished_unix),
                rp.run_id.clone(),
                p.result_kind.clone(),
                status,
                tput,
                out,
                intv,
                norm,
                ttft,
                e2el,
                joules,
                front,
            ]
        })
        .collect();
    table(
        &[
            "finished (UTC)",
            "run",
            "kind",
            "status",
            "tok/s/GPU [95% CI]",
            "output tok/s/GPU",
            "P90 intvty",
            "E2E-norm intvty (frontier)",
            "TTFT p90 s",
            "E2EL p90 s",
            "J/out tok",
            "on frontier",
        ],
        &rows,
        &[false, false, false, false, true, true, true, true, true, true, false],
    )
}

pub fn history(a: &HistoryArgs) -> anyhow::Result<ExitCode> {
    let filter = filter_of(a)?;
    let loc = a.at.location(None);
    let mut s = Store::open(&loc, Mode::ReadOnly)?;
    let mut out = std::io::stdout().lock();
    if let Some(point) = &a.point {
        let id = match (point.contains('/'), &a.config) {
            (true, _) => point.clone(),
            (false, Some(c)) if !c.contains(['*', '?']) => format!("{c}/{point}"),
            _ => anyhow::bail!(
                "--point {point}: give the full point id (config/point, see `sweep plan`), or the point part with an exact --config"
            ),
        };
        let pts = s.point_history(&id, &filter)?;
        super::reader_may_stop((|| {
            if a.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&pts)?)?;
            } else if pts.is_empty() {
                writeln!(out, "no run in {loc} has point {id} (with these filters)")?;
            } else {
                write!(out, "{}", point_table(&pts))?;
            }
            Ok(())
        })())?;
        return Ok(ExitCode::SUCCESS);
    }
    let runs = s.runs(&filter)?;
    let total = if filter.limit.is_some_and(|l| runs.len() >= l) { s.count_runs(&filter)? } else { runs.len() as i64 };
    super::reader_may_stop((|| {
        if a.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&runs)?)?;
        } else if runs.is_empty() {
            writeln!(out, "no run in {loc} matches")?;
        } else {
            write!(out, "{}", runs_table(&runs))?;
            if total > runs.len() as i64 {
                writeln!(out, "… {} more (--limit 0 shows all)", total - runs.len() as i64)?;
            }
        }
        Ok(())
    })())?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(a: &ImportArgs) -> anyhow::Result<ExitCode> {
    let loc = a.at.location(None);
    let mut found = Vec::new();
    for d in &a.dirs {
        found.extend(store::import::discover(d)?);
    }
    let artifact_groups = found.iter().filter(|f| matches!(f, store::import::Found::Artifacts(..))).count();
    if a.run_id.is_some() && artifact_groups > 1 {
        anyhow::bail!("--run-id names one run: import the artifact folders of one argument at a time");
    }
    let mut s = Store::open(&loc, Mode::Write)?;
    let opts = store::import::ImportOptions { run_id: a.run_id.clone(), config: a.config.clone() };
    for f in found {
        let rec = match &f {
            store::import::Found::Run(dir) => store::read_run_dir(dir, "import")?,
            store::import::Found::Artifacts(root, dirs) => store::import::read_artifacts(root, dirs, &opts)?,
        };
        s.record(&rec)?;
        let from = match &f {
            store::import::Found::Run(d) => d.display().to_string(),
            store::import::Found::Artifacts(root, dirs) => format!("{} ({} result folder(s))", root.display(), dirs.len()),
        };
        crate::outln!(
            "imported run {} ({} point(s), {}) from {from}",
            crate::out::shown(&rec.run.run_id),
            rec.points.len(),
            kind_word(&rec.run.result_kind)
        );
    }
    crate::outln!("store:  {loc}");
    Ok(ExitCode::SUCCESS)
}

fn kind_word(k: &str) -> &str {
    if k.is_empty() { "no result" } else { k }
}

pub fn store_cmd(c: &StoreCommand) -> anyhow::Result<ExitCode> {
    match c {
        StoreCommand::Check { json, at } => {
            let loc = at.location(None);
            let mut s = Store::open(&loc, Mode::Existing)?;
            let r = s.check(&store::hostname())?;
            let problems = r.problems();
            if *json {
                let mut v = serde_json::to_value(&r)?;
                v["problems"] = serde_json::json!(problems);
                crate::outln!("{}", serde_json::to_string_pretty(&v)?);
            } else if !r.integrity.is_empty() {
                crate::outln!("store {}: the file is damaged; nothing else was checked", r.location);
            } else {
                crate::outln!(
                    "store {}: schema version {} (this sweep: {}), {} run(s), {} point(s)",
                    r.location,
                    r.schema_version,
                    r.supported_version,
                    r.runs,
                    r.points
                );
                if r.other_hosts > 0 {
                    crate::outln!("{} run(s) recorded on other machines: their folders were not checked", r.other_hosts);
                }
                if r.unreferenced_blobs > 0 {
                    crate::outln!("{} stored profile or launch body(ies) no point refers to (space only)", r.unreferenced_blobs);
                }
                for p in &problems {
                    crate::outln!("problem: {p}");
                }
                crate::outln!("{}", if problems.is_empty() { "ok".to_string() } else { format!("{} problem(s)", problems.len()) });
            }
            Ok(if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        StoreCommand::Migrate { at } => {
            let loc = at.location(None);
            let mut s = Store::open(&loc, Mode::Write)?;
            crate::outln!("store {loc}: schema version {}", s.schema_version()?);
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Remove { runs, at } => {
            let loc = at.location(None);
            let mut s = Store::open(&loc, Mode::Existing)?;
            let mut missing = Vec::new();
            for r in runs {
                if s.remove(r)? {
                    crate::outln!("removed run {}", crate::out::shown(r));
                } else {
                    missing.push(r.as_str());
                }
            }
            if !missing.is_empty() {
                anyhow::bail!("not in the store {loc}: {} (see `sweep history`)", missing.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A baseline and how it was found (printed beside the comparison).
pub struct Baseline {
    pub summary: RunSummary,
    pub what: String,
}

/// Resolves `--baseline`: `last-pass` (the newest run whose gate passed with every recipe
/// fingerprint of `run_dir`'s run, of its result kind, finished before it), a run folder, or a
/// run id in the store. A run on this machine is read from its folder; one recorded elsewhere is
/// rebuilt from the store. `Ok(None)`: `last-pass` found no such run.
pub fn resolve_baseline(spec: &str, run_dir: &Path, at: &StoreArg) -> anyhow::Result<Option<Baseline>> {
    if spec != "last-pass" && Path::new(spec).join("summary.json").is_file() {
        let summary = RunSummary::load(Path::new(spec)).map_err(anyhow::Error::msg)?;
        return Ok(Some(Baseline { what: format!("run {} ({spec})", summary.run_id), summary }));
    }
    let loc = at.location(None);
    let mut s = match Store::open(&loc, Mode::ReadOnly) {
        // No store yet (the first run of a CI): nothing has passed before.
        Err(store::StoreError::Missing { .. }) if spec == "last-pass" => return Ok(None),
        r => r.with_context(|| format!("--baseline {spec}"))?,
    };
    let row = if spec == "last-pass" {
        let me = store::read_run_dir(run_dir, "gate")?;
        let mut fps: Vec<String> = me.points.iter().filter_map(|p| p.recipe_fingerprint.clone()).collect();
        fps.sort();
        fps.dedup();
        if fps.is_empty() {
            anyhow::bail!(
                "--baseline last-pass: {} records no recipe fingerprint (plan.json is missing): name the baseline run",
                run_dir.display()
            );
        }
        let kind = Some(me.run.result_kind.as_str()).filter(|k| *k != "mixed");
        match s.last_pass(&fps, kind, Some(&me.run.run_id), Some(me.run.finished_unix))? {
            Some(r) => r,
            None => return Ok(None),
        }
    } else {
        s.run(spec)?.ok_or_else(|| {
            anyhow::anyhow!(
                "--baseline {spec}: neither a run folder (with summary.json) nor a run id in the store {loc} (see `sweep history`)"
            )
        })?
    };
    let how = if spec == "last-pass" { "the last passing run of the same recipe fingerprints, " } else { "" };
    let here = row.host == store::hostname() && Path::new(&row.folder).join("summary.json").is_file();
    let summary = if here {
        RunSummary::load(Path::new(&row.folder)).map_err(anyhow::Error::msg)?
    } else {
        s.run_summary(&row.run_id)?.ok_or_else(|| anyhow::anyhow!("run {} left the store while it was read", row.run_id))?
    };
    let from = if here { row.folder.clone() } else { format!("rebuilt from the store; its folder is {}:{}", row.host, row.folder) };
    Ok(Some(Baseline { what: format!("run {} ({how}finished {} UTC; {from})", row.run_id, fmt_time(row.finished_unix)), summary }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_on_the_command_line() {
        let now = 1_800_000_000;
        assert_eq!(parse_when("2026-11-01", now, false).unwrap(), 1_793_491_200);
        assert_eq!(parse_when("2026-11-01", now, true).unwrap(), 1_793_491_200 + 86_400);
        assert_eq!(parse_when("2026-11-01T10:00:00Z", now, false).unwrap(), 1_793_491_200 + 36_000);
        assert_eq!(parse_when("30d", now, false).unwrap(), now - 30 * 86_400);
        assert!(parse_when("last tuesday", now, false).unwrap_err().to_string().contains("expected a date"));
        assert_eq!(fmt_time(1_793_491_200 + 36_060), "2026-11-01 10:01");
    }

    #[test]
    fn tables_stay_aligned_with_long_cells() {
        let t = table(
            &["a", "n", "z"],
            &[vec!["long cell".into(), "1".into(), "x".into()], vec!["s".into(), "1,000".into(), "y".into()]],
            &[false, true, false],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "a              n  z");
        assert_eq!(lines[1], "long cell      1  x");
        assert_eq!(lines[2], "s          1,000  y");
    }

    #[test]
    fn stored_control_characters_reach_the_terminal_escaped() {
        let t = table(&["run"], &[vec!["evil\u{1b}[2J\u{7}\nforged".into()]], &[false]);
        assert_eq!(t.lines().nth(1).unwrap(), "evil\\u{1b}[2J\\u{7}\\nforged");
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
    }
}
