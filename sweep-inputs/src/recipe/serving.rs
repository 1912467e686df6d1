//! Serving recipes: the exact server command line and environment of every point of a config,
//! written as a base plus per-arm and per-point overrides so a reader sees at a glance what
//! differs between points. See `docs/formats.md` for the format.

mod flags;
mod matching;
mod parse;

use super::seq_len::SeqLen;
use crate::golden_al::{self, Golden, GoldenAl};
use crate::problem::{Problem, Problems};
use crate::yaml::{self, Doc, YPath};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use flags::{arg_topology, expand_concs, flag_items, flag_value, ladder, merge_args, shell_quote};
pub use matching::{Block, PointMap};

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
    /// `seq-len`: the fixed-seq-len rows this point serves (it replaces its arm's); none: all.
    pub seq_len: Option<SeqLen>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub path: YPath,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Arm {
    pub name: String,
    pub gpus: Option<u32>,
    /// `seq-len`: the fixed-seq-len rows the arm's points serve; none: every row of its layout.
    pub seq_len: Option<SeqLen>,
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
    /// `random-range-ratio`: fixed-seq-len prompts' lengths are drawn in [ratio × ISL, ISL] and
    /// [ratio × OSL, OSL]; none: InferenceX's 0.8 (`plan::matrix::RANDOM_RANGE_RATIO`).
    pub random_range_ratio: Option<f64>,
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
        parse::from_doc(doc)
    }

    pub fn from_str(file: &Path, text: &str) -> Result<Recipe, Problems> {
        parse::from_doc(yaml::parse(file, text)?)
    }

    fn problem(&self, path: &YPath, msg: impl Into<String>, fix: impl Into<String>) -> Problem {
        self.doc.problem(path, msg, fix)
    }

    /// The line of a YAML path of the recipe (or of its nearest located ancestor).
    pub fn line(&self, path: &YPath) -> Option<usize> {
        self.doc.loc.line(path)
    }

    /// The sequence length a point serves: its own `seq-len`, else its arm's; `None`: every one.
    pub fn seq_len(&self, arm: usize, point: usize) -> Option<SeqLen> {
        let a = &self.arms[arm];
        a.points[point].seq_len.or(a.seq_len)
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
        g.lookup(prefix, mode.as_deref(), k, method).map_err(|e| {
            Problems::one(self.problem(at, e.to_string(), "add the golden curve to golden_al/ or use a K that has a golden value"))
        })
    }
}

#[cfg(test)]
mod tests;
