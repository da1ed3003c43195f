//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on the client side.
//!
//! A call whose timeout is at least the server's `task_threshold_s` (60 s unless configured: a
//! call that may take a minute outlasts what proxies and HTTP connections reliably hold), made
//! to a server that declares the extension, declares it for that request alone (the per-request
//! client capabilities in `_meta`). The server decides: a tool that runs as a task answers with a
//! task handle, any other with its result, which the call takes as it is — the fallback needs
//! nothing more. A task is polled with `tasks/get` at the interval the server suggests (held to
//! 50 ms – 5 s) until it ends, its result inlined. The whole call, polls included, is one call of
//! the runtime: under the breaker, the concurrency cap and the call's one deadline, and ledgered
//! once. Input a task asks for is answered by the runtime's input policy through `tasks/update`.
//! A call that times out, is declined, or whose future is dropped cancels its task
//! (`tasks/cancel`), which on a maljan server cancels the tool's token.

use std::{
    collections::BTreeSet,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use rmcp::{
    RoleClient,
    model::{
        CancelTaskParams, CancelTaskRequest, ClientRequest, CreateTaskResult, GetTaskParams,
        GetTaskRequest, InputRequests, JsonObject, RequestMetaObject, ServerResult,
        TASKS_EXTENSION_ID, TaskPayload, UpdateTaskParams, UpdateTaskRequest,
    },
    service::{Peer, PeerRequestOptions},
};
use serde_json::{Value, json};

use super::{Classified, Connection, Reply, Unanswered, client_config, input};
use crate::redact::scrub_urls;

/// The bounds on the polling interval a server suggests.
const MIN_POLL: Duration = Duration::from_millis(50);
const MAX_POLL: Duration = Duration::from_secs(5);
/// How long a tasks/cancel sent for a call that is over may take.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

impl Connection {
    /// Whether the server declared the tasks extension.
    pub fn offers_tasks(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.capabilities.supports_tasks())
    }

    /// How many of this connection's calls the server ran as tasks.
    pub fn tasks_followed(&self) -> u64 {
        self.tasks_followed.load(Ordering::Relaxed)
    }

    /// Whether a call with this timeout is offered to the server as a task.
    pub(super) fn task_eligible(&self, timeout: Duration) -> bool {
        self.task_threshold.is_some_and(|from| timeout >= from) && self.offers_tasks()
    }

    /// Request options that declare the tasks extension for this request alone.
    pub(super) fn task_options(timeout: Duration) -> PeerRequestOptions {
        PeerRequestOptions::with_timeout(timeout).with_meta(declaring_tasks())
    }

    /// Polls a task the server started for a call until it ends or `deadline` passes.
    pub(super) async fn follow_task(
        &self,
        created: CreateTaskResult,
        deadline: Instant,
    ) -> Result<Reply, Unanswered> {
        self.tasks_followed.fetch_add(1, Ordering::Relaxed);
        let id = created.task.task_id;
        let mut guard = CancelTaskOnDrop {
            peer: Some(self.peer.clone()),
            id: id.clone(),
        };
        let began = Instant::now();
        let mut interval = poll_interval(created.task.poll_interval_ms);
        let mut answered = BTreeSet::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // The guard cancels the task as this returns.
                return Err(Unanswered::Timeout(began.elapsed()));
            }
            tokio::time::sleep(interval.min(left)).await;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                continue;
            }
            let get = GetTaskRequest::new(GetTaskParams::new(id.clone()));
            let got = match self
                .task_request(ClientRequest::GetTaskRequest(get), left)
                .await
            {
                Ok(ServerResult::GetTaskResult(got)) => got,
                Ok(_) => {
                    return Ok(Reply::RpcError {
                        code: -32603,
                        message: "the server answered tasks/get with another kind of result".into(),
                    });
                }
                Err(Classified::Unanswered(u)) => return Err(u),
                Err(Classified::Answer(reply)) => return Ok(reply),
            };
            if let Some(ms) = got.task.task.poll_interval_ms {
                interval = poll_interval(Some(ms));
            }
            match got.task.payload {
                TaskPayload::Completed { result } => {
                    guard.peer = None;
                    return Ok(Reply::Result(Value::Object(result)));
                }
                TaskPayload::Failed { error } => {
                    guard.peer = None;
                    return Ok(failed(&error));
                }
                TaskPayload::Cancelled => {
                    guard.peer = None;
                    return Ok(Reply::RpcError {
                        code: -32603,
                        message: "the server cancelled the task before it ended".into(),
                    });
                }
                TaskPayload::InputRequired { input_requests } => {
                    let asked: InputRequests = input_requests
                        .into_iter()
                        .filter(|(key, _)| !answered.contains(key))
                        .collect();
                    if asked.is_empty() {
                        continue;
                    }
                    let keys: Vec<String> = asked.keys().cloned().collect();
                    let asked = serde_json::from_value(
                        json!({"resultType": "input_required", "inputRequests": asked}),
                    )
                    .map_err(|e| Unanswered::Unreachable(format!("unreadable input request: {e}")));
                    // Declined (the guard cancels the task), or answered through tasks/update.
                    let responses = match input::answer(asked?, self.input_policy) {
                        Err(why) => return Ok(Reply::Declined(why)),
                        Ok((None, _)) => continue,
                        Ok((Some(responses), _)) => responses,
                    };
                    answered.extend(keys);
                    let update =
                        UpdateTaskRequest::new(UpdateTaskParams::new(id.clone(), responses));
                    match self
                        .task_request(ClientRequest::UpdateTaskRequest(update), left)
                        .await
                    {
                        Ok(_) => {}
                        Err(Classified::Unanswered(u)) => return Err(u),
                        Err(Classified::Answer(reply)) => return Ok(reply),
                    }
                }
                _ => {}
            }
        }
    }

    /// One tasks/* request, declaring the extension, answered within `timeout`.
    async fn task_request(
        &self,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, Classified> {
        let handle = self
            .peer
            .send_request_with_option(request, Self::task_options(timeout))
            .await
            .map_err(|e| self.classify(e))?;
        handle.await_response().await.map_err(|e| self.classify(e))
    }
}

/// The `_meta` of a request that declares the tasks extension: the client's own capabilities
/// (which a 2026-07-28 request carries anyway) with the extension added.
fn declaring_tasks() -> RequestMetaObject {
    let mut capabilities = client_config().capabilities;
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(TASKS_EXTENSION_ID.to_string(), JsonObject::new());
    let mut meta = RequestMetaObject::default();
    meta.set_client_capabilities(capabilities);
    meta
}

fn poll_interval(suggested_ms: Option<u64>) -> Duration {
    suggested_ms
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(1))
        .clamp(MIN_POLL, MAX_POLL)
}

/// A failed task's JSON-RPC error, as the reply a failed call would have had.
fn failed(error: &JsonObject) -> Reply {
    let code = error.get("code").and_then(Value::as_i64);
    let message = error.get("message").and_then(Value::as_str);
    Reply::RpcError {
        code: code.and_then(|c| i32::try_from(c).ok()).unwrap_or(-32603),
        message: scrub_urls(message.unwrap_or("the task failed")),
    }
}

/// Sends `tasks/cancel` for a task whose call ended before it did (a timeout, a decline, the
/// caller gone), so the server stops working for no one.
struct CancelTaskOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: String,
}

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let cancel = CancelTaskRequest::new(CancelTaskParams::new(std::mem::take(&mut self.id)));
        rt.spawn(async move {
            let sent = peer
                .send_request_with_option(
                    ClientRequest::CancelTaskRequest(cancel),
                    Connection::task_options(CANCEL_WAIT),
                )
                .await;
            if let Ok(handle) = sent {
                let _ = handle.await_response().await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggested_interval_is_held_within_bounds() {
        assert_eq!(poll_interval(Some(1)), MIN_POLL);
        assert_eq!(poll_interval(Some(600_000)), MAX_POLL);
        assert_eq!(poll_interval(Some(500)), Duration::from_millis(500));
        assert_eq!(poll_interval(None), Duration::from_secs(1));
    }

    #[test]
    fn a_request_declares_the_extension_beside_the_clients_own_capabilities() {
        let meta = declaring_tasks();
        let capabilities = meta.client_capabilities().unwrap();
        assert!(capabilities.supports_tasks());
        assert!(capabilities.elicitation.is_some());
    }

    #[test]
    fn a_failed_task_reads_as_the_error_it_carries() {
        let error = json!({"code": -32000, "message": "backend gone"});
        let error = error.as_object().unwrap();
        assert_eq!(
            failed(error),
            Reply::RpcError {
                code: -32000,
                message: "backend gone".into()
            }
        );
        assert!(matches!(
            failed(&JsonObject::new()),
            Reply::RpcError { code: -32603, .. }
        ));
    }
}
