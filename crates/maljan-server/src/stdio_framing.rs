//! Reading one message as JSON-RPC says, where rmcp would not: on stdio every line (framed by
//! [`maljan_protocol::lines`]), and on HTTP a body rmcp refused ([`crate::http_guard`]).
//!
//! rmcp stays silent on a line that is not JSON and drops an over-long line without a word; a
//! client then waits for an answer that never comes. JSON-RPC says a parse error gets `-32700`
//! with `"id": null`, and a refused request deserves to hear why, with its id when it has one.

use rmcp::{
    RoleServer,
    model::{ClientRequest, InitializeRequestParams, JsonRpcMessage, JsonRpcRequest},
    service::RxJsonRpcMessage,
};
use serde_json::{Map, Value, json};

use crate::protocol::complete_initialize;

/// What a line holds, for rmcp or for an answer here.
pub(crate) enum Decoded {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// The line cannot be served; this error response says why.
    Reply(Value),
    /// Nothing to serve or answer: a blank line, or a notification or response rmcp cannot
    /// read (JSON-RPC answers neither).
    Ignore,
}

fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The answer to a line over the bound; `head` is its first bytes, where a request names its id
/// (then the answer carries it, so the caller's request fails at once instead of waiting).
pub(crate) fn too_long(len: usize, max: usize, head: &[u8]) -> Value {
    error_response(
        maljan_protocol::lines::id_in_head(head).unwrap_or(Value::Null),
        -32600,
        &format!("invalid request: a message of {len} bytes exceeds the limit of {max} bytes"),
    )
}

/// Reads one line. A message rmcp reads goes to it unchanged; only a line it cannot read costs
/// more than rmcp's own parse, to find out why (or to complete an initialize that left out
/// fields, as [`complete_initialize`] does on HTTP too).
pub(crate) fn decode(line: &[u8]) -> Decoded {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let line = line.strip_prefix(BOM).unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Decoded::Ignore;
    }
    if let Ok(message) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line)
        && !is_unread_initialize(&message)
    {
        return Decoded::Message(Box::new(message));
    }
    let Ok(text) = std::str::from_utf8(line) else {
        let reason = "parse error: the message is not valid UTF-8";
        return Decoded::Reply(error_response(Value::Null, -32700, reason));
    };
    let mut value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            let reason = format!("parse error: {e}");
            return Decoded::Reply(error_response(Value::Null, -32700, &reason));
        }
    };
    if complete_initialize(&mut value)
        && let Ok(message) = serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value.clone())
        && !is_unread_initialize(&message)
    {
        return Decoded::Message(Box::new(message));
    }
    match value {
        Value::Object(object) => refusal(object),
        Value::Array(_) => invalid_request(Value::Null, "batches are not supported"),
        _ => invalid_request(Value::Null, "a message must be a JSON object"),
    }
}

/// rmcp reads a request it cannot read as its method's own type as a custom request: an
/// initialize whose params it refuses then never starts a session.
fn is_unread_initialize(message: &RxJsonRpcMessage<RoleServer>) -> bool {
    matches!(
        message,
        JsonRpcMessage::Request(JsonRpcRequest {
            request: ClientRequest::CustomRequest(custom),
            ..
        }) if custom.method == "initialize"
    )
}

fn invalid_request(id: Value, why: &str) -> Decoded {
    Decoded::Reply(error_response(
        id,
        -32600,
        &format!("invalid request: {why}"),
    ))
}

/// Why a JSON object is not a message rmcp reads, as JSON-RPC answers it.
fn refusal(object: Map<String, Value>) -> Decoded {
    let method = object.get("method").and_then(Value::as_str);
    // A notification or a response nobody waits for: JSON-RPC answers neither.
    let unanswered = object.contains_key("result") || object.contains_key("error");
    let Some(id) = object.get("id") else {
        return if method.is_some() || unanswered {
            Decoded::Ignore
        } else {
            invalid_request(Value::Null, "no method")
        };
    };
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return invalid_request(Value::Null, "an id must be a string or an integer");
    }
    let id = id.clone();
    let Some(method) = method else {
        return if unanswered {
            Decoded::Ignore
        } else {
            invalid_request(id, "no method")
        };
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid_request(id, "jsonrpc must be \"2.0\"");
    }
    let method = method.to_string();
    let params = object.get("params").cloned().unwrap_or(Value::Null);
    let why = if method == "initialize" {
        serde_json::from_value::<InitializeRequestParams>(params).err()
    } else {
        serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(Value::Object(object)).err()
    };
    let why = why.map_or_else(|| "unreadable request".to_string(), |e| e.to_string());
    let message = format!("invalid params for {method}: {why}");
    Decoded::Reply(error_response(id, -32602, &message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// No line, however malformed, panics the decoder; whatever it answers is a JSON-RPC
        /// error with an id member.
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

    fn reply(line: &[u8]) -> Value {
        match decode(line) {
            Decoded::Reply(v) => v,
            _ => panic!("expected a reply for {:?}", String::from_utf8_lossy(line)),
        }
    }

    #[test]
    fn decoding_answers_as_json_rpc_says() {
        assert_eq!(reply(b"{not json")["error"]["code"], -32700);
        assert_eq!(reply(b"{not json")["id"], Value::Null);
        assert_eq!(reply(b"\xff\xfe")["error"]["code"], -32700);
        assert_eq!(reply(b"\xff\xfe")["id"], Value::Null);
        assert_eq!(reply(b"[1,2]")["error"]["code"], -32600);
        assert_eq!(reply(b"7")["error"]["code"], -32600);
        let bad = reply(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}"#);
        assert_eq!(
            (&bad["id"], &bad["error"]["code"]),
            (&json!(7), &json!(-32602))
        );
        let old = reply(br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#);
        assert_eq!(
            (&old["id"], &old["error"]["code"]),
            (&json!("a"), &json!(-32600))
        );
        for unusable_id in [
            &br#"{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}"#[..],
            br#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
            br#"{"jsonrpc":"2.0","id":[1],"method":"tools/list"}"#,
        ] {
            let v = reply(unusable_id);
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&Value::Null, &json!(-32600))
            );
        }
        let no_method = reply(br#"{"jsonrpc":"2.0","id":3}"#);
        assert_eq!(
            (&no_method["id"], &no_method["error"]["code"]),
            (&json!(3), &json!(-32600))
        );
    }

    #[test]
    fn blank_lines_stray_notifications_and_responses_are_not_answered() {
        for quiet in [
            &b""[..],
            b"  \t",
            br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":5}"#,
            br#"{"jsonrpc":"2.0","id":4,"result":{"unexpected":true},"extra":1}"#,
        ] {
            assert!(
                matches!(decode(quiet), Decoded::Ignore | Decoded::Message(_)),
                "{:?}",
                String::from_utf8_lossy(quiet)
            );
        }
        let with_bom_and_cr = b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r";
        assert!(matches!(decode(with_bom_and_cr), Decoded::Message(_)));
    }

    #[test]
    fn an_initialize_that_names_no_version_is_read() {
        let Decoded::Message(message) =
            decode(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#)
        else {
            panic!("not read")
        };
        let read = serde_json::to_value(&message).unwrap();
        assert_eq!(read["params"]["protocolVersion"], "2025-11-25");
        let partial =
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":7}}}"#;
        assert_eq!(
            reply(partial)["error"]["code"],
            -32602,
            "what was sent stays as sent"
        );
    }
}
