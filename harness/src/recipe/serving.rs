//! Serving recipes: the exact server command line and environment of every point of a config,
//! written as a base plus per-arm and per-point overrides so a reader sees at a glance what
//! differs between points. See `docs/formats.md` for the format.

use super::master::{Conc, Entry, SearchRow, Topology};
use super::schema::Checker;
use crate::golden_al::{self, Golden, GoldenAl};
use crate::problem::{Problem, Problems};
use crate::yaml::{self, Doc, YPath};
use serde_yaml_ng::{Mapping, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A process to start: command words, arguments, environment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Process {
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecipePoint {
    pub conc: u32,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub path: YPath,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Arm {
    pub name: String,
    pub gpus: Option<u32>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub router: Option<Process>,
    pub points: Vec<RecipePoint>,
    pub path: YPath,
}

/// Simulated acceptance at the golden AL (agentic spec-decode runs).
#[derive(Clone, Debug, PartialEq)]
pub struct SimulatedAcceptance {
    pub thinking_mode: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Recipe {
    pub file: PathBuf,
    pub config_key: String,
    pub image: Option<String>,
    pub worker: Process,
    /// Flags the harness needs (e.g. `--enable-metrics`) that are not part of the published recipe.
    pub harness_args: Vec<String>,
    /// Flags for the client (the request dialect), given to every point of the recipe.
    pub client_args: Vec<String>,
    pub simulated_acceptance: Option<SimulatedAcceptance>,
    pub arms: Vec<Arm>,
    doc: Doc,
}

/// A point's resolved launch: what `sweep plan --show-commands` prints and the launcher runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Launch {
    pub arm: String,
    pub conc: u32,
    pub worker_argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_argv: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub router_env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub golden_al: Option<f64>,
    /// The recipe's `client-args`: how the client writes requests for this server
    /// (`--max-tokens-field`, `--extra-body`, `--no-ignore-eos`, `--context-length`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_args: Vec<String>,
}

/// (agentic block, search-space row, conc) → (arm, point).
pub type PointMap = BTreeMap<(usize, usize, u32), (usize, usize)>;

/// Parallel layout read from a resolved SGLang command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgTopology {
    pub tp: u32,
    pub ep: u32,
    pub dp_attn: bool,
}

impl Recipe {
    pub fn load(file: &Path) -> Result<Recipe, Problems> {
        let doc = yaml::load(file)?;
        Self::from_doc(doc)
    }

    pub fn from_str(file: &Path, text: &str) -> Result<Recipe, Problems> {
        Self::from_doc(yaml::parse(file, text)?)
    }

    fn from_doc(doc: Doc) -> Result<Recipe, Problems> {
        let mut c = Checker::new(&doc);
        let root = YPath::root();
        let mut r = Recipe {
            file: doc.file.clone(),
            config_key: String::new(),
            image: None,
            worker: Process::default(),
            harness_args: Vec::new(),
            client_args: Vec::new(),
            simulated_acceptance: None,
            arms: Vec::new(),
            doc: Doc { file: doc.file.clone(), value: Value::Null, loc: Default::default() },
        };
        if let Some(m) = c.mapping(&doc.value, &root, "a serving recipe") {
            c.known_keys(m, &root, &["config-key", "image", "worker", "client-args", "simulated-acceptance", "arms"], "a serving recipe");
            r.client_args = c.str_list(m, &root, "client-args");
            r.config_key = c.req_str(m, &root, "config-key").unwrap_or_default();
            r.image = c.opt_str(m, &root, "image");
            match m.get("worker") {
                None => c.err(&root.key("worker"), "missing required field `worker`", "add `worker:` with `command`, `args` and `env`"),
                Some(w) => {
                    let wp = root.key("worker");
                    if let Some(wm) = c.mapping(w, &wp, "worker") {
                        c.known_keys(wm, &wp, &["command", "args", "env", "harness-args"], "worker");
                        r.worker = process(&mut c, wm, &wp, true);
                        r.harness_args = c.str_list(wm, &wp, "harness-args");
                    }
                }
            }
            if let Some(sa) = m.get("simulated-acceptance") {
                let sp = root.key("simulated-acceptance");
                if let Some(sm) = c.mapping(sa, &sp, "simulated-acceptance") {
                    c.known_keys(sm, &sp, &["thinking-mode"], "simulated-acceptance");
                    r.simulated_acceptance = Some(SimulatedAcceptance { thinking_mode: c.opt_str(sm, &sp, "thinking-mode") });
                }
            }
            let ap = root.key("arms");
            match m.get("arms") {
                None => c.err(&ap, "missing required field `arms`", "add `arms:` with at least one arm"),
                Some(a) => {
                    if let Some(seq) = c.sequence(a, &ap, "arms") {
                        for (i, av) in seq.iter().enumerate() {
                            if let Some(arm) = parse_arm(&mut c, av, &ap.index(i)) {
                                r.arms.push(arm);
                            }
                        }
                    }
                }
            }
            let mut names = BTreeMap::new();
            for a in &r.arms {
                if let Some(prev) = names.insert(a.name.clone(), a.path.clone()) {
                    c.err(
                        &a.path.key("name"),
                        format!("arm name `{}` is used twice (also at {prev})", a.name),
                        "give each arm a distinct name",
                    );
                }
                let mut concs = BTreeMap::new();
                for p in &a.points {
                    if concs.insert(p.conc, ()).is_some() {
                        c.err(
                            &p.path.key("conc"),
                            format!("arm `{}` lists concurrency {} twice", a.name, p.conc),
                            "list each concurrency once per arm",
                        );
                    }
                }
            }
        }
        let problems = std::mem::take(&mut c.problems);
        r.doc = doc;
        problems.into_result(r)
    }

    fn problem(&self, path: &YPath, msg: impl Into<String>, fix: impl Into<String>) -> Problem {
        self.doc.problem(path, msg, fix)
    }

    /// The line of a YAML path of the recipe (or of its nearest located ancestor).
    pub fn line(&self, path: &YPath) -> Option<usize> {
        self.doc.loc.line(path)
    }

    /// Where a point's environment variable is set: the point's `env`, else its arm's, else the
    /// worker's (the layer it inherits from); `None` when no layer sets it.
    pub fn env_path(&self, arm: usize, point: usize, key: &str) -> Option<YPath> {
        let a = &self.arms[arm];
        let p = &a.points[point];
        if p.env.contains_key(key) {
            Some(p.path.key("env").key(key))
        } else if a.env.contains_key(key) {
            Some(a.path.key("env").key(key))
        } else {
            self.worker.env.contains_key(key).then(|| YPath::root().key("worker").key("env").key(key))
        }
    }

    /// The resolved launch of one point: base, arm and point flags merged (a later value of a
    /// flag replaces the earlier one in place), environment layered the same way, plus the
    /// simulated-acceptance settings at the golden AL.
    pub fn resolve(&self, arm: usize, point: usize, model_prefix: &str, golden: Option<&GoldenAl>) -> Result<Launch, Problems> {
        let a = &self.arms[arm];
        let p = &a.points[point];
        let mut args = Vec::new();
        merge_args(&mut args, &self.worker.args);
        merge_args(&mut args, &a.args);
        merge_args(&mut args, &p.args);
        merge_args(&mut args, &self.harness_args);
        let mut env = self.worker.env.clone();
        env.extend(a.env.clone());
        env.extend(p.env.clone());

        let mut golden_al = None;
        let explicit = env.get("SGLANG_SIMULATE_ACC_LEN").cloned();
        if self.simulated_acceptance.is_some() || explicit.is_some() {
            let g = self.golden_for(&args, &env, model_prefix, golden, &p.path)?;
            if let Some(x) = &explicit {
                let env_path = self.env_path(arm, point, "SGLANG_SIMULATE_ACC_LEN").unwrap_or_else(YPath::root);
                golden_al::check_explicit(&self.file, self.doc.loc.line(&env_path), &env_path.to_string(), x, &g).map_err(Problems::one)?;
            }
            if self.simulated_acceptance.is_some() {
                for (k, v) in golden_al::render_sglang(g.al) {
                    env.entry(k).or_insert(v);
                }
            }
            golden_al = Some(g.al);
        }

        let mut worker_argv = self.worker.command.clone();
        worker_argv.extend(args);
        let (router_argv, router_env) = match &a.router {
            Some(r) => {
                let mut v = r.command.clone();
                v.extend(r.args.iter().cloned());
                (Some(v), r.env.clone())
            }
            None => (None, BTreeMap::new()),
        };
        let client_args = self.client_args.clone();
        Ok(Launch { arm: a.name.clone(), conc: p.conc, worker_argv, env, router_argv, router_env, golden_al, client_args })
    }

    fn golden_for(
        &self,
        args: &[String],
        env: &BTreeMap<String, String>,
        prefix: &str,
        golden: Option<&GoldenAl>,
        at: &YPath,
    ) -> Result<Golden, Problems> {
        let Some(g) = golden else {
            return Err(Problems::one(self.problem(
                at,
                "simulated acceptance needs the golden AL curves, but none were loaded",
                "add the curve to golden_al/ (or pass --golden-al DIR)",
            )));
        };
        let algo = flag_value(args, &["--speculative-algorithm"]).map(|s| s.to_ascii_uppercase());
        let k_text = env.get("NUM_SPEC_TOKENS").cloned().or_else(|| match algo.as_deref() {
            Some("DSPARK") => flag_value(args, &["--speculative-dspark-block-size"]).map(str::to_string),
            _ => flag_value(args, &["--speculative-num-steps"]).map(str::to_string),
        });
        let Some(k_text) = k_text else {
            return Err(Problems::one(self.problem(
                at,
                "simulated acceptance is on but the number of speculative tokens is unknown",
                "set --speculative-num-steps (or --speculative-dspark-block-size for DSPARK), or NUM_SPEC_TOKENS",
            )));
        };
        let k: u32 = k_text.parse().map_err(|_| {
            Problems::one(self.problem(at, format!("speculative token count `{k_text}` is not an integer"), "use an integer such as 3"))
        })?;
        let method = match algo.as_deref() {
            Some("DSPARK") => Some("dspark"),
            Some("EAGLE3") => Some("eagle3"),
            Some("EAGLE") | Some("NEXTN") => Some("mtp"),
            _ => None,
        };
        let mode = self.simulated_acceptance.as_ref().and_then(|s| s.thinking_mode.clone()).or_else(|| env.get("THINKING_MODE").cloned());
        g.lookup(prefix, mode.as_deref(), k, method)
            .map_err(|e| Problems::one(self.problem(at, e, "add the golden curve to golden_al/ or use a K that has a golden value")))
    }

    /// Matches every point to a master search-space row (by parallel layout and concurrency) and
    /// checks that every master concurrency has a point. Returns (block, row, conc) → (arm, point).
    pub fn match_master(&self, e: &Entry) -> Result<PointMap, Problems> {
        let mut problems = Problems::default();
        let root = YPath::root();
        if self.config_key != e.key {
            problems.push(self.problem(
                &root.key("config-key"),
                format!("recipe is for `{}` but was matched to `{}`", self.config_key, e.key),
                "name the recipe file after its config key",
            ));
        }
        if let Some(img) = &self.image
            && img != &e.image
        {
            problems.push(self.problem(
                &root.key("image"),
                format!("recipe image `{img}` differs from the master config's `{}`", e.image),
                "pin the same image (tag and digest) in both files",
            ));
        }
        let rows: Vec<(usize, &SearchRow)> = e.agentic.iter().flat_map(|b| b.rows.iter().map(move |r| (b.index, r))).collect();
        let mut out = BTreeMap::new();
        for (ai, a) in self.arms.iter().enumerate() {
            for (pi, p) in a.points.iter().enumerate() {
                let mut args = Vec::new();
                merge_args(&mut args, &self.worker.args);
                merge_args(&mut args, &a.args);
                merge_args(&mut args, &p.args);
                let topo = arg_topology(&args);
                let hits: Vec<&(usize, &SearchRow)> = rows
                    .iter()
                    .filter(|(_, r)| match r.topology {
                        Topology::Single { tp, ep, dp_attn, .. } => tp == topo.tp && ep == topo.ep && dp_attn == topo.dp_attn,
                        Topology::Multi { .. } => false,
                    })
                    .filter(|(_, r)| expand_concs(&r.conc).contains(&p.conc))
                    .collect();
                match hits.as_slice() {
                    [(b, r)] => {
                        if let Some(g) = a.gpus
                            && g != r.gpus()
                        {
                            problems.push(self.problem(&a.path.key("gpus"), format!("arm `{}` says {g} GPUs but its master row uses {}", a.name, r.gpus()), "make `gpus` equal tp × pp × pcp-size of the row"));
                        }
                        if out.insert((*b, r.index, p.conc), (ai, pi)).is_some() {
                            problems.push(self.problem(&p.path, format!("two recipe points map to master row {} concurrency {}", r.index, p.conc), "keep one point per master concurrency"));
                        }
                    }
                    [] => problems.push(self.problem(
                        &p.path,
                        format!(
                            "no master search-space row of `{}` has tp {} ep {} dp-attn {} with concurrency {}",
                            e.key, topo.tp, topo.ep, topo.dp_attn, p.conc
                        ),
                        "add the concurrency to the matching master row, or fix the arm's --tensor-parallel-size / --expert-parallel-size / --enable-dp-attention",
                    )),
                    _ => problems.push(self.problem(&p.path, format!("point matches {} master rows", hits.len()), "make master rows differ in topology or concurrency")),
                }
            }
        }
        for (b, r) in &rows {
            for c in expand_concs(&r.conc) {
                if !out.contains_key(&(*b, r.index, c)) {
                    problems.push(Problem::new(
                        &e.file,
                        e.line,
                        format!("{}.scenarios.agentic-coding[{b}].search-space[{}]", e.key, r.index),
                        format!("concurrency {c} has no point in the serving recipe {}", self.file.display()),
                        "add a point with this `conc` to the matching arm of the recipe",
                    ));
                }
            }
        }
        problems.into_result(out)
    }
}

fn process(c: &mut Checker, m: &Mapping, p: &YPath, command_required: bool) -> Process {
    let command = match m.get("command") {
        None => {
            if command_required {
                c.err(
                    &p.key("command"),
                    "missing required field `command`",
                    "add `command: python3 -m sglang.launch_server` (or a list of words)",
                );
            }
            Vec::new()
        }
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(_) => c.str_list(m, p, "command"),
    };
    Process { command, args: args_list(c, m, p, "args"), env: env_map(c, m, p) }
}

fn args_list(c: &mut Checker, m: &Mapping, p: &YPath, key: &str) -> Vec<String> {
    let Some(v) = m.get(key) else { return Vec::new() };
    let kp = p.key(key);
    let Some(seq) = c.sequence(v, &kp, key) else { return Vec::new() };
    let mut out = Vec::new();
    for (i, x) in seq.iter().enumerate() {
        match x {
            Value::String(s) => out.push(s.clone()),
            Value::Number(n) => out.push(n.to_string()),
            other => c.err(&kp.index(i), format!("argument must be a string, found {}", yaml::type_name(other)), "quote the argument"),
        }
    }
    out
}

fn env_map(c: &mut Checker, m: &Mapping, p: &YPath) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(v) = m.get("env") else { return out };
    let ep = p.key("env");
    let Some(em) = c.mapping(v, &ep, "env") else { return out };
    for (k, v) in em {
        let key = k.as_str().unwrap_or_default().to_string();
        match v {
            Value::String(s) => {
                out.insert(key, s.clone());
            }
            other => c.err(
                &ep.key(&key),
                format!("environment value must be a string, found {}", yaml::type_name(other)),
                format!("quote it: `{}: \"{}\"`", crate::problem::excerpt(&key), super::schema::fmt_value(other)),
            ),
        }
    }
    out
}

fn parse_arm(c: &mut Checker, v: &Value, p: &YPath) -> Option<Arm> {
    let m = c.mapping(v, p, "an arm")?;
    c.known_keys(m, p, &["name", "gpus", "args", "env", "router", "points"], "an arm");
    let name = c.req_str(m, p, "name");
    let gpus = m.get("gpus").and_then(|g| c.pos_int(g, &p.key("gpus"), "gpus"));
    let args = args_list(c, m, p, "args");
    let env = env_map(c, m, p);
    let router = m.get("router").and_then(|r| {
        let rp = p.key("router");
        let rm = c.mapping(r, &rp, "router")?;
        c.known_keys(rm, &rp, &["command", "args", "env"], "router");
        Some(process(c, rm, &rp, true))
    });
    let pp = p.key("points");
    let mut points = Vec::new();
    match m.get("points") {
        None => c.err(&pp, "missing required field `points`", "add `points:` with one `- conc: N` per concurrency"),
        Some(pv) => {
            if let Some(seq) = c.sequence(pv, &pp, "points") {
                for (i, x) in seq.iter().enumerate() {
                    let xp = pp.index(i);
                    let Some(xm) = c.mapping(x, &xp, "a point") else { continue };
                    c.known_keys(xm, &xp, &["conc", "args", "env"], "a point");
                    let conc = c.req_pos_int(xm, &xp, "conc");
                    let args = args_list(c, xm, &xp, "args");
                    let env = env_map(c, xm, &xp);
                    if let Some(conc) = conc {
                        points.push(RecipePoint { conc, args, env, path: xp });
                    }
                }
            }
        }
    }
    Some(Arm { name: name?, gpus, args, env, router, points, path: p.clone() })
}

/// Splits argv into (flag, value) items: a `--flag` followed by a word that is not a flag takes
/// it as its value; `--flag=value` is one item.
pub fn flag_items(args: &[String]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some((f, v)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            out.push((f.to_string(), Some(v.to_string())));
            i += 1;
        } else if a.starts_with("--") && args.get(i + 1).is_some_and(|n| !n.starts_with("--")) {
            out.push((a.clone(), Some(args[i + 1].clone())));
            i += 2;
        } else {
            out.push((a.clone(), None));
            i += 1;
        }
    }
    out
}

/// Appends `more` to `base`, replacing in place the value of a flag already present.
pub fn merge_args(base: &mut Vec<String>, more: &[String]) {
    let mut items = flag_items(base);
    for (f, v) in flag_items(more) {
        match items.iter_mut().find(|(bf, _)| *bf == f && f.starts_with("--")) {
            Some(slot) => slot.1 = v,
            None => items.push((f, v)),
        }
    }
    base.clear();
    for (f, v) in items {
        base.push(f);
        base.extend(v);
    }
}

/// The value of the first of `names` present in `args`.
pub fn flag_value<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        for n in names {
            if a == *n {
                return args.get(i + 1).map(|s| s.as_str());
            }
            if let Some(v) = a.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        i += 1;
    }
    None
}

/// Reads tp / ep / DP attention from SGLang flags (both spellings).
pub fn arg_topology(args: &[String]) -> ArgTopology {
    let num = |names: &[&str]| flag_value(args, names).and_then(|v| v.parse::<u32>().ok());
    let tp = num(&["--tensor-parallel-size", "--tp-size", "--tp"]).unwrap_or(1);
    let ep = num(&["--expert-parallel-size", "--ep-size", "--ep"]).unwrap_or(1);
    let dp_attn = args.iter().any(|a| a == "--enable-dp-attention") || num(&["--attn-dp-size"]).is_some_and(|n| n > 1);
    ArgTopology { tp, ep, dp_attn }
}

/// Concurrency values of a row: a list verbatim, or a ×2 ladder clamped to the end.
pub fn expand_concs(c: &Conc) -> Vec<u32> {
    ladder(c, 2)
}

pub fn ladder(c: &Conc, step: u32) -> Vec<u32> {
    match c {
        Conc::List(v) => v.clone(),
        Conc::Range { start, end } => {
            let mut out = vec![*start];
            let mut x = *start;
            while x < *end {
                x = x.saturating_mul(step).min(*end);
                out.push(x);
            }
            out
        }
    }
}

/// Shell-style quoting for display only (launches never go through a shell): pasting it into a
/// shell gives back the same words.
pub fn shell_quote(words: &[String]) -> String {
    // Only a NUL byte cannot be quoted; argv strings never hold one.
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn merge_replaces_flag_values_in_place() {
        let mut a = s(&["--tp", "4", "--trust-remote-code", "--mem-fraction-static", "0.8"]);
        merge_args(&mut a, &s(&["--mem-fraction-static", "0.85", "--enable-dp-attention", "--x=1"]));
        assert_eq!(a, s(&["--tp", "4", "--trust-remote-code", "--mem-fraction-static", "0.85", "--enable-dp-attention", "--x", "1"]));
    }

    #[test]
    fn ladder_doubles_and_clamps() {
        assert_eq!(expand_concs(&Conc::Range { start: 1, end: 6 }), vec![1, 2, 4, 6]);
        assert_eq!(expand_concs(&Conc::Range { start: 4, end: 4 }), vec![4]);
        assert_eq!(expand_concs(&Conc::List(vec![8, 4, 8])), vec![8, 4, 8]);
    }

    #[test]
    fn topology_from_flags_both_spellings() {
        assert_eq!(
            arg_topology(&s(&["--tp-size", "8", "--dp-size", "8", "--enable-dp-attention", "--ep-size", "8"])),
            ArgTopology { tp: 8, ep: 8, dp_attn: true }
        );
        assert_eq!(arg_topology(&s(&["--tensor-parallel-size", "4"])), ArgTopology { tp: 4, ep: 1, dp_attn: false });
    }

    #[test]
    fn quoting_is_display_safe() {
        let words = s(&["a", "b c", "it's", "$HOME", "--x=\"q\""]);
        let quoted = shell_quote(&words);
        assert!(quoted.starts_with("a "), "{quoted}");
        assert_eq!(shlex::split(&quoted).unwrap(), words);
    }
}
