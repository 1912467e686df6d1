//! One connection to either backend, with the few operations the store needs: statements with
//! positional parameters, rows as plain values, and write transactions that are retried when
//! PostgreSQL reports a conflict between concurrent writers.
//!
//! Statements are written once, in the dialect both engines share (`$1` placeholders, `ON
//! CONFLICT`, `LIKE … ESCAPE`); SQLite gets `?1` for `$1` and `BLOB` for `BYTEA`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

/// A parameter or a column value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bool(bool),
    Bytes(Vec<u8>),
}

impl Val {
    /// A float; NaN and infinities are stored as NULL (SQLite cannot hold NaN, and no metric is one).
    pub fn real(x: f64) -> Val {
        if x.is_finite() { Val::Real(x) } else { Val::Null }
    }
    pub fn opt_real(x: Option<f64>) -> Val {
        x.map_or(Val::Null, Val::real)
    }
    pub fn text(s: impl Into<String>) -> Val {
        Val::Text(s.into())
    }
    pub fn opt_text(s: Option<impl Into<String>>) -> Val {
        s.map_or(Val::Null, |s| Val::Text(s.into()))
    }
    pub fn int(x: impl TryInto<i64>) -> Val {
        x.try_into().map_or(Val::Null, Val::Int)
    }
    pub fn opt_int(x: Option<impl TryInto<i64>>) -> Val {
        x.map_or(Val::Null, Val::int)
    }
    pub fn opt_bool(x: Option<bool>) -> Val {
        x.map_or(Val::Null, Val::Bool)
    }
}

/// Which engine a connection talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// An error of the database itself (the store adds where).
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", pg_message(.0))]
    Postgres(#[from] postgres::Error),
    /// A column of a type the store never writes (the schema was changed by hand).
    #[error("{0}")]
    Type(String),
    /// A schema the store cannot account for (tables without their version row).
    #[error("{0}")]
    Schema(String),
}

/// PostgreSQL's own message with its SQLSTATE and detail (the crate's `Display` says only "db error").
fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let detail = d.detail().map(|x| format!(" ({x})")).unwrap_or_default();
            format!("{}{detail} [SQLSTATE {}]", d.message(), d.code().code())
        }
        None => {
            // The cause carries the useful part ("Connection refused", "password authentication failed").
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(c) = src {
                s.push_str(&format!(": {c}"));
                src = c.source();
            }
            s
        }
    }
}

impl DbError {
    /// A conflict with another writer that a fresh attempt of the same transaction resolves:
    /// serialization failures and deadlocks, and two writers inserting the same run id at once
    /// (the second sees the first's row once it commits).
    pub fn retryable(&self) -> bool {
        use postgres::error::SqlState;
        match self {
            DbError::Postgres(e) => e.code().is_some_and(|c| {
                *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::UNIQUE_VIOLATION
            }),
            DbError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            }
            _ => false,
        }
    }
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Val::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Val::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Val::Real(x) => ToSqlOutput::Borrowed(ValueRef::Real(*x)),
            Val::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Val::Bool(b) => ToSqlOutput::Borrowed(ValueRef::Integer(*b as i64)),
            Val::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

impl postgres::types::ToSql for Val {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match self {
            Val::Null => Ok(postgres::types::IsNull::Yes),
            Val::Int(i) => match *ty {
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            Val::Real(x) => x.to_sql(ty, out),
            Val::Text(s) => s.to_sql(ty, out),
            Val::Bool(b) => b.to_sql(ty, out),
            Val::Bytes(b) => b.to_sql(ty, out),
        }
    }
    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }
    postgres::types::to_sql_checked!();
}

/// An open connection.
pub enum Conn {
    Sqlite(rusqlite::Connection),
    /// Prepared statements are kept per SQL text: each costs a round trip to prepare.
    Postgres {
        client: Box<postgres::Client>,
        prepared: HashMap<String, postgres::Statement>,
    },
}

/// How long a SQLite writer waits for another to finish before giving up.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(60);

impl Conn {
    pub fn kind(&self) -> Kind {
        match self {
            Conn::Sqlite(_) => Kind::Sqlite,
            Conn::Postgres { .. } => Kind::Postgres,
        }
    }

    /// `$n` → `?n` and `BYTEA` → `BLOB` for SQLite; the text unchanged for PostgreSQL.
    fn dialect<'a>(&self, sql: &'a str) -> Cow<'a, str> {
        if self.kind() == Kind::Postgres || (!sql.contains('$') && !sql.contains("BYTEA")) {
            return Cow::Borrowed(sql);
        }
        let mut out = String::with_capacity(sql.len());
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '$' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                out.push('?');
            } else {
                out.push(c);
            }
        }
        Cow::Owned(out.replace("BYTEA", "BLOB"))
    }

    /// Runs statements without parameters (DDL, transaction control).
    pub fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        let sql = self.dialect(sql).into_owned();
        match self {
            Conn::Sqlite(c) => c.execute_batch(&sql)?,
            Conn::Postgres { client, .. } => client.batch_execute(&sql)?,
        }
        Ok(())
    }

    /// Runs one statement; the number of rows it changed.
    pub fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, DbError> {
        let sql = self.dialect(sql).into_owned();
        match self {
            Conn::Sqlite(c) => {
                let mut st = c.prepare_cached(&sql)?;
                Ok(st.execute(rusqlite::params_from_iter(params.iter()))? as u64)
            }
            Conn::Postgres { client, prepared } => {
                let st = pg_prepare(client, prepared, &sql)?;
                let p: Vec<&(dyn postgres::types::ToSql + Sync)> = params.iter().map(|v| v as _).collect();
                Ok(client.execute(&st, &p)?)
            }
        }
    }

    /// Runs a query; its rows as values in column order.
    pub fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, DbError> {
        let sql = self.dialect(sql).into_owned();
        match self {
            Conn::Sqlite(c) => {
                let mut st = c.prepare_cached(&sql)?;
                let n = st.column_count();
                let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    let mut row = Vec::with_capacity(n);
                    for i in 0..n {
                        use rusqlite::types::ValueRef;
                        row.push(match r.get_ref(i)? {
                            ValueRef::Null => Val::Null,
                            ValueRef::Integer(i) => Val::Int(i),
                            ValueRef::Real(x) => Val::Real(x),
                            ValueRef::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
                            ValueRef::Blob(b) => Val::Bytes(b.to_vec()),
                        });
                    }
                    out.push(row);
                }
                Ok(out)
            }
            Conn::Postgres { client, prepared } => {
                let st = pg_prepare(client, prepared, &sql)?;
                let p: Vec<&(dyn postgres::types::ToSql + Sync)> = params.iter().map(|v| v as _).collect();
                client.query(&st, &p)?.iter().map(pg_row).collect()
            }
        }
    }

    /// Inserts `rows` (each in `cols` order) with as few statements as the parameter limits
    /// allow; `tail` follows each statement (`ON CONFLICT …`).
    pub fn insert(&mut self, table: &str, cols: &[&str], rows: &[Vec<Val>], tail: &str) -> Result<(), DbError> {
        // SQLite allows 32,766 parameters per statement, PostgreSQL 65,535.
        let per = (30_000 / cols.len().max(1)).max(1);
        for chunk in rows.chunks(per) {
            let mut sql = format!("INSERT INTO {table} ({}) VALUES ", cols.join(", "));
            let mut n = 0;
            for (i, _) in chunk.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push('(');
                for j in 0..cols.len() {
                    n += 1;
                    if j > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(&format!("${n}"));
                }
                sql.push(')');
            }
            sql.push(' ');
            sql.push_str(tail);
            let params: Vec<Val> = chunk.iter().flat_map(|r| r.iter().cloned()).collect();
            self.exec(&sql, &params)?;
        }
        Ok(())
    }
}

fn pg_prepare(
    client: &mut postgres::Client,
    prepared: &mut HashMap<String, postgres::Statement>,
    sql: &str,
) -> Result<postgres::Statement, DbError> {
    if let Some(s) = prepared.get(sql) {
        return Ok(s.clone());
    }
    let s = client.prepare(sql)?;
    prepared.insert(sql.to_string(), s.clone());
    Ok(s)
}

fn pg_row(r: &postgres::Row) -> Result<Vec<Val>, DbError> {
    use postgres::types::Type;
    let mut out = Vec::with_capacity(r.len());
    for (i, c) in r.columns().iter().enumerate() {
        let ty = c.type_();
        let v = match *ty {
            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map_or(Val::Null, Val::Int),
            Type::INT4 => r.try_get::<_, Option<i32>>(i)?.map_or(Val::Null, |x| Val::Int(x.into())),
            Type::INT2 => r.try_get::<_, Option<i16>>(i)?.map_or(Val::Null, |x| Val::Int(x.into())),
            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map_or(Val::Null, Val::Real),
            Type::FLOAT4 => r.try_get::<_, Option<f32>>(i)?.map_or(Val::Null, |x| Val::Real(x.into())),
            Type::BOOL => r.try_get::<_, Option<bool>>(i)?.map_or(Val::Null, Val::Bool),
            Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map_or(Val::Null, Val::Bytes),
            Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => r.try_get::<_, Option<String>>(i)?.map_or(Val::Null, Val::Text),
            _ => return Err(DbError::Type(format!("column {} has type {ty}, which the store never writes", c.name()))),
        };
        out.push(v);
    }
    Ok(out)
}

/// Typed access to a row's columns by position.
pub struct Row<'a>(pub &'a [Val]);

impl Row<'_> {
    pub fn text(&self, i: usize) -> String {
        self.opt_text(i).unwrap_or_default()
    }
    pub fn opt_text(&self, i: usize) -> Option<String> {
        match self.0.get(i) {
            Some(Val::Text(s)) => Some(s.clone()),
            Some(Val::Int(x)) => Some(x.to_string()),
            Some(Val::Real(x)) => Some(x.to_string()),
            _ => None,
        }
    }
    pub fn opt_int(&self, i: usize) -> Option<i64> {
        match self.0.get(i) {
            Some(Val::Int(x)) => Some(*x),
            Some(Val::Real(x)) => Some(*x as i64),
            Some(Val::Bool(b)) => Some(*b as i64),
            _ => None,
        }
    }
    pub fn int(&self, i: usize) -> i64 {
        self.opt_int(i).unwrap_or(0)
    }
    pub fn opt_real(&self, i: usize) -> Option<f64> {
        match self.0.get(i) {
            Some(Val::Real(x)) => Some(*x),
            Some(Val::Int(x)) => Some(*x as f64),
            _ => None,
        }
    }
    pub fn opt_bool(&self, i: usize) -> Option<bool> {
        match self.0.get(i) {
            Some(Val::Bool(b)) => Some(*b),
            Some(Val::Int(x)) => Some(*x != 0),
            _ => None,
        }
    }
    pub fn bool(&self, i: usize) -> bool {
        self.opt_bool(i).unwrap_or(false)
    }
    pub fn opt_bytes(&self, i: usize) -> Option<Vec<u8>> {
        match self.0.get(i) {
            Some(Val::Bytes(b)) => Some(b.clone()),
            Some(Val::Text(s)) => Some(s.as_bytes().to_vec()),
            _ => None,
        }
    }
}

/// A row read once into a struct: text columns are moved out rather than copied.
pub struct Cols<'a>(pub &'a mut [Val]);

impl Cols<'_> {
    pub fn text(&mut self, i: usize) -> String {
        self.opt_text(i).unwrap_or_default()
    }
    pub fn opt_text(&mut self, i: usize) -> Option<String> {
        match self.0.get_mut(i) {
            Some(Val::Text(s)) => Some(std::mem::take(s)),
            Some(other) => Row(std::slice::from_ref(other)).opt_text(0),
            None => None,
        }
    }
    pub fn opt_int(&self, i: usize) -> Option<i64> {
        Row(self.0).opt_int(i)
    }
    pub fn int(&self, i: usize) -> i64 {
        Row(self.0).int(i)
    }
    pub fn opt_real(&self, i: usize) -> Option<f64> {
        Row(self.0).opt_real(i)
    }
    pub fn opt_bool(&self, i: usize) -> Option<bool> {
        Row(self.0).opt_bool(i)
    }
    pub fn bool(&self, i: usize) -> bool {
        Row(self.0).bool(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_gets_its_placeholders_and_blob_type() {
        let c = Conn::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        assert_eq!(c.dialect("SELECT $1, $12 FROM t WHERE a = '$x'"), "SELECT ?1, ?12 FROM t WHERE a = '$x'");
        assert_eq!(c.dialect("CREATE TABLE t (b BYTEA)"), "CREATE TABLE t (b BLOB)");
    }

    #[test]
    fn values_round_trip_through_sqlite() {
        let mut c = Conn::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        c.batch("CREATE TABLE t (i BIGINT, r DOUBLE PRECISION, s TEXT, b BOOLEAN, y BYTEA, n TEXT)").unwrap();
        let row = vec![Val::Int(-3), Val::Real(2.5), Val::text("é"), Val::Bool(true), Val::Bytes(vec![0, 255]), Val::Null];
        c.insert("t", &["i", "r", "s", "b", "y", "n"], &[row.clone(), row], "").unwrap();
        let got = c.query("SELECT i, r, s, b, y, n FROM t WHERE i = $1", &[Val::Int(-3)]).unwrap();
        assert_eq!(got.len(), 2);
        let r = Row(&got[0]);
        assert_eq!((r.int(0), r.opt_real(1), r.text(2), r.bool(3)), (-3, Some(2.5), "é".to_string(), true));
        assert_eq!((r.opt_bytes(4), r.opt_text(5)), (Some(vec![0, 255]), None));
        assert_eq!(Val::real(f64::NAN), Val::Null);
    }
}
