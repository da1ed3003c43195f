//! The cheapest possible stdio MCP server: it answers every request at once with a fixed result.
//! The driver's time against it is the floor no real server can go under.
//!
//! `--work-us N` makes it spin N µs of CPU before answering each tools/call: a server that works
//! as long as a real tool does, to tell the cost of the work from the cost of waking the client
//! after it (bench/serve_bench.md).

use std::{
    io::{BufRead, Write},
    time::{Duration, Instant},
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let work = args
        .iter()
        .position(|a| a == "--work-us")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<u64>().ok())
        .map(Duration::from_micros)
        .unwrap_or_default();
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id") else { continue };
        let result = match msg["method"].as_str() {
            Some("initialize") => {
                serde_json::json!({"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"null","version":"0"}})
            }
            Some("tools/list") => {
                serde_json::json!({"tools":[{"name":"noop","inputSchema":{"type":"object"}}]})
            }
            Some("tools/call") => {
                let start = Instant::now();
                while start.elapsed() < work {
                    std::hint::spin_loop();
                }
                serde_json::json!({"content":[{"type":"text","text":"ok"}],"isError":false})
            }
            _ => serde_json::json!({}),
        };
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({"jsonrpc":"2.0","id":id,"result":result})
        );
        let _ = out.flush();
    }
}
