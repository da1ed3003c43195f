//! A stdio server that dies mid-call: the call fails at once (not at its timeout), counts toward
//! the breaker, and the server is started again for the next (trial) call.

mod common;

use std::time::{Duration, Instant};

use maljan_client::{ErrorCode, JobSpec};
use serde_json::json;

#[tokio::test]
async fn a_crash_is_unanswered_and_the_trial_restarts_the_process() {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.call_timeout_seconds = 20.0; // a crash must not wait for the timeout
    let rt = s.runtime(vec![("crash", s.fixture("fixture-crash", &[]))], b);
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("crash").unwrap();
    h.view().await.unwrap();
    let first_pid = rt
        .slot("crash")
        .unwrap()
        .current_connection()
        .await
        .unwrap()
        .pid();
    for i in 0..3 {
        let t = Instant::now();
        let rec = h.call("work", json!({})).await;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "call {i} waited {:?}",
            t.elapsed()
        );
        let err = rec.error.unwrap();
        assert_eq!(err.code, ErrorCode::ToolFailed, "{err:?}");
        assert!(
            err.message.contains("process or connection is gone"),
            "{}",
            err.message
        );
        assert!(
            err.remediation.contains("restarted on the next call"),
            "{}",
            err.remediation
        );
    }
    let rec = h.call("echo", json!({"message":"x"})).await;
    assert_eq!(rec.error.unwrap().code, ErrorCode::ServerResting);

    tokio::time::sleep(Duration::from_millis(450)).await;
    let rec = h.call("echo", json!({"message":"back"})).await;
    assert!(rec.ok && rec.trial, "{rec:?}");
    assert_eq!(rec.text(), "back");
    let slot = rt.slot("crash").unwrap();
    let pid = slot.current_connection().await.unwrap().pid();
    assert_ne!(pid, first_pid, "a new process answered");
    assert!(s.events("start").len() >= 2);
    rt.shutdown().await;
}
