//! First-stage decoding of a stdio line: what rmcp can read, and the JSON-RPC error for what it
//! cannot. rmcp's own codec answers a malformed line with nothing; JSON-RPC says a parse error
//! gets `-32700` with `"id": null`, and a client deserves to hear why its message was refused.

use std::borrow::Cow;

use rmcp::{
    RoleServer,
    model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, JsonRpcMessage, JsonRpcRequest,
        JsonRpcVersion2_0, RequestId,
    },
    service::RxJsonRpcMessage,
};
use serde::Deserialize;
use serde_json::{Value, json, value::RawValue};

pub(crate) enum Decoded {
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

pub(crate) fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

pub(crate) fn decode(line: &[u8]) -> Decoded {
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
