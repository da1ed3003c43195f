//! maljan-server: the framework maljan's MCP tool servers are written in.
//!
//! It owns the tool registry (a typed Rust function per tool, its JSON Schema derived from the
//! argument struct and made portable to every host by `portable_schema`), the error shape that
//! names a remedy, path confinement under `--root`, the
//! capability manifest, the put_sample staging store, and serving a registry over stdio or
//! streamable HTTP. Every message on either transport goes through the official SDK's (rmcp's)
//! service: `protocol` is the one handler both serve (long tools run as tasks of the MCP tasks
//! extension there, see `tasks`), `http` nests rmcp's streamable HTTP
//! service, and `stdio` hands rmcp a newline transport whose framing (`stdio_framing`: answers
//! for malformed, oversize and unreadable lines) is the only code that differs between the two.
//! Nothing answers a request around rmcp.
//!
//! Inside, the dependencies go one way: `server` (a built server, where a call runs) builds on
//! `context` (what a running tool reaches, through the `ToolHost` trait the server implements),
//! `registry`, `errors` and `manifest`; the transports build on `server`.
//!
//! It must not depend on the client runtime or on any concrete server (files, analysis).
//!
//! ```no_run
//! use maljan_server::{Registry, ToolMeta, ToolError, ToolServer};
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Args { name: String }
//! # async fn run() -> anyhow::Result<()> {
//! let mut registry = Registry::new();
//! registry.add(ToolMeta::new("hello", "Greets"), |_ctx, a: Args| async move {
//!     Ok::<_, ToolError>(format!("hello {}", a.name))
//! });
//! let server = ToolServer::new("demo", "0.1.0", registry);
//! maljan_server::serve_stdio(server, Default::default()).await?;
//! # Ok(()) }
//! ```

pub mod context;
pub mod errors;
pub mod http;
mod http_guard;
pub mod manifest;
pub mod metrics;
pub mod observe;
pub mod portable_schema;
pub mod protocol;
pub mod registry;
pub mod roots;
pub mod server;
pub mod staging;
pub mod stdio;
mod stdio_framing;
pub mod tasks;

pub use context::{
    IN_PLACE_BYTES, MAX_NESTING, ProgressSink, ServerHandle, ToolContext, blocking,
    blocking_unless_small,
};
pub use errors::{ErrorCode, ToolError};
pub use http::{HttpOptions, router, router_with, serve_http, serve_http_with};
pub use manifest::{Manifest, ManifestTool, Probe, Unavailable};
pub use metrics::Metrics;
pub use observe::{CallEnd, CallObserver, CallStart};
pub use portable_schema::{PortableSchema, make_portable};
pub use protocol::{McpHandler, declares_tasks, task_owner, tool_descriptors};
pub use registry::{RegisteredTool, Registry, ToolMeta, parse_arguments};
pub use roots::{Dir, Renamed, Roots, Write};
pub use server::{CAPABILITIES_TOOL, CallOutcome, ToolServer};
pub use staging::{StagingOptions, StagingStore};
pub use stdio::{StdioOptions, serve_io, serve_stdio};
pub use tasks::{TaskPolicy, TaskSupport, Tasks};

/// The rmcp version maljan is built and tested against, pinned exactly in the workspace.
pub use rmcp;
