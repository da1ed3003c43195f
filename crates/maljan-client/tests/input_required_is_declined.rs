//! Issue 25 item 2: a 2026-07-28 server that answers a call with `input_required` gets the
//! runtime's policy, a decline with a reason, and the call ends (never a wait for a person).
//! Real peer: the Python SDK server (tests/peers/py_2026_server.py): `greet` elicits a name and
//! answers with what the client said; `sample` asks for the client's model, which the runtime
//! does not declare, so the server ends that call with its own error.

mod common;

use maljan_client::JobSpec;
use serde_json::json;

#[tokio::test]
async fn elicitation_is_declined_and_sampling_ends_the_call() {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    let rt = s.runtime(vec![("peer", common::py_2026_stdio(&[]))], b);
    let job = rt.new_job(JobSpec::labelled("input-required")).unwrap();
    let h = job.server("peer").unwrap();

    let greet = h.call("greet", json!({})).await;
    assert!(greet.ok, "{:?}", greet.error);
    assert_eq!(greet.text(), "decline", "the server did not hear a decline");

    // The runtime declares no sampling: the server ends the call itself, with its own error.
    let sample = h.call("sample", json!({})).await;
    assert!(!sample.ok, "{}", sample.text());
    assert!(sample.error.is_some());
    // The server is still there, and nothing counted against it.
    let echo = h.call("echo", json!({"message": "still here"})).await;
    assert_eq!(echo.text(), "Echo: still here");
    assert_eq!(rt.slot("peer").unwrap().breaker.failures(), 0);
    rt.shutdown().await;
}
