//! PostgreSQL restarted while two workers run a batch: the workers reconnect, every job finishes
//! once, and no call row is lost or doubled (each job of the same kind of sample has the same
//! calls, each evidence id once). Its own test file: the restart hits the process's one server.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use maljan_client::Ledger;

#[test]
fn workers_ride_out_a_postgres_restart_and_lose_nothing() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let db = maljan_testkit::postgres::fresh_database();
    let maljan = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_maljan"));
        cmd.args(args)
            .env("MALJAN_HOME", home)
            .env("MALJAN_DATABASE_URL", &db)
            .env_remove("MALJAN_CONFIG")
            .env_remove("MALJAN_LLM_MODEL")
            .current_dir(home);
        cmd
    };
    let mut ids = Vec::new();
    for i in 0..24 {
        let s = home.join(format!("s{i}.bin"));
        std::fs::write(&s, format!("MZ sample {i} http://evil{i}.example.com/x")).unwrap();
        let out = maljan(&["submit", s.to_str().unwrap()]).output().unwrap();
        assert!(out.status.success());
        ids.push(String::from_utf8(out.stdout).unwrap().trim().to_string());
    }
    let ledger = Ledger::connect(&db, 1 << 20).unwrap();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            maljan(&["worker", "--lease-s", "3", "--exit-when-idle"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // Mid-run: some jobs done, most not.
    let start = std::time::Instant::now();
    while ledger.queued_jobs(Some("queued"), 100).unwrap().len() > 18 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the workers never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    maljan_testkit::postgres::restart_server(Duration::from_secs(2));
    for mut w in workers {
        assert!(w.wait().unwrap().success());
    }
    let ledger = Ledger::connect(&db, 1 << 20).unwrap();
    let mut counts = Vec::new();
    for id in &ids {
        let q = ledger.queued_job(id).unwrap().unwrap();
        assert!(matches!(q.state.as_str(), "complete" | "degraded"), "{q:?}");
        let calls = ledger.calls(Some(id), 1000).unwrap();
        let mut evs: Vec<_> = calls.iter().map(|c| c.ev_id.as_str()).collect();
        evs.sort();
        evs.dedup();
        assert_eq!(evs.len(), calls.len(), "{id}: an evidence id twice");
        counts.push(calls.len());
        assert!(ledger.report(id).unwrap().is_some(), "{id}: no report");
    }
    counts.dedup();
    assert_eq!(
        counts.len(),
        1,
        "jobs of one kind recorded different numbers of calls: {counts:?}"
    );
}
