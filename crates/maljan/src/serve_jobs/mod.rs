//! `maljan serve jobs`: maljan's whole analysis job as MCP tools, for other agents (Claude Code,
//! Claude Desktop, any host). `analyze_sample` runs a sample through the one job pipeline — the
//! very [`Jobs::run`] `maljan analyze` calls, so the job is a queue job on the configured
//! database (`maljan jobs`, the console see it), its calls are in the ledger, and its report is
//! kept there; `get_report`, `list_jobs` and `cancel_job` read and steer those jobs.
//!
//! What is this front end's own: where a sample may come from (a file under `--root`, checked
//! after resolving symlinks, or the path put_sample returned over HTTP), the limits a caller
//! cannot exceed (sample size, depth, jobs at once), and turning the job's events into MCP
//! progress notifications. The evidence is never written to: the pipeline copies the sample into
//! the job's private directory before anything touches it.

mod report_page;
mod run;
mod tools;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use anyhow::{Context, bail};
use clap::Args;
use maljan_agent::{
    Analysis, Setup,
    pipeline::{self, ModelChoice, Scope},
};
use maljan_client::{Config, Runtime};
use maljan_server::{Registry, Roots};
use maljan_triage::visible;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::analyze::Jobs;

/// The `serve jobs` flags (each says "(jobs)" in `maljan serve --help`).
#[derive(Args, Clone)]
pub struct JobsArgs {
    /// The runtime config the jobs use: its servers, model and database (jobs). Default:
    /// MALJAN_CONFIG, else <data dir>/config.toml; none = the built-in servers, offline.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A triage plan (TOML) for every job (jobs); default: triage.toml beside the config file.
    #[arg(long, value_name = "FILE")]
    pub steps: Option<PathBuf>,
    /// The model the jobs use instead of the configured one, same provider (jobs).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Never run the model stages: every verdict is the heuristic one (jobs).
    #[arg(long, conflicts_with = "model")]
    pub no_agent: bool,
    /// The deepest analyze_sample may go into what a sample carries (archive members,
    /// attachments, embedded objects); a call asks for this or less (jobs).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub max_depth: usize,
    /// Most child samples in one job's tree (jobs).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub max_children: usize,
    /// Jobs that run at once; more wait their turn (jobs).
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub max_running: u16,
    /// Jobs that may wait for a turn; analyze_sample refuses more (jobs).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub max_waiting: usize,
    /// The largest sample analyze_sample takes: `--max-sample-bytes`, set by `serve`.
    #[arg(skip = 2u64 * 1024 * 1024 * 1024)]
    pub max_sample_bytes: u64,
}

impl Default for JobsArgs {
    fn default() -> Self {
        Self {
            config: None,
            steps: None,
            model: None,
            no_agent: false,
            max_depth: 5,
            max_children: 1000,
            max_running: 2,
            max_waiting: 16,
            max_sample_bytes: 2 * 1024 * 1024 * 1024,
        }
    }
}

/// What every call of one `serve jobs` shares.
pub(crate) struct JobsService {
    runtime: Arc<Runtime>,
    /// With the model, as configured (None when `--no-agent` or no model).
    setup: Arc<Setup>,
    /// The same without the model, for a call with `agent: false`.
    setup_no_model: Arc<Setup>,
    roots: Roots,
    worker: String,
    args: JobsArgs,
    /// The servers the config names, for checking a call's `servers`.
    configured: Vec<String>,
    /// The cancel token of each job this process runs or will run (waiting for a turn).
    running: Mutex<HashMap<String, CancellationToken>>,
    turns: Arc<tokio::sync::Semaphore>,
    waiting: std::sync::atomic::AtomicUsize,
    /// Every job task, so that the server's end waits for their reports to be kept.
    tasks: TaskTracker,
}

/// The service of this process, for [`shutdown`] (one `serve jobs` per process).
static SERVICE: OnceLock<Arc<JobsService>> = OnceLock::new();

impl JobsService {
    /// The config (its servers checked), the built-ins rooted in the jobs' directories, the
    /// setup and the runtime, as `maljan analyze` opens them for several samples.
    fn open(roots: Roots, args: &JobsArgs) -> anyhow::Result<Self> {
        let mut config = Config::load(args.config.as_deref())?;
        pipeline::root_builtins(&mut config, Scope::Shared);
        let model = if args.no_agent {
            ModelChoice::Off
        } else {
            ModelChoice::Configured(args.model.as_deref())
        };
        let setup =
            Setup::discover(&config, args.steps.as_deref(), model).map_err(anyhow::Error::msg)?;
        if setup.models.is_none() {
            tracing::info!("serve jobs: no model; every verdict is the heuristic one");
        }
        let setup_no_model = Setup {
            models: None,
            ..setup.clone()
        };
        let configured = config.servers.keys().cloned().collect();
        let runtime = Runtime::open(config)?;
        Ok(Self {
            runtime,
            setup: Arc::new(setup),
            setup_no_model: Arc::new(setup_no_model),
            roots,
            worker: maljan_agent::worker::process_name("serve-jobs"),
            turns: Arc::new(tokio::sync::Semaphore::new(args.max_running.max(1) as usize)),
            args: args.clone(),
            configured,
            running: Mutex::default(),
            waiting: Default::default(),
            tasks: TaskTracker::new(),
        })
    }

    /// The jobs front end `maljan analyze` uses, for one call's options.
    fn jobs(&self, servers: Option<Vec<String>>, agent: bool, depth: usize) -> Jobs {
        Jobs {
            runtime: self.runtime.clone(),
            analysis: Analysis {
                runtime: self.runtime.clone(),
                setup: if agent {
                    self.setup.clone()
                } else {
                    self.setup_no_model.clone()
                },
                store: None,
            },
            worker: self.worker.clone(),
            servers,
            recursion: maljan_triage::RecursionLimits {
                max_depth: depth,
                max_children: self.args.max_children,
                ..Default::default()
            },
            keep_artifacts: None,
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The jobs server's tools over `roots` (the directories samples may come from, the staging
/// directory among them when put_sample is on).
pub fn registry(roots: Roots, args: &JobsArgs) -> anyhow::Result<Registry> {
    if SERVICE.get().is_some() {
        bail!("serve jobs: one jobs server per process");
    }
    let service = Arc::new(JobsService::open(roots, args).context("serve jobs")?);
    let _ = SERVICE.set(service.clone());
    Ok(tools::registry(service))
}

/// The roots of `serve jobs`: local directories only (a storage URI is for the files server).
pub fn check_roots(roots: &[String]) -> anyhow::Result<()> {
    for r in roots {
        if maljan_files::local_root(r).is_none() {
            bail!(
                "--root {}: serve jobs takes samples from local directories only",
                visible(r)
            );
        }
    }
    Ok(())
}

/// The server has stopped serving: its jobs are cancelled (each keeps its report, marked
/// cancelled), given a while to keep it, and the tool-server processes are stopped.
pub async fn shutdown() {
    let Some(service) = SERVICE.get() else {
        return;
    };
    for cancel in service.running().values() {
        cancel.cancel();
    }
    service.tasks.close();
    if tokio::time::timeout(Duration::from_secs(20), service.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("serve jobs: some jobs had not ended 20 s after the server stopped");
    }
    service.runtime.shutdown().await;
}
