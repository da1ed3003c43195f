//! The official conformance suite's fixture server, built on maljan-server.
//!
//! Plain tools (text, errors, progress) go through the framework's registry exactly as maljan's
//! own servers do; the suite's fixtures that need what a tool server never uses — image, audio and
//! resource content, logging, sampling, elicitation, resources, prompts, completion, and the
//! 2026-07-28 multi-round-trip requests ([`mrtr`]), the tasks extension's fixtures that are no
//! maljan tool ([`tasks`]) — are answered by a thin handler wrapped around the framework's. Run:
//! `conformance_server 127.0.0.1:PORT`.

mod mrtr;
mod stateless;
mod tasks;

use std::{sync::Arc, time::Duration};

use maljan_server::{
    HttpOptions, McpHandler, Registry, ToolError, ToolMeta, ToolServer,
    rmcp::{ErrorData as McpError, RoleServer, ServerHandler, model::*, service::RequestContext},
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A 1x1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A 44-byte silent WAV header with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

fn framework_tools() -> Registry {
    let mut r = Registry::new();
    r.add(
        ToolMeta::new("test_simple_text", "Returns simple text"),
        |_ctx, _a: NoArgs| async move {
            Ok::<_, ToolError>("This is a simple text response for testing.".to_string())
        },
    );
    r.add(
        ToolMeta::new("test_error_handling", "Always fails"),
        |_ctx, _a: NoArgs| async move {
            Err::<String, _>(ToolError::tool_failed(
                "This tool intentionally returns an error for testing",
            ))
        },
    );
    r.add(
        ToolMeta::new("test_tool_with_progress", "Reports progress"),
        |ctx, _a: NoArgs| async move {
            for step in [0.0, 50.0, 100.0] {
                ctx.progress(step, Some(100.0), None);
                if step < 100.0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            Ok::<_, ToolError>("Progress test completed".to_string())
        },
    );
    tasks::register(&mut r);
    r
}

#[derive(Clone)]
struct Conformance {
    tools: McpHandler,
    extra_tools: Arc<Vec<Tool>>,
    states: Arc<mrtr::States>,
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("schemas are objects")
    };
    Tool::new(name.to_string(), description.to_string(), schema)
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

/// A module's table of argument-free tools, as tools/list lists them.
fn listed(table: &[(&str, &str)]) -> impl Iterator<Item = Tool> {
    table
        .iter()
        .map(|(name, description)| tool(name, description, no_args()))
}

fn in_table(table: &[(&str, &str)], name: &str) -> bool {
    table.iter().any(|(n, _)| *n == name)
}

fn extra_tools() -> Vec<Tool> {
    vec![
        tool("test_image_content", "Returns an image", no_args()),
        tool("test_audio_content", "Returns audio", no_args()),
        tool(
            "test_embedded_resource",
            "Returns an embedded resource",
            no_args(),
        ),
        tool(
            "test_multiple_content_types",
            "Returns mixed content",
            no_args(),
        ),
        tool("test_tool_with_logging", "Logs while it runs", no_args()),
        tool(
            "test_sampling",
            "Asks the client's LLM",
            json!({"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}),
        ),
        tool(
            "test_elicitation",
            "Asks the user",
            json!({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}),
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Elicitation with defaults",
            no_args(),
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Elicitation with enums",
            no_args(),
        ),
        tool("test_reconnection", "Answers after a pause", no_args()),
        tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                "additionalProperties": false
            }),
        ),
    ]
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(|e| McpError::internal_error(e.to_string(), None))
}

/// A result written as JSON, marked `resultType: "complete"` as 2026-07-28 requires of every
/// result (rmcp's constructors do the same, and rmcp drops the field for older peers).
fn complete_result<T: serde::de::DeserializeOwned>(mut v: Value) -> Result<T, McpError> {
    if let Value::Object(map) = &mut v {
        map.insert("resultType".into(), json!("complete"));
    }
    from_json(v)
}

fn text(t: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(t)]).into()
}

impl Conformance {
    #[allow(deprecated)] // logging, sampling and elicitation are deprecated in 2026-07-28, not in 2025-11-25
    async fn call_extra(
        &self,
        name: &str,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let result: CallToolResult = match name {
            "test_image_content" => complete_result(
                json!({"content":[{"type":"image","data":PNG,"mimeType":"image/png"}]}),
            )?,
            "test_audio_content" => complete_result(
                json!({"content":[{"type":"audio","data":WAV,"mimeType":"audio/wav"}]}),
            )?,
            "test_embedded_resource" => complete_result(
                json!({"content":[{"type":"resource","resource":{"uri":"test://embedded-resource","mimeType":"text/plain","text":"This is an embedded resource content."}}]}),
            )?,
            "test_multiple_content_types" => complete_result(json!({"content":[
                {"type":"text","text":"Multiple content types test:"},
                {"type":"image","data":PNG,"mimeType":"image/png"},
                {"type":"resource","resource":{"uri":"test://mixed-content-resource","mimeType":"application/json","text":"{\"test\":\"data\",\"value\":123}"}}]}))?,
            "test_tool_with_logging" => {
                for (i, message) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .iter()
                .enumerate()
                {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    let param: LoggingMessageNotificationParam =
                        from_json(json!({"level":"info","data":message}))?;
                    let _ = ctx.peer.notify_logging_message(param).await;
                }
                return Ok(text("Logging test completed"));
            }
            "test_sampling" => {
                let prompt = args
                    .get("prompt")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let params: CreateMessageRequestParams = from_json(
                    json!({"messages":[{"role":"user","content":{"type":"text","text":prompt}}],"maxTokens":100}),
                )?;
                let reply =
                    ctx.peer.create_message(params).await.map_err(|e| {
                        McpError::internal_error(format!("sampling failed: {e}"), None)
                    })?;
                let reply = serde_json::to_value(&reply).unwrap_or_default();
                let said = reply["content"]["text"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| reply["content"].to_string());
                return Ok(text(format!("LLM response: {said}")));
            }
            "test_elicitation"
            | "test_elicitation_sep1034_defaults"
            | "test_elicitation_sep1330_enums" => {
                let params = match name {
                    "test_elicitation" => {
                        json!({"message": args.get("message").cloned().unwrap_or(json!("")), "requestedSchema": {"type":"object","properties":{
                        "username":{"type":"string","description":"User's response"},
                        "email":{"type":"string","description":"User's email address"}},"required":["username","email"]}})
                    }
                    "test_elicitation_sep1034_defaults" => {
                        json!({"message":"Please confirm the defaults","requestedSchema":{"type":"object","properties":{
                        "name":{"type":"string","default":"John Doe"},
                        "age":{"type":"integer","default":30},
                        "score":{"type":"number","default":95.5},
                        "status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},
                        "verified":{"type":"boolean","default":true}}}})
                    }
                    _ => {
                        json!({"message":"Pick options","requestedSchema":{"type":"object","properties":{
                        "untitledSingle":{"type":"string","enum":["option1","option2","option3"]},
                        "titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
                        "legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
                        "untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},
                        "titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}})
                    }
                };
                let params: ElicitRequestParams = from_json(params)?;
                let reply = ctx.peer.create_elicitation(params).await.map_err(|e| {
                    McpError::internal_error(format!("elicitation failed: {e}"), None)
                })?;
                let reply = serde_json::to_value(&reply).unwrap_or_default();
                let summary = format!(
                    "action={}, content={}",
                    reply["action"].as_str().unwrap_or("?"),
                    reply.get("content").cloned().unwrap_or(json!({}))
                );
                return Ok(text(if name == "test_elicitation" {
                    format!("User response: {summary}")
                } else {
                    format!("Elicitation completed: {summary}")
                }));
            }
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Ok(text("Reconnection test completed successfully"));
            }
            "json_schema_2020_12_tool" => {
                return Ok(text(format!("received {}", Value::Object(args))));
            }
            _ => {
                return Err(McpError::invalid_params(
                    format!("unknown tool '{name}'"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

#[allow(deprecated)] // logging is deprecated in 2026-07-28, not in the versions this suite tests
impl ServerHandler for Conformance {
    fn get_info(&self) -> ServerConfig {
        let mut info = self.tools.get_info();
        info.capabilities = from_json(json!({
            "tools": {}, "logging": {}, "completions": {},
            "prompts": {"listChanged": false}, "resources": {"subscribe": true, "listChanged": false},
            "extensions": {(TASKS_EXTENSION_ID): {}}
        }))
        .expect("static capabilities");
        info
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut listed = self.tools.list_tools(request, ctx).await?;
        listed.tools.extend(self.extra_tools.iter().cloned());
        Ok(listed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if in_table(&stateless::TOOLS, &request.name) {
            return stateless::call(&request.name, &ctx).await;
        }
        if in_table(&mrtr::TOOLS, &request.name) {
            return mrtr::call(&self.states, &request, &ctx);
        }
        if in_table(&tasks::TOOLS, &request.name) {
            return tasks::call(&self.tools, &request, &ctx);
        }
        if self.extra_tools.iter().any(|t| t.name == request.name) {
            let args = request.arguments.clone().unwrap_or_default();
            return self.call_extra(&request.name, args, ctx).await;
        }
        self.tools.call_tool(request, ctx).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tools.get_task(request, ctx).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tools.update_task(request, ctx).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tools.cancel_task(request, ctx).await
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        complete_result(
            json!({"completion": {"values": ["paris", "park", "party"], "total": 3, "hasMore": false}}),
        )
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        complete_result(json!({"resources": [
            {"uri":"test://static-text","name":"static-text","description":"A static text resource","mimeType":"text/plain"},
            {"uri":"test://static-binary","name":"static-binary","description":"A static binary resource","mimeType":"image/png"},
            {"uri":"test://watched-resource","name":"watched-resource","description":"A resource to subscribe to","mimeType":"text/plain"}]}))
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        complete_result(
            json!({"resourceTemplates": [{"uriTemplate":"test://template/{id}/data","name":"template","description":"A templated resource","mimeType":"application/json"}]}),
        )
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.to_string();
        let contents = match uri.as_str() {
            "test://static-text" => {
                json!({"uri":uri,"mimeType":"text/plain","text":"This is the content of the static text resource."})
            }
            "test://static-binary" => json!({"uri":uri,"mimeType":"image/png","blob":PNG}),
            "test://watched-resource" => {
                json!({"uri":uri,"mimeType":"text/plain","text":"Watched resource content."})
            }
            other => match other
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Some(id) => {
                    json!({"uri":uri,"mimeType":"application/json","text":json!({"id":id,"templateTest":true,"data":format!("Data for ID: {id}")}).to_string()})
                }
                None => {
                    return Err(McpError::resource_not_found(
                        format!("no resource {other}"),
                        None,
                    ));
                }
            },
        };
        let result: ReadResourceResult = complete_result(json!({"contents": [contents]}))?;
        Ok(result.into())
    }

    /// `subscriptions/listen` (2026-07-28): every category asked for that the server
    /// advertises; rmcp acknowledges it and keeps the stream open until the client cancels.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        complete_result(json!({"prompts": [
            {"name":"test_simple_prompt","description":"A simple prompt"},
            {"name":"test_prompt_with_arguments","description":"A prompt with arguments","arguments":[
                {"name":"arg1","description":"First test argument","required":true},
                {"name":"arg2","description":"Second test argument","required":true}]},
            {"name":"test_prompt_with_embedded_resource","description":"A prompt with a resource","arguments":[
                {"name":"resourceUri","description":"URI of the resource to embed","required":true}]},
            {"name":"test_prompt_with_image","description":"A prompt with an image"},
            {"name":mrtr::PROMPT,"description":"A prompt that asks the client for its context first"}]}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name == mrtr::PROMPT {
            return mrtr::prompt(&request);
        }
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let messages = match request.name.as_ref() {
            "test_simple_prompt" => {
                json!([{"role":"user","content":{"type":"text","text":"This is a simple prompt for testing."}}])
            }
            "test_prompt_with_arguments" => {
                json!([{"role":"user","content":{"type":"text","text":format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}}])
            }
            "test_prompt_with_embedded_resource" => json!([
                {"role":"user","content":{"type":"resource","resource":{"uri":arg("resourceUri"),"mimeType":"text/plain","text":"Embedded resource content for testing."}}},
                {"role":"user","content":{"type":"text","text":"Please process the embedded resource above."}}]),
            "test_prompt_with_image" => json!([
                {"role":"user","content":{"type":"image","data":PNG,"mimeType":"image/png"}},
                {"role":"user","content":{"type":"text","text":"Please analyze the image above."}}]),
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown prompt '{other}'"),
                    None,
                ));
            }
        };
        let result: GetPromptResult = complete_result(json!({"messages": messages}))?;
        Ok(result.into())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3100".into())
        .parse()?;
    let server = ToolServer::new(
        "maljan-conformance",
        env!("CARGO_PKG_VERSION"),
        framework_tools(),
    );
    let handler = Conformance {
        tools: McpHandler::new(server),
        extra_tools: Arc::new(
            extra_tools()
                .into_iter()
                .chain(listed(&mrtr::TOOLS))
                .chain(listed(&stateless::TOOLS))
                .chain(listed(&tasks::TOOLS))
                .collect(),
        ),
        states: Arc::new(mrtr::States::new()),
    };
    maljan_server::serve_http_with(handler, HttpOptions::new(addr), Default::default()).await
}
