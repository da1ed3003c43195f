//! The queue of submitted jobs, in the same database as the ledger (either engine).
//!
//! A job is enqueued with its sample already stored (by sha256); a worker claims the oldest ready
//! job under a lease and renews it while the job runs. Ready: queued, or running under a lease
//! that has run out (its worker died or hung). On PostgreSQL the claim skips rows other workers
//! hold (`FOR UPDATE SKIP LOCKED`), so workers never wait on each other; on SQLite the claim takes
//! the write lock (`BEGIN IMMEDIATE`), which serialises them.
//!
//! A reclaimed job starts again clean: the calls, events and notes of the attempt that died are
//! kept, moved to `<job>~attempt<N>` (evidence of what happened, outside the job's own ledger), so
//! the job's ledger holds each call of the finishing attempt exactly once.
//!
//! Cancel: a queued job is cancelled at once; a running one is flagged, and its worker sees the
//! flag at its next lease renewal, or at once through `NOTIFY maljan_cancel` on PostgreSQL.

use serde::{Deserialize, Serialize};

use super::{
    DatabaseUrl, Engine, Ledger, LedgerError,
    db::{Conn, DbError, DbResult, Row, vals},
};

/// The channel a cancel is announced on (PostgreSQL).
pub const CANCEL_CHANNEL: &str = "maljan_cancel";

/// What a submitter hands the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewQueuedJob {
    pub job_id: String,
    pub label: String,
    pub sample_sha256: String,
    pub sample_name: String,
    pub sample_size: i64,
    /// Empty: every enabled server.
    pub servers: Vec<String>,
    pub agent: bool,
}

/// A job in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedJob {
    pub job_id: String,
    pub sample_sha256: String,
    pub sample_name: String,
    pub sample_size: i64,
    pub servers: Vec<String>,
    pub agent: bool,
    /// queued | running | complete | degraded | failed | cancelled
    pub state: String,
    pub attempts: i64,
    pub worker: Option<String>,
    pub lease_until_ms: Option<i64>,
    pub cancel_requested: bool,
    pub error: Option<String>,
    pub enqueued_at_ms: i64,
    pub finished_at_ms: Option<i64>,
}

/// What a lease renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    Held,
    /// Held, and a cancel was asked for.
    CancelRequested,
    /// Another worker has the job now (this one let the lease run out).
    Lost,
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It had not started: it never will.
    Dequeued,
    /// Its worker is told.
    Signalled,
    /// It had finished already.
    Finished,
    NotFound,
}

const COLS: &str = "job_id, sample_sha256, sample_name, sample_size, servers, agent, state, attempts, worker, lease_until_ms, cancel_requested, error, enqueued_at_ms, finished_at_ms";

fn queued_row(r: &Row) -> DbResult<QueuedJob> {
    let servers = r.text(4)?;
    Ok(QueuedJob {
        job_id: r.text(0)?,
        sample_sha256: r.text(1)?,
        sample_name: r.text(2)?,
        sample_size: r.i64(3)?,
        servers: servers
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        agent: r.bool(5)?,
        state: r.text(6)?,
        attempts: r.i64(7)?,
        worker: r.opt_text(8)?,
        lease_until_ms: r.opt_i64(9)?,
        cancel_requested: r.bool(10)?,
        error: r.opt_text(11)?,
        enqueued_at_ms: r.i64(12)?,
        finished_at_ms: r.opt_i64(13)?,
    })
}

/// A transaction that writes: on SQLite it takes the write lock at once, so two processes never
/// both read and then both try to write.
fn write_tx<T>(conn: &mut Conn, f: impl FnOnce(&mut Conn) -> DbResult<T>) -> DbResult<T> {
    let begin = match conn.engine() {
        Engine::Sqlite => "BEGIN IMMEDIATE",
        Engine::Postgres => "BEGIN",
    };
    conn.batch(begin)?;
    match f(conn) {
        Ok(v) => {
            conn.batch("COMMIT")?;
            Ok(v)
        }
        Err(e) => {
            let _ = conn.batch("ROLLBACK");
            Err(e)
        }
    }
}

/// The tables whose rows belong to one attempt of a job.
const ATTEMPT_TABLES: &[&str] = &[
    "calls",
    "job_events",
    "degradations",
    "call_notes",
    "model_usage",
    "children",
    "job_reports",
];

/// Moves attempt `attempt`'s rows of `job_id` in `tables` to `<job>~attempt<N>`.
fn keep_attempt_aside(c: &mut Conn, job_id: &str, attempt: i64, tables: &[&str]) -> DbResult<()> {
    let aside = format!("{job_id}~attempt{attempt}");
    for table in tables {
        c.execute(
            &format!("UPDATE {table} SET job_id = ?2 WHERE job_id = ?1"),
            vals![job_id, &aside],
        )?;
    }
    Ok(())
}

fn claim(conn: &mut Conn, worker: &str, lease_ms: i64) -> DbResult<Option<QueuedJob>> {
    let skip_locked = match conn.engine() {
        Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        Engine::Sqlite => "",
    };
    write_tx(conn, |c| {
        let now = crate::time::now_ms();
        let Some(row) = c.query_opt(
            &format!(
                "SELECT {COLS} FROM queue WHERE (state = 'queued' AND (not_before_ms IS NULL OR not_before_ms <= ?1)) OR (state = 'running' AND lease_until_ms < ?1) ORDER BY enqueued_at_ms LIMIT 1{skip_locked}"
            ),
            vals![now],
        )?
        else {
            return Ok(None);
        };
        let job = queued_row(&row)?;
        if job.state == "running" {
            // The attempt whose worker stopped renewing: keep its rows aside.
            keep_attempt_aside(c, &job.job_id, job.attempts, ATTEMPT_TABLES)?;
        }
        let row = c.query_one(
            &format!(
                "UPDATE queue SET state = 'running', worker = ?2, lease_until_ms = ?3, attempts = attempts + 1 WHERE job_id = ?1 RETURNING {COLS}"
            ),
            vals![&job.job_id, worker, now + lease_ms],
        )?;
        c.execute(
            "UPDATE jobs SET status = 'running', finished_at_ms = NULL WHERE job_id = ?1",
            vals![&job.job_id],
        )?;
        if job.state == "running" {
            c.execute(
                "INSERT INTO degradations(job_id, reason, at_ms) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                vals![
                    &job.job_id,
                    format!(
                        "run again: the worker of attempt {} stopped renewing its lease",
                        job.attempts
                    ),
                    now
                ],
            )?;
        }
        queued_row(&row).map(Some)
    })
}

impl Ledger {
    /// Queues a job (its sample already stored) and records it as a queued job.
    pub fn enqueue(&self, job: NewQueuedJob) -> Result<(), LedgerError> {
        self.with_conn(move |c| {
            write_tx(c, |c| {
                let now = crate::time::now_ms();
                c.execute(
                    "INSERT INTO jobs(job_id, label, sample_path, sample_sha256, sample_size, created_at_ms, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued')",
                    vals![&job.job_id, &job.label, &job.sample_name, &job.sample_sha256, job.sample_size, now],
                )?;
                c.execute(
                    "INSERT INTO queue(job_id, sample_sha256, sample_name, sample_size, servers, agent, enqueued_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    vals![&job.job_id, &job.sample_sha256, &job.sample_name, job.sample_size, job.servers.join(","), job.agent, now],
                )
            })
        })?
        .map(|_| ())
        .map_err(|e| LedgerError::Write(e.message))
    }

    /// Records a job that `worker` runs at once (`maljan analyze`): queued and claimed in one
    /// step, under a lease of `lease_ms` it renews like any worker, so `maljan jobs` and the
    /// console list it beside the submitted ones.
    pub fn enqueue_running(
        &self,
        job: NewQueuedJob,
        worker: &str,
        lease_ms: i64,
    ) -> Result<(), LedgerError> {
        let worker = worker.to_string();
        self.with_conn(move |c| {
            write_tx(c, |c| {
                let now = crate::time::now_ms();
                c.execute(
                    "INSERT INTO jobs(job_id, label, sample_path, sample_sha256, sample_size, created_at_ms, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running')",
                    vals![&job.job_id, &job.label, &job.sample_name, &job.sample_sha256, job.sample_size, now],
                )?;
                c.execute(
                    "INSERT INTO queue(job_id, sample_sha256, sample_name, sample_size, servers, agent, enqueued_at_ms, state, worker, lease_until_ms, attempts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, ?9, 1)",
                    vals![&job.job_id, &job.sample_sha256, &job.sample_name, job.sample_size, job.servers.join(","), job.agent, now, &worker, now + lease_ms],
                )
            })
        })?
        .map(|_| ())
        .map_err(|e| LedgerError::Write(e.message))
    }

    /// Claims the oldest ready job for `worker` under a lease of `lease_ms`.
    pub fn claim(&self, worker: &str, lease_ms: i64) -> Result<Option<QueuedJob>, LedgerError> {
        let worker = worker.to_string();
        self.with_conn(move |c| claim(c, &worker, lease_ms))?
            .map_err(|e| LedgerError::Write(e.message))
    }

    /// Extends `worker`'s lease on a job; says whether it still holds it and whether a cancel
    /// was asked for.
    pub fn renew(&self, job_id: &str, worker: &str, lease_ms: i64) -> Result<Lease, LedgerError> {
        let (job_id, worker) = (job_id.to_string(), worker.to_string());
        self.with_conn(move |c| {
            let row = c.query_opt(
                "UPDATE queue SET lease_until_ms = ?3 WHERE job_id = ?1 AND worker = ?2 AND state = 'running' RETURNING cancel_requested",
                vals![job_id, worker, crate::time::now_ms() + lease_ms],
            )?;
            Ok(match row {
                None => Lease::Lost,
                Some(r) if r.bool(0)? => Lease::CancelRequested,
                Some(_) => Lease::Held,
            })
        })?
        .map_err(|e: DbError| LedgerError::Write(e.message))
    }

    /// Marks a claimed job finished (`state`: complete, degraded, failed, cancelled); false when
    /// `worker` no longer held it (its result is then not the job's).
    pub fn finish_queued(
        &self,
        job_id: &str,
        worker: &str,
        state: &str,
        error: Option<&str>,
    ) -> Result<bool, LedgerError> {
        let (job_id, worker, state) = (job_id.to_string(), worker.to_string(), state.to_string());
        let error = error.map(str::to_string);
        self.with_conn(move |c| {
            c.execute(
                "UPDATE queue SET state = ?3, error = ?4, finished_at_ms = ?5, lease_until_ms = NULL WHERE job_id = ?1 AND worker = ?2 AND state = 'running'",
                vals![job_id, worker, state, error, crate::time::now_ms()],
            )
        })?
        .map(|n| n == 1)
        .map_err(|e| LedgerError::Write(e.message))
    }

    /// Puts a job `worker` holds back in the queue, to be claimed again from `not_before_ms` on:
    /// its attempt failed for a reason outside the sample (the sample store unreachable). The
    /// attempt's rows are kept aside as a reclaimed one's are, its events stay (a watcher's
    /// stream goes on), and the reason is the job's error and a degradation until it ends.
    /// False when `worker` no longer held it.
    pub fn retry_queued(
        &self,
        job_id: &str,
        worker: &str,
        reason: &str,
        not_before_ms: i64,
    ) -> Result<bool, LedgerError> {
        let (job_id, worker, reason) = (job_id.to_string(), worker.to_string(), reason.to_string());
        self.with_conn(move |c| {
            write_tx(c, |c| {
                let Some(row) = c.query_opt(
                    "UPDATE queue SET state = 'queued', worker = NULL, lease_until_ms = NULL, not_before_ms = ?3, error = ?4 WHERE job_id = ?1 AND worker = ?2 AND state = 'running' RETURNING attempts",
                    vals![&job_id, &worker, not_before_ms, &reason],
                )?
                else {
                    return Ok(false);
                };
                let attempt = row.i64(0)?;
                // Its events stay with the job: a watcher's stream goes on.
                let tables: Vec<&str> = ATTEMPT_TABLES
                    .iter()
                    .copied()
                    .filter(|t| *t != "job_events")
                    .collect();
                keep_attempt_aside(c, &job_id, attempt, &tables)?;
                c.execute(
                    "UPDATE jobs SET status = 'queued' WHERE job_id = ?1",
                    vals![&job_id],
                )?;
                c.execute(
                    "INSERT INTO degradations(job_id, reason, at_ms) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                    vals![
                        &job_id,
                        format!("run again: attempt {attempt} failed: {reason}"),
                        crate::time::now_ms()
                    ],
                )?;
                Ok(true)
            })
        })?
        .map_err(|e| LedgerError::Write(e.message))
    }

    /// Cancels a job: dequeued if it has not started, else its worker is told.
    pub fn cancel_queued(&self, job_id: &str) -> Result<CancelOutcome, LedgerError> {
        let job_id = job_id.to_string();
        self.with_conn(move |c| {
            write_tx(c, |c| {
                let Some(row) =
                    c.query_opt("SELECT state FROM queue WHERE job_id = ?1", vals![&job_id])?
                else {
                    return Ok(CancelOutcome::NotFound);
                };
                match row.text(0)?.as_str() {
                    "queued" => {
                        let now = crate::time::now_ms();
                        c.execute(
                            "UPDATE queue SET state = 'cancelled', finished_at_ms = ?2 WHERE job_id = ?1",
                            vals![&job_id, now],
                        )?;
                        c.execute(
                            "UPDATE jobs SET status = 'cancelled', finished_at_ms = ?2 WHERE job_id = ?1",
                            vals![&job_id, now],
                        )?;
                        Ok(CancelOutcome::Dequeued)
                    }
                    "running" => {
                        c.execute(
                            "UPDATE queue SET cancel_requested = 1 WHERE job_id = ?1",
                            vals![&job_id],
                        )?;
                        if c.engine() == Engine::Postgres {
                            // Delivered at commit, to every listening worker.
                            c.query("SELECT pg_notify(?1, ?2)", vals![CANCEL_CHANNEL, &job_id])?;
                        }
                        Ok(CancelOutcome::Signalled)
                    }
                    _ => Ok(CancelOutcome::Finished),
                }
            })
        })?
        .map_err(|e| LedgerError::Write(e.message))
    }

    /// Jobs queued or running, on any worker.
    pub fn active_queued_jobs(&self) -> Result<i64, LedgerError> {
        self.read(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM queue WHERE state IN ('queued', 'running')",
                vals![],
            )?
            .i64(0)
        })
    }

    /// One job of the queue.
    pub fn queued_job(&self, job_id: &str) -> Result<Option<QueuedJob>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            c.query_opt(
                &format!("SELECT {COLS} FROM queue WHERE job_id = ?1"),
                vals![job_id],
            )?
            .map(|r| queued_row(&r))
            .transpose()
        })
    }

    /// The queue, newest first, optionally only jobs in `state`.
    pub fn queued_jobs(
        &self,
        state: Option<&str>,
        limit: usize,
    ) -> Result<Vec<QueuedJob>, LedgerError> {
        let state = state.map(str::to_string);
        self.read(move |c| {
            c.query(
                &format!(
                    "SELECT {COLS} FROM queue WHERE (CAST(?1 AS TEXT) IS NULL OR state = ?1) ORDER BY enqueued_at_ms DESC, job_id DESC LIMIT ?2"
                ),
                vals![state, limit],
            )?
            .iter()
            .map(queued_row)
            .collect()
        })
    }

    /// Calls `on_cancel(job_id)` on a thread of its own for each cancel announced (PostgreSQL;
    /// on SQLite there is nothing to listen to and workers see cancels at their lease renewal).
    pub fn listen_for_cancels(
        &self,
        on_cancel: impl Fn(&str) + Send + 'static,
    ) -> Result<(), LedgerError> {
        self.listen(CANCEL_CHANNEL, on_cancel)
    }

    /// Calls `on_note(payload)` on a thread of its own for each announcement on `channel`
    /// (PostgreSQL; nothing on SQLite). Reconnects when the connection drops; what is announced
    /// while it is down is not heard, so a listener also reads the state it follows now and then.
    pub fn listen(
        &self,
        channel: &'static str,
        on_note: impl Fn(&str) + Send + 'static,
    ) -> Result<(), LedgerError> {
        let DatabaseUrl::Postgres(url) = self.url().clone() else {
            return Ok(());
        };
        std::thread::Builder::new()
            .name(format!("maljan-{channel}"))
            .spawn(move || {
                // Said once per outage, not on every attempt to reconnect.
                let mut down = false;
                loop {
                    match listen(&url, channel, &on_note, &mut down) {
                        Err(e) if !down => {
                            tracing::warn!("listening on {channel}: {e}; reconnecting");
                            down = true;
                        }
                        _ => {}
                    }
                    std::thread::sleep(std::time::Duration::from_millis(500));
                }
            })
            .map(|_| ())
            .map_err(|e| LedgerError::Open {
                path: format!("listener on {channel}"),
                err: e.to_string(),
            })
    }
}

fn listen(
    url: &str,
    channel: &str,
    on_note: &impl Fn(&str),
    down: &mut bool,
) -> Result<(), postgres::Error> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute(&format!("LISTEN {channel}"))?;
    *down = false;
    let mut notes = client.notifications();
    let mut it = notes.blocking_iter();
    loop {
        use postgres::fallible_iterator::FallibleIterator;
        match it.next()? {
            Some(n) => on_note(n.payload()),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_job(id: &str) -> NewQueuedJob {
        NewQueuedJob {
            job_id: id.into(),
            label: "t".into(),
            sample_sha256: "a".repeat(64),
            sample_name: "s.bin".into(),
            sample_size: 3,
            servers: vec!["analysis".into()],
            agent: false,
        }
    }

    #[test]
    fn claims_in_order_and_reclaims_after_the_lease() {
        for l in crate::ledger::tests::engines() {
            l.enqueue(new_job("j1")).unwrap();
            l.enqueue(new_job("j2")).unwrap();
            let a = l.claim("w1", 60_000).unwrap().unwrap();
            assert_eq!((a.job_id.as_str(), a.attempts), ("j1", 1));
            assert_eq!(a.servers, ["analysis"]);
            let b = l.claim("w2", 0).unwrap().unwrap();
            assert_eq!(b.job_id, "j2");
            assert_eq!(l.job("j2").unwrap().unwrap().status, "running");
            std::thread::sleep(std::time::Duration::from_millis(5));
            // w2's lease (0 ms) ran out: w3 takes j2 over, w2's renewal finds it lost.
            l.record(crate::ledger::tests::entry("j2", "ev_0001"))
                .unwrap();
            let c = l.claim("w3", 60_000).unwrap().unwrap();
            assert_eq!((c.job_id.as_str(), c.attempts), ("j2", 2));
            assert_eq!(l.renew("j2", "w2", 60_000).unwrap(), Lease::Lost);
            assert_eq!(l.renew("j2", "w3", 60_000).unwrap(), Lease::Held);
            assert_eq!(l.count(Some("j2")).unwrap(), 0);
            assert_eq!(l.count(Some("j2~attempt1")).unwrap(), 1);
            assert!(!l.finish_queued("j2", "w2", "complete", None).unwrap());
            assert!(l.finish_queued("j2", "w3", "complete", None).unwrap());
            assert_eq!(l.queued_job("j2").unwrap().unwrap().state, "complete");
        }
    }

    #[test]
    fn a_retried_job_waits_its_time_then_runs_again() {
        for l in crate::ledger::tests::engines() {
            l.enqueue(new_job("r")).unwrap();
            let a = l.claim("w1", 60_000).unwrap().unwrap();
            l.record(crate::ledger::tests::entry("r", "ev_0001"))
                .unwrap();
            l.append_job_event("r", "stage", "{}").unwrap();
            let soon = crate::time::now_ms() + 150;
            assert!(!l.retry_queued("r", "w2", "x", soon).unwrap(), "not w2's");
            assert!(
                l.retry_queued("r", "w1", "the store is away", soon)
                    .unwrap()
            );
            assert_eq!(l.job("r").unwrap().unwrap().status, "queued");
            assert!(
                l.claim("w1", 60_000).unwrap().is_none(),
                "not before its time"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
            let b = l.claim("w1", 60_000).unwrap().unwrap();
            assert_eq!((b.job_id.as_str(), b.attempts), ("r", a.attempts + 1));
            assert_eq!(b.error.as_deref(), Some("the store is away"));
            assert_eq!(
                l.count(Some("r")).unwrap(),
                0,
                "the attempt's calls are aside"
            );
            assert_eq!(l.count(Some("r~attempt1")).unwrap(), 1);
            assert_eq!(l.job_events("r", 0).unwrap().len(), 1, "its events stay");
            assert!(
                l.degradations("r").unwrap()[0].contains("attempt 1 failed: the store is away")
            );
        }
    }

    #[test]
    fn a_job_run_at_once_is_listed_held_and_finished_like_a_claimed_one() {
        for l in crate::ledger::tests::engines() {
            l.enqueue_running(new_job("now"), "cli-1", 60_000).unwrap();
            let q = l.queued_job("now").unwrap().unwrap();
            assert_eq!((q.state.as_str(), q.attempts), ("running", 1));
            assert_eq!(q.worker.as_deref(), Some("cli-1"));
            assert_eq!(l.job("now").unwrap().unwrap().status, "running");
            assert!(l.claim("w", 60_000).unwrap().is_none(), "held by its lease");
            assert_eq!(l.renew("now", "cli-1", 60_000).unwrap(), Lease::Held);
            assert!(l.finish_queued("now", "cli-1", "complete", None).unwrap());
            assert_eq!(l.queued_jobs(None, 10).unwrap().len(), 1);
        }
    }

    #[test]
    fn cancel_dequeues_or_flags_the_worker() {
        for l in crate::ledger::tests::engines() {
            l.enqueue(new_job("q")).unwrap();
            l.enqueue(new_job("r")).unwrap();
            l.claim("w", 60_000).unwrap();
            assert_eq!(l.cancel_queued("r").unwrap(), CancelOutcome::Dequeued);
            assert_eq!(l.job("r").unwrap().unwrap().status, "cancelled");
            assert_eq!(l.cancel_queued("q").unwrap(), CancelOutcome::Signalled);
            assert_eq!(l.renew("q", "w", 60_000).unwrap(), Lease::CancelRequested);
            assert_eq!(l.cancel_queued("nope").unwrap(), CancelOutcome::NotFound);
            assert_eq!(l.queued_jobs(Some("cancelled"), 10).unwrap().len(), 1);
        }
    }
}
