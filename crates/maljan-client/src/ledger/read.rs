//! The ledger's queries. They run on the writer thread (see `writer`), after every write queued
//! before them, so a caller reads what it has recorded.

use rusqlite::{Connection, params};

use super::{JobRow, LedgerEntry};

pub(super) fn read_calls(
    conn: &Connection,
    job_id: Option<&str>,
    limit: usize,
) -> rusqlite::Result<Vec<LedgerEntry>> {
    let cols = "job_id, ev_id, server, tool, args, result, result_truncated, ok, error_code, message, remediation, started_at_ms, wait_ms, duration_ms, trial";
    let sql = match job_id {
        Some(_) => format!("SELECT {cols} FROM calls WHERE job_id = ?1 ORDER BY seq LIMIT ?2"),
        None => format!(
            "SELECT * FROM (SELECT seq, {cols} FROM calls ORDER BY seq DESC LIMIT ?2) ORDER BY seq"
        ),
    };
    let mut stmt = conn.prepare(&sql)?;
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
    let rows = stmt.query_map(params![job_id.unwrap_or(""), limit], map)?;
    rows.collect()
}

pub(super) fn read_degradations(conn: &Connection, job_id: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare_cached("SELECT reason FROM degradations WHERE job_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([job_id], |r| r.get(0))?;
    rows.collect()
}

pub(super) fn read_jobs(
    conn: &Connection,
    job_id: Option<&str>,
    limit: usize,
) -> rusqlite::Result<Vec<JobRow>> {
    let sql = "SELECT j.job_id, j.label, j.sample_path, j.sample_sha256, j.sample_size, j.created_at_ms, j.finished_at_ms, j.status,
           (SELECT COUNT(*) FROM calls c WHERE c.job_id = j.job_id),
           (SELECT COUNT(*) FROM calls c WHERE c.job_id = j.job_id AND c.ok = 0)
           FROM jobs j WHERE (?1 IS NULL OR j.job_id = ?1) ORDER BY j.created_at_ms DESC, j.rowid DESC LIMIT ?2";
    let mut stmt = conn.prepare_cached(sql)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows = stmt
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
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for row in &mut rows {
        row.degradations = read_degradations(conn, &row.job_id)?;
    }
    Ok(rows)
}
