//! What a server's `/metrics` shows (opt-in: `maljan serve … --http ADDR --metrics`), in the
//! OpenMetrics text format through Prometheus's own Rust client:
//!
//! - `mcp_server_operation_duration_seconds`: the MCP semantic conventions' histogram
//!   `mcp.server.operation.duration`, by `mcp_method_name`, `gen_ai_tool_name` and `error_type`
//!   (`tool_error` for a result with isError, the JSON-RPC code for a protocol error);
//! - `maljan_tool_calls_total` by tool, `maljan_tool_errors_total` by tool and maljan error code.
//!
//! Each request is measured once ([`maljan_telemetry::Measurement`]): the histogram here and
//! OpenTelemetry's `mcp.server.operation.duration` are filled from that one record.
//!
//! Labels hold only names the server itself defines: a tool name is one it registered (anything
//! else counts as `_unknown`, so a caller cannot grow the label set), an error code is one its
//! tools return. Never an argument, a result, a token or a query string.

use std::{sync::Arc, time::Duration};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::{Registry, Unit},
};

/// The semantic conventions' advised buckets for MCP operation durations, in seconds: the same
/// as OpenTelemetry's histogram.
const BUCKETS: [f64; 14] = maljan_telemetry::BUCKETS;

/// The label a tool name the server does not have is counted under.
pub const UNKNOWN_TOOL: &str = "_unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Operation {
    mcp_method_name: String,
    gen_ai_tool_name: String,
    error_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    gen_ai_tool_name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolErrorLabel {
    gen_ai_tool_name: String,
    error_code: String,
}

type DurationFamily = Family<Operation, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// One server's counters; share it (`Arc`) between the handler and the `/metrics` route.
pub struct Metrics {
    registry: Registry,
    duration: DurationFamily,
    calls: Family<ToolLabel, Counter>,
    errors: Family<ToolErrorLabel, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// How one operation ended, for its labels.
#[derive(Debug, Clone, Copy)]
pub enum Ended<'a> {
    Ok,
    /// A tool result with isError, and the tool's error code.
    ToolError(&'a str),
    /// A JSON-RPC error, by code.
    Protocol(i32),
}

impl Ended<'_> {
    /// The conventions' `error.type`: `tool_error` for a result with isError, the JSON-RPC code
    /// for a protocol error; none for success.
    pub fn error_type(&self) -> Option<String> {
        match self {
            Ended::Ok => None,
            Ended::ToolError(_) => Some("tool_error".into()),
            Ended::Protocol(code) => Some(code.to_string()),
        }
    }
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::default();
        let duration = DurationFamily::new_with_constructor(histogram);
        let calls = Family::<ToolLabel, Counter>::default();
        let errors = Family::<ToolErrorLabel, Counter>::default();
        registry.register_with_unit(
            "mcp_server_operation_duration",
            "How long the server took to answer an MCP request (mcp.server.operation.duration)",
            Unit::Seconds,
            duration.clone(),
        );
        registry.register(
            "maljan_tool_calls",
            "tools/call requests answered",
            calls.clone(),
        );
        registry.register(
            "maljan_tool_errors",
            "tools/call results that were errors, by maljan error code",
            errors.clone(),
        );
        Arc::new(Self {
            registry,
            duration,
            calls,
            errors,
        })
    }

    /// Records one request measured once (the same record OpenTelemetry is given): its tool
    /// must be one the server registered (or [`UNKNOWN_TOOL`]), or none.
    pub fn observe(&self, measured: &maljan_telemetry::Measurement, ended: Ended<'_>) {
        self.record(
            measured.method,
            measured.tool.as_deref().unwrap_or_default(),
            ended,
            measured.took,
        );
    }

    /// Records one answered request. `tool` must be a name the server registered (or
    /// [`UNKNOWN_TOOL`]); other requests pass an empty one.
    pub fn record(&self, method: &str, tool: &str, ended: Ended<'_>, took: Duration) {
        let error_type = ended.error_type().unwrap_or_default();
        self.duration
            .get_or_create(&Operation {
                mcp_method_name: method.to_string(),
                gen_ai_tool_name: tool.to_string(),
                error_type,
            })
            .observe(took.as_secs_f64());
        if method != "tools/call" {
            return;
        }
        let tool = tool.to_string();
        self.calls
            .get_or_create(&ToolLabel {
                gen_ai_tool_name: tool.clone(),
            })
            .inc();
        let code = match ended {
            Ended::Ok => return,
            Ended::ToolError(code) => code.to_string(),
            Ended::Protocol(code) => code.to_string(),
        };
        self.errors
            .get_or_create(&ToolErrorLabel {
                gen_ai_tool_name: tool,
                error_code: code,
            })
            .inc();
    }

    /// The OpenMetrics text (`application/openmetrics-text; version=1.0.0`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The content type [`Metrics::render`] answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_follow_the_conventions() {
        let m = Metrics::new();
        m.record("tools/call", "add", Ended::Ok, Duration::from_millis(3));
        m.record(
            "tools/call",
            "missing",
            Ended::ToolError("no_such_file"),
            Duration::from_millis(30),
        );
        m.record("tools/list", "", Ended::Ok, Duration::from_millis(1));
        let text = m.render();
        assert!(
            text.contains("# TYPE mcp_server_operation_duration_seconds histogram"),
            "{text}"
        );
        assert!(text.contains("mcp_server_operation_duration_seconds_bucket{le=\"0.01\",mcp_method_name=\"tools/call\",gen_ai_tool_name=\"add\",error_type=\"\"} 1"), "{text}");
        assert!(text.contains("maljan_tool_errors_total{gen_ai_tool_name=\"missing\",error_code=\"no_such_file\"} 1"), "{text}");
        assert!(
            text.contains("maljan_tool_calls_total{gen_ai_tool_name=\"add\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
