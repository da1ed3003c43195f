//! What a runtime's `/metrics` shows (opt-in: `maljan console --metrics`, `maljan worker
//! --metrics-listen ADDR`), in the OpenMetrics text format through Prometheus's own Rust client,
//! the same way a tool server's does (maljan-server's metrics):
//!
//! - `maljan_runtime_calls_total` by server, `maljan_runtime_call_errors_total` by server and
//!   maljan error code;
//! - `maljan_runtime_call_duration_seconds` by server: each call sent, from its one measurement
//!   (`maljan_telemetry::Measurement`, taken by the transport), the record OpenTelemetry's
//!   `mcp.client.operation.duration` and the ledger's duration come from too;
//! - `maljan_breaker_rests` by server (times its breaker has rested it), read at scrape time;
//! - `maljan_upload_bytes_total`: sample bytes handed to servers through put_sample;
//! - `maljan_queue_depth`: jobs waiting in the queue, when the front end has one.
//!
//! Labels hold only names from the operator's config and maljan's error codes: never an
//! argument, a result, a token or a URL.

use std::sync::atomic::AtomicI64;

use maljan_telemetry::Measurement;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerErrorLabel {
    server: String,
    error_code: String,
}

type DurationFamily = Family<ServerLabel, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(maljan_telemetry::BUCKETS)
}

/// One runtime's counters (the [`crate::Runtime`] owns them).
pub struct RuntimeMetrics {
    registry: Registry,
    calls: Family<ServerLabel, Counter>,
    durations: DurationFamily,
    errors: Family<ServerErrorLabel, Counter>,
    rests: Family<ServerLabel, Gauge>,
    upload_bytes: Counter,
    queue_depth: Gauge<i64, AtomicI64>,
}

impl std::fmt::Debug for RuntimeMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuntimeMetrics")
    }
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let calls = Family::<ServerLabel, Counter>::default();
        let durations = DurationFamily::new_with_constructor(histogram);
        let errors = Family::<ServerErrorLabel, Counter>::default();
        let rests = Family::<ServerLabel, Gauge>::default();
        let upload_bytes = Counter::default();
        let queue_depth = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "maljan_runtime_calls",
            "tools/call requests the runtime made, by server",
            calls.clone(),
        );
        registry.register_with_unit(
            "maljan_runtime_call_duration",
            "how long each tools/call the runtime sent took, by server (mcp.client.operation.duration)",
            Unit::Seconds,
            durations.clone(),
        );
        registry.register(
            "maljan_runtime_call_errors",
            "calls that ended in an error, by server and maljan error code",
            errors.clone(),
        );
        registry.register(
            "maljan_breaker_rests",
            "times a server's breaker has rested it since start",
            rests.clone(),
        );
        registry.register(
            "maljan_upload_bytes",
            "sample bytes handed to servers through put_sample",
            upload_bytes.clone(),
        );
        registry.register(
            "maljan_queue_depth",
            "jobs waiting in the queue",
            queue_depth.clone(),
        );
        Self {
            registry,
            calls,
            durations,
            errors,
            rests,
            upload_bytes,
            queue_depth,
        }
    }
}

impl RuntimeMetrics {
    /// One call to `server`, its error code if it failed, and its measurement when it was sent
    /// (a call refused before, by a resting breaker say, has none).
    pub fn call(&self, server: &str, error_code: Option<&str>, measured: Option<&Measurement>) {
        let label = ServerLabel {
            server: server.to_string(),
        };
        self.calls.get_or_create(&label).inc();
        if let Some(m) = measured {
            self.durations
                .get_or_create(&label)
                .observe(m.took.as_secs_f64());
        }
        if let Some(code) = error_code {
            self.errors
                .get_or_create(&ServerErrorLabel {
                    server: server.to_string(),
                    error_code: code.to_string(),
                })
                .inc();
        }
    }

    pub fn uploaded(&self, bytes: u64) {
        self.upload_bytes.inc_by(bytes);
    }

    pub fn set_queue_depth(&self, depth: i64) {
        self.queue_depth.set(depth);
    }

    /// The OpenMetrics text, with each server's breaker rests as of now.
    pub fn render<'a>(&self, rests: impl IntoIterator<Item = (&'a str, u32)>) -> String {
        for (server, n) in rests {
            self.rests
                .get_or_create(&ServerLabel {
                    server: server.to_string(),
                })
                .set(i64::from(n));
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The content type [`RuntimeMetrics::render`] answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_server_and_code() {
        let m = RuntimeMetrics::default();
        let measured = Measurement {
            side: maljan_telemetry::Side::Client,
            method: "tools/call",
            tool: Some("FA_file_checksum".into()),
            error_type: None,
            took: std::time::Duration::from_millis(250),
        };
        m.call("files", None, Some(&measured));
        m.call("files", Some("no_such_file"), None);
        m.uploaded(10);
        m.set_queue_depth(3);
        let text = m.render([("files", 2)]);
        assert!(
            text.contains("maljan_runtime_calls_total{server=\"files\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "maljan_runtime_call_errors_total{server=\"files\",error_code=\"no_such_file\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("maljan_breaker_rests{server=\"files\"} 2"),
            "{text}"
        );
        assert!(text.contains("maljan_upload_bytes_total 10"), "{text}");
        assert!(
            text.contains("maljan_runtime_call_duration_seconds_sum{server=\"files\"} 0.25"),
            "{text}"
        );
        assert!(
            text.contains("maljan_runtime_call_duration_seconds_count{server=\"files\"} 1"),
            "{text}"
        );
        assert!(text.contains("maljan_queue_depth 3"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
