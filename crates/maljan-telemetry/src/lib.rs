//! OpenTelemetry for every maljan process: traces and metrics following the MCP semantic
//! conventions, exported over OTLP (HTTP/protobuf) when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and
//! off otherwise (every entry point below is then one atomic load).
//!
//! - Spans are ordinary `tracing` spans (target [`TARGET`]) bridged by tracing-opentelemetry: one
//!   instrumentation path. Their name is `{mcp.method.name} {tool}` (`otel.name`), with the
//!   attributes `mcp.method.name`, `gen_ai.tool.name`, `gen_ai.operation.name` and `error.type`.
//! - Histograms `mcp.client.operation.duration` and `mcp.server.operation.duration` (seconds).
//! - `traceparent` (W3C trace context) out of the current span, and a server span continuing the
//!   caller's trace from the `traceparent` it sent in `_meta`.
//!
//! Nothing sensitive is ever an attribute: callers pass names (a method, a tool they know, an error
//! code), never arguments, results, tokens or URLs. Depends on no maljan crate.

use std::{
    borrow::Cow,
    sync::{OnceLock, RwLock},
    time::Duration,
};

use opentelemetry::{
    Context, KeyValue,
    metrics::{Histogram, MeterProvider as _},
    trace::{SpanBuilder, TraceContextExt as _, TracerProvider as _},
};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::{
    Resource,
    metrics::{PeriodicReader, SdkMeterProvider},
    propagation::TraceContextPropagator,
    trace::{SdkTracer, SdkTracerProvider},
};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::{Layer, filter::Targets, registry::LookupSpan};

/// The `tracing` target of every span meant for export; nothing else is exported.
pub const TARGET: &str = "mcp";

/// The variable that turns export on (the operator's choice, never a tool argument's).
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The conventions' advised buckets for MCP operation durations, in seconds (the Prometheus
/// histograms beside these use them too).
pub const BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// What export runs with now; replaced whole by [`reinit`].
struct Pipeline {
    tracer: SdkTracer,
    tracers: SdkTracerProvider,
    meters: SdkMeterProvider,
    client: Histogram<f64>,
    server: Histogram<f64>,
}

static PIPELINE: OnceLock<RwLock<Pipeline>> = OnceLock::new();

/// True when export is on. The one check a call pays when it is off.
pub fn enabled() -> bool {
    PIPELINE.get().is_some()
}

/// Turns export on if `OTEL_EXPORTER_OTLP_ENDPOINT` is set (call once, before [`layer`]).
/// `service_name` applies unless `OTEL_SERVICE_NAME` names one.
pub fn init_from_env(service_name: &str) -> Result<bool, String> {
    if !endpoint_configured() {
        return Ok(false);
    }
    let name = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| service_name.to_string());
    let pipeline = build(&name, Vec::new())?;
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let _ = PIPELINE.set(RwLock::new(pipeline));
    Ok(true)
}

pub fn endpoint_configured() -> bool {
    std::env::var_os(ENDPOINT_VAR).is_some_and(|v| !v.is_empty())
}

/// Starts export again under a new service name and resource (automation-file's
/// `FA_tracing_init`): what was recorded so far is flushed under the old one. Export must
/// already be on (the endpoint is the operator's, read at start-up).
pub fn reinit(service_name: &str, attributes: Vec<(String, AttrValue)>) -> Result<(), String> {
    let Some(lock) = PIPELINE.get() else {
        return Err(format!(
            "telemetry export is off: the operator starts the server with {ENDPOINT_VAR} set to a collector"
        ));
    };
    let attributes = attributes
        .into_iter()
        .map(|(k, v)| KeyValue::new(k, v.into_otel()))
        .collect();
    let fresh = build(service_name, attributes)?;
    let old = std::mem::replace(&mut *lock.write().unwrap_or_else(|e| e.into_inner()), fresh);
    // Shutting a provider down flushes it over the blocking HTTP client: off the caller's thread.
    std::thread::spawn(move || shutdown_pipeline(old));
    Ok(())
}

/// A resource attribute's value (the scalar kinds OpenTelemetry has).
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Bool(bool),
    I64(i64),
    F64(f64),
}

impl AttrValue {
    fn into_otel(self) -> opentelemetry::Value {
        match self {
            Self::Str(s) => s.into(),
            Self::Bool(b) => b.into(),
            Self::I64(i) => i.into(),
            Self::F64(f) => f.into(),
        }
    }
}

/// Flushes and stops export (at process exit).
pub fn shutdown() {
    if let Some(lock) = PIPELINE.get() {
        let p = lock.read().unwrap_or_else(|e| e.into_inner());
        let _ = p.tracers.force_flush();
        let _ = p.meters.force_flush();
    }
}

fn shutdown_pipeline(p: Pipeline) {
    let _ = p.tracers.shutdown();
    let _ = p.meters.shutdown();
}

fn build(service_name: &str, attributes: Vec<KeyValue>) -> Result<Pipeline, String> {
    let resource = Resource::builder()
        .with_service_name(service_name.to_string())
        .with_attributes(attributes)
        .build();
    // The exporters build a blocking HTTP client, which must not be made on an async thread.
    std::thread::spawn(move || {
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build()
            .map_err(|e| format!("the OTLP span exporter could not start: {e}"))?;
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build()
            .map_err(|e| format!("the OTLP metric exporter could not start: {e}"))?;
        let tracers = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_resource(resource.clone())
            .build();
        let meters = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics).build())
            .with_resource(resource)
            .build();
        let tracer = tracers.tracer("maljan");
        let meter = meters.meter("maljan");
        let histogram = |name: &'static str, what: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(what)
                .with_boundaries(BUCKETS.to_vec())
                .build()
        };
        Ok(Pipeline {
            client: histogram(
                "mcp.client.operation.duration",
                "How long an MCP request took, as the client saw it",
            ),
            server: histogram(
                "mcp.server.operation.duration",
                "How long the server took to answer an MCP request",
            ),
            tracer,
            tracers,
            meters,
        })
    })
    .join()
    .map_err(|_| "the telemetry exporter thread panicked".to_string())?
}

/// The tracer the layer holds: the current pipeline's, so [`reinit`] takes effect at once.
struct CurrentTracer;

impl opentelemetry::trace::Tracer for CurrentTracer {
    type Span = opentelemetry_sdk::trace::Span;

    fn build_with_context(&self, builder: SpanBuilder, parent_cx: &Context) -> Self::Span {
        let tracer = PIPELINE
            .get()
            .map(|lock| {
                lock.read()
                    .unwrap_or_else(|e| e.into_inner())
                    .tracer
                    .clone()
            })
            .unwrap_or_else(|| SdkTracerProvider::builder().build().tracer("maljan"));
        tracer.build_with_context(builder, parent_cx)
    }
}

/// The layer that exports [`TARGET`] spans; `None` (nothing installed) when export is off.
pub fn layer<S>() -> Option<impl Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    enabled().then(|| {
        // Only the conventions' attributes: no source locations, threads, targets or timings.
        tracing_opentelemetry::layer()
            .with_tracer(CurrentTracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE))
    })
}

/// Which side of a request a span or a duration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// A span for one MCP operation, `{method} {tool}`; [`tracing::Span::none`] when export is off.
/// A server span continues the trace of the `traceparent` the client sent, when it sent one.
pub fn operation_span(
    side: Side,
    method: &str,
    tool: Option<&str>,
    traceparent: Option<&str>,
) -> tracing::Span {
    if !enabled() {
        return tracing::Span::none();
    }
    let name: Cow<'_, str> = match tool {
        Some(t) => format!("{method} {t}").into(),
        None => method.into(),
    };
    let kind = match side {
        Side::Client => "client",
        Side::Server => "server",
    };
    let span = tracing::info_span!(
        target: TARGET,
        "mcp",
        otel.name = %name,
        otel.kind = kind,
        otel.status_code = tracing::field::Empty,
        mcp.method.name = method,
        gen_ai.tool.name = tool,
        gen_ai.operation.name = tool.map(|_| "execute_tool"),
        error.type = tracing::field::Empty,
    );
    if let Some(parent) = traceparent.and_then(parse_traceparent) {
        let _ = span.set_parent(parent);
    }
    span
}

/// The agent's own span around one tool call a model made (`execute_tool {tool}`).
pub fn tool_span(tool: &str) -> tracing::Span {
    if !enabled() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: TARGET,
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        error.type = tracing::field::Empty,
    )
}

/// Marks `span` failed with `error_type` (an error code or a JSON-RPC code, never a message).
pub fn record_error(span: &tracing::Span, error_type: &str) {
    if span.is_none() {
        return;
    }
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

/// One MCP operation measured once: its duration is taken a single time, and every export of it
/// (this crate's OpenTelemetry histogram and span, a Prometheus histogram beside it) is filled
/// from this record, so they cannot disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub side: Side,
    /// `tools/call`, `tools/list`.
    pub method: &'static str,
    /// A tool name the caller knows (never one a peer made up).
    pub tool: Option<String>,
    /// The conventions' `error.type` (an error code or a JSON-RPC code); None for success.
    pub error_type: Option<String>,
    pub took: Duration,
}

impl Measurement {
    /// The operation that began at `started` and ends now.
    pub fn since(
        started: std::time::Instant,
        side: Side,
        method: &'static str,
        tool: Option<&str>,
        error_type: Option<String>,
    ) -> Self {
        Self {
            side,
            method,
            tool: tool.map(str::to_string),
            error_type,
            took: started.elapsed(),
        }
    }

    /// Exports it to OpenTelemetry: the error type on `span`, the duration in
    /// `mcp.{side}.operation.duration`. Nothing when export is off.
    pub fn export(&self, span: &tracing::Span) {
        if let Some(e) = &self.error_type {
            record_error(span, e);
        }
        record_duration(
            self.side,
            self.method,
            self.tool.as_deref(),
            self.error_type.as_deref(),
            self.took,
        );
    }
}

/// Records one operation's duration in `mcp.{side}.operation.duration` (see [`Measurement`]).
pub fn record_duration(
    side: Side,
    method: &str,
    tool: Option<&str>,
    error_type: Option<&str>,
    took: Duration,
) {
    let Some(lock) = PIPELINE.get() else {
        return;
    };
    let p = lock.read().unwrap_or_else(|e| e.into_inner());
    let mut attrs = Vec::with_capacity(3);
    attrs.push(KeyValue::new("mcp.method.name", method.to_string()));
    if let Some(t) = tool {
        attrs.push(KeyValue::new("gen_ai.tool.name", t.to_string()));
    }
    if let Some(e) = error_type {
        attrs.push(KeyValue::new("error.type", e.to_string()));
    }
    let h = match side {
        Side::Client => &p.client,
        Side::Server => &p.server,
    };
    h.record(took.as_secs_f64(), &attrs);
}

/// The W3C `traceparent` of `span` (for `_meta`), when export is on and the span is sampled in.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if !enabled() || span.is_none() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// A remote parent out of a `traceparent` value; `None` for anything malformed.
pub fn parse_traceparent(value: &str) -> Option<Context> {
    use opentelemetry::propagation::TextMapPropagator as _;
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_string(), value.to_string());
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_without_an_endpoint_costs_a_check() {
        // No test sets the endpoint in this process.
        assert!(!enabled());
        assert!(operation_span(Side::Client, "tools/call", Some("echo"), None).is_none());
        assert_eq!(traceparent(&tracing::Span::current()), None);
        record_duration(Side::Client, "tools/call", None, None, Duration::ZERO);
        assert!(reinit("x", Vec::new()).unwrap_err().contains(ENDPOINT_VAR));
    }

    #[test]
    fn traceparent_parsing_accepts_the_w3c_form_only() {
        let ok = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
        let cx = parse_traceparent(ok).expect("valid");
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        for bad in [
            "",
            "00-0-0-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "zz-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }
}
