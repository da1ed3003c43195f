//! After 3 unanswered calls in a row a server rests: refused at once with `server_resting`, then
//! one trial call goes through after the cooldown.

mod common;

use std::time::{Duration, Instant};

use maljan_client::{ErrorCode, JobSpec};
use serde_json::json;

#[tokio::test]
async fn three_timeouts_rest_the_server_then_one_trial_closes_it() {
    let s = common::Scratch::new();
    let rt = s.runtime(
        vec![("hang", s.fixture("fixture-hang", &[]))],
        common::quick(),
    );
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("hang").unwrap();
    h.view().await.unwrap();
    for _ in 0..3 {
        let rec = h.call("work", json!({})).await;
        assert_eq!(rec.error.unwrap().code, ErrorCode::Timeout);
    }
    // Resting: answered at once, not sent.
    let t = Instant::now();
    let rec = h.call("work", json!({})).await;
    assert!(t.elapsed() < Duration::from_millis(100));
    let err = rec.error.unwrap();
    assert_eq!(err.code, ErrorCode::ServerResting);
    assert!(
        err.message
            .contains("tool server 'hang' is resting after 3 calls in a row it did not answer"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("it will be tried again in 1 s (at "),
        "{}",
        err.message
    );
    assert_eq!(
        s.events("call work").len(),
        3,
        "only three calls reached the server"
    );
    // The job says so.
    assert!(
        job.degradations()
            .iter()
            .any(|d| d.contains("Tool server hang was rested")),
        "{:?}",
        job.degradations()
    );

    // After the cooldown one trial goes through; a quick answer closes the breaker.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let rec = h.call("echo", json!({"message":"hi"})).await;
    assert!(rec.ok && rec.trial, "{rec:?}");
    let rec = h.call("echo", json!({"message":"again"})).await;
    assert!(rec.ok && !rec.trial);
    // Every call, refused ones included, is in the ledger.
    assert_eq!(rt.ledger().count(Some(job.id())).unwrap(), 6);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_failed_trial_rests_again_and_others_wait_for_the_trial() {
    let s = common::Scratch::new();
    let rt = s.runtime(
        vec![("hang", s.fixture("fixture-hang", &[]))],
        common::quick(),
    );
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("hang").unwrap();
    for _ in 0..3 {
        h.call("work", json!({})).await;
    }
    tokio::time::sleep(Duration::from_millis(450)).await;
    // The trial hangs; while it is out, a second caller is refused with the trial message.
    let h2 = h.clone();
    let trial = tokio::spawn(async move { h2.call("work", json!({})).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = h.call("echo", json!({"message":"x"})).await;
    let err = refused.error.unwrap();
    assert_eq!(err.code, ErrorCode::ServerResting);
    assert!(
        err.message.contains("one call has been let through"),
        "{}",
        err.message
    );
    let trial = trial.await.unwrap();
    assert!(trial.trial);
    assert_eq!(trial.error.unwrap().code, ErrorCode::Timeout);
    // Resting again.
    let rec = h.call("echo", json!({"message":"x"})).await;
    assert_eq!(rec.error.unwrap().code, ErrorCode::ServerResting);
    assert_eq!(rt.slot("hang").unwrap().breaker.rests(), 2);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_tools_own_error_is_an_answer() {
    let s = common::Scratch::new();
    let rt = s.runtime(
        vec![("fx", s.fixture("fixture-echo", &[]))],
        common::quick(),
    );
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("fx").unwrap();
    for _ in 0..5 {
        let rec = h.call("fail", json!({})).await;
        assert_eq!(rec.error.unwrap().code, ErrorCode::BadArgument);
    }
    assert!(!rt.slot("fx").unwrap().breaker.is_resting());
    rt.shutdown().await;
}
