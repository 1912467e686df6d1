//! `runners.yaml`: scheduling labels → concrete runner names, and per-label hardware used for the
//! agentic DRAM budget (spec `inferencex.md` §2.7).

use super::schema::Checker;
use crate::problem::Problems;
use crate::yaml::{self, YPath};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, PartialEq)]
pub struct Hardware {
    pub available_cpu_dram_mib: u64,
    pub gpus_per_node: u32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Runners {
    pub labels: BTreeMap<String, Vec<String>>,
    pub hardware: BTreeMap<String, Hardware>,
}

impl Runners {
    pub fn load(file: &Path) -> Result<Runners, Problems> {
        Self::from_doc(&yaml::load(file)?)
    }

    /// Runners from a parsed `runners.yaml`.
    pub fn from_doc(doc: &yaml::Doc) -> Result<Runners, Problems> {
        let mut c = Checker::new(doc);
        let root = YPath::root();
        let mut out = Runners::default();
        if let Some(top) = c.mapping(&doc.value, &root, "runners.yaml") {
            c.known_keys(top, &root, &["labels", "hardware"], "runners.yaml");
            if let Some(l) = top.get("labels") {
                let lp = root.key("labels");
                if let Some(lm) = c.mapping(l, &lp, "labels") {
                    for (k, v) in lm {
                        let key = k.as_str().unwrap_or_default().to_string();
                        let kp = lp.key(&key);
                        let mut names = Vec::new();
                        if let Some(seq) = c.sequence(v, &kp, "a runner label") {
                            if seq.is_empty() {
                                c.err(&kp, format!("runner label `{key}` has no runners"), "list at least one concrete runner name");
                            }
                            for (i, n) in seq.iter().enumerate() {
                                if let Some(s) = c.str_value(n, &kp.index(i), "runner name") {
                                    names.push(s);
                                }
                            }
                        }
                        out.labels.insert(key, names);
                    }
                }
            }
            if let Some(h) = top.get("hardware") {
                let hp = root.key("hardware");
                if let Some(hm) = c.mapping(h, &hp, "hardware") {
                    for (k, v) in hm {
                        let key = k.as_str().unwrap_or_default().to_string();
                        let kp = hp.key(&key);
                        if let Some(m) = c.mapping(v, &kp, "a hardware entry") {
                            c.known_keys(m, &kp, &["available-cpu-dram-mib", "gpus-per-node"], "a hardware entry");
                            let dram = c.req_pos_int(m, &kp, "available-cpu-dram-mib");
                            let gpn = c.req_pos_int(m, &kp, "gpus-per-node");
                            if let (Some(d), Some(g)) = (dram, gpn) {
                                out.hardware.insert(key, Hardware { available_cpu_dram_mib: d as u64, gpus_per_node: g });
                            }
                        }
                    }
                }
            }
        }
        c.problems.into_result(out)
    }
}
