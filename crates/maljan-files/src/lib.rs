//! maljan-files: the `FA_*` file-automation actions of maljan's files server, with the names,
//! parameter names and defaults of the Python package automation-file, typed and confined.
//!
//! It owns the actions themselves (local files and directories, archives, checksums and integrity,
//! search, the guarded HTTP download, text, structured data, crypto, conditional dispatch and the
//! action-list executors, remote storage: S3, Azure Blob and GCS over the operator's storage
//! profiles, and the automation that runs on its own: schedules, file watches and resumable
//! pipelines, `automation`), automation-file's fourteen semantic tools under their own policy
//! (`semantic`), and the per-server state some of them keep (integrity watches,
//! storage sessions; what must outlive the process goes in the state database, `state`).
//! Every local path argument goes through the server's [`Roots`](maljan_server::Roots); every
//! remote endpoint through the same SSRF policy as FA_download_file.
//!
//! It builds on maljan-server only. It must not depend on the client runtime (maljan-client), on
//! rmcp or on any transport: serving is the framework's job.

use std::sync::Arc;

pub use automation::{Clock, ManualClock, SystemClock};
use maljan_server::{Registry, Roots};
pub use semantic::{SemanticPolicy, TOOLS as SEMANTIC_TOOLS, local_root};
pub use storage::StorageConfig;
pub use unzip::ExtractionLimits;

mod archive;
mod audit;
mod automation;
mod baseline;
mod conditional;
mod crypto;
mod dag;
mod data;
mod diff;
mod download;
pub mod drives;
mod encoding;
mod executor;
mod hashing;
mod integrity;
mod keypath;
mod local;
pub mod notify;
#[cfg(feature = "parquet")]
mod parquet;
mod paths;
mod pattern;
mod progress;
mod search;
mod semantic;
mod shell;
mod state;
pub mod storage;
mod sync;
mod tar;
mod text;
mod tracing_init;
mod tree;
mod unzip;
mod walk;
mod watch;
mod yaml11;

/// The arguments of an action that takes none.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// How the lead's binary configures the files server.
#[derive(Debug, Clone)]
pub struct FilesConfig {
    /// The directories every path argument must resolve under.
    pub roots: Roots,
    /// Lets FA_download_file reach loopback addresses (127.0.0.0/8, ::1). Off by default: it exists
    /// so tests can serve files from a local HTTP server. Every other SSRF refusal stays in force.
    pub allow_loopback_downloads: bool,
    /// Bounds on what one zip extraction may write.
    pub extraction: ExtractionLimits,
    /// The operator's remote storage profiles (`--storage-config`); empty by default.
    pub storage: StorageConfig,
    /// Where the server keeps what outlives it (`--state-dir`): schedules, watches, pipeline runs,
    /// the audit trail. None keeps them in memory, gone with the process.
    pub state_dir: Option<std::path::PathBuf>,
    /// The automation actions' operator settings (notification sinks, FA_run_shell's
    /// environment); empty by default.
    pub automation: AutomationConfig,
    /// What automation-file's semantic tools (file_read, storage_copy, pipeline_run, ...) may
    /// reach and change; by default nothing (no root).
    pub semantic: SemanticPolicy,
    /// How much of the audit trail is kept (`--audit-max-rows`, `--audit-max-age-days`).
    pub audit: AuditRetention,
}

/// How much of the audit trail the server keeps: at most `max_rows` records, none older than
/// `max_age`; older ones are deleted as new ones are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRetention {
    pub max_rows: u64,
    pub max_age: std::time::Duration,
}

impl Default for AuditRetention {
    /// 100 000 records (tens of MB at most) and 30 days.
    fn default() -> Self {
        Self {
            max_rows: 100_000,
            max_age: std::time::Duration::from_secs(30 * 24 * 3600),
        }
    }
}

impl FilesConfig {
    /// The roots and nothing else: no loopback downloads, default extraction bounds, no storage
    /// profiles, state in memory, no automation settings, no semantic root. Tests and benches
    /// start from it (`FilesConfig { storage, ..FilesConfig::rooted(roots) }`).
    pub fn rooted(roots: Roots) -> Self {
        Self {
            roots,
            allow_loopback_downloads: false,
            extraction: ExtractionLimits::default(),
            storage: StorageConfig::default(),
            state_dir: None,
            automation: AutomationConfig::default(),
            semantic: SemanticPolicy::default(),
            audit: AuditRetention::default(),
        }
    }
}

/// What the operator decides for the automation actions.
#[derive(Debug, Clone, Default)]
pub struct AutomationConfig {
    /// The notification sinks (`--notify-config`).
    pub notify: notify::NotifyConfig,
    /// The environment variables FA_run_shell may pass on besides PATH (`--shell-env`).
    pub shell_env: Vec<String>,
}

/// What every action of this crate shares: the configuration and the server's own state.
pub(crate) struct Config {
    pub(crate) roots: Roots,
    pub(crate) allow_loopback_downloads: bool,
    pub(crate) extraction: ExtractionLimits,
    /// Storage profiles and the stores built from them.
    pub(crate) storage: storage::Storage,
    /// Running integrity monitors (FA_integrity_watch_*), stopped when the server goes away.
    pub(crate) watches: watch::Watches,
    /// The durable state (SQLite in the state directory, or in memory).
    pub(crate) state: state::StateDb,
    /// Schedules, watches and pipelines: their clock and, once serving, the server's handle.
    pub(crate) automation: automation::Automation,
    /// The environment variables FA_run_shell may pass on besides PATH.
    pub(crate) shell_env: Vec<String>,
    /// The notification sinks, the send dedup window and the routes.
    pub(crate) notifier: notify::Notifier,
    /// The audit trail's writer and store.
    pub(crate) audit: audit::Audit,
    /// The calls in flight, for FA_progress_*.
    pub(crate) progress: progress::Progress,
    /// Each tool's parameter names in order, to bind positional arguments in action lists.
    /// The semantic tools' policy and stored pipelines.
    pub(crate) semantic: semantic::Semantic,
    pub(crate) params: std::sync::OnceLock<std::collections::HashMap<String, Vec<String>>>,
}

/// Every `FA_*` action, ready to serve (or to narrow with `Registry::retain`).
pub fn registry(config: FilesConfig) -> Registry {
    registry_with_clock(config, Arc::new(SystemClock))
}

/// [`registry`] on another clock: tests and benches fire schedules without waiting for the wall.
pub fn registry_with_clock(config: FilesConfig, clock: Arc<dyn Clock>) -> Registry {
    let cfg = Arc::new(Config {
        roots: config.roots,
        allow_loopback_downloads: config.allow_loopback_downloads,
        extraction: config.extraction,
        storage: storage::Storage::new(config.storage),
        watches: Default::default(),
        state: state::StateDb::new(config.state_dir),
        automation: automation::Automation::new(clock),
        notifier: notify::Notifier::new(config.automation.notify.clone()),
        shell_env: config.automation.shell_env,
        audit: audit::Audit::new(config.audit),
        progress: Default::default(),
        params: Default::default(),
        semantic: semantic::Semantic::new(config.semantic),
    });
    let mut reg = Registry::new();
    local::register(&mut reg, &cfg);
    tree::register(&mut reg, &cfg);
    sync::register(&mut reg, &cfg);
    archive::register(&mut reg, &cfg);
    tar::register(&mut reg, &cfg);
    integrity::register(&mut reg, &cfg);
    integrity::register_trees(&mut reg, &cfg);
    baseline::register(&mut reg, &cfg);
    watch::register(&mut reg, &cfg);
    search::register(&mut reg, &cfg);
    download::register(&mut reg, &cfg);
    text::register(&mut reg, &cfg);
    diff::register(&mut reg, &cfg);
    data::register(&mut reg, &cfg);
    #[cfg(feature = "parquet")]
    parquet::register(&mut reg, &cfg);
    crypto::register(&mut reg, &cfg);
    executor::register(&mut reg, &cfg);
    conditional::register(&mut reg, &cfg);
    dag::register(&mut reg, &cfg);
    storage::cloud_actions::register(&mut reg, &cfg);
    storage::storage_actions::register(&mut reg, &cfg);
    storage::mirror::register(&mut reg, &cfg);
    drives::register(&mut reg, &cfg);
    storage::tree_actions::register(&mut reg, &cfg);
    automation::register(&mut reg, &cfg);
    notify::register(&mut reg, &cfg);
    audit::register(&mut reg, &cfg);
    progress::register(&mut reg, &cfg);
    shell::register(&mut reg, &cfg);
    tracing_init::register(&mut reg, &cfg);
    semantic::register(&mut reg, &cfg);
    let params = reg
        .tools()
        .iter()
        .map(|t| {
            let names = t.input_schema.get("properties").and_then(|p| p.as_object());
            (
                t.meta.name.clone(),
                names
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default(),
            )
        })
        .collect();
    let _ = cfg.params.set(params);
    audit::learn_secrets(&cfg, &reg);
    reg
}
