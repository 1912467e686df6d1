//! What the JSON endpoints send, built from the store's rows: a config's points across runs
//! (every chart view's x with its interval, frontier membership, the point's flag diff) and a
//! run judged against its baseline by the gate's noise model.

use super::flags::{self, Base, FlagDiff};
use super::url_segment;
use crate::gate::Delta;
use crate::pareto::View;
use crate::recipe::serving::Launch;
use crate::store::{Ci, RunPoint, RunRow};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// An x-axis of the charts.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ViewInfo {
    pub key: &'static str,
    /// For the view's button.
    pub short: &'static str,
    /// For the axis.
    pub label: &'static str,
    pub higher_is_better: bool,
}

/// The views, North Star first (the default); TTFT's frontier is computed here by the same
/// rule as the stored ones (a North Star winner not dominated in the displayed coordinates).
pub const VIEWS: [ViewInfo; 5] = [
    ViewInfo {
        key: "e2e_norm_intvty_p90",
        short: "E2E-norm. interactivity P90 (North Star)",
        label: "P90 E2E-normalised interactivity (tok/s/user)",
        higher_is_better: true,
    },
    ViewInfo { key: "intvty_p90", short: "Interactivity P90", label: "P90 interactivity, 1/ITL (tok/s/user)", higher_is_better: true },
    ViewInfo { key: "e2el_p75", short: "E2E latency P75", label: "P75 end-to-end latency (s)", higher_is_better: false },
    ViewInfo { key: "e2el_p90", short: "E2E latency P90", label: "P90 end-to-end latency (s)", higher_is_better: false },
    ViewInfo { key: "ttft_p90", short: "TTFT P90", label: "P90 time to first token (s)", higher_is_better: false },
];

pub const TTFT: &str = "ttft_p90";

/// A run as the pages and charts list it.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    pub id: String,
    pub finished_unix: i64,
    pub labels: Vec<String>,
    pub configs: Vec<String>,
    pub hardware: Vec<String>,
    pub target: String,
    pub result_kind: String,
    pub gate: Option<String>,
    pub head_ref: Option<String>,
    pub pr_link: Option<String>,
    pub points_total: i64,
    pub points_ok: i64,
    pub url: String,
    /// The run's own `report.html`, served from its folder.
    pub report_url: Option<String>,
    /// The run against its last passing baseline.
    pub compare_url: String,
}

pub fn run_info(r: &RunRow) -> RunInfo {
    let id = url_segment(&r.run_id);
    RunInfo {
        id: r.run_id.clone(),
        finished_unix: r.finished_unix,
        labels: r.labels.clone(),
        configs: r.configs.clone(),
        hardware: r.hardware.clone(),
        target: r.target.clone(),
        result_kind: r.result_kind.clone(),
        gate: r.gate.clone(),
        head_ref: r.head_ref.clone(),
        pr_link: r.pr_link.clone(),
        points_total: r.points_total,
        points_ok: r.points_ok,
        url: format!("/run/{id}"),
        report_url: r.report.as_ref().map(|p| format!("/runs/{id}/files/{}", path_url(p))),
        compare_url: format!("/compare?run={id}"),
    }
}

/// A relative file path in a URL: each segment encoded, `/` kept.
pub fn path_url(p: &str) -> String {
    p.split('/').map(url_segment).collect::<Vec<_>>().join("/")
}

/// A metric with its interval; `value` is null when the point has none.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Value {
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lo: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hi: Option<f64>,
}

fn finite(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite())
}

impl From<Ci> for Value {
    fn from(c: Ci) -> Value {
        Value { value: finite(Some(c.value)), lo: finite(c.lo), hi: finite(c.hi) }
    }
}

impl From<Option<f64>> for Value {
    fn from(x: Option<f64>) -> Value {
        Value { value: finite(x), lo: None, hi: None }
    }
}

/// One point of one run, with everything its hover shows.
#[derive(Clone, Debug, Serialize)]
pub struct PointInfo {
    /// Index into [`ConfigPayload::runs`].
    pub run: usize,
    /// A fixed-seq-len point's sequence (`1k1k`): its curve is the run's at that ISL/OSL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<String>,
    pub id: String,
    pub arm: String,
    pub conc: i64,
    pub gpus: i64,
    pub topology: Option<String>,
    /// `measured` or `predicted`.
    pub kind: String,
    /// Predicted points: `model profile M on hardware profile H`, as an index into
    /// [`ConfigPayload::texts`].
    pub provenance: Option<usize>,
    pub hardware: Option<String>,
    pub framework: Option<String>,
    /// The trace set, as an index into [`ConfigPayload::texts`] (long, and shared by a run's points).
    pub trace_set: Option<usize>,
    pub valid: bool,
    pub status: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid_reasons: Vec<String>,
    /// tok/s/GPU (input, cached included, + output) and output tok/s/GPU.
    pub y: Value,
    pub y_output: Option<f64>,
    /// Each view's x by key.
    pub x: BTreeMap<&'static str, Value>,
    pub ttft_p50: Option<f64>,
    pub ttft_p99: Option<f64>,
    /// On the displayed frontier of each view.
    pub frontier: BTreeMap<&'static str, bool>,
    /// Per view, a point of the same run that dominates this one (its id after `<config>/`).
    pub dominated_by: BTreeMap<&'static str, String>,
    /// Share of bootstrap replicates with the point on its North Star frontier.
    pub p_frontier: Option<f64>,
    /// Index into [`ConfigPayload::flags`].
    pub flags: Option<usize>,
}

/// A config's points across runs.
#[derive(Clone, Debug, Serialize)]
pub struct ConfigPayload {
    pub config_key: String,
    pub views: [ViewInfo; 5],
    /// Newest first.
    pub runs: Vec<RunInfo>,
    pub points: Vec<PointInfo>,
    /// Distinct flag diffs, shared by the points that launched alike.
    pub flags: Vec<FlagDiff>,
    /// Distinct long strings the points refer to by index.
    pub texts: Vec<String>,
}

/// Distinct values by index, in first-seen order.
struct Interner<T> {
    index: HashMap<T, usize>,
    values: Vec<T>,
}

impl<T: Clone + Eq + std::hash::Hash> Interner<T> {
    fn new() -> Self {
        Interner { index: HashMap::new(), values: Vec::new() }
    }
    fn get(&mut self, v: T) -> usize {
        if let Some(&i) = self.index.get(&v) {
            return i;
        }
        self.values.push(v.clone());
        self.index.insert(v, self.values.len() - 1);
        self.values.len() - 1
    }
}

fn view_of(key: &str) -> Option<View> {
    crate::pareto::VIEWS.into_iter().find(|v| v.key() == key)
}

fn x_of(p: &crate::store::PointRow, key: &str) -> Value {
    let Some(m) = &p.metrics else { return Value::from(None) };
    match key {
        "e2e_norm_intvty_p90" => m.e2e_norm_intvty_p90.into(),
        "intvty_p90" => m.intvty_p90.into(),
        "e2el_p75" => m.e2el_p75.into(),
        "e2el_p90" => m.e2el_p90.into(),
        _ => m.ttft_p90.into(),
    }
}

/// Points by run (index into the runs shown) and scenario: fixed-seq-len points of each ISL/OSL
/// are a curve of their own.
type Scenarios<'a> = BTreeMap<(usize, Option<String>), Vec<&'a RunPoint>>;

/// `points` of `runs` grouped per run and scenario; points of other runs are left out.
fn by_scenario<'a>(runs: &[RunRow], points: &'a [RunPoint]) -> Scenarios<'a> {
    let index: HashMap<&str, usize> = runs.iter().enumerate().map(|(i, r)| (r.run_id.as_str(), i)).collect();
    let mut by_run: Scenarios = BTreeMap::new();
    for p in points {
        if let Some(&i) = index.get(p.run_id.as_str()) {
            let seq = p.point.matrix.as_deref().and_then(crate::results::seq_of_matrix).map(str::to_string);
            by_run.entry((i, seq)).or_default().push(p);
        }
    }
    by_run
}

/// A point's x in every view, and where it has one, its place on the view's frontier.
struct ViewColumns {
    x: BTreeMap<&'static str, Value>,
    frontier: BTreeMap<&'static str, bool>,
    dominated_by: BTreeMap<&'static str, String>,
}

impl ViewColumns {
    /// `prefix`: `<config>/`, left out of dominating points' ids; `on_ttft`: whether the point
    /// is on its run's TTFT frontier (computed here: none is stored).
    fn of(p: &crate::store::PointRow, prefix: &str, on_ttft: bool) -> ViewColumns {
        let mut frontier = BTreeMap::new();
        let mut dominated_by = BTreeMap::new();
        let mut x = BTreeMap::new();
        for v in VIEWS {
            x.insert(v.key, x_of(p, v.key));
            match view_of(v.key) {
                Some(view) => {
                    if let Some(f) = p.frontier.get(&view) {
                        frontier.insert(v.key, f.on_frontier);
                        if let Some(d) = &f.dominated_by {
                            // Within the config: the point id after `<config>/`.
                            dominated_by.insert(v.key, d.strip_prefix(prefix).unwrap_or(d).to_string());
                        }
                    }
                }
                None => {
                    if !p.frontier.is_empty() {
                        frontier.insert(v.key, on_ttft);
                    }
                }
            }
        }
        ViewColumns { x, frontier, dominated_by }
    }
}

/// Builds the payload. `runs`: the runs to show (newest first); points of other runs are left
/// out. `launches`: stored launches by digest. `recipe_base`: the config's recipe base, when the
/// repository has the recipe; else each run's points give their shared flags.
pub fn config_payload(
    key: &str,
    runs: &[RunRow],
    points: &[RunPoint],
    launches: &BTreeMap<String, Launch>,
    recipe_base: Option<&Base>,
) -> ConfigPayload {
    let mut out = ConfigPayload {
        config_key: key.to_string(),
        views: VIEWS,
        runs: runs.iter().map(run_info).collect(),
        points: Vec::new(),
        flags: Vec::new(),
        texts: Vec::new(),
    };
    let mut diffs: Interner<FlagDiff> = Interner::new();
    let mut texts: Interner<String> = Interner::new();
    // A launch's diff against a base is computed once: (the run, when each run has its own
    // base; the launch's digest) → index into the distinct diffs.
    let mut diff_of: HashMap<(Option<usize>, &str), usize> = HashMap::new();
    let prefix = format!("{key}/");
    for ((run, seq), pts) in by_scenario(runs, points) {
        let launch_of = |p: &RunPoint| p.point.launch_hash.as_ref().and_then(|h| launches.get(h));
        let shared;
        let base = match recipe_base {
            Some(b) => Some(b),
            None => {
                let ls: Vec<&Launch> = pts.iter().filter_map(|p| launch_of(p)).collect();
                shared = (!ls.is_empty()).then(|| flags::shared_base(&ls));
                shared.as_ref()
            }
        };
        let ttft = ttft_frontier(&pts);
        for (k, rp) in pts.iter().enumerate() {
            let p = &rp.point;
            let flags = match (base, p.launch_hash.as_deref(), launch_of(rp)) {
                (Some(b), Some(h), Some(l)) => {
                    let key = (recipe_base.is_none().then_some(run), h);
                    Some(*diff_of.entry(key).or_insert_with(|| diffs.get(flags::diff(b, l))))
                }
                _ => None,
            };
            let ViewColumns { x, frontier, dominated_by } = ViewColumns::of(p, &prefix, ttft[k]);
            let m = p.metrics.as_ref();
            out.points.push(PointInfo {
                run,
                seq: seq.clone(),
                id: p.point_id.clone(),
                arm: p.arm.clone(),
                conc: p.conc,
                gpus: p.gpus,
                topology: p.topology.clone(),
                kind: p.result_kind.clone(),
                provenance: match (&p.model_profile, &p.hardware_profile) {
                    (Some(m), Some(h)) if p.result_kind == "predicted" => {
                        Some(texts.get(format!("model profile {m} on hardware profile {h}")))
                    }
                    _ => None,
                },
                hardware: p.hardware.clone(),
                framework: p.framework.clone(),
                trace_set: p.trace_set.clone().map(|t| texts.get(t)),
                valid: p.valid,
                status: p.status.clone(),
                invalid_reasons: p.invalid_reasons.clone(),
                y: m.map_or(Value::from(None), |m| m.tput_per_gpu.into()),
                y_output: finite(m.and_then(|m| m.output_tput_per_gpu)),
                x,
                ttft_p50: finite(m.and_then(|m| m.ttft_p50)),
                ttft_p99: finite(m.and_then(|m| m.ttft_p99)),
                frontier,
                dominated_by,
                p_frontier: finite(p.p_frontier),
                flags,
            });
        }
    }
    out.flags = diffs.values;
    out.texts = texts.values;
    out
}

/// TTFT has no stored frontier: a point is on it when it is on its run's North Star frontier
/// and no valid point of the run has a lower-or-equal P90 TTFT and a higher-or-equal
/// throughput, one of them strictly (the rule `pareto::analyse` applies to every view).
fn ttft_frontier(pts: &[&RunPoint]) -> Vec<bool> {
    let coords: Vec<Option<(f64, f64)>> = pts
        .iter()
        .map(|rp| {
            let m = rp.point.metrics.as_ref()?;
            let (x, y) = (m.ttft_p90?, m.tput_per_gpu.value);
            (rp.point.valid && x.is_finite() && y.is_finite()).then_some((x, y))
        })
        .collect();
    pts.iter()
        .zip(&coords)
        .map(|(rp, c)| {
            let Some((x, y)) = *c else { return false };
            let north_star = rp.point.frontier.get(&View::E2eNormIntvtyP90).is_some_and(|f| f.on_frontier);
            north_star && !coords.iter().flatten().any(|&(ox, oy)| ox <= x && oy >= y && (ox < x || oy > y))
        })
        .collect()
}

/// One metric of one point against the baseline.
#[derive(Clone, Debug, Serialize)]
pub struct DeltaInfo {
    pub point: String,
    pub metric: String,
    pub base: f64,
    pub new: f64,
    pub change_pct: f64,
    /// The smallest worse change the gate fails on.
    pub threshold_pct: f64,
    pub worse: bool,
    pub beyond_noise: bool,
    /// `regression`, `improvement` or `within noise`.
    pub significance: &'static str,
    /// The noise model that judged it.
    pub model: String,
}

/// A run against its baseline.
#[derive(Clone, Debug, Serialize)]
pub struct ComparePayload {
    pub run: RunInfo,
    pub baseline: Option<RunInfo>,
    /// How the baseline was chosen, in words.
    pub baseline_rule: String,
    pub deltas: Vec<DeltaInfo>,
    /// Points of the run the baseline does not have, and the reverse.
    pub only_in_run: Vec<String>,
    pub only_in_baseline: Vec<String>,
}

/// The significance of a change as the gate's noise model judges it.
pub fn significance(worse: bool, beyond_noise: bool) -> &'static str {
    match (beyond_noise, worse) {
        (false, _) => "within noise",
        (true, true) => "regression",
        (true, false) => "improvement",
    }
}

pub fn delta_info(d: &Delta) -> DeltaInfo {
    let j = &d.judgement;
    DeltaInfo {
        point: d.point.clone(),
        metric: d.metric.clone(),
        base: j.base,
        new: j.new,
        change_pct: j.change_pct,
        threshold_pct: j.threshold_pct,
        worse: j.worse,
        beyond_noise: j.beyond_noise,
        significance: significance(j.worse, j.beyond_noise),
        model: j.model.clone(),
    }
}

/// The label of a compared metric (`gate::compare`'s keys).
pub fn metric_label(key: &str) -> &'static str {
    match key {
        "tput_per_gpu" => "tok/s/GPU",
        k => VIEWS.iter().find(|v| v.key == k).map_or("?", |v| v.label),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{PointMetrics, PointRow, ViewFrontier};

    fn point(id: &str, ttft: f64, y: f64, ns: bool, valid: bool) -> RunPoint {
        let mut frontier = BTreeMap::new();
        frontier.insert(View::E2eNormIntvtyP90, ViewFrontier { on_frontier: ns, dominated_by: None });
        RunPoint {
            run_id: "r".into(),
            finished_unix: 0,
            labels: vec![],
            gate: None,
            point: PointRow {
                run_id: "r".into(),
                point_id: id.into(),
                config_key: "k".into(),
                recipe_fingerprint: None,
                recipe_digest: None,
                hardware: None,
                framework: None,
                model: None,
                precision: None,
                image: None,
                arm: "a".into(),
                topology: None,
                conc: 1,
                gpus: 1,
                matrix: None,
                status: "done".into(),
                status_reason: None,
                valid,
                result_kind: "predicted".into(),
                hardware_profile: None,
                model_profile: None,
                profiles_hash: None,
                launch_hash: None,
                trace_set: None,
                metrics: Some(PointMetrics {
                    ttft_p90: Some(ttft),
                    tput_per_gpu: Ci { value: y, lo: None, hi: None },
                    ..Default::default()
                }),
                invalid_reasons: vec![],
                frontier,
                p_frontier: None,
                seeds: vec![],
                files: vec![],
                wall_s: None,
            },
        }
    }

    #[test]
    fn ttft_frontier_needs_a_north_star_winner_not_dominated_on_ttft() {
        let pts = [
            point("fast", 0.1, 100.0, true, true),
            point("dominated", 0.5, 90.0, true, true),
            point("not-north-star", 0.05, 50.0, false, true),
            point("high", 1.0, 500.0, true, true),
            // An invalid point dominates nothing.
            point("invalid", 0.01, 1000.0, false, false),
        ];
        let refs: Vec<&RunPoint> = pts.iter().collect();
        assert_eq!(ttft_frontier(&refs), vec![true, false, false, true, false]);
    }

    #[test]
    fn significance_follows_the_judgement() {
        assert_eq!(significance(true, true), "regression");
        assert_eq!(significance(false, true), "improvement");
        assert_eq!(significance(true, false), "within noise");
    }
}
