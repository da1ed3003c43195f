//! The files server's durable state: one SQLite database, `files.sqlite3`, in the server's state
//! directory (`maljan serve files --state-dir`), holding what must outlive the process.
//!
//! Every module that keeps state adds its tables as a migration to [`MIGRATIONS`], so the
//! database has one version (`PRAGMA user_version`) and one upgrade path. Without a state
//! directory (a library user, `maljan tools files`) the database lives in memory and dies with
//! the process. It opens on first use: a server whose state directory cannot be opened still
//! serves every stateless action, and the stateful ones fail with the reason.

use std::{
    path::{Path, PathBuf},
    sync::Mutex,
};

use maljan_server::ToolError;
use rusqlite::Connection;

/// The schema, in order: entry `i` brings `user_version` from `i` to `i + 1`. Append only.
const MIGRATIONS: &[&str] = &[
    // 1: nothing but the version itself, so an empty database is told from a new one.
    "CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    // 2: schedules and their runs, watches, pipeline runs and their tasks.
    crate::automation::SCHEMA,
    // 3: notification routes (FA_notify_route_*), each as its JSON.
    "CREATE TABLE notify_routes (name TEXT PRIMARY KEY, route TEXT NOT NULL, added_at TEXT NOT NULL)",
    // 4: the audit trail (FA_audit_*).
    crate::audit::SCHEMA,
];

/// The database's file name inside the state directory.
pub(crate) const FILE_NAME: &str = "files.sqlite3";

pub(crate) struct StateDb {
    dir: Option<PathBuf>,
    /// Opened on first use; a failed open is tried again on the next use (another server
    /// migrating the same file, a directory fixed meanwhile), never remembered.
    conn: Mutex<Option<Connection>>,
}

impl StateDb {
    /// `dir` None keeps the state in memory.
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            conn: Mutex::new(None),
        }
    }

    /// Whether the state outlives the process.
    #[allow(dead_code)] // for the stateful actions that must say so
    pub(crate) fn is_durable(&self) -> bool {
        self.dir.is_some()
    }

    /// Runs `f` on the connection (blocking: call it from `maljan_server::blocking`).
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, ToolError> {
        // A panic while holding the lock leaves SQLite consistent (each statement is atomic).
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let conn = match &mut *slot {
            Some(conn) => conn,
            empty => empty.insert(open(self.dir.as_deref()).map_err(ToolError::not_configured)?),
        };
        f(conn).map_err(|e| ToolError::tool_failed(format!("state database: {e}")))
    }
}

fn open(dir: Option<&Path>) -> Result<Connection, String> {
    let mut conn = match dir {
        None => Connection::open_in_memory().map_err(|e| e.to_string())?,
        Some(dir) => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create the state directory {}: {e}", dir.display()))?;
            let path = dir.join(FILE_NAME);
            private_files(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            let conn = Connection::open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            // Before the first statement: servers sharing a state directory wait for each
            // other's locks instead of failing at once.
            conn.busy_timeout(BUSY_WAIT).map_err(|e| e.to_string())?;
            use_wal(&conn).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            private_files(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            conn
        }
    };
    migrate(&mut conn).map_err(|e| format!("state database migration: {e}"))?;
    Ok(conn)
}

/// Makes the database at `path` (created empty if missing) and its `-wal` and `-shm` files
/// readable by the owner only (0600): they hold the audit trail and the automation's actions.
/// SQLite gives the `-wal` and `-shm` files it creates the database's own mode, so creating the
/// database 0600 keeps them private too; files an older version left 0644 are narrowed here.
pub(crate) fn private_files(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        match std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            done => done?,
        }
    }
    Ok(())
}

/// How long a statement waits for another connection's lock before it fails.
pub(crate) const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Switches the file to WAL. SQLite answers "busy" to the switch without calling the busy
/// handler while another connection is making the same switch, so it is tried again here until
/// the busy wait is used up.
pub(crate) fn use_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_WAIT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            // In WAL mode NORMAL loses no committed transaction when the process dies, only
            // (at worst) the last ones on a power loss, and spares a sync per commit.
            done => {
                done?;
                return conn.pragma_update(None, "synchronous", "NORMAL");
            }
        }
    }
}

fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    // IMMEDIATE: the write lock is taken (waiting on the busy timeout) before the version is
    // read. A deferred transaction that read first could not upgrade its read to a write once
    // another server had migrated meanwhile, and SQLite fails that at once, without waiting.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if current > MIGRATIONS.len() {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "the state database is at version {current}, newer than this maljan ({}); \
             use a newer maljan or another --state-dir",
            MIGRATIONS.len()
        )));
    }
    for sql in &MIGRATIONS[current..] {
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len())?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_directory_is_private_and_its_schema_current() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let db = StateDb::new(Some(dir.clone()));
        let version: usize = db
            .with(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(dir.join(FILE_NAME).exists());
        // Opening again is idempotent.
        drop(db);
        let again = StateDb::new(Some(dir));
        again.with(|c| c.execute_batch("SELECT 1")).unwrap();
    }

    #[test]
    fn an_unopenable_state_directory_fails_each_use_with_its_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let db = StateDb::new(Some(file.join("state")));
        let err = db.with(|c| c.execute_batch("SELECT 1")).unwrap_err();
        assert!(err.to_string().contains("state directory"), "{err}");
    }

    #[test]
    fn servers_opening_one_state_directory_at_once_all_migrate_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let opened: Vec<_> = (0..8)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    StateDb::new(Some(dir))
                        .with(|c| c.query_row("PRAGMA user_version", [], |r| r.get::<_, usize>(0)))
                })
            })
            .collect();
        for t in opened {
            assert_eq!(t.join().unwrap().unwrap(), MIGRATIONS.len());
        }
    }

    #[test]
    fn a_failed_open_is_tried_again_on_the_next_use() {
        let tmp = tempfile::tempdir().unwrap();
        let blocker = tmp.path().join("state");
        std::fs::write(&blocker, b"x").unwrap();
        let db = StateDb::new(Some(blocker.clone()));
        assert!(db.with(|c| c.execute_batch("SELECT 1")).is_err());
        std::fs::remove_file(&blocker).unwrap();
        db.with(|c| c.execute_batch("SELECT 1")).unwrap();
    }

    #[test]
    fn a_newer_database_is_refused_not_downgraded() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        {
            let c = Connection::open(dir.join(FILE_NAME)).unwrap();
            c.pragma_update(None, "user_version", 999).unwrap();
        }
        let err = StateDb::new(Some(dir))
            .with(|c| c.execute_batch("SELECT 1"))
            .unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
    }
}
