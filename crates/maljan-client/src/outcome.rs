//! Reading a tool's answer: success, or an error that names its remedy.
//!
//! An `isError` result is read, in order, as: the maljan shape
//! `{"error":{"code","message","remediation"},"tool"}` (in `structuredContent` or as JSON text), a
//! flat `{"error":"text"}`, `{"tool_error", "detail"|"type"}`, or plain text — the last three become
//! `tool_failed` with their message. A result without `isError` is a success unless it carries the
//! full maljan error shape (an object with a string `code`), which is read as the error it is.
//! Unknown codes are kept as written and get the `tool_failed` remedy.
//!
//! A call's outcome as its caller and the ledger see it is a [`CallRecord`].

use maljan_protocol::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A failed call, as the ledger and the caller see it: the wire convention's error type, the one
/// a maljan server returns, read back from its JSON as it was written
/// ([`ToolError::from_json`](maljan_protocol::ToolError::from_json)).
pub use maljan_protocol::ToolError as CallError;

/// One call as its caller sees it (and as the ledger holds it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub ev_id: String,
    pub job_id: String,
    pub server: String,
    pub tool: String,
    /// The arguments as the caller wrote them (before any sample-path rewriting).
    pub args: Value,
    pub ok: bool,
    /// The `CallToolResult` as the server sent it (also for a tool's own error).
    pub result: Option<Value>,
    pub error: Option<CallError>,
    pub started_at: String,
    pub wait_ms: f64,
    pub duration_ms: f64,
    pub trial: bool,
    /// Set when the ledger could not record the call (the call itself still happened).
    pub ledger_error: Option<String>,
}

impl CallRecord {
    /// The result's text content, joined.
    pub fn text(&self) -> String {
        self.result
            .as_ref()
            .and_then(|r| r.get("content"))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// `structuredContent`, else the text parsed as JSON.
    pub fn json(&self) -> Option<Value> {
        let r = self.result.as_ref()?;
        if let Some(s) = r.get("structuredContent") {
            return Some(s.clone());
        }
        serde_json::from_str(&self.text()).ok()
    }
}

/// Reads a `CallToolResult` (as JSON) into success or a [`CallError`].
pub fn read_result(result: &Value) -> Result<(), CallError> {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let structured = result.get("structuredContent");
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|c| c.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();

    // The full maljan shape, wherever it is.
    let parsed_texts: Vec<Value> = texts
        .iter()
        .filter_map(|t| serde_json::from_str::<Value>(t.trim()).ok())
        .collect();
    for candidate in structured.into_iter().chain(parsed_texts.iter()) {
        if let Some(e) = CallError::from_json(candidate) {
            return Err(e);
        }
    }
    if !is_error {
        return Ok(());
    }
    for candidate in structured.into_iter().chain(parsed_texts.iter()) {
        if let Some(e) = loose_shape(candidate) {
            return Err(e);
        }
    }
    let text = texts.join("\n");
    let message = if text.trim().is_empty() {
        "the tool reported an error without a message".to_string()
    } else {
        text
    };
    Err(CallError::new(ErrorCode::ToolFailed, message))
}

fn loose_shape(v: &Value) -> Option<CallError> {
    if let Some(msg) = v.get("error").and_then(Value::as_str) {
        return Some(CallError::new(ErrorCode::ToolFailed, msg));
    }
    if let Some(kind) = v.get("tool_error") {
        let detail = v
            .get("detail")
            .or_else(|| v.get("type"))
            .and_then(Value::as_str);
        let msg = match (kind.as_str(), detail) {
            (Some(k), Some(d)) => format!("{k}: {d}"),
            (Some(k), None) => k.to_string(),
            (None, Some(d)) => d.to_string(),
            (None, None) => kind.to_string(),
        };
        return Some(CallError::new(ErrorCode::ToolFailed, msg));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(t: &str, is_error: bool) -> Value {
        json!({"content":[{"type":"text","text":t}],"isError":is_error})
    }

    #[test]
    fn the_maljan_shape_is_read_with_its_remedy() {
        let r = text(
            r#"{"error":{"code":"no_such_file","message":"gone","remediation":"look again"},"tool":"t"}"#,
            true,
        );
        let e = read_result(&r).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str(), e.remediation.as_str()),
            (ErrorCode::NoSuchFile, "gone", "look again")
        );
        let r = json!({"content":[],"structuredContent":{"error":{"code":"quota","message":"m"}},"isError":true});
        let e = read_result(&r).unwrap_err();
        assert_eq!(e.code.as_str(), "quota");
        assert_eq!(e.remediation, ErrorCode::ToolFailed.default_remediation());
    }

    /// A maljan server sends a tool's error as the text of an isError result (its JSON, the
    /// protocol crate's shape); the client reads back the same error, remedy and all.
    #[test]
    fn an_error_as_a_maljan_server_writes_it_reads_back_the_same() {
        let written = CallError::path_outside_roots("/etc is outside the roots")
            .with_remediation("use a path under /srv");
        let result = json!({
            "content": [{"type": "text", "text": written.to_json("FA_list_dir").to_string()}],
            "isError": true,
        });
        assert_eq!(read_result(&result), Err(written));
        let default_remedy = CallError::new(ErrorCode::Other("quota".into()), "over quota");
        let result = text(&default_remedy.to_json("t").to_string(), true);
        assert_eq!(read_result(&result), Err(default_remedy));
    }

    #[test]
    fn flat_and_plain_errors_become_tool_failed() {
        let e = read_result(&text(r#"{"error":"boom"}"#, true)).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::ToolFailed, "boom")
        );
        let e = read_result(&text("Error executing tool: nope", true)).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::ToolFailed, "Error executing tool: nope")
        );
    }

    #[test]
    fn ordinary_results_are_successes() {
        assert!(read_result(&text("Echo: hi", false)).is_ok());
        assert!(read_result(&text(r#"{"error":"just a field"}"#, false)).is_ok());
    }
}
