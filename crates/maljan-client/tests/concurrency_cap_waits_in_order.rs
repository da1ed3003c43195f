//! At most max_concurrent_calls calls are in flight per server; the rest wait their turn, in order.

mod common;

use std::time::Duration;

use maljan_client::JobSpec;
use serde_json::json;

#[tokio::test]
async fn no_more_than_the_cap_in_flight_and_waiters_go_in_order() {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.max_concurrent_calls = 2;
    b.call_timeout_seconds = 10.0;
    let rt = s.runtime(
        vec![(
            "slow",
            s.fixture("fixture-slow", &[("FIXTURE_DELAY_MS", "150")]),
        )],
        b,
    );
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("slow").unwrap();
    h.view().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let h = h.clone();
        tasks.push(tokio::spawn(async move { h.call("work", json!({})).await }));
        tokio::time::sleep(Duration::from_millis(5)).await; // issue in a known order
    }
    let mut recs = Vec::new();
    for t in tasks {
        recs.push(t.await.unwrap());
    }
    assert!(recs.iter().all(|r| r.ok), "{recs:?}");
    let stats = h.call("stats", json!({})).await.json().unwrap();
    assert_eq!(stats["max_in_flight"], 2, "{stats}");
    // Waits grow with the position in the queue: pairs go together.
    let waits: Vec<f64> = recs.iter().map(|r| r.wait_ms).collect();
    assert!(waits[0] < 50.0 && waits[1] < 50.0, "{waits:?}");
    assert!(waits[2] > 100.0 && waits[3] > 100.0, "{waits:?}");
    assert!(
        waits[4] > waits[2] + 100.0 && waits[5] > waits[3] + 100.0,
        "{waits:?}"
    );
    // The ledger keeps the wait.
    let calls = rt.ledger().calls(Some(job.id()), 100).unwrap();
    assert!(calls.iter().any(|c| c.wait_ms > 100.0));
    rt.shutdown().await;
}
