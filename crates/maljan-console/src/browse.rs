//! The console's own reads of the ledger's tables, where the ledger's browse API has no query
//! for what a page asks: jobs searched by the sample's name or SHA-256 prefix and filtered by
//! verdict (the verdict read from the report each job kept), and every call of every job, newest
//! first. Both are filtered and paged in SQL, on SQLite and PostgreSQL alike, through
//! maljan-client's one connection type (`?N` placeholders, values of its four kinds), on a read
//! connection of the console's own: SQLite's WAL lets it read beside the ledger's writer thread.
//!
//! The statements name the ledger's tables (`jobs`, `queue`, `job_reports`, `calls`) and two
//! engine-specific JSON reads of a report's verdict; these belong in `maljan_client::ledger`'s
//! browse module once it offers them, and this module then shrinks to the request parsing.

use std::{collections::HashMap, sync::Mutex};

use maljan_client::ledger::{
    DatabaseUrl, Engine, Page,
    db::{Conn, DbError, DbResult, Row, Value},
};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

use crate::state::Problem;

/// The verdicts a job can be filtered by (a report's verdict word), and `none` for jobs without
/// one (queued, running, failed before a verdict).
pub const VERDICTS: [&str; 5] = ["malicious", "suspicious", "benign", "unknown", "none"];

/// What the jobs list may be narrowed to (query parameters of `/jobs` and `/api/v1/jobs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobQuery {
    /// A job status: queued, running, complete, degraded, failed or cancelled.
    pub status: Option<String>,
    /// The verdict of the job's report: malicious, suspicious, benign, unknown, or `none` for a
    /// job with no verdict (yet).
    pub verdict: Option<String>,
    /// Part of the sample's name, any case.
    pub name: Option<String>,
    /// The start of the sample's SHA-256 (hex, any case).
    pub sha256: Option<String>,
    /// Either: part of the name, or (when it is hex) the start of the SHA-256.
    pub q: Option<String>,
}

impl JobQuery {
    /// Reads and checks the parameters; an empty value is no filter.
    pub fn parse(q: &HashMap<String, String>) -> Result<Self, Problem> {
        let get = |k: &str| {
            q.get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty() && v != "all")
        };
        let status = get("status");
        if let Some(s) = &status
            && !crate::api::STATUSES.contains(&s.as_str())
        {
            return Err(Problem::new(
                400,
                format!(
                    "status={s}: expected one of {}",
                    crate::api::STATUSES.join(", ")
                ),
            ));
        }
        let verdict = get("verdict");
        if let Some(v) = &verdict
            && !VERDICTS.contains(&v.as_str())
        {
            return Err(Problem::new(
                400,
                format!("verdict={v}: expected one of {}", VERDICTS.join(", ")),
            ));
        }
        let sha256 = get("sha256").map(|s| s.to_ascii_lowercase());
        if let Some(s) = &sha256
            && !is_hex_prefix(s)
        {
            return Err(Problem::new(
                400,
                format!("sha256={s}: expected the start of a SHA-256, 1 to 64 hex digits"),
            ));
        }
        Ok(Self {
            status,
            verdict,
            name: get("name"),
            sha256,
            q: get("q"),
        })
    }

    /// Whether anything narrows the list.
    pub fn is_filtered(&self) -> bool {
        self != &Self::default()
    }

    /// The query string that keeps these filters (for a pager's links), ending in `&` when
    /// there is one.
    pub fn keep(&self) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("status", &self.status),
            ("verdict", &self.verdict),
            ("name", &self.name),
            ("sha256", &self.sha256),
            ("q", &self.q),
        ] {
            if let Some(v) = v {
                out.append_pair(k, v);
            }
        }
        let s = out.finish();
        if s.is_empty() { s } else { s + "&" }
    }
}

fn is_hex_prefix(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `text` as a LIKE pattern matching it anywhere, its own `%`, `_` and `\` taken literally.
fn contains_pattern(text: &str) -> String {
    let mut p = String::from("%");
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// One job of the list: its id, the sample's name and the verdict its report gives.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct JobHit {
    pub job_id: String,
    /// The sample's name as it was submitted (or the job's label when it had no sample).
    pub sample_name: String,
    /// The report's verdict word; null while the job has none.
    pub verdict: Option<String>,
}

/// One call of any job, as the global ledger lists it (no arguments, no output: those are on
/// the job's own ledger page).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CallRow {
    pub seq: i64,
    pub job_id: String,
    pub ev_id: String,
    pub server: String,
    pub tool: String,
    pub ok: bool,
    /// The error code of a failed call.
    pub code: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub wait_ms: f64,
    pub duration_ms: f64,
}

/// What the global ledger may be narrowed to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallQuery {
    /// Only this server's calls.
    pub server: Option<String>,
    /// Only this tool's calls.
    pub tool: Option<String>,
    /// true: the calls that succeeded; false: the failed ones.
    pub ok: Option<bool>,
}

impl CallQuery {
    pub fn parse(q: &HashMap<String, String>) -> Result<Self, Problem> {
        let filter = crate::api::call_filter(q)?;
        Ok(Self {
            server: q.get("server").filter(|s| !s.is_empty()).cloned(),
            tool: filter.tool,
            ok: filter.ok,
        })
    }
}

/// The console's read connection to the ledger's database, opened on first use.
pub struct Browser {
    url: DatabaseUrl,
    conn: Mutex<Option<Conn>>,
}

impl Browser {
    pub fn new(url: DatabaseUrl) -> Self {
        Self {
            url,
            conn: Mutex::new(None),
        }
    }

    /// Runs `f` on the read connection, off the async runtime (PostgreSQL's client blocks).
    async fn read<T: Send + 'static>(
        self: &std::sync::Arc<Self>,
        f: impl FnOnce(&mut Conn) -> DbResult<T> + Send + 'static,
    ) -> Result<T, Problem> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut slot = this.conn.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(open(&this.url)?);
            }
            let conn = slot.as_mut().expect("opened above");
            let out = f(conn);
            if out.is_err() {
                // A connection that failed a statement is not trusted with the next one.
                *slot = None;
            }
            out
        })
        .await
        .map_err(|e| Problem::new(500, e.to_string()))?
        .map_err(|e| Problem::new(500, format!("ledger read failed: {e}")))
    }

    /// One page (1-based) of jobs matching `query`, newest first.
    pub async fn jobs(
        self: &std::sync::Arc<Self>,
        query: JobQuery,
        page: usize,
        per_page: usize,
    ) -> Result<Page<JobHit>, Problem> {
        let (page, per_page) = (page.max(1), per_page.clamp(1, 500));
        self.read(move |c| jobs_page(c, &query, page, per_page))
            .await
    }

    /// One page (1-based) of every job's calls, newest first.
    pub async fn calls(
        self: &std::sync::Arc<Self>,
        query: CallQuery,
        page: usize,
        per_page: usize,
    ) -> Result<Page<CallRow>, Problem> {
        let (page, per_page) = (page.max(1), per_page.clamp(1, 500));
        self.read(move |c| calls_page(c, &query, page, per_page))
            .await
    }

    /// The servers and tools that have calls (a filter's choices).
    pub async fn call_names(
        self: &std::sync::Arc<Self>,
    ) -> Result<(Vec<String>, Vec<String>), Problem> {
        self.read(|c| {
            let names = |c: &mut Conn, col: &str| -> DbResult<Vec<String>> {
                c.query(
                    &format!("SELECT DISTINCT {col} FROM calls ORDER BY {col}"),
                    &[],
                )?
                .iter()
                .map(|r| r.text(0))
                .collect()
            };
            Ok((names(c, "server")?, names(c, "tool")?))
        })
        .await
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // PostgreSQL's blocking client blocks as it closes, which panics on an async runtime's
        // thread (where the console's state is usually dropped): close it on a thread of its own.
        if let Some(conn) = self
            .conn
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            std::thread::spawn(move || drop(conn));
        }
    }
}

fn open(url: &DatabaseUrl) -> DbResult<Conn> {
    match url {
        DatabaseUrl::Postgres(u) => Conn::postgres(u),
        DatabaseUrl::Sqlite(path) if path.as_os_str() == ":memory:" => Err(DbError::new(
            "an in-memory ledger has no second connection to browse it with",
        )),
        DatabaseUrl::Sqlite(path) => {
            let c = rusqlite::Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| DbError::new(format!("{}: {e}", url.redacted())))?;
            c.busy_timeout(std::time::Duration::from_secs(10))
                .map_err(|e| DbError::new(e.to_string()))?;
            Ok(Conn::Sqlite(c))
        }
    }
}

/// The verdict word of a kept report, in each engine's JSON reading.
fn verdict_expr(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "json_extract(r.report, '$.verdict.verdict')",
        Engine::Postgres => "(r.report::json #>> '{verdict,verdict}')",
    }
}

const NAME_EXPR: &str = "COALESCE(q.sample_name, j.sample_path, j.label)";

fn offset(page: usize, per_page: usize) -> i64 {
    i64::try_from(page.saturating_sub(1).saturating_mul(per_page)).unwrap_or(i64::MAX)
}

fn jobs_page(
    conn: &mut Conn,
    f: &JobQuery,
    page: usize,
    per_page: usize,
) -> DbResult<Page<JobHit>> {
    let verdict = verdict_expr(conn.engine());
    // `q` is a name or, when it reads as hex, a SHA-256 prefix too.
    let q_sha =
        f.q.as_deref()
            .map(str::to_ascii_lowercase)
            .filter(|s| is_hex_prefix(s));
    let filter = format!(
        "(CAST(?1 AS TEXT) IS NULL OR j.status = ?1)
         AND (CAST(?2 AS TEXT) IS NULL OR (?2 = 'none' AND {verdict} IS NULL) OR {verdict} = ?2)
         AND (CAST(?3 AS TEXT) IS NULL OR LOWER({NAME_EXPR}) LIKE ?3 ESCAPE '\\')
         AND (CAST(?4 AS TEXT) IS NULL OR LOWER(COALESCE(j.sample_sha256, q.sample_sha256, '')) LIKE ?4)
         AND (CAST(?5 AS TEXT) IS NULL OR LOWER({NAME_EXPR}) LIKE ?5 ESCAPE '\\'
              OR LOWER(COALESCE(j.sample_sha256, q.sample_sha256, '')) LIKE CAST(?6 AS TEXT))"
    );
    let from = "FROM jobs j LEFT JOIN queue q ON q.job_id = j.job_id LEFT JOIN job_reports r ON r.job_id = j.job_id";
    let params = [
        Value::from(f.status.as_deref()),
        Value::from(f.verdict.as_deref()),
        Value::from(f.name.as_deref().map(contains_pattern)),
        Value::from(f.sha256.as_ref().map(|s| format!("{s}%"))),
        Value::from(f.q.as_deref().map(contains_pattern)),
        // A prefix no SHA-256 has when `q` is not hex.
        Value::from(q_sha.map(|s| format!("{s}%")).unwrap_or_else(|| "-".into())),
    ];
    let total = conn
        .query_one(&format!("SELECT COUNT(*) {from} WHERE {filter}"), &params)?
        .i64(0)?;
    let mut paged = params.to_vec();
    paged.push(Value::from(per_page));
    paged.push(Value::from(offset(page, per_page)));
    let items = conn
        .query(
            &format!(
                // The page's ids first, then their names and verdicts: a kept report is read
                // for the rows shown, not for every job the sort walks past.
                "SELECT p.job_id, {NAME_EXPR}, {verdict} FROM (
                    SELECT j.job_id AS job_id, j.created_at_ms AS at, j.rowid AS rid {from}
                    WHERE {filter} ORDER BY j.created_at_ms DESC, j.rowid DESC LIMIT ?7 OFFSET ?8
                 ) p JOIN jobs j ON j.job_id = p.job_id
                 LEFT JOIN queue q ON q.job_id = j.job_id LEFT JOIN job_reports r ON r.job_id = j.job_id
                 ORDER BY p.at DESC, p.rid DESC"
            ),
            &paged,
        )?
        .iter()
        .map(|r: &Row| {
            Ok(JobHit {
                job_id: r.text(0)?,
                sample_name: r.text(1)?,
                verdict: r.opt_text(2)?,
            })
        })
        .collect::<DbResult<_>>()?;
    Ok(Page {
        items,
        total,
        page,
        per_page,
    })
}

fn calls_page(
    conn: &mut Conn,
    f: &CallQuery,
    page: usize,
    per_page: usize,
) -> DbResult<Page<CallRow>> {
    let filter = "(CAST(?1 AS TEXT) IS NULL OR server = ?1) AND (CAST(?2 AS TEXT) IS NULL OR tool = ?2) AND (CAST(?3 AS INTEGER) IS NULL OR ok = ?3)";
    let params = [
        Value::from(f.server.as_deref()),
        Value::from(f.tool.as_deref()),
        Value::from(f.ok),
    ];
    let total = conn
        .query_one(
            &format!("SELECT COUNT(*) FROM calls WHERE {filter}"),
            &params,
        )?
        .i64(0)?;
    let mut paged = params.to_vec();
    paged.push(Value::from(per_page));
    paged.push(Value::from(offset(page, per_page)));
    let items = conn
        .query(
            &format!(
                "SELECT seq, job_id, ev_id, server, tool, ok, error_code, started_at_ms, wait_ms, duration_ms
                 FROM calls WHERE {filter} ORDER BY seq DESC LIMIT ?4 OFFSET ?5"
            ),
            &paged,
        )?
        .iter()
        .map(|r| {
            Ok(CallRow {
                seq: r.i64(0)?,
                job_id: r.text(1)?,
                ev_id: r.text(2)?,
                server: r.text(3)?,
                tool: r.text(4)?,
                ok: r.bool(5)?,
                code: r.opt_text(6)?,
                started_at: maljan_client::time::rfc3339_ms(r.i64(7)?),
                wait_ms: r.f64(8)?,
                duration_ms: r.f64(9)?,
            })
        })
        .collect::<DbResult<_>>()?;
    Ok(Page {
        items,
        total,
        page,
        per_page,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Result<JobQuery, Problem> {
        JobQuery::parse(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_like_pattern_takes_wildcards_literally() {
        assert_eq!(contains_pattern("A_b%c\\"), "%a\\_b\\%c\\\\%");
    }

    #[test]
    fn parameters_are_checked_and_kept_for_the_pager() {
        assert!(
            query(&[("verdict", "evil")])
                .unwrap_err()
                .error
                .contains("verdict=evil")
        );
        assert!(
            query(&[("sha256", "xyz")])
                .unwrap_err()
                .error
                .contains("hex")
        );
        assert!(query(&[("status", "done")]).is_err());
        let q = query(&[
            ("verdict", "benign"),
            ("sha256", "AB12"),
            ("q", "a b&c"),
            ("status", ""),
        ])
        .unwrap();
        assert_eq!(q.sha256.as_deref(), Some("ab12"));
        assert_eq!(q.keep(), "verdict=benign&sha256=ab12&q=a+b%26c&");
        assert!(!query(&[("status", "all")]).unwrap().is_filtered());
    }
}
