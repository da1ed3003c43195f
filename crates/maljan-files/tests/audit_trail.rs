//! The files server's audit trail (issue 44, item 5): its database files are the owner's only
//! (0600, with their -wal and -shm, a file an older version left 0644 narrowed, a configured
//! audit file too); a retention keeps at most so many records and none older than so many
//! days; arguments are stored with every secret redacted — by the tool's schema (`writeOnly`)
//! and by name, nested in action lists too; and a call never waits for the disk, while
//! automation-file's semantics (FA_audit_search by correlation id) hold.

#[path = "common/automation.rs"]
mod automation;

use std::{os::unix::fs::PermissionsExt, path::Path, sync::Arc, time::Duration};

use automation::call;
use maljan_files::{AuditRetention, FilesConfig, SystemClock, registry_with_clock};
use maljan_server::{Roots, ToolServer};
use serde_json::{Value, json};

fn serve_with(root: &Path, state: &Path, audit: AuditRetention) -> Arc<ToolServer> {
    let reg = registry_with_clock(
        FilesConfig {
            state_dir: Some(state.to_path_buf()),
            audit,
            ..FilesConfig::rooted(Roots::new([root]).unwrap())
        },
        Arc::new(SystemClock),
    );
    let server = ToolServer::new("files-test", "0", reg);
    server.start();
    server
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn db_files(dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|s| dir.join(format!("{name}{s}")))
        .collect()
}

async fn count(server: &Arc<ToolServer>, filters: Value) -> u64 {
    call(server, "FA_audit_count", filters)
        .await
        .unwrap()
        .as_u64()
        .unwrap()
}

async fn checksum(server: &Arc<ToolServer>, file: &Path) {
    call(
        server,
        "FA_file_checksum",
        json!({"path": file.to_string_lossy()}),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_trail_database_and_its_wal_and_shm_are_the_owners_only() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let file = root.path().join("one.bin");
    std::fs::write(&file, [7u8; 1024]).unwrap();
    let server = serve_with(root.path(), state.path(), AuditRetention::default());
    checksum(&server, &file).await;
    assert!(count(&server, json!({"action": "FA_file_checksum"})).await >= 1);
    for f in db_files(state.path(), "files.sqlite3") {
        assert!(f.exists(), "{} exists while serving", f.display());
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    // A configured audit file (FA_audit_configure) is private too.
    let configured = root.path().join("trail.sqlite3");
    call(
        &server,
        "FA_audit_configure",
        json!({"db_path": configured.to_string_lossy()}),
    )
    .await
    .unwrap();
    checksum(&server, &file).await;
    assert!(count(&server, json!({})).await >= 1);
    for f in db_files(root.path(), "trail.sqlite3") {
        if f.exists() {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
    }
    assert_eq!(mode(&configured), 0o600);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_an_older_version_left_world_readable_is_narrowed() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let db = state.path().join("files.sqlite3");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.execute_batch("CREATE TABLE t (x)").unwrap();
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let server = serve_with(root.path(), state.path(), AuditRetention::default());
    call(&server, "FA_schedule_list", json!({})).await.unwrap();
    assert_eq!(mode(&db), 0o600);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_retention_keeps_at_most_its_rows() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let file = root.path().join("one.bin");
    std::fs::write(&file, [7u8; 1024]).unwrap();
    let server = serve_with(
        root.path(),
        state.path(),
        AuditRetention {
            max_rows: 10,
            ..Default::default()
        },
    );
    for _ in 0..40 {
        checksum(&server, &file).await;
    }
    // The count's own call is recorded after it answers.
    assert_eq!(count(&server, json!({})).await, 10);
    let newest = call(&server, "FA_audit_search", json!({"limit": 100}))
        .await
        .unwrap();
    assert!(newest.as_array().unwrap().len() <= 10, "{newest}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_retention_drops_records_older_than_its_age() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let file = root.path().join("one.bin");
    std::fs::write(&file, [7u8; 1024]).unwrap();
    let server = serve_with(
        root.path(),
        state.path(),
        AuditRetention {
            max_age: Duration::from_secs(24 * 3600),
            ..Default::default()
        },
    );
    checksum(&server, &file).await;
    assert!(count(&server, json!({})).await >= 1);
    // Records of two days ago, as an earlier run of the server would have left them.
    {
        let c = rusqlite::Connection::open(state.path().join("files.sqlite3")).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        let old = chrono::Utc::now().timestamp_micros() - 2 * 24 * 3600 * 1_000_000;
        for i in 0..5 {
            c.execute(
                "INSERT INTO audit_records (id, ts_us, timestamp, actor, source, action, status, metadata, correlation_id)
                 VALUES (?1, ?2, 'then', 'mcp', 'server', 'FA_old', 'ok', '{}', 'c')",
                rusqlite::params![format!("old{i}"), old],
            )
            .unwrap();
        }
    }
    checksum(&server, &file).await;
    assert_eq!(count(&server, json!({"action": "FA_old"})).await, 0);
    assert!(count(&server, json!({"action": "FA_file_checksum"})).await >= 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_redacted_by_schema_and_by_name_at_any_depth() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let server = serve_with(root.path(), state.path(), AuditRetention::default());
    // connection_string is secret only because the tool's schema marks it writeOnly.
    let _ = call(
        &server,
        "FA_azure_blob_later_init",
        json!({"connection_string": "AccountName=a;AccountKey=SCHEMASECRET1", "profile": "p1"}),
    )
    .await;
    let _ = call(
        &server,
        "FA_sftp_later_init",
        json!({"host": "sftp.example", "username": "u", "password": "NAMESECRET2", "profile": "p2"}),
    )
    .await;
    // Nested in an action list, a schema-marked field and name-shaped ones deeper still.
    let _ = call(
        &server,
        "FA_execute_action",
        json!({"action_list": [
            ["FA_azure_blob_later_init", {"connection_string": "NESTEDSECRET3", "profile": "p3"}],
            ["FA_list_dir", {"dir_path": root.path().to_string_lossy(), "extra": {"api_token": "DEEPSECRET4", "auth": {"x": "DEEPSECRET5"}}}],
        ]}),
    )
    .await;
    let records = call(&server, "FA_audit_search", json!({"limit": 1000}))
        .await
        .unwrap()
        .to_string();
    assert!(records.contains("FA_azure_blob_later_init"), "{records}");
    let mut stored = Vec::new();
    for f in db_files(state.path(), "files.sqlite3") {
        if f.exists() {
            stored.extend(std::fs::read(&f).unwrap());
        }
    }
    let stored = String::from_utf8_lossy(&stored);
    for secret in [
        "SCHEMASECRET1",
        "NAMESECRET2",
        "NESTEDSECRET3",
        "DEEPSECRET4",
        "DEEPSECRET5",
    ] {
        assert!(!records.contains(secret), "{secret} in {records}");
        assert!(!stored.contains(secret), "{secret} in the database file");
    }
    assert!(records.contains("sftp.example"), "{records}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_does_not_wait_for_the_disk_and_correlation_ids_still_join_a_run() {
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let file = root.path().join("one.bin");
    std::fs::write(&file, [7u8; 1024]).unwrap();
    let server = serve_with(root.path(), state.path(), AuditRetention::default());
    checksum(&server, &file).await;
    assert!(count(&server, json!({})).await >= 1);
    // Another process holds the database's write lock: the trail cannot be written, and every
    // call still answers.
    let blocker = rusqlite::Connection::open(state.path().join("files.sqlite3")).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let before = count_rows(state.path());
    for _ in 0..50 {
        checksum(&server, &file).await;
    }
    blocker.execute_batch("COMMIT").unwrap();
    drop(blocker);
    assert!(
        count(&server, json!({"action": "FA_file_checksum"})).await >= 51,
        "the records queued while the database was busy are written after"
    );
    assert!(before >= 1);
    // automation-file's semantics: every call of one run shares its correlation id.
    let out = call(
        &server,
        "FA_execute_action",
        json!({"action_list": [["FA_file_checksum", {"path": file.to_string_lossy()}], ["FA_line_count", {"file_path": file.to_string_lossy()}]]}),
    )
    .await
    .unwrap();
    let runs = call(
        &server,
        "FA_audit_search",
        json!({"action": "FA_execute_action"}),
    )
    .await
    .unwrap();
    let correlation = runs[0]["correlation_id"].as_str().unwrap().to_string();
    assert!(!correlation.is_empty(), "{out}");
    let joined = count(&server, json!({"correlation_id": correlation})).await;
    assert_eq!(joined, 3, "the list and its two actions");
}

/// The records in the state database, read without the server (a reader is never blocked in WAL).
fn count_rows(state: &Path) -> i64 {
    let c = rusqlite::Connection::open(state.join("files.sqlite3")).unwrap();
    c.query_row("SELECT COUNT(*) FROM audit_records", [], |r| r.get(0))
        .unwrap()
}
