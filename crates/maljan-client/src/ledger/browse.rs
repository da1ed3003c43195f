//! Reading the ledger page by page, as a console or a script browses it: jobs filtered by status
//! with the count of each status, one job's calls filtered by tool and outcome, and where one
//! evidence id falls. Also the two things a long-running front end keeps per job beside the
//! calls: the job's progress events (so a watcher can resume from the last one it saw) and its
//! finished report (the JSON the triage renderers read).

use serde::{Deserialize, Serialize};

use super::{
    Engine, JobRow, Ledger, LedgerEntry, LedgerError,
    db::{Conn, DbError, DbResult, vals},
    read::{CALL_COLS, call_row, read_jobs},
};

/// The channel each new job event is announced on (PostgreSQL), its payload the job's id.
pub const JOB_EVENTS_CHANNEL: &str = "maljan_job_events";

/// One page of rows and how many match in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
    /// 1-based.
    pub page: usize,
    pub per_page: usize,
}

impl<T> Page<T> {
    pub fn pages(&self) -> usize {
        (self.total.max(0) as usize)
            .div_ceil(self.per_page.max(1))
            .max(1)
    }
}

/// A filter on a job's calls.
#[derive(Debug, Clone, Default)]
pub struct CallFilter {
    pub tool: Option<String>,
    pub ok: Option<bool>,
}

/// One progress event of a job, numbered from 1 within the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    pub seq: i64,
    pub kind: String,
    /// JSON text.
    pub data: String,
}

fn offset(page: usize, per_page: usize) -> i64 {
    i64::try_from(page.saturating_sub(1).saturating_mul(per_page)).unwrap_or(i64::MAX)
}

fn jobs_page(
    conn: &mut Conn,
    status: Option<&str>,
    page: usize,
    per_page: usize,
) -> DbResult<Page<JobRow>> {
    // Two texts rather than `?1 IS NULL OR status = ?1`: the planner can then walk the
    // (status, created_at_ms) index for a status, and the created_at_ms one without.
    let filter = if status.is_some() {
        "status = ?1"
    } else {
        "CAST(?1 AS TEXT) IS NULL"
    };
    let total = conn
        .query_one(
            &format!("SELECT COUNT(*) FROM jobs WHERE {filter}"),
            vals![status],
        )?
        .i64(0)?;
    let ids = conn.query(
        &format!(
            "SELECT job_id FROM jobs WHERE {filter} ORDER BY created_at_ms DESC, rowid DESC LIMIT ?2 OFFSET ?3"
        ),
        vals![status, per_page, offset(page, per_page)],
    )?;
    let mut items = Vec::with_capacity(ids.len());
    for id in ids {
        items.extend(read_jobs(conn, Some(&id.text(0)?), 1)?);
    }
    Ok(Page {
        items,
        total,
        page,
        per_page,
    })
}

fn calls_page(
    conn: &mut Conn,
    job_id: &str,
    f: &CallFilter,
    page: usize,
    per_page: usize,
) -> DbResult<Page<LedgerEntry>> {
    let filter = "job_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR tool = ?2) AND (CAST(?3 AS INTEGER) IS NULL OR ok = ?3)";
    let total = conn
        .query_one(
            &format!("SELECT COUNT(*) FROM calls WHERE {filter}"),
            vals![job_id, f.tool.as_ref(), f.ok],
        )?
        .i64(0)?;
    let items = conn
        .query(
            &format!(
                "SELECT {CALL_COLS} FROM calls WHERE {filter} ORDER BY seq LIMIT ?4 OFFSET ?5"
            ),
            vals![
                job_id,
                f.tool.as_ref(),
                f.ok,
                per_page,
                offset(page, per_page)
            ],
        )?
        .iter()
        .map(|r| call_row(r, 0))
        .collect::<DbResult<_>>()?;
    Ok(Page {
        items,
        total,
        page,
        per_page,
    })
}

impl Ledger {
    /// Jobs, newest first, one page (1-based) of `per_page`, optionally only those of `status`.
    pub fn jobs_page(
        &self,
        status: Option<&str>,
        page: usize,
        per_page: usize,
    ) -> Result<Page<JobRow>, LedgerError> {
        let status = status.map(str::to_string);
        let (page, per_page) = (page.max(1), per_page.clamp(1, 500));
        self.read(move |c| jobs_page(c, status.as_deref(), page, per_page))
    }

    /// How many jobs have each status, by status.
    pub fn job_status_counts(&self) -> Result<Vec<(String, i64)>, LedgerError> {
        self.read(|c| {
            c.query(
                "SELECT status, COUNT(*) FROM jobs GROUP BY status ORDER BY status",
                vals![],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.i64(1)?)))
            .collect()
        })
    }

    /// One job's calls in order, one page (1-based), filtered.
    pub fn calls_page(
        &self,
        job_id: &str,
        filter: CallFilter,
        page: usize,
        per_page: usize,
    ) -> Result<Page<LedgerEntry>, LedgerError> {
        let job_id = job_id.to_string();
        let (page, per_page) = (page.max(1), per_page.clamp(1, 500));
        self.read(move |c| calls_page(c, &job_id, &filter, page, per_page))
    }

    /// The 0-based position of evidence `ev_id` among its job's calls (None: no such call).
    pub fn call_position(&self, job_id: &str, ev_id: &str) -> Result<Option<i64>, LedgerError> {
        let (job_id, ev_id) = (job_id.to_string(), ev_id.to_string());
        self.read(move |c| {
            let seq = c.query_opt(
                "SELECT seq FROM calls WHERE job_id = ?1 AND ev_id = ?2",
                vals![&job_id, ev_id],
            )?;
            match seq {
                None => Ok(None),
                Some(seq) => c
                    .query_one(
                        "SELECT COUNT(*) FROM calls WHERE job_id = ?1 AND seq < ?2",
                        vals![job_id, seq.i64(0)?],
                    )?
                    .i64(0)
                    .map(Some),
            }
        })
    }

    /// The distinct tools a job called (for a filter's choices).
    pub fn job_tools(&self, job_id: &str) -> Result<Vec<String>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            c.query(
                "SELECT DISTINCT tool FROM calls WHERE job_id = ?1 ORDER BY tool",
                vals![job_id],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect()
        })
    }

    /// Appends a progress event to a job; returns its number (1, 2, …).
    pub fn append_job_event(
        &self,
        job_id: &str,
        kind: &str,
        data: &str,
    ) -> Result<i64, LedgerError> {
        let (job_id, kind, data) = (job_id.to_string(), kind.to_string(), data.to_string());
        self.with_conn(move |c| {
            // One statement: two writers of the same job (two workers, after a reclaim) cannot
            // both take the same number; the primary key refuses the second.
            const INSERT: &str = "INSERT INTO job_events(job_id, seq, kind, data, at_ms) SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4 FROM job_events WHERE job_id = ?1 RETURNING seq";
            let sql = match c.engine() {
                Engine::Sqlite => INSERT.to_string(),
                // Every console listening hears of it at commit, whichever node wrote it.
                Engine::Postgres => format!(
                    "WITH e AS ({INSERT}) SELECT seq, pg_notify('{JOB_EVENTS_CHANNEL}', ?1) FROM e"
                ),
            };
            c.query_one(&sql, vals![job_id, kind, data, crate::time::now_ms()])?
                .i64(0)
        })?
        .map_err(|e: DbError| LedgerError::Write(e.message))
    }

    /// A job's progress events after number `after` (0: all), in order.
    pub fn job_events(&self, job_id: &str, after: i64) -> Result<Vec<JobEvent>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            c.query(
                "SELECT seq, kind, data FROM job_events WHERE job_id = ?1 AND seq > ?2 ORDER BY seq",
                vals![job_id, after],
            )?
            .iter()
            .map(|r| {
                Ok(JobEvent {
                    seq: r.i64(0)?,
                    kind: r.text(1)?,
                    data: r.text(2)?,
                })
            })
            .collect()
        })
    }

    /// Keeps a job's finished report (JSON text), replacing an earlier one.
    pub fn save_report(&self, job_id: &str, report_json: &str) -> Result<(), LedgerError> {
        let (job_id, report) = (job_id.to_string(), report_json.to_string());
        self.write(move |c| {
            c.execute(
                "INSERT INTO job_reports(job_id, report, at_ms) VALUES (?1, ?2, ?3) ON CONFLICT(job_id) DO UPDATE SET report = excluded.report, at_ms = excluded.at_ms",
                vals![job_id, report, crate::time::now_ms()],
            )
        })
    }

    /// A job's kept report (JSON text), if one was saved.
    pub fn report(&self, job_id: &str) -> Result<Option<String>, LedgerError> {
        let job_id = job_id.to_string();
        self.read(move |c| {
            c.query_opt(
                "SELECT report FROM job_reports WHERE job_id = ?1",
                vals![job_id],
            )?
            .map(|r| r.text(0))
            .transpose()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::entry;
    use super::*;

    #[test]
    fn pages_filters_positions_events_and_reports() {
        for l in super::super::tests::engines() {
            for j in 0..5 {
                l.create_job(&format!("j{j}"), "t", None).unwrap();
            }
            l.finish_job("j1", "complete").unwrap();
            let p = l.jobs_page(None, 1, 2).unwrap();
            assert_eq!((p.items.len(), p.total, p.pages()), (2, 5, 3));
            let done = l.jobs_page(Some("complete"), 1, 10).unwrap();
            assert_eq!(done.items[0].job_id, "j1");
            let counts = l.job_status_counts().unwrap();
            assert_eq!(counts, [("complete".into(), 1), ("running".into(), 4)]);
            for i in 1..=7 {
                let mut e = entry("j0", &format!("ev_{i:04}"));
                e.ok = i % 2 == 0;
                e.tool = if i <= 3 { "a".into() } else { "b".into() };
                l.record(e).unwrap();
            }
            let bad = CallFilter {
                tool: Some("b".into()),
                ok: Some(false),
            };
            let p = l.calls_page("j0", bad, 1, 10).unwrap();
            assert_eq!(
                p.items.iter().map(|c| c.ev_id.as_str()).collect::<Vec<_>>(),
                ["ev_0005", "ev_0007"]
            );
            assert_eq!(
                l.calls_page("j0", CallFilter::default(), 2, 3)
                    .unwrap()
                    .items[0]
                    .ev_id,
                "ev_0004"
            );
            assert_eq!(l.call_position("j0", "ev_0006").unwrap(), Some(5));
            assert_eq!(l.call_position("j0", "ev_9999").unwrap(), None);
            assert_eq!(l.job_tools("j0").unwrap(), ["a", "b"]);
            assert_eq!(l.append_job_event("j0", "stage", "{}").unwrap(), 1);
            assert_eq!(l.append_job_event("j0", "done", "{}").unwrap(), 2);
            let after = l.job_events("j0", 1).unwrap();
            assert_eq!((after.len(), after[0].kind.as_str()), (1, "done"));
            assert_eq!(l.report("j0").unwrap(), None);
            l.save_report("j0", "{\"a\":1}").unwrap();
            assert_eq!(l.report("j0").unwrap().as_deref(), Some("{\"a\":1}"));
            l.save_report("j0", "{}").unwrap();
            assert_eq!(l.report("j0").unwrap().as_deref(), Some("{}"));
        }
    }
}
