//! Tool errors that name their remedy (DESIGN.md, "Errors that name their remedy").
//!
//! The types are the wire convention's, shared with the client runtime: see `maljan-protocol`. A
//! tool that cannot answer *returns* a [`ToolError`]; the framework turns it into an `isError`
//! result whose JSON is `{"error":{"code","message","remediation"},"tool"}`
//! ([`ToolError::to_json`]).

pub use maljan_protocol::{ErrorCode, ToolError, ToolErrorReply};
