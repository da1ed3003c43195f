//! Issue 41 item 6: each tools/call the runtime sends is measured once, by its transport, and
//! that one record fills every place the call's duration is shown: the runtime's Prometheus
//! histogram (`maljan_runtime_call_duration_seconds`), OpenTelemetry's
//! `mcp.client.operation.duration` as the OTLP collector receives it, and the ledger's row. The
//! collector is the stand-in that decodes with opentelemetry-proto
//! (tests/peers/otlp_collector.py).

mod common;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use maljan_client::JobSpec;
use serde_json::{Value, json};

/// The OTLP collector stand-in on a free port, writing what it receives to `out`.
fn collector(out: &Path) -> (common::Peer, u16) {
    let py = maljan_testkit::peer_env("MALJAN_PY");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/otlp_collector.py");
    let child = std::process::Command::new(py)
        .arg(script)
        .args(["--port", &port.to_string(), "--out"])
        .arg(out)
        .spawn()
        .unwrap();
    let running = common::Peer(child);
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (running, port);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the OTLP collector did not start");
}

/// (count, sum) of the latest `mcp.client.operation.duration` point for tools/call `tool`.
fn otel_point(out: &Path, tool: &str) -> Option<(u64, f64)> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let mut latest = None;
    for line in text.lines() {
        let rec: Value = serde_json::from_str(line).unwrap();
        let metrics = rec["body"]["resourceMetrics"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|rm| rm["scopeMetrics"].as_array().into_iter().flatten())
            .flat_map(|sm| sm["metrics"].as_array().into_iter().flatten());
        for m in metrics.filter(|m| m["name"] == "mcp.client.operation.duration") {
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
                        .map(str::to_string)
                };
                if attr("mcp.method.name").as_deref() == Some("tools/call")
                    && attr("gen_ai.tool.name").as_deref() == Some(tool)
                {
                    let count = match &p["count"] {
                        Value::String(s) => s.parse().unwrap(),
                        v => v.as_u64().unwrap_or(0),
                    };
                    latest = Some((count, p["sum"].as_f64().unwrap()));
                }
            }
        }
    }
    latest
}

fn prometheus_value(text: &str, sample: &str) -> f64 {
    let prefix = format!("{sample}{{server=\"fx\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_s_prometheus_otel_and_ledger_durations_are_one_measurement() {
    let s = common::Scratch::new();
    let out = s.dir.path().join("otlp.jsonl");
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

    let rt = s.runtime(
        vec![("fx", s.fixture("fixture-echo", &[]))],
        maljan_client::BreakerConfig::default(),
    );
    let job = rt.new_job(JobSpec::labelled("one measurement")).unwrap();
    let fx = job.server("fx").unwrap();
    let mut ledgered = Vec::new();
    for word in ["one", "two"] {
        let rec = fx.call("echo", json!({"message": word})).await;
        assert!(rec.ok, "{:?}", rec.error);
        ledgered.push(rec.duration_ms);
    }
    let text = rt.metrics().render([]);
    tokio::task::spawn_blocking(maljan_telemetry::shutdown)
        .await
        .unwrap();
    let mut point = None;
    for _ in 0..100 {
        point = otel_point(&out, "echo");
        if point.is_some_and(|p| p.0 == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (count, otel_sum) = point.expect("the collector got the calls' durations");
    assert_eq!(count, 2);
    assert_eq!(
        prometheus_value(&text, "maljan_runtime_call_duration_seconds_count"),
        2.0
    );
    let prometheus_sum = prometheus_value(&text, "maljan_runtime_call_duration_seconds_sum");
    assert!(prometheus_sum > 0.0);
    assert_eq!(
        prometheus_sum, otel_sum,
        "both exports are filled from the same two measurements"
    );
    // The ledger keeps each call's duration in milliseconds, from the same record.
    let ledger_sum: f64 = ledgered.iter().sum::<f64>() / 1000.0;
    assert!(
        (ledger_sum - otel_sum).abs() < 1e-12,
        "ledger {ledger_sum} s, exports {otel_sum} s"
    );
    rt.shutdown().await;
}
