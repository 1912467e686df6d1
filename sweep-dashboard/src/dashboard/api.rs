//! The JSON endpoints, and the reads behind them that the pages share: `/api/facets`,
//! `/api/runs`, `/api/configs`, `/api/config/<key>`, `/api/run/<id>`, `/api/compare`.

use super::payload::{self, ComparePayload, ConfigPayload, RunInfo};
use super::{App, DashboardError};
use crate::recipe::serving::Launch;
use crate::store::{ConfigSummary, EvalScore, Facets, PointRow, RunFilter, RunRow, Store};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// An endpoint's error as JSON: `{"error": "…"}` with the status that fits.
pub struct ApiError(pub DashboardError);

impl From<DashboardError> for ApiError {
    fn from(e: DashboardError) -> ApiError {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0.status(), Json(serde_json::json!({ "error": self.0.to_string() }))).into_response()
    }
}

/// The filters of the runs list and the config charts, as the query string gives them.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RunsQuery {
    pub config: Option<String>,
    pub label: Option<String>,
    pub hardware: Option<String>,
    pub framework: Option<String>,
    /// `measured` or `predicted`.
    pub kind: Option<String>,
    /// Dates (`YYYY-MM-DD`, UTC) or times (`YYYY-MM-DDTHH:MM:SSZ`); `until` takes in its whole day.
    pub since: Option<String>,
    pub until: Option<String>,
    pub gate: Option<String>,
    pub limit: Option<String>,
}

fn given(s: &Option<String>) -> Option<String> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// A date or time as Unix seconds; a bare date is its midnight, UTC (`end`: the next midnight).
fn parse_time(field: &str, s: &str, end: bool) -> Result<i64, DashboardError> {
    let bad = || DashboardError::BadRequest(format!("{field}: expected a date YYYY-MM-DD (UTC) or a time YYYY-MM-DDTHH:MM:SSZ, got {s:?}"));
    let date_only = s.len() == 10;
    let text = if date_only { format!("{s}T00:00:00Z") } else { s.to_string() };
    let t = humantime::parse_rfc3339_weak(&text).map_err(|_| bad())?;
    let secs = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    Ok(if date_only && end { secs + 86_400 } else { secs })
}

impl RunsQuery {
    /// The store filter and the framework (which the store's filter does not have).
    pub fn filter(&self, default_limit: Option<usize>) -> Result<(RunFilter, Option<String>), DashboardError> {
        let kind = given(&self.kind);
        if let Some(k) = &kind
            && k != "measured"
            && k != "predicted"
        {
            return Err(DashboardError::BadRequest(format!("kind: expected measured or predicted, got {k:?}")));
        }
        let gate = given(&self.gate);
        if let Some(g) = &gate
            && !["pass", "fail", "incomplete"].contains(&g.as_str())
        {
            return Err(DashboardError::BadRequest(format!("gate: expected pass, fail or incomplete, got {g:?}")));
        }
        let limit = match given(&self.limit) {
            Some(l) => {
                Some(l.parse::<usize>().map_err(|_| DashboardError::BadRequest(format!("limit: expected a number of runs, got {l:?}")))?)
            }
            None => default_limit,
        };
        let f = RunFilter {
            config: given(&self.config),
            label: given(&self.label),
            hardware: given(&self.hardware),
            kind,
            since: given(&self.since).map(|s| parse_time("since", &s, false)).transpose()?,
            until: given(&self.until).map(|s| parse_time("until", &s, true)).transpose()?,
            gate,
            limit,
        };
        Ok((f, given(&self.framework)))
    }
}

/// Runs matching the query, newest first, and how many match without the limit.
pub fn read_runs(store: &mut Store, q: &RunsQuery, default_limit: Option<usize>) -> Result<(Vec<RunRow>, usize), DashboardError> {
    let (f, framework) = q.filter(default_limit)?;
    if framework.is_none() {
        // The store counts; only the runs shown are read.
        let total = store.count_runs(&f)? as usize;
        return Ok((store.runs(&f)?, total));
    }
    let mut runs = store.runs_of_framework(&RunFilter { limit: None, ..f.clone() }, framework.as_deref())?;
    let total = runs.len();
    if let Some(n) = f.limit {
        runs.truncate(n);
    }
    Ok((runs, total))
}

/// A config's points in the runs matching the query (its `config` aside).
pub fn read_config(store: &mut Store, app: &App, key: &str, q: &RunsQuery) -> Result<ConfigPayload, DashboardError> {
    let q = RunsQuery { config: None, ..q.clone() };
    let (f, framework) = q.filter(None)?;
    // The runs with a point of the key that the filters keep, newest first; a key with glob
    // characters would match more in the store's run filter, so the points decide.
    let mut runs = store.runs_of_framework(&RunFilter { config: Some(key.to_string()), limit: None, ..f.clone() }, framework.as_deref())?;
    let mut points = store.chart_points(key)?;
    let with_points: BTreeSet<&str> = points.iter().map(|p| p.run_id.as_str()).collect();
    runs.retain(|r| with_points.contains(r.run_id.as_str()));
    if let Some(n) = f.limit {
        runs.truncate(n);
    }
    if runs.is_empty() {
        return Err(DashboardError::NotFound(format!("no recorded run matching these filters has a point of config {key:?}")));
    }
    let shown: BTreeSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    points.retain(|p| shown.contains(p.run_id.as_str()));
    let hashes: BTreeSet<String> = points.iter().filter_map(|p| p.point.launch_hash.clone()).collect();
    let launches: BTreeMap<String, Launch> =
        store.blobs(&hashes)?.into_iter().filter_map(|(h, v)| Some((h, serde_json::from_value(v).ok()?))).collect();
    let base = app.recipe_base(key);
    Ok(payload::config_payload(key, &runs, &points, &launches, base.as_ref()))
}

/// A run with its points and eval scores.
#[derive(Serialize)]
pub struct RunPayload {
    pub run: RunInfo,
    pub record: RunRow,
    pub points: Vec<PointRow>,
    pub evals: Vec<EvalScore>,
}

pub fn read_run(store: &mut Store, id: &str) -> Result<RunPayload, DashboardError> {
    let Some(record) = store.run(id)? else { return Err(DashboardError::NotFound(format!("no run {id:?} in the store"))) };
    let points = store.points(id)?;
    let evals = store.evals(id)?;
    Ok(RunPayload { run: payload::run_info(&record), record, points, evals })
}

/// A run against `baseline`, or when none is given against the last passing run of the same
/// recipe fingerprints (and result kind) that finished before it.
pub fn read_compare(store: &mut Store, run_id: &str, baseline: Option<&str>) -> Result<ComparePayload, DashboardError> {
    let Some(run) = store.run(run_id)? else { return Err(DashboardError::NotFound(format!("no run {run_id:?} in the store"))) };
    let (base, rule) = match baseline {
        Some(b) => match store.run(b)? {
            Some(r) => (Some(r), "given".to_string()),
            None => return Err(DashboardError::NotFound(format!("no baseline run {b:?} in the store"))),
        },
        None => {
            let mut fps: Vec<String> = store.points(run_id)?.into_iter().filter_map(|p| p.recipe_fingerprint).collect();
            fps.sort();
            fps.dedup();
            let kind = Some(run.result_kind.as_str()).filter(|k| *k == "measured" || *k == "predicted");
            let r = store.last_pass(&fps, kind, Some(run_id), Some(run.finished_unix))?;
            (r, "the last passing run of the same recipe fingerprints that finished before it".to_string())
        }
    };
    let mut out = ComparePayload {
        run: payload::run_info(&run),
        baseline: base.as_ref().map(payload::run_info),
        baseline_rule: rule,
        deltas: Vec::new(),
        only_in_run: Vec::new(),
        only_in_baseline: Vec::new(),
    };
    let Some(base) = base else { return Ok(out) };
    let missing = |id: &str| DashboardError::NotFound(format!("run {id:?} vanished from the store while it was read"));
    let new_s = store.run_summary(run_id)?.ok_or_else(|| missing(run_id))?;
    let base_s = store.run_summary(&base.run_id)?.ok_or_else(|| missing(&base.run_id))?;
    out.deltas = crate::gate::compare(&base_s, &new_s).iter().map(payload::delta_info).collect();
    out.only_in_run = new_s.points.iter().filter(|p| base_s.point(&p.id).is_none()).map(|p| p.id.clone()).collect();
    out.only_in_baseline = base_s.points.iter().filter(|p| new_s.point(&p.id).is_none()).map(|p| p.id.clone()).collect();
    Ok(out)
}

pub async fn facets(State(app): State<Arc<App>>) -> Result<Json<Facets>, ApiError> {
    Ok(Json(app.read(|s, _| Ok(s.facets()?)).await?))
}

#[derive(Serialize)]
pub struct RunsPayload {
    /// Runs matching the filters, before the limit.
    pub total: usize,
    pub runs: Vec<RunInfo>,
}

pub async fn runs(State(app): State<Arc<App>>, Query(q): Query<RunsQuery>) -> Result<Json<RunsPayload>, ApiError> {
    let (runs, total) = app.read(move |s, _| read_runs(s, &q, None)).await?;
    Ok(Json(RunsPayload { total, runs: runs.iter().map(payload::run_info).collect() }))
}

pub async fn configs(State(app): State<Arc<App>>) -> Result<Json<Vec<ConfigSummary>>, ApiError> {
    Ok(Json(app.read(|s, _| Ok(s.configs()?)).await?))
}

pub async fn config(
    State(app): State<Arc<App>>,
    Path(key): Path<String>,
    Query(q): Query<RunsQuery>,
) -> Result<Json<ConfigPayload>, ApiError> {
    Ok(Json(app.read(move |s, app| read_config(s, app, &key, &q)).await?))
}

pub async fn run(State(app): State<Arc<App>>, Path(id): Path<String>) -> Result<Json<RunPayload>, ApiError> {
    Ok(Json(app.read(move |s, _| read_run(s, &id)).await?))
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CompareQuery {
    pub run: Option<String>,
    pub baseline: Option<String>,
}

impl CompareQuery {
    pub fn run(&self) -> Result<String, DashboardError> {
        given(&self.run).ok_or_else(|| DashboardError::BadRequest("compare: give the run to compare as ?run=<run id>".into()))
    }
}

pub async fn compare(State(app): State<Arc<App>>, Query(q): Query<CompareQuery>) -> Result<Json<ComparePayload>, ApiError> {
    let run = q.run()?;
    let baseline = given(&q.baseline);
    Ok(Json(app.read(move |s, _| read_compare(s, &run, baseline.as_deref())).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_midnights_and_until_takes_its_whole_day() {
        assert_eq!(parse_time("since", "2026-01-02", false).unwrap(), 1_767_312_000);
        assert_eq!(parse_time("until", "2026-01-02", true).unwrap(), 1_767_312_000 + 86_400);
        assert_eq!(parse_time("since", "2026-01-02T01:00:00Z", false).unwrap(), 1_767_312_000 + 3_600);
        let e = parse_time("since", "yesterday", false).unwrap_err().to_string();
        assert!(e.contains("since") && e.contains("YYYY-MM-DD") && e.contains("yesterday"), "{e}");
    }

    #[test]
    fn a_bad_kind_gate_or_limit_is_named() {
        let q = RunsQuery { kind: Some("guessed".into()), ..Default::default() };
        assert!(q.filter(None).unwrap_err().to_string().starts_with("kind:"));
        let q = RunsQuery { gate: Some("maybe".into()), ..Default::default() };
        assert!(q.filter(None).unwrap_err().to_string().starts_with("gate:"));
        let q = RunsQuery { limit: Some("ten".into()), ..Default::default() };
        assert!(q.filter(None).unwrap_err().to_string().starts_with("limit:"));
        let q = RunsQuery { kind: Some(" measured ".into()), config: Some("".into()), ..Default::default() };
        let (f, fw) = q.filter(Some(5)).unwrap();
        assert_eq!((f.kind.as_deref(), f.config, f.limit, fw), (Some("measured"), None, Some(5), None));
    }
}
