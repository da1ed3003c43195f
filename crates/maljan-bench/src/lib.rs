//! Benchmark tooling for maljan: a raw JSON-RPC driver that speaks newline-delimited MCP to any
//! stdio server, so maljan and the servers it is compared with are measured by the same client,
//! and a null server that answers at once (the driver's own floor).
//!
//! It depends on nothing of maljan's: what it measures must not share code with what it measures.

use std::{
    io::{BufRead, BufReader, BufWriter, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

/// A stdio MCP server under measurement.
pub struct Driver {
    child: Child,
    tx: BufWriter<ChildStdin>,
    rx: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl Driver {
    /// Starts the server and completes the handshake; returns the driver and the time from spawn
    /// to the initialize reply (cold start).
    pub fn start(argv: &[String]) -> anyhow::Result<(Self, Duration)> {
        let started = Instant::now();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let tx = BufWriter::new(child.stdin.take().unwrap());
        let rx = BufReader::new(child.stdout.take().unwrap());
        let mut d = Self {
            child,
            tx,
            rx,
            next_id: 0,
            line: String::new(),
        };
        d.request("initialize", json!({"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}))?;
        let cold = started.elapsed();
        d.notify("notifications/initialized")?;
        Ok((d, cold))
    }

    pub fn notify(&mut self, method: &str) -> anyhow::Result<()> {
        writeln!(self.tx, "{}", json!({"jsonrpc":"2.0","method":method}))?;
        self.tx.flush()?;
        Ok(())
    }

    /// Sends one request and waits for its response (notifications in between are skipped).
    pub fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        writeln!(
            self.tx,
            "{}",
            json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})
        )?;
        self.tx.flush()?;
        loop {
            self.line.clear();
            if self.rx.read_line(&mut self.line)? == 0 {
                anyhow::bail!("the server closed stdout");
            }
            let v: Value = serde_json::from_str(&self.line)?;
            if v.get("id") == Some(&json!(id)) {
                if let Some(err) = v.get("error") {
                    anyhow::bail!("{method} failed: {err}");
                }
                return Ok(v);
            }
        }
    }

    pub fn call(&mut self, tool: &str, args: Value) -> anyhow::Result<Value> {
        let v = self.request("tools/call", json!({"name": tool, "arguments": args}))?;
        if v["result"]["isError"] == true {
            anyhow::bail!("{tool} returned an error: {}", v["result"]["content"]);
        }
        Ok(v)
    }

    /// Resident set size of the server process, in KiB (Linux).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }

    /// Times `n` sequential runs of `f`; returns the sorted durations.
    pub fn time_n(
        &mut self,
        n: usize,
        mut f: impl FnMut(&mut Self) -> anyhow::Result<()>,
    ) -> anyhow::Result<Vec<Duration>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            f(self)?;
            out.push(t.elapsed());
        }
        out.sort();
        Ok(out)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

pub fn p99(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

/// The value after `name` on the command line (`--calls 100`).
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// A duration as the bench tables show it: µs below a millisecond, ms above.
pub fn shown(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}
