//! The ledger: every call, recorded in SQLite (WAL) or PostgreSQL (see [`db`], one set of
//! queries for both, and `schema` for the migrations) — job, evidence id (`ev_0001`… per job),
//! server, tool, the arguments as the caller wrote them, the result (capped, marked when cut), ok,
//! error code, message, remediation, start time, wait for a slot, duration — plus jobs and their
//! degradation reasons, server rests, and the child samples of recursive analysis (`children`).
//!
//! Durability: a call that returned to its caller is in the ledger even if the process is killed
//! right after. [`Ledger::append`] (and its blocking twin [`Ledger::record`]) returns once the
//! transaction holding the row has committed: with WAL and `synchronous=NORMAL` the commit is in
//! the WAL file (the OS page cache), which a process kill cannot take back. It does not survive an
//! OS crash or power loss for the last few records (no fsync per commit); that is not what the
//! promise is about.
//!
//! Throughput: one writer thread owns the connection and commits whatever is queued in one
//! transaction (group commit), so concurrent calls share commits; see [`writer`].

mod browse;
mod children;
pub mod db;
mod queue;
mod read;
mod schema;
mod writer;

pub use children::ChildRow;

use std::{path::Path, sync::Arc};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

pub use browse::JOB_EVENTS_CHANNEL;
pub use browse::{CallFilter, JobEvent, Page};
pub use db::{DatabaseUrl, Engine};
pub use queue::{CANCEL_CHANNEL, CancelOutcome, Lease, NewQueuedJob, QueuedJob};
pub use schema::SCHEMA_VERSION;

use db::{Conn, DbError, DbResult, vals};
use read::{read_calls, read_degradations, read_jobs};
use writer::{Op, Writer};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger {path}: {err}")]
    Open { path: String, err: String },
    #[error("ledger write failed: {0}")]
    Write(String),
    #[error("ledger read failed: {0}")]
    Read(String),
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub job_id: String,
    pub ev_id: String,
    pub server: String,
    pub tool: String,
    /// The arguments as the caller wrote them (JSON text).
    pub args: String,
    /// The result as JSON text (capped), or null when there was none.
    pub result: Option<String>,
    pub result_truncated: bool,
    pub ok: bool,
    pub error_code: Option<String>,
    pub message: Option<String>,
    pub remediation: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub started_at_ms: i64,
    /// Time spent waiting for a slot under the concurrency cap.
    pub wait_ms: f64,
    /// Time from sending to the answer (or the failure).
    pub duration_ms: f64,
    /// Whether this was the breaker's trial call.
    pub trial: bool,
}

/// One model request of a job, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    pub job_id: String,
    pub stage: String,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub duration_ms: f64,
}

/// A job as the ledger knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub job_id: String,
    pub label: String,
    pub sample_path: Option<String>,
    pub sample_sha256: Option<String>,
    pub sample_size: Option<i64>,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub status: String,
    pub calls: i64,
    pub failed_calls: i64,
    pub degradations: Vec<String>,
}

struct Inner {
    writer: Writer,
    result_cap: usize,
    url: DatabaseUrl,
}

/// A cheap, cloneable handle to the ledger database.
#[derive(Clone)]
pub struct Ledger {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ledger")
    }
}

impl Ledger {
    /// Opens (creating, 0o600) the SQLite database at `path`.
    pub fn open(path: &Path, result_cap: usize) -> Result<Self, LedgerError> {
        Self::open_url(&DatabaseUrl::Sqlite(path.to_path_buf()), result_cap)
    }

    /// Opens the ledger at a database URL (`sqlite:PATH` or `postgres://…`), bringing its schema
    /// up to date.
    pub fn connect(url: &str, result_cap: usize) -> Result<Self, LedgerError> {
        let parsed = DatabaseUrl::parse(url).map_err(|err| LedgerError::Open {
            path: "database URL".into(),
            err,
        })?;
        Self::open_url(&parsed, result_cap)
    }

    pub fn open_url(url: &DatabaseUrl, result_cap: usize) -> Result<Self, LedgerError> {
        let oe = |err: String| LedgerError::Open {
            path: url.redacted(),
            err,
        };
        let conn = off_async(|| {
            let mut conn = connect_raw(url)?;
            schema::migrate(&mut conn)?;
            Ok(conn)
        })
        .map_err(|e| oe(e.message))?;
        Self::start(conn, url.clone(), result_cap).map_err(oe)
    }

    /// Brings the schema at `url` up to date without opening a ledger (`maljan db migrate`);
    /// returns (version before, version now).
    pub fn migrate(url: &str) -> Result<(i64, i64), LedgerError> {
        let parsed = DatabaseUrl::parse(url).map_err(|err| LedgerError::Open {
            path: "database URL".into(),
            err,
        })?;
        let oe = |e: DbError| LedgerError::Open {
            path: parsed.redacted(),
            err: e.message,
        };
        off_async(|| schema::migrate(&mut connect_raw(&parsed)?)).map_err(oe)
    }

    /// A private in-memory ledger (tests, the conformance client).
    pub fn open_in_memory() -> Self {
        let conn = rusqlite::Connection::open_in_memory().expect("sqlite in memory");
        let mut conn = Conn::Sqlite(conn);
        sqlite_setup(&mut conn).expect("sqlite pragmas");
        schema::migrate(&mut conn).expect("schema");
        let url = DatabaseUrl::Sqlite(":memory:".into());
        Self::start(conn, url, 256 * 1024).expect("ledger writer thread")
    }

    fn start(conn: Conn, url: DatabaseUrl, result_cap: usize) -> Result<Self, String> {
        let writer = Writer::start(conn).map_err(|e| format!("ledger writer thread: {e}"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                writer,
                result_cap,
                url,
            }),
        })
    }

    /// Where this ledger lives.
    pub fn url(&self) -> &DatabaseUrl {
        &self.inner.url
    }

    pub fn engine(&self) -> Engine {
        match self.inner.url {
            DatabaseUrl::Sqlite(_) => Engine::Sqlite,
            DatabaseUrl::Postgres(_) => Engine::Postgres,
        }
    }

    /// The schema version this ledger is at.
    pub fn schema_version(&self) -> Result<i64, LedgerError> {
        self.read(|c| {
            c.query_one(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version",
                vals![],
            )?
            .i64(0)
        })
    }

    /// Transactions that wrote call rows so far (fewer than rows when callers shared commits).
    pub fn commits(&self) -> u64 {
        self.inner.writer.commits()
    }

    pub fn result_cap(&self) -> usize {
        self.inner.result_cap
    }

    /// Cuts a result to the cap (on a char boundary); returns (text, truncated).
    pub fn cap_result(&self, text: String) -> (String, bool) {
        cap(text, self.inner.result_cap)
    }

    /// Records one call; resolves once the transaction holding its row has committed (safe from
    /// a process kill). Concurrent callers share commits.
    pub async fn append(&self, entry: LedgerEntry) -> Result<(), LedgerError> {
        let (tx, rx) = oneshot::channel();
        if !self.inner.writer.send(Op::Record(Box::new(entry), tx)) {
            return Err(stopped());
        }
        match rx.await {
            Ok(r) => r.map_err(LedgerError::Write),
            Err(_) => Err(stopped()),
        }
    }

    /// [`Self::append`] for code that is not async; blocks until the row is committed.
    /// `unconstrained`: inside a tokio task an exhausted coop budget would make the wait spin.
    pub fn record(&self, entry: LedgerEntry) -> Result<(), LedgerError> {
        futures::executor::block_on(tokio::task::unconstrained(self.append(entry)))
    }

    /// Runs `f` on the writer thread, after everything queued before it, and waits for it.
    fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> T + Send + 'static,
    ) -> Result<T, LedgerError> {
        // A plain blocking channel: a synchronous caller waits synchronously. (Blocking on a tokio
        // oneshot from inside a tokio task spun on the task's exhausted coop budget at 100% CPU,
        // about 2.5 s per call in the console bench.)
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let job = Box::new(move |c: &mut Conn| {
            let _ = tx.send(f(c));
        });
        if !self.inner.writer.send(Op::Run(job)) {
            return Err(stopped());
        }
        rx.recv().map_err(|_| stopped())
    }

    fn write(
        &self,
        f: impl FnOnce(&mut Conn) -> DbResult<u64> + Send + 'static,
    ) -> Result<(), LedgerError> {
        self.with_conn(f)?
            .map(|_| ())
            .map_err(|e| LedgerError::Write(e.message))
    }

    /// Runs a read on the writer thread (after the writes queued before it).
    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> DbResult<T> + Send + 'static,
    ) -> Result<T, LedgerError> {
        self.with_conn(f)?.map_err(|e| LedgerError::Read(e.message))
    }

    pub fn create_job(
        &self,
        job_id: &str,
        label: &str,
        sample: Option<(&str, &str, i64)>,
    ) -> Result<(), LedgerError> {
        let (job_id, label) = (job_id.to_string(), label.to_string());
        let sample = sample.map(|(p, h, n)| (p.to_string(), h.to_string(), n));
        self.write(move |c| {
            let s = sample.as_ref();
            c.execute(
                "INSERT INTO jobs(job_id, label, sample_path, sample_sha256, sample_size, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                vals![job_id, label, s.map(|s| &s.0), s.map(|s| &s.1), s.map(|s| s.2), crate::time::now_ms()],
            )
        })
    }

    pub fn finish_job(&self, job_id: &str, status: &str) -> Result<(), LedgerError> {
        let (job_id, status) = (job_id.to_string(), status.to_string());
        self.write(move |c| {
            c.execute(
                "UPDATE jobs SET status = ?2, finished_at_ms = ?3 WHERE job_id = ?1",
                vals![job_id, status, crate::time::now_ms()],
            )
        })
    }

    /// Adds a degradation reason to a job (each distinct reason once).
    pub fn add_degradation(&self, job_id: &str, reason: &str) -> Result<(), LedgerError> {
        let (job_id, reason) = (job_id.to_string(), reason.to_string());
        self.write(move |c| {
            c.execute(
                "INSERT INTO degradations(job_id, reason, at_ms) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                vals![job_id, reason, crate::time::now_ms()],
            )
        })
    }

    pub fn record_rest(
        &self,
        server: &str,
        job_id: Option<&str>,
        failures: u32,
        cooldown_s: f64,
        reason: &str,
    ) -> Result<(), LedgerError> {
        let (server, job_id, reason) = (
            server.to_string(),
            job_id.map(str::to_string),
            reason.to_string(),
        );
        self.write(move |c| {
            c.execute(
                "INSERT INTO rests(server, job_id, failures, cooldown_s, reason, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                vals![server, job_id, failures, cooldown_s, reason, crate::time::now_ms()],
            )
        })
    }

    /// Notes something about one recorded call (the agent: "arguments repaired", …).
    pub fn add_call_note(&self, job_id: &str, ev_id: &str, note: &str) -> Result<(), LedgerError> {
        let (job_id, ev_id, note) = (job_id.to_string(), ev_id.to_string(), note.to_string());
        self.write(move |c| {
            c.execute(
                "INSERT INTO call_notes(job_id, ev_id, note, at_ms) VALUES (?1, ?2, ?3, ?4)",
                vals![job_id, ev_id, note, crate::time::now_ms()],
            )
        })
    }

    /// A job's call notes, oldest first: (ev_id, note).
    pub fn call_notes(&self, job_id: &str) -> Result<Vec<(String, String)>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            c.query(
                "SELECT ev_id, note FROM call_notes WHERE job_id = ?1 ORDER BY id",
                vals![job_id],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?)))
            .collect()
        })
    }

    /// Records one model request's tokens.
    pub fn record_model_usage(&self, u: ModelUsage) -> Result<(), LedgerError> {
        self.write(move |c| {
            c.execute(
                "INSERT INTO model_usage(job_id, stage, provider, model, input_tokens, output_tokens, duration_ms, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                vals![
                    u.job_id,
                    u.stage,
                    u.provider,
                    u.model,
                    u.input_tokens as i64,
                    u.output_tokens as i64,
                    u.duration_ms,
                    crate::time::now_ms()
                ],
            )
        })
    }

    /// A job's model requests, oldest first.
    pub fn model_usage(&self, job_id: &str) -> Result<Vec<ModelUsage>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            c.query(
                "SELECT job_id, stage, provider, model, input_tokens, output_tokens, duration_ms FROM model_usage WHERE job_id = ?1 ORDER BY id",
                vals![job_id],
            )?
            .iter()
            .map(|r| {
                Ok(ModelUsage {
                    job_id: r.text(0)?,
                    stage: r.text(1)?,
                    provider: r.text(2)?,
                    model: r.text(3)?,
                    input_tokens: r.i64(4)? as u64,
                    output_tokens: r.i64(5)? as u64,
                    duration_ms: r.f64(6)?,
                })
            })
            .collect()
        })
    }

    /// Calls, oldest first: one job's, or the last `limit` of all.
    pub fn calls(
        &self,
        job_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<LedgerEntry>, LedgerError> {
        let job_id = job_id.map(str::to_string);
        self.read(move |conn| read_calls(conn, job_id.as_deref(), limit))
    }

    /// Number of recorded calls (all jobs, or one).
    pub fn count(&self, job_id: Option<&str>) -> Result<i64, LedgerError> {
        let job_id = job_id.map(str::to_string);
        self.read(move |c| {
            match job_id {
                Some(j) => c.query_one("SELECT COUNT(*) FROM calls WHERE job_id = ?1", vals![j]),
                None => c.query_one("SELECT COUNT(*) FROM calls", vals![]),
            }?
            .i64(0)
        })
    }

    pub fn degradations(&self, job_id: &str) -> Result<Vec<String>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |conn| read_degradations(conn, &job_id))
    }

    /// One job, with its call counts and degradation reasons.
    pub fn job(&self, job_id: &str) -> Result<Option<JobRow>, LedgerError> {
        Ok(self.jobs_where(Some(job_id), 1)?.pop())
    }

    /// The most recent jobs, newest first.
    pub fn jobs(&self, limit: usize) -> Result<Vec<JobRow>, LedgerError> {
        self.jobs_where(None, limit)
    }

    fn jobs_where(&self, job_id: Option<&str>, limit: usize) -> Result<Vec<JobRow>, LedgerError> {
        let job_id = job_id.map(str::to_string);
        self.read(move |conn| read_jobs(conn, job_id.as_deref(), limit))
    }

    /// Whether a job exists.
    pub fn has_job(&self, job_id: &str) -> Result<bool, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            Ok(
                c.query_opt("SELECT 1 FROM jobs WHERE job_id = ?1", vals![job_id])?
                    .is_some(),
            )
        })
    }
}

/// Runs `f` on a thread of its own: the PostgreSQL client blocks on a runtime of its own, which
/// tokio refuses inside a runtime (the callers are often async).
fn off_async<T: Send>(f: impl FnOnce() -> DbResult<T> + Send) -> DbResult<T> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|_| Err(DbError::new("the database connection panicked")))
    })
}

/// A raw connection to `url` (SQLite: created 0o600 in a private directory, WAL).
pub(crate) fn connect_raw(url: &DatabaseUrl) -> DbResult<Conn> {
    match url {
        DatabaseUrl::Postgres(u) => Conn::postgres(u),
        DatabaseUrl::Sqlite(path) => {
            if let Some(dir) = path.parent()
                && !dir.as_os_str().is_empty()
            {
                crate::paths::ensure_private_dir(dir).map_err(|e| DbError::new(e.to_string()))?;
            }
            if !path.exists() {
                use std::os::unix::fs::OpenOptionsExt;
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o600)
                    .open(path);
            }
            let mut conn = Conn::Sqlite(rusqlite::Connection::open(path)?);
            sqlite_setup(&mut conn)?;
            Ok(conn)
        }
    }
}

fn sqlite_setup(conn: &mut Conn) -> DbResult<()> {
    let Conn::Sqlite(c) = conn else {
        return Ok(());
    };
    c.busy_timeout(std::time::Duration::from_secs(10))?;
    let _: String = c.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    // NORMAL: a commit reaches the WAL file (and so survives a process kill) without an fsync per
    // commit; only checkpoints sync.
    c.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;")?;
    Ok(())
}

fn stopped() -> LedgerError {
    LedgerError::Write("the ledger's writer thread has stopped".into())
}

fn cap(mut text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    (text, true)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh ledger on each engine: in-memory SQLite, and a new database on the test
    /// PostgreSQL server (maljan-testkit starts it; a machine without it fails, saying so).
    pub(crate) fn engines() -> Vec<Ledger> {
        let pg = maljan_testkit::postgres::fresh_database();
        vec![
            Ledger::open_in_memory(),
            Ledger::connect(&pg, 256 * 1024).expect("the test PostgreSQL"),
        ]
    }

    pub(crate) fn entry(job: &str, ev: &str) -> LedgerEntry {
        LedgerEntry {
            job_id: job.into(),
            ev_id: ev.into(),
            server: "s".into(),
            tool: "t".into(),
            args: r#"{"b":1,"a":2}"#.into(),
            result: Some("{}".into()),
            result_truncated: false,
            ok: true,
            error_code: None,
            message: None,
            remediation: None,
            started_at: String::new(),
            started_at_ms: 1,
            wait_ms: 0.0,
            duration_ms: 1.0,
            trial: false,
        }
    }

    #[test]
    fn records_and_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("l.sqlite3"), 10).unwrap();
        l.create_job("j1", "test", None).unwrap();
        l.record(entry("j1", "ev_0001")).unwrap();
        l.record(entry("j1", "ev_0002")).unwrap();
        let calls = l.calls(Some("j1"), 100).unwrap();
        assert_eq!(
            calls.iter().map(|c| c.ev_id.as_str()).collect::<Vec<_>>(),
            ["ev_0001", "ev_0002"]
        );
        assert_eq!(calls[0].args, r#"{"b":1,"a":2}"#);
        assert_eq!(l.calls(None, 1).unwrap()[0].ev_id, "ev_0002");
        l.add_degradation("j1", "r").unwrap();
        l.add_degradation("j1", "r").unwrap();
        let job = l.job("j1").unwrap().unwrap();
        assert_eq!((job.calls, job.degradations.len()), (2, 1));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("l.sqlite3"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0);
    }

    #[test]
    fn records_read_back_in_order_on_postgres_too() {
        let l = Ledger::connect(&maljan_testkit::postgres::fresh_database(), 10).unwrap();
        assert_eq!(
            (l.engine(), l.schema_version().unwrap()),
            (Engine::Postgres, SCHEMA_VERSION)
        );
        l.create_job("j1", "test", Some(("/s", "ab", 3))).unwrap();
        l.create_job("j1", "again", None).unwrap();
        l.record(entry("j1", "ev_0001")).unwrap();
        let mut long = entry("j1", "ev_0002");
        let (text, cut) = l.cap_result("x".repeat(50));
        (long.result, long.result_truncated, long.ok) = (Some(text), cut, false);
        long.started_at = crate::time::rfc3339_ms(long.started_at_ms);
        l.record(long.clone()).unwrap();
        let calls = l.calls(Some("j1"), 100).unwrap();
        assert_eq!(calls[1], long);
        assert_eq!(calls[0].args, r#"{"b":1,"a":2}"#);
        assert_eq!(l.calls(None, 1).unwrap()[0].ev_id, "ev_0002");
        l.add_degradation("j1", "r").unwrap();
        l.add_degradation("j1", "r").unwrap();
        l.record_rest("s", Some("j1"), 3, 60.0, "timeouts").unwrap();
        l.finish_job("j1", "degraded").unwrap();
        let job = l.job("j1").unwrap().unwrap();
        assert_eq!(
            (job.calls, job.failed_calls, job.degradations.len()),
            (2, 1, 1)
        );
        assert_eq!(
            (job.label.as_str(), job.status.as_str()),
            ("test", "degraded")
        );
        assert_eq!(job.sample_size, Some(3));
        assert!(job.finished_at.is_some() && l.has_job("j1").unwrap() && !l.has_job("j2").unwrap());
        // Opening again finds the schema current and runs nothing.
        assert_eq!(
            Ledger::migrate(&postgres_url(&l)).unwrap(),
            (SCHEMA_VERSION, SCHEMA_VERSION)
        );
    }

    fn postgres_url(l: &Ledger) -> String {
        match l.url() {
            DatabaseUrl::Postgres(u) => u.clone(),
            DatabaseUrl::Sqlite(_) => unreachable!(),
        }
    }

    #[test]
    fn call_notes_and_model_usage_read_back_per_job() {
        for l in engines() {
            l.add_call_note("j", "ev_0002", "arguments repaired")
                .unwrap();
            l.add_call_note("k", "ev_0001", "other job").unwrap();
            assert_eq!(
                l.call_notes("j").unwrap(),
                [("ev_0002".to_string(), "arguments repaired".to_string())]
            );
            let u = ModelUsage {
                job_id: "j".into(),
                stage: "analyst".into(),
                provider: "openai".into(),
                model: "m".into(),
                input_tokens: 120,
                output_tokens: 7,
                duration_ms: 3.5,
            };
            l.record_model_usage(u.clone()).unwrap();
            assert_eq!(l.model_usage("j").unwrap(), [u]);
            assert!(l.model_usage("k").unwrap().is_empty());
        }
    }

    #[test]
    fn results_are_capped_on_char_boundaries() {
        let l = Ledger::open_in_memory();
        let (t, cut) = cap("ééé".to_string(), 3);
        assert_eq!((t.as_str(), cut), ("é", true));
        let (t, cut) = l.cap_result("short".into());
        assert_eq!((t.as_str(), cut), ("short", false));
    }

    #[test]
    fn concurrent_writers_all_land() {
        for l in engines() {
            std::thread::scope(|s| {
                for t in 0..8 {
                    let l = l.clone();
                    s.spawn(move || {
                        for i in 0..200 {
                            l.record(entry("j", &format!("ev_{t}_{i}"))).unwrap();
                        }
                    });
                }
            });
            assert_eq!(l.count(Some("j")).unwrap(), 1600);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_share_commits_and_all_land() {
        for l in tokio::task::spawn_blocking(engines).await.unwrap() {
            let tasks: Vec<_> = (0..64)
                .map(|t| {
                    let l = l.clone();
                    tokio::spawn(async move {
                        for i in 0..50 {
                            l.append(entry("j", &format!("ev_{t}_{i}"))).await.unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            assert_eq!(l.count(Some("j")).unwrap(), 3200);
            // 64 callers at once: rows are grouped, far fewer commits than rows.
            assert!(l.commits() < 3200 / 2, "{} commits", l.commits());
        }
    }

    #[test]
    fn operations_run_in_queue_order_and_dropping_the_last_handle_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.sqlite3");
        {
            let l = Ledger::open(&path, 1024).unwrap();
            l.create_job("j", "order", None).unwrap();
            let (tx, rx) = oneshot::channel();
            // Queued, not awaited: the count below still sees it (it runs after it).
            assert!(
                l.inner
                    .writer
                    .send(Op::Record(Box::new(entry("j", "ev_0001")), tx))
            );
            assert_eq!(l.count(Some("j")).unwrap(), 1);
            assert_eq!(futures::executor::block_on(rx).unwrap(), Ok(()));
            let (tx, _rx) = oneshot::channel();
            assert!(
                l.inner
                    .writer
                    .send(Op::Record(Box::new(entry("j", "ev_0002")), tx))
            );
        }
        let l = Ledger::open(&path, 1024).unwrap();
        assert_eq!(l.count(Some("j")).unwrap(), 2);
        assert_eq!(l.job("j").unwrap().unwrap().calls, 2);
    }
}
