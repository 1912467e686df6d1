//! Reads the web dashboard (`sweep serve`) needs beyond the read API of `query.rs`: the values
//! its filters offer, runs narrowed by framework, a config's points as its charts draw them, and
//! many stored bodies at once.

use super::backend::{Row, Val};
use super::types::{POINT_COLS, PointRow, RunFilter, RunPoint, RunRow, split_list};
use super::{Store, StoreError};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The distinct values the runs list can be filtered by.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Facets {
    pub configs: Vec<String>,
    /// Runner labels and hardware profiles of recorded points.
    pub hardware: Vec<String>,
    pub frameworks: Vec<String>,
}

impl Store {
    fn dashboard_rows(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        self.conn.query(sql, params).map_err(|e| self.err(e))
    }

    fn distinct(&mut self, sql: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.dashboard_rows(sql, &[])?;
        Ok(rows.iter().filter_map(|r| Row(r).opt_text(0)).filter(|s| !s.is_empty()).collect())
    }

    /// Config keys, hardware (runner labels and hardware profiles) and frameworks of every
    /// recorded point, each sorted.
    pub fn facets(&mut self) -> Result<Facets, StoreError> {
        let configs = self.distinct("SELECT DISTINCT config_key FROM points ORDER BY config_key")?;
        let mut hardware: BTreeSet<String> = self.distinct("SELECT DISTINCT hardware FROM points")?.into_iter().collect();
        hardware.extend(self.distinct("SELECT DISTINCT hardware_profile FROM points")?);
        let frameworks = self.distinct("SELECT DISTINCT framework FROM points ORDER BY framework")?;
        Ok(Facets { configs, hardware: hardware.into_iter().collect(), frameworks })
    }

    /// Runs matching `f` that also have a point of `framework` (any case) when one is given,
    /// newest first; `f.limit` counts the runs kept.
    pub fn runs_of_framework(&mut self, f: &RunFilter, framework: Option<&str>) -> Result<Vec<RunRow>, StoreError> {
        let Some(fw) = framework.filter(|s| !s.is_empty()) else { return self.runs(f) };
        let rows =
            self.dashboard_rows("SELECT DISTINCT run_id FROM points WHERE LOWER(framework) = $1", &[Val::text(fw.to_lowercase())])?;
        let ids: BTreeSet<String> = rows.iter().map(|r| Row(r).text(0)).collect();
        let mut runs = self.runs(&RunFilter { limit: None, ..f.clone() })?;
        runs.retain(|r| ids.contains(&r.run_id));
        if let Some(n) = f.limit {
            runs.truncate(n);
        }
        Ok(runs)
    }

    /// Every point of `config_key` with its run's finish time, labels and gate, newest run
    /// first and each run's points in plan order: what the charts draw. Unlike
    /// [`Store::config_points`] it leaves out the points' seed replicates (the charts do not use
    /// them, and decoding them was most of the time a page of 500 runs took) and takes no run
    /// filter: the caller keeps the runs it shows.
    pub fn chart_points(&mut self, config_key: &str) -> Result<Vec<RunPoint>, StoreError> {
        let cols: Vec<String> =
            POINT_COLS.iter().map(|c| if *c == "seeds" { "CAST(NULL AS TEXT)".to_string() } else { format!("p.{c}") }).collect();
        let sql = format!(
            "SELECT r.finished_unix, r.labels, r.gate, {} FROM points p JOIN runs r ON r.run_id = p.run_id WHERE p.config_key = $1 \
             ORDER BY r.finished_unix DESC, r.run_id DESC, p.ord",
            cols.join(", ")
        );
        let rows = self.dashboard_rows(&sql, &[Val::text(config_key)])?;
        Ok(rows
            .into_iter()
            .map(|mut r| {
                let (head, rest) = r.split_at_mut(3);
                let head = Row(head);
                let point = PointRow::from_row(rest);
                RunPoint {
                    run_id: point.run_id.clone(),
                    finished_unix: head.int(0),
                    labels: split_list(&head.text(1)),
                    gate: head.opt_text(2),
                    point,
                }
            })
            .collect())
    }

    /// Stored JSON bodies (profiles, launches) by digest, in one query per hundred digests;
    /// digests not stored are left out.
    pub fn blobs(&mut self, hashes: &BTreeSet<String>) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        let mut out = BTreeMap::new();
        let hashes: Vec<&String> = hashes.iter().collect();
        for chunk in hashes.chunks(100) {
            let params: Vec<Val> = chunk.iter().map(|h| Val::text(h.as_str())).collect();
            let marks: Vec<String> = (1..=params.len()).map(|i| format!("${i}")).collect();
            let sql = format!("SELECT hash, body FROM blobs WHERE hash IN ({})", marks.join(", "));
            for r in self.dashboard_rows(&sql, &params)? {
                let r = Row(&r);
                if let Some(v) = r.opt_text(1).and_then(|t| serde_json::from_str(&t).ok()) {
                    out.insert(r.text(0), v);
                }
            }
        }
        Ok(out)
    }
}
