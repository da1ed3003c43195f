//! What `/metrics` costs a tools/call: the same trivial call through the HTTP router with the
//! metrics off and on, in alternating rounds, in-process (no sockets, so the figure is the
//! server's own work). Prints the median per call of each and their ratio.
//! OpenTelemetry is on for the whole run when OTEL_EXPORTER_OTLP_ENDPOINT is set (as in
//! `maljan`: a server span and a histogram observation per call, batch-exported over OTLP), so
//! its cost is the difference between a run with it and one without.
//!
//!     cargo run --release -p maljan-server --example telemetry_cost [ROUNDS] [CALLS_PER_ROUND]

use std::{sync::Arc, time::Instant};

use axum::{body::Body, http::Request};
use http_body_util::BodyExt;
use maljan_server::{HttpOptions, Metrics, Registry, ToolError, ToolMeta, ToolServer};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tower::ServiceExt;

#[derive(Deserialize, JsonSchema)]
struct Echo {
    text: String,
}

fn server() -> Arc<ToolServer> {
    let mut r = Registry::new();
    r.add(
        ToolMeta::new("echo", "Returns its text"),
        |_ctx, a: Echo| async move { Ok::<_, ToolError>(a.text) },
    );
    ToolServer::new("bench", "1", r)
}

fn call() -> Request<Body> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "hello"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}}})
    .to_string();
    Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .body(Body::from(body))
        .unwrap()
}

async fn round(router: &axum::Router, calls: usize) -> f64 {
    let started = Instant::now();
    for _ in 0..calls {
        let answer = router.clone().oneshot(call()).await.unwrap();
        assert!(answer.status().is_success());
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        assert!(body.windows(5).any(|w| w == b"hello"));
    }
    started.elapsed().as_secs_f64() * 1e6 / calls as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(21);
    let calls: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(500);
    let otel = maljan_telemetry::init_from_env("telemetry-cost").unwrap();
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        let subscriber = tracing_subscriber::registry().with(maljan_telemetry::layer());
        tracing::subscriber::set_global_default(subscriber).unwrap();
    }
    let mut options = HttpOptions::new(([127, 0, 0, 1], 0).into());
    options.json_response = true;
    let off = maljan_server::router(server(), &options, Default::default());
    options.metrics = Some(Metrics::new());
    let on = maljan_server::router(server(), &options, Default::default());
    // Warm both.
    round(&off, calls).await;
    round(&on, calls).await;
    let (mut t_off, mut t_on) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        t_off.push(round(&off, calls).await);
        t_on.push(round(&on, calls).await);
    }
    let (m_off, m_on) = (median(t_off), median(t_on));
    println!(
        "tools/call in-process, {rounds} rounds x {calls} calls, OpenTelemetry {}: metrics off {m_off:.1} us, on {m_on:.1} us, on/off {:.3}",
        if otel { "on" } else { "off" },
        m_on / m_off
    );
    maljan_telemetry::shutdown();
}
