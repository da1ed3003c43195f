//! The two engines under the ledger: SQLite (the embedded default) and PostgreSQL (a team's).
//!
//! One connection type with the few operations the ledger needs — run a script, execute a
//! statement, query rows — so every query is written once. Statements use SQLite's numbered
//! placeholders (`?1`, `?2`); for PostgreSQL they become `$1`, `$2` (no statement here holds a
//! literal `?`). Values are the four kinds both engines share; integers are 64-bit on both
//! (booleans are 0/1 integers, as SQLite stores them).
//!
//! A parameter whose only use is `IS NULL` must be typed (`CAST(?1 AS TEXT)`): PostgreSQL cannot
//! infer its type otherwise.

use std::collections::HashMap;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// Which engine a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Where the ledger lives, parsed from `sqlite:PATH` or `postgres://…` (`postgresql://…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl DatabaseUrl {
    pub fn parse(url: &str) -> Result<Self, String> {
        if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err("sqlite: needs a path (sqlite:/var/lib/maljan/ledger.sqlite3)".into());
            }
            Ok(Self::Sqlite(path.into()))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres(url.to_string()))
        } else {
            Err("a database URL is sqlite:PATH or postgres://USER@HOST:PORT/DB".into())
        }
    }

    /// The URL without a password, for messages.
    pub fn redacted(&self) -> String {
        match self {
            Self::Sqlite(p) => format!("sqlite:{}", p.display()),
            Self::Postgres(u) => match (u.find("://"), u.rfind('@')) {
                (Some(s), Some(at)) if at > s => {
                    let creds = &u[s + 3..at];
                    let user = creds.split(':').next().unwrap_or("");
                    let tail = &u[at..];
                    let tail = tail.split('?').next().unwrap_or(tail);
                    format!("{}{user}{tail}", &u[..s + 3])
                }
                _ => u.split('?').next().unwrap_or(u).to_string(),
            },
        }
    }
}

/// One value of a row or a parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Self::Int(v.into())
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Self::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Self::Int(v.into())
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Self::Real(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Self::Text(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Self::Text(v.clone())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// Parameters of a statement: `vals![a, b, c]`.
macro_rules! vals {
    ($($v:expr),* $(,)?) => { &[$($crate::ledger::db::Value::from($v)),*][..] };
}
pub(crate) use vals;

/// A failed statement, with the engine's message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct DbError {
    pub message: String,
    /// The connection to PostgreSQL went away (a restart, a network cut): the statement may work
    /// on a new connection. Told by the error itself, not by the client's closed flag, which its
    /// background task sets a moment after the error has been returned.
    pub connection_lost: bool,
}

impl DbError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            connection_lost: false,
        }
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        Self::new(e.to_string())
    }
}
impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> Self {
        // Class 08 is "connection exception", 57P "operator intervention" (the server shutting
        // down or not yet accepting connections); an I/O error is the socket itself.
        let code = e.code().map(|c| c.code());
        let connection_lost = e.is_closed()
            || code.is_some_and(|c| c.starts_with("08") || c.starts_with("57P"))
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
        // The server's own message (with its detail) says more than the driver's summary.
        let message = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        };
        Self {
            message,
            connection_lost,
        }
    }
}

pub type DbResult<T> = Result<T, DbError>;

/// One row of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> DbResult<&Value> {
        self.0
            .get(i)
            .ok_or_else(|| DbError::new(format!("no column {i}")))
    }
    pub fn opt_i64(&self, i: usize) -> DbResult<Option<i64>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            Value::Real(v) => Ok(Some(*v as i64)),
            Value::Text(_) => Err(DbError::new(format!("column {i} is text, not an integer"))),
        }
    }
    pub fn i64(&self, i: usize) -> DbResult<i64> {
        self.opt_i64(i)?
            .ok_or_else(|| DbError::new(format!("column {i} is null")))
    }
    pub fn bool(&self, i: usize) -> DbResult<bool> {
        Ok(self.i64(i)? != 0)
    }
    pub fn f64(&self, i: usize) -> DbResult<f64> {
        match self.at(i)? {
            Value::Int(v) => Ok(*v as f64),
            Value::Real(v) => Ok(*v),
            _ => Err(DbError::new(format!("column {i} is not a number"))),
        }
    }
    pub fn opt_text(&self, i: usize) -> DbResult<Option<String>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s.clone())),
            Value::Int(v) => Ok(Some(v.to_string())),
            Value::Real(v) => Ok(Some(v.to_string())),
        }
    }
    pub fn text(&self, i: usize) -> DbResult<String> {
        self.opt_text(i)?
            .ok_or_else(|| DbError::new(format!("column {i} is null")))
    }
}

/// A connection to either engine.
pub enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres {
        client: Box<postgres::Client>,
        /// Prepared statements by their SQLite-form text (PostgreSQL prepares per connection).
        prepared: HashMap<String, postgres::Statement>,
        /// To connect again after the server restarted (never inside a transaction: what it
        /// had done is gone with the old connection, and the caller must hear so).
        url: String,
        in_tx: bool,
    },
}

impl Conn {
    pub fn postgres(url: &str) -> DbResult<Self> {
        let mut client = postgres::Client::connect(url, postgres::NoTls)?;
        // `CREATE … IF NOT EXISTS` of a current schema says "already exists, skipping" each time.
        client.batch_execute("SET client_min_messages = warning")?;
        Ok(Self::Postgres {
            client: Box::new(client),
            prepared: HashMap::new(),
            url: url.to_string(),
            in_tx: false,
        })
    }

    /// A broken PostgreSQL connection outside a transaction is replaced by a new one.
    fn ensure_connected(&mut self) -> DbResult<()> {
        match self {
            Self::Postgres {
                client,
                in_tx: false,
                ..
            } if client.is_closed() => self.replace_client(),
            _ => Ok(()),
        }
    }

    /// Replaces the PostgreSQL connection with a new one, trying until `deadline`; whether it
    /// connected. Called after an error said the connection was lost, so the old client is
    /// dropped even if its closed flag is not set yet.
    pub fn reconnect_by(&mut self, deadline: std::time::Instant) -> bool {
        if self.engine() != Engine::Postgres {
            return false;
        }
        loop {
            if self.replace_client().is_ok() {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Connects to PostgreSQL again and drops the old client with what belonged to it (its
    /// prepared statements, its open transaction).
    fn replace_client(&mut self) -> DbResult<()> {
        let Self::Postgres {
            client,
            prepared,
            url,
            in_tx,
        } = self
        else {
            return Ok(());
        };
        let Self::Postgres { client: fresh, .. } = Self::postgres(url)? else {
            unreachable!()
        };
        *client = fresh;
        prepared.clear();
        *in_tx = false;
        tracing::info!("ledger: reconnected to PostgreSQL");
        Ok(())
    }

    pub fn engine(&self) -> Engine {
        match self {
            Self::Sqlite(_) => Engine::Sqlite,
            Self::Postgres { .. } => Engine::Postgres,
        }
    }

    /// Runs statements without parameters (a schema, `BEGIN`, `COMMIT`).
    pub fn batch(&mut self, sql: &str) -> DbResult<()> {
        match self {
            Self::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Self::Postgres { .. } => {
                self.ensure_connected()?;
                let Self::Postgres { client, in_tx, .. } = self else {
                    unreachable!()
                };
                let word = sql.split_whitespace().next().unwrap_or("");
                let r = client.batch_execute(sql);
                if word.eq_ignore_ascii_case("BEGIN") {
                    *in_tx = r.is_ok();
                } else if word.eq_ignore_ascii_case("COMMIT")
                    || word.eq_ignore_ascii_case("ROLLBACK")
                {
                    *in_tx = false;
                }
                Ok(r?)
            }
        }
    }

    /// Executes one statement; returns the rows it changed.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> DbResult<u64> {
        match self {
            Self::Sqlite(c) => {
                let n = c
                    .prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(params))?;
                Ok(n as u64)
            }
            Self::Postgres { .. } => {
                self.ensure_connected()?;
                let Self::Postgres {
                    client, prepared, ..
                } = self
                else {
                    unreachable!()
                };
                let st = pg_prepare(client, prepared, sql)?;
                Ok(client.execute(&st, &pg_params(params))?)
            }
        }
    }

    /// Runs a query; returns its rows.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> DbResult<Vec<Row>> {
        match self {
            Self::Sqlite(c) => {
                let mut st = c.prepare_cached(sql)?;
                let n = st.column_count();
                let rows = st.query_map(rusqlite::params_from_iter(params), |r| {
                    (0..n)
                        .map(|i| Ok(sqlite_value(r.get_ref(i)?)))
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .map(Row)
                })?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            }
            Self::Postgres { .. } => {
                self.ensure_connected()?;
                let Self::Postgres {
                    client, prepared, ..
                } = self
                else {
                    unreachable!()
                };
                let st = pg_prepare(client, prepared, sql)?;
                client
                    .query(&st, &pg_params(params))?
                    .iter()
                    .map(pg_row)
                    .collect()
            }
        }
    }

    /// The first row of a query, if any.
    pub fn query_opt(&mut self, sql: &str, params: &[Value]) -> DbResult<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The first row of a query; no row is an error.
    pub fn query_one(&mut self, sql: &str, params: &[Value]) -> DbResult<Row> {
        self.query_opt(sql, params)?
            .ok_or_else(|| DbError::new("the query returned no row"))
    }

    /// Runs `f` in a transaction: committed when it returns Ok, rolled back otherwise.
    pub fn transaction<T>(&mut self, f: impl FnOnce(&mut Self) -> DbResult<T>) -> DbResult<T> {
        self.batch("BEGIN")?;
        match f(self) {
            Ok(v) => {
                self.batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

fn pg_prepare(
    client: &mut postgres::Client,
    prepared: &mut HashMap<String, postgres::Statement>,
    sql: &str,
) -> DbResult<postgres::Statement> {
    if let Some(st) = prepared.get(sql) {
        return Ok(st.clone());
    }
    let st = client.prepare(&sql.replace('?', "$"))?;
    prepared.insert(sql.to_string(), st.clone());
    Ok(st)
}

fn pg_params(params: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

fn pg_row(r: &postgres::Row) -> DbResult<Row> {
    let mut out = Vec::with_capacity(r.len());
    for (i, col) in r.columns().iter().enumerate() {
        let ty = col.type_();
        let v = if *ty == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?.map(Value::Int)
        } else if *ty == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *ty == Type::INT2 {
            r.try_get::<_, Option<i16>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *ty == Type::BOOL {
            r.try_get::<_, Option<bool>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *ty == Type::FLOAT8 {
            r.try_get::<_, Option<f64>>(i)?.map(Value::Real)
        } else if *ty == Type::FLOAT4 {
            r.try_get::<_, Option<f32>>(i)?
                .map(|v| Value::Real(v.into()))
        } else if *ty == Type::VOID {
            // What a function called for its effect returns (pg_advisory_xact_lock, pg_notify).
            None
        } else {
            r.try_get::<_, Option<String>>(i)?.map(Value::Text)
        };
        out.push(v.unwrap_or(Value::Null));
    }
    Ok(Row(out))
}

fn sqlite_value(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into()),
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Value::Int(v) if *ty == Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
            Value::Int(v) if *ty == Type::BOOL => (*v != 0).to_sql(ty, out),
            Value::Int(v) if *ty == Type::FLOAT8 => (*v as f64).to_sql(ty, out),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Real(v) if *ty == Type::FLOAT4 => (*v as f32).to_sql(ty, out),
            Value::Real(v) => v.to_sql(ty, out),
            Value::Text(s) => s.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Converted per target type above; PostgreSQL reports a mismatch itself.
        true
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_hide_the_password() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:/a/b.sqlite3").unwrap(),
            DatabaseUrl::Sqlite("/a/b.sqlite3".into())
        );
        let pg = DatabaseUrl::parse("postgres://me:secret@127.0.0.1:5433/maljan?sslmode=disable")
            .unwrap();
        assert_eq!(pg.redacted(), "postgres://me@127.0.0.1:5433/maljan");
        assert!(DatabaseUrl::parse("mysql://x").is_err());
        assert!(DatabaseUrl::parse("sqlite:").is_err());
    }

    #[test]
    fn sqlite_rows_and_params_round_trip() {
        let mut c = Conn::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        c.batch("CREATE TABLE t(a INTEGER, b REAL, c TEXT)")
            .unwrap();
        c.execute(
            "INSERT INTO t VALUES (?1, ?2, ?3)",
            vals![7i64, 1.5, None::<String>],
        )
        .unwrap();
        let r = c.query_one("SELECT a, b, c FROM t", vals![]).unwrap();
        assert_eq!(
            (r.i64(0), r.f64(1), r.opt_text(2)),
            (Ok(7), Ok(1.5), Ok(None))
        );
        let failed: DbResult<()> = c.transaction(|c| {
            c.execute("INSERT INTO t VALUES (1, 1, 'x')", vals![])?;
            Err(DbError::new("stop"))
        });
        assert!(failed.is_err());
        let n = c.query_one("SELECT COUNT(*) FROM t", vals![]).unwrap();
        assert_eq!(n.i64(0), Ok(1));
    }
}
