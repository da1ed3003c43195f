//! The suite's diagnostic tools for the stateless protocol (SEP-2575, 2026-07-28): each request
//! carries the client's capabilities and log level in `_meta`, and the server relies on nothing
//! the request did not declare.
// Logging is deprecated by SEP-2577, yet the suite still checks a server logs only when asked.
#![allow(deprecated)]

use maljan_server::rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolResponse, ClientCapabilities, ElicitationCapability, LoggingLevel,
        LoggingMessageNotificationParam, SamplingCapability,
    },
    service::RequestContext,
};
use serde_json::json;

use crate::{complete_result, from_json};

/// The tools (name, description), all without arguments.
pub const TOOLS: [(&str, &str); 3] = [
    (
        "test_missing_capability",
        "Needs the sampling capability declared with the request",
    ),
    (
        "test_streaming_elicitation",
        "Asks for input through the response, never a request of its own",
    ),
    (
        "test_logging_tool",
        "Logs only when the request set a log level",
    ),
];

fn declared(ctx: &RequestContext<RoleServer>) -> ClientCapabilities {
    ctx.meta.client_capabilities().unwrap_or_default()
}

fn text(t: &str) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(complete_result(
        json!({"content": [{"type": "text", "text": t}]}),
    )?))
}

pub async fn call(
    name: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    match name {
        "test_missing_capability" => {
            if declared(ctx).sampling.is_none() {
                let mut needed = ClientCapabilities::default();
                needed.sampling = Some(SamplingCapability::default());
                return Err(McpError::missing_required_client_capability(needed));
            }
            text("the client declared sampling")
        }
        "test_streaming_elicitation" => {
            if declared(ctx).elicitation.is_none() {
                let mut needed = ClientCapabilities::default();
                needed.elicitation = Some(ElicitationCapability::default());
                return Err(McpError::missing_required_client_capability(needed));
            }
            Ok(CallToolResponse::InputRequired(from_json(json!({
                "resultType": "input_required",
                "inputRequests": {"answer": {"method": "elicitation/create", "params": {
                    "message": "Anything to add?",
                    "requestedSchema": {"type": "object", "properties": {"note": {"type": "string"}}}}}}
            }))?))
        }
        _ => {
            // Only a request that asked for logs at info or finer gets one.
            if let Some(LoggingLevel::Debug | LoggingLevel::Info) = ctx.meta.log_level() {
                let line =
                    LoggingMessageNotificationParam::new(LoggingLevel::Info, json!("logged"));
                let _ = ctx.peer.notify_logging_message(line).await;
            }
            text("done")
        }
    }
}
