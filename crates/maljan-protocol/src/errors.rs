//! Errors that name their remedy (DESIGN.md, "Errors that name their remedy").
//!
//! A tool that cannot answer returns a [`ToolError`]; the server sends it as an `isError` result
//! whose JSON is a [`ToolErrorReply`], `{"error":{"code","message","remediation"},"tool"}`, and
//! the client reads that JSON back into the same [`ToolError`]. A remedy the tool did not give
//! (absent or blank) is its code's [`ErrorCode::default_remediation`], on both sides.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The error codes every maljan server and the client runtime share. A code a server invents is
/// kept as written in [`ErrorCode::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    MissingDependency,
    Timeout,
    BadArgument,
    NoSuchFile,
    UnsupportedFormat,
    NotConfigured,
    ToolFailed,
    PathOutsideRoots,
    ServerResting,
    #[serde(untagged)]
    Other(String),
}

impl ErrorCode {
    pub fn as_str(&self) -> &str {
        match self {
            Self::MissingDependency => "missing_dependency",
            Self::Timeout => "timeout",
            Self::BadArgument => "bad_argument",
            Self::NoSuchFile => "no_such_file",
            Self::UnsupportedFormat => "unsupported_format",
            Self::NotConfigured => "not_configured",
            Self::ToolFailed => "tool_failed",
            Self::PathOutsideRoots => "path_outside_roots",
            Self::ServerResting => "server_resting",
            Self::Other(code) => code,
        }
    }

    /// Reads a code as written on the wire; unknown codes are kept, not folded into tool_failed.
    pub fn parse(code: &str) -> Self {
        match code {
            "missing_dependency" => Self::MissingDependency,
            "timeout" => Self::Timeout,
            "bad_argument" => Self::BadArgument,
            "no_such_file" => Self::NoSuchFile,
            "unsupported_format" => Self::UnsupportedFormat,
            "not_configured" => Self::NotConfigured,
            "tool_failed" => Self::ToolFailed,
            "path_outside_roots" => Self::PathOutsideRoots,
            "server_resting" => Self::ServerResting,
            other => Self::Other(other.to_string()),
        }
    }

    /// The remedy used when a tool gives none of its own.
    pub fn default_remediation(&self) -> &'static str {
        match self {
            Self::MissingDependency => {
                "install the dependency the message names on the server's host, then restart the server"
            }
            Self::Timeout => "retry with a smaller input, or raise the tool's timeout",
            Self::BadArgument => {
                "correct the argument the message names; the tool's inputSchema lists what it accepts"
            }
            Self::NoSuchFile => "check the path: it must exist on the host the server runs on",
            Self::UnsupportedFormat => {
                "this tool does not read this kind of file; identify_file tells what the file is"
            }
            Self::NotConfigured => {
                "set the configuration the message names, then restart the server"
            }
            Self::PathOutsideRoots => {
                "use a path inside one of the server's --root directories, or start the server with another --root"
            }
            Self::ServerResting => {
                "wait until the server is tried again, and check why it stopped answering (its log)"
            }
            Self::ToolFailed | Self::Other(_) => {
                "retry; if it fails again, report it together with the server's log"
            }
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure that says what went wrong and what the caller can do about it: what a tool returns
/// on the server, and what the client records for a failed call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "WireError")]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    pub remediation: String,
}

/// The error object as it may arrive: a remedy may be missing, or blank.
#[derive(Deserialize)]
struct WireError {
    code: ErrorCode,
    #[serde(default)]
    message: String,
    #[serde(default)]
    remediation: Option<String>,
}

impl From<WireError> for ToolError {
    fn from(w: WireError) -> Self {
        let e = Self::new(w.code, w.message);
        match w.remediation {
            Some(r) => e.with_remediation(r),
            None => e,
        }
    }
}

impl ToolError {
    /// An error with its code's default remedy.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let remediation = code.default_remediation().to_string();
        Self {
            code,
            message: message.into(),
            remediation,
        }
    }

    /// Names the remedy; a blank one keeps the code's default (a remedy is always named).
    pub fn with_remediation(mut self, remediation: impl Into<String>) -> Self {
        let remediation = remediation.into();
        if !remediation.trim().is_empty() {
            self.remediation = remediation;
        }
        self
    }

    pub fn bad_argument(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadArgument, message)
    }
    pub fn no_such_file(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NoSuchFile, message)
    }
    pub fn unsupported_format(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UnsupportedFormat, message)
    }
    pub fn missing_dependency(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::MissingDependency, message)
    }
    pub fn not_configured(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotConfigured, message)
    }
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Timeout, message)
    }
    pub fn tool_failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ToolFailed, message)
    }
    pub fn path_outside_roots(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PathOutsideRoots, message)
    }

    /// Maps an I/O error on `what` (a path as the caller wrote it) to the code a caller can act on.
    pub fn io(what: &str, err: std::io::Error) -> Self {
        use std::io::ErrorKind::*;
        match err.kind() {
            NotFound => Self::no_such_file(format!("no such file or directory: {what}")),
            NotADirectory => Self::no_such_file(format!("not a directory: {what}")),
            IsADirectory => Self::bad_argument(format!("{what} is a directory, not a file")),
            AlreadyExists => Self::bad_argument(format!("{what} already exists")),
            PermissionDenied => Self::tool_failed(format!("permission denied: {what}"))
                .with_remediation("give the server's user access to the path, or use another path"),
            InvalidData | InvalidInput => Self::bad_argument(format!("{what}: {err}")),
            _ => Self::tool_failed(format!("{what}: {err}")),
        }
    }

    /// `"<message>; <remediation>"`, the one-line form for a person.
    pub fn sentence(&self) -> String {
        format!("{}; {}", self.message, self.remediation)
    }

    /// The JSON a tool result carries: `{"error":{"code","message","remediation"},"tool"}`.
    pub fn to_json(&self, tool: &str) -> Value {
        let reply = ToolErrorReply {
            error: self.clone(),
            tool: tool.to_string(),
        };
        serde_json::to_value(reply).unwrap_or(Value::Null)
    }

    /// Reads the maljan error shape out of a JSON value: an object whose `error` is an object
    /// with a string `code`. Anything else is not this shape (None).
    pub fn from_json(value: &Value) -> Option<Self> {
        ToolErrorReply::deserialize(value).ok().map(|r| r.error)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.sentence())
    }
}

impl std::error::Error for ToolError {}

/// A tool-error result's JSON: the error and the tool that returned it. `tool` may be missing in
/// what a non-maljan server sends; it reads as "".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolErrorReply {
    pub error: ToolError,
    #[serde(default)]
    pub tool: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const EVERY_CODE: [ErrorCode; 9] = [
        ErrorCode::MissingDependency,
        ErrorCode::Timeout,
        ErrorCode::BadArgument,
        ErrorCode::NoSuchFile,
        ErrorCode::UnsupportedFormat,
        ErrorCode::NotConfigured,
        ErrorCode::ToolFailed,
        ErrorCode::PathOutsideRoots,
        ErrorCode::ServerResting,
    ];

    #[test]
    fn error_json_has_the_documented_shape() {
        let v = ToolError::no_such_file("no such file or directory: x").to_json("FA_file_checksum");
        assert_eq!(
            v,
            json!({
                "error": {
                    "code": "no_such_file",
                    "message": "no such file or directory: x",
                    "remediation": ErrorCode::NoSuchFile.default_remediation(),
                },
                "tool": "FA_file_checksum",
            })
        );
    }

    /// What the server writes, the client reads: every code, a tool's own remedy, an invented
    /// code, through the JSON text a result carries.
    #[test]
    fn what_the_server_writes_the_client_reads() {
        let mut written: Vec<ToolError> = EVERY_CODE
            .iter()
            .map(|c| ToolError::new(c.clone(), format!("{c} happened")))
            .collect();
        written.push(ToolError::tool_failed("quota").with_remediation("wait an hour"));
        written.push(ToolError::new(ErrorCode::parse("quota_exceeded"), "m"));
        for e in written {
            let text = e.to_json("t").to_string();
            let back = ToolError::from_json(&serde_json::from_str(&text).unwrap());
            assert_eq!(back.as_ref(), Some(&e), "{text}");
            let reply: ToolErrorReply = serde_json::from_str(&text).unwrap();
            assert_eq!(reply.tool, "t");
        }
    }

    #[test]
    fn codes_round_trip_as_their_wire_names() {
        for c in EVERY_CODE {
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(v, json!(c.as_str()));
            assert_eq!(serde_json::from_value::<ErrorCode>(v).unwrap(), c);
            assert_eq!(ErrorCode::parse(c.as_str()), c);
        }
        let code = ErrorCode::parse("quota_exceeded");
        assert_eq!(code, ErrorCode::Other("quota_exceeded".into()));
        assert_eq!(
            serde_json::to_value(&code).unwrap(),
            json!("quota_exceeded")
        );
        assert_eq!(
            serde_json::from_value::<ErrorCode>(json!("quota_exceeded")).unwrap(),
            code
        );
    }

    #[test]
    fn a_missing_or_blank_remedy_reads_as_the_codes_default() {
        for remediation in [None, Some(""), Some("  ")] {
            let mut v = json!({"error": {"code": "timeout", "message": "slow"}, "tool": "t"});
            if let Some(r) = remediation {
                v["error"]["remediation"] = json!(r);
            }
            let e = ToolError::from_json(&v).unwrap();
            assert_eq!(e.remediation, ErrorCode::Timeout.default_remediation());
        }
        let blank = ToolError::timeout("slow").with_remediation(" ");
        assert_eq!(blank.remediation, ErrorCode::Timeout.default_remediation());
    }

    #[test]
    fn other_shapes_are_not_read_as_the_error_shape() {
        for v in [
            json!({"error": "flat text"}),
            json!({"error": {"message": "no code"}}),
            json!({"error": {"code": 7}}),
            json!({"result": 1}),
            json!("text"),
        ] {
            assert_eq!(ToolError::from_json(&v), None, "{v}");
        }
        let no_tool = json!({"error": {"code": "bad_argument", "message": "m"}});
        assert_eq!(
            ToolError::from_json(&no_tool).map(|e| e.code),
            Some(ErrorCode::BadArgument)
        );
    }

    #[test]
    fn io_errors_map_to_actionable_codes() {
        let e = ToolError::io("a.txt", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.code, ErrorCode::NoSuchFile);
        let e = ToolError::io(
            "a.txt",
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        assert_eq!(
            (e.code, e.remediation.as_str()),
            (
                ErrorCode::ToolFailed,
                "give the server's user access to the path, or use another path"
            )
        );
    }

    #[test]
    fn display_and_sentence_name_the_remedy() {
        let e = ToolError::bad_argument("x is wrong").with_remediation("pass y");
        assert_eq!(e.sentence(), "x is wrong; pass y");
        assert_eq!(e.to_string(), "bad_argument: x is wrong; pass y");
    }
}
