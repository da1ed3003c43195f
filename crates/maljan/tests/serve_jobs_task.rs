//! `maljan serve jobs`' analyze_sample as a task (the MCP tasks extension,
//! `io.modelcontextprotocol/tasks`): a host that declares the extension gets a task handle at
//! once and polls `tasks/get` to the inlined result — the verdict with its evidence and the job
//! id — over stdio, spoken line by line as any client would (the Python SDK has no client for
//! the extension yet).

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    time::Duration,
};

use common::*;
use serde_json::{Value, json};

const EICAR: &[u8] = br"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";
const TASKS: &str = "io.modelcontextprotocol/tasks";

struct Peer {
    _child: Running,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
    next_id: u64,
}

impl Peer {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        loop {
            let msg = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            // Notifications (progress, logging) pass by; the answer has our id.
            if msg["id"] == id {
                return msg;
            }
        }
    }
}

#[test]
fn analyze_sample_declared_as_a_task_is_polled_to_its_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("evidence"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("eicar.com"), EICAR).unwrap();
    let mut child = Command::new(maljan())
        .args(["serve", "jobs", "--root", root.to_str().unwrap()])
        .env("MALJAN_HOME", &home)
        .env_remove("MALJAN_CONFIG")
        .env_remove("MALJAN_DATABASE_URL")
        .env("MALJAN_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut peer = Peer {
        _child: Running(child),
        stdin,
        lines,
        next_id: 0,
    };
    let init = peer.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "task-host", "version": "1"}}),
    );
    assert!(
        init["result"]["capabilities"]["extensions"][TASKS].is_object(),
        "the jobs server offers tasks: {init}"
    );
    writeln!(
        peer.stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let declaring =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
    let created = peer.request(
        "tools/call",
        json!({"name": "analyze_sample", "_meta": declaring,
               "arguments": {"path": root.join("eicar.com"), "agent": false}}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_string();
    let mut done = Value::Null;
    for _ in 0..600 {
        let got = peer.request("tasks/get", json!({"taskId": task_id, "_meta": declaring}));
        let status = got["result"]["status"].as_str().unwrap_or_default();
        if ["completed", "failed", "cancelled"].contains(&status) {
            done = got["result"].clone();
            break;
        }
        assert_eq!(status, "working", "{got}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(done["status"], "completed", "{done}");
    let outcome = &done["result"]["structuredContent"];
    assert!(
        outcome["job_id"].as_str().unwrap().starts_with("job-"),
        "{done}"
    );
    assert!(
        ["malicious", "suspicious"].contains(&outcome["verdict"]["verdict"].as_str().unwrap()),
        "{outcome}"
    );
    assert!(
        !outcome["evidence"].as_array().unwrap().is_empty(),
        "{outcome}"
    );
}
