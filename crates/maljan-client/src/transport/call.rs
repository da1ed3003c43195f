//! The two requests the runtime sends on a connection, `tools/list` and `tools/call`, each in an
//! OpenTelemetry client span (`{method} {tool}`, see maljan-telemetry) with its duration in
//! `mcp.client.operation.duration`. A call is measured once, here ([`Measurement`]): the same
//! record goes up to the runtime's Prometheus histogram and the ledger's duration. A call carries its span's `traceparent` in `_meta`, runs
//! under one deadline across its input-required rounds (see `input`), and is cancelled on the
//! server when it times out or its future is dropped.

use std::time::{Duration, Instant};

use maljan_telemetry::{Measurement, Side};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, RequestMetaObject, ServerResult,
};
use serde_json::Value;
use tracing::Instrument as _;

use super::{
    CancelOnDrop, Classified, Connection, ListedTool, Reply, Unanswered, input, result_kind,
};
use crate::transport::PeerRequestOptions;

/// What one round of a call brought.
enum Round {
    Done(Reply),
    InputRequired(rmcp::model::InputRequiredResult),
    /// The server runs the call as a task (see `task`).
    Task(rmcp::model::CreateTaskResult),
}

impl Connection {
    /// `tools/list`, all pages (served from the connection's cache while the server's `ttlMs`
    /// lasts).
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<ListedTool>, Unanswered> {
        let span = maljan_telemetry::operation_span(Side::Client, "tools/list", None, None);
        let started = Instant::now();
        let listed = tokio::time::timeout(timeout, self.peer.list_all_tools())
            .instrument(span.clone())
            .await;
        let result = match listed {
            Err(_) => Err(Unanswered::Timeout(timeout)),
            Ok(Ok(tools)) => Ok(tools.into_iter().map(ListedTool::from_rmcp).collect()),
            Ok(Err(e)) => Err(match self.classify(e) {
                Classified::Unanswered(u) => u,
                Classified::Answer(Reply::RpcError { code, message }) => Unanswered::Unreachable(
                    format!("tools/list failed: JSON-RPC error {code}: {message}"),
                ),
                Classified::Answer(Reply::Unusable(why) | Reply::Declined(why)) => {
                    Unanswered::Unreachable(format!("tools/list failed: {why}"))
                }
                Classified::Answer(Reply::ScopeRequired(scope)) => Unanswered::Unreachable(
                    format!("tools/list failed: the token lacks the OAuth scope '{scope}'"),
                ),
                Classified::Answer(Reply::SignInRequired) => Unanswered::Unreachable(
                    "tools/list failed: the server no longer accepts the stored sign-in (HTTP 401); sign in again".into(),
                ),
                Classified::Answer(Reply::Result(_)) => {
                    Unanswered::Unreachable("tools/list failed".into())
                }
            }),
        };
        if maljan_telemetry::enabled() {
            let error = result.as_ref().err().map(unanswered_type);
            Measurement::since(started, Side::Client, "tools/list", None, error).export(&span);
        }
        result
    }

    /// `tools/call` with a deadline. On timeout the request is cancelled on the server
    /// (`notifications/cancelled`); so is a call whose future is dropped. Also the call's one
    /// measurement, already given to OpenTelemetry.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        timeout: Duration,
    ) -> (Result<Reply, Unanswered>, Measurement) {
        let span = maljan_telemetry::operation_span(Side::Client, "tools/call", Some(name), None);
        let started = Instant::now();
        let mut params = CallToolRequestParams::new(name.to_string());
        if let Some(args) = arguments {
            params = params.with_arguments(args);
        }
        if let Some(tp) = maljan_telemetry::traceparent(&span) {
            params
                .meta
                .get_or_insert_with(RequestMetaObject::default)
                .0
                .set_traceparent(tp);
        }
        let result = self
            .call_rounds(params, started + timeout)
            .instrument(span.clone())
            .await;
        let error = match &result {
            Ok(reply) => reply_type(reply),
            Err(u) => Some(unanswered_type(u)),
        };
        let measured = Measurement::since(started, Side::Client, "tools/call", Some(name), error);
        measured.export(&span);
        (result, measured)
    }

    async fn call_rounds(
        &self,
        mut params: CallToolRequestParams,
        deadline: Instant,
    ) -> Result<Reply, Unanswered> {
        let as_task = self.task_eligible(deadline.saturating_duration_since(Instant::now()));
        for _ in 0..input::MAX_INPUT_ROUNDS {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.call_once(params.clone(), left, as_task).await? {
                Round::Done(reply) => return Ok(reply),
                Round::Task(created) => return self.follow_task(created, deadline).await,
                Round::InputRequired(asked) => match input::answer(asked, self.input_policy) {
                    Ok((responses, state)) => {
                        params.input_responses = responses;
                        params.request_state = state;
                    }
                    Err(why) => return Ok(Reply::Declined(why)),
                },
            }
        }
        Ok(Reply::Declined(format!(
            "the server still asked for input after {} declined rounds; {}",
            input::MAX_INPUT_ROUNDS,
            input::DECLINE_REASON
        )))
    }

    async fn call_once(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
        as_task: bool,
    ) -> Result<Round, Unanswered> {
        if timeout.is_zero() {
            return Err(Unanswered::Timeout(timeout));
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .peer
            .send_request_with_option(
                request,
                if as_task {
                    Self::task_options(timeout)
                } else {
                    PeerRequestOptions::with_timeout(timeout)
                },
            )
            .await
            .map_err(|e| self.classify(e));
        let handle = match handle {
            Ok(h) => h,
            Err(Classified::Unanswered(u)) => return Err(u),
            // Refused before it was sent (a 403 for the token's scope): an answer all the same.
            Err(Classified::Answer(reply @ (Reply::ScopeRequired(_) | Reply::SignInRequired))) => {
                return Ok(Round::Done(reply));
            }
            Err(Classified::Answer(_)) => {
                return Err(Unanswered::Gone("the request could not be sent".into()));
            }
        };
        let mut guard = CancelOnDrop {
            peer: Some(self.peer.clone()),
            id: handle.id.clone(),
        };
        let sent = Instant::now();
        let answer = handle.await_response().await;
        // await_response sends its own cancellation on timeout; an answer needs none.
        guard.peer = None;
        match answer {
            Ok(ServerResult::CallToolResult(r)) => Ok(Round::Done(Reply::Result(
                serde_json::to_value(&r).unwrap_or(Value::Null),
            ))),
            Ok(ServerResult::InputRequiredResult(asked)) => Ok(Round::InputRequired(asked)),
            Ok(ServerResult::CreateTaskResult(created)) if as_task => Ok(Round::Task(created)),
            Ok(other) => Ok(Round::Done(Reply::RpcError {
                code: -32603,
                message: format!(
                    "the server answered tools/call with another kind of result ({})",
                    result_kind(&other)
                ),
            })),
            Err(e) => {
                match self.classify(e) {
                    Classified::Answer(reply) => Ok(Round::Done(reply)),
                    Classified::Unanswered(Unanswered::Timeout(waited)) => {
                        let seen = self.faults.as_ref().and_then(|f| f.since(sent));
                        Err(seen.map_or(Unanswered::Timeout(waited), |seen| {
                            Unanswered::Unreadable { waited, seen }
                        }))
                    }
                    Classified::Unanswered(u) => Err(u),
                }
            }
        }
    }
}

/// The conventions' `error.type` of a reply: `tool_error` for a result with isError, the
/// JSON-RPC code for a protocol error.
fn reply_type(reply: &Reply) -> Option<String> {
    match reply {
        Reply::Result(v) => {
            (v.get("isError") == Some(&Value::Bool(true))).then(|| "tool_error".into())
        }
        Reply::RpcError { code, .. } => Some(code.to_string()),
        Reply::Unusable(_) => Some("unusable_answer".into()),
        Reply::Declined(_) => Some("input_declined".into()),
        Reply::ScopeRequired(_) => Some("insufficient_scope".into()),
        Reply::SignInRequired => Some("invalid_token".into()),
    }
}

fn unanswered_type(u: &Unanswered) -> String {
    match u {
        Unanswered::Timeout(_) => "timeout",
        Unanswered::Gone(_) => "connection_gone",
        Unanswered::Unreachable(_) => "unreachable",
        Unanswered::Unreadable { .. } => "unreadable_answer",
    }
    .into()
}
