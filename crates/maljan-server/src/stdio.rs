//! Newline-delimited JSON-RPC on stdin/stdout, in front of rmcp.
//!
//! Framing and first-stage decoding live here: rmcp's own codec answers a malformed line with
//! nothing and drops long lines silently, while JSON-RPC says a parse error gets `-32700` with
//! `"id": null`, and a client deserves to hear why its message was refused. Plain tool calls and
//! pings are answered here too (`stdio_direct`); every other message goes to rmcp unchanged.
//!
//! On this process's stdin, lines are read by a thread of their own with blocking reads, and
//! answers are written with blocking writes: a plain call then costs one `read` and one `write`
//! and never touches the runtime's reactor (no `epoll_wait`, no task wake-ups). Measured per
//! call, that took the server's CPU from 16.5 to 12.5 µs (user) against answering the same calls
//! on the runtime thread (bench/serve_bench.md). Any other byte stream (`serve_io`) is read by a
//! task on the runtime.

use std::{
    borrow::Cow,
    io::{BufReader, Write},
    os::fd::AsFd,
    sync::Arc,
};

use rmcp::{
    RoleServer,
    model::{
        CallToolRequest, CallToolRequestParams, ClientNotification, ClientRequest, JsonRpcMessage,
        JsonRpcNotification, JsonRpcRequest, JsonRpcVersion2_0, RequestId, RequestMetaObject,
    },
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use serde::Deserialize;
use serde_json::{Value, json, value::RawValue};
use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt},
    sync::mpsc,
};

use crate::{
    protocol::McpHandler,
    server::ToolServer,
    stdio_direct::{DirectCalls, LineSink, Sink},
    stdio_lines::{AsyncLines, BlockingLines, Line},
};

/// Options for serving on stdio.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// The longest message accepted, in bytes (one line). Longer lines are answered with an error
    /// and skipped.
    pub max_line_bytes: usize,
}

impl Default for StdioOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Serves `server` on this process's stdin/stdout until stdin closes.
pub async fn serve_stdio(server: Arc<ToolServer>, options: StdioOptions) -> anyhow::Result<()> {
    let sink: Sink = Arc::new(Stdout);
    let (to_rmcp, incoming) = mpsc::unbounded_channel();
    let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let mut front = Frontend::new(server.clone(), sink.clone(), options.max_line_bytes);
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .name("maljan-stdin".into())
        .spawn(move || {
            let mut lines = BlockingLines::new(
                BufReader::with_capacity(256 * 1024, stdin),
                options.max_line_bytes,
            );
            loop {
                let line = match lines.next() {
                    Ok(Line::Eof) => break,
                    Ok(line) => line,
                    Err(e) => {
                        tracing::warn!("stdin failed: {e}");
                        break;
                    }
                };
                let _in_runtime = runtime.enter();
                if let Some(message) = front.line(line)
                    && to_rmcp.send(message).is_err()
                {
                    break;
                }
            }
            runtime.block_on(front.finish());
        })?;
    serve_rmcp(server, LineTransport { incoming, sink }).await
}

/// Serves `server` on any byte stream pair (a pipe, a socket; tests use duplex streams).
pub async fn serve_io<R, W>(
    server: Arc<ToolServer>,
    reader: R,
    writer: W,
    options: StdioOptions,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_writer, outgoing) = mpsc::unbounded_channel();
    let written = tokio::spawn(write_lines(outgoing, writer));
    let sink: Sink = Arc::new(ToWriter(to_writer));
    let (to_rmcp, incoming) = mpsc::unbounded_channel();
    let mut front = Frontend::new(server.clone(), sink.clone(), options.max_line_bytes);
    tokio::spawn(async move {
        let mut lines = AsyncLines::new(reader, options.max_line_bytes);
        loop {
            let line = match lines.next().await {
                Ok(Line::Eof) => break,
                Ok(line) => line,
                Err(e) => {
                    tracing::warn!("input failed: {e}");
                    break;
                }
            };
            if let Some(message) = front.line(line)
                && to_rmcp.send(message).is_err()
            {
                break;
            }
        }
        front.finish().await;
    });
    serve_rmcp(server, LineTransport { incoming, sink }).await?;
    // Every sender is gone once rmcp and the reader are done: the writer drains and stops.
    let _ = written.await;
    Ok(())
}

async fn serve_rmcp(server: Arc<ToolServer>, transport: LineTransport) -> anyhow::Result<()> {
    tracing::info!(
        server = server.name(),
        tools = server.listed_tools().count(),
        "serving on stdio"
    );
    match rmcp::serve_server(McpHandler::new(server), transport).await {
        Ok(running) => {
            running.waiting().await?;
        }
        // The client went away before finishing the handshake: a normal end, not a failure.
        Err(e) => tracing::info!("session ended before initialization: {e}"),
    }
    Ok(())
}

/// This process's stdout. std's lock keeps each line whole; a write waits while the client is
/// not reading (a pipe full of answers is the client's to drain).
struct Stdout;

impl LineSink for Stdout {
    fn send_line(&self, line: Vec<u8>) {
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(&line).and_then(|()| out.flush()) {
            tracing::debug!("stdout closed: {e}");
        }
    }
}

/// Lines for a writer task (an async writer cannot be written from a blocking caller).
struct ToWriter(mpsc::UnboundedSender<Vec<u8>>);

impl LineSink for ToWriter {
    fn send_line(&self, line: Vec<u8>) {
        let _ = self.0.send(line);
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut lines: mpsc::UnboundedReceiver<Vec<u8>>,
    mut writer: W,
) {
    while let Some(line) = lines.recv().await {
        if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
            break;
        }
    }
}

/// rmcp's side of the session: the messages the front end passed on, and the sink for its own.
struct LineTransport {
    incoming: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleServer>>,
    sink: Sink,
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "maljan-stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        crate::stdio_direct::send(&*self.sink, &item);
        std::future::ready(Ok(()))
    }

    /// Cancel-safe: a message is either still in the channel or returned.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Reads each line before rmcp does: answers what cannot be served, takes plain calls and pings,
/// and passes on the rest.
struct Frontend {
    direct: DirectCalls,
    sink: Sink,
    max_line_bytes: usize,
    /// rmcp ends a session whose first message is not a request; until a request has been
    /// passed on, stray notifications and responses are dropped here (they need no answer).
    request_seen: bool,
    /// Set once the client has sent notifications/initialized: from then on plain tool calls
    /// and pings are answered by `direct`.
    initialized: bool,
}

impl Frontend {
    fn new(server: Arc<ToolServer>, sink: Sink, max_line_bytes: usize) -> Self {
        Self {
            direct: DirectCalls::new(server, sink.clone()),
            sink,
            max_line_bytes,
            request_seen: false,
            initialized: false,
        }
    }

    /// The message for rmcp in `line`, if any. Must run inside the runtime's context.
    fn line(&mut self, line: Line) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = match line {
            Line::Message(line) => line,
            Line::TooLong(len) => {
                tracing::warn!(bytes = len, "refused a message over the size limit");
                let max = self.max_line_bytes;
                self.write_raw(error_response(
                    Value::Null,
                    -32600,
                    &format!("message of {len} bytes exceeds the limit of {max} bytes"),
                ));
                return None;
            }
            Line::Eof => return None,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        match decode(&line) {
            Decoded::Message(message) => {
                let message = self.route(*message)?;
                let is_request = matches!(message, RxJsonRpcMessage::<RoleServer>::Request(_));
                if !is_request && !self.request_seen {
                    return None;
                }
                self.request_seen |= is_request;
                Some(message)
            }
            Decoded::Reply(reply) => {
                self.write_raw(reply);
                None
            }
            Decoded::Ignore => None,
        }
    }

    /// The message for rmcp, or `None` when it was answered here.
    fn route(
        &mut self,
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: ClientRequest::CallToolRequest(call),
                ..
            }) if self.initialized => {
                let (id, call) = self.direct.run(id, call)?;
                Some(JsonRpcMessage::Request(JsonRpcRequest::new(
                    id,
                    ClientRequest::CallToolRequest(call),
                )))
            }
            JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: ClientRequest::PingRequest(ping),
                ..
            }) if self.initialized
                && ping
                    .extensions
                    .get::<RequestMetaObject>()
                    .is_none_or(|m| m.protocol_version().is_none()) =>
            {
                let id = self.direct.ping(id)?;
                Some(JsonRpcMessage::Request(JsonRpcRequest::new(
                    id,
                    ClientRequest::PingRequest(ping),
                )))
            }
            JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::InitializeRequest(ref init),
                ..
            }) => {
                self.direct.client_asked(&init.params.protocol_version);
                Some(message)
            }
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::InitializedNotification(_),
                ..
            }) => {
                self.initialized = true;
                Some(message)
            }
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(ref note),
                ..
            }) if note
                .params
                .request_id
                .as_ref()
                .is_some_and(|id| self.direct.cancel(id)) =>
            {
                None
            }
            other => Some(other),
        }
    }

    /// Writes an error reply rmcp never saw.
    fn write_raw(&self, value: Value) {
        let mut line = value.to_string().into_bytes();
        line.push(b'\n');
        self.sink.send_line(line);
    }

    async fn finish(&mut self) {
        self.direct.finish().await;
    }
}

enum Decoded {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// The line cannot be served; this error response says why.
    Reply(Value),
    /// A notification or response rmcp cannot read: JSON-RPC answers neither.
    Ignore,
}

/// A `tools/call` request with nothing else in it: the message a busy server reads most.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallLine<'a> {
    #[allow(dead_code)] // read only to check it says "2.0"
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: &'a RawValue,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainCallParams {
    name: String,
    arguments: Option<rmcp::model::JsonObject>,
}

/// Reads a tool call straight as rmcp's `tools/call` request. rmcp's general reader tries its
/// ~20 request types in turn (an untagged enum) and builds and drops an error for each miss,
/// about a tenth of the server's own CPU per call (bench/serve_bench.md). The request is read by
/// rmcp's own `CallToolRequest` deserializer (`_meta`, progress tokens and all), so the message
/// is the same one; anything else, or any call it cannot read, takes the general path.
fn decode_tool_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let call: ToolCallLine = serde_json::from_slice(line).ok()?;
    if call.method != "tools/call" {
        return None;
    }
    // The usual call has a name and arguments, nothing else: its request is built here, without
    // the buffering rmcp's reader does to find `_meta`.
    if let Ok(plain) = serde_json::from_str::<PlainCallParams>(call.params.get()) {
        let mut params = CallToolRequestParams::new(plain.name);
        params.arguments = plain.arguments;
        return Some(JsonRpcMessage::Request(JsonRpcRequest::new(
            call.id,
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
        )));
    }
    let request = format!(
        r#"{{"method":"tools/call","params":{}}}"#,
        call.params.get()
    );
    let request: CallToolRequest = serde_json::from_str(&request).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        call.id,
        ClientRequest::CallToolRequest(request),
    )))
}

fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn decode(line: &[u8]) -> Decoded {
    if let Some(call) = decode_tool_call(line) {
        return Decoded::Message(Box::new(call));
    }
    if let Ok(message) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        return Decoded::Message(Box::new(message));
    }
    // Work out why, to answer as JSON-RPC says.
    let Ok(text) = std::str::from_utf8(line) else {
        return Decoded::Reply(error_response(
            Value::Null,
            -32700,
            "parse error: the message is not valid UTF-8",
        ));
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Decoded::Reply(error_response(
                Value::Null,
                -32700,
                &format!("parse error: {e}"),
            ));
        }
    };
    let Value::Object(object) = value else {
        let what = if value.is_array() {
            "batches are not supported"
        } else {
            "a message must be a JSON object"
        };
        return Decoded::Reply(error_response(
            Value::Null,
            -32600,
            &format!("invalid request: {what}"),
        ));
    };
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    match (id, object.get("method").and_then(Value::as_str)) {
        (None, Some(_)) => Decoded::Ignore,
        (Some(id), Some(method)) => {
            let error = match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(Value::Object(
                object.clone(),
            )) {
                Err(e) => e.to_string(),
                Ok(_) => "unreadable request".to_string(),
            };
            if object.get("jsonrpc") != Some(&Value::String("2.0".into())) {
                return Decoded::Reply(error_response(
                    id,
                    -32600,
                    "invalid request: jsonrpc must be \"2.0\"",
                ));
            }
            Decoded::Reply(error_response(
                id,
                -32602,
                &format!("invalid params for {method}: {error}"),
            ))
        }
        (Some(_), None) if object.contains_key("result") || object.contains_key("error") => {
            Decoded::Ignore
        }
        (id, None) => Decoded::Reply(error_response(
            id.unwrap_or(Value::Null),
            -32600,
            "invalid request: no method",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The general reader's view of a line (what rmcp alone would have made of it).
    fn general(line: &str) -> Option<Value> {
        serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(line)
            .ok()
            .map(|m| serde_json::to_value(m).unwrap())
    }

    #[test]
    fn a_tool_call_reads_the_same_on_the_fast_path() {
        let calls = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"FA_line_count","arguments":{"file_path":"/x"}}}"#,
            r#"{"id":"a-b","method":"tools/call","jsonrpc":"2.0","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"progressToken":"p1","x":[1,2]}}}"#,
            r#"{"jsonrpc":"2.0","id":-3,"method":"tools\/call","params":{"name":"\u0074","arguments":{"s":"\n\"q\""}}}"#,
        ];
        for line in calls {
            let fast = decode_tool_call(line.as_bytes()).expect(line);
            assert_eq!(
                Some(serde_json::to_value(fast).unwrap()),
                general(line),
                "{line}"
            );
        }
        // The meta travels as rmcp's general reader carries it: in the request's extensions.
        let Some(JsonRpcMessage::Request(r)) = decode_tool_call(calls[2].as_bytes()) else {
            panic!("not a request")
        };
        let ClientRequest::CallToolRequest(call) = r.request else {
            panic!("not a call")
        };
        let meta = call
            .extensions
            .get::<rmcp::model::RequestMetaObject>()
            .expect("meta");
        let token = meta.get_progress_token().expect("a progress token");
        assert_eq!(serde_json::to_value(token).unwrap(), json!("p1"));
    }

    #[test]
    fn anything_unusual_leaves_the_fast_path() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        ] {
            assert!(decode_tool_call(line.as_bytes()).is_none(), "{line}");
        }
    }

    proptest! {
        /// Whatever the fast path accepts, the general reader reads the same way.
        #[test]
        fn the_fast_path_agrees_with_rmcp(
            id in prop_oneof![any::<i64>().prop_map(Value::from), "[a-z0-9-]{0,12}".prop_map(Value::from)],
            name in ".{0,20}",
            args in proptest::option::of(proptest::collection::btree_map("[a-z_]{1,8}", any::<i32>(), 0..4)),
            token in proptest::option::of(any::<u32>()),
        ) {
            let mut params = json!({"name": name});
            if let Some(args) = args {
                params["arguments"] = json!(args);
            }
            if let Some(token) = token {
                params["_meta"] = json!({"progressToken": token});
            }
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string();
            let fast = decode_tool_call(line.as_bytes()).map(|m| serde_json::to_value(m).unwrap());
            prop_assert!(fast.is_some());
            prop_assert_eq!(fast, general(&line));
        }

        /// No line, however malformed, panics the decoder; whatever it answers is a JSON-RPC error.
        #[test]
        fn any_line_decodes_or_gets_a_json_rpc_error(line in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Decoded::Reply(v) = decode(&line) {
                prop_assert_eq!(&v["jsonrpc"], "2.0");
                prop_assert!(v["error"]["code"].is_i64());
                prop_assert!(v.get("id").is_some());
            }
        }

        #[test]
        fn json_shaped_lines_never_panic(method in "[a-z/]{0,20}", id in proptest::option::of(any::<i64>()), params in "[\\[\\]{}0-9a-z\":,]{0,40}") {
            let line = match id {
                Some(id) => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#),
                None => format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params}}}"#),
            };
            let _ = decode(line.as_bytes());
        }
    }

    #[test]
    fn decoding_answers_as_json_rpc_says() {
        let reply = |line: &[u8]| match decode(line) {
            Decoded::Reply(v) => v,
            _ => panic!("expected a reply for {:?}", String::from_utf8_lossy(line)),
        };
        assert_eq!(reply(b"{not json")["error"]["code"], -32700);
        assert_eq!(reply(b"{not json")["id"], Value::Null);
        assert_eq!(reply(b"\xff\xfe")["error"]["code"], -32700);
        assert_eq!(reply(b"[1,2]")["error"]["code"], -32600);
        let bad = reply(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}"#);
        assert_eq!(bad["id"], 7);
        assert_eq!(bad["error"]["code"], -32602);
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#),
            Decoded::Message(_) | Decoded::Ignore
        ));
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Decoded::Message(_)
        ));
    }
}
