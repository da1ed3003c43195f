//! The client runtime and the MCP tasks extension, against a real `maljan serve files --http`
//! (which declares `io.modelcontextprotocol/tasks` and runs its long tools as tasks): a long call
//! is offered as a task and polled to its result, recorded once; a short call, or any call to an
//! entry whose `task_threshold_s` turns tasks off, is an ordinary call; a task call whose caller
//! goes away is cancelled on the server (the tool's own work stops).

mod common;

use std::{
    io::Read,
    net::TcpListener,
    sync::Arc,
    time::{Duration, Instant},
};

use common::staging::*;
use maljan_client::{JobSpec, Runtime, ServerConfig};
use serde_json::json;

/// The connection the runtime holds to `server` (made by the first call).
async fn connection(rt: &Arc<Runtime>, server: &str) -> Arc<maljan_client::transport::Connection> {
    let slot = rt.slot(server).expect("configured");
    slot.current_connection().await.expect("connected")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_is_a_task_polled_to_its_result_and_a_short_one_a_plain_call() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), b"abc").unwrap();
    let served = serve_files(scratch.path(), &[&root], &[]);
    let never = ServerConfig {
        task_threshold_s: Some(-1.0),
        ..http_server(&served.url())
    };
    let rt = runtime(
        scratch.path(),
        vec![("files", http_server(&served.url())), ("never", never)],
    );
    let job = rt.new_job(JobSpec::labelled("tasks")).unwrap();
    let files = job.server("files").unwrap();
    let path = root.join("a.txt").to_string_lossy().into_owned();

    // FA_file_checksum's timeout is 600 s: offered as a task, and the server runs it as one.
    let rec = files
        .call(
            "FA_file_checksum",
            json!({"path": path, "algorithm": "sha256"}),
        )
        .await;
    assert!(rec.ok, "{:?}", rec.error);
    assert!(
        rec.text()
            .contains("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        "{}",
        rec.text()
    );
    let conn = connection(&rt, "files").await;
    assert!(conn.offers_tasks());
    assert_eq!(conn.tasks_followed(), 1);

    // FA_create_dir's is 30 s: an ordinary call.
    let dir = root.join("made").to_string_lossy().into_owned();
    let rec = files.call("FA_create_dir", json!({"dir_path": dir})).await;
    assert!(rec.ok, "{:?}", rec.error);
    assert!(root.join("made").is_dir());
    assert_eq!(conn.tasks_followed(), 1);

    // The same long call to an entry with tasks turned off: an ordinary call, same answer.
    let never = job.server("never").unwrap();
    let rec = never
        .call(
            "FA_file_checksum",
            json!({"path": path, "algorithm": "sha256"}),
        )
        .await;
    assert!(rec.ok, "{:?}", rec.error);
    let plain = connection(&rt, "never").await;
    assert!(plain.offers_tasks());
    assert_eq!(plain.tasks_followed(), 0);

    // Each call is recorded once, the task's polls included in its one entry.
    let entries = rt.ledger().calls(Some(job.id()), 100).unwrap();
    let tools: Vec<&str> = entries.iter().map(|e| e.tool.as_str()).collect();
    let checksums = tools.iter().filter(|t| **t == "FA_file_checksum").count();
    assert_eq!(checksums, 2, "{tools:?}");
    assert_eq!(tools.iter().filter(|t| **t == "FA_create_dir").count(), 1);
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_caller_goes_away_is_cancelled_on_the_server() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    // A web server that takes the download's request and never answers it: only the tool's
    // cancellation closes the connection.
    let web = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/big.bin",
        web.local_addr().unwrap().port()
    );
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut stream, _) = web.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut buf = [0u8; 4096];
        let started = Instant::now();
        // Read the request, then wait for the end of the connection.
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                let _ = closed_tx.send(started.elapsed());
                return;
            }
        }
    });
    let served = serve_files(scratch.path(), &[&root], &["--allow-loopback-downloads"]);
    let rt = runtime(scratch.path(), vec![("files", http_server(&served.url()))]);
    let job = rt.new_job(JobSpec::labelled("cancel")).unwrap();
    let files = job.server("files").unwrap();
    let target = root.join("big.bin").to_string_lossy().into_owned();
    let call = files.call(
        "FA_download_file",
        json!({"file_url": url, "file_name": target, "timeout": 600}),
    );
    // The caller stops waiting after 3 s: the call's future is dropped mid-task.
    let abandoned = tokio::time::timeout(Duration::from_secs(3), call).await;
    assert!(
        abandoned.is_err(),
        "the download cannot finish: {abandoned:?}"
    );
    assert_eq!(connection(&rt, "files").await.tasks_followed(), 1);
    // tasks/cancel reached the tool: its connection to the web server is closed.
    let closed =
        tokio::task::spawn_blocking(move || closed_rx.recv_timeout(Duration::from_secs(20)))
            .await
            .unwrap();
    assert!(closed.is_ok(), "the download was never stopped");
    rt.shutdown().await;
}
