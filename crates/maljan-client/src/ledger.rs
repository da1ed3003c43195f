//! The ledger: every call, recorded in SQLite (WAL) — job, evidence id (`ev_0001`… per job),
//! server, tool, the arguments as the caller wrote them, the result (capped, marked when cut), ok,
//! error code, message, remediation, start time, wait for a slot, duration — plus jobs and their
//! degradation reasons, and server rests.
//!
//! Durability: [`Ledger::record`] returns only after the row is committed, so a call that returned
//! to its caller is in the ledger even if the process is killed right after (WAL with
//! `synchronous=NORMAL` survives a process kill; an OS crash may lose the last commits).
//! Throughput: concurrent callers share one commit (group commit): whoever holds the connection
//! writes every queued row in one transaction, and the others find theirs already committed.

use std::{
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

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

struct Queue {
    next_seq: u64,
    items: Vec<(u64, LedgerEntry)>,
    /// Sequence ranges whose batch failed, with the error (kept small: the last few).
    failed: Vec<(u64, u64, String)>,
}

struct Inner {
    conn: Mutex<Connection>,
    queue: Mutex<Queue>,
    committed: AtomicU64,
    result_cap: usize,
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

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS jobs(
    job_id TEXT PRIMARY KEY,
    label TEXT NOT NULL DEFAULT '',
    sample_path TEXT,
    sample_sha256 TEXT,
    sample_size INTEGER,
    created_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER,
    status TEXT NOT NULL DEFAULT 'running'
);
CREATE TABLE IF NOT EXISTS calls(
    seq INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    ev_id TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    result TEXT,
    result_truncated INTEGER NOT NULL DEFAULT 0,
    ok INTEGER NOT NULL,
    error_code TEXT,
    message TEXT,
    remediation TEXT,
    started_at_ms INTEGER NOT NULL,
    wait_ms REAL NOT NULL,
    duration_ms REAL NOT NULL,
    trial INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS calls_by_job ON calls(job_id, ev_id);
CREATE TABLE IF NOT EXISTS degradations(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    UNIQUE(job_id, reason)
);
CREATE TABLE IF NOT EXISTS rests(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    server TEXT NOT NULL,
    job_id TEXT,
    failures INTEGER NOT NULL,
    cooldown_s REAL NOT NULL,
    reason TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
"#;

impl Ledger {
    /// Opens (creating, 0o600) the database at `path`.
    pub fn open(path: &Path, result_cap: usize) -> Result<Self, LedgerError> {
        let oe = |err: String| LedgerError::Open {
            path: path.display().to_string(),
            err,
        };
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            crate::paths::ensure_private_dir(dir).map_err(|e| oe(e.to_string()))?;
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
        let conn = Connection::open(path).map_err(|e| oe(e.to_string()))?;
        Self::init(conn, result_cap).map_err(|e| oe(e.to_string()))
    }

    /// A private in-memory ledger (tests, the conformance client).
    pub fn open_in_memory() -> Self {
        let conn = Connection::open_in_memory().expect("sqlite in memory");
        Self::init(conn, 256 * 1024).expect("schema")
    }

    fn init(conn: Connection, result_cap: usize) -> rusqlite::Result<Self> {
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        conn.execute_batch("PRAGMA synchronous=NORMAL;")?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                queue: Mutex::new(Queue {
                    next_seq: 0,
                    items: Vec::new(),
                    failed: Vec::new(),
                }),
                committed: AtomicU64::new(0),
                result_cap,
            }),
        })
    }

    pub fn result_cap(&self) -> usize {
        self.inner.result_cap
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.inner.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cuts a result to the cap (on a char boundary); returns (text, truncated).
    pub fn cap_result(&self, text: String) -> (String, bool) {
        cap(text, self.inner.result_cap)
    }

    /// Records one call; returns once it is committed.
    pub fn record(&self, entry: LedgerEntry) -> Result<(), LedgerError> {
        let seq = {
            let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.next_seq += 1;
            let seq = q.next_seq;
            q.items.push((seq, entry));
            seq
        };
        loop {
            if self.inner.committed.load(Ordering::Acquire) >= seq {
                return self.batch_result(seq);
            }
            let mut conn = self.conn();
            if self.inner.committed.load(Ordering::Acquire) >= seq {
                return self.batch_result(seq);
            }
            let batch = {
                let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
                std::mem::take(&mut q.items)
            };
            let Some(hi) = batch.last().map(|(s, _)| *s) else {
                continue;
            };
            let lo = batch[0].0;
            if let Err(e) = write_batch(&mut conn, &batch) {
                let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
                q.failed.push((lo, hi, e.to_string()));
                if q.failed.len() > 64 {
                    q.failed.remove(0);
                }
            }
            self.inner.committed.fetch_max(hi, Ordering::AcqRel);
        }
    }

    fn batch_result(&self, seq: u64) -> Result<(), LedgerError> {
        let q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
        match q
            .failed
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&seq))
        {
            Some((_, _, e)) => Err(LedgerError::Write(e.clone())),
            None => Ok(()),
        }
    }

    pub fn create_job(
        &self,
        job_id: &str,
        label: &str,
        sample: Option<(&str, &str, i64)>,
    ) -> Result<(), LedgerError> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO jobs(job_id, label, sample_path, sample_sha256, sample_size, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![job_id, label, sample.map(|s| s.0), sample.map(|s| s.1), sample.map(|s| s.2), crate::time::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| LedgerError::Write(e.to_string()))
    }

    pub fn finish_job(&self, job_id: &str, status: &str) -> Result<(), LedgerError> {
        self.conn()
            .execute(
                "UPDATE jobs SET status = ?2, finished_at_ms = ?3 WHERE job_id = ?1",
                params![job_id, status, crate::time::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| LedgerError::Write(e.to_string()))
    }

    /// Adds a degradation reason to a job (each distinct reason once).
    pub fn add_degradation(&self, job_id: &str, reason: &str) -> Result<(), LedgerError> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO degradations(job_id, reason, at_ms) VALUES (?1, ?2, ?3)",
                params![job_id, reason, crate::time::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| LedgerError::Write(e.to_string()))
    }

    pub fn record_rest(
        &self,
        server: &str,
        job_id: Option<&str>,
        failures: u32,
        cooldown_s: f64,
        reason: &str,
    ) -> Result<(), LedgerError> {
        self.conn()
            .execute(
                "INSERT INTO rests(server, job_id, failures, cooldown_s, reason, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![server, job_id, failures, cooldown_s, reason, crate::time::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| LedgerError::Write(e.to_string()))
    }

    /// Calls, oldest first: one job's, or the last `limit` of all.
    pub fn calls(
        &self,
        job_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<LedgerEntry>, LedgerError> {
        let conn = self.conn();
        let re = |e: rusqlite::Error| LedgerError::Read(e.to_string());
        let cols = "job_id, ev_id, server, tool, args, result, result_truncated, ok, error_code, message, remediation, started_at_ms, wait_ms, duration_ms, trial";
        let sql = match job_id {
            Some(_) => format!("SELECT {cols} FROM calls WHERE job_id = ?1 ORDER BY seq LIMIT ?2"),
            None => format!(
                "SELECT * FROM (SELECT seq, {cols} FROM calls ORDER BY seq DESC LIMIT ?2) ORDER BY seq"
            ),
        };
        let mut stmt = conn.prepare(&sql).map_err(re)?;
        let off = usize::from(job_id.is_none());
        let map = |r: &rusqlite::Row<'_>| -> rusqlite::Result<LedgerEntry> {
            let started: i64 = r.get(off + 11)?;
            Ok(LedgerEntry {
                job_id: r.get(off)?,
                ev_id: r.get(off + 1)?,
                server: r.get(off + 2)?,
                tool: r.get(off + 3)?,
                args: r.get(off + 4)?,
                result: r.get(off + 5)?,
                result_truncated: r.get(off + 6)?,
                ok: r.get(off + 7)?,
                error_code: r.get(off + 8)?,
                message: r.get(off + 9)?,
                remediation: r.get(off + 10)?,
                started_at: crate::time::rfc3339_ms(started),
                started_at_ms: started,
                wait_ms: r.get(off + 12)?,
                duration_ms: r.get(off + 13)?,
                trial: r.get(off + 14)?,
            })
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![job_id.unwrap_or(""), limit], map)
            .map_err(re)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(re)
    }

    /// Number of recorded calls (all jobs, or one).
    pub fn count(&self, job_id: Option<&str>) -> Result<i64, LedgerError> {
        let conn = self.conn();
        let r = match job_id {
            Some(j) => conn.query_row("SELECT COUNT(*) FROM calls WHERE job_id = ?1", [j], |r| {
                r.get(0)
            }),
            None => conn.query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0)),
        };
        r.map_err(|e| LedgerError::Read(e.to_string()))
    }

    pub fn degradations(&self, job_id: &str) -> Result<Vec<String>, LedgerError> {
        let conn = self.conn();
        let re = |e: rusqlite::Error| LedgerError::Read(e.to_string());
        let mut stmt = conn
            .prepare("SELECT reason FROM degradations WHERE job_id = ?1 ORDER BY id")
            .map_err(re)?;
        let rows = stmt.query_map([job_id], |r| r.get(0)).map_err(re)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(re)
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
        let re = |e: rusqlite::Error| LedgerError::Read(e.to_string());
        let mut rows = {
            let conn = self.conn();
            let sql = "SELECT j.job_id, j.label, j.sample_path, j.sample_sha256, j.sample_size, j.created_at_ms, j.finished_at_ms, j.status,
                   (SELECT COUNT(*) FROM calls c WHERE c.job_id = j.job_id),
                   (SELECT COUNT(*) FROM calls c WHERE c.job_id = j.job_id AND c.ok = 0)
                   FROM jobs j WHERE (?1 IS NULL OR j.job_id = ?1) ORDER BY j.created_at_ms DESC, j.rowid DESC LIMIT ?2";
            let mut stmt = conn.prepare(sql).map_err(re)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let it = stmt
                .query_map(params![job_id, limit], |r| {
                    let created: i64 = r.get(5)?;
                    let finished: Option<i64> = r.get(6)?;
                    Ok(JobRow {
                        job_id: r.get(0)?,
                        label: r.get(1)?,
                        sample_path: r.get(2)?,
                        sample_sha256: r.get(3)?,
                        sample_size: r.get(4)?,
                        created_at: crate::time::rfc3339_ms(created),
                        finished_at: finished.map(crate::time::rfc3339_ms),
                        status: r.get(7)?,
                        calls: r.get(8)?,
                        failed_calls: r.get(9)?,
                        degradations: Vec::new(),
                    })
                })
                .map_err(re)?;
            it.collect::<Result<Vec<_>, _>>().map_err(re)?
        };
        for row in &mut rows {
            row.degradations = self.degradations(&row.job_id)?;
        }
        Ok(rows)
    }

    /// Whether a job exists.
    pub fn has_job(&self, job_id: &str) -> Result<bool, LedgerError> {
        self.conn()
            .query_row("SELECT 1 FROM jobs WHERE job_id = ?1", [job_id], |_| Ok(()))
            .optional()
            .map(|o| o.is_some())
            .map_err(|e| LedgerError::Read(e.to_string()))
    }
}

fn write_batch(conn: &mut Connection, batch: &[(u64, LedgerEntry)]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO calls(job_id, ev_id, server, tool, args, result, result_truncated, ok, error_code, message, remediation, started_at_ms, wait_ms, duration_ms, trial)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )?;
        for (_, e) in batch {
            stmt.execute(params![
                e.job_id,
                e.ev_id,
                e.server,
                e.tool,
                e.args,
                e.result,
                e.result_truncated,
                e.ok,
                e.error_code,
                e.message,
                e.remediation,
                e.started_at_ms,
                e.wait_ms,
                e.duration_ms,
                e.trial
            ])?;
        }
    }
    tx.commit()
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
mod tests {
    use super::*;

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
    fn results_are_capped_on_char_boundaries() {
        let l = Ledger::open_in_memory();
        let (t, cut) = cap("ééé".to_string(), 3);
        assert_eq!((t.as_str(), cut), ("é", true));
        let (t, cut) = l.cap_result("short".into());
        assert_eq!((t.as_str(), cut), ("short", false));
    }

    #[test]
    fn concurrent_writers_all_land() {
        let l = Ledger::open_in_memory();
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
