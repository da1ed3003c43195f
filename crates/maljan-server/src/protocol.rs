//! The one place the official SDK (rmcp) meets maljan's tool servers: a `ServerHandler` that
//! answers tools/list and tools/call from a [`ToolServer`], on stdio and HTTP alike. rmcp does
//! the JSON-RPC session, version negotiation (2024-11-05 … 2025-11-25, and the stateless
//! 2026-07-28 `server/discover`), ping and cancellation; maljan does validation, errors,
//! timeouts and progress, and completes an initialize that left out fields
//! ([`complete_initialize`]) before either transport hands it to rmcp. Each tools/call runs in an
//! OpenTelemetry server span continuing the caller's `traceparent` (see maljan-telemetry), and is
//! counted where [`crate::metrics`] counts it.
//!
//! The tasks extension (`io.modelcontextprotocol/tasks`) is declared when a served tool allows
//! tasks ([`crate::tasks`]): such a tool's call from a client that declared the extension
//! answers at once with a task handle, and runs as a task of [`Tasks`], its progress reports
//! becoming the task's status message and `tasks/cancel` cancelling its token.

use std::{sync::Arc, time::Instant};

use maljan_telemetry::{Measurement, Side};
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
        CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, InitializeResult,
        JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
        ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig, Task, Tool,
        ToolAnnotations, UpdateTaskParams,
    },
    service::{Peer, RequestContext},
    task_manager::{TaskContext, TaskExit},
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// JSON-RPC's invalid-params code, rmcp's answer to an unknown tool.
const INVALID_PARAMS: i32 = -32602;

use crate::{
    context::ProgressSink,
    metrics::{Ended, Metrics, UNKNOWN_TOOL},
    registry::RegisteredTool,
    server::{CallOutcome, ToolServer},
    tasks::{TASKS_EXTENSION_ID, TaskPolicy, TaskSupport, Tasks, tasks_required},
};

/// Serves one [`ToolServer`] through rmcp. Cheap to clone: one per HTTP session, all sharing the
/// server's [`Tasks`].
#[derive(Clone)]
pub struct McpHandler {
    server: Arc<ToolServer>,
    tools: Arc<Vec<Tool>>,
    metrics: Option<Arc<Metrics>>,
    tasks: Arc<Tasks>,
}

impl McpHandler {
    pub fn new(server: Arc<ToolServer>) -> Self {
        let tools = Arc::new(tool_descriptors(&server));
        Self {
            server,
            tools,
            metrics: None,
            tasks: Tasks::new(TaskPolicy::default()),
        }
    }

    /// Counts every tools/list and tools/call in `metrics` (see [`crate::metrics`]).
    pub fn with_metrics(mut self, metrics: Option<Arc<Metrics>>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs tasks under these limits instead of the defaults.
    pub fn with_task_policy(mut self, policy: TaskPolicy) -> Self {
        self.tasks = Tasks::new(policy);
        self
    }

    /// This server's tasks: a handler wrapped around this one starts its own operations as tasks
    /// here, so `tasks/get` answers for them too.
    pub fn tasks(&self) -> &Arc<Tasks> {
        &self.tasks
    }

    /// Whether a served tool may run as a task (then the extension is declared).
    pub fn offers_tasks(&self) -> bool {
        self.server
            .listed_tools()
            .any(|t| t.meta.tasks() != TaskSupport::Forbidden)
    }

    /// A listed tool's task support; None for a name this server does not serve.
    fn task_support(&self, tool: &str) -> Option<(TaskSupport, Option<std::time::Duration>)> {
        let registered = self.server.registry().get(tool)?;
        (!registered.meta.unlisted).then(|| (registered.meta.tasks(), registered.meta.timeout))
    }

    /// Starts a call of a maljan tool as a task of `owner`; None when the owner holds its most.
    fn spawn_call(
        &self,
        owner: &str,
        name: String,
        args: JsonObject,
        timeout: Option<std::time::Duration>,
        traceparent: Option<String>,
    ) -> Option<Task> {
        let handler = self.clone();
        let ttl = self.tasks.policy().ttl_for(timeout);
        self.tasks.spawn(owner, ttl, move |task| {
            Box::pin(async move {
                let cancel = CancellationToken::new();
                let progress: Arc<dyn ProgressSink> = Arc::new(TaskProgress(task.clone()));
                let call = handler.run_call(
                    &name,
                    args,
                    cancel.clone(),
                    Some(progress),
                    traceparent.as_deref(),
                );
                tokio::select! {
                    outcome = call => match outcome {
                        Some(outcome) => Ok(tool_result(outcome)),
                        None => Err(TaskExit::Error(McpError::invalid_params(
                            format!("unknown tool '{name}'"), None))),
                    },
                    _ = task.cancelled() => {
                        cancel.cancel();
                        Err(TaskExit::Cancelled)
                    }
                }
            })
        })
    }

    /// Runs one call in its telemetry span and counts it; None for an unknown tool.
    async fn run_call(
        &self,
        name: &str,
        args: JsonObject,
        cancel: CancellationToken,
        progress: Option<Arc<dyn ProgressSink>>,
        traceparent: Option<&str>,
    ) -> Option<CallOutcome> {
        let started = Instant::now();
        // A span only names a tool the server has: a caller cannot put its own text in one.
        let span = if maljan_telemetry::enabled() {
            let known = self.tools.iter().any(|t| t.name == name);
            maljan_telemetry::operation_span(
                Side::Server,
                "tools/call",
                Some(if known { name } else { UNKNOWN_TOOL }),
                traceparent,
            )
        } else {
            tracing::Span::none()
        };
        let outcome = self
            .server
            .call(name, args, cancel, progress)
            .instrument(span.clone())
            .await;
        if self.metrics.is_some() || maljan_telemetry::enabled() {
            let (tool, ended) = match &outcome {
                Some(o) if o.is_error => (
                    name,
                    Ended::ToolError(o.value["error"]["code"].as_str().unwrap_or("tool_failed")),
                ),
                Some(_) => (name, Ended::Ok),
                None => (UNKNOWN_TOOL, Ended::Protocol(INVALID_PARAMS)),
            };
            // Measured once; Prometheus and OpenTelemetry are both filled from this record.
            let measured = Measurement::since(
                started,
                Side::Server,
                "tools/call",
                Some(tool),
                ended.error_type(),
            );
            self.export(&measured, ended, &span);
        }
        outcome
    }

    /// Exports one measured request to `/metrics` (when served with it) and to OpenTelemetry.
    fn export(&self, measured: &Measurement, ended: Ended<'_>, span: &tracing::Span) {
        if let Some(m) = &self.metrics {
            m.observe(measured, ended);
        }
        measured.export(span);
    }
}

/// Who a task belongs to: the HTTP session that asked (`Mcp-Session-Id`), or "" without one
/// (stdio, stateless HTTP). See [`crate::tasks`].
pub fn task_owner(context: &RequestContext<RoleServer>) -> String {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// Whether this request declares the tasks extension in its own `_meta` capabilities. A
/// declaration at initialize alone does not count: a 2025-11-25 client (Inspector's CLI in its
/// legacy era is one) may list the extension there yet read a `tools/call` answer as a plain
/// result, so a task handle would reach it as a result without its structured content.
pub fn declares_tasks(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .client_capabilities()
        .is_some_and(|caps| caps.supports_tasks())
}

/// The descriptors exactly as tools/list sends them.
pub fn tool_descriptors(server: &ToolServer) -> Vec<Tool> {
    server.listed_tools().map(descriptor).collect()
}

fn descriptor(tool: &RegisteredTool) -> Tool {
    let meta = &tool.meta;
    let mut out = Tool::new(
        meta.name.clone(),
        meta.description.clone(),
        tool.input_schema.clone(),
    );
    out.title = meta.title.clone();
    out.output_schema = tool.output_schema.clone().map(Arc::new);
    out.annotations = Some(ToolAnnotations::from_raw(
        meta.title.clone(),
        Some(meta.read_only),
        Some(meta.destructive),
        Some(meta.idempotent),
        Some(meta.open_world),
    ));
    out
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder().enable_tools().build();
        if self.offers_tasks() {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_string(), JsonObject::new());
        }
        let mut info = InitializeResult::new(capabilities);
        info.server_info = Implementation::new(self.server.name(), self.server.version());
        info.instructions = self.server.instructions().map(str::to_string);
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let started = Instant::now();
        let list = ListToolsResult::with_all_items(self.tools.as_ref().clone());
        let measured = Measurement::since(started, Side::Server, "tools/list", None, None);
        self.export(&measured, Ended::Ok, &tracing::Span::none());
        Ok(list)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        let traceparent = context.meta.get_traceparent();
        if let Some((support, timeout)) = self.task_support(&name) {
            match (support, declares_tasks(&context)) {
                (TaskSupport::Required, false) => return Err(tasks_required()),
                (TaskSupport::Optional | TaskSupport::Required, true) => {
                    let owner = task_owner(&context);
                    let tp = traceparent.map(str::to_string);
                    match self.spawn_call(&owner, name.clone(), args.clone(), timeout, tp) {
                        Some(task) => {
                            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
                        }
                        // At its bound: an optional tool runs as an ordinary call.
                        None if support == TaskSupport::Required => {
                            return Err(McpError::invalid_request(
                                format!(
                                    "this session already holds {} tasks; wait for one to end",
                                    self.tasks.policy().max_tasks
                                ),
                                None,
                            ));
                        }
                        None => {}
                    }
                }
                _ => {}
            }
        }
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| PeerProgress::start(context.peer.clone(), token));
        let sink = progress.clone().map(|p| p as Arc<dyn ProgressSink>);
        let outcome = self
            .run_call(&name, args, context.ct.clone(), sink, traceparent)
            .await;
        if let Some(progress) = &progress {
            progress.flush().await;
        }
        match outcome {
            Some(outcome) => Ok(tool_result(outcome).into()),
            None => Err(McpError::invalid_params(
                format!("unknown tool '{name}'"),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks.get(&task_owner(&context), &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.update(
            &task_owner(&context),
            &request.task_id,
            request.input_responses,
        )
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(&task_owner(&context), &request.task_id)
    }
}

/// Fills in what an `initialize` request left out of its params, in place; whether it did.
///
/// rmcp refuses an initialize without `protocolVersion`, `capabilities` and `clientInfo` as
/// invalid params, and then serves nothing. Clients written by hand send `"params": {}` (the
/// automation-file page's own printf smoke test does), so the missing members get defaults,
/// on stdio and on HTTP alike. A client that names no version is answered as rmcp answers one
/// naming a version it does not know: with the newest version that still has an initialize
/// handshake (2025-11-25 with rmcp 3.11), so there is one rule for both, and it moves with
/// rmcp. Members that are present are left as sent, however wrong.
pub(crate) fn complete_initialize(message: &mut Value) -> bool {
    if message.get("method").and_then(Value::as_str) != Some("initialize") {
        return false;
    }
    let Some(message) = message.as_object_mut() else {
        return false;
    };
    let params = message.entry("params").or_insert_with(|| json!({}));
    if params.is_null() {
        *params = json!({});
    }
    let Some(params) = params.as_object_mut() else {
        return false;
    };
    let defaults = [
        (
            "protocolVersion",
            json!(ProtocolVersion::LATEST_WITH_INITIALIZE.as_str()),
        ),
        ("capabilities", json!({})),
        (
            "clientInfo",
            json!({"name": "unnamed-client", "version": "0"}),
        ),
    ];
    let mut completed = false;
    for (key, default) in defaults {
        let member = params.entry(key).or_insert(Value::Null);
        if member.is_null() {
            *member = default;
            completed = true;
        }
    }
    completed
}

/// A result carries its JSON as text (for every client) and, when it is an object, as
/// structuredContent too. Error results carry only the text: their shape is not the tool's
/// outputSchema, and clients validate structuredContent against it.
fn tool_result(outcome: CallOutcome) -> CallToolResult {
    let text = match &outcome.value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if outcome.is_error {
        return CallToolResult::error(vec![ContentBlock::text(text)]);
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if outcome.value.is_object() {
        result.structured_content = Some(outcome.value);
    }
    result
}

/// Forwards a call's progress reports as notifications/progress, in order, from one task.
struct PeerProgress {
    tx: tokio::sync::mpsc::UnboundedSender<Forward>,
    token: ProgressToken,
}

enum Forward {
    Report(ProgressNotificationParam),
    /// Answered once every report queued before it has gone to the peer.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl PeerProgress {
    fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Arc<Self> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Forward>();
        tokio::spawn(async move {
            let mut peer_gone = false;
            while let Some(item) = rx.recv().await {
                match item {
                    Forward::Report(param) if !peer_gone => {
                        peer_gone = peer.notify_progress(param).await.is_err();
                    }
                    Forward::Report(_) => {}
                    Forward::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        Arc::new(Self { tx, token })
    }

    /// Waits until the reports made so far are sent, so none arrives after the call's result
    /// (a client may stop listening for a token once its request is answered). Bounded: a
    /// stuck peer must not hold the result back.
    async fn flush(&self) {
        let (done, sent) = tokio::sync::oneshot::channel();
        if self.tx.send(Forward::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), sent).await;
        }
    }
}

impl ProgressSink for PeerProgress {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let mut param = ProgressNotificationParam::new(self.token.clone(), progress);
        param.total = total;
        param.message = message;
        let _ = self.tx.send(Forward::Report(param));
    }
}

/// A task's progress reports become its status message (its request was answered long ago, so
/// there is no progress token to report to).
struct TaskProgress(TaskContext);

impl ProgressSink for TaskProgress {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let done = match total {
            Some(total) => format!("{progress}/{total}"),
            None => format!("{progress}"),
        };
        self.0.set_status_message(match message {
            Some(m) => format!("{done}: {m}"),
            None => done,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_initialize_gets_what_it_left_out_and_keeps_what_it_sent() {
        for params in [json!({}), Value::Null] {
            let mut message =
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
            assert!(complete_initialize(&mut message));
            let completed = &message["params"];
            assert_eq!(completed["protocolVersion"], "2025-11-25");
            assert_eq!(completed["capabilities"], json!({}));
            assert!(completed["clientInfo"]["name"].is_string());
        }
        let mut without_params = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"});
        assert!(complete_initialize(&mut without_params));
        assert_eq!(without_params["params"]["protocolVersion"], "2025-11-25");

        let sent = json!({"protocolVersion": "2024-11-05", "capabilities": {"roots": {}}, "clientInfo": {"name": "c", "version": "1"}});
        let mut whole = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": sent});
        assert!(!complete_initialize(&mut whole), "nothing was missing");
        assert_eq!(whole["params"], sent);
        let mut partial = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}});
        assert!(complete_initialize(&mut partial));
        assert_eq!(partial["params"]["protocolVersion"], "2025-03-26");

        for mut other in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": [1]}),
            json!([{"method": "initialize"}]),
        ] {
            let before = other.clone();
            assert!(!complete_initialize(&mut other));
            assert_eq!(other, before);
        }
    }
}
