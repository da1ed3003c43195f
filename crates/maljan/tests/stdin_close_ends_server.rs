//! A stdio server whose client goes away (stdin closed) mid-call stops within about a second:
//! the call still running is cancelled, not waited for.

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::maljan;

#[test]
fn closing_stdin_mid_call_ends_the_server_within_a_second_or_so() {
    // A web server that accepts and never answers: the download waits on it for a minute.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/never", silent.local_addr().unwrap());
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(maljan())
        .args(["serve", "files", "--allow-loopback-downloads", "--root"])
        .arg(root.path())
        .env("MALJAN_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let call = serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
        "name":"FA_download_file","arguments":{"file_url":url,"file_name":"x.bin","timeout":60}}});
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":1"#), "{line}");
    writeln!(stdin, "{call}").unwrap();
    // The request has reached the silent server: the call is under way.
    let (_connection, _) = silent.accept().unwrap();
    let closed = Instant::now();
    drop(stdin);
    let deadline = closed + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = closed.elapsed();
    assert!(status.success(), "{status}");
    // A second for the call still running, and a little for the process to end: not the
    // minute the download would have waited, nor rmcp's own 5 s drain.
    assert!(
        took < Duration::from_millis(2500),
        "exited {took:?} after stdin closed"
    );
}
