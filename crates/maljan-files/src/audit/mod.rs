//! The audit trail (FA_audit_configure, _search, _count, _purge): every tool call the server
//! runs, top-level or nested in an action list, is recorded by a call observer — tool, outcome
//! (ok, or the error code), duration, correlation id, and the arguments with every secret
//! redacted (`redact`: by the tools' schemas and by name). Records go to the state database
//! (or, after FA_audit_configure, to the SQLite file it names inside the roots; either 0600)
//! through a channel to a writer thread of their own, which gathers what comes within
//! [`LINGER`] into one transaction (group commit), so a call never waits on the disk; a search
//! first waits for what is queued to be written. Each transaction also applies the retention
//! ([`crate::AuditRetention`]: at most so many records, none older than so many days).
//!
//! A failed call is also published to the notification routes as an `action.failed` event.

mod query;
mod redact;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::Duration,
};

use maljan_server::{CallEnd, CallObserver, CallStart, Registry, ToolError};
use rusqlite::Connection;
use serde_json::{Map, Value, json};

use crate::Config;

/// The audit table, shared by the state database's migration and a configured file.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit_records (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    ts_us INTEGER NOT NULL,
    timestamp TEXT NOT NULL,
    actor TEXT NOT NULL,
    source TEXT NOT NULL,
    pipeline TEXT,
    task TEXT,
    action TEXT NOT NULL,
    resource TEXT,
    backend TEXT,
    status TEXT NOT NULL,
    duration_ms REAL,
    error TEXT,
    metadata TEXT NOT NULL,
    correlation_id TEXT
);
CREATE INDEX IF NOT EXISTS audit_records_ts ON audit_records (ts_us);
CREATE INDEX IF NOT EXISTS audit_records_correlation ON audit_records (correlation_id, ts_us);
";

/// Records queued to the writer at most; beyond, a record is dropped and counted (a call never
/// waits for the trail).
const QUEUE: usize = 65_536;
const KEY_DB_PATH: &str = "audit.db_path";
/// How long the writer waits for more records after the first of a batch: one transaction per
/// this much time on a busy server instead of one per call (a flush ends the wait). Short, so a
/// server that stops right after a call seldom leaves its record unwritten.
const LINGER: Duration = Duration::from_millis(2);
/// The most records one transaction writes.
const MAX_BATCH: usize = 4096;

/// One record, as written.
struct Record {
    id: String,
    ts_us: i64,
    action: String,
    resource: Option<String>,
    status: &'static str,
    duration_ms: f64,
    error: Option<String>,
    metadata: Value,
    correlation_id: String,
}

enum Msg {
    Record(Box<Record>),
    Flush(mpsc::SyncSender<()>),
}

/// The server's audit trail: where it is kept and the writer's queue.
pub(crate) struct Audit {
    queue: Mutex<Option<mpsc::SyncSender<Msg>>>,
    /// None: not read yet; Some(None): the state database; Some(Some(p)): a configured file.
    path: Mutex<Option<Option<PathBuf>>>,
    file: Mutex<Option<(PathBuf, Connection)>>,
    /// The redacted arguments and parent of each call in flight, by call id.
    pending: Mutex<HashMap<u64, (Value, Option<u64>)>>,
    dropped: AtomicU64,
    /// How much of the trail is kept.
    pub(crate) retention: crate::AuditRetention,
    /// Every argument name a tool's input schema marks secret (`writeOnly`), at any depth:
    /// redacted wherever it appears, the arguments of nested action lists included.
    pub(crate) secret_fields: std::sync::OnceLock<std::collections::HashSet<String>>,
}

impl Audit {
    pub(crate) fn new(retention: crate::AuditRetention) -> Self {
        Self {
            queue: Mutex::default(),
            path: Mutex::default(),
            file: Mutex::default(),
            pending: Mutex::default(),
            dropped: AtomicU64::default(),
            retention,
            secret_fields: Default::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the database the trail is kept in (blocking).
pub(crate) fn with_db<T>(
    cfg: &Config,
    f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
) -> Result<T, ToolError> {
    let path = {
        let mut known = lock(&cfg.audit.path);
        if known.is_none() {
            let stored: Option<String> = cfg.state.with(|c| {
                c.query_row(
                    "SELECT value FROM state_meta WHERE key = ?1",
                    [KEY_DB_PATH],
                    |r| r.get(0),
                )
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
            })?;
            *known = Some(stored.map(PathBuf::from));
        }
        known.clone().flatten()
    };
    let Some(path) = path else {
        return cfg.state.with(f);
    };
    let mut file = lock(&cfg.audit.file);
    if file.as_ref().is_none_or(|(p, _)| *p != path) {
        let conn = open_file(&path)?;
        *file = Some((path, conn));
    }
    let (_, conn) = file.as_mut().expect("opened above");
    f(conn).map_err(|e| ToolError::tool_failed(format!("audit database: {e}")))
}

fn open_file(path: &std::path::Path) -> Result<Connection, ToolError> {
    let private = || {
        crate::state::private_files(path).map_err(|e| {
            ToolError::tool_failed(format!(
                "cannot open the audit database {}: {e}",
                path.display()
            ))
        })
    };
    private()?;
    let conn = Connection::open(path).map_err(|e| {
        ToolError::tool_failed(format!(
            "cannot open the audit database {}: {e}",
            path.display()
        ))
    })?;
    let setup = || -> rusqlite::Result<()> {
        conn.busy_timeout(crate::state::BUSY_WAIT)?;
        crate::state::use_wal(&conn)?;
        conn.execute_batch(SCHEMA)
    };
    setup()
        .map_err(|e| ToolError::tool_failed(format!("audit database {}: {e}", path.display())))?;
    private()?;
    Ok(conn)
}

fn write(
    conn: &mut Connection,
    records: &[Box<Record>],
    retention: &crate::AuditRetention,
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO audit_records (id, ts_us, timestamp, actor, source, action, resource,
             status, duration_ms, error, metadata, correlation_id)
             VALUES (?1, ?2, ?3, 'mcp', 'server', ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?;
        for r in records {
            insert.execute(rusqlite::params![
                r.id,
                r.ts_us,
                query::iso(r.ts_us),
                r.action,
                r.resource,
                r.status,
                r.duration_ms,
                r.error,
                r.metadata.to_string(),
                r.correlation_id,
            ])?;
        }
    }
    retain(&tx, retention)?;
    tx.commit()
}

/// Deletes what the retention no longer keeps: records older than its age, and the oldest
/// beyond its count (`seq` only grows, and only the oldest are ever deleted, so the newest
/// `max_rows` are those above the highest `seq` minus `max_rows`). Both are index lookups.
fn retain(conn: &Connection, retention: &crate::AuditRetention) -> rusqlite::Result<()> {
    let age = i64::try_from(retention.max_age.as_micros()).unwrap_or(i64::MAX);
    let cutoff = chrono::Utc::now().timestamp_micros().saturating_sub(age);
    conn.prepare_cached("DELETE FROM audit_records WHERE ts_us < ?1")?
        .execute([cutoff])?;
    let rows = i64::try_from(retention.max_rows).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "DELETE FROM audit_records WHERE seq <= (SELECT MAX(seq) FROM audit_records) - ?1",
    )?
    .execute([rows])?;
    Ok(())
}

/// The writer: takes what is queued, writes it in one transaction, answers flushes. Holds the
/// configuration weakly, so it ends with the server.
fn writer(cfg: Weak<Config>, rx: mpsc::Receiver<Msg>) {
    while let Ok(first) = rx.recv() {
        let mut records = Vec::new();
        let mut flushes = Vec::new();
        let mut take = |msg| match msg {
            Msg::Record(r) => records.push(r),
            Msg::Flush(done) => flushes.push(done),
        };
        let someone_waits = matches!(first, Msg::Flush(_));
        take(first);
        // Group commit: the writer sleeps LINGER (unless someone waits for a flush) and then
        // takes what came meanwhile. Sleeping rather than waiting on the channel matters: a
        // send to a receiver that is not parked wakes no thread, so the calls of a busy server
        // cost one wake-up per batch, not one each.
        if !someone_waits {
            std::thread::sleep(LINGER);
        }
        // And what is queued already, without waiting.
        for msg in std::iter::from_fn(|| rx.try_recv().ok()).take(MAX_BATCH) {
            take(msg);
        }
        let Some(cfg) = cfg.upgrade() else { return };
        if !records.is_empty()
            && let Err(e) = with_db(&cfg, |c| write(c, &records, &cfg.audit.retention))
        {
            tracing::warn!("the audit trail could not be written: {}", e.message);
        }
        drop(cfg);
        for done in flushes {
            let _ = done.send(());
        }
    }
}

impl Audit {
    fn send(&self, cfg: &Arc<Config>, msg: Msg) -> bool {
        let mut queue = lock(&self.queue);
        let tx = queue.get_or_insert_with(|| {
            let (tx, rx) = mpsc::sync_channel(QUEUE);
            let weak = Arc::downgrade(cfg);
            let _ = std::thread::Builder::new()
                .name("audit-writer".into())
                .spawn(move || writer(weak, rx));
            tx
        });
        match tx.try_send(msg) {
            Ok(()) => true,
            // A flush waits for room: it is called from the blocking pool.
            Err(mpsc::TrySendError::Full(Msg::Flush(done))) => tx.send(Msg::Flush(done)).is_ok(),
            Err(_) => false,
        }
    }

    /// Waits until every record queued so far is written (blocking).
    fn flush(&self, cfg: &Arc<Config>) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.send(cfg, Msg::Flush(done)) {
            let _ = wait.recv_timeout(Duration::from_secs(30));
        }
    }
}

/// The call observer that keeps the trail.
struct AuditObserver(Arc<Config>);

impl CallObserver for AuditObserver {
    fn started(&self, call: &CallStart<'_>) {
        let secret = self.0.audit.secret_fields.get();
        let args = redact::arguments(call.arguments, secret);
        lock(&self.0.audit.pending).insert(call.id, (args, call.parent));
    }

    fn finished(&self, call: &CallEnd<'_>) {
        let cfg = &self.0;
        let taken = lock(&cfg.audit.pending).remove(&call.id);
        let (arguments, parent) = taken.unwrap_or((Value::Object(Map::new()), None));
        let message = call.error.map(|e| redact::text(&e.message));
        let record = Record {
            id: uuid::Uuid::new_v4().simple().to_string(),
            ts_us: chrono::Utc::now().timestamp_micros(),
            action: call.tool.to_string(),
            resource: redact::resource(&arguments),
            status: if call.error.is_some() { "error" } else { "ok" },
            duration_ms: call.duration.as_secs_f64() * 1000.0,
            error: call.error.map(|e| {
                format!(
                    "{}: {}",
                    e.code.as_str(),
                    message.clone().unwrap_or_default()
                )
            }),
            metadata: json!({
                "arguments": arguments,
                "call_id": call.id,
                "parent_call_id": parent,
                "error_code": call.error.map(|e| e.code.as_str().to_string()),
            }),
            correlation_id: call.correlation_id.to_string(),
        };
        if !cfg.audit.send(cfg, Msg::Record(Box::new(record))) {
            cfg.audit.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(e) = call.error {
            crate::notify::publish(
                cfg,
                crate::notify::Event {
                    kind: "action.failed".into(),
                    source: call.tool.to_string(),
                    severity: "error",
                    subject: format!("{} failed: {}", call.tool, e.code.as_str()),
                    correlation_id: Some(call.correlation_id.to_string()),
                    error: message,
                },
            );
        }
    }
}

pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    reg.observe(Arc::new(AuditObserver(cfg.clone())));
    query::register(reg, cfg);
}

/// Learns which argument names the registry's tools mark secret (`writeOnly` in their input
/// schemas, at any depth); called once the registry holds every tool.
pub(crate) fn learn_secrets(cfg: &Config, reg: &Registry) {
    let mut names = std::collections::HashSet::new();
    for t in reg.tools() {
        redact::write_only_names(&Value::Object(t.input_schema.clone()), &mut names);
    }
    let _ = cfg.audit.secret_fields.set(names);
}

/// FA_audit_configure: keep the trail in `db_path` (inside the roots) from now on; the choice
/// is kept in the state database, so it outlives the server.
fn configure(cfg: &Arc<Config>, db_path: &str) -> Result<Value, ToolError> {
    cfg.audit.flush(cfg);
    let resolved = cfg.roots.resolve(db_path)?;
    // Opened (and its schema made) now, so a bad path fails here and not in the writer.
    drop(open_file(&resolved)?);
    let shown = resolved.to_string_lossy().to_string();
    cfg.state.with(|c| {
        c.execute(
            "INSERT INTO state_meta (key, value) VALUES (?1, ?2)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [KEY_DB_PATH, &shown],
        )
    })?;
    *lock(&cfg.audit.path) = Some(Some(resolved));
    Ok(json!({
        "active": true,
        "db_path": shown,
        "schema_version": 1,
        "dropped_records": cfg.audit.dropped.load(Ordering::Relaxed),
    }))
}

/// Runs `work` on the blocking pool once the queued records are written.
/// One page of the records passing `filters` (FA_audit_search's, as JSON) and how many pass
/// in all: for audit_search.
pub(crate) async fn page(
    cfg: &Arc<Config>,
    filters: Value,
) -> Result<(Vec<Value>, u64), ToolError> {
    let parse = |v: Value| {
        serde_json::from_value::<query::Filters>(v)
            .map_err(|e| ToolError::bad_argument(format!("audit filters: {e}")))
    };
    let (one, all) = (parse(filters.clone())?, {
        let mut f = filters;
        if let Some(m) = f.as_object_mut() {
            m.remove("limit");
            m.remove("offset");
        }
        parse(f)?
    });
    after_flush(cfg, move |c| {
        Ok((query::search(c, one)?, query::count(c, all)?))
    })
    .await
}

async fn after_flush<T: Send + 'static>(
    cfg: &Arc<Config>,
    work: impl FnOnce(&Arc<Config>) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let cfg = cfg.clone();
    maljan_server::blocking(move || {
        cfg.audit.flush(&cfg);
        work(&cfg)
    })
    .await
}
