//! Published corpus statistics (`*.stats.yaml`, e.g. the dataset card of
//! `semianalysisai/cc-traces-weka-062126`): typed, every row optional. The `--like` generator
//! targets the rows a file lists and `sweep trace stats --against` compares exactly those rows.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::problem::{Problem, Problems};
use crate::yaml::{self, Seg, YPath};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedStats {
    #[serde(default)]
    pub corpus: Option<String>,
    #[serde(default)]
    pub filters: Filters,
    #[serde(default)]
    pub counts: Counts,
    #[serde(default)]
    pub distributions: Distributions,
    /// Counts of a derived variant (e.g. the 256K-capped build): informative, not targeted.
    #[serde(default)]
    pub variant_256k: Option<Counts>,
    /// How a benchmark replays the corpus: informative, not targeted.
    #[serde(default)]
    pub replay_settings: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filters {
    pub trace_version: Option<u32>,
    pub min_requests_per_session: Option<u64>,
    pub max_peak_concurrent_subagent_groups: Option<u64>,
    pub max_request_input_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    pub traces: Option<u64>,
    pub main_turns: Option<u64>,
    pub subagent_groups: Option<u64>,
    pub subagent_inner_requests: Option<u64>,
    pub total_requests: Option<u64>,
    pub total_input_tokens: Option<u64>,
    pub total_output_tokens: Option<u64>,
}

/// Any of p50 / p90 / p99 / mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pcts {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub mean: Option<f64>,
}

impl Pcts {
    /// The listed percentiles as `(p, value)` knots.
    pub fn knots(&self) -> Vec<(f64, f64)> {
        [(0.5, self.p50), (0.9, self.p90), (0.99, self.p99)].into_iter().filter_map(|(p, v)| v.map(|v| (p, v))).collect()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distributions {
    pub main_isl: Option<Pcts>,
    pub subagent_isl: Option<Pcts>,
    pub main_osl: Option<Pcts>,
    pub new_prefill_tokens_per_turn: Option<Pcts>,
    pub ideal_prefix_hit_rate: Option<f64>,
    pub main_turns_per_session: Option<Pcts>,
    pub inter_turn_gap_s: Option<Pcts>,
    pub turns_with_gap_over_300s: Option<f64>,
    pub turns_with_gap_over_1800s: Option<f64>,
    pub session_waiting_time_fraction: Option<f64>,
    pub time_averaged_context_tokens_mean: Option<f64>,
    pub sessions_with_subagents: Option<f64>,
    pub per_session_with_subagents: Option<PerSession>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerSession {
    pub groups_p50: Option<f64>,
    pub inner_requests_per_group_p50: Option<f64>,
    pub peak_concurrent_groups_p50: Option<f64>,
}

/// How a measured value is judged against a published one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Tolerance {
    /// |measured / published − 1| ≤ this.
    Relative(f64),
    /// |measured − published| ≤ this (for rates, in absolute points).
    Absolute(f64),
}

/// One published row: its key (the YAML path), value and tolerance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub key: String,
    pub published: f64,
    pub tolerance: Tolerance,
}

/// Published corpus statistics shipped with sweep: (corpus name, stats file). The DeepSeek-V4
/// family's agentic points replay `cc-traces-weka-062126` (its dataset card, Apache-2.0).
pub const EMBEDDED: [(&str, &str); 1] = [("cc-traces-weka-062126", include_str!("../../corpora/cc-traces-weka-062126.stats.yaml"))];

/// Whether statistics for this corpus name ship with sweep.
pub fn is_embedded(name: &str) -> bool {
    EMBEDDED.iter().any(|(n, _)| *n == name)
}

/// The shipped corpus names, for error messages.
pub fn embedded_names() -> String {
    EMBEDDED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// Counts within 2 %, distributions within 10 %, the ideal prefix hit rate within 0.5 points.
pub const COUNT_TOLERANCE: f64 = 0.02;
pub const DISTRIBUTION_TOLERANCE: f64 = 0.10;
pub const HIT_RATE_POINTS: f64 = 0.005;

impl PublishedStats {
    /// Read and validate a stats file; errors name the file, line, field and the fix.
    pub fn load(path: &Path) -> Result<Self, Problems> {
        Self::from_doc(path, yaml::load(path)?)
    }

    /// Parse and validate stats text (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, Problems> {
        Self::from_doc(path, yaml::parse(path, text)?)
    }

    /// The published statistics shipped with sweep, by corpus name (see `sweep-traces/corpora/`).
    pub fn embedded(name: &str) -> Option<Self> {
        let (file, text) = EMBEDDED.iter().find(|(n, _)| *n == name).map(|(n, t)| (format!("sweep-traces/corpora/{n}.stats.yaml"), *t))?;
        Some(Self::parse(Path::new(&file), text).expect("embedded stats file is valid"))
    }

    fn from_doc(path: &Path, doc: yaml::Doc) -> Result<Self, Problems> {
        let stats: PublishedStats = serde_path_to_error::deserialize(doc.value.clone()).map_err(|e| {
            let mut p = YPath::root();
            for seg in e.path().iter() {
                p = match seg {
                    serde_path_to_error::Segment::Map { key } => p.key(key),
                    serde_path_to_error::Segment::Seq { index } => p.index(*index),
                    _ => p,
                };
            }
            let msg = crate::problem::excerpt_quoted(&e.inner().to_string());
            let fix = if msg.contains("unknown field") {
                "remove or rename the field (docs/traces.md lists the rows a stats file may hold)"
            } else {
                "give a number (counts are integers; percentiles, means and fractions may be decimals)"
            };
            Problems::one(doc.problem(&p, msg, fix))
        })?;
        stats.validate(path, &doc)?;
        Ok(stats)
    }

    fn validate(&self, path: &Path, doc: &yaml::Doc) -> Result<(), Problems> {
        let mut problems = Problems::default();
        for row in self.rows() {
            let ypath = YPath(row.key.split('.').map(|k| Seg::Key(k.to_string())).collect());
            let v = row.published;
            let fraction = matches!(row.tolerance, Tolerance::Absolute(_))
                || row.key.ends_with("_fraction")
                || row.key.contains("turns_with_gap_over")
                || row.key.ends_with("sessions_with_subagents");
            if !v.is_finite() || v < 0.0 || (fraction && v > 1.0) {
                problems.push(doc.problem(
                    &ypath,
                    format!("{} is out of range", v),
                    if fraction { "give a fraction between 0 and 1" } else { "give a non-negative number" },
                ));
            }
        }
        let d = &self.distributions;
        for (name, p) in [
            ("main_isl", d.main_isl),
            ("subagent_isl", d.subagent_isl),
            ("main_osl", d.main_osl),
            ("new_prefill_tokens_per_turn", d.new_prefill_tokens_per_turn),
            ("main_turns_per_session", d.main_turns_per_session),
            ("inter_turn_gap_s", d.inter_turn_gap_s),
        ] {
            if let Some(p) = p {
                let k = p.knots();
                if k.windows(2).any(|w| w[1].1 < w[0].1) {
                    let ypath = YPath::root().key("distributions").key(name);
                    problems.push(doc.problem(&ypath, "percentiles decrease (p50 ≤ p90 ≤ p99 is required)", "check the values"));
                }
            }
        }
        if self.counts.traces == Some(0) {
            problems.push(Problem::new(
                path,
                doc.loc.line(&YPath::root().key("counts").key("traces")),
                "counts.traces",
                "is 0",
                "give at least one trace",
            ));
        }
        problems.into_result(())
    }

    /// Every listed row that the generator targets and `--against` compares, in file order.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut push = |key: String, v: Option<f64>, tolerance: Tolerance| {
            if let Some(published) = v {
                rows.push(Row { key, published, tolerance });
            }
        };
        let c = &self.counts;
        for (k, v) in [
            ("traces", c.traces),
            ("main_turns", c.main_turns),
            ("subagent_groups", c.subagent_groups),
            ("subagent_inner_requests", c.subagent_inner_requests),
            ("total_requests", c.total_requests),
            ("total_input_tokens", c.total_input_tokens),
            ("total_output_tokens", c.total_output_tokens),
        ] {
            push(format!("counts.{k}"), v.map(|v| v as f64), Tolerance::Relative(COUNT_TOLERANCE));
        }
        let d = &self.distributions;
        let dist = Tolerance::Relative(DISTRIBUTION_TOLERANCE);
        let pcts = |name: &str, p: Option<Pcts>, push: &mut dyn FnMut(String, Option<f64>, Tolerance)| {
            if let Some(p) = p {
                for (s, v) in [("p50", p.p50), ("mean", p.mean), ("p90", p.p90), ("p99", p.p99)] {
                    push(format!("distributions.{name}.{s}"), v, dist);
                }
            }
        };
        pcts("main_isl", d.main_isl, &mut push);
        pcts("subagent_isl", d.subagent_isl, &mut push);
        pcts("main_osl", d.main_osl, &mut push);
        pcts("new_prefill_tokens_per_turn", d.new_prefill_tokens_per_turn, &mut push);
        push("distributions.ideal_prefix_hit_rate".into(), d.ideal_prefix_hit_rate, Tolerance::Absolute(HIT_RATE_POINTS));
        pcts("main_turns_per_session", d.main_turns_per_session, &mut push);
        pcts("inter_turn_gap_s", d.inter_turn_gap_s, &mut push);
        for (k, v) in [
            ("turns_with_gap_over_300s", d.turns_with_gap_over_300s),
            ("turns_with_gap_over_1800s", d.turns_with_gap_over_1800s),
            ("session_waiting_time_fraction", d.session_waiting_time_fraction),
            ("time_averaged_context_tokens_mean", d.time_averaged_context_tokens_mean),
            ("sessions_with_subagents", d.sessions_with_subagents),
        ] {
            push(format!("distributions.{k}"), v, dist);
        }
        if let Some(p) = d.per_session_with_subagents {
            for (k, v) in [
                ("groups_p50", p.groups_p50),
                ("inner_requests_per_group_p50", p.inner_requests_per_group_p50),
                ("peak_concurrent_groups_p50", p.peak_concurrent_groups_p50),
            ] {
                push(format!("distributions.per_session_with_subagents.{k}"), v, dist);
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PublishedStats, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.stats.yaml");
        std::fs::write(&p, text).unwrap();
        PublishedStats::load(&p).map_err(|e| e.to_string())
    }

    #[test]
    fn partial_files_list_only_their_rows() {
        let s = parse("counts:\n  traces: 10\ndistributions:\n  main_osl: {p50: 600}\n  ideal_prefix_hit_rate: 0.98\n").unwrap();
        let keys: Vec<String> = s.rows().into_iter().map(|r| r.key).collect();
        assert_eq!(keys, ["counts.traces", "distributions.main_osl.p50", "distributions.ideal_prefix_hit_rate"]);
        assert_eq!(s.rows()[2].tolerance, Tolerance::Absolute(0.005));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = parse("counts:\n  traces: 10\n  mian_turns: 5\n").unwrap_err();
        assert!(e.contains("c.stats.yaml:3") && e.contains("mian_turns") && e.contains("fix:"), "{e}");
        let e = parse("counts:\n  traces: ten\n").unwrap_err();
        assert!(e.contains("c.stats.yaml:2") && e.contains("counts.traces"), "{e}");
        let e = parse("distributions:\n  sessions_with_subagents: 1.5\n").unwrap_err();
        assert!(e.contains(":2") && e.contains("between 0 and 1"), "{e}");
        let e = parse("distributions:\n  main_isl: {p50: 10, p90: 5}\n").unwrap_err();
        assert!(e.contains("distributions.main_isl") && e.contains("decrease"), "{e}");
    }
}
