//! The cheapest possible stdio MCP server: it answers every request at once with a fixed result.
//! The driver's time against it is the floor no real server can go under.

use std::io::{BufRead, Write};

fn main() {
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
