//! A `maljan serve files` child spoken to over stdio, one JSON-RPC line at a time: calls may
//! overlap (`send` then `wait`), as a real client's do.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    process::{ChildStdin, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::{Value, json};

use super::{Running, maljan};

pub struct Session {
    _child: Running,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    answered: HashMap<u64, Value>,
    next: u64,
}

/// A tool call's answer: its JSON and whether it is an error.
pub struct Answer {
    pub value: Value,
    pub is_error: bool,
}

impl Session {
    /// Starts `maljan serve files ARGS` with `envs` and initializes the session.
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> Session {
        let mut cmd = Command::new(maljan());
        cmd.args(["serve", "files"]).args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn maljan serve files");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let mut s = Session {
            _child: Running(child),
            stdin,
            lines,
            answered: HashMap::new(),
            next: 1,
        };
        let id = s.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
        s.response(id);
        s.write(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn write(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write to the server");
        self.stdin.flush().unwrap();
    }

    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        self.write(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The response to request `id` (its `result`, or the whole message for an error).
    pub fn response(&mut self, id: u64) -> Value {
        loop {
            if let Some(v) = self.answered.remove(&id) {
                return v;
            }
            let v = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no answer to request {id}"));
            if let Some(got) = v.get("id").and_then(Value::as_u64) {
                let answer = v.get("result").cloned().unwrap_or(v);
                self.answered.insert(got, answer);
            }
        }
    }

    pub fn send(&mut self, tool: &str, args: Value) -> u64 {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }

    pub fn wait(&mut self, id: u64) -> Answer {
        let result = self.response(id);
        if result.get("content").is_none() {
            // A JSON-RPC error (an unknown tool): no tool result at all.
            return Answer {
                value: result,
                is_error: true,
            };
        }
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        Answer {
            value: serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into())),
            is_error: result["isError"] == true,
        }
    }

    pub fn call(&mut self, tool: &str, args: Value) -> Answer {
        let id = self.send(tool, args);
        self.wait(id)
    }

    /// A call that must succeed: its JSON.
    pub fn ok(&mut self, tool: &str, args: Value) -> Value {
        let a = self.call(tool, args);
        assert!(!a.is_error, "{tool} failed: {}", a.value);
        a.value
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let id = self.request("tools/list", json!({}));
        let list = self.response(id);
        list["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }
}
