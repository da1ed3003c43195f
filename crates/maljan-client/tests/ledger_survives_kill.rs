//! Issue 4 item 6: "a call that returned to its caller is in the ledger even if the process is
//! killed right after". A child process (this test binary, run again in child mode) appends records
//! from many tasks at once and prints each evidence id only after its `append` resolved; the parent
//! kills it with SIGKILL in the middle of the stream and reopens the ledger: every id the child
//! printed must be there.

use std::{
    collections::HashSet,
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

use maljan_client::{Ledger, LedgerEntry};

const CHILD_ENV: &str = "MALJAN_LEDGER_KILL_CHILD";
const TEST_NAME: &str = "acknowledged_records_survive_sigkill";
/// Acknowledged records the parent waits for before it kills the child.
const KILL_AFTER: usize = 3000;

fn entry(ev: String) -> LedgerEntry {
    LedgerEntry {
        job_id: "kill".into(),
        ev_id: ev,
        server: "s".into(),
        tool: "t".into(),
        args: r#"{"path":"/tmp/x"}"#.into(),
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

/// Child mode: 16 tasks append until stdout closes (the parent is gone) or the process is killed.
fn child(db: &str) {
    let ledger = Ledger::open(std::path::Path::new(db), 1024).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut tasks = Vec::new();
        for t in 0..16 {
            let ledger = ledger.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let ev = format!("ev_{t}_{i}");
                    ledger.append(entry(ev.clone())).await.unwrap();
                    let mut out = std::io::stdout().lock();
                    if writeln!(out, "acked {ev}")
                        .and_then(|_| out.flush())
                        .is_err()
                    {
                        std::process::exit(0);
                    }
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
}

#[test]
fn acknowledged_records_survive_sigkill() {
    if let Ok(db) = std::env::var(CHILD_ENV) {
        child(&db);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.sqlite3");
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the child");
    let out = BufReader::new(proc.stdout.take().unwrap());
    let mut acked = Vec::new();
    for line in out.lines() {
        let line = line.unwrap();
        if let Some(ev) = line.strip_prefix("acked ") {
            acked.push(ev.to_string());
            if acked.len() == KILL_AFTER {
                // SIGKILL: no destructor, no flush, no writer-thread shutdown runs.
                proc.kill().unwrap();
                break;
            }
        }
    }
    let status = proc.wait().unwrap();
    assert_eq!(acked.len(), KILL_AFTER, "the child stopped early: {status}");
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }
    let ledger = Ledger::open(&db, 1024).unwrap();
    let have: HashSet<String> = ledger
        .calls(Some("kill"), usize::MAX)
        .unwrap()
        .into_iter()
        .map(|c| c.ev_id)
        .collect();
    let missing: Vec<_> = acked.iter().filter(|ev| !have.contains(*ev)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged records are missing after the kill, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}
