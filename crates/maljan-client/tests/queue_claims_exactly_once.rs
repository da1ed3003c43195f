//! 1,000 jobs enqueued at once by 10 submitters, claimed by 4 workers of 2 claimers each, every
//! one with its own connection (as separate processes have): each job is claimed exactly once and
//! finished once — on SQLite and on a real PostgreSQL (maljan-testkit starts it).

use std::collections::HashMap;

use maljan_client::{Ledger, NewQueuedJob};

const SUBMITTERS: usize = 10;
const PER_SUBMITTER: usize = 100;

fn job(s: usize, i: usize) -> NewQueuedJob {
    NewQueuedJob {
        job_id: format!("job_{s}_{i}"),
        label: "stress".into(),
        sample_sha256: "0".repeat(64),
        sample_name: "s.bin".into(),
        sample_size: 1,
        servers: vec![],
        agent: false,
    }
}

fn run(url: &str) {
    Ledger::migrate(url).unwrap();
    std::thread::scope(|scope| {
        for s in 0..SUBMITTERS {
            scope.spawn(move || {
                let l = Ledger::connect(url, 1024).unwrap();
                for i in 0..PER_SUBMITTER {
                    l.enqueue(job(s, i)).unwrap();
                }
            });
        }
    });
    let claimed: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|w| {
                scope.spawn(move || {
                    let l = Ledger::connect(url, 1024).unwrap();
                    let name = format!("w{w}");
                    let mut mine = Vec::new();
                    while let Some(j) = l.claim(&name, 60_000).unwrap() {
                        assert!(l.finish_queued(&j.job_id, &name, "complete", None).unwrap());
                        mine.push(j.job_id);
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut times: HashMap<&str, usize> = HashMap::new();
    for id in claimed.iter().flatten() {
        *times.entry(id).or_default() += 1;
    }
    assert_eq!(times.len(), SUBMITTERS * PER_SUBMITTER, "{url}");
    assert!(times.values().all(|&n| n == 1), "a job was claimed twice");
    assert!(
        claimed.iter().filter(|c| !c.is_empty()).count() > 1,
        "one worker took every job: the claims never overlapped"
    );
    let l = Ledger::connect(url, 1024).unwrap();
    let done = l.queued_jobs(Some("complete"), 5000).unwrap();
    assert_eq!(done.len(), SUBMITTERS * PER_SUBMITTER);
    assert!(done.iter().all(|j| j.attempts == 1));
    assert_eq!(l.active_queued_jobs().unwrap(), 0);
}

#[test]
fn each_of_a_thousand_jobs_is_claimed_once_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    run(&format!(
        "sqlite:{}",
        dir.path().join("q.sqlite3").display()
    ));
}

#[test]
fn each_of_a_thousand_jobs_is_claimed_once_on_postgres() {
    run(&maljan_testkit::postgres::fresh_database());
}
