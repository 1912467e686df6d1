//! The InferenceX master-config schema: loading, defaults and every load-time invariant
//! (spec `inferencex.md` §2). Unknown keys, duplicate keys across files and `*` in keys are errors.

mod parse;

use crate::problem::{Problem, Problems};
use crate::yaml;
use parse::parse_doc;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A `{name, version}` component (router, KV offload backend).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Component {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Concurrency: an inclusive range (doubling ladder) or an explicit list.
#[derive(Clone, Debug, PartialEq)]
pub enum Conc {
    Range { start: u32, end: u32 },
    List(Vec<u32>),
}

/// A multi-node worker block (`prefill` / `decode`).
#[derive(Clone, Debug, PartialEq)]
pub struct Worker {
    pub num_worker: u32,
    pub tp: u32,
    pub ep: u32,
    pub dp_attn: bool,
    pub pp: u32,
    pub dcp: u32,
    pub pcp: u32,
    pub hardware: Option<String>,
    pub additional_settings: Vec<String>,
}

impl Worker {
    /// The worker part of multi-node exp-names: `<nw>x<tp>[ep<ep>][dpa]`, e.g. `2x16ep32dpa`.
    pub fn label(&self) -> String {
        let ep = if self.ep > 1 { format!("ep{}", self.ep) } else { String::new() };
        format!("{}x{}{ep}{}", self.num_worker, self.tp, if self.dp_attn { "dpa" } else { "" })
    }

    /// GPUs of the role: `num-worker × tp × pp × pcp-size`.
    pub fn gpus(&self) -> u32 {
        self.num_worker * self.tp * self.pp * self.pcp
    }
}

/// Topology of a search-space row.
#[derive(Clone, Debug, PartialEq)]
pub enum Topology {
    Single { tp: u32, pp: u32, dcp: u32, pcp: u32, ep: u32, dp_attn: bool },
    Multi { prefill: Worker, decode: Worker },
}

/// One search-space row after defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchRow {
    pub index: usize,
    pub topology: Topology,
    pub spec_decoding: String,
    pub router: Option<Component>,
    pub kv_p2p_transfer: Option<String>,
    pub conc: Conc,
    /// Agentic only: `none` or `dram`.
    pub kv_offloading: Option<String>,
    pub kv_offload_backend: Option<Component>,
}

impl SearchRow {
    /// GPUs per point: single node `tp × pp × pcp`; multi node prefill + decode GPUs.
    pub fn gpus(&self) -> u32 {
        match &self.topology {
            Topology::Single { tp, pp, pcp, .. } => tp * pp * pcp,
            Topology::Multi { prefill, decode } => prefill.gpus() + decode.gpus(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct FixedBlock {
    pub index: usize,
    pub isl: u32,
    pub osl: u32,
    pub rows: Vec<SearchRow>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AgenticBlock {
    pub index: usize,
    pub dram_utilization: Option<f64>,
    pub rows: Vec<SearchRow>,
}

/// One master-config entry (a config key).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub key: String,
    pub file: PathBuf,
    pub line: Option<usize>,
    pub image: String,
    pub model: String,
    pub model_prefix: String,
    pub runner: String,
    pub precision: String,
    pub framework: String,
    pub multinode: bool,
    pub disagg: bool,
    pub router: Option<Component>,
    pub kv_p2p_transfer: Option<String>,
    pub fixed: Vec<FixedBlock>,
    pub agentic: Vec<AgenticBlock>,
    pub has_fixed: bool,
    pub has_agentic: bool,
}

/// All loaded master entries, in load order (files in the given order, keys in file order).
#[derive(Clone, Debug, Default)]
pub struct Master {
    pub entries: Vec<Entry>,
    index: HashMap<String, usize>,
}

impl Master {
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.index.get(key).map(|&i| &self.entries[i])
    }
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.key.as_str())
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Loads master files in order; keys of all files are merged (a key in two files is an error).
    pub fn load(files: &[PathBuf]) -> Result<Master, Problems> {
        let mut problems = Problems::default();
        let docs: Vec<yaml::Doc> = files.iter().filter_map(|f| problems.take(yaml::load(f))).collect();
        if let Some(m) = problems.take(Self::from_docs(&docs)) {
            return problems.into_result(m);
        }
        Err(problems)
    }

    /// Merges parsed master documents in order (a key in two documents is an error): the files of
    /// a working tree, or of a git revision (`sweep verify`).
    pub fn from_docs(docs: &[yaml::Doc]) -> Result<Master, Problems> {
        let mut problems = Problems::default();
        let mut m = Master::default();
        let mut origin: HashMap<String, (PathBuf, Option<usize>)> = HashMap::new();
        for doc in docs {
            let f = &doc.file;
            let entries = match parse_doc(doc) {
                Ok(e) => e,
                Err(p) => {
                    problems.extend(p);
                    continue;
                }
            };
            for e in entries {
                if let Some((of, ol)) = origin.get(&e.key) {
                    problems.push(Problem::new(
                        f,
                        e.line,
                        &e.key,
                        format!(
                            "config key `{}` is already defined in {}{}",
                            e.key,
                            of.display(),
                            ol.map(|l| format!(":{l}")).unwrap_or_default()
                        ),
                        "config keys must be unique across all master files: rename or remove one",
                    ));
                    continue;
                }
                origin.insert(e.key.clone(), (f.clone(), e.line));
                m.index.insert(e.key.clone(), m.entries.len());
                m.entries.push(e);
            }
        }
        problems.into_result(m)
    }

    /// Parses one master document from text (tests, embedded configs).
    pub fn from_str(file: &Path, text: &str) -> Result<Master, Problems> {
        let doc = yaml::parse(file, text)?;
        let entries = parse_doc(&doc)?;
        let mut m = Master::default();
        for e in entries {
            m.index.insert(e.key.clone(), m.entries.len());
            m.entries.push(e);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests;
