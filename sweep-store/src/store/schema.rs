//! The store's schema and its versioned migrations. `schema_version` holds one row per applied
//! migration; a store whose highest version is above [`CURRENT`] was written by a newer `sweep`
//! and is refused rather than misread. Migrations only ever add: a new version appends to
//! [`MIGRATIONS`], never edits an applied one.

use super::backend::{Conn, DbError, Kind, Row, Val};

/// The schema version this build writes and reads.
pub const CURRENT: i64 = 2;

/// `(version, statements)`, in order. Written once for both backends (see `backend.rs`).
pub const MIGRATIONS: &[(i64, &str)] = &[(1, V1), (2, V2)];

/// Runs, their plans (apart: kilobytes a run that listing runs would read past), their points,
/// the points' files and eval scores, and shared JSON bodies (changelog entries, engine profiles
/// and launches repeat across runs and points: stored once, by digest).
const V1: &str = "
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    started_unix BIGINT,
    finished_unix BIGINT NOT NULL,
    recorded_unix BIGINT NOT NULL,
    labels TEXT NOT NULL,
    configs TEXT NOT NULL,
    hardware TEXT NOT NULL,
    target TEXT NOT NULL,
    result_kind TEXT NOT NULL,
    seed BIGINT,
    seed_replicates BIGINT,
    duration_s DOUBLE PRECISION,
    traces TEXT,
    sweep_version TEXT,
    head_ref TEXT,
    base_ref TEXT,
    changelog_hash TEXT,
    pr_link TEXT,
    gate TEXT,
    gate_baseline TEXT,
    gate_failed_checks BIGINT,
    points_total BIGINT NOT NULL,
    points_ok BIGINT NOT NULL,
    folder TEXT NOT NULL,
    host TEXT NOT NULL,
    source TEXT NOT NULL,
    report TEXT
);
CREATE INDEX runs_finished ON runs (finished_unix, run_id);
CREATE TABLE run_plans (
    run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
    plan_gz BYTEA NOT NULL
);
CREATE TABLE points (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    point_id TEXT NOT NULL,
    config_key TEXT NOT NULL,
    recipe_fingerprint TEXT,
    recipe_digest TEXT,
    hardware TEXT,
    framework TEXT,
    model TEXT,
    precision TEXT,
    image TEXT,
    arm TEXT NOT NULL,
    topology TEXT,
    conc BIGINT NOT NULL,
    gpus BIGINT NOT NULL,
    matrix TEXT,
    status TEXT NOT NULL,
    status_reason TEXT,
    valid BOOLEAN NOT NULL,
    result_kind TEXT NOT NULL,
    hardware_profile TEXT,
    model_profile TEXT,
    profiles_hash TEXT,
    launch_hash TEXT,
    trace_set TEXT,
    requests_ok BIGINT,
    requests_error BIGINT,
    tput_per_gpu DOUBLE PRECISION,
    tput_per_gpu_lo DOUBLE PRECISION,
    tput_per_gpu_hi DOUBLE PRECISION,
    output_tput_per_gpu DOUBLE PRECISION,
    input_tput_per_gpu DOUBLE PRECISION,
    intvty_p90 DOUBLE PRECISION,
    intvty_p90_lo DOUBLE PRECISION,
    intvty_p90_hi DOUBLE PRECISION,
    e2e_norm_intvty_p90 DOUBLE PRECISION,
    e2e_norm_intvty_p90_lo DOUBLE PRECISION,
    e2e_norm_intvty_p90_hi DOUBLE PRECISION,
    ttft_p50 DOUBLE PRECISION,
    ttft_p90 DOUBLE PRECISION,
    ttft_p99 DOUBLE PRECISION,
    e2el_p75 DOUBLE PRECISION,
    e2el_p75_lo DOUBLE PRECISION,
    e2el_p75_hi DOUBLE PRECISION,
    e2el_p90 DOUBLE PRECISION,
    e2el_p90_lo DOUBLE PRECISION,
    e2el_p90_hi DOUBLE PRECISION,
    cache_hit_rate DOUBLE PRECISION,
    invalid_reasons TEXT,
    submission_valid BOOLEAN,
    frontier_e2e_norm_intvty_p90 BOOLEAN,
    frontier_intvty_p90 BOOLEAN,
    frontier_e2el_p90 BOOLEAN,
    frontier_e2el_p75 BOOLEAN,
    dominated_by TEXT,
    p_frontier DOUBLE PRECISION,
    seeds TEXT,
    wall_s DOUBLE PRECISION,
    ord BIGINT NOT NULL,
    PRIMARY KEY (run_id, point_id)
);
CREATE INDEX points_config ON points (config_key, run_id);
CREATE INDEX points_fingerprint ON points (recipe_fingerprint, run_id);
CREATE TABLE point_files (
    run_id TEXT NOT NULL,
    point_id TEXT NOT NULL,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    PRIMARY KEY (run_id, point_id, path),
    FOREIGN KEY (run_id, point_id) REFERENCES points (run_id, point_id) ON DELETE CASCADE
);
CREATE TABLE evals (
    run_id TEXT NOT NULL,
    point_id TEXT NOT NULL,
    file TEXT NOT NULL,
    task TEXT NOT NULL,
    metric TEXT NOT NULL,
    score DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, point_id, file, task, metric),
    FOREIGN KEY (run_id, point_id) REFERENCES points (run_id, point_id) ON DELETE CASCADE
);
CREATE TABLE blobs (
    hash TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
";

/// A point's GPU power where it was valid (measured or predicted): J per output token is what
/// `sweep history --point` follows across runs.
const V2: &str = "
ALTER TABLE points ADD COLUMN power_source TEXT;
ALTER TABLE points ADD COLUMN avg_power_w DOUBLE PRECISION;
ALTER TABLE points ADD COLUMN total_gpu_energy_j DOUBLE PRECISION;
ALTER TABLE points ADD COLUMN joules_per_output_token DOUBLE PRECISION;
ALTER TABLE points ADD COLUMN joules_per_total_token DOUBLE PRECISION;
";

const VERSION_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, applied_unix BIGINT NOT NULL, sweep_version TEXT NOT NULL)";

/// The highest applied version (0 for an empty store), or `None` when there is no
/// `schema_version` table at all.
pub fn version(conn: &mut Conn) -> Result<Option<i64>, DbError> {
    if !has_table(conn, "schema_version")? {
        return Ok(None);
    }
    let rows = conn.query("SELECT MAX(version) FROM schema_version", &[])?;
    Ok(Some(rows.first().and_then(|r| Row(r).opt_int(0)).unwrap_or(0)))
}

fn has_table(conn: &mut Conn, name: &str) -> Result<bool, DbError> {
    let sql = match conn.kind() {
        Kind::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
        Kind::Postgres => "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1",
    };
    Ok(Row(&conn.query(sql, &[Val::text(name)])?[0]).int(0) > 0)
}

/// Applies the migrations above the store's version, inside the caller's write transaction
/// (which also holds the writer lock, so concurrent openers apply each migration once);
/// returns the version found before.
pub fn migrate(conn: &mut Conn, now_unix: i64) -> Result<i64, DbError> {
    if conn.kind() == Kind::Postgres {
        // One migrating writer at a time: `CREATE TABLE` in two sessions at once conflicts
        // in PostgreSQL's catalogue even with IF NOT EXISTS. Released at commit.
        conn.exec("SELECT pg_advisory_xact_lock(7352902315)", &[])?;
    }
    // Created only when absent: a team's writers need no CREATE privilege once it exists.
    let found = match version(conn)? {
        Some(v) => v,
        None => {
            conn.batch(VERSION_TABLE)?;
            0
        }
    };
    if found == 0 && has_table(conn, "runs")? {
        return Err(DbError::Schema(
            "it has sweep's tables but no schema version row, so which migrations it holds is unknown; restore it from a copy, or record the run folders into a new store with `sweep import`".into(),
        ));
    }
    for (v, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        conn.batch(sql)?;
        conn.exec(
            "INSERT INTO schema_version (version, applied_unix, sweep_version) VALUES ($1, $2, $3)",
            &[Val::Int(*v), Val::Int(now_unix), Val::text(env!("CARGO_PKG_VERSION"))],
        )?;
    }
    Ok(found)
}
