//! A server that answers in a way no call can take is told apart from one that does not answer:
//! an answer over the client's bound fails its call at once with its size and the limit (and is
//! never held whole), a broken line that names the call fails it at once with why, and a call
//! that then times out says what came instead (an answer to another id, a line that is not
//! JSON-RPC) rather than only that nothing came.

mod common;

use std::time::{Duration, Instant};

use maljan_client::{CallRecord, ErrorCode, JobSpec};
use serde_json::json;

/// One `work` call to the garble fixture sending `garble`, with `timeout_s` as the deadline.
async fn work_answered_with(garble: &str, timeout_s: f64) -> (CallRecord, Duration) {
    let s = common::Scratch::new();
    let mut breaker = common::quick();
    breaker.call_timeout_seconds = timeout_s;
    let mut config = s.config(
        vec![(
            "garble",
            s.fixture(
                "fixture-garble",
                &[
                    ("FIXTURE_GARBLE", garble),
                    ("FIXTURE_HUGE_BYTES", "20000000"),
                ],
            ),
        )],
        breaker,
    );
    config.core.mcp.max_answer_bytes = 1 << 20;
    let ledger =
        maljan_client::Ledger::open(&s.dir.path().join("ledger.sqlite3"), 64 * 1024).unwrap();
    let rt = maljan_client::Runtime::new(config, ledger);
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("garble").unwrap();
    h.view().await.unwrap();
    let started = Instant::now();
    let record = h.call("work", json!({})).await;
    let took = started.elapsed();
    // The connection still serves after what it was sent.
    let next = h.call("echo", json!({"message": "still here"})).await;
    assert!(next.ok, "{garble}: {:?}", next.error);
    rt.shutdown().await;
    (record, took)
}

#[tokio::test]
async fn an_answer_over_the_bound_fails_its_call_at_once_with_its_size() {
    let (record, took) = work_answered_with("huge", 30.0).await;
    let error = record.error.expect("refused");
    assert_eq!(error.code, ErrorCode::ToolFailed, "{error:?}");
    assert!(
        error
            .message
            .contains("exceeds the client's limit of 1048576 bytes"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("of 2000"),
        "names its size: {}",
        error.message
    );
    assert!(
        took < Duration::from_secs(20),
        "waited for the deadline: {took:?}"
    );
}

#[tokio::test]
async fn a_broken_answer_that_names_its_call_fails_it_at_once() {
    let (record, took) = work_answered_with("malformed", 30.0).await;
    let error = record.error.expect("refused");
    assert!(
        error.message.contains("not a JSON-RPC message"),
        "{}",
        error.message
    );
    assert!(
        took < Duration::from_secs(20),
        "waited for the deadline: {took:?}"
    );
}

#[tokio::test]
async fn a_call_that_times_out_says_what_came_instead() {
    for (garble, said) in [
        ("wrong-id", "matches no call in flight"),
        ("junk", "not a JSON-RPC message"),
    ] {
        let (record, _) = work_answered_with(garble, 0.5).await;
        let error = record.error.expect("refused");
        assert_eq!(error.code, ErrorCode::ToolFailed, "{garble}: {error:?}");
        assert!(error.message.contains(said), "{garble}: {}", error.message);
        assert!(
            error
                .message
                .contains("no answer the client could read within"),
            "{garble}: {}",
            error.message
        );
    }
}
