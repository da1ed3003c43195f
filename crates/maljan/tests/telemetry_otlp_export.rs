//! Issue 25 item 4: with OTEL_EXPORTER_OTLP_ENDPOINT set, the runtime (`maljan call`) and the tool
//! server (`maljan serve files --http`) export spans and metrics over OTLP/HTTP following the MCP
//! semantic conventions, the server's span continuing the client's trace (`traceparent` in
//! `_meta`), and no argument value anywhere in what they send. FA_tracing_init restarts the
//! server's export under the service name it is given. The collector is a stand-in that decodes
//! with opentelemetry-proto (tests/peers/otlp_collector.py).

mod common;

use std::{process::Command, time::Duration};

use common::*;
use serde_json::{Value, json};

/// Everything the collector recorded so far, one JSON value per export request.
fn received(out: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// (service.name, span name, kind, traceId, attributes as key -> value) of every span.
fn spans(all: &[Value]) -> Vec<(String, String, String, String, Value)> {
    let mut out = Vec::new();
    for rec in all.iter().filter(|r| r["signal"] == "traces") {
        for rs in rec["body"]["resourceSpans"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let service = attr(&rs["resource"]["attributes"], "service.name");
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    let mut attrs = serde_json::Map::new();
                    for a in s["attributes"].as_array().into_iter().flatten() {
                        attrs.insert(
                            a["key"].as_str().unwrap().into(),
                            a["value"]["stringValue"].clone(),
                        );
                    }
                    out.push((
                        service.clone(),
                        s["name"].as_str().unwrap_or("").into(),
                        s["kind"].as_str().unwrap_or("").into(),
                        s["traceId"].as_str().unwrap_or("").into(),
                        Value::Object(attrs),
                    ));
                }
            }
        }
    }
    out
}

fn attr(attrs: &Value, key: &str) -> String {
    attrs
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["key"] == key)
        .and_then(|a| a["value"]["stringValue"].as_str())
        .unwrap_or("")
        .to_string()
}

/// (service.name, metric name) of every metric.
fn metrics(all: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for rec in all.iter().filter(|r| r["signal"] == "metrics") {
        for rm in rec["body"]["resourceMetrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let service = attr(&rm["resource"]["attributes"], "service.name");
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten() {
                    out.push((service.clone(), m["name"].as_str().unwrap_or("").into()));
                }
            }
        }
    }
    out
}

/// Waits (bounded) until `done` holds for what the collector has, and returns it.
fn wait_for(out: &std::path::Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..200 {
        let all = received(out);
        if done(&all) {
            return all;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let all = received(out);
    panic!(
        "the collector never got what was expected; spans {:?}, metrics {:?}",
        spans(&all),
        metrics(&all)
    );
}

#[test]
fn spans_and_metrics_reach_the_collector_without_arguments() {
    let root = scratch_root();
    let canary = "leak-canary-5e1f0c";
    let file = root.path().join(format!("{canary}.txt"));
    std::fs::write(&file, "a value that must not leak").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("otlp.jsonl");

    let collector_port = free_port();
    let _collector = spawn(
        Command::new(peer("MALJAN_PY"))
            .arg(repo_root().join("tests/peers/otlp_collector.py"))
            .args(["--port", &collector_port.to_string(), "--out"])
            .arg(&out),
    );
    wait_answering(collector_port);
    let endpoint = format!("http://127.0.0.1:{collector_port}");
    let otel = |cmd: &mut Command| {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env("OTEL_METRIC_EXPORT_INTERVAL", "200");
    };

    let port = free_port();
    let mut serve = Command::new(maljan());
    serve
        .args([
            "serve",
            "files",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--root",
        ])
        .arg(root.path())
        .env("OTEL_SERVICE_NAME", "files-under-test");
    otel(&mut serve);
    let _server = spawn(&mut serve);
    wait_answering(port);

    let config = scratch.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.fs]\ntransport = \"streamable-http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
        ),
    )
    .unwrap();
    let call = |tool: &str, args: Value| {
        let mut cmd = Command::new(maljan());
        cmd.args(["call", "fs", tool, "--json", "--args", &args.to_string()])
            .env("MALJAN_HOME", scratch.path().join("home"))
            .env("MALJAN_CONFIG", &config)
            .env("MALJAN_LOG", "warn");
        otel(&mut cmd);
        // A failed tool exits non-zero; the record on stdout says how it ended.
        let done = run(&mut cmd, Duration::from_secs(60));
        serde_json::from_slice::<Value>(&done.stdout)
            .unwrap_or_else(|e| panic!("not a call record ({e}): {}", text(&done)))
    };
    let record = call("FA_file_checksum", json!({"path": file}));
    assert_eq!(record["ok"], true, "{record}");

    let all = wait_for(&out, |all| {
        let s = spans(all);
        let m = metrics(all);
        let checksum = |kind: &str| {
            s.iter()
                .any(|x| x.2 == kind && x.1 == "tools/call FA_file_checksum")
        };
        checksum("SPAN_KIND_SERVER")
            && checksum("SPAN_KIND_CLIENT")
            && m.iter().any(|x| x.1 == "mcp.server.operation.duration")
            && m.iter().any(|x| x.1 == "mcp.client.operation.duration")
    });
    let s = spans(&all);
    let client = s
        .iter()
        .find(|x| x.2 == "SPAN_KIND_CLIENT" && x.1 == "tools/call FA_file_checksum")
        .unwrap_or_else(|| panic!("no client span: {s:?}"));
    let server = s
        .iter()
        .find(|x| x.2 == "SPAN_KIND_SERVER" && x.1 == "tools/call FA_file_checksum")
        .unwrap_or_else(|| panic!("no server span: {s:?}"));
    assert_eq!(client.0, "maljan");
    assert_eq!(server.0, "files-under-test");
    assert_eq!(
        client.3, server.3,
        "the server span is not in the client's trace"
    );
    for span in [client, server] {
        assert_eq!(span.4["mcp.method.name"], "tools/call");
        assert_eq!(span.4["gen_ai.tool.name"], "FA_file_checksum");
    }
    let raw = std::fs::read_to_string(&out).unwrap();
    assert!(
        !raw.contains(canary),
        "an argument value reached the collector"
    );
    assert!(!raw.contains("must not leak"));

    // A failed call: error.type on the span.
    let missing = call(
        "FA_file_checksum",
        json!({"path": root.path().join("gone.txt")}),
    );
    assert_eq!(missing["ok"], false);
    wait_for(&out, |all| {
        spans(all)
            .iter()
            .any(|x| x.2 == "SPAN_KIND_SERVER" && x.4["error.type"] == "tool_error")
    });

    // FA_tracing_init: a null exporter only; then export goes on under the new name.
    let refused = call("FA_tracing_init", json!({"exporter": {"kind": "console"}}));
    assert_eq!(refused["ok"], false);
    assert_eq!(refused["error"]["code"], "bad_argument", "{refused}");
    let init = call(
        "FA_tracing_init",
        json!({"service_name": "renamed-files", "resource_attributes": {"team": "ir"}}),
    );
    assert_eq!(init["ok"], true, "{init}");
    call("FA_file_checksum", json!({"path": file}));
    wait_for(&out, |all| {
        spans(all)
            .iter()
            .any(|x| x.0 == "renamed-files" && x.1 == "tools/call FA_file_checksum")
    });
    assert!(!std::fs::read_to_string(&out).unwrap().contains(canary));
}
