//! The ledger's schema and its migrations, one text for both engines.
//!
//! Written in SQLite's words; for PostgreSQL `{id}` becomes an identity key, `INTEGER` `BIGINT`
//! and `REAL` `DOUBLE PRECISION` (SQLite's are 64-bit). `{rowid}` gives PostgreSQL the insertion
//! order column SQLite has built in, under the same name, so ordering queries read alike.
//!
//! Migrations run in order, each once, recorded in `schema_version`; opening a ledger whose
//! schema is behind runs the missing ones (and `maljan db migrate` does it on purpose). The first
//! is all `IF NOT EXISTS`, so a ledger written before migrations existed adopts it as it is.
//! Several processes may start at once: PostgreSQL serialises them on an advisory lock, SQLite on
//! its write lock (`BEGIN IMMEDIATE`).

use super::db::{Conn, DbResult, Engine, vals};

const V1_LEDGER: &str = r#"
CREATE TABLE IF NOT EXISTS jobs(
    job_id TEXT PRIMARY KEY,
    label TEXT NOT NULL DEFAULT '',
    sample_path TEXT,
    sample_sha256 TEXT,
    sample_size INTEGER,
    created_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER,
    status TEXT NOT NULL DEFAULT 'running'{rowid}
);
CREATE TABLE IF NOT EXISTS calls(
    seq {id},
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
-- One index, and a narrow one: every row written pays for each index. Rows of a job come back in
-- seq order, which this index gives (SQLite appends the rowid to index keys).
DROP INDEX IF EXISTS calls_by_job;
-- Left by the per-process journal an earlier version kept beside the database.
DROP TABLE IF EXISTS journal_applied;
CREATE INDEX IF NOT EXISTS calls_job ON calls(job_id);
CREATE TABLE IF NOT EXISTS degradations(
    id {id},
    job_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    UNIQUE(job_id, reason)
);
-- What the agent notes about a call (arguments repaired, a repeat answered from the ledger).
CREATE TABLE IF NOT EXISTS call_notes(
    id {id},
    job_id TEXT NOT NULL,
    ev_id TEXT NOT NULL,
    note TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
-- Each model request of a job: which stage, which model, the tokens it took.
CREATE TABLE IF NOT EXISTS model_usage(
    id {id},
    job_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    duration_ms REAL NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rests(
    id {id},
    server TEXT NOT NULL,
    job_id TEXT,
    failures INTEGER NOT NULL,
    cooldown_s REAL NOT NULL,
    reason TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS job_events(
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY(job_id, seq)
);
CREATE TABLE IF NOT EXISTS job_reports(
    job_id TEXT PRIMARY KEY,
    report TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS children(
    id {id},
    job_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    parent_sha256 TEXT NOT NULL,
    name TEXT NOT NULL,
    depth INTEGER NOT NULL,
    size INTEGER NOT NULL,
    kind TEXT NOT NULL,
    extracted_by TEXT NOT NULL,
    evidence TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS children_job ON children(job_id);
"#;

/// The queue: a submitted job waits here until a worker claims it under a lease.
const V2_QUEUE: &str = r#"
CREATE TABLE IF NOT EXISTS queue(
    job_id TEXT PRIMARY KEY,
    sample_sha256 TEXT NOT NULL,
    sample_name TEXT NOT NULL,
    sample_size INTEGER NOT NULL,
    -- Comma-separated server names; empty: every enabled server.
    servers TEXT NOT NULL DEFAULT '',
    agent INTEGER NOT NULL DEFAULT 0,
    -- queued | running | complete | failed | cancelled
    state TEXT NOT NULL DEFAULT 'queued',
    attempts INTEGER NOT NULL DEFAULT 0,
    worker TEXT,
    lease_until_ms INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    enqueued_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER
);
CREATE INDEX IF NOT EXISTS queue_ready ON queue(state, enqueued_at_ms);
"#;

/// The jobs list pages newest first, of all jobs or of one status: without these indexes every
/// page sorted all jobs (about 28 ms a page over 10,000 jobs, bench/console.md).
const V3_JOBS_BY_TIME: &str = r#"
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at_ms);
CREATE INDEX IF NOT EXISTS jobs_status_created ON jobs(status, created_at_ms);
"#;

/// A shared remote server that one worker found silent: every worker sharing the database rests
/// it until `until_ms`, and then one worker (`trial_by`, until `trial_until_ms`) tries it again.
/// The row is gone once the trial is answered. See `crate::shared_limits`.
const V4_SERVER_RESTS: &str = r#"
CREATE TABLE IF NOT EXISTS server_rests(
    server TEXT PRIMARY KEY,
    until_ms INTEGER NOT NULL,
    failures INTEGER NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    trial_by TEXT,
    trial_until_ms INTEGER
);
"#;

/// A job put back in the queue to be tried again (its sample could not be fetched) waits until
/// `not_before_ms`.
const V5_QUEUE_RETRY: &str = r#"
ALTER TABLE queue ADD COLUMN not_before_ms INTEGER;
"#;

/// Every migration, in order; a ledger at version N has run the first N.
pub(super) const MIGRATIONS: &[&str] = &[
    V1_LEDGER,
    V2_QUEUE,
    V3_JOBS_BY_TIME,
    V4_SERVER_RESTS,
    V5_QUEUE_RETRY,
];

/// The version a fully migrated ledger is at.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// An arbitrary constant naming the migration lock among a database's advisory locks.
const MIGRATION_LOCK: i64 = 0x6d61_6c6a_616e;

/// The statements of a migration in `engine`'s words.
pub(super) fn dialect(sql: &str, engine: Engine) -> String {
    match engine {
        Engine::Sqlite => sql
            .replace("{id}", "INTEGER PRIMARY KEY")
            .replace("{rowid}", ""),
        Engine::Postgres => sql
            .replace(
                "{id}",
                "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
            )
            .replace(
                "{rowid}",
                ",\n    rowid BIGINT GENERATED BY DEFAULT AS IDENTITY",
            )
            .replace(" INTEGER", " BIGINT")
            .replace(" REAL", " DOUBLE PRECISION"),
    }
}

/// Brings the schema up to [`SCHEMA_VERSION`]; returns (version before, version now).
pub(super) fn migrate(conn: &mut Conn) -> DbResult<(i64, i64)> {
    let begin = match conn.engine() {
        Engine::Sqlite => "BEGIN IMMEDIATE",
        Engine::Postgres => "BEGIN",
    };
    conn.batch(begin)?;
    let run = |conn: &mut Conn| -> DbResult<(i64, i64)> {
        if conn.engine() == Engine::Postgres {
            conn.query("SELECT pg_advisory_xact_lock(?1)", vals![MIGRATION_LOCK])?;
        }
        conn.batch("CREATE TABLE IF NOT EXISTS schema_version(version BIGINT NOT NULL)")?;
        let before = conn
            .query_one(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version",
                vals![],
            )?
            .i64(0)?;
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            let version = i as i64 + 1;
            if version > before {
                conn.batch(&dialect(sql, conn.engine()))?;
                conn.execute(
                    "INSERT INTO schema_version(version) VALUES (?1)",
                    vals![version],
                )?;
            }
        }
        Ok((before, before.max(SCHEMA_VERSION)))
    };
    match run(conn) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_words_widen_types_and_add_identity_keys() {
        let pg = dialect(V1_LEDGER, Engine::Postgres);
        assert!(pg.contains("seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"));
        assert!(pg.contains("wait_ms DOUBLE PRECISION NOT NULL"));
        assert!(pg.contains("rowid BIGINT GENERATED"));
        assert!(!pg.contains(" INTEGER"));
        let lite = dialect(V1_LEDGER, Engine::Sqlite);
        assert!(lite.contains("seq INTEGER PRIMARY KEY") && !lite.contains('{'));
    }

    #[test]
    fn migrating_twice_runs_each_migration_once() {
        let mut c = Conn::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        assert_eq!(migrate(&mut c).unwrap(), (0, SCHEMA_VERSION));
        assert_eq!(migrate(&mut c).unwrap(), (SCHEMA_VERSION, SCHEMA_VERSION));
        let n = c
            .query_one("SELECT COUNT(*) FROM schema_version", vals![])
            .unwrap();
        assert_eq!(n.i64(0).unwrap(), SCHEMA_VERSION);
    }
}
