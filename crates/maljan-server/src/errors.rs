//! Tool errors that name their remedy (DESIGN.md, "Errors that name their remedy").
//!
//! A tool that cannot answer *returns* one of these; the framework turns it into an `isError` result
//! whose JSON is `{"error":{"code","message","remediation"},"tool"}`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The error codes every maljan server and the client runtime share. A code a server invents is kept
/// as written in [`ErrorCode::Other`].
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

/// A tool's own failure: what went wrong and what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    pub remediation: String,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let remediation = code.default_remediation().to_string();
        Self {
            code,
            message: message.into(),
            remediation,
        }
    }

    pub fn with_remediation(mut self, remediation: impl Into<String>) -> Self {
        self.remediation = remediation.into();
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

    /// The JSON a tool result carries: `{"error":{"code","message","remediation"},"tool"}`.
    pub fn to_json(&self, tool: &str) -> Value {
        json!({
            "error": {
                "code": self.code.as_str(),
                "message": self.message,
                "remediation": self.remediation,
            },
            "tool": tool,
        })
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_json_has_the_documented_shape() {
        let v = ToolError::no_such_file("no such file or directory: x").to_json("FA_file_checksum");
        assert_eq!(v["error"]["code"], "no_such_file");
        assert_eq!(v["tool"], "FA_file_checksum");
        assert!(v["error"]["remediation"].as_str().unwrap().contains("path"));
    }

    #[test]
    fn unknown_codes_are_kept_as_written() {
        let code = ErrorCode::parse("quota_exceeded");
        assert_eq!(code.as_str(), "quota_exceeded");
        assert_eq!(ErrorCode::parse("timeout"), ErrorCode::Timeout);
    }

    #[test]
    fn io_errors_map_to_actionable_codes() {
        let e = ToolError::io("a.txt", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.code, ErrorCode::NoSuchFile);
    }
}
