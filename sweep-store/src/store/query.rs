//! The store's read API: runs by filter, a run's points and files, a config's points across runs,
//! the last passing run of a set of recipe fingerprints, and a run rebuilt as a `RunSummary`
//! (the baseline of `sweep gate` and `compare` when its folder is not on this machine).

use super::backend::{Row, Val};
use super::types::{ConfigSummary, EvalScore, PointFile, PointRow, RUN_COLS, RunFilter, RunPoint, RunRow, select_list};
use super::{Store, StoreError, gunzip};
use crate::pareto::{self, View};
use crate::results::{PointResult, RunSummary, Status};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// `LIKE` pattern of a literal (`%`, `_` and `\` escaped; used with `ESCAPE '\'`).
fn like_literal(s: &str) -> String {
    s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// `LIKE` pattern of a glob: `*` any text, `?` one character.
fn like_glob(s: &str) -> String {
    like_literal(s).replace('*', "%").replace('?', "_")
}

/// The `WHERE` conditions of a filter on runs aliased `r`; parameters appended to `params`.
fn run_conditions(f: &RunFilter, params: &mut Vec<Val>) -> Vec<String> {
    let mut w = Vec::new();
    let mut p = |v: Val| {
        params.push(v);
        format!("${}", params.len())
    };
    if let Some(c) = &f.config {
        let cond = if c.contains(['*', '?']) {
            format!("q.config_key LIKE {} ESCAPE '\\'", p(Val::text(like_glob(c))))
        } else {
            format!("q.config_key = {}", p(Val::text(c)))
        };
        w.push(format!("EXISTS (SELECT 1 FROM points q WHERE q.run_id = r.run_id AND {cond})"));
    }
    if let Some(l) = &f.label {
        w.push(format!("r.labels LIKE {} ESCAPE '\\'", p(Val::text(format!("% {} %", like_literal(&super::types::list_item(l)))))));
    }
    if let Some(h) = &f.hardware {
        w.push(format!("LOWER(r.hardware) LIKE {} ESCAPE '\\'", p(Val::text(format!("%{}%", like_literal(&h.to_lowercase()))))));
    }
    if let Some(k) = &f.kind {
        w.push(format!("(r.result_kind = {} OR r.result_kind = 'mixed')", p(Val::text(k))));
    }
    if let Some(s) = f.since {
        w.push(format!("r.finished_unix >= {}", p(Val::Int(s))));
    }
    if let Some(u) = f.until {
        w.push(format!("r.finished_unix < {}", p(Val::Int(u))));
    }
    if let Some(g) = &f.gate {
        w.push(format!("r.gate = {}", p(Val::text(g))));
    }
    w
}

fn where_sql(conds: &[String]) -> String {
    if conds.is_empty() { String::new() } else { format!(" WHERE {}", conds.join(" AND ")) }
}

fn limit_sql(limit: Option<usize>, params: &mut Vec<Val>) -> String {
    match limit {
        Some(n) => {
            params.push(Val::int(n));
            format!(" LIMIT ${}", params.len())
        }
        None => String::new(),
    }
}

impl Store {
    pub(super) fn rows(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        self.conn.query(sql, params).map_err(|e| self.err(e))
    }

    /// Runs matching `f`, newest first.
    pub fn runs(&mut self, f: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let mut params = Vec::new();
        let conds = run_conditions(f, &mut params);
        let sql = format!(
            "SELECT {} FROM runs r{} ORDER BY r.finished_unix DESC, r.run_id DESC{}",
            select_list("r", RUN_COLS),
            where_sql(&conds),
            limit_sql(f.limit, &mut params)
        );
        let rows = self.rows(&sql, &params)?.into_iter().map(|mut r| RunRow::from_row(&mut r)).collect();
        self.with_changelogs(rows)
    }

    /// Fills each run's changelog entries from the blob table, reading and parsing each
    /// distinct body once (the runs of one changelog entry share it).
    fn with_changelogs(&mut self, rows: Vec<(RunRow, Option<String>)>) -> Result<Vec<RunRow>, StoreError> {
        let mut hashes: Vec<&str> = rows.iter().filter_map(|(_, h)| h.as_deref()).collect();
        hashes.sort_unstable();
        hashes.dedup();
        let mut bodies: HashMap<String, serde_json::Value> = HashMap::new();
        for chunk in hashes.chunks(500) {
            let list: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let params: Vec<Val> = chunk.iter().map(|h| Val::text(*h)).collect();
            let sql = format!("SELECT hash, body FROM blobs WHERE hash IN ({})", list.join(", "));
            for r in self.rows(&sql, &params)? {
                let r = Row(&r);
                if let Some(v) = r.opt_text(1).and_then(|t| serde_json::from_str(&t).ok()) {
                    bodies.insert(r.text(0), v);
                }
            }
        }
        Ok(rows
            .into_iter()
            .map(|(mut run, h)| {
                run.changelog = h.and_then(|h| bodies.get(&h).cloned());
                run
            })
            .collect())
    }

    /// How many runs match `f` (its limit aside).
    pub fn count_runs(&mut self, f: &RunFilter) -> Result<i64, StoreError> {
        let mut params = Vec::new();
        let conds = run_conditions(f, &mut params);
        let rows = self.rows(&format!("SELECT COUNT(*) FROM runs r{}", where_sql(&conds)), &params)?;
        Ok(rows.first().map(|r| Row(r).int(0)).unwrap_or(0))
    }

    /// One run.
    pub fn run(&mut self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        let sql = format!("SELECT {} FROM runs r WHERE r.run_id = $1", select_list("r", RUN_COLS));
        let rows = self.rows(&sql, &[Val::text(run_id)])?.into_iter().take(1).map(|mut r| RunRow::from_row(&mut r)).collect();
        Ok(self.with_changelogs(rows)?.pop())
    }

    /// A run's points in plan order, each with its files.
    pub fn points(&mut self, run_id: &str) -> Result<Vec<PointRow>, StoreError> {
        let sql = format!("SELECT {} FROM points p WHERE p.run_id = $1 ORDER BY p.ord", select_list("p", super::types::POINT_COLS));
        let mut points: Vec<PointRow> =
            self.rows(&sql, &[Val::text(run_id)])?.into_iter().map(|mut r| PointRow::from_row(&mut r)).collect();
        let mut files = self.files(run_id, None)?;
        for p in &mut points {
            p.files = files.remove(&p.point_id).unwrap_or_default();
        }
        Ok(points)
    }

    /// One point of a run, with its files.
    pub fn point(&mut self, run_id: &str, point_id: &str) -> Result<Option<PointRow>, StoreError> {
        let sql = format!("SELECT {} FROM points p WHERE p.run_id = $1 AND p.point_id = $2", select_list("p", super::types::POINT_COLS));
        let Some(mut p) =
            self.rows(&sql, &[Val::text(run_id), Val::text(point_id)])?.into_iter().next().map(|mut r| PointRow::from_row(&mut r))
        else {
            return Ok(None);
        };
        p.files = self.files(run_id, Some(point_id))?.remove(point_id).unwrap_or_default();
        Ok(Some(p))
    }

    fn files(&mut self, run_id: &str, point: Option<&str>) -> Result<BTreeMap<String, Vec<PointFile>>, StoreError> {
        let mut params = vec![Val::text(run_id)];
        let mut sql = "SELECT point_id, path, kind, bytes FROM point_files WHERE run_id = $1".to_string();
        if let Some(p) = point {
            params.push(Val::text(p));
            sql.push_str(" AND point_id = $2");
        }
        sql.push_str(" ORDER BY point_id, path");
        let mut out: BTreeMap<String, Vec<PointFile>> = BTreeMap::new();
        for r in self.rows(&sql, &params)? {
            let r = Row(&r);
            out.entry(r.text(0)).or_default().push(PointFile { path: r.text(1), kind: r.text(2), bytes: r.int(3) });
        }
        Ok(out)
    }

    /// A run's eval scores.
    pub fn evals(&mut self, run_id: &str) -> Result<Vec<EvalScore>, StoreError> {
        let rows = self.rows(
            "SELECT point_id, file, task, metric, score FROM evals WHERE run_id = $1 ORDER BY point_id, file, task, metric",
            &[Val::text(run_id)],
        )?;
        Ok(rows
            .iter()
            .map(|r| {
                let r = Row(r);
                EvalScore {
                    point_id: r.text(0),
                    file: r.text(1),
                    task: r.text(2),
                    metric: r.text(3),
                    score: r.opt_real(4).unwrap_or(f64::NAN),
                }
            })
            .collect())
    }

    /// The points of `config_key` in the runs matching `f` (its `config` aside), newest run
    /// first, each run's points in plan order. Files are left out (see [`Store::point`]).
    pub fn config_points(&mut self, config_key: &str, f: &RunFilter) -> Result<Vec<RunPoint>, StoreError> {
        self.points_where("p.config_key", config_key, f)
    }

    /// One point id across the runs matching `f`, newest first (how a point moved), with its files.
    pub fn point_history(&mut self, point_id: &str, f: &RunFilter) -> Result<Vec<RunPoint>, StoreError> {
        let mut out = self.points_where("p.point_id", point_id, f)?;
        for rp in &mut out {
            rp.point.files = self.files(&rp.run_id, Some(point_id))?.remove(point_id).unwrap_or_default();
        }
        Ok(out)
    }

    fn points_where(&mut self, column: &str, value: &str, f: &RunFilter) -> Result<Vec<RunPoint>, StoreError> {
        let mut params = vec![Val::text(value)];
        let mut conds = vec![format!("{column} = $1")];
        let filter = RunFilter { config: None, limit: None, ..f.clone() };
        conds.extend(run_conditions(&filter, &mut params));
        let sql = format!(
            "SELECT r.finished_unix, r.labels, r.gate, {} FROM points p JOIN runs r ON r.run_id = p.run_id WHERE {} ORDER BY r.finished_unix DESC, r.run_id DESC, p.ord",
            select_list("p", super::types::POINT_COLS),
            conds.join(" AND ")
        );
        let mut out: Vec<RunPoint> = self
            .rows(&sql, &params)?
            .into_iter()
            .map(|mut r| {
                let (head, rest) = r.split_at_mut(3);
                let head = Row(head);
                let point = PointRow::from_row(rest);
                RunPoint {
                    run_id: point.run_id.clone(),
                    finished_unix: head.int(0),
                    labels: super::types::split_list(&head.text(1)),
                    gate: head.opt_text(2),
                    point,
                }
            })
            .collect();
        // The limit counts runs, not points (rows come grouped by run, newest first).
        if let Some(n) = f.limit {
            let mut seen = 0;
            let mut last: Option<String> = None;
            out.retain(|p| {
                if last.as_deref() != Some(p.run_id.as_str()) {
                    seen += 1;
                    last = Some(p.run_id.clone());
                }
                seen <= n
            });
        }
        Ok(out)
    }

    /// Every config key with its number of runs and points and its latest run.
    pub fn configs(&mut self) -> Result<Vec<ConfigSummary>, StoreError> {
        let rows = self.rows(
            "SELECT p.config_key, COUNT(DISTINCT p.run_id), COUNT(*), MAX(r.finished_unix) FROM points p JOIN runs r ON r.run_id = p.run_id GROUP BY p.config_key ORDER BY p.config_key",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| {
                let r = Row(r);
                ConfigSummary { config_key: r.text(0), runs: r.int(1), points: r.int(2), last_finished_unix: r.int(3) }
            })
            .collect())
    }

    /// The newest run whose gate passed and that has a point of every one of `fingerprints`
    /// (of result kind `kind` when given), other than `exclude`, finished at or before `before`.
    pub fn last_pass(
        &mut self,
        fingerprints: &[String],
        kind: Option<&str>,
        exclude: Option<&str>,
        before: Option<i64>,
    ) -> Result<Option<RunRow>, StoreError> {
        if fingerprints.is_empty() {
            return Ok(None);
        }
        let mut params: Vec<Val> = vec![Val::text(exclude.unwrap_or(""))];
        let mut conds = vec!["r.gate = 'pass'".to_string(), "r.run_id <> $1".to_string()];
        if let Some(k) = kind.filter(|k| !k.is_empty()) {
            params.push(Val::text(k));
            conds.push(format!("r.result_kind = ${}", params.len()));
        }
        if let Some(b) = before {
            params.push(Val::Int(b));
            conds.push(format!("r.finished_unix <= ${}", params.len()));
        }
        let list: Vec<String> = fingerprints
            .iter()
            .map(|f| {
                params.push(Val::text(f));
                format!("${}", params.len())
            })
            .collect();
        conds.push(format!(
            "(SELECT COUNT(DISTINCT q.recipe_fingerprint) FROM points q WHERE q.run_id = r.run_id AND q.recipe_fingerprint IN ({})) = {}",
            list.join(", "),
            fingerprints.len()
        ));
        let sql = format!(
            "SELECT {} FROM runs r WHERE {} ORDER BY r.finished_unix DESC, r.run_id DESC LIMIT 1",
            select_list("r", RUN_COLS),
            conds.join(" AND ")
        );
        let rows = self.rows(&sql, &params)?.into_iter().take(1).map(|mut r| RunRow::from_row(&mut r)).collect();
        Ok(self.with_changelogs(rows)?.pop())
    }

    /// The run's folder and the machine it is on.
    pub fn run_folder(&mut self, run_id: &str) -> Result<Option<(PathBuf, String)>, StoreError> {
        let rows = self.rows("SELECT folder, host FROM runs WHERE run_id = $1", &[Val::text(run_id)])?;
        Ok(rows.first().map(|r| (PathBuf::from(Row(r).text(0)), Row(r).text(1))))
    }

    /// A stored JSON body (a point's profiles or launch) by its digest.
    pub fn blob(&mut self, hash: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let rows = self.rows("SELECT body FROM blobs WHERE hash = $1", &[Val::text(hash)])?;
        Ok(rows.first().and_then(|r| Row(r).opt_text(0)).and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// The run's `plan.json`, as it was written.
    pub fn plan(&mut self, run_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let rows = self.rows("SELECT plan_gz FROM run_plans WHERE run_id = $1", &[Val::text(run_id)])?;
        Ok(rows.first().and_then(|r| Row(r).opt_bytes(0)).and_then(|b| gunzip(&b)).and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// The run as a `RunSummary` rebuilt from the store: statuses, Pareto points with their
    /// intervals and frontier probabilities, frontiers, seed replicates, profiles and launches.
    /// Aggregates other than the headline metrics are not stored, so `summary` is empty.
    pub fn run_summary(&mut self, run_id: &str) -> Result<Option<RunSummary>, StoreError> {
        let Some(run) = self.run(run_id)? else { return Ok(None) };
        let rows = self.points(run_id)?;
        let mut points = Vec::new();
        for p in &rows {
            let profiles = match &p.profiles_hash {
                Some(h) => self.blob(h)?.unwrap_or_default(),
                None => serde_json::Value::Null,
            };
            let launch = match &p.launch_hash {
                Some(h) => self.blob(h)?.and_then(|v| serde_json::from_value(v).ok()),
                None => None,
            };
            points.push(point_result(p, profiles, launch));
        }
        let curves = rebuild_curves(&rows);
        Ok(Some(RunSummary {
            run_id: run.run_id,
            labels: run.labels,
            target: run.target,
            created_unix: run.finished_unix.max(0) as u64,
            seed: run.seed.unwrap_or(42).max(0) as u64,
            replicates: 200,
            points,
            curves,
            // Eval points are stored as scores (`Store::evals`), not as plan points.
            evals: Vec::new(),
        }))
    }
}

fn point_result(p: &PointRow, profiles: serde_json::Value, launch: Option<crate::recipe::serving::Launch>) -> PointResult {
    let reason = p.status_reason.clone().unwrap_or_default();
    let status = match p.status.as_str() {
        "done" => Status::Done,
        "failed" => Status::Failed { reason },
        "cancelled" => Status::Cancelled { reason },
        "interrupted" => Status::Interrupted { reason },
        _ => Status::Pending,
    };
    let pareto = p.metrics.as_ref().filter(|_| !p.frontier.is_empty()).map(|m| {
        let views = [
            (View::E2eNormIntvtyP90, m.e2e_norm_intvty_p90),
            (View::IntvtyP90, m.intvty_p90),
            (View::E2elP90, m.e2el_p90),
            (View::E2elP75, m.e2el_p75),
        ];
        pareto::Point {
            id: p.point_id.clone(),
            curve: p.config_key.clone(),
            arm: p.arm.clone(),
            conc: p.conc as u32,
            valid: p.valid,
            y: m.tput_per_gpu.value,
            x: views.iter().map(|(v, c)| (*v, c.value)).collect(),
            y_ci: (m.tput_per_gpu.lo.unwrap_or(m.tput_per_gpu.value), m.tput_per_gpu.hi.unwrap_or(m.tput_per_gpu.value)),
            x_ci: views.iter().filter_map(|(v, c)| Some((*v, (c.lo?, c.hi?)))).collect(),
            p_frontier: p.p_frontier.unwrap_or(0.0),
            // The store keeps the output rate without its interval.
            y_out: m.output_tput_per_gpu.unwrap_or(0.0),
            y_out_ci: (m.output_tput_per_gpu.unwrap_or(0.0), m.output_tput_per_gpu.unwrap_or(0.0)),
        }
    });
    PointResult {
        id: p.point_id.clone(),
        config_key: p.config_key.clone(),
        arm: p.arm.clone(),
        conc: p.conc as u32,
        gpus: p.gpus as u32,
        matrix: p.matrix.clone().unwrap_or_default(),
        seq: None,
        status,
        result_kind: p.result_kind.clone(),
        profiles,
        trace_set: p.trace_set.clone().unwrap_or_default(),
        summary: None,
        pareto,
        launch,
        seeds: p.seeds.clone(),
        wall_s: p.wall_s.unwrap_or(0.0),
    }
}

/// Frontiers and coverage per curve from the stored flags.
fn rebuild_curves(points: &[PointRow]) -> Vec<pareto::CurveResult> {
    // A config's curve, per ISL/OSL for fixed-seq-len points (`PointResult::curve_key`).
    let mut curves: BTreeMap<String, Vec<&PointRow>> = BTreeMap::new();
    for p in points.iter().filter(|p| !p.frontier.is_empty()) {
        let key = crate::results::curve_key(&p.config_key, p.matrix.as_deref().and_then(crate::results::seq_of_matrix));
        curves.entry(key).or_default().push(p);
    }
    curves
        .into_iter()
        .map(|(curve, pts)| {
            let mut views = BTreeMap::new();
            for v in pareto::VIEWS {
                let x = |p: &PointRow| {
                    let m = p.metrics.as_ref();
                    m.map(|m| match v {
                        View::E2eNormIntvtyP90 => m.e2e_norm_intvty_p90.value,
                        View::IntvtyP90 => m.intvty_p90.value,
                        View::E2elP90 => m.e2el_p90.value,
                        View::E2elP75 => m.e2el_p75.value,
                    })
                    .unwrap_or(f64::NAN)
                };
                let mut front: Vec<&PointRow> = pts.iter().copied().filter(|p| p.frontier.get(&v).is_some_and(|f| f.on_frontier)).collect();
                front.sort_by(|a, b| x(a).total_cmp(&x(b)));
                let dominated_by =
                    pts.iter().filter_map(|p| Some((p.point_id.clone(), p.frontier.get(&v)?.dominated_by.clone()?))).collect();
                views.insert(v, pareto::ViewResult { frontier: front.iter().map(|p| p.point_id.clone()).collect(), dominated_by });
            }
            let valid = pts.iter().filter(|p| p.valid).count();
            let coverage = pareto::Coverage {
                measured: pts.len(),
                invalid: pts.len() - valid,
                frontier: views.get(&View::E2eNormIntvtyP90).map_or(0, |r| r.frontier.len()),
                pass: valid >= pareto::MIN_VALID_POINTS,
            };
            pareto::CurveResult { curve: curve.to_string(), views, coverage }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_literals_escape_like_patterns() {
        assert_eq!(like_glob("dsv4*-c?_x"), "dsv4%-c_\\_x");
        assert_eq!(like_literal("100%"), "100\\%");
    }
}
