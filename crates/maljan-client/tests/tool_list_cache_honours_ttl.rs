//! Issue 25 item 2: a list result's `ttlMs`/`cacheScope` are honoured: a server's tool list is
//! reused by later jobs until it expires, and read again when it has (or had no ttl at all).
//! Real peer: the Python SDK server (tests/peers/py_2026_server.py), whose `grow` tool registers a
//! tool `late` after the first listing.

mod common;

use maljan_client::JobSpec;
use serde_json::json;

/// Lists in one job, grows the server, and says whether a second job sees `late`.
async fn second_job_sees_late(args: &[&str]) -> bool {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.call_timeout_seconds = 30.0;
    let rt = s.runtime(vec![("peer", common::py_2026_stdio(args))], b);
    let first = rt.new_job(JobSpec::labelled("first")).unwrap();
    let h = first.server("peer").unwrap();
    let before = h.view().await.unwrap();
    assert!(before.tool("late").is_none());
    assert!(h.call("grow", json!({})).await.ok);
    let second = rt.new_job(JobSpec::labelled("second")).unwrap();
    let view = second.server("peer").unwrap().view().await.unwrap();
    assert_eq!(rt.slot("peer").unwrap().connects(), 1);
    rt.shutdown().await;
    view.tool("late").is_some()
}

#[tokio::test]
async fn a_fresh_list_is_reused_until_it_expires() {
    assert!(
        !second_job_sees_late(&["--tools-ttl-ms", "600000"]).await,
        "the list was read again within its ttlMs"
    );
}

#[tokio::test]
async fn an_expired_list_is_read_again() {
    assert!(
        second_job_sees_late(&["--tools-ttl-ms", "0"]).await,
        "a list with ttlMs 0 was served from the cache"
    );
}
