//! A pipeline whose server is killed (SIGKILL) halfway through resumes from its last finished
//! task: `maljan serve files --state-dir S` over stdio, driven by JSON-RPC lines as an MCP
//! client sends them. Task `b` downloads from a local server that holds the first request open,
//! so the kill lands while `b` runs and after `a` has finished.

mod common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpListener,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::Duration,
};

use common::*;
use serde_json::{Value, json};

struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<ChildStdout>>,
    next: i64,
}

impl Client {
    fn start(root: &str, state: &str) -> Self {
        let mut child = Command::new(maljan())
            .args([
                "serve",
                "files",
                "--root",
                root,
                "--state-dir",
                state,
                "--allow-loopback-downloads",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut client = Self {
            child,
            stdin,
            lines,
            next: 1,
        };
        let init = client.send("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
        client.answer(init);
        writeln!(
            client.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        client
    }

    fn send(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next;
        self.next += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        self.stdin.flush().unwrap();
        id
    }

    fn answer(&mut self, id: i64) -> Value {
        loop {
            let line = self
                .lines
                .next()
                .expect("the server closed stdout")
                .unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Calls a tool and returns its structured result (panics on a tool error).
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let id = self.send("tools/call", json!({"name": tool, "arguments": args}));
        let v = self.answer(id);
        let result = &v["result"];
        assert_ne!(result["isError"], true, "{tool}: {v}");
        match &result["structuredContent"] {
            Value::Null => {
                serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
            }
            structured => structured.clone(),
        }
    }
}

/// Serves `ok` over HTTP, except that while `hold` is set a request is read and never answered.
fn http_server(hold: Arc<AtomicBool>, arrived: mpsc::Sender<()>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            if hold.load(Ordering::SeqCst) {
                let _ = arrived.send(());
                held.push(stream);
                continue;
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

#[test]
fn a_pipeline_killed_halfway_resumes_from_its_last_finished_task() {
    let scratch = scratch_root();
    let root = scratch.path().canonicalize().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (r, s) = (
        root.to_str().unwrap().to_string(),
        state.path().to_str().unwrap().to_string(),
    );
    std::fs::write(root.join("src.txt"), b"source").unwrap();
    let hold = Arc::new(AtomicBool::new(true));
    let (arrived_tx, arrived) = mpsc::channel();
    let port = http_server(hold.clone(), arrived_tx);
    let p = |name: &str| root.join(name).to_string_lossy().into_owned();
    let definition = json!({
        "schema_version": 1,
        "name": "nightly",
        "tasks": {
            "a": {"action": ["FA_copy_file", {"file_path": p("src.txt"), "target_path": p("a.txt")}]},
            "b": {"action": ["FA_download_file", {"file_url": format!("http://127.0.0.1:{port}/data"), "file_name": p("b.txt")}], "depends_on": ["a"]},
            "c": {"action": ["FA_copy_file", {"file_path": p("b.txt"), "target_path": p("c.txt")}], "depends_on": ["b"]}
        }
    });

    let mut first = Client::start(&r, &s);
    first.send(
        "tools/call",
        json!({"name": "FA_pipeline_run", "arguments": {"definition": definition}}),
    );
    arrived
        .recv_timeout(Duration::from_secs(60))
        .expect("task b reached the HTTP server");
    // SIGKILL: no chance to record anything more.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(root.join("a.txt").exists(), "task a ran before the kill");
    std::fs::remove_file(root.join("a.txt")).unwrap();

    hold.store(false, Ordering::SeqCst);
    let mut second = Client::start(&r, &s);
    let history = second.call("FA_pipeline_history", json!({"pipeline": "nightly"}));
    let runs = history.as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 1, "{history}");
    let before = &runs[0];
    assert_eq!(before["status"], "running", "{before}");
    assert_eq!(before["tasks"]["a"]["status"], "succeeded", "{before}");
    assert_eq!(before["tasks"]["b"]["status"], "running", "{before}");
    assert_eq!(before["tasks"]["c"]["status"], "pending", "{before}");
    let run_id = before["run_id"].as_str().unwrap().to_string();

    let after = second.call(
        "FA_pipeline_resume",
        json!({"run_id": run_id, "definition": definition}),
    );
    assert_eq!(after["status"], "succeeded", "{after}");
    for task in ["a", "b", "c"] {
        assert_eq!(
            after["tasks"][task]["status"], "succeeded",
            "{task}: {after}"
        );
    }
    // a was kept, not run again: its record is the one from before the kill, and the file it
    // wrote (removed since) was not written again.
    assert_eq!(
        after["tasks"]["a"]["finished_at"],
        before["tasks"]["a"]["finished_at"]
    );
    assert!(!root.join("a.txt").exists(), "task a ran again");
    assert_eq!(std::fs::read(root.join("c.txt")).unwrap(), b"ok");
    let status = second.call("FA_pipeline_status", json!({"run_id": run_id}));
    assert_eq!(status["status"], "succeeded", "{status}");
}
