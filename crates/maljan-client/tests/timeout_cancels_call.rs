//! A call that gets no answer ends at the tool's real timeout and is cancelled on the server.

mod common;

use std::time::{Duration, Instant};

use maljan_client::{ErrorCode, JobSpec};
use serde_json::json;

#[tokio::test]
async fn default_timeout_applies_and_the_server_hears_the_cancellation() {
    let s = common::Scratch::new();
    let rt = s.runtime(
        vec![("hang", s.fixture("fixture-hang", &[]))],
        common::quick(),
    );
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("hang").unwrap();
    h.view().await.unwrap();
    let t = Instant::now();
    let rec = h.call("work", json!({})).await;
    let took = t.elapsed();
    assert!(!rec.ok);
    let err = rec.error.unwrap();
    assert_eq!(err.code, ErrorCode::Timeout, "{err:?}");
    assert!(
        err.message.contains("cancelled on the server"),
        "{}",
        err.message
    );
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // The server saw notifications/cancelled for it (poll: it arrives asynchronously).
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.events("cancelled").is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = s.events("cancelled");
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert!(cancelled[0].contains("timeout"), "{cancelled:?}");
    // The connection survives a timeout: the next call is answered.
    let rec = h.call("echo", json!({"message":"still here"})).await;
    assert!(rec.ok, "{:?}", rec.error);
    assert_eq!(rec.text(), "still here");
    rt.shutdown().await;
}

#[tokio::test]
async fn the_manifest_timeout_plus_margin_wins_over_the_default() {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0; // would hang the test if used
    b.timeout_margin_seconds = 0.1;
    let rt = s.runtime(
        vec![(
            "hang",
            s.fixture("fixture-hang", &[("FIXTURE_TIMEOUT_S", "0.2")]),
        )],
        b,
    );
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("hang").unwrap();
    let view = h.view().await.unwrap();
    assert!(view.manifest_declared);
    assert_eq!(view.tool("work").unwrap().timeout_s, Some(0.2));
    let t = Instant::now();
    let rec = h.call("work", json!({})).await;
    assert_eq!(rec.error.unwrap().code, ErrorCode::Timeout);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_secs(5),
        "{took:?}"
    );
    rt.shutdown().await;
}
