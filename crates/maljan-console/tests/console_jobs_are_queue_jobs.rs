//! A sample submitted to the console is a queue job on the console's database, run by the
//! console's embedded workers through the one pipeline: `maljan jobs list` shows it, and a console
//! killed with SIGKILL mid-job has the job taken over when it starts again (its lease run out),
//! finished once, each call in the job's ledger once — on SQLite and on PostgreSQL.

mod common;

use std::{
    net::TcpListener,
    path::Path,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use maljan_client::Ledger;

fn maljan(home: &Path, db: &str, args: &[&str]) -> Command {
    // MALJAN_BIN: a maljan binary built beforehand (else the workspace's, built on demand).
    let bin = std::env::var("MALJAN_BIN").unwrap_or_else(|_| common::maljan_bin());
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("MALJAN_HOME", home)
        .env("MALJAN_DATABASE_URL", db)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_LLM_MODEL")
        .env_remove("MALJAN_SAMPLES_URL")
        .env("MALJAN_LOG", "warn")
        .current_dir(home);
    cmd
}

fn run(home: &Path, db: &str, args: &[&str]) -> Output {
    let out = maljan(home, db, args).output().unwrap();
    assert!(
        out.status.success(),
        "maljan {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `maljan console` on `port` with a short lease, answering once it listens.
fn console(home: &Path, db: &str, port: u16) -> Child {
    let addr = format!("127.0.0.1:{port}");
    let child = maljan(
        home,
        db,
        &[
            "console",
            "--listen",
            &addr,
            "--lease-s",
            "2",
            "--workers",
            "2",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_for("the console to listen", Duration::from_secs(60), || {
        std::net::TcpStream::connect(&addr).is_ok()
    });
    child
}

/// Submits `content` as a script would (a bearer token, the API's multipart form), over a plain
/// HTTP/1.1 connection.
fn submit(port: u16, token: &str, name: &str, content: &[u8]) -> String {
    use std::io::{Read, Write};
    let (ctype, body) = common::multipart(name, content, &[("agent", "off")]);
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        conn,
        "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    conn.write_all(&body).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let (head, json) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 202"), "{answer}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    v["job_id"].as_str().unwrap().to_string()
}

/// Random bytes behind an MZ: the built-in tools take seconds on it (a debug build).
fn big_sample() -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut bytes = b"MZ".to_vec();
    bytes.extend((0..8 * 1024 * 1024).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }));
    bytes
}

fn killed_mid_job_the_console_finishes_it_once_when_started_again(db_of: impl Fn(&Path) -> String) {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let db = db_of(home);
    let token = String::from_utf8(run(home, &db, &["console", "token", "--label", "t"]).stdout)
        .unwrap()
        .trim()
        .to_string();
    let port = free_port();
    let mut doomed = console(home, &db, port);
    let id = submit(port, &token, "big.exe", &big_sample());

    // Listed by the queue's own front end, whoever took the submission.
    let listed: serde_json::Value =
        serde_json::from_slice(&run(home, &db, &["jobs", "list", "--json"]).stdout).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["job_id"] == id.as_str() && j["sample_name"] == "big.exe"),
        "{listed}"
    );

    let ledger = Ledger::connect(&db, 1 << 20).unwrap();
    wait_for("the first call of the job", Duration::from_secs(60), || {
        ledger.count(Some(&id)).unwrap() > 0
    });
    doomed.kill().unwrap(); // SIGKILL: no chance to clean up or give the job back
    doomed.wait().unwrap();
    let q = ledger.queued_job(&id).unwrap().unwrap();
    assert_eq!(q.state, "running", "{q:?}");
    assert!(
        q.worker.as_deref().unwrap().starts_with("console-"),
        "{q:?}"
    );
    let partial = ledger.count(Some(&id)).unwrap();

    let mut again = console(home, &db, port);
    wait_for("the job to finish", Duration::from_secs(180), || {
        let state = ledger.queued_job(&id).unwrap().unwrap().state;
        state != "running" && state != "queued"
    });
    let _ = again.kill();
    let _ = again.wait();

    let q = ledger.queued_job(&id).unwrap().unwrap();
    assert!(matches!(q.state.as_str(), "complete" | "degraded"), "{q:?}");
    assert_eq!(q.attempts, 2, "{q:?}");
    let calls = ledger.calls(Some(&id), 1000).unwrap();
    let mut evs: Vec<_> = calls.iter().map(|c| c.ev_id.as_str()).collect();
    evs.sort();
    evs.dedup();
    assert_eq!(evs.len(), calls.len(), "each evidence id once");
    assert_eq!(evs[0], "ev_0001");
    // The dead attempt's calls are kept aside, not lost and not mixed in.
    assert_eq!(
        ledger.count(Some(&format!("{id}~attempt1"))).unwrap(),
        partial
    );
    let job = ledger.job(&id).unwrap().unwrap();
    assert_eq!(job.status, q.state);
    assert!(
        job.degradations
            .iter()
            .any(|d| d.contains("stopped renewing its lease")),
        "{job:?}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&ledger.report(&id).unwrap().expect("the report is kept")).unwrap();
    assert_eq!(report["job_id"], id.as_str());
    assert_eq!(report["sample"]["name"], "big.exe");
    // The job's private directory went with it.
    let left: Vec<_> = std::fs::read_dir(home.join("work"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("job"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn killed_mid_job_on_sqlite() {
    killed_mid_job_the_console_finishes_it_once_when_started_again(|home| {
        format!("sqlite:{}", home.join("ledger.sqlite3").display())
    });
}

#[test]
fn killed_mid_job_on_postgres() {
    killed_mid_job_the_console_finishes_it_once_when_started_again(|_| {
        maljan_testkit::postgres::fresh_database()
    });
}
