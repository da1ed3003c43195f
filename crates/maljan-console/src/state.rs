//! The console's shared state: the runtime (rebuilt when the servers change; jobs already running
//! keep theirs), the ledger, the jobs running in this process, the last test of each server, the
//! templates, the auth store and the login back-off.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use maljan_client::{Config, JobEvent, Ledger, Runtime};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::{
    ConsoleOptions, security::AuthStore, servers::TestOutcome, throttle::LoginThrottle,
    views::Views,
};

/// A job running in this process.
pub struct LiveJob {
    pub cancel: CancellationToken,
    pub events: broadcast::Sender<JobEvent>,
}

pub struct AppState {
    pub opts: ConsoleOptions,
    runtime: RwLock<Arc<Runtime>>,
    pub ledger: Ledger,
    pub live: Mutex<HashMap<String, Arc<LiveJob>>>,
    pub tests: Mutex<HashMap<String, TestOutcome>>,
    pub views: Views,
    pub auth: AuthStore,
    /// Failed logins per client (see `throttle`).
    pub throttle: LoginThrottle,
    /// Where the sample store keeps queued jobs' samples for the workers.
    pub store: maljan_client::SampleStore,
    /// The embedded workers (none with `--workers 0`).
    pub pool: std::sync::OnceLock<Arc<maljan_agent::worker::Pool>>,
    /// Where an upload is streamed (0700) until it is in the sample store.
    pub samples_dir: PathBuf,
    /// The data directory the console was opened with (kept across config reloads).
    pub data_dir: PathBuf,
    /// Ids of jobs with a new event, as PostgreSQL announces them (whichever node runs the job);
    /// nothing on SQLite. The event streams of jobs run elsewhere wake on it.
    pub announced: broadcast::Sender<String>,
    /// The console's own reads of the ledger: jobs searched and filtered, every job's calls.
    pub browser: Arc<crate::browse::Browser>,
}

/// How a server edit or a submitted job fails, for the page and the API alike.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    #[serde(skip)]
    pub status: u16,
    pub error: String,
}

impl Problem {
    pub fn new(status: u16, error: impl Into<String>) -> Self {
        Self {
            status,
            error: error.into(),
        }
    }
}

impl AppState {
    pub fn open(opts: ConsoleOptions) -> anyhow::Result<Arc<Self>> {
        let config = Config::load(opts.config.as_deref())?;
        let ledger = Ledger::connect(&config.database_url(), config.core.ledger.result_cap_bytes)?;
        Self::with_ledger(opts, config, ledger)
    }

    /// A console over a given config and ledger (tests, the bench).
    pub fn with_ledger(
        opts: ConsoleOptions,
        config: Config,
        ledger: Ledger,
    ) -> anyhow::Result<Arc<Self>> {
        let samples_dir = config.data_dir.join("console").join("samples");
        maljan_client::paths::ensure_private_dir(&samples_dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", samples_dir.display()))?;
        let auth = AuthStore::load(&config.data_dir)?;
        if !opts.listen.ip().is_loopback() && !auth.has_password() {
            anyhow::bail!(
                "{} is not a loopback address, so the console needs a login: set the admin password first with `maljan console set-password`",
                opts.listen.ip()
            );
        }
        let config_data_dir = config.data_dir.clone();
        let store = maljan_client::SampleStore::from_url(&opts.jobs.samples_url, &config.data_dir)
            .map_err(|e| anyhow::anyhow!("the sample store: {e}"))?;
        let runtime = build_runtime(config, ledger.clone());
        let announced = broadcast::channel(1024).0;
        let tx = announced.clone();
        ledger.listen(maljan_client::ledger::JOB_EVENTS_CHANNEL, move |job| {
            let _ = tx.send(job.to_string());
        })?;
        let browser = Arc::new(crate::browse::Browser::new(ledger.url().clone()));
        let state = Arc::new(Self {
            opts,
            runtime: RwLock::new(runtime),
            ledger,
            live: Mutex::default(),
            tests: Mutex::default(),
            views: Views::new(),
            auth,
            throttle: LoginThrottle::default(),
            store,
            pool: Default::default(),
            samples_dir,
            data_dir: config_data_dir,
            announced,
            browser,
        });
        crate::jobs::start_workers(&state);
        Ok(state)
    }

    pub fn runtime(&self) -> Arc<Runtime> {
        self.runtime
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn config(&self) -> Config {
        self.runtime().config().clone()
    }

    /// The config as it is to be edited (a missing file starts from the built-ins).
    pub fn config_for_edit(&self) -> Result<Config, Problem> {
        let mut config = Config::load_for_edit(self.opts.config.as_deref())
            .map_err(|e| Problem::new(500, e.to_string()))?;
        config.data_dir = self.data_dir.clone();
        Ok(config)
    }

    /// After the config file changed: a new runtime for new jobs. Running jobs keep the old one,
    /// which is shut down (its stdio servers stopped) once the last of them is done with it.
    pub fn reload(&self) -> Result<(), Problem> {
        let mut config = Config::load(self.opts.config.as_deref())
            .map_err(|e| Problem::new(500, e.to_string()))?;
        config.data_dir = self.data_dir.clone();
        let fresh = build_runtime(config, self.ledger.clone());
        let old = std::mem::replace(
            &mut *self.runtime.write().unwrap_or_else(|e| e.into_inner()),
            fresh,
        );
        tokio::spawn(async move {
            while Arc::strong_count(&old) > 1 {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            old.shutdown().await;
        });
        Ok(())
    }

    pub fn live_job(&self, id: &str) -> Option<Arc<LiveJob>> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Tests every enabled server once at start-up, so the cards show each unavailable tool and
    /// its reason before any run.
    pub fn test_all_servers_in_background(self: &Arc<Self>) {
        let config = self.config();
        for (name, cfg) in config.servers.clone() {
            if !cfg.enabled {
                continue;
            }
            let (state, config) = (self.clone(), config.clone());
            tokio::spawn(async move {
                let outcome = crate::servers::test_values(&config, &name, cfg).await;
                state.record_test(&name, outcome);
            });
        }
    }

    pub fn record_test(&self, name: &str, outcome: TestOutcome) {
        self.tests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), outcome);
    }

    pub fn last_test(&self, name: &str) -> Option<TestOutcome> {
        self.tests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}

/// The runtime of the console's jobs: the built-in servers reach every job's private directory
/// (in the runtime only — the config file is not changed).
fn build_runtime(mut config: Config, ledger: Ledger) -> Arc<Runtime> {
    maljan_agent::pipeline::root_builtins(&mut config, maljan_agent::pipeline::Scope::Shared);
    Runtime::new(config, ledger)
}
