//! FA_tracing_init (automation-file's name and arguments): (re)starts this server's OpenTelemetry
//! export under a service name and resource attributes the caller chooses. The endpoint is never
//! the caller's: export goes where the operator's OTEL_EXPORTER_OTLP_ENDPOINT says, and without
//! it the tool is unavailable. automation-file's `exporter` (a Python object) cannot travel over
//! MCP: it is accepted as null only.

use std::sync::Arc;

use maljan_server::{Probe, Registry, ToolError, ToolMeta};
use maljan_telemetry::AttrValue;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Config;

fn default_service_name() -> String {
    "automation_file".into()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TracingInitArgs {
    /// The service.name the exported spans and metrics carry.
    #[serde(default = "default_service_name")]
    service_name: String,
    /// Extra resource attributes: names to strings, numbers or booleans.
    #[serde(default)]
    resource_attributes: Option<Map<String, Value>>,
    /// automation-file's SpanExporter object: cannot be sent over MCP, so only null is accepted.
    #[serde(default)]
    exporter: Option<Value>,
}

#[derive(Serialize, JsonSchema)]
struct TracingInitOut {
    /// True: export runs under the new service name.
    enabled: bool,
    service_name: String,
    resource_attributes: usize,
}

pub(crate) fn register(reg: &mut Registry, _cfg: &Arc<Config>) {
    reg.add(
        ToolMeta::new(
            "FA_tracing_init",
            "Start OpenTelemetry export (traces and metrics, OTLP) under a service name and resource attributes; the collector is the operator's OTEL_EXPORTER_OTLP_ENDPOINT.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .probe(Probe::env(
            maljan_telemetry::ENDPOINT_VAR,
            "start the server with OTEL_EXPORTER_OTLP_ENDPOINT set to an OTLP/HTTP collector (e.g. http://127.0.0.1:4318)",
        ))
        .not_idempotent()
        .timeout_s(30),
        |_ctx, a: TracingInitArgs| async move {
            if a.exporter.as_ref().is_some_and(|e| !e.is_null()) {
                return Err(ToolError::bad_argument(
                    "exporter cannot be passed over MCP (it is a Python SpanExporter object in automation-file)",
                )
                .with_remediation(
                    "leave exporter null: spans go over OTLP to the operator's OTEL_EXPORTER_OTLP_ENDPOINT",
                ));
            }
            let name = a.service_name.trim();
            if name.is_empty() || name.len() > 255 {
                return Err(ToolError::bad_argument(
                    "service_name must be 1 to 255 characters",
                ));
            }
            let attributes = attributes(a.resource_attributes.unwrap_or_default())?;
            let count = attributes.len();
            maljan_telemetry::reinit(name, attributes).map_err(|why| {
                ToolError::not_configured(why).with_remediation(
                    "start the server with OTEL_EXPORTER_OTLP_ENDPOINT set to an OTLP/HTTP collector",
                )
            })?;
            Ok(TracingInitOut {
                enabled: true,
                service_name: name.to_string(),
                resource_attributes: count,
            })
        },
    );
}

fn attributes(given: Map<String, Value>) -> Result<Vec<(String, AttrValue)>, ToolError> {
    given
        .into_iter()
        .map(|(key, value)| {
            if key.trim().is_empty() {
                return Err(ToolError::bad_argument("a resource attribute needs a name"));
            }
            let v = match value {
                Value::String(s) => AttrValue::Str(s),
                Value::Bool(b) => AttrValue::Bool(b),
                Value::Number(n) => match n.as_i64() {
                    Some(i) => AttrValue::I64(i),
                    None => AttrValue::F64(n.as_f64().unwrap_or_default()),
                },
                _ => {
                    return Err(ToolError::bad_argument(format!(
                        "resource attribute '{key}' must be a string, a number or a boolean"
                    )));
                }
            };
            Ok((key, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attributes_take_scalars_only() {
        let ok = attributes(
            json!({"team": "ir", "shard": 3, "ratio": 0.5, "prod": true})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        assert_eq!(ok.len(), 4);
        for bad in [json!({"x": [1]}), json!({"x": null}), json!({" ": "v"})] {
            assert!(
                attributes(bad.as_object().unwrap().clone()).is_err(),
                "{bad}"
            );
        }
    }
}
