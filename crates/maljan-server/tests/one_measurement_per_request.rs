//! Issue 41 item 6: each request a server answers is measured once, and that one record fills
//! both exports: the duration `/metrics` shows for it (Prometheus) is, to the last bit, the one
//! the OTLP collector receives (OpenTelemetry), for tools/list and for tools/call alike. The
//! collector is the stand-in that decodes with opentelemetry-proto (tests/peers/otlp_collector.py).

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command},
    sync::Arc,
    time::Duration,
};

use axum::{body::Body, http::Request};
use http_body_util::BodyExt;
use maljan_server::{HttpOptions, Metrics};
use serde_json::{Value, json};
use tower::ServiceExt;

struct Collector(Child);

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The OTLP collector stand-in on a free port, writing what it receives to `out`.
fn collector(out: &Path) -> (Collector, u16) {
    let py = std::env::var("MALJAN_PY").ok().filter(|p| !p.is_empty()).expect(
        "MALJAN_PY is not set: run `source <(scripts/peers.sh)` (it installs opentelemetry-proto into the peers' venv once)",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/otlp_collector.py");
    let child = Command::new(py)
        .arg(script)
        .args(["--port", &port.to_string(), "--out"])
        .arg(out)
        .spawn()
        .unwrap();
    let running = Collector(child);
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (running, port);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the OTLP collector did not start");
}

fn post(id: i64, method: &str, mut params: Value) -> Request<Body> {
    params["_meta"] = common::stateless_meta();
    let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut r = Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", common::STATELESS)
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        r = r.header("mcp-name", name);
    }
    r.body(Body::from(message.to_string())).unwrap()
}

async fn body_of(router: &axum::Router, request: Request<Body>) -> String {
    let answer = router.clone().oneshot(request).await.unwrap();
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

/// The `_sum` of the duration histogram in the OpenMetrics text for these labels.
fn prometheus_sum(text: &str, method: &str, tool: &str) -> f64 {
    let prefix = format!(
        "mcp_server_operation_duration_seconds_sum{{mcp_method_name=\"{method}\",gen_ai_tool_name=\"{tool}\",error_type=\"\"}} "
    );
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"));
    line.trim().parse().unwrap()
}

/// (method, tool, count, sum) of every `mcp.server.operation.duration` point in the latest export.
fn otel_points(out: &Path) -> Vec<(String, String, u64, f64)> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let mut latest = Vec::new();
    for line in text.lines() {
        let rec: Value = serde_json::from_str(line).unwrap();
        if rec["signal"] != "metrics" {
            continue;
        }
        let mut points = Vec::new();
        let metrics = rec["body"]["resourceMetrics"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|rm| rm["scopeMetrics"].as_array().into_iter().flatten())
            .flat_map(|sm| sm["metrics"].as_array().into_iter().flatten());
        for m in metrics.filter(|m| m["name"] == "mcp.server.operation.duration") {
            for p in m["histogram"]["dataPoints"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let attr = |k: &str| {
                    p["attributes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|a| a["key"] == k)
                        .and_then(|a| a["value"]["stringValue"].as_str())
                        .unwrap_or("")
                        .to_string()
                };
                let count = match &p["count"] {
                    Value::String(s) => s.parse().unwrap(),
                    v => v.as_u64().unwrap_or(0),
                };
                points.push((
                    attr("mcp.method.name"),
                    attr("gen_ai.tool.name"),
                    count,
                    p["sum"].as_f64().unwrap_or(f64::NAN),
                ));
            }
        }
        if !points.is_empty() {
            latest = points;
        }
    }
    latest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prometheus_and_the_otel_duration_of_a_request_are_one_measurement() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("otlp.jsonl");
    let (_collector, port) = collector(&out);
    // Export on for this test process only (its own binary): set before the pipeline starts.
    unsafe {
        std::env::set_var(
            maljan_telemetry::ENDPOINT_VAR,
            format!("http://127.0.0.1:{port}"),
        );
        std::env::set_var("OTEL_METRIC_EXPORT_INTERVAL", "60000");
    }
    assert!(maljan_telemetry::init_from_env("one-measurement").unwrap());

    let server = common::server(Arc::new(common::Probe::default()));
    let mut options = HttpOptions::new(([127, 0, 0, 1], 0).into());
    options.metrics = Some(Metrics::new());
    let router = maljan_server::router(server, &options, Default::default());
    body_of(&router, post(1, "tools/list", json!({}))).await;
    for id in 2..5 {
        let answer = body_of(
            &router,
            post(
                id,
                "tools/call",
                json!({"name": "add", "arguments": {"a": 20, "b": 22}}),
            ),
        )
        .await;
        assert!(answer.contains("42"), "{answer}");
    }
    let metrics = Request::get("/metrics")
        .header("host", "127.0.0.1")
        .body(Body::empty())
        .unwrap();
    let text = body_of(&router, metrics).await;
    // Everything recorded so far goes to the collector now.
    tokio::task::spawn_blocking(maljan_telemetry::shutdown)
        .await
        .unwrap();

    let mut points = Vec::new();
    for _ in 0..100 {
        points = otel_points(&out);
        if points.iter().any(|p| p.0 == "tools/call") && points.iter().any(|p| p.0 == "tools/list")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let point = |method: &str, tool: &str| {
        points
            .iter()
            .find(|p| p.0 == method && p.1 == tool)
            .unwrap_or_else(|| panic!("no OTel point for {method} {tool}: {points:?}"))
            .clone()
    };
    let call = point("tools/call", "add");
    assert_eq!(call.2, 3, "three calls in OTel");
    assert!(call.3 > 0.0);
    assert_eq!(
        call.3,
        prometheus_sum(&text, "tools/call", "add"),
        "the same three measurements in both exports"
    );
    let list = point("tools/list", "");
    assert_eq!(list.2, 1);
    assert_eq!(list.3, prometheus_sum(&text, "tools/list", ""));
}
