//! What the streamable HTTP endpoint checks around rmcp's service, in two middlewares:
//!
//! - [`refuse_malformed`], outermost, before authentication and before a body byte is read: a
//!   request with two Host headers (RFC 9110 §7.2: 400), or whose Content-Length is over the
//!   bound (413 at once, not after reading the bound's worth).
//! - [`read_message`], just in front of rmcp: the body read whole under the bound (a chunked
//!   body gets its 413 at the bound), an initialize refused with 503 while the most sessions
//!   allowed are open, an initialize that left out fields completed
//!   ([`complete_initialize`]), and a message rmcp cannot read answered as JSON-RPC says — an
//!   error object, with `"id": null` when the id itself is what is wrong — by the same
//!   function that answers it on stdio ([`crate::stdio_framing::decode`]), instead of rmcp's
//!   plain-text 415.

use std::sync::Arc;

use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use http_body_util::BodyExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};

use crate::{
    protocol::complete_initialize,
    stdio_framing::{self, Decoded},
};

/// An initialize body is at most this long to be looked at: one is a few hundred bytes.
const INITIALIZE_MAX_BYTES: usize = 64 * 1024;

/// The start of rmcp's answer to a body that is JSON but not a message it reads (rmcp is pinned
/// exactly; `http_limits.rs` checks that this is still what it says).
const RMCP_UNREADABLE: &[u8] = b"fail to deserialize request body";

/// Refuses what can be refused from the head alone.
pub(crate) async fn refuse_malformed(
    State(max_body_bytes): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if headers.get_all(header::HOST).iter().nth(1).is_some() {
        return plain(StatusCode::BAD_REQUEST, "a request has one Host header\n");
    }
    if let Some(length) = headers.get(header::CONTENT_LENGTH) {
        match length.to_str().ok().and_then(|v| v.parse::<u64>().ok()) {
            Some(n) if n > max_body_bytes as u64 => {
                let why = format!("the body of {n} bytes exceeds the limit of {max_body_bytes}\n");
                return plain(StatusCode::PAYLOAD_TOO_LARGE, &why);
            }
            Some(_) => {}
            None => return plain(StatusCode::BAD_REQUEST, "Content-Length is not a number\n"),
        }
    }
    next.run(request).await
}

/// What [`read_message`] bounds.
#[derive(Clone)]
pub(crate) struct MessageLimits {
    pub(crate) max_body_bytes: usize,
    /// rmcp's sessions, counted before an initialize may open one more.
    pub(crate) sessions: Arc<LocalSessionManager>,
    pub(crate) max_sessions: usize,
}

/// Reads a POST's message whole and hands it to rmcp; answers what rmcp cannot read.
pub(crate) async fn read_message(
    State(limits): State<MessageLimits>,
    request: Request,
    next: Next,
) -> Response {
    let max_body_bytes = limits.max_body_bytes;
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let bytes = match http_body_util::Limited::new(body, max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            let why = format!("the body exceeds the limit of {max_body_bytes} bytes\n");
            return plain(StatusCode::PAYLOAD_TOO_LARGE, &why);
        }
        Err(_) => return plain(StatusCode::BAD_REQUEST, "the body could not be read\n"),
    };
    let opening = opening_initialize(&parts.headers, &bytes);
    if opening.is_some() && limits.sessions.sessions.read().await.len() >= limits.max_sessions {
        let why = format!(
            "the server has the most sessions it keeps open ({}); one closes when it has been idle for a while\n",
            limits.max_sessions
        );
        let mut refused = plain(StatusCode::SERVICE_UNAVAILABLE, &why);
        refused
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("30"));
        return refused;
    }
    let bytes = match opening
        .and_then(|mut message| complete_initialize(&mut message).then(|| message.to_string()))
    {
        Some(completed) => {
            parts
                .headers
                .insert(header::CONTENT_LENGTH, completed.len().into());
            axum::body::Bytes::from(completed)
        }
        None => bytes,
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    let (head, body) = response.into_parts();
    let said = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if !said.starts_with(RMCP_UNREADABLE) {
        return Response::from_parts(head, Body::from(said));
    }
    let refusal = match stdio_framing::decode(&bytes) {
        Decoded::Reply(error) => error,
        // A notification or response: JSON-RPC answers neither, but HTTP must say something,
        // and the MCP transport says a message the server does not accept gets a 4xx.
        Decoded::Ignore | Decoded::Message(_) => json!({
            "jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": "invalid request: a message the server cannot read"},
        }),
    };
    (StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response()
}

/// The message, when it is an initialize that opens a session: without Mcp-Session-Id or
/// MCP-Protocol-Version, which every later request carries.
fn opening_initialize(headers: &HeaderMap, body: &[u8]) -> Option<Value> {
    let could_open_a_session = !headers.contains_key("mcp-session-id")
        && !headers.contains_key("mcp-protocol-version")
        && body.len() <= INITIALIZE_MAX_BYTES;
    if !could_open_a_session {
        return None;
    }
    let message = serde_json::from_slice::<Value>(body).ok()?;
    (message.get("method").and_then(Value::as_str) == Some("initialize")).then_some(message)
}

fn plain(status: StatusCode, why: &str) -> Response {
    (status, why.to_string()).into_response()
}
