//! Workers on one PostgreSQL database share a remote server's limits: four workers send no more
//! than the server's cap together, and a rest one worker starts holds for all of them, with one
//! trial call between them. The server is the Python SDK's, over streamable HTTP, and counts from
//! its side what it was sent; each runtime has its own database connections, as a worker process
//! has.

mod common;

use std::{
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use maljan_client::{
    BreakerConfig, ErrorCode, JobSpec, Ledger, Runtime, ServerConfig, TransportKind,
};
use maljan_testkit::{free_port, peer_env};
use serde_json::{Value, json};

use common::{Peer, Scratch, repo_peers_dir};

fn counting_server() -> (Peer, ServerConfig) {
    let port = free_port();
    let child = Command::new(peer_env("MALJAN_PY"))
        .arg(repo_peers_dir().join("py_counting_server.py"))
        .args(["--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start py_counting_server.py");
    let peer = Peer(child);
    maljan_testkit::wait_answering(&format!("127.0.0.1:{port}"), "/mcp");
    let cfg = ServerConfig {
        transport: TransportKind::StreamableHttp,
        url: format!("http://127.0.0.1:{port}/mcp"),
        enabled: true,
        ..Default::default()
    };
    (peer, cfg)
}

/// `n` workers' runtimes over `database` (`None`: each its own SQLite ledger).
fn workers(
    n: usize,
    server: &ServerConfig,
    breaker: BreakerConfig,
    database: Option<&str>,
) -> (Vec<Scratch>, Vec<Arc<Runtime>>) {
    let scratches: Vec<Scratch> = (0..n).map(|_| Scratch::new()).collect();
    let runtimes = scratches
        .iter()
        .map(|s| {
            let config = s.config(vec![("remote", server.clone())], breaker.clone());
            let ledger = match database {
                Some(url) => Ledger::connect(url, 64 * 1024).unwrap(),
                None => Ledger::open(&s.dir.path().join("ledger.sqlite3"), 64 * 1024).unwrap(),
            };
            Runtime::new(config, ledger)
        })
        .collect();
    (scratches, runtimes)
}

async fn stats(rt: &Arc<Runtime>) -> Value {
    let job = rt.new_job(JobSpec::labelled("stats")).unwrap();
    let rec = job.server("remote").unwrap().call("stats", json!({})).await;
    assert!(rec.ok, "{rec:?}");
    serde_json::from_str(&rec.text()).unwrap()
}

/// Each runtime sends `per_worker` calls of 200 ms at once; returns the server's count.
async fn send_together(runtimes: &[Arc<Runtime>], per_worker: usize) -> Value {
    let mut tasks = Vec::new();
    for rt in runtimes {
        let job = rt.new_job(JobSpec::labelled("load")).unwrap();
        let h = job.server("remote").unwrap();
        for _ in 0..per_worker {
            let h = h.clone();
            tasks.push(tokio::spawn(async move {
                h.call("work", json!({"ms": 200})).await
            }));
        }
    }
    for t in tasks {
        let rec = t.await.unwrap();
        assert!(rec.ok, "{rec:?}");
    }
    stats(&runtimes[0]).await
}

fn capped(cap: usize) -> BreakerConfig {
    BreakerConfig {
        max_concurrent_calls: cap,
        call_timeout_seconds: 30.0,
        ..common::quick()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_workers_send_no_more_than_the_cap_together() {
    let pg = maljan_testkit::postgres::fresh_database();
    Ledger::migrate(&pg).unwrap();
    let (_server, cfg) = counting_server();
    let (_s, runtimes) = workers(4, &cfg, capped(2), Some(&pg));
    let seen = send_together(&runtimes, 3).await;
    assert_eq!(seen["calls"], 12, "{seen}");
    assert_eq!(seen["max_in_flight"], 2, "four workers, a cap of 2: {seen}");
    for rt in &runtimes {
        rt.shutdown().await;
    }

    // The same four workers without a shared database each keep their own cap: the server sees
    // more than 2 at once, which is what the shared cap prevents.
    let (_server, cfg) = counting_server();
    let (_s, runtimes) = workers(4, &cfg, capped(2), None);
    let seen = send_together(&runtimes, 3).await;
    assert!(
        seen["max_in_flight"].as_u64().unwrap() > 2,
        "without sharing the server should see more than one worker's cap: {seen}"
    );
    for rt in &runtimes {
        rt.shutdown().await;
    }
}

async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "waited 5 s for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rest_one_worker_starts_holds_for_every_worker_with_one_trial() {
    let pg = maljan_testkit::postgres::fresh_database();
    Ledger::migrate(&pg).unwrap();
    let (_server, cfg) = counting_server();
    let breaker = BreakerConfig {
        cooldown_seconds: 1.5,
        ..common::quick()
    };
    let (_s, rts) = workers(2, &cfg, breaker, Some(&pg));
    let (a, b) = (&rts[0], &rts[1]);
    let job_a = a.new_job(JobSpec::labelled("a")).unwrap();
    let job_b = b.new_job(JobSpec::labelled("b")).unwrap();
    let (ha, hb) = (
        job_a.server("remote").unwrap(),
        job_b.server("remote").unwrap(),
    );
    // B has talked to the server (so its refusal below is the shared rest, not a connect error).
    assert!(hb.call("work", json!({"ms": 1})).await.ok);

    // Three calls A's 0.3 s limit cuts off rest the server...
    for _ in 0..3 {
        let rec = ha.call("work", json!({"ms": 3000})).await;
        assert_eq!(rec.error.unwrap().code, ErrorCode::Timeout);
    }
    // ...for B too, which has sent nothing unanswered.
    let b_breaker = b.slot("remote").unwrap().breaker.clone();
    until("B to hear of A's rest", || b_breaker.is_resting()).await;
    let t = Instant::now();
    let refused = hb.call("work", json!({"ms": 1})).await;
    assert!(t.elapsed() < Duration::from_millis(100));
    let err = refused.error.unwrap();
    assert_eq!(err.code, ErrorCode::ServerResting, "{}", err.message);
    assert!(
        err.message.contains("resting after 3 calls"),
        "{}",
        err.message
    );

    // After the cooldown both try at once: one trial is sent, the other worker is refused.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let (ra, rb) = tokio::join!(
        ha.call("work", json!({"ms": 200})),
        hb.call("work", json!({"ms": 200}))
    );
    let (trial, other) = if ra.ok { (ra, rb) } else { (rb, ra) };
    assert!(trial.ok && trial.trial, "{trial:?}");
    let err = other.error.expect("only one trial between two workers");
    assert_eq!(err.code, ErrorCode::ServerResting, "{}", err.message);
    assert!(err.message.contains("another worker"), "{}", err.message);

    // The trial answered closes both breakers.
    let a_breaker = a.slot("remote").unwrap().breaker.clone();
    until("both breakers to close", || {
        !a_breaker.is_resting() && !b_breaker.is_resting()
    })
    .await;
    assert!(hb.call("work", json!({"ms": 1})).await.ok);
    assert!(ha.call("work", json!({"ms": 1})).await.ok);
    // From the server's side: 1 + 3 cut off + 1 trial + 2, and nothing while it rested.
    assert_eq!(stats(a).await["calls"], 7);
    for rt in &rts {
        rt.shutdown().await;
    }
}
