//! The queue end to end, through the `maljan` binary: `submit` stores samples and enqueues,
//! `worker`s claim and run them, `jobs` lists, shows and cancels — on SQLite and on a real
//! PostgreSQL (maljan-testkit starts it). And the fault the lease exists for: a worker killed
//! with SIGKILL mid-job; another reclaims the job after the lease and finishes it once.

use std::{
    path::Path,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
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
        .current_dir(home);
    cmd
}

fn run(home: &Path, db: &str, args: &[&str]) -> Output {
    let out = maljan(home, db, args).output().expect("maljan runs");
    assert!(
        out.status.success(),
        "maljan {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn submit(home: &Path, db: &str, sample: &Path) -> String {
    let out = run(home, db, &["submit", sample.to_str().unwrap()]);
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn queue_json(home: &Path, db: &str) -> Vec<serde_json::Value> {
    let out = run(home, db, &["jobs", "list", "--json", "--limit", "500"]);
    serde_json::from_slice(&out.stdout).expect("jobs list --json")
}

fn engines(home: &Path) -> Vec<String> {
    vec![
        format!("sqlite:{}", home.join("ledger.sqlite3").display()),
        maljan_testkit::postgres::fresh_database(),
    ]
}

#[test]
fn two_workers_run_each_submitted_job_once_on_either_engine() {
    for_each_engine(|home, db| {
        let out = run(home, db, &["db", "migrate"]);
        let said = String::from_utf8_lossy(&out.stdout);
        let version = format!("version {}", maljan_client::ledger::SCHEMA_VERSION);
        assert!(said.contains(&version), "{said}");
        let mut ids = Vec::new();
        for i in 0..6 {
            let s = home.join(format!("s{i}.bin"));
            std::fs::write(&s, format!("MZ sample {i} http://evil{i}.example.com/x")).unwrap();
            ids.push(submit(home, db, &s));
        }
        let workers: Vec<Child> = (0..2)
            .map(|_| {
                maljan(
                    home,
                    db,
                    &["worker", "--concurrency", "2", "--exit-when-idle"],
                )
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
            })
            .collect();
        for mut w in workers {
            assert!(w.wait().unwrap().success());
        }
        let queue = queue_json(home, db);
        assert_eq!(queue.len(), 6);
        let ledger = Ledger::connect(db, 1 << 20).unwrap();
        for j in &queue {
            let id = j["job_id"].as_str().unwrap();
            assert!(ids.iter().any(|i| i == id));
            assert_eq!(j["attempts"], 1, "{j}");
            assert!(
                matches!(j["state"].as_str(), Some("complete" | "degraded")),
                "{j}"
            );
            let calls = ledger.calls(Some(id), 1000).unwrap();
            let mut evs: Vec<_> = calls.iter().map(|c| c.ev_id.clone()).collect();
            evs.dedup();
            assert!(
                !calls.is_empty() && evs.len() == calls.len(),
                "{id}: {evs:?}"
            );
            assert!(ledger.report(id).unwrap().is_some());
        }
        let shown = run(home, db, &["jobs", "show", &ids[0], "--json"]);
        let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(shown["job"]["job_id"], ids[0].as_str());
    });
}

#[test]
fn a_queued_job_cancelled_never_runs() {
    for_each_engine(|home, db| {
        let s = home.join("c.bin");
        std::fs::write(&s, b"MZ cancel me").unwrap();
        let id = submit(home, db, &s);
        let out = run(home, db, &["jobs", "cancel", &id]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("cancelled before it started"));
        run(home, db, &["worker", "--exit-when-idle"]);
        let ledger = Ledger::connect(db, 1 << 20).unwrap();
        assert_eq!(ledger.count(Some(&id)).unwrap(), 0);
        assert_eq!(ledger.job(&id).unwrap().unwrap().status, "cancelled");
        let bad = maljan(home, db, &["jobs", "cancel", "job_nope"])
            .output()
            .unwrap();
        assert!(!bad.status.success());
        assert!(String::from_utf8_lossy(&bad.stderr).contains("no queued job job_nope"));
    });
}

fn big_sample(path: &Path) {
    // Large enough that the built-in tools take seconds on it (a debug build): time to kill.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut bytes = b"MZ".to_vec();
    bytes.extend((0..8 * 1024 * 1024).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }));
    std::fs::write(path, bytes).unwrap();
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_worker_killed_mid_job_is_replaced_and_the_job_finishes_once() {
    for_each_engine(|home, db| {
        let s = home.join("big.bin");
        big_sample(&s);
        let id = submit(home, db, &s);
        let ledger = Ledger::connect(db, 1 << 20).unwrap();
        let mut doomed = maljan(home, db, &["worker", "--lease-s", "2"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the first call of the job", Duration::from_secs(60), || {
            ledger.count(Some(&id)).unwrap() > 0
        });
        doomed.kill().unwrap(); // SIGKILL: no chance to clean up or give the job back
        doomed.wait().unwrap();
        assert_eq!(ledger.queued_job(&id).unwrap().unwrap().state, "running");
        let partial = ledger.count(Some(&id)).unwrap();
        let started = Instant::now();
        run(home, db, &["worker", "--lease-s", "2", "--exit-when-idle"]);
        let q = ledger.queued_job(&id).unwrap().unwrap();
        assert_eq!(q.attempts, 2, "{q:?}");
        assert!(matches!(q.state.as_str(), "complete" | "degraded"), "{q:?}");
        // Not reclaimed before the dead worker's lease ran out.
        assert!(started.elapsed() >= Duration::from_millis(500));
        let calls = ledger.calls(Some(&id), 1000).unwrap();
        let mut evs: Vec<_> = calls.iter().map(|c| c.ev_id.as_str()).collect();
        evs.sort();
        evs.dedup();
        assert_eq!(evs.len(), calls.len(), "each evidence id once");
        assert_eq!(evs[0], "ev_0001");
        // The dead attempt's calls are kept aside, not lost and not mixed in.
        let aside = ledger.count(Some(&format!("{id}~attempt1"))).unwrap();
        assert_eq!(aside, partial);
        let job = ledger.job(&id).unwrap().unwrap();
        assert!(
            job.degradations
                .iter()
                .any(|d| d.contains("stopped renewing its lease")),
            "{job:?}"
        );
        assert_eq!(job.status, q.state);
    });
}

fn for_each_engine(f: impl Fn(&Path, &str)) {
    for engine in 0..2 {
        let home = tempfile::tempdir().unwrap();
        let db = engines(home.path()).swap_remove(engine);
        f(home.path(), &db);
    }
}

#[test]
fn cancelling_a_running_job_reaches_its_worker_within_a_second() {
    for_each_engine(|home, db| {
        let s = home.join("big.bin");
        big_sample(&s);
        let id = submit(home, db, &s);
        let ledger = Ledger::connect(db, 1 << 20).unwrap();
        // A long lease: on SQLite the cancel is seen at a renewal (every third of it, 1 s here);
        // on PostgreSQL the NOTIFY arrives at once.
        let mut worker = maljan(home, db, &["worker", "--lease-s", "3", "--exit-when-idle"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the first call of the job", Duration::from_secs(60), || {
            ledger.count(Some(&id)).unwrap() > 0
        });
        let asked = Instant::now();
        let out = run(home, db, &["jobs", "cancel", &id]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("its worker is stopping it"));
        wait_for("the job to stop", Duration::from_secs(30), || {
            ledger.queued_job(&id).unwrap().unwrap().state != "running"
        });
        let took = asked.elapsed();
        assert!(worker.wait().unwrap().success());
        let q = ledger.queued_job(&id).unwrap().unwrap();
        assert_eq!(q.state, "cancelled", "{q:?}");
        eprintln!("{db}: cancel reached the worker in {took:?}");
        // The promise is about reaching the worker; the calls in flight then end.
        assert!(took < Duration::from_secs(3), "{took:?}");
    });
}
