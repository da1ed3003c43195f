//! The one place the official SDK (rmcp) meets maljan's tool servers: a `ServerHandler` that
//! answers tools/list and tools/call from a [`ToolServer`]. rmcp does the JSON-RPC session,
//! version negotiation (2024-11-05 … 2025-11-25, and the stateless 2026-07-28 `server/discover`),
//! ping and cancellation; maljan does validation, errors, timeouts and progress.

use std::sync::Arc;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
        ProgressToken, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
    },
    service::{Peer, RequestContext},
};
use serde_json::Value;

use crate::{
    context::ProgressSink,
    registry::RegisteredTool,
    server::{CallOutcome, ToolServer},
};

/// Serves one [`ToolServer`] through rmcp. Cheap to clone: one per HTTP session.
#[derive(Clone)]
pub struct McpHandler {
    server: Arc<ToolServer>,
    tools: Arc<Vec<Tool>>,
}

impl McpHandler {
    pub fn new(server: Arc<ToolServer>) -> Self {
        let tools = Arc::new(tool_descriptors(&server));
        Self { server, tools }
    }
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
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new(self.server.name(), self.server.version());
        info.instructions = self.server.instructions().map(str::to_string);
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| PeerProgress::start(context.peer.clone(), token));
        let sink = progress.clone().map(|p| p as Arc<dyn ProgressSink>);
        let outcome = self
            .server
            .call(&name, args, context.ct.clone(), sink)
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
}

/// A result carries its JSON as text (for every client) and, when it is an object, as
/// structuredContent too. Error results carry only the text: their shape is not the tool's
/// outputSchema, and clients validate structuredContent against it.
pub(crate) fn tool_result(outcome: CallOutcome) -> CallToolResult {
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
