//! A job a worker runs streams its progress to every console watching it, whichever node runs
//! it: two `maljan console` processes (each its own data directory, as on two hosts) follow one
//! submitted job's event stream from before it starts; a `maljan worker` process runs it; both
//! streams carry every event, in order, live, up to `done`. On PostgreSQL the consoles hear of
//! each event through LISTEN/NOTIFY; on SQLite (console and worker on one machine) they read
//! the ledger again every few seconds. A job that ends with no events (cancelled before it
//! started) ends its stream too.

use std::{
    io::{BufRead, BufReader, Write},
    net::TcpStream,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use maljan_client::Ledger;

const BIN: &str = env!("CARGO_BIN_EXE_maljan");

fn maljan(home: &Path, db: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("MALJAN_HOME", home)
        .env("MALJAN_DATABASE_URL", db)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .current_dir(home)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A console on a free port: the process, its port, and the owner's token (from the login URL
/// it keeps in its data directory: every request to a console is authenticated).
fn console(home: &Path, db: &str) -> (Killed, u16, String) {
    let port = maljan_testkit::free_port();
    let listen = format!("127.0.0.1:{port}");
    // Console-only nodes (no embedded workers): the job is the remote worker's to run.
    let child = maljan(
        home,
        db,
        &["console", "--listen", &listen, "--workers", "0"],
    )
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let c = Killed(child);
    maljan_testkit::wait_answering(&listen, "/");
    let url = std::fs::read_to_string(home.join("console-login.url")).unwrap();
    let token = url.trim().split("token=").nth(1).unwrap().to_string();
    (c, port, token)
}

/// Reads a job's event stream from its start until `done`: (number, kind) of each event.
fn follow(port: u16, token: &str, job: &str) -> Vec<(i64, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "GET /api/v1/jobs/{job}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut events = Vec::new();
    let mut id = None;
    for line in BufReader::new(s).lines() {
        let line = line.expect("the stream stays open until done");
        if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().parse().ok();
        } else if let Some(kind) = line.strip_prefix("event:") {
            let kind = kind.trim().to_string();
            let done = kind == "done";
            events.push((id.expect("an event has a number"), kind));
            if done {
                break;
            }
        }
    }
    events
}

fn a_worker_s_job_reaches_both_consoles(db: &str) {
    let hosts: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (worker_home, a_home, b_home) = (hosts[0].path(), hosts[1].path(), hosts[2].path());
    let ok = maljan(worker_home, db, &["db", "migrate"])
        .status()
        .unwrap();
    assert!(ok.success());
    let sample = worker_home.join("s.bin");
    std::fs::write(&sample, b"MZ a sample that calls http://evil.example.com/x").unwrap();
    let out = maljan(worker_home, db, &["submit", sample.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();

    let (_a, port_a, token_a) = console(a_home, db);
    let (_b, port_b, token_b) = console(b_home, db);
    let watchers: Vec<_> = [(port_a, token_a.clone()), (port_b, token_b)]
        .into_iter()
        .map(|(port, token)| {
            let id = id.clone();
            std::thread::spawn(move || follow(port, &token, &id))
        })
        .collect();
    // The streams are open (and empty: nothing has run) before the worker starts.
    std::thread::sleep(Duration::from_millis(500));
    let ledger = Ledger::connect(db, 1 << 20).unwrap();
    assert!(ledger.job_events(&id, 0).unwrap().is_empty());
    let worker = maljan(worker_home, db, &["worker", "--exit-when-idle"])
        .status()
        .unwrap();
    assert!(worker.success());

    let stored: Vec<(i64, String)> = ledger
        .job_events(&id, 0)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    let kinds: Vec<&str> = stored.iter().map(|e| e.1.as_str()).collect();
    assert!(
        kinds.contains(&"step_started") && kinds.contains(&"call_finished"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    for w in watchers {
        let seen = w.join().unwrap();
        assert_eq!(
            seen, stored,
            "{db}: a console's stream is the job's events, in order"
        );
    }

    // A job cancelled before it started has one event, its `done` (with the cancelled report
    // saved): its stream ends rather than waits.
    let out = maljan(worker_home, db, &["submit", sample.to_str().unwrap()])
        .output()
        .unwrap();
    let never = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let cancelled = maljan(worker_home, db, &["jobs", "cancel", &never])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(cancelled.success());
    assert_eq!(follow(port_a, &token_a, &never), [(1, "done".to_string())]);
}

#[test]
fn a_worker_s_job_streams_to_every_console_on_postgres() {
    a_worker_s_job_reaches_both_consoles(&maljan_testkit::postgres::fresh_database());
}

#[test]
fn a_worker_s_job_streams_to_every_console_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("ledger.sqlite3").display());
    a_worker_s_job_reaches_both_consoles(&db);
}
