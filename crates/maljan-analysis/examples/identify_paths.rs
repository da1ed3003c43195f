//! identify_file's side of bench/identify_bench.py: reads file paths, one a line, on stdin and
//! prints one JSON line per file with identify's kind, description, MIME type and details
//! (the same call the identify_file tool makes, on the file's bytes).

use std::io::{BufRead, Write};

fn main() {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let path = line.expect("a path on stdin");
        let record = match std::fs::read(&path) {
            Ok(bytes) => {
                let k = maljan_analysis::identify(&bytes);
                serde_json::json!({
                    "path": path, "kind": k.kind, "description": k.description,
                    "mime": k.mime, "details": k.details,
                })
            }
            Err(e) => serde_json::json!({"path": path, "error": e.to_string()}),
        };
        writeln!(out, "{record}").expect("stdout");
    }
}
