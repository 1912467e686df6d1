//! `sweep store check`: SQLite's own integrity check, the schema version, rows that lost their
//! run (possible only when a store was written with foreign keys off, or edited by hand), and runs
//! recorded on this machine whose folder or per-request files are gone.

use super::backend::{Row, Val};
use super::{Store, StoreError, schema};
use serde::Serialize;
use std::path::Path;

/// What `sweep store check` found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CheckReport {
    pub location: String,
    /// What SQLite's `PRAGMA quick_check` reported besides "ok" (empty on PostgreSQL): a damaged
    /// file. The other checks are skipped then, as their queries read the same pages.
    pub integrity: Vec<String>,
    pub schema_version: i64,
    pub supported_version: i64,
    pub runs: i64,
    pub points: i64,
    /// `(run id, point id)` of points whose run is not in the store.
    pub orphan_points: Vec<(String, String)>,
    /// Files and eval scores whose point is not in the store.
    pub orphan_files: i64,
    pub orphan_evals: i64,
    /// Stored bodies no run or point refers to any more (harmless: space only).
    pub unreferenced_blobs: i64,
    /// `(run id, folder)` of runs recorded on this machine whose folder is gone.
    pub missing_folders: Vec<(String, String)>,
    /// `(run id, path)` of per-request and other point files gone from a folder that is here.
    pub missing_files: Vec<(String, String)>,
    /// Runs recorded on other machines (their folders cannot be checked here).
    pub other_hosts: i64,
}

impl CheckReport {
    /// Every problem, one line each; empty when the store is sound.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for line in &self.integrity {
            out.push(format!(
                "damaged file (SQLite quick_check): {line}; restore the store from a copy, or record the run folders again into a new store with `sweep import`"
            ));
        }
        for (run, point) in &self.orphan_points {
            out.push(format!("orphan point: {point} of run {run}, which is not in the store"));
        }
        if self.orphan_files > 0 {
            out.push(format!("{} file record(s) of points not in the store", self.orphan_files));
        }
        if self.orphan_evals > 0 {
            out.push(format!("{} eval score(s) of points not in the store", self.orphan_evals));
        }
        for (run, folder) in &self.missing_folders {
            out.push(format!("run {run}: its folder {folder} is gone (re-record it from a copy with `sweep import`, or remove it with `sweep store remove {run}`)"));
        }
        for (run, path) in &self.missing_files {
            out.push(format!("run {run}: {path} is gone from its folder"));
        }
        out
    }
}

impl Store {
    /// Checks the store; `this_host` decides which folders can be looked at.
    pub fn check(&mut self, this_host: &str) -> Result<CheckReport, StoreError> {
        let count =
            |s: &mut Store, sql: &str| -> Result<i64, StoreError> { Ok(s.rows(sql, &[])?.first().map(|r| Row(r).int(0)).unwrap_or(0)) };
        let mut r = CheckReport { location: self.location.to_string(), supported_version: schema::CURRENT, ..Default::default() };
        if self.conn.kind() == super::backend::Kind::Sqlite {
            r.integrity = match self.rows("PRAGMA quick_check", &[]) {
                Ok(rows) => rows.iter().map(|x| Row(x).text(0)).filter(|t| t != "ok").collect(),
                Err(e) => vec![e.to_string()],
            };
            if !r.integrity.is_empty() {
                return Ok(r);
            }
        }
        r.schema_version = self.schema_version()?;
        r.runs = count(self, "SELECT COUNT(*) FROM runs")?;
        r.points = count(self, "SELECT COUNT(*) FROM points")?;
        r.orphan_points = self
            .rows("SELECT p.run_id, p.point_id FROM points p LEFT JOIN runs r ON r.run_id = p.run_id WHERE r.run_id IS NULL ORDER BY p.run_id, p.point_id", &[])?
            .iter()
            .map(|x| (Row(x).text(0), Row(x).text(1)))
            .collect();
        r.orphan_files = count(
            self,
            "SELECT COUNT(*) FROM point_files f LEFT JOIN points p ON p.run_id = f.run_id AND p.point_id = f.point_id WHERE p.run_id IS NULL",
        )?;
        r.orphan_evals = count(
            self,
            "SELECT COUNT(*) FROM evals e LEFT JOIN points p ON p.run_id = e.run_id AND p.point_id = e.point_id WHERE p.run_id IS NULL",
        )?;
        r.unreferenced_blobs = count(
            self,
            "SELECT COUNT(*) FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM points p WHERE p.profiles_hash = b.hash OR p.launch_hash = b.hash) AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.changelog_hash = b.hash)",
        )?;
        let runs = self.rows("SELECT run_id, folder, host FROM runs ORDER BY run_id", &[])?;
        for x in &runs {
            let (id, folder, host) = (Row(x).text(0), Row(x).text(1), Row(x).text(2));
            if host != this_host {
                r.other_hosts += 1;
                continue;
            }
            let dir = Path::new(&folder);
            if !dir.is_dir() {
                r.missing_folders.push((id, folder));
                continue;
            }
            for f in self.rows("SELECT path FROM point_files WHERE run_id = $1 ORDER BY path", &[Val::text(&id)])? {
                let rel = Row(&f).text(0);
                if !dir.join(&rel).is_file() {
                    r.missing_files.push((id.clone(), rel));
                }
            }
        }
        Ok(r)
    }
}
