//! `sweep plan <label>`: the sweep a label would run, as a table, JSON or a GitHub matrix.

use super::RepoArgs;
use crate::plan::{self, Inputs, Plan, PlanPoint};
use crate::recipe::SeqLen;
use crate::recipe::serving::shell_quote;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Github,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub select: super::select_args::LabelArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Print each point's resolved server command line, environment and router command.
    #[arg(long)]
    pub show_commands: bool,
    #[command(flatten)]
    pub repo: RepoArgs,
}

pub fn load(args: &Args) -> anyhow::Result<Result<Plan, crate::problem::Problems>> {
    let request = args.select.request()?;
    let repo = match args.repo.repo() {
        Ok(r) => r,
        Err(p) => return Ok(Err(p)),
    };
    let inputs = match Inputs::load(&repo) {
        Ok(i) => i,
        Err(p) => return Ok(Err(p)),
    };
    Ok(plan::build(&repo, &inputs, &request))
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
        Format::Json => crate::outln!("{}", serde_json::to_string_pretty(&plan)?),
        Format::Github => crate::outln!("{}", serde_json::to_string(&plan.github())?),
        Format::Table => crate::out!("{}", table(&plan, args.show_commands)),
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
    if l.primary.trim_conc() {
        o.push_str("sweep-enabled: single-node rows trimmed to the minimum concurrency per recipe\n");
    }
    let cols = Columns::of(plan, show_commands);
    if let Some(c) = &plan.canary {
        o.push_str("\ncanary (runs first; its failure blocks every matrix)\n");
        o.push_str(&cols.header());
        o.push_str(&cols.line(c));
    }
    for m in &plan.matrices {
        o.push_str(&format!(
            "\nmatrix {} ({} point{}, fail-fast {})\n",
            m.name,
            m.points.len(),
            if m.points.len() == 1 { "" } else { "s" },
            if m.fail_fast { "on" } else { "off" }
        ));
        o.push_str(&cols.header());
        m.points.iter().for_each(|p| o.push_str(&cols.line(p)));
    }
    for m in &plan.evals {
        o.push_str(&format!(
            "\nevals {} ({} point{}: gsm8k, 1,319 questions, 5-shot, after the throughput points of the same server; a simulated engine records them not applicable)\n",
            m.name,
            m.points.len(),
            if m.points.len() == 1 { "" } else { "s" }
        ));
        o.push_str(&cols.header());
        m.points.iter().for_each(|p| o.push_str(&cols.line(p)));
    }
    o.push_str(&totals(plan));
    o
}

/// The table's columns: the sequence length (`SEQ`) only when the plan has fixed-seq-len points.
struct Columns {
    id: usize,
    arm: usize,
    seq: Option<usize>,
    show_commands: bool,
}

impl Columns {
    fn of(plan: &Plan, show_commands: bool) -> Columns {
        // Capped: a column is padded to its widest cell up to a screen's width (format widths
        // over 65,535 panic, and a recipe may name a point that long).
        const MAX: usize = 160;
        let id = plan.points().map(|p| p.id.len()).max().unwrap_or(10).clamp(5, MAX);
        let arm = plan.points().map(|p| p.arm.len()).max().unwrap_or(3).clamp(3, MAX);
        let seq = plan.points().filter_map(|p| p.seq_len()).map(|(i, o)| SeqLen::new(i, o).label().len()).max().map(|w| w.clamp(3, MAX));
        Columns { id, arm, seq, show_commands }
    }

    fn row(&self, id: &str, arm: &str, seq: &str, conc: &str, gpus: &str, duration: &str) -> String {
        let (w, a) = (self.id, self.arm);
        let seq = self.seq.map(|s| format!("  {seq:<s$}")).unwrap_or_default();
        format!("  {id:<w$}  {arm:<a$}{seq}  {conc:>5}  {gpus:>4}  {duration:>8}\n")
    }

    fn header(&self) -> String {
        self.row("POINT", "ARM", "SEQ", "CONC", "GPUS", "DURATION")
    }

    /// A point: its duration (agentic), or the requests it sends (fixed-seq-len).
    fn line(&self, p: &PlanPoint) -> String {
        let d = match (p.duration_s, &p.fixed) {
            (Some(d), _) => format!("{d} s"),
            (None, Some(f)) => format!("{} req", f.num_prompts),
            (None, None) => "-".into(),
        };
        let seq = p.seq_len().map(|(i, o)| SeqLen::new(i, o).label()).unwrap_or_else(|| "-".into());
        let mut o = self.row(&p.id, &p.arm, &seq, &p.conc.to_string(), &p.gpus.to_string(), &d);
        if self.show_commands {
            o.push_str(&commands(p));
        }
        o
    }
}

/// The closing line: throughput points, the GPU-hours of their profiling (agentic points run
/// for their duration; a fixed-seq-len point sends a number of requests, so its time is the
/// server's: its requests are counted instead), eval points.
fn totals(plan: &Plan) -> String {
    let tp: Vec<&PlanPoint> = plan.canary.iter().chain(plan.matrices.iter().flat_map(|m| m.points.iter())).collect();
    let gpu_h: f64 = tp.iter().map(|p| p.gpus as f64 * p.duration_s.unwrap_or(0) as f64 / 3600.0).sum();
    let fixed: Vec<u32> = tp.iter().filter_map(|p| p.fixed.map(|f| f.num_prompts)).collect();
    let mut o = format!("\n{} throughput point(s)", tp.len());
    if fixed.len() < tp.len() {
        let agentic = if fixed.is_empty() { "" } else { "agentic " };
        o.push_str(&format!(", {gpu_h:.1} GPU-hours of {agentic}profiling on real hardware"));
    }
    if !fixed.is_empty() {
        let and = if fixed.len() < tp.len() { " plus" } else { ":" };
        let reqs = thousands(fixed.iter().map(|&n| n as u64).sum());
        o.push_str(&format!(
            "{and} {} fixed-seq-len point(s) sending {reqs} requests ({} × conc each)",
            fixed.len(),
            crate::plan::matrix::PROMPTS_PER_CONC
        ));
    }
    let n_ev: usize = plan.evals.iter().map(|m| m.points.len()).sum();
    if n_ev > 0 {
        o.push_str(&format!(", {n_ev} eval point(s)"));
    }
    o.push('\n');
    o
}

/// `4,450`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
