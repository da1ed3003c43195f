//! The ledger's queries. They run on the writer thread (see `writer`), after every write queued
//! before them, so a caller reads what it has recorded.

use super::{
    JobRow, LedgerEntry,
    db::{Conn, DbResult, Row, vals},
};

pub(super) const CALL_COLS: &str = "job_id, ev_id, server, tool, args, result, result_truncated, ok, error_code, message, remediation, started_at_ms, wait_ms, duration_ms, trial";

/// A call row of [`CALL_COLS`], starting at column `off`.
pub(super) fn call_row(r: &Row, off: usize) -> DbResult<LedgerEntry> {
    let started = r.i64(off + 11)?;
    Ok(LedgerEntry {
        job_id: r.text(off)?,
        ev_id: r.text(off + 1)?,
        server: r.text(off + 2)?,
        tool: r.text(off + 3)?,
        args: r.text(off + 4)?,
        result: r.opt_text(off + 5)?,
        result_truncated: r.bool(off + 6)?,
        ok: r.bool(off + 7)?,
        error_code: r.opt_text(off + 8)?,
        message: r.opt_text(off + 9)?,
        remediation: r.opt_text(off + 10)?,
        started_at: crate::time::rfc3339_ms(started),
        started_at_ms: started,
        wait_ms: r.f64(off + 12)?,
        duration_ms: r.f64(off + 13)?,
        trial: r.bool(off + 14)?,
    })
}

pub(super) fn read_calls(
    conn: &mut Conn,
    job_id: Option<&str>,
    limit: usize,
) -> DbResult<Vec<LedgerEntry>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    match job_id {
        Some(j) => conn
            .query(
                &format!("SELECT {CALL_COLS} FROM calls WHERE job_id = ?1 ORDER BY seq LIMIT ?2"),
                vals![j, limit],
            )?
            .iter()
            .map(|r| call_row(r, 0))
            .collect(),
        None => conn
            .query(
                &format!(
                    "SELECT * FROM (SELECT seq, {CALL_COLS} FROM calls ORDER BY seq DESC LIMIT ?1) AS recent ORDER BY seq"
                ),
                vals![limit],
            )?
            .iter()
            .map(|r| call_row(r, 1))
            .collect(),
    }
}

pub(super) fn read_degradations(conn: &mut Conn, job_id: &str) -> DbResult<Vec<String>> {
    conn.query(
        "SELECT reason FROM degradations WHERE job_id = ?1 ORDER BY id",
        vals![job_id],
    )?
    .iter()
    .map(|r| r.text(0))
    .collect()
}

pub(super) fn read_jobs(
    conn: &mut Conn,
    job_id: Option<&str>,
    limit: usize,
) -> DbResult<Vec<JobRow>> {
    // Two texts rather than `?1 IS NULL OR job_id = ?1`: one job is then a primary-key lookup,
    // not a walk of the jobs_created index.
    let filter = if job_id.is_some() {
        "j.job_id = ?1"
    } else {
        "CAST(?1 AS TEXT) IS NULL"
    };
    let sql = format!(
        "SELECT j.job_id, j.label, j.sample_path, j.sample_sha256, j.sample_size, j.created_at_ms, j.finished_at_ms, j.status,
           (SELECT COUNT(*) FROM calls c WHERE c.job_id = j.job_id),
           (SELECT COUNT(*) FROM calls c WHERE c.job_id = j.job_id AND c.ok = 0)
           FROM jobs j WHERE {filter} ORDER BY j.created_at_ms DESC, j.rowid DESC LIMIT ?2"
    );
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows = conn
        .query(&sql, vals![job_id, limit])?
        .iter()
        .map(|r| {
            Ok(JobRow {
                job_id: r.text(0)?,
                label: r.text(1)?,
                sample_path: r.opt_text(2)?,
                sample_sha256: r.opt_text(3)?,
                sample_size: r.opt_i64(4)?,
                created_at: crate::time::rfc3339_ms(r.i64(5)?),
                finished_at: r.opt_i64(6)?.map(crate::time::rfc3339_ms),
                status: r.text(7)?,
                calls: r.i64(8)?,
                failed_calls: r.i64(9)?,
                degradations: Vec::new(),
            })
        })
        .collect::<DbResult<Vec<_>>>()?;
    for row in &mut rows {
        row.degradations = read_degradations(conn, &row.job_id)?;
    }
    Ok(rows)
}
