//! The results store: every finished run, its points, aggregates, Pareto frontiers, gate verdict
//! and eval scores, in an embedded SQLite file (default `reports/sweep.db`) or a PostgreSQL
//! database shared by a team (`--store postgres://…`). One schema, versioned migrations
//! (`schema.rs`), one transaction per recorded run, idempotent by run id (recording a run again
//! replaces it). Per-request records stay in the run folder; the store points at them.
//!
//! Reading: [`Store::runs`], [`Store::points`], [`Store::config_points`], [`Store::last_pass`],
//! … return plain `Serialize` structs (`types.rs`). Every call blocks: from async code (an axum
//! handler) call it inside `tokio::task::spawn_blocking`. `docs/store.md` has the schema.

mod backend;
mod check;
mod dashboard;
pub mod import;
mod query;
mod record;
mod schema;
mod types;

pub use check::CheckReport;
pub use dashboard::Facets;
pub use record::{hostname, read_run_dir};
pub use schema::CURRENT as SCHEMA_VERSION;
pub use types::{Ci, ConfigSummary, EvalScore, PointFile, PointMetrics, PointRow, RunFilter, RunPoint, RunRecord, RunRow, ViewFrontier};

use backend::{Conn, DbError, Val};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable naming the store when `--store` is not given.
pub const STORE_ENV: &str = "SWEEP_STORE";

/// Where a store is: a SQLite file or a PostgreSQL URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Location {
    /// `postgres://…` / `postgresql://…` is PostgreSQL; anything else a SQLite file.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Location::Postgres(s.to_string())
        } else {
            Location::Sqlite(PathBuf::from(s))
        }
    }

    /// `--store` if given, else `SWEEP_STORE`, else `reports/sweep.db` under `repo_root`
    /// (the current directory when there is no repository).
    pub fn resolve(flag: Option<&str>, repo_root: Option<&Path>) -> Location {
        if let Some(f) = flag.filter(|f| !f.is_empty()) {
            return Location::parse(f);
        }
        if let Ok(e) = std::env::var(STORE_ENV)
            && !e.is_empty()
        {
            return Location::parse(&e);
        }
        Location::Sqlite(repo_root.unwrap_or(Path::new(".")).join("reports").join("sweep.db"))
    }
}

impl std::fmt::Display for Location {
    /// The location with any password left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(url) => write!(f, "{}", redact(url)),
        }
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (auth, tail) = match rest.split_once('@') {
        Some(x) => x,
        None => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{tail}"),
        None => url.to_string(),
    }
}

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {location}: {source}")]
    Db { location: String, source: DbError },
    #[error("store {location}: cannot open: {message}")]
    Open { location: String, message: String },
    #[error(
        "no store at {location}: runs are recorded there by `sweep run`, `sweep collect` and `sweep import`; give another with --store or SWEEP_STORE"
    )]
    Missing { location: String },
    #[error(
        "store {location} was written by a newer sweep (schema version {found}; this sweep reads versions up to {supported}): upgrade sweep, or give --store a store of this version"
    )]
    NewerSchema { location: String, found: i64, supported: i64 },
    #[error(
        "store {location} has schema version {found}, older than this sweep's {supported}: run `sweep store migrate --store {location}`"
    )]
    OlderSchema { location: String, found: i64, supported: i64 },
    #[error("{}: {message}", .path.display())]
    Input { path: PathBuf, message: String },
    /// A run id that names no run (`path`: the run's folder).
    #[error("{}: {source}", .path.display())]
    RunId {
        path: PathBuf,
        #[source]
        source: RunIdError,
    },
    /// A run folder whose `summary.json` does not load (`path`: that file).
    #[error("{}: {source}", .path.display())]
    Summary {
        path: PathBuf,
        #[source]
        source: crate::results::SummaryError,
    },
    /// Per-request records that do not read back (`path`: the records file).
    #[error("{}: {source}", .path.display())]
    Records {
        path: PathBuf,
        #[source]
        source: crate::records::ReadJsonlError,
    },
}

/// Why a run id cannot name a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunIdError {
    #[error("the run id is empty: name the run (the run folder's name, or `--run-id NAME`)")]
    Empty,
    #[error("run id {id:?} starts or ends with white space: give it without")]
    Padded { id: String },
    #[error("run id {id:?} holds the control character {control:?}: give a printable name")]
    Control { id: String, control: char },
}

/// How a store is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Created and migrated when needed (recording).
    Write,
    /// Must exist at this sweep's schema version; writes are possible (`sweep store check`).
    Existing,
    /// Must exist; the connection refuses writes (the dashboard, `sweep history`).
    ReadOnly,
}

/// An open store.
pub struct Store {
    conn: Conn,
    location: Location,
}

impl Store {
    /// Opens (and for [`Mode::Write`] creates and migrates) the store at `location`.
    pub fn open(location: &Location, mode: Mode) -> Result<Store, StoreError> {
        let name = location.to_string();
        let conn = match location {
            Location::Sqlite(path) => open_sqlite(path, mode, &name)?,
            Location::Postgres(url) => open_postgres(url, mode, &name)?,
        };
        let mut s = Store { conn, location: location.clone() };
        match mode {
            Mode::Write => {
                // Migrating takes the writer lock: only when the store is not at this version.
                let v = schema::version(&mut s.conn).map_err(|e| s.err(e))?;
                s.refuse_newer(v.unwrap_or(0))?;
                if v != Some(schema::CURRENT) {
                    let now = record::now_unix();
                    let found = s.write_tx(|c| schema::migrate(c, now))?;
                    s.refuse_newer(found)?;
                }
            }
            Mode::Existing | Mode::ReadOnly => {
                let v = schema::version(&mut s.conn).map_err(|e| s.err(e))?;
                match v {
                    None => return Err(StoreError::Missing { location: name }),
                    Some(v) => {
                        s.refuse_newer(v)?;
                        if v < schema::CURRENT {
                            return Err(StoreError::OlderSchema { location: name, found: v, supported: schema::CURRENT });
                        }
                    }
                }
            }
        }
        Ok(s)
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The schema version the store is at.
    pub fn schema_version(&mut self) -> Result<i64, StoreError> {
        schema::version(&mut self.conn).map(|v| v.unwrap_or(0)).map_err(|e| self.err(e))
    }

    fn refuse_newer(&self, found: i64) -> Result<(), StoreError> {
        if found > schema::CURRENT {
            return Err(StoreError::NewerSchema { location: self.location.to_string(), found, supported: schema::CURRENT });
        }
        Ok(())
    }

    fn err(&self, source: DbError) -> StoreError {
        StoreError::Db { location: self.location.to_string(), source }
    }

    /// Runs `f` in a write transaction: SQLite's `BEGIN IMMEDIATE` takes the writer lock at
    /// once (waiting up to the busy timeout), PostgreSQL's conflicts between writers are retried.
    fn write_tx<T>(&mut self, mut f: impl FnMut(&mut Conn) -> Result<T, DbError>) -> Result<T, StoreError> {
        let begin = match self.conn.kind() {
            backend::Kind::Sqlite => "BEGIN IMMEDIATE",
            backend::Kind::Postgres => "BEGIN",
        };
        let mut attempt = 0u32;
        loop {
            let result = self.conn.batch(begin).and_then(|()| f(&mut self.conn)).and_then(|v| self.conn.batch("COMMIT").map(|()| v));
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let _ = self.conn.batch("ROLLBACK");
                    attempt += 1;
                    if !e.retryable() || attempt >= 10 {
                        return Err(self.err(e));
                    }
                    // Spread the retries of writers that collided.
                    let jitter = (std::process::id() as u64 * 7 + attempt as u64 * 13) % 50;
                    std::thread::sleep(std::time::Duration::from_millis(20 * attempt as u64 + jitter));
                }
            }
        }
    }

    /// Records a run in one transaction, replacing any earlier record of the same run id.
    pub fn record(&mut self, rec: &RunRecord) -> Result<(), StoreError> {
        check_run_id(&rec.run.run_id).map_err(|source| StoreError::RunId { path: PathBuf::from(&rec.run.folder), source })?;
        let plans: Vec<Vec<Val>> = rec.plan.iter().map(|p| vec![Val::text(&rec.run.run_id), Val::Bytes(gzip(p))]).collect();
        let run = rec.run.values();
        let mut point_cols = types::POINT_COLS.to_vec();
        point_cols.push("ord");
        let points: Vec<Vec<Val>> = rec
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut v = p.values();
                v.push(Val::int(i));
                v
            })
            .collect();
        let files: Vec<Vec<Val>> = rec
            .points
            .iter()
            .flat_map(|p| {
                p.files.iter().map(|f| {
                    vec![Val::text(&rec.run.run_id), Val::text(&p.point_id), Val::text(&f.path), Val::text(&f.kind), Val::Int(f.bytes)]
                })
            })
            .collect();
        let evals: Vec<Vec<Val>> = rec
            .evals
            .iter()
            .map(|e| {
                vec![
                    Val::text(&rec.run.run_id),
                    Val::text(&e.point_id),
                    Val::text(&e.file),
                    Val::text(&e.task),
                    Val::text(&e.metric),
                    Val::real(e.score),
                ]
            })
            .collect();
        let mut blobs: Vec<Vec<Val>> = rec.blobs.iter().map(|(h, b)| vec![Val::text(h), Val::text(b)]).collect();
        if let Some(c) = &rec.run.changelog {
            let body = c.to_string();
            blobs.push(vec![Val::text(types::digest(&body)), Val::Text(body)]);
        }
        let id = Val::text(&rec.run.run_id);
        self.write_tx(|c| {
            for t in ["evals", "point_files", "points", "run_plans", "runs"] {
                c.exec(&format!("DELETE FROM {t} WHERE run_id = $1"), std::slice::from_ref(&id))?;
            }
            c.insert("runs", types::RUN_COLS, std::slice::from_ref(&run), "")?;
            c.insert("run_plans", &["run_id", "plan_gz"], &plans, "")?;
            c.insert("points", &point_cols, &points, "")?;
            pause_for_tests();
            c.insert("point_files", types::FILE_COLS, &files, "")?;
            c.insert("evals", types::EVAL_COLS, &evals, "")?;
            c.insert("blobs", &["hash", "body"], &blobs, "ON CONFLICT (hash) DO NOTHING")?;
            Ok(())
        })
    }

    /// Reads a run folder and records it (`source`: the command recording it).
    pub fn record_dir(&mut self, dir: &Path, source: &str) -> Result<RunRecord, StoreError> {
        let rec = read_run_dir(dir, source)?;
        self.record(&rec)?;
        Ok(rec)
    }

    /// Removes a run and everything recorded with it; whether it was there.
    pub fn remove(&mut self, run_id: &str) -> Result<bool, StoreError> {
        let id = Val::text(run_id);
        self.write_tx(|c| {
            for t in ["evals", "point_files", "points", "run_plans"] {
                c.exec(&format!("DELETE FROM {t} WHERE run_id = $1"), std::slice::from_ref(&id))?;
            }
            Ok(c.exec("DELETE FROM runs WHERE run_id = $1", std::slice::from_ref(&id))? > 0)
        })
    }
}

/// Debug builds only: `SWEEP_STORE_PAUSE_IN_TX=SECONDS` sleeps inside the recording transaction
/// (after the run and its points are written, before the rest), so a test can kill the process
/// there and check that nothing of the run was kept.
fn pause_for_tests() {
    if !cfg!(debug_assertions) {
        return;
    }
    if let Some(s) = std::env::var("SWEEP_STORE_PAUSE_IN_TX").ok().and_then(|s| s.parse::<f64>().ok()) {
        tracing::warn!("store: paused inside the recording transaction for {s} s");
        std::thread::sleep(std::time::Duration::from_secs_f64(s));
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}

fn gunzip(bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).ok()?;
    Some(out)
}

/// A run id is how every command finds a run again: it must be non-empty and printable (no
/// control characters that would reach a terminal raw), and not padded with spaces.
pub fn check_run_id(id: &str) -> Result<(), RunIdError> {
    if id.trim().is_empty() {
        return Err(RunIdError::Empty);
    }
    if id.trim() != id {
        return Err(RunIdError::Padded { id: id.to_string() });
    }
    if let Some(control) = id.chars().find(|c| c.is_control()) {
        return Err(RunIdError::Control { id: id.to_string(), control });
    }
    Ok(())
}

fn open_sqlite(path: &Path, mode: Mode, name: &str) -> Result<Conn, StoreError> {
    use rusqlite::OpenFlags;
    let open_err = |e: rusqlite::Error| StoreError::Open { location: name.to_string(), message: e.to_string() };
    // A folder, FIFO or device is not a store that happens to be empty: say so, or a gate
    // against `last-pass` would find no baseline and pass.
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
    {
        let what = if m.is_dir() { "a folder" } else { "not a regular file" };
        return Err(StoreError::Open {
            location: name.to_string(),
            message: format!(
                "{} is {what}; give the store's SQLite file (e.g. {}/sweep.db) or a postgres:// URL",
                path.display(),
                path.display()
            ),
        });
    }
    if mode != Mode::Write && !path.is_file() {
        return Err(StoreError::Missing { location: name.to_string() });
    }
    if mode == Mode::Write
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Open { location: name.to_string(), message: format!("{}: {e}", dir.display()) })?;
    }
    let flags = match mode {
        Mode::ReadOnly => OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        Mode::Existing => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        Mode::Write => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    };
    let c = rusqlite::Connection::open_with_flags(path, flags).map_err(open_err)?;
    let c = if mode == Mode::ReadOnly { readable(c, path, name)? } else { c };
    // Writers queue for the lock rather than fail: other runs may be recording.
    c.busy_timeout(backend::SQLITE_BUSY_TIMEOUT).map_err(open_err)?;
    if mode != Mode::ReadOnly {
        // WAL: readers never block the writer nor it them; NORMAL sync keeps every committed
        // transaction across a process crash (only a power loss may lose the last ones).
        c.pragma_update(None, "journal_mode", "WAL").map_err(open_err)?;
        c.pragma_update(None, "synchronous", "NORMAL").map_err(open_err)?;
    }
    c.pragma_update(None, "foreign_keys", "ON").map_err(open_err)?;
    // Reads map the file instead of copying each page through a read call, and keep up to
    // 64 MB of pages: listing 10,000 runs or a config's points across 500 runs touches
    // thousands of pages.
    c.pragma_update(None, "mmap_size", 256i64 << 20).map_err(open_err)?;
    c.pragma_update(None, "cache_size", -65_536i64).map_err(open_err)?;
    Ok(Conn::Sqlite(c))
}

/// A read-only connection that can read: a WAL store needs its shared-memory file (`-shm`),
/// which a reader who cannot write the store's folder cannot create. Such a store, when no
/// write is left in its `-wal` file, is opened immutable (no locks, no `-shm`); with writes
/// left there, the error names them and the fix.
fn readable(c: rusqlite::Connection, path: &Path, name: &str) -> Result<rusqlite::Connection, StoreError> {
    use rusqlite::OpenFlags;
    let probe = |c: &rusqlite::Connection| c.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0));
    let Err(e) = probe(&c) else { return Ok(c) };
    let code = e.sqlite_error_code();
    if !matches!(code, Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen)) {
        return Err(StoreError::Open { location: name.to_string(), message: e.to_string() });
    }
    drop(c);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let pending = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    if pending > 0 {
        return Err(StoreError::Open {
            location: name.to_string(),
            message: format!(
                "{e}: this user cannot write the store's folder, which a reader of a store with writes still in {} ({pending} bytes) needs; run `sweep store check --store {}` once as a user who can write there (it folds them into the file), or read a copy",
                Path::new(&wal).display(),
                path.display()
            ),
        });
    }
    let uri = format!("file:{}?immutable=1", uri_path(path));
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let c = rusqlite::Connection::open_with_flags(&uri, flags)
        .map_err(|e| StoreError::Open { location: name.to_string(), message: e.to_string() })?;
    probe(&c).map_err(|e| StoreError::Open { location: name.to_string(), message: e.to_string() })?;
    Ok(c)
}

/// A path as a `file:` URI's path: bytes other than unreserved ones and `/` percent-encoded.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    abs.as_os_str()
        .as_bytes()
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn open_postgres(url: &str, mode: Mode, name: &str) -> Result<Conn, StoreError> {
    let open_err = |message: String| StoreError::Open { location: name.to_string(), message };
    let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| open_err(format!("not a PostgreSQL URL: {e}")))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    config.application_name("sweep");
    let mut client = config.connect(postgres::NoTls).map_err(|e| open_err(DbError::from(e).to_string()))?;
    // Numbers and text only cross the wire in the formats the store reads.
    client.batch_execute("SET client_min_messages = warning").map_err(|e| open_err(DbError::from(e).to_string()))?;
    if mode == Mode::ReadOnly {
        client.batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY").map_err(|e| open_err(DbError::from(e).to_string()))?;
    }
    Ok(Conn::Postgres { client: Box::new(client), prepared: HashMap::new() })
}

#[cfg(test)]
mod tests;
