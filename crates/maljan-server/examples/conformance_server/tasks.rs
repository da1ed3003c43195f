//! The suite's tasks-extension fixtures (SEP-2663, `io.modelcontextprotocol/tasks`).
//!
//! `greet`, `slow_compute` and `failing_job` are ordinary maljan tools: the framework runs the
//! last two as tasks (optional and required), exactly as it runs a long tool of `maljan serve
//! files`. The fixtures that need what a maljan tool never does — a protocol-level failure, input
//! asked for in the middle of a task, a multi-round-trip call that ends in a task — are started
//! here as operations of the framework's own task store, so `tasks/get|update|cancel` answer for
//! them the same way.

use std::time::Duration;

use maljan_server::{
    McpHandler, Registry, TaskSupport, ToolError, ToolMeta, declares_tasks,
    rmcp::{
        ErrorData as McpError, RoleServer,
        model::{
            CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
            CreateTaskResult, InputRequest,
        },
        service::RequestContext,
        task_manager::{TaskContext, TaskExit, TaskFuture},
    },
    task_owner,
    tasks::tasks_required,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::from_json;

/// The tools started here (name, description), all without arguments but `confirm_delete`'s.
pub const TOOLS: [(&str, &str); 4] = [
    (
        "protocol_error_job",
        "A task that fails with a protocol error",
    ),
    (
        "confirm_delete",
        "A task that asks the user to confirm, then completes",
    ),
    ("multi_input", "A task that asks two things at once"),
    (
        "test_tool_with_task",
        "Asks for a name (multi-round-trip), then answers it in a task",
    ),
];

#[derive(Deserialize, JsonSchema)]
struct Greet {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct SlowCompute {
    /// How long to work, in seconds.
    seconds: f64,
    /// A label echoed in the result.
    label: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// The framework-served fixtures.
pub fn register(r: &mut Registry) {
    r.add(
        ToolMeta::new("greet", "Greets, at once (never a task)"),
        |_ctx, a: Greet| async move { Ok::<_, ToolError>(format!("Hello, {}!", a.name)) },
    );
    r.add(
        ToolMeta::new("slow_compute", "Works for `seconds`, as a task when it can")
            .timeout_s(120)
            .task_support(TaskSupport::Optional),
        |_ctx, a: SlowCompute| async move {
            tokio::time::sleep(Duration::from_secs_f64(a.seconds.clamp(0.0, 90.0))).await;
            Ok::<_, ToolError>(format!(
                "computed {} in {} s",
                a.label.unwrap_or_default(),
                a.seconds
            ))
        },
    );
    r.add(
        ToolMeta::new("failing_job", "Fails after a second, only as a task")
            .timeout_s(30)
            .task_support(TaskSupport::Required),
        |_ctx, _a: NoArgs| async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err::<String, _>(ToolError::tool_failed("failing_job always fails"))
        },
    );
}

fn elicit(message: &str, field: &str, kind: &str) -> Result<InputRequest, McpError> {
    from_json(
        json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {
        "type": "object", "properties": {field: {"type": kind}}, "required": [field]}}}),
    )
}

fn text(t: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

/// What an elicitation answer says, for the result text.
fn said(answer: &Value) -> String {
    format!(
        "{} {}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").cloned().unwrap_or(json!({}))
    )
}

/// The operation behind each fixture, given its task's context.
fn operation(name: &str, request: &CallToolRequestParams, task: TaskContext) -> TaskFuture {
    let args = request.arguments.clone().unwrap_or_default();
    let gathered = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get("user_name"))
        .and_then(|a| a["content"]["name"].as_str())
        .unwrap_or_default()
        .to_string();
    match name {
        "protocol_error_job" => Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Err(TaskExit::Error(McpError::internal_error(
                "protocol_error_job failed below the tool",
                None,
            )))
        }),
        "confirm_delete" => Box::pin(async move {
            let file = args.get("filename").and_then(Value::as_str).unwrap_or("?");
            let ask = elicit(&format!("Delete {file}?"), "confirm", "boolean")?;
            let answer = task.request_input("confirm", ask).await?;
            Ok(text(format!("delete {file}: {}", said(&answer))))
        }),
        "multi_input" => Box::pin(async move {
            let (name, confirm) = (
                elicit("Your name?", "name", "string")?,
                elicit("Go ahead?", "confirm", "boolean")?,
            );
            let (a, b) = tokio::join!(
                task.request_input("name", name),
                task.request_input("confirm", confirm)
            );
            Ok(text(format!("name {}; confirm {}", said(&a?), said(&b?))))
        }),
        _ => Box::pin(async move { Ok(text(format!("Hello, {gathered}! (from a task)"))) }),
    }
}

pub fn call(
    tools: &McpHandler,
    request: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let name = request.name.to_string();
    if !declares_tasks(ctx) {
        return Err(tasks_required());
    }
    // test_tool_with_task asks for a name in a multi-round-trip round first; the round that
    // answers it becomes a task.
    if name == "test_tool_with_task"
        && !request
            .input_responses
            .as_ref()
            .is_some_and(|r| r.contains_key("user_name"))
    {
        return Ok(CallToolResponse::InputRequired(from_json(json!({
            "resultType": "input_required",
            "inputRequests": {"user_name": elicit("What is your name?", "name", "string")?}
        }))?));
    }
    let ttl = tools
        .tasks()
        .policy()
        .ttl_for(Some(Duration::from_secs(60)));
    let task = tools
        .tasks()
        .spawn(&task_owner(ctx), ttl, |task| {
            operation(&name, request, task)
        })
        .ok_or_else(|| McpError::invalid_request("too many tasks", None))?;
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}
