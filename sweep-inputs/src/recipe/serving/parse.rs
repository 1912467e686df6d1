//! Reading a serving recipe document: its sections, arms and points, each problem at its YAML
//! path with the fix.

use super::{Arm, Process, Recipe, RecipePoint, SimulatedAcceptance};
use crate::problem::Problems;
use crate::recipe::schema::Checker;
use crate::recipe::seq_len::SeqLen;
use crate::yaml::{self, Doc, YPath};
use serde_yaml_ng::{Mapping, Value};
use std::collections::BTreeMap;

const RECIPE_KEYS: &[&str] = &["config-key", "image", "worker", "client-args", "simulated-acceptance", "random-range-ratio", "arms"];
const ARM_KEYS: &[&str] = &["name", "gpus", "seq-len", "args", "env", "router", "points"];
const POINT_KEYS: &[&str] = &["conc", "seq-len", "args", "env"];

pub(super) fn from_doc(doc: Doc) -> Result<Recipe, Problems> {
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
        random_range_ratio: None,
        arms: Vec::new(),
        doc: Doc { file: doc.file.clone(), value: Value::Null, loc: Default::default() },
    };
    if let Some(m) = c.mapping(&doc.value, &root, "a serving recipe") {
        c.known_keys(m, &root, RECIPE_KEYS, "a serving recipe");
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
        r.random_range_ratio = range_ratio(&mut c, m, &root);
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
        unique_names_and_points(&mut c, &r.arms);
    }
    let problems = std::mem::take(&mut c.problems);
    r.doc = doc;
    problems.into_result(r)
}

/// `random-range-ratio`: the lower bound of a fixed-seq-len prompt's lengths as a fraction of
/// ISL and OSL (InferenceX's `--random-range-ratio`), in (0, 1].
fn range_ratio(c: &mut Checker, m: &Mapping, root: &YPath) -> Option<f64> {
    let r = c.opt_f64(m, root, "random-range-ratio")?;
    if r > 0.0 && r <= 1.0 {
        return Some(r);
    }
    c.err(
        &root.key("random-range-ratio"),
        format!("`random-range-ratio` must be in (0, 1], found {r}"),
        "use a fraction such as 0.8 (lengths drawn in [0.8 × ISL, ISL]), or remove it for InferenceX's 0.8",
    );
    None
}

/// Arm names are unique; an arm lists each (concurrency, sequence length) once.
fn unique_names_and_points(c: &mut Checker, arms: &[Arm]) {
    let mut names = BTreeMap::new();
    for a in arms {
        if let Some(prev) = names.insert(a.name.clone(), a.path.clone()) {
            c.err(&a.path.key("name"), format!("arm name `{}` is used twice (also at {prev})", a.name), "give each arm a distinct name");
        }
        let mut seen = BTreeMap::new();
        for p in &a.points {
            let seq = p.seq_len.or(a.seq_len);
            if seen.insert((p.conc, seq), ()).is_some() {
                let what = seq.map(|s| format!(" for seq-len {s}")).unwrap_or_default();
                c.err(
                    &p.path.key("conc"),
                    format!("arm `{}` lists concurrency {}{what} twice", a.name, p.conc),
                    "list each concurrency once per arm (points of different `seq-len` may share one)",
                );
            }
        }
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
                format!("quote it: `{}: \"{}\"`", crate::problem::excerpt(&key), crate::recipe::schema::fmt_value(other)),
            ),
        }
    }
    out
}

/// An optional `seq-len` selector (`1k1k`, `8k1k`, `<isl>_<osl>`).
fn seq_len(c: &mut Checker, m: &Mapping, p: &YPath) -> Option<SeqLen> {
    let text = match m.get("seq-len")? {
        Value::Number(n) => n.to_string(),
        v => c.str_value(v, &p.key("seq-len"), "seq-len")?,
    };
    let parsed = SeqLen::parse(&text);
    if parsed.is_none() {
        c.err(
            &p.key("seq-len"),
            format!("`seq-len` `{}` is not a sequence length", crate::problem::excerpt(&text)),
            "write it as InferenceX names it: `1k1k`, `8k1k`, or `<isl>_<osl>` such as `1024_8192`",
        );
    }
    parsed
}

fn parse_arm(c: &mut Checker, v: &Value, p: &YPath) -> Option<Arm> {
    let m = c.mapping(v, p, "an arm")?;
    c.known_keys(m, p, ARM_KEYS, "an arm");
    let name = c.req_str(m, p, "name");
    let gpus = m.get("gpus").and_then(|g| c.pos_int(g, &p.key("gpus"), "gpus"));
    let seq = seq_len(c, m, p);
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
                    c.known_keys(xm, &xp, POINT_KEYS, "a point");
                    let conc = c.req_pos_int(xm, &xp, "conc");
                    let seq_len = seq_len(c, xm, &xp);
                    let args = args_list(c, xm, &xp, "args");
                    let env = env_map(c, xm, &xp);
                    if let Some(conc) = conc {
                        points.push(RecipePoint { conc, seq_len, args, env, path: xp });
                    }
                }
            }
        }
    }
    Some(Arm { name: name?, gpus, seq_len: seq, args, env, router, points, path: p.clone() })
}
