//! A server that floods stderr keeps answering; its stderr goes to a bounded log, never into the
//! protocol.

mod common;

use std::time::{Duration, Instant};

use maljan_client::JobSpec;
use serde_json::json;

#[tokio::test]
async fn calls_are_answered_and_the_log_stays_bounded() {
    let s = common::Scratch::new();
    let mut b = common::quick();
    b.call_timeout_seconds = 10.0;
    let rt = s.runtime(
        vec![(
            "noisy",
            s.fixture("fixture-flood", &[("FIXTURE_FLOOD_BYTES", "16777216")]),
        )],
        b,
    );
    let job = rt.new_job(JobSpec::labelled("t")).unwrap();
    let h = job.server("noisy").unwrap();
    for i in 0..50 {
        let rec = h.call("echo", json!({"message": format!("m{i}")})).await;
        assert!(rec.ok, "{:?}", rec.error);
        assert_eq!(rec.text(), format!("m{i}"));
    }
    let conn = rt
        .slot("noisy")
        .unwrap()
        .current_connection()
        .await
        .unwrap();
    let log = conn.stderr().unwrap();
    // Wait until the whole flood has been drained (the child would block if nobody read it).
    let deadline = Instant::now() + Duration::from_secs(20);
    while log.total_bytes() < 16 << 20 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        log.total_bytes() >= 16 << 20,
        "read {} bytes",
        log.total_bytes()
    );
    assert!(log.tail(usize::MAX).len() <= maljan_client::transport::stdio::STDERR_TAIL_BYTES);
    let file = maljan_client::transport::stderr_file(s.dir.path(), "noisy");
    let on_disk = std::fs::metadata(&file).unwrap().len();
    assert!(
        on_disk <= maljan_client::transport::stdio::STDERR_FILE_BYTES,
        "{on_disk}"
    );
    let rec = h.call("work", json!({})).await;
    assert!(rec.ok);
    rt.shutdown().await;
}
