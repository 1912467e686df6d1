//! What the store holds, as plain structs (serde `Serialize`, so a web handler can send them as
//! they are), and their mapping to table rows. The column lists and the mappings sit side by
//! side so that they cannot drift apart.

use super::backend::{Cols, Val};
use crate::noise::SeedSample;
use crate::pareto::View;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One recorded run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub run_id: String,
    /// When the run started (from the UTC stamp its default id begins with), Unix seconds.
    pub started_unix: Option<i64>,
    /// When it finished (its `summary.json` was last written), Unix seconds.
    pub finished_unix: i64,
    /// When this record was written.
    pub recorded_unix: i64,
    pub labels: Vec<String>,
    /// Config keys of its points.
    pub configs: Vec<String>,
    /// Runner labels and hardware profiles of its points (what `--hardware` filters on).
    pub hardware: Vec<String>,
    /// `sim`, `local`, `url:…`, `slurm`, or `inferencex` for an imported artifact.
    pub target: String,
    /// `measured`, `predicted`, `mixed` (points of both kinds) or empty (no point ran).
    pub result_kind: String,
    pub seed: Option<i64>,
    pub seed_replicates: Option<i64>,
    pub duration_s: Option<f64>,
    pub traces: Option<String>,
    pub sweep_version: Option<String>,
    pub head_ref: Option<String>,
    pub base_ref: Option<String>,
    /// The changelog entries that selected the run (`plan.json` `changelog_metadata`).
    pub changelog: Option<serde_json::Value>,
    /// The first entry's `pr-link`.
    pub pr_link: Option<String>,
    /// Gate verdict: `pass`, `fail`, `incomplete`, or none (not gated).
    pub gate: Option<String>,
    pub gate_baseline: Option<String>,
    pub gate_failed_checks: Option<i64>,
    pub points_total: i64,
    /// Points finished with a valid aggregate.
    pub points_ok: i64,
    /// The run folder, absolute, on `host`: per-request files stay there.
    pub folder: String,
    pub host: String,
    /// What recorded it: `run`, `collect`, `predict`, `gate`, `import`, `import-inferencex`.
    pub source: String,
    /// `report.html` relative to the folder, when the run has one.
    pub report: Option<String>,
}

/// A metric with its 95 % bootstrap interval where one was computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ci {
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

/// A point's headline metrics (`metrics::Summary` and `pareto::Point`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointMetrics {
    pub requests_ok: Option<i64>,
    pub requests_error: Option<i64>,
    /// Total (input, cached included, + output) tokens per second per GPU.
    pub tput_per_gpu: Ci,
    pub output_tput_per_gpu: Option<f64>,
    pub input_tput_per_gpu: Option<f64>,
    /// 1 / P90 ITL, tok/s/user.
    pub intvty_p90: Ci,
    /// 1 / P90 (E2EL / OSL), tok/s/user: the North Star x-axis.
    pub e2e_norm_intvty_p90: Ci,
    /// Seconds. No interval: the bootstrap resamples only the frontier metrics.
    pub ttft_p50: Option<f64>,
    pub ttft_p90: Option<f64>,
    /// Absent from InferenceX aggregates (and so from their imports without records).
    pub ttft_p99: Option<f64>,
    pub e2el_p75: Ci,
    pub e2el_p90: Ci,
    pub theoretical_cache_hit_rate: Option<f64>,
    pub submission_valid: Option<bool>,
    /// GPU power and energy per token, where the point's power was valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::power::PowerFigures>,
}

/// A point's place on one view's frontier.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ViewFrontier {
    pub on_frontier: bool,
    /// A point of the same run and curve that dominates it.
    pub dominated_by: Option<String>,
}

/// A per-request or other file of a point, relative to the run folder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointFile {
    pub path: String,
    /// `records` (profile_export.jsonl, possibly compressed), `aggregate` (agg.json),
    /// `server_metrics`, `status`, `log`, `evals` or `other`.
    pub kind: String,
    pub bytes: i64,
}

/// One eval metric of a point (lm-eval `results*.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalScore {
    pub point_id: String,
    pub file: String,
    pub task: String,
    pub metric: String,
    pub score: f64,
}

/// One recorded point of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointRow {
    pub run_id: String,
    pub point_id: String,
    pub config_key: String,
    /// InferenceX `recipe-fingerprint`: the matrix row without concurrency (shared by a
    /// recipe's concurrencies).
    pub recipe_fingerprint: Option<String>,
    /// `run.json`'s digest of this point's row and launch (changes with any flag).
    pub recipe_digest: Option<String>,
    /// The runner label (`cluster:gb300-nv`).
    pub hardware: Option<String>,
    pub framework: Option<String>,
    pub model: Option<String>,
    pub precision: Option<String>,
    pub image: Option<String>,
    pub arm: String,
    /// Parallel layout, as in point ids: `tp4`, `tp2-ep2`, `dep2`.
    pub topology: Option<String>,
    pub conc: i64,
    pub gpus: i64,
    pub matrix: Option<String>,
    /// `done`, `failed`, `cancelled`, `interrupted`, `pending`.
    pub status: String,
    pub status_reason: Option<String>,
    /// Finished with a valid aggregate.
    pub valid: bool,
    /// `measured` or `predicted`.
    pub result_kind: String,
    /// Predicted points: the engine's hardware and model profiles.
    pub hardware_profile: Option<String>,
    pub model_profile: Option<String>,
    /// Digests of the point's profiles (or server identity) and launch in the blob table
    /// ([`super::Store::blob`]).
    pub profiles_hash: Option<String>,
    pub launch_hash: Option<String>,
    pub trace_set: Option<String>,
    /// Absent for points that did not finish.
    pub metrics: Option<PointMetrics>,
    pub invalid_reasons: Vec<String>,
    /// Per view (keys as `pareto::View::key`), for points that entered the Pareto analysis.
    pub frontier: BTreeMap<View, ViewFrontier>,
    /// Share of bootstrap replicates in which the point is on its North Star frontier.
    pub p_frontier: Option<f64>,
    /// Metrics under each gate seed (the noise model of `sweep gate` and `compare`).
    pub seeds: Vec<SeedSample>,
    pub files: Vec<PointFile>,
    pub wall_s: Option<f64>,
}

/// A point together with the run it belongs to (a config's points across runs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunPoint {
    pub run_id: String,
    pub finished_unix: i64,
    pub labels: Vec<String>,
    pub gate: Option<String>,
    pub point: PointRow,
}

/// A config key and how much the store holds of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigSummary {
    pub config_key: String,
    pub runs: i64,
    pub points: i64,
    pub last_finished_unix: i64,
}

/// Which runs to read. Every field narrows; the default is every run, newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFilter {
    /// A config key, or a glob with `*` and `?`: runs with a point of it.
    pub config: Option<String>,
    /// Runs carrying this label.
    pub label: Option<String>,
    /// A substring (any case) of a point's runner label or hardware profile (`gb300`, `h200-fitted`).
    pub hardware: Option<String>,
    /// `measured` or `predicted`: runs with a point of that kind.
    pub kind: Option<String>,
    /// Finished at or after / before this Unix time.
    pub since: Option<i64>,
    pub until: Option<i64>,
    /// `pass`, `fail` or `incomplete`.
    pub gate: Option<String>,
    /// At most this many (newest first); `None` for all.
    pub limit: Option<usize>,
}

/// A run and everything recorded with it, as one transaction writes it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub run: RunRow,
    pub points: Vec<PointRow>,
    pub evals: Vec<EvalScore>,
    /// `plan.json` as it was written.
    pub plan: Option<Vec<u8>>,
    /// Profile and launch bodies by digest.
    pub blobs: BTreeMap<String, String>,
}

/// A list as one text column: space-separated and padded (` a b `), so `LIKE '% a %'` matches an
/// item. An item keeps its exact text: `\` and spaces inside it are escaped (`\\`, `\s`), so
/// `my config` is one item, not two.
pub(crate) fn join_list(items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let items: Vec<String> = items.iter().map(|i| list_item(i)).collect();
    format!(" {} ", items.join(" "))
}

/// One item as [`join_list`] writes it (what a `LIKE` filter on the column must look for).
pub(crate) fn list_item(item: &str) -> String {
    let mut o = String::with_capacity(item.len());
    for c in item.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            ' ' => o.push_str("\\s"),
            c => o.push(c),
        }
    }
    o
}

pub(crate) fn split_list(s: &str) -> Vec<String> {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut o = String::with_capacity(w.len());
            let mut it = w.chars();
            while let Some(c) = it.next() {
                if c != '\\' {
                    o.push(c);
                    continue;
                }
                match it.next() {
                    Some('s') => o.push(' '),
                    Some(other) => o.push(other),
                    None => o.push('\\'),
                }
            }
            o
        })
        .collect()
}

pub(crate) const RUN_COLS: &[&str] = &[
    "run_id",
    "started_unix",
    "finished_unix",
    "recorded_unix",
    "labels",
    "configs",
    "hardware",
    "target",
    "result_kind",
    "seed",
    "seed_replicates",
    "duration_s",
    "traces",
    "sweep_version",
    "head_ref",
    "base_ref",
    "changelog_hash",
    "pr_link",
    "gate",
    "gate_baseline",
    "gate_failed_checks",
    "points_total",
    "points_ok",
    "folder",
    "host",
    "source",
    "report",
];

impl RunRow {
    pub(crate) fn values(&self) -> Vec<Val> {
        vec![
            Val::text(&self.run_id),
            Val::opt_int(self.started_unix),
            Val::Int(self.finished_unix),
            Val::Int(self.recorded_unix),
            Val::text(join_list(&self.labels)),
            Val::text(join_list(&self.configs)),
            Val::text(join_list(&self.hardware)),
            Val::text(&self.target),
            Val::text(&self.result_kind),
            Val::opt_int(self.seed),
            Val::opt_int(self.seed_replicates),
            Val::opt_real(self.duration_s),
            Val::opt_text(self.traces.clone()),
            Val::opt_text(self.sweep_version.clone()),
            Val::opt_text(self.head_ref.clone()),
            Val::opt_text(self.base_ref.clone()),
            Val::opt_text(self.changelog.as_ref().map(|c| digest(&c.to_string()))),
            Val::opt_text(self.pr_link.clone()),
            Val::opt_text(self.gate.clone()),
            Val::opt_text(self.gate_baseline.clone()),
            Val::opt_int(self.gate_failed_checks),
            Val::Int(self.points_total),
            Val::Int(self.points_ok),
            Val::text(&self.folder),
            Val::text(&self.host),
            Val::text(&self.source),
            Val::opt_text(self.report.clone()),
        ]
    }

    /// A run from its row, and the digest of its changelog entries (the caller fills
    /// `changelog` from the blob table, parsing each distinct body once).
    pub(crate) fn from_row(r: &mut [Val]) -> (RunRow, Option<String>) {
        let mut r = Cols(r);
        let changelog_hash = r.opt_text(16);
        let run = RunRow {
            run_id: r.text(0),
            started_unix: r.opt_int(1),
            finished_unix: r.int(2),
            recorded_unix: r.int(3),
            labels: split_list(&r.text(4)),
            configs: split_list(&r.text(5)),
            hardware: split_list(&r.text(6)),
            target: r.text(7),
            result_kind: r.text(8),
            seed: r.opt_int(9),
            seed_replicates: r.opt_int(10),
            duration_s: r.opt_real(11),
            traces: r.opt_text(12),
            sweep_version: r.opt_text(13),
            head_ref: r.opt_text(14),
            base_ref: r.opt_text(15),
            changelog: None,
            pr_link: r.opt_text(17),
            gate: r.opt_text(18),
            gate_baseline: r.opt_text(19),
            gate_failed_checks: r.opt_int(20),
            points_total: r.int(21),
            points_ok: r.int(22),
            folder: r.text(23),
            host: r.text(24),
            source: r.text(25),
            report: r.opt_text(26),
        };
        (run, changelog_hash)
    }
}

/// The digest a JSON body is stored under in the blob table (128 bits of SHA-256, hex).
pub(crate) fn digest(body: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(body.as_bytes())[..16])
}

pub(crate) const POINT_COLS: &[&str] = &[
    "run_id",
    "point_id",
    "config_key",
    "recipe_fingerprint",
    "recipe_digest",
    "hardware",
    "framework",
    "model",
    "precision",
    "image",
    "arm",
    "topology",
    "conc",
    "gpus",
    "matrix",
    "status",
    "status_reason",
    "valid",
    "result_kind",
    "hardware_profile",
    "model_profile",
    "profiles_hash",
    "launch_hash",
    "trace_set",
    "requests_ok",
    "requests_error",
    "tput_per_gpu",
    "tput_per_gpu_lo",
    "tput_per_gpu_hi",
    "output_tput_per_gpu",
    "input_tput_per_gpu",
    "intvty_p90",
    "intvty_p90_lo",
    "intvty_p90_hi",
    "e2e_norm_intvty_p90",
    "e2e_norm_intvty_p90_lo",
    "e2e_norm_intvty_p90_hi",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "e2el_p75",
    "e2el_p75_lo",
    "e2el_p75_hi",
    "e2el_p90",
    "e2el_p90_lo",
    "e2el_p90_hi",
    "cache_hit_rate",
    "invalid_reasons",
    "submission_valid",
    "frontier_e2e_norm_intvty_p90",
    "frontier_intvty_p90",
    "frontier_e2el_p90",
    "frontier_e2el_p75",
    "dominated_by",
    "p_frontier",
    "seeds",
    "wall_s",
    "power_source",
    "avg_power_w",
    "total_gpu_energy_j",
    "joules_per_output_token",
    "joules_per_total_token",
];

/// The views in the order of their `frontier_*` columns.
const FRONTIER_VIEWS: [View; 4] = [View::E2eNormIntvtyP90, View::IntvtyP90, View::E2elP90, View::E2elP75];

impl PointRow {
    pub(crate) fn values(&self) -> Vec<Val> {
        let m = self.metrics.as_ref();
        let ci = |f: &dyn Fn(&PointMetrics) -> Ci| -> [Val; 3] {
            match m.map(f) {
                Some(c) => [Val::real(c.value), Val::opt_real(c.lo), Val::opt_real(c.hi)],
                None => [Val::Null, Val::Null, Val::Null],
            }
        };
        let opt = |f: &dyn Fn(&PointMetrics) -> Option<f64>| Val::opt_real(m.and_then(f));
        let mut v = vec![
            Val::text(&self.run_id),
            Val::text(&self.point_id),
            Val::text(&self.config_key),
            Val::opt_text(self.recipe_fingerprint.clone()),
            Val::opt_text(self.recipe_digest.clone()),
            Val::opt_text(self.hardware.clone()),
            Val::opt_text(self.framework.clone()),
            Val::opt_text(self.model.clone()),
            Val::opt_text(self.precision.clone()),
            Val::opt_text(self.image.clone()),
            Val::text(&self.arm),
            Val::opt_text(self.topology.clone()),
            Val::Int(self.conc),
            Val::Int(self.gpus),
            Val::opt_text(self.matrix.clone()),
            Val::text(&self.status),
            Val::opt_text(self.status_reason.clone()),
            Val::Bool(self.valid),
            Val::text(&self.result_kind),
            Val::opt_text(self.hardware_profile.clone()),
            Val::opt_text(self.model_profile.clone()),
            Val::opt_text(self.profiles_hash.clone()),
            Val::opt_text(self.launch_hash.clone()),
            Val::opt_text(self.trace_set.clone()),
            Val::opt_int(m.and_then(|m| m.requests_ok)),
            Val::opt_int(m.and_then(|m| m.requests_error)),
        ];
        v.extend(ci(&|m| m.tput_per_gpu));
        v.push(opt(&|m| m.output_tput_per_gpu));
        v.push(opt(&|m| m.input_tput_per_gpu));
        v.extend(ci(&|m| m.intvty_p90));
        v.extend(ci(&|m| m.e2e_norm_intvty_p90));
        v.push(opt(&|m| m.ttft_p50));
        v.push(opt(&|m| m.ttft_p90));
        v.push(opt(&|m| m.ttft_p99));
        v.extend(ci(&|m| m.e2el_p75));
        v.extend(ci(&|m| m.e2el_p90));
        v.push(opt(&|m| m.theoretical_cache_hit_rate));
        v.push(if self.invalid_reasons.is_empty() { Val::Null } else { Val::text(serde_json::json!(self.invalid_reasons).to_string()) });
        v.push(Val::opt_bool(m.and_then(|m| m.submission_valid)));
        for view in FRONTIER_VIEWS {
            v.push(Val::opt_bool(self.frontier.get(&view).map(|f| f.on_frontier)));
        }
        let dominated: BTreeMap<&str, &str> =
            self.frontier.iter().filter_map(|(k, f)| f.dominated_by.as_deref().map(|d| (k.key(), d))).collect();
        v.push(if dominated.is_empty() { Val::Null } else { Val::text(serde_json::json!(dominated).to_string()) });
        v.push(Val::opt_real(self.p_frontier));
        v.push(if self.seeds.is_empty() { Val::Null } else { Val::text(serde_json::to_string(&self.seeds).unwrap_or_default()) });
        v.push(Val::opt_real(self.wall_s));
        let power = m.and_then(|m| m.power.as_ref());
        v.push(Val::opt_text(power.map(|p| p.source.clone())));
        v.push(Val::opt_real(power.map(|p| p.avg_power_w)));
        v.push(Val::opt_real(power.map(|p| p.total_gpu_energy_j)));
        v.push(Val::opt_real(power.map(|p| p.joules_per_output_token)));
        v.push(Val::opt_real(power.map(|p| p.joules_per_total_token)));
        debug_assert_eq!(v.len(), POINT_COLS.len());
        v
    }

    /// A point from its row (`files` are filled in by the caller).
    pub(crate) fn from_row(r: &mut [Val]) -> PointRow {
        let mut r = Cols(r);
        let power_source = r.opt_text(57);
        let ci = |i: usize| Ci { value: r.opt_real(i).unwrap_or(f64::NAN), lo: r.opt_real(i + 1), hi: r.opt_real(i + 2) };
        // A point without throughput did not finish: no metrics.
        let metrics = r.opt_real(26).map(|_| PointMetrics {
            requests_ok: r.opt_int(24),
            requests_error: r.opt_int(25),
            tput_per_gpu: ci(26),
            output_tput_per_gpu: r.opt_real(29),
            input_tput_per_gpu: r.opt_real(30),
            intvty_p90: ci(31),
            e2e_norm_intvty_p90: ci(34),
            ttft_p50: r.opt_real(37),
            ttft_p90: r.opt_real(38),
            ttft_p99: r.opt_real(39),
            e2el_p75: ci(40),
            e2el_p90: ci(43),
            theoretical_cache_hit_rate: r.opt_real(46),
            submission_valid: r.opt_bool(48),
            power: power_source.map(|source| crate::power::PowerFigures {
                source,
                avg_power_w: r.opt_real(58).unwrap_or(f64::NAN),
                total_gpu_energy_j: r.opt_real(59).unwrap_or(f64::NAN),
                joules_per_output_token: r.opt_real(60).unwrap_or(f64::NAN),
                joules_per_total_token: r.opt_real(61).unwrap_or(f64::NAN),
            }),
        });
        let dominated: BTreeMap<String, String> = r.opt_text(53).and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
        let mut frontier = BTreeMap::new();
        for (k, view) in FRONTIER_VIEWS.into_iter().enumerate() {
            if let Some(on) = r.opt_bool(49 + k) {
                frontier.insert(view, ViewFrontier { on_frontier: on, dominated_by: dominated.get(view.key()).cloned() });
            }
        }
        PointRow {
            run_id: r.text(0),
            point_id: r.text(1),
            config_key: r.text(2),
            recipe_fingerprint: r.opt_text(3),
            recipe_digest: r.opt_text(4),
            hardware: r.opt_text(5),
            framework: r.opt_text(6),
            model: r.opt_text(7),
            precision: r.opt_text(8),
            image: r.opt_text(9),
            arm: r.text(10),
            topology: r.opt_text(11),
            conc: r.int(12),
            gpus: r.int(13),
            matrix: r.opt_text(14),
            status: r.text(15),
            status_reason: r.opt_text(16),
            valid: r.bool(17),
            result_kind: r.text(18),
            hardware_profile: r.opt_text(19),
            model_profile: r.opt_text(20),
            profiles_hash: r.opt_text(21),
            launch_hash: r.opt_text(22),
            trace_set: r.opt_text(23),
            metrics,
            invalid_reasons: r.opt_text(47).and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
            frontier,
            p_frontier: r.opt_real(54),
            seeds: r.opt_text(55).and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
            files: Vec::new(),
            wall_s: r.opt_real(56),
        }
    }
}

pub(crate) const FILE_COLS: &[&str] = &["run_id", "point_id", "path", "kind", "bytes"];
pub(crate) const EVAL_COLS: &[&str] = &["run_id", "point_id", "file", "task", "metric", "score"];

/// The column list for a `SELECT`, each prefixed with a table alias.
pub(crate) fn select_list(alias: &str, cols: &[&str]) -> String {
    cols.iter().map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}
