//! The HTML pages: the runs list (with its filters), the configs, a config's charts, a run and
//! a run against its baseline. Every string from the store is escaped with `html::escape`
//! where it is written; links to runs and configs percent-encode their ids; the charts are
//! drawn by `assets/dashboard.js` from `/api/config/<key>`.

use super::api::{self, CompareQuery, RunsQuery};
use super::payload::{self, ComparePayload, RunInfo, path_url};
use super::{App, DashboardError, url_segment};
use crate::gate::fmt_value;
use crate::html::escape;
use crate::store::{Ci, PointRow};
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use std::fmt::Write;
use std::sync::Arc;

const SCRIPT: &str = include_str!("assets/dashboard.js");
const STYLE: &str = include_str!("assets/dashboard.css");

/// How many runs the runs list shows unless `limit` says otherwise.
const RUNS_SHOWN: usize = 200;

/// A page's error as a page, with the status that fits.
pub struct PageError(pub DashboardError);

impl From<DashboardError> for PageError {
    fn from(e: DashboardError) -> PageError {
        PageError(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let body =
            format!("<h1>{}</h1><p class=\"error\">{}</p><p><a href=\"/\">All runs</a></p>", status.as_u16(), escape(&self.0.to_string()));
        (status, layout(&status.to_string(), &body)).into_response()
    }
}

fn layout(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · sweep</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/assets/dashboard.css\"><script src=\"/assets/dashboard.js\" defer></script></head>\
         <body><header class=\"top\"><a class=\"brand\" href=\"/\">sweep</a><nav><a href=\"/\">Runs</a><a href=\"/configs\">Configs</a></nav></header>\
         <main>{body}</main></body></html>\n",
        escape(title)
    ))
}

pub async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

pub async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut r = body.into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    // Assets change only with the binary.
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    r
}

pub async fn not_found() -> PageError {
    PageError(DashboardError::NotFound("no such page".into()))
}

/// A Unix time as `2026-12-02 05:03 UTC`.
pub fn when(unix: i64) -> String {
    if unix <= 0 {
        return "-".into();
    }
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix as u64);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    format!("{} {} UTC", &s[..10], &s[11..16])
}

fn ci(c: &Ci) -> String {
    if !c.value.is_finite() {
        return "-".into();
    }
    match (c.lo, c.hi) {
        (Some(lo), Some(hi)) => format!("{}<br><span class=\"ci\">[{}–{}]</span>", fmt_value(c.value), fmt_value(lo), fmt_value(hi)),
        _ => fmt_value(c.value),
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), fmt_value)
}

/// A link only to a web page: any other scheme is shown as text.
fn web_link(url: &str) -> String {
    if url.starts_with("https://") || url.starts_with("http://") {
        format!("<a href=\"{0}\" rel=\"noreferrer noopener\">{0}</a>", escape(url))
    } else {
        escape(url)
    }
}

fn gate_badge(g: Option<&str>) -> String {
    match g {
        Some(g) => format!("<span class=\"badge gate-{0}\">{0}</span>", escape(g)),
        None => "<span class=\"muted\">not gated</span>".into(),
    }
}

fn kind_badge(k: &str) -> String {
    if k.is_empty() { "<span class=\"muted\">none</span>".into() } else { format!("<span class=\"badge kind-{0}\">{0}</span>", escape(k)) }
}

fn config_link(key: &str) -> String {
    format!("<a href=\"/config/{}\">{}</a>", url_segment(key), escape(key))
}

fn run_links(r: &RunInfo) -> String {
    let mut s = String::new();
    if let Some(u) = &r.report_url {
        let _ = write!(s, "<a href=\"{}\">report</a> ", escape(u));
    }
    let _ = write!(s, "<a href=\"{}\">vs baseline</a>", escape(&r.compare_url));
    s
}

fn select(name: &str, label: &str, options: &[String], chosen: Option<&str>) -> String {
    let mut s = format!("<label>{label} <select name=\"{name}\"><option value=\"\">any</option>");
    for o in options {
        let sel = if chosen == Some(o.as_str()) { " selected" } else { "" };
        let _ = write!(s, "<option value=\"{0}\"{sel}>{0}</option>", escape(o));
    }
    s.push_str("</select></label>");
    s
}

fn text_input(name: &str, label: &str, kind: &str, value: Option<&str>) -> String {
    format!("<label>{label} <input type=\"{kind}\" name=\"{name}\" value=\"{}\"></label>", escape(value.unwrap_or("")))
}

fn filters_form(action: &str, q: &RunsQuery, facets: &crate::store::Facets, with_config: bool) -> String {
    let v = |o: &Option<String>| o.as_deref().filter(|s| !s.is_empty()).map(str::to_string);
    let mut s = format!("<form class=\"filters\" method=\"get\" action=\"{}\">", escape(action));
    if with_config {
        s.push_str(&select("config", "config", &facets.configs, v(&q.config).as_deref()));
    }
    s.push_str(&select("hardware", "hardware", &facets.hardware, v(&q.hardware).as_deref()));
    s.push_str(&select("framework", "framework", &facets.frameworks, v(&q.framework).as_deref()));
    s.push_str(&select("kind", "result", &["measured".into(), "predicted".into()], v(&q.kind).as_deref()));
    if with_config {
        s.push_str(&select("gate", "gate", &["pass".into(), "fail".into(), "incomplete".into()], v(&q.gate).as_deref()));
        s.push_str(&text_input("label", "label", "text", v(&q.label).as_deref()));
    }
    s.push_str(&text_input("since", "from", "date", v(&q.since).as_deref()));
    s.push_str(&text_input("until", "to", "date", v(&q.until).as_deref()));
    let _ = write!(s, "<button type=\"submit\">Filter</button> <a href=\"{}\">clear</a></form>", escape(action));
    s
}

/// `/`: recorded runs, newest first, with filters.
pub async fn runs(State(app): State<Arc<App>>, Query(q): Query<RunsQuery>) -> Result<Html<String>, PageError> {
    let query = q.clone();
    let (rows, total, facets) = app
        .read(move |s, _| {
            let (rows, total) = api::read_runs(s, &query, Some(RUNS_SHOWN))?;
            Ok((rows, total, s.facets()?))
        })
        .await?;
    let mut b = String::from("<h1>Runs</h1>");
    b.push_str(&filters_form("/", &q, &facets, true));
    let _ = write!(b, "<p class=\"count\">{} of {} matching run(s), newest first</p>", rows.len(), total);
    if rows.is_empty() {
        b.push_str(
            "<p class=\"empty\">No recorded run matches. Runs are recorded by <code>sweep run</code>, <code>sweep collect</code> and \
             <code>sweep import</code>.</p>",
        );
        return Ok(layout("Runs", &b));
    }
    b.push_str(
        "<table class=\"runs\"><thead><tr><th>run</th><th>finished</th><th>labels</th><th>configs</th><th>hardware</th>\
         <th>result</th><th>gate</th><th>points ok</th><th></th></tr></thead><tbody>",
    );
    for r in &rows {
        let info = payload::run_info(r);
        let configs: Vec<String> = r.configs.iter().map(|c| config_link(c)).collect();
        let _ = write!(
            b,
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}/{}</td><td>{}</td></tr>",
            escape(&info.url),
            escape(&r.run_id),
            when(r.finished_unix),
            escape(&r.labels.join(", ")),
            configs.join("<br>"),
            escape(&r.hardware.join(", ")),
            kind_badge(&r.result_kind),
            gate_badge(r.gate.as_deref()),
            r.points_ok,
            r.points_total,
            run_links(&info)
        );
    }
    b.push_str("</tbody></table>");
    Ok(layout("Runs", &b))
}

/// `/configs`: every config key with its runs.
pub async fn configs(State(app): State<Arc<App>>) -> Result<Html<String>, PageError> {
    let list = app.read(|s, _| Ok(s.configs()?)).await?;
    let mut b = String::from("<h1>Configs</h1>");
    if list.is_empty() {
        b.push_str("<p class=\"empty\">No config has a recorded point yet.</p>");
        return Ok(layout("Configs", &b));
    }
    b.push_str("<table><thead><tr><th>config</th><th>runs</th><th>points</th><th>last run finished</th></tr></thead><tbody>");
    for c in &list {
        let _ = write!(
            b,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            config_link(&c.config_key),
            c.runs,
            c.points,
            when(c.last_finished_unix)
        );
    }
    b.push_str("</tbody></table>");
    Ok(layout("Configs", &b))
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConfigQuery {
    #[serde(flatten)]
    pub filters: RunsQuery,
    /// Run ids shown at first (comma-separated); default: the newest few.
    pub runs: Option<String>,
}

/// `/config/<key>`: the config's Pareto curves across runs (drawn by the script).
pub async fn config(
    State(app): State<Arc<App>>,
    Path(key): Path<String>,
    Query(q): Query<ConfigQuery>,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, PageError> {
    // The filters are checked here so that a bad one is a page, not an empty chart.
    q.filters.filter(None)?;
    let facets = app.read(|s, _| Ok(s.facets()?)).await?;
    let mut b = format!("<h1><span class=\"muted\">config</span> {}</h1>", escape(&key));
    b.push_str(&filters_form(&format!("/config/{}", url_segment(&key)), &q.filters, &facets, false));
    let runs: Vec<String> =
        q.runs.as_deref().unwrap_or("").split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
    b.push_str(&chart_app(&key, raw.as_deref().unwrap_or(""), &runs, None));
    Ok(layout(&key, &b))
}

/// The element the script turns into a chart with its controls: the config, the filters'
/// query string, the runs shown at first (a JSON list) and the baseline run, if any.
fn chart_app(key: &str, query: &str, runs: &[String], baseline: Option<&str>) -> String {
    let runs = serde_json::to_string(runs).unwrap_or_else(|_| "[]".into());
    format!(
        "<section class=\"chart-app\" data-config=\"{}\" data-query=\"{}\" data-runs=\"{}\" data-baseline=\"{}\">\
         <p class=\"loading\">Loading the points of {}…</p><noscript>The charts need JavaScript; <a href=\"/api/config/{}\">the data</a> is JSON.</noscript></section>",
        escape(key),
        escape(query),
        escape(&runs),
        escape(baseline.unwrap_or("")),
        escape(key),
        url_segment(key)
    )
}

fn point_row(run_id: &str, p: &PointRow) -> String {
    let m = p.metrics.clone().unwrap_or_default();
    let ns = p.frontier.get(&crate::pareto::View::E2eNormIntvtyP90);
    let frontier = match ns {
        Some(f) if f.on_frontier => "yes".to_string(),
        Some(f) => match &f.dominated_by {
            Some(d) => format!("no, dominated by {}", escape(d.strip_prefix(&format!("{}/", p.config_key)).unwrap_or(d))),
            None => "no".into(),
        },
        None => "-".into(),
    };
    let status = if p.valid { escape(&p.status) } else { format!("{} <span class=\"bad\">invalid</span>", escape(&p.status)) };
    let reasons = if p.invalid_reasons.is_empty() && p.status_reason.is_none() {
        String::new()
    } else {
        let mut r: Vec<String> = p.invalid_reasons.clone();
        r.extend(p.status_reason.clone());
        format!("<div class=\"reason\">{}</div>", escape(&r.join("; ")))
    };
    let files: Vec<String> = p
        .files
        .iter()
        .filter(|f| f.kind == "aggregate" || f.kind == "records")
        .map(|f| format!("<a href=\"/runs/{}/files/{}\">{}</a>", url_segment(run_id), path_url(&f.path), escape(&f.kind)))
        .collect();
    let short = p.point_id.strip_prefix(&format!("{}/", p.config_key)).unwrap_or(&p.point_id);
    format!(
        "<tr><td title=\"{}\">{}</td><td>{}</td><td>{}{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{} / {} / {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
        escape(&p.point_id),
        escape(short),
        kind_badge(&p.result_kind),
        status,
        reasons,
        ci(&m.tput_per_gpu),
        opt(m.output_tput_per_gpu),
        ci(&m.intvty_p90),
        ci(&m.e2e_norm_intvty_p90),
        opt(m.ttft_p50),
        opt(m.ttft_p90),
        opt(m.ttft_p99),
        ci(&m.e2el_p75),
        ci(&m.e2el_p90),
        frontier,
        opt(p.p_frontier),
        files.join(" ")
    )
}

/// `/run/<id>`: what was recorded of a run.
pub async fn run(State(app): State<Arc<App>>, Path(id): Path<String>) -> Result<Html<String>, PageError> {
    let run_id = id.clone();
    let data = app.read(move |s, _| api::read_run(s, &run_id)).await?;
    let (r, info) = (&data.record, &data.run);
    let mut b = format!(
        "<h1><span class=\"muted\">run</span> {}</h1><p class=\"links\">{}</p><dl class=\"meta\">",
        escape(&r.run_id),
        run_links(info)
    );
    let mut item = |k: &str, v: String| {
        let _ = write!(b, "<dt>{k}</dt><dd>{v}</dd>");
    };
    item("finished", when(r.finished_unix));
    item("labels", escape(&r.labels.join(", ")));
    item("configs", r.configs.iter().map(|c| config_link(c)).collect::<Vec<_>>().join(", "));
    item("hardware", escape(&r.hardware.join(", ")));
    item("target", escape(&r.target));
    item("result", kind_badge(&r.result_kind));
    let gate_extra = match (&r.gate_baseline, r.gate_failed_checks) {
        (Some(b), Some(n)) => format!(" against {} ({n} failed check(s))", escape(b)),
        (None, Some(n)) if n > 0 => format!(" ({n} failed check(s))"),
        _ => String::new(),
    };
    item("gate", format!("{}{gate_extra}", gate_badge(r.gate.as_deref())));
    item("points", format!("{} of {} finished with a valid aggregate", r.points_ok, r.points_total));
    if let Some(s) = r.seed {
        item("seed", format!("{s}{}", r.seed_replicates.map(|n| format!(" (+{n} gate seeds)")).unwrap_or_default()));
    }
    if let Some(t) = &r.traces {
        item("traces", escape(t));
    }
    if let Some(h) = &r.head_ref {
        item("head", escape(h));
    }
    if let Some(p) = &r.pr_link {
        item("pull request", web_link(p));
    }
    if let Some(v) = &r.sweep_version {
        item("sweep", escape(v));
    }
    item("folder", format!("{} <span class=\"muted\">on {} ({})</span>", escape(&r.folder), escape(&r.host), escape(&r.source)));
    b.push_str("</dl>");
    // One table per config: its points by their short ids, beside a link to the config's chart.
    for c in &r.configs {
        let _ = write!(
            b,
            "<h2>{} <a class=\"small\" href=\"/config/{}?runs={}\">chart with this run</a></h2><div class=\"scroll\"><table class=\"points\"><thead><tr>\
             <th>point</th><th>result</th><th>status</th><th>tok/s/GPU</th><th>output tok/s/GPU</th><th>P90 intvty</th>\
             <th>P90 E2E-norm intvty</th><th>TTFT p50 / p90 / p99 s</th><th>E2EL p75 s</th><th>E2EL p90 s</th><th>North Star frontier</th>\
             <th>p(frontier)</th><th>files</th></tr></thead><tbody>",
            config_link(c),
            url_segment(c),
            url_segment(&r.run_id)
        );
        for p in data.points.iter().filter(|p| &p.config_key == c) {
            b.push_str(&point_row(&r.run_id, p));
        }
        b.push_str("</tbody></table></div>");
    }
    b.push_str(
        "<p class=\"muted\">Bracketed: 95% request-bootstrap intervals. tok/s/GPU counts input (cached included) and output tokens.</p>",
    );
    if !data.evals.is_empty() {
        b.push_str("<h2>Evals</h2><table><thead><tr><th>point</th><th>task</th><th>metric</th><th>score</th></tr></thead><tbody>");
        for e in &data.evals {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{:.4}</td></tr>",
                escape(&e.point_id),
                escape(&e.task),
                escape(&e.metric),
                e.score
            );
        }
        b.push_str("</tbody></table>");
    }
    Ok(layout(&r.run_id, &b))
}

/// `/compare?run=<id>[&baseline=<id>]`: every gated metric of every shared point, coloured by
/// what the gate's noise model makes of the change, and both runs' curves.
pub async fn compare(State(app): State<Arc<App>>, Query(q): Query<CompareQuery>) -> Result<Html<String>, PageError> {
    let run = q.run()?;
    let baseline = q.baseline.clone().filter(|b| !b.trim().is_empty());
    let c: ComparePayload = app.read(move |s, _| api::read_compare(s, &run, baseline.as_deref())).await?;
    let mut b = format!(
        "<h1><span class=\"muted\">run</span> <a href=\"{}\">{}</a> <span class=\"muted\">against its baseline</span></h1>",
        escape(&c.run.url),
        escape(&c.run.id)
    );
    let _ = write!(
        b,
        "<form class=\"filters\" method=\"get\" action=\"/compare\"><input type=\"hidden\" name=\"run\" value=\"{}\">{}<button type=\"submit\">Compare</button></form>",
        escape(&c.run.id),
        text_input("baseline", "baseline run", "text", c.baseline.as_ref().map(|r| r.id.as_str()))
    );
    let Some(base) = &c.baseline else {
        let _ = write!(b, "<p class=\"empty\">No baseline: the store has no {}. Give one above.</p>", escape(&c.baseline_rule));
        return Ok(layout("Compare", &b));
    };
    let count = |s: &str| c.deltas.iter().filter(|d| d.significance == s).count();
    let _ = write!(
        b,
        "<p>Baseline <a href=\"{}\">{}</a> ({}, finished {}): {}. <span class=\"sig-regression\">{} regression(s)</span>, \
         <span class=\"sig-improvement\">{} improvement(s)</span>, <span class=\"sig-noise\">{} within noise</span>.</p>",
        escape(&base.url),
        escape(&base.id),
        gate_badge(base.gate.as_deref()),
        when(base.finished_unix),
        escape(&c.baseline_rule),
        count("regression"),
        count("improvement"),
        count("within noise")
    );
    b.push_str(
        "<p class=\"muted\">Each metric as the gate judges it: paired on the seeds both runs replayed when they share enough (the values are \
         then means over those seeds), else Welch on each run's seeds, else the request-bootstrap intervals. A change fails the gate when it \
         is worse by more than the threshold shown.</p>",
    );
    b.push_str(
        "<table class=\"deltas\"><thead><tr><th>point</th><th>metric</th><th>baseline</th><th>run</th><th>change</th>\
         <th>fails beyond</th><th>judged</th><th>noise model</th></tr></thead><tbody>",
    );
    for d in &c.deltas {
        let class = match d.significance {
            "regression" => "sig-regression",
            "improvement" => "sig-improvement",
            _ => "sig-noise",
        };
        let _ = write!(
            b,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:+.1}%</td>\
             <td class=\"num\">{:.1}%</td><td>{}</td><td class=\"muted\">{}</td></tr>",
            escape(&d.point),
            escape(payload::metric_label(&d.metric)),
            fmt_value(d.base),
            fmt_value(d.new),
            d.change_pct,
            d.threshold_pct,
            d.significance,
            escape(&d.model)
        );
    }
    b.push_str("</tbody></table>");
    for (what, list) in [("only in the run", &c.only_in_run), ("only in the baseline", &c.only_in_baseline)] {
        if !list.is_empty() {
            let _ = write!(b, "<p class=\"muted\">Points {what}: {}</p>", escape(&list.join(", ")));
        }
    }
    let runs = [c.run.id.clone(), base.id.clone()];
    for key in &c.run.configs {
        let _ = write!(b, "<h2>{}</h2>", config_link(key));
        b.push_str(&chart_app(key, "", &runs, Some(&base.id)));
    }
    Ok(layout("Compare", &b))
}
