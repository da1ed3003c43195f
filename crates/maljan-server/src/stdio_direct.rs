//! Tool calls answered on stdio beside rmcp, without its per-request machinery.
//!
//! rmcp runs every request as a spawned task with two cancellation tokens, hands the response
//! through a channel back to its service loop and sends it from yet another spawned task. For a
//! call whose tool works for a few microseconds, that machinery was most of the server's own CPU
//! per call (bench/serve_bench.md). So once a session (of a version before 2026-07-28) is
//! initialized, a plain `tools/call` — a tool this server has, no progress token — is run here:
//! polled once where it was read and answered at once when it finishes on that poll (small file
//! work does), else spawned, cancellable by notifications/cancelled, and answered when done. A
//! cancelled call gets no response, and at end of input calls still running get five seconds to
//! answer, as rmcp does for its own. Everything else (the handshake, lists, ping, calls that want
//! progress or name an unknown tool) still goes to rmcp, and tests check that both paths answer
//! the same bytes.

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
    time::Duration,
};

use rmcp::{
    RoleServer,
    model::{CallToolRequest, ProtocolVersion, RequestId, RequestMetaObject, ServerResult},
    service::TxJsonRpcMessage,
};
use serde_json::{Map, Value};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::{protocol::tool_result, server::ToolServer};

/// How long calls still running at end of input may take to answer (rmcp's own drain time).
const DRAIN: Duration = Duration::from_secs(5);

/// Where whole message lines go out. Lines never interleave.
pub(crate) trait LineSink: Send + Sync + 'static {
    fn send_line(&self, line: Vec<u8>);
}

pub(crate) type Sink = Arc<dyn LineSink>;

/// Serialises `message` as one line to `sink`.
pub(crate) fn send(sink: &dyn LineSink, message: &impl serde::Serialize) {
    match serde_json::to_vec(message) {
        Ok(mut line) => {
            line.push(b'\n');
            sink.send_line(line);
        }
        Err(e) => tracing::error!("cannot serialise a message: {e}"),
    }
}

type Pending = Arc<Mutex<HashMap<RequestId, CancellationToken>>>;

pub(crate) struct DirectCalls {
    server: Arc<ToolServer>,
    sink: Sink,
    /// Calls started here and not yet answered; a cancelled one is removed, so its answer is
    /// dropped.
    pending: Pending,
    spawned: JoinSet<()>,
    /// Whether the client's initialize asked for a version before 2026-07-28. rmcp shapes
    /// results differently from that version on, and only the older shape is made here.
    legacy_session: bool,
}

impl DirectCalls {
    pub(crate) fn new(server: Arc<ToolServer>, sink: Sink) -> Self {
        Self {
            server,
            sink,
            pending: Arc::default(),
            spawned: JoinSet::new(),
            legacy_session: false,
        }
    }

    /// The version the client's initialize request asked for.
    pub(crate) fn client_asked(&mut self, version: &ProtocolVersion) {
        // ISO dates compare lexically as they do chronologically (rmcp compares them so too).
        self.legacy_session = version.as_str() < ProtocolVersion::V_2026_07_28.as_str();
    }

    /// Answers a ping here when the session's result shape is the one made here.
    pub(crate) fn ping(&self, id: RequestId) -> Option<RequestId> {
        if !self.legacy_session {
            return Some(id);
        }
        let mut result = ServerResult::empty(());
        result.strip_result_type_for_legacy_peer();
        send(
            &*self.sink,
            &TxJsonRpcMessage::<RoleServer>::response(result, id),
        );
        None
    }

    /// Runs `call` here when it can be answered here; otherwise gives it back for rmcp. Must be
    /// called inside the runtime's context (a call that does not finish at once is spawned).
    pub(crate) fn run(
        &mut self,
        id: RequestId,
        call: CallToolRequest,
    ) -> Option<(RequestId, CallToolRequest)> {
        if !self.can_answer(&call) {
            return Some((id, call));
        }
        while self.spawned.try_join_next().is_some() {}
        let params = call.params;
        let cancel = CancellationToken::new();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), cancel.clone());
        let mut answer = Box::pin(answer(
            self.server.clone(),
            self.sink.clone(),
            self.pending.clone(),
            id,
            params.name.into_owned(),
            params.arguments.unwrap_or_default(),
            cancel,
        ));
        // Polled once here, with a waker that does nothing: a call that is not done is handed to
        // the runtime, whose first poll of a new task registers the real waker.
        if poll_once(answer.as_mut()).is_pending() {
            self.spawned.spawn(answer);
        }
        None
    }

    fn can_answer(&self, call: &CallToolRequest) -> bool {
        let params = &call.params;
        // A progress token needs rmcp's notifications; a version in `_meta` is the stateless
        // style, whose result shape rmcp owns.
        let needs_rmcp = |meta: &RequestMetaObject| {
            meta.get_progress_token().is_some() || meta.protocol_version().is_some()
        };
        self.legacy_session
            && !params.meta.as_ref().is_some_and(needs_rmcp)
            && !call
                .extensions
                .get::<RequestMetaObject>()
                .is_some_and(needs_rmcp)
            && params.input_responses.is_none()
            && params.request_state.is_none()
            && self.server.registry().get(&params.name).is_some()
    }

    /// Cancels the call `id` names when it is running here; `false` leaves the notification
    /// to rmcp.
    pub(crate) fn cancel(&self, id: &RequestId) -> bool {
        let found = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        found.map(|token| token.cancel()).is_some()
    }

    /// At end of input: lets calls still running answer for a while, then stops them.
    pub(crate) async fn finish(&mut self) {
        let drained = tokio::time::timeout(DRAIN, async {
            while self.spawned.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("calls still running at end of input were stopped");
            let pending =
                std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
            pending.values().for_each(CancellationToken::cancel);
            self.spawned.shutdown().await;
        }
    }
}

fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

async fn answer(
    server: Arc<ToolServer>,
    sink: Sink,
    pending: Pending,
    id: RequestId,
    tool: String,
    args: Map<String, Value>,
    cancel: CancellationToken,
) {
    let outcome = server.call(&tool, args, cancel, None).await;
    let still_wanted = pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id)
        .is_some();
    let Some(outcome) = outcome.filter(|_| still_wanted) else {
        return;
    };
    // The shape rmcp's handler gives a session before 2026-07-28.
    let mut result = ServerResult::CallToolResult(tool_result(outcome));
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    send(
        &*sink,
        &TxJsonRpcMessage::<RoleServer>::response(result, id),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Registry, ToolError, ToolMeta};
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    struct Add {
        a: i64,
        b: i64,
    }
    #[derive(Deserialize, JsonSchema)]
    struct Sleep {
        ms: u64,
    }

    #[derive(Default)]
    struct Collected(Mutex<Vec<Value>>);

    impl LineSink for Collected {
        fn send_line(&self, line: Vec<u8>) {
            assert_eq!(line.last(), Some(&b'\n'));
            self.0
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&line).unwrap());
        }
    }

    impl Collected {
        fn take(&self) -> Vec<Value> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    fn calls() -> (DirectCalls, Arc<Collected>) {
        let mut registry = Registry::new();
        registry.add(ToolMeta::new("add", "Adds"), |_ctx, a: Add| async move {
            Ok::<_, ToolError>(json!({"sum": a.a + a.b}))
        });
        registry.add(
            ToolMeta::new("sleep", "Sleeps"),
            |_ctx, a: Sleep| async move {
                tokio::time::sleep(Duration::from_millis(a.ms)).await;
                Ok::<_, ToolError>(json!({"slept": a.ms}))
            },
        );
        let sink = Arc::new(Collected::default());
        let server = ToolServer::new("t", "1", registry);
        let mut direct = DirectCalls::new(server, sink.clone());
        direct.client_asked(&ProtocolVersion::V_2025_06_18);
        (direct, sink)
    }

    fn call(params: Value) -> CallToolRequest {
        serde_json::from_value(json!({"method": "tools/call", "params": params})).unwrap()
    }

    #[tokio::test]
    async fn a_plain_call_is_answered_at_once_in_the_legacy_shape() {
        let (mut direct, sink) = calls();
        let plain = call(json!({"name": "add", "arguments": {"a": 1, "b": 2}}));
        assert!(direct.run(RequestId::Number(7), plain).is_none(), "taken");
        let answers = sink.take();
        assert_eq!(answers.len(), 1, "answered on its first poll");
        assert_eq!(answers[0]["id"], 7);
        assert_eq!(answers[0]["result"]["structuredContent"]["sum"], 3);
        assert!(
            answers[0]["result"].get("resultType").is_none(),
            "{answers:?}"
        );
        assert!(direct.ping(RequestId::Number(8)).is_none());
        assert_eq!(
            sink.take(),
            vec![json!({"jsonrpc": "2.0", "id": 8, "result": {}})]
        );
    }

    #[tokio::test]
    async fn progress_unknown_tools_and_newer_sessions_go_to_rmcp() {
        let (mut direct, sink) = calls();
        let id = || RequestId::Number(1);
        let progress = call(
            json!({"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": {"progressToken": 1}}),
        );
        assert!(direct.run(id(), progress).is_some());
        assert!(direct.run(id(), call(json!({"name": "nope"}))).is_some());
        direct.client_asked(&ProtocolVersion::V_2026_07_28);
        let plain = call(json!({"name": "add", "arguments": {"a": 1, "b": 2}}));
        assert!(direct.run(id(), plain).is_some());
        assert!(direct.ping(id()).is_some());
        assert!(sink.take().is_empty());
    }

    #[tokio::test]
    async fn a_cancelled_call_stops_and_is_not_answered_but_a_running_one_is() {
        let (mut direct, sink) = calls();
        let slow = call(json!({"name": "sleep", "arguments": {"ms": 60_000}}));
        assert!(direct.run(RequestId::Number(1), slow).is_none());
        let short = call(json!({"name": "sleep", "arguments": {"ms": 50}}));
        assert!(direct.run(RequestId::Number(2), short).is_none());
        assert!(sink.take().is_empty(), "neither is done yet");
        assert!(direct.cancel(&RequestId::Number(1)));
        assert!(!direct.cancel(&RequestId::Number(1)), "already gone");
        let started = std::time::Instant::now();
        direct.finish().await;
        assert!(
            started.elapsed() < DRAIN,
            "the cancelled call was stopped, not waited for"
        );
        let answers = sink.take();
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], 2);
    }
}
