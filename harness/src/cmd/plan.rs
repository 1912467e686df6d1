//! `sweep plan <label>`: the sweep a label would run, as a table, JSON or a GitHub matrix.

use super::RepoArgs;
use crate::plan::{self, Inputs, Labels, Plan, PlanPoint, PlanRequest};
use crate::recipe::serving::shell_quote;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Github,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// PR labels: exactly one primary (e.g. full-sweep-fail-fast) plus modifiers
    /// (all-evals, evals-only, agentx-fast); separate words or comma-separated.
    #[arg(required = true, num_args = 1..)]
    pub labels: Vec<String>,
    /// Base revision: the entries appended to perf-changelog.yaml since it select the configs
    /// (default: the latest entry).
    #[arg(long)]
    pub base: Option<String>,
    /// Throughput only: leave out the eval rows (the generator's `--no-evals`).
    #[arg(long)]
    pub no_evals: bool,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Print each point's resolved server command line, environment and router command.
    #[arg(long)]
    pub show_commands: bool,
    #[command(flatten)]
    pub repo: RepoArgs,
}

pub fn load(args: &Args) -> anyhow::Result<Result<Plan, crate::problem::Problems>> {
    let labels = Labels::parse(&args.labels).map_err(anyhow::Error::msg)?;
    let repo = match args.repo.repo() {
        Ok(r) => r,
        Err(p) => return Ok(Err(p)),
    };
    let inputs = match Inputs::load(&repo) {
        Ok(i) => i,
        Err(p) => return Ok(Err(p)),
    };
    Ok(plan::build(&repo, &inputs, &PlanRequest { labels, base: args.base.clone(), no_evals: args.no_evals }))
}

pub fn run(args: &Args) -> anyhow::Result<std::process::ExitCode> {
    let plan = match load(args)? {
        Ok(p) => p,
        Err(p) => {
            eprintln!("{p}");
            return Ok(std::process::ExitCode::FAILURE);
        }
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&plan)?),
        Format::Github => println!("{}", serde_json::to_string(&plan.github())?),
        Format::Table => print!("{}", table(&plan, args.show_commands)),
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The human-readable plan.
pub fn table(plan: &Plan, show_commands: bool) -> String {
    let mut o = String::new();
    let l = &plan.labels;
    let policy = match (l.primary.canary(), l.primary.fail_fast()) {
        (true, true) => "canary first, then fail-fast within each matrix",
        (true, false) => "canary first, failures do not stop other points",
        (false, true) => "no canary, fail-fast within each matrix",
        (false, false) => "no canary, failures do not stop other points",
    };
    o.push_str(&format!("sweep plan: {} ({policy})\n", l.names().join(" + ")));
    let n_entries = plan.changelog_metadata["entries"].as_array().map(|a| a.len()).unwrap_or(0);
    let sel = match &plan.base_ref {
        Some(b) => format!("{n_entries} changelog entr{} added since {b}", if n_entries == 1 { "y" } else { "ies" }),
        None => "the latest changelog entry".to_string(),
    };
    let mut configs: Vec<&str> = plan.points().map(|p| p.config_key.as_str()).collect();
    configs.sort();
    configs.dedup();
    o.push_str(&format!("selected by {sel}: {} config(s)\n", configs.len()));
    if l.trim_conc_note() {
        o.push_str("sweep-enabled: single-node rows trimmed to the minimum concurrency per recipe\n");
    }
    let widths = plan.points().map(|p| p.id.len()).max().unwrap_or(10).max(5);
    let arm_w = plan.points().map(|p| p.arm.len()).max().unwrap_or(3).max(3);
    let header = format!("  {:<widths$}  {:<arm_w$}  {:>5}  {:>4}  {:>8}\n", "POINT", "ARM", "CONC", "GPUS", "DURATION");
    let line = |p: &PlanPoint, o: &mut String| {
        let d = p.duration_s.map(|d| format!("{d} s")).unwrap_or_else(|| "-".into());
        o.push_str(&format!("  {:<widths$}  {:<arm_w$}  {:>5}  {:>4}  {:>8}\n", p.id, p.arm, p.conc, p.gpus, d));
        if show_commands {
            o.push_str(&commands(p));
        }
    };
    if let Some(c) = &plan.canary {
        o.push_str("\ncanary (runs first; its failure blocks every matrix)\n");
        o.push_str(&header);
        line(c, &mut o);
    }
    for m in &plan.matrices {
        o.push_str(&format!(
            "\nmatrix {} ({} point{}, fail-fast {})\n",
            m.name,
            m.points.len(),
            if m.points.len() == 1 { "" } else { "s" },
            if m.fail_fast { "on" } else { "off" }
        ));
        o.push_str(&header);
        for p in &m.points {
            line(p, &mut o);
        }
    }
    for m in &plan.evals {
        o.push_str(&format!(
            "\nevals {} ({} point{}: gsm8k, 1,319 questions, 5-shot, after the throughput points of the same server; a simulated engine records them not applicable)\n",
            m.name,
            m.points.len(),
            if m.points.len() == 1 { "" } else { "s" }
        ));
        o.push_str(&header);
        for p in &m.points {
            line(p, &mut o);
        }
    }
    let n_tp: usize = plan.canary.iter().count() + plan.matrices.iter().map(|m| m.points.len()).sum::<usize>();
    let gpu_h: f64 = plan
        .canary
        .iter()
        .chain(plan.matrices.iter().flat_map(|m| m.points.iter()))
        .map(|p| p.gpus as f64 * p.duration_s.unwrap_or(0) as f64 / 3600.0)
        .sum();
    o.push_str(&format!("\n{n_tp} throughput point(s), {:.1} GPU-hours of profiling on real hardware", gpu_h));
    let n_ev: usize = plan.evals.iter().map(|m| m.points.len()).sum();
    if n_ev > 0 {
        o.push_str(&format!(", {n_ev} eval point(s)"));
    }
    o.push('\n');
    o
}

fn commands(p: &PlanPoint) -> String {
    let Some(l) = &p.launch else {
        return "      (no serving recipe for this config: the launcher uses the framework's own script)\n".into();
    };
    let mut o = String::new();
    let mut argv = l.worker_argv.iter().peekable();
    // Command words up to the first flag on one line, then one flag (and value) per line.
    let mut head = Vec::new();
    while let Some(a) = argv.peek() {
        if a.starts_with("--") {
            break;
        }
        head.push(argv.next().expect("peeked").clone());
    }
    o.push_str(&format!("      worker: {}", shell_quote(&head)));
    while let Some(a) = argv.next() {
        let mut item = vec![a.clone()];
        if argv.peek().is_some_and(|n| !n.starts_with("--")) {
            item.push(argv.next().expect("peeked").clone());
        }
        o.push_str(&format!(" \\\n          {}", shell_quote(&item)));
    }
    o.push('\n');
    if !l.env.is_empty() {
        o.push_str("      env:\n");
        for (k, v) in &l.env {
            o.push_str(&format!("          {k}={}\n", shell_quote(std::slice::from_ref(v))));
        }
    }
    if let Some(r) = &l.router_argv {
        o.push_str(&format!("      router: {}\n", shell_quote(r)));
    }
    o
}

impl Labels {
    fn trim_conc_note(&self) -> bool {
        self.primary.trim_conc()
    }
}
