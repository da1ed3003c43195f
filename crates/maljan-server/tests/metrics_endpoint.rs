//! `/metrics` on the HTTP listener (opt-in): after tools/list, a good call, a tool error and a
//! call to a tool the server does not have, Prometheus's own Python parser reads the OpenMetrics
//! text, and it has the MCP semantic conventions' `mcp_server_operation_duration_seconds`
//! histogram by method, tool and error type, calls and errors by code; no argument, result or
//! unknown tool name appears anywhere in it. Without the option there is no `/metrics`.

mod common;

use std::{process::Command, sync::Arc};

use axum::{body::Body, http::Request};
use http_body_util::BodyExt;
use maljan_server::{HttpOptions, Metrics};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn send(router: &axum::Router, request: Request<Body>) -> (u16, String) {
    let answer = router.clone().oneshot(request).await.unwrap();
    let status = answer.status().as_u16();
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A stateless (2026-07-28) request: no session to set up.
fn post(id: i64, method: &str, mut params: Value) -> Request<Body> {
    params["_meta"] = common::stateless_meta();
    let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let body = message.to_string();
    let mut r = Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", common::STATELESS)
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        r = r.header("mcp-name", name);
    }
    r.body(Body::from(body)).unwrap()
}

fn get_metrics() -> Request<Body> {
    Request::get("/metrics")
        .header("host", "127.0.0.1")
        .body(Body::empty())
        .unwrap()
}

/// Prometheus's Python client parses the text (strictly: OpenMetrics) into
/// [{name, type, samples: [{name, labels, value}]}].
fn parse(text: &str) -> Vec<Value> {
    let py = std::env::var("MALJAN_PY").ok().filter(|p| !p.is_empty()).expect(
        "MALJAN_PY is not set: run `source <(scripts/peers.sh)` (it installs prometheus-client into the peers' venv once)",
    );
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "samples": [
        {"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]})
print(json.dumps(out))
"#;
    let mut child = Command::new(py)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sample<'a>(families: &'a [Value], name: &str, labels: &[(&str, &str)]) -> Option<&'a Value> {
    families
        .iter()
        .flat_map(|f| f["samples"].as_array().unwrap())
        .find(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][*k] == *v))
}

#[tokio::test]
async fn metrics_count_calls_and_errors_and_hold_no_argument() {
    let server = common::server(Arc::new(common::Probe::default()));
    let mut options = HttpOptions::new(([127, 0, 0, 1], 0).into());
    options.metrics = Some(Metrics::new());
    let router = maljan_server::router(server, &options, Default::default());

    let (status, _) = send(&router, post(1, "tools/list", json!({}))).await;
    assert_eq!(status, 200);
    for id in 2..4 {
        let (status, body) = send(
            &router,
            post(
                id,
                "tools/call",
                json!({"name": "add", "arguments": {"a": 424242, "b": 1}}),
            ),
        )
        .await;
        assert!(status == 200 && body.contains("424243"), "{status} {body}");
    }
    let (_, body) = send(
        &router,
        post(4, "tools/call", json!({"name": "missing", "arguments": {}})),
    )
    .await;
    assert!(body.contains("no_such_file"), "{body}");
    let (_, body) = send(
        &router,
        post(
            5,
            "tools/call",
            json!({"name": "exfiltrate_hunter2", "arguments": {"k": "hunter2"}}),
        ),
    )
    .await;
    assert!(body.contains("unknown tool"), "{body}");

    let answer = router.clone().oneshot(get_metrics()).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(
        answer.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
    );
    let text = String::from_utf8(
        answer
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    for leak in ["424242", "424243", "hunter2", "exfiltrate"] {
        assert!(!text.contains(leak), "{leak} in /metrics:\n{text}");
    }
    let families = parse(&text);
    let duration = families
        .iter()
        .find(|f| f["name"] == "mcp_server_operation_duration_seconds")
        .unwrap_or_else(|| panic!("no duration histogram in {families:?}"));
    assert_eq!(duration["type"], "histogram");
    let count = |labels: &[(&str, &str)]| {
        sample(
            &families,
            "mcp_server_operation_duration_seconds_count",
            labels,
        )
        .map(|s| s["value"].as_f64().unwrap())
    };
    assert_eq!(
        count(&[
            ("mcp_method_name", "tools/call"),
            ("gen_ai_tool_name", "add"),
            ("error_type", "")
        ]),
        Some(2.0)
    );
    assert_eq!(
        count(&[
            ("mcp_method_name", "tools/call"),
            ("gen_ai_tool_name", "missing"),
            ("error_type", "tool_error")
        ]),
        Some(1.0)
    );
    assert_eq!(
        count(&[
            ("mcp_method_name", "tools/call"),
            ("gen_ai_tool_name", "_unknown"),
            ("error_type", "-32602")
        ]),
        Some(1.0)
    );
    assert_eq!(count(&[("mcp_method_name", "tools/list")]), Some(1.0));
    let inf = sample(
        &families,
        "mcp_server_operation_duration_seconds_bucket",
        &[("gen_ai_tool_name", "add"), ("le", "+Inf")],
    )
    .unwrap();
    assert_eq!(inf["value"], 2.0);
    let calls = sample(
        &families,
        "maljan_tool_calls_total",
        &[("gen_ai_tool_name", "add")],
    )
    .unwrap();
    assert_eq!(calls["value"], 2.0);
    let errors = sample(
        &families,
        "maljan_tool_errors_total",
        &[
            ("gen_ai_tool_name", "missing"),
            ("error_code", "no_such_file"),
        ],
    )
    .unwrap();
    assert_eq!(errors["value"], 1.0);

    // Opt-in: without it, no such route.
    let server = common::server(Arc::new(common::Probe::default()));
    let plain = maljan_server::router(
        server,
        &HttpOptions::new(([127, 0, 0, 1], 0).into()),
        Default::default(),
    );
    let (status, _) = send(&plain, get_metrics()).await;
    assert_eq!(status, 404);
}
