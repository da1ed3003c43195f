//! The ledger's two engines side by side: call rows recorded per second by 8 concurrent callers
//! (group commit on both), and the latency of a queue claim (claim + finish, 4 claimers, each
//! with its own connection as separate workers have), p50/p99.
//!
//! `cargo run -p maljan-client --example ledger_engines_bench` (PostgreSQL: maljan-testkit's
//! test server, Debian's postgresql via scripts/peers.sh). Figures: bench/scale.md.

use std::time::{Duration, Instant};

use maljan_client::{Ledger, LedgerEntry, NewQueuedJob};

const CALLERS: usize = 8;
const ROWS_PER_CALLER: usize = 2_500;
const JOBS: usize = 2_000;
const CLAIMERS: usize = 4;

fn entry(job: &str, ev: usize) -> LedgerEntry {
    LedgerEntry {
        job_id: job.into(),
        ev_id: format!("ev_{ev:04}"),
        server: "analysis".into(),
        tool: "file_hashes".into(),
        args: r#"{"file_path":"/samples/a.bin"}"#.into(),
        result: Some(r#"{"sha256":"00"}"#.repeat(20)),
        result_truncated: false,
        ok: true,
        error_code: None,
        message: None,
        remediation: None,
        started_at: String::new(),
        started_at_ms: 1,
        wait_ms: 0.1,
        duration_ms: 2.0,
        trial: false,
    }
}

fn insert_rate(url: &str) -> f64 {
    let l = Ledger::connect(url, 256 * 1024).unwrap();
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..CALLERS {
            let l = l.clone();
            s.spawn(move || {
                for i in 0..ROWS_PER_CALLER {
                    l.record(entry(&format!("job_{c}"), i)).unwrap();
                }
            });
        }
    });
    (CALLERS * ROWS_PER_CALLER) as f64 / start.elapsed().as_secs_f64()
}

fn claim_latency(url: &str) -> (Duration, Duration, f64) {
    let l = Ledger::connect(url, 1024).unwrap();
    for i in 0..JOBS {
        l.enqueue(NewQueuedJob {
            job_id: format!("q{i}"),
            label: "bench".into(),
            sample_sha256: "0".repeat(64),
            sample_name: "s".into(),
            sample_size: 1,
            servers: vec![],
            agent: false,
        })
        .unwrap();
    }
    let start = Instant::now();
    let mut lat: Vec<Duration> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..CLAIMERS)
            .map(|w| {
                s.spawn(move || {
                    let l = Ledger::connect(url, 1024).unwrap();
                    let mut out = Vec::new();
                    loop {
                        let t = Instant::now();
                        let Some(j) = l.claim(&format!("w{w}"), 60_000).unwrap() else {
                            break;
                        };
                        out.push(t.elapsed());
                        l.finish_queued(&j.job_id, &format!("w{w}"), "complete", None)
                            .unwrap();
                    }
                    out
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let per_s = JOBS as f64 / start.elapsed().as_secs_f64();
    lat.sort();
    (lat[lat.len() / 2], lat[lat.len() * 99 / 100], per_s)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let engines = [
        (
            "sqlite",
            format!("sqlite:{}", dir.path().join("l.sqlite3").display()),
            format!("sqlite:{}", dir.path().join("q.sqlite3").display()),
        ),
        (
            "postgres",
            maljan_testkit::postgres::fresh_database(),
            maljan_testkit::postgres::fresh_database(),
        ),
    ];
    println!("engine    rows/s (8 callers)   claims/s (4 claimers)   claim p50   claim p99");
    for (name, rows_db, queue_db) in &engines {
        let rate = insert_rate(rows_db);
        let (p50, p99, per_s) = claim_latency(queue_db);
        println!(
            "{name:<9} {rate:>18.0}   {per_s:>21.0}   {:>7.2} ms  {:>7.2} ms",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
}
