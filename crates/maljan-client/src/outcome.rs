//! Reading a tool's answer: success, or an error that names its remedy.
//!
//! An `isError` result is read, in order, as: the maljan shape
//! `{"error":{"code","message","remediation"},"tool"}` (in `structuredContent` or as JSON text), a
//! flat `{"error":"text"}`, `{"tool_error", "detail"|"type"}`, or plain text — the last three become
//! `tool_failed` with their message. A result without `isError` is a success unless it carries the
//! full maljan error shape (an object with a string `code`), which is read as the error it is.
//! Unknown codes are kept as written and get the `tool_failed` remedy.

use maljan_server::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A failed call, as the ledger and the caller see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallError {
    pub code: ErrorCode,
    pub message: String,
    pub remediation: String,
}

impl CallError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let remediation = code.default_remediation().to_string();
        Self {
            code,
            message: message.into(),
            remediation,
        }
    }

    pub fn with_remediation(mut self, r: impl Into<String>) -> Self {
        let r = r.into();
        if !r.trim().is_empty() {
            self.remediation = r;
        }
        self
    }

    /// `"<message>; <remediation>"`, the one-line form.
    pub fn sentence(&self) -> String {
        format!("{}; {}", self.message, self.remediation)
    }

    /// The maljan error JSON for `tool`.
    pub fn to_json(&self, tool: &str) -> Value {
        serde_json::json!({
            "error": {"code": self.code.as_str(), "message": self.message, "remediation": self.remediation},
            "tool": tool,
        })
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.sentence())
    }
}

impl std::error::Error for CallError {}

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
        if let Some(e) = maljan_shape(candidate) {
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

fn maljan_shape(v: &Value) -> Option<CallError> {
    let err = v.get("error")?.as_object()?;
    let code = err.get("code")?.as_str()?;
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let e = CallError::new(ErrorCode::parse(code), message);
    Some(match err.get("remediation").and_then(Value::as_str) {
        Some(r) => e.with_remediation(r),
        None => e,
    })
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
