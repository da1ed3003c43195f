//! maljan-client: the runtime that calls MCP tool servers on a platform's behalf.
//!
//! It owns the configuration (`config`: a TOML file of servers and `[core.mcp.breaker]`), the
//! transports (`transport`: stdio child processes in their own process group, streamable HTTP,
//! legacy HTTP+SSE, and `http` with fallback), capability manifests read once per job (`manifest`),
//! the check a call passes before it is sent (`precheck`: a listed tool, arguments matching its
//! inputSchema), the breaker that rests a server which stops answering (`breaker`), the per-server concurrency
//! cap (both held across workers on PostgreSQL for remote servers: `shared_limits`), the ledger of
//! every call on SQLite or PostgreSQL (`ledger`), secrets at rest (`secrets`), handing the sample
//! over (`staging`), and jobs (`job`): one sample and the calls made for it, each with an evidence
//! id. A long-running process holds one [`Runtime`]; there is no global state.
//!
//! It must not depend on the server framework (maljan-server) or any concrete server (files,
//! analysis): the wire types it shares with every maljan server (`Manifest`, `ErrorCode`, the
//! tool-error shape) come from maljan-protocol. rmcp stays inside `transport`: no rmcp type is
//! part of this crate's public API.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use maljan_client::{Config, JobSpec, Runtime};
//! let rt = Runtime::open(Config::load(None)?)?;
//! let job = rt.new_job(JobSpec::labelled("example"))?;
//! let rec = job.server("files")?.call("FA_list_dir", serde_json::json!({"dir_path": "."})).await;
//! assert!(rec.ledger_error.is_none());
//! rt.shutdown().await;
//! # Ok(()) }
//! ```

pub mod breaker;
pub mod config;
pub mod job;
pub mod ledger;
pub mod manifest;
pub mod metrics;
pub mod outcome;
pub mod paths;
pub mod precheck;
pub mod redact;
pub mod runtime;
mod sample;
pub mod secrets;
pub mod shared_limits;
pub mod staging;
pub mod time;
pub mod transport;

pub use breaker::{Breaker, RestEvent};
pub use config::{
    BreakerConfig, Config, ConfigError, InputPolicy, LlmConfig, LlmFallback, OAuthConfig,
    OAuthGrant, PinSample, ServerConfig, TransportKind,
};
pub use job::{
    CallRecord, Event, EventStream, Job, JobSpec, JobStatus, Sample, SampleStore, ServerHandle,
    StoredSample,
};
pub use ledger::{
    CallFilter, CancelOutcome, ChildRow, DatabaseUrl, Engine, JobEvent, JobRow, Lease, Ledger,
    LedgerEntry, ModelUsage, NewQueuedJob, Page, QueuedJob,
};
pub use maljan_protocol::{ErrorCode, Manifest, ManifestTool, SAMPLE_PARAMS, sample_param};
pub use manifest::{ServerView, ToolInfo};
pub use outcome::CallError;
pub use runtime::{Runtime, RuntimeError, ServerSlot, ServerTest};
pub use secrets::{KeySource, Secret};
pub use staging::{Handover, UploadProgress};
