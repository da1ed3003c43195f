//! The [`Runtime`] a long-running process holds (no global state): the configuration, the ledger,
//! and one [`ServerSlot`] per configured server — its lazily made connection, its breaker and its
//! concurrency cap, shared by every job. Jobs are above it: a job holds the runtime, and the
//! runtime never names a job (`Runtime::new_job` is defined beside `Job`).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use maljan_protocol::ErrorCode;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::{
    breaker::{Breaker, Ticket, Verdict},
    config::{Config, InputPolicy, ServerConfig},
    ledger::Ledger,
    manifest::{self, ServerView},
    outcome::CallError,
    secrets::{KeySource, Secret},
    shared_limits::Trial,
    staging::UploadCache,
    transport::{self, ConnectOptions, Connection, Reply, Unanswered},
};

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    #[error("no sample at {0}")]
    NoSample(String),
    #[error("{0}")]
    Other(String),
}

/// The runtime: hold one per process, share it (`Arc`) between jobs.
pub struct Runtime {
    config: Config,
    ledger: Ledger,
    keys: KeySource,
    slots: BTreeMap<String, Arc<ServerSlot>>,
    /// Which servers already hold which sample (shared by all jobs; see `staging`).
    uploads: UploadCache,
    metrics: crate::metrics::RuntimeMetrics,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("servers", &self.slots.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Runtime {
    /// A runtime over `config`, with the ledger at its configured database.
    pub fn open(config: Config) -> Result<Arc<Self>, RuntimeError> {
        let ledger = Ledger::connect(&config.database_url(), config.core.ledger.result_cap_bytes)?;
        Ok(Self::new(config, ledger))
    }

    /// A runtime over `config` with a given ledger (tests, embedding).
    pub fn new(config: Config, ledger: Ledger) -> Arc<Self> {
        let keys = KeySource::in_dir(&config.data_dir);
        let mut slots: BTreeMap<String, ServerSlot> = config
            .servers
            .iter()
            .filter(|(_, s)| s.enabled)
            .map(|(name, s)| {
                let slot = ServerSlot::new(name, s.clone(), &config, keys.clone());
                (name.clone(), slot)
            })
            .collect();
        // Workers on one PostgreSQL database share the limits of each remote server; a stdio
        // server is each process's own child.
        let shared_breakers: std::collections::HashMap<String, Arc<Breaker>> = slots
            .iter()
            .filter(|(_, slot)| slot.cfg.transport != crate::config::TransportKind::Stdio)
            .map(|(name, slot)| (name.clone(), slot.breaker.clone()))
            .collect();
        if let crate::ledger::DatabaseUrl::Postgres(url) = ledger.url()
            && !shared_breakers.is_empty()
        {
            let shared = crate::shared_limits::SharedLimits::start(url, shared_breakers.clone());
            for name in shared_breakers.keys() {
                if let Some(slot) = slots.get_mut(name) {
                    slot.shared = Some(shared.clone());
                }
            }
        }
        let slots = slots
            .into_iter()
            .map(|(name, slot)| (name, Arc::new(slot)))
            .collect();
        Arc::new(Self {
            config,
            ledger,
            keys,
            slots,
            uploads: UploadCache::default(),
            metrics: Default::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn keys(&self) -> &KeySource {
        &self.keys
    }

    /// The upload cache: which servers already hold which sample, for 30 minutes.
    pub fn metrics(&self) -> &crate::metrics::RuntimeMetrics {
        &self.metrics
    }

    /// The runtime's `/metrics` text (see [`crate::metrics`]).
    pub fn render_metrics(&self) -> String {
        self.metrics.render(
            self.slots
                .iter()
                .map(|(name, slot)| (name.as_str(), slot.breaker.rests())),
        )
    }

    pub fn uploads(&self) -> &UploadCache {
        &self.uploads
    }

    /// Enabled servers, by name.
    pub fn server_names(&self) -> impl Iterator<Item = &str> {
        self.slots.keys().map(String::as_str)
    }

    pub fn slot(&self, name: &str) -> Option<&Arc<ServerSlot>> {
        self.slots.get(name)
    }

    /// Connects afresh (not through the shared slot), performs the handshake and reads tools and
    /// manifest: the connection test. Nothing is ledgered.
    pub async fn test_server(&self, name: &str) -> Result<ServerTest, String> {
        let cfg =
            self.config.servers.get(name).ok_or_else(|| {
                format!("no server named '{name}' in {}", self.config.path.display())
            })?;
        let slot = ServerSlot::new(
            name,
            ServerConfig {
                enabled: true,
                ..cfg.clone()
            },
            &self.config,
            self.keys.clone(),
        );
        let started = Instant::now();
        let opts = slot.connect_options().map_err(|e| e.message)?;
        let conn = transport::connect(&slot.cfg, &opts)
            .await
            .map_err(|u| u.describe())?;
        let handshake_ms = started.elapsed().as_secs_f64() * 1000.0;
        let view = read_view(&slot, &conn).await.map_err(|u| u.describe());
        let stderr_tail = conn
            .stderr()
            .map(|l| l.tail(2000))
            .filter(|t| !t.is_empty());
        conn.close().await;
        let view = view?;
        Ok(ServerTest {
            view,
            handshake_ms,
            stderr_tail,
        })
    }

    /// Closes every connection (stdio servers' process groups are killed).
    pub async fn shutdown(&self) {
        for slot in self.slots.values() {
            slot.disconnect().await;
        }
    }
}

/// What `maljan servers test` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ServerTest {
    pub view: ServerView,
    pub handshake_ms: f64,
    /// The stdio server's stderr so far (its start-up log).
    #[serde(skip)]
    pub stderr_tail: Option<String>,
}

/// One server inside a runtime: its connection (made on first use, remade after a crash), breaker
/// and cap.
pub struct ServerSlot {
    pub name: String,
    pub cfg: ServerConfig,
    pub breaker: Arc<Breaker>,
    cap: Option<Semaphore>,
    /// The limits shared with other workers (a remote server on PostgreSQL).
    shared: Option<Arc<crate::shared_limits::SharedLimits>>,
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    timeout_connect: Duration,
    max_answer_bytes: usize,
    input_policy: InputPolicy,
    base_dir: std::path::PathBuf,
    data_dir: std::path::PathBuf,
    keys: KeySource,
    auth: Mutex<Option<Result<Option<Secret>, String>>>,
    pub(crate) breaker_cfg: crate::config::BreakerConfig,
    /// Times the connection was (re)made.
    connects: std::sync::atomic::AtomicU32,
    /// The tools' compiled inputSchemas, for the check before each call.
    pub(crate) schemas: crate::precheck::SchemaCache,
}

impl std::fmt::Debug for ServerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSlot")
            .field("name", &self.name)
            .finish()
    }
}

/// The outcome of one guarded exchange with a server.
pub(crate) struct Guarded<T> {
    pub value: Result<T, CallError>,
    pub wait: Duration,
    pub duration: Duration,
    pub trial: bool,
    pub rest: Option<crate::breaker::RestEvent>,
}

impl ServerSlot {
    fn new(name: &str, cfg: ServerConfig, config: &Config, keys: KeySource) -> Self {
        let b = &config.core.mcp.breaker;
        Self {
            name: name.to_string(),
            breaker: Arc::new(Breaker::new(name, b)),
            shared: None,
            cap: (b.max_concurrent_calls > 0).then(|| Semaphore::new(b.max_concurrent_calls)),
            conn: tokio::sync::Mutex::new(None),
            timeout_connect: b.connect_timeout(),
            max_answer_bytes: config.core.mcp.max_answer_bytes,
            input_policy: config.core.mcp.input_policy,
            base_dir: config.base_dir(),
            data_dir: config.data_dir.clone(),
            keys,
            auth: Mutex::new(None),
            breaker_cfg: b.clone(),
            connects: Default::default(),
            schemas: Default::default(),
            cfg,
        }
    }

    /// How many times a connection was made (1 + restarts).
    pub fn connects(&self) -> u32 {
        self.connects.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn auth(&self) -> Result<Option<Secret>, CallError> {
        let mut g = self.auth.lock().unwrap_or_else(|e| e.into_inner());
        let r = g.get_or_insert_with(|| {
            let stored = self.cfg.auth_token.trim();
            if stored.is_empty() {
                Ok(None)
            } else if crate::secrets::is_sealed(stored) {
                self.keys.open(stored).map(Some).map_err(|e| e.to_string())
            } else {
                tracing::warn!(server = %self.name, "auth_token is stored in plain text; seal it with `maljan servers set-token {}`", self.name);
                Ok(Some(Secret::new(stored)))
            }
        });
        r.clone().map_err(|e| {
            CallError::new(
                ErrorCode::NotConfigured,
                format!("servers.{}.auth_token: {e}", self.name),
            )
            .with_remediation(format!(
                "set the token again: maljan servers set-token {}",
                self.name
            ))
        })
    }

    fn connect_options(&self) -> Result<ConnectOptions, CallError> {
        Ok(ConnectOptions {
            name: self.name.clone(),
            timeout: self.timeout_connect,
            max_answer_bytes: self.max_answer_bytes,
            auth: self.auth()?,
            oauth: self.cfg.oauth.clone().map(|o| {
                transport::oauth::OAuthContext::new(
                    &self.name,
                    o,
                    self.keys.clone(),
                    &self.data_dir,
                )
            }),
            base_dir: self.base_dir.clone(),
            stderr_file: Some(transport::stderr_file(&self.data_dir, &self.name)),
            input_policy: self.input_policy,
        })
    }

    /// The live connection, made (or remade after a crash) when needed.
    pub(crate) async fn connection(
        &self,
    ) -> Result<Arc<Connection>, Result<CallError, Unanswered>> {
        let mut g = self.conn.lock().await;
        if let Some(c) = g.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
            tracing::info!(server = %self.name, "connection lost; reconnecting");
            if let Some(old) = g.take() {
                old.kill();
            }
        }
        let opts = self.connect_options().map_err(Ok)?;
        let conn = Arc::new(transport::connect(&self.cfg, &opts).await.map_err(Err)?);
        self.connects
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!(server = %self.name, via = conn.via.as_str(), protocol = %conn.info.protocol_version, "connected");
        *g = Some(conn.clone());
        Ok(conn)
    }

    /// Drops the connection (killing a stdio server's process group).
    pub async fn disconnect(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            c.kill();
        }
    }

    /// The current connection, if one is up (tests use it to kill a server).
    pub async fn current_connection(&self) -> Option<Arc<Connection>> {
        self.conn.lock().await.clone()
    }

    /// Runs one exchange under the cap and the breaker.
    pub(crate) async fn guarded<T, F, Fut>(&self, f: F) -> Guarded<T>
    where
        F: FnOnce(Arc<Connection>) -> Fut,
        Fut: std::future::Future<Output = Result<T, Unanswered>>,
    {
        let refused = |e: CallError| Guarded {
            value: Err(e),
            wait: Duration::ZERO,
            duration: Duration::ZERO,
            trial: false,
            rest: None,
        };
        if let Err(e) = self.breaker.precheck("") {
            return refused(e);
        }
        let waited = Instant::now();
        let _permit = match &self.cap {
            Some(sem) => match sem.acquire().await {
                Ok(p) => Some(p),
                Err(_) => {
                    return refused(CallError::new(
                        ErrorCode::ToolFailed,
                        "the runtime is shutting down",
                    ));
                }
            },
            None => None,
        };
        let _shared_permit = match (&self.shared, &self.cap) {
            (Some(shared), Some(_)) => {
                shared
                    .acquire(&self.name, self.breaker_cfg.max_concurrent_calls)
                    .await
            }
            _ => None,
        };
        let wait = waited.elapsed();
        let ticket = match self.breaker.admit("") {
            Ok(t) => t,
            Err(e) => return Guarded { wait, ..refused(e) },
        };
        if let (true, Some(shared)) = (ticket.trial, &self.shared) {
            let lease = self.breaker_cfg.call_timeout() + Duration::from_secs(5);
            if shared.claim_trial(&self.name, lease).await == Trial::Elsewhere {
                let e = self.breaker.trial_elsewhere(ticket, "");
                return Guarded { wait, ..refused(e) };
            }
        }
        let mut abandon = AbandonGuard {
            breaker: &self.breaker,
            ticket: Some(ticket),
        };
        let sent = Instant::now();
        let outcome = match self.connection().await {
            Ok(conn) => f(conn).await,
            Err(Ok(config_err)) => {
                // A configuration problem is not the server's silence: it does not count.
                abandon.ticket = None;
                self.breaker.record(ticket, Verdict::Abandoned);
                return Guarded {
                    wait,
                    ..refused(config_err)
                };
            }
            Err(Err(u)) => Err(u),
        };
        let duration = sent.elapsed();
        abandon.ticket = None;
        let (value, rest) = match outcome {
            Ok(v) => {
                self.breaker.record(ticket, Verdict::Answered);
                if let (true, Some(shared)) = (ticket.trial, &self.shared) {
                    shared.announce_recovered(&self.name);
                }
                (Ok(v), None)
            }
            Err(u) => {
                if matches!(u, Unanswered::Gone(_)) {
                    self.disconnect().await;
                }
                let rest = self
                    .breaker
                    .record(ticket, Verdict::Unanswered(u.describe()));
                if let (Some(r), Some(shared)) = (&rest, &self.shared) {
                    shared.announce_rest(&self.name, r.until, r.failures, &r.reason);
                }
                (Err(self.unanswered_error(&u)), rest)
            }
        };
        Guarded {
            value,
            wait,
            duration,
            trial: ticket.trial,
            rest,
        }
    }

    fn unanswered_error(&self, u: &Unanswered) -> CallError {
        let name = &self.name;
        match u {
            Unanswered::Timeout(d) => CallError::new(
                ErrorCode::Timeout,
                format!(
                    "tool server '{name}' did not answer within {}; the call was cancelled on the server",
                    transport::human_secs(*d)
                ),
            )
            .with_remediation(
                "retry with a smaller input, or raise the tool's timeout_s (its manifest) or core.mcp.breaker.call_timeout_seconds; if it keeps happening, check the server's log",
            ),
            Unanswered::Unreadable { .. } => CallError::new(ErrorCode::ToolFailed, format!("tool server '{name}': {}", u.describe()))
                .with_remediation(format!(
                    "the server answers in a way the client cannot use; check its log in {} (an answer too large: ask for less, page, or raise core.mcp.max_answer_bytes)",
                    transport::stderr_file(&self.data_dir, name).display()
                )),
            Unanswered::Gone(_) => CallError::new(ErrorCode::ToolFailed, format!("tool server '{name}': {}", u.describe()))
                .with_remediation(format!(
                    "the server is restarted on the next call; check why it stopped (`maljan servers test {name}`, its log in {})",
                    transport::stderr_file(&self.data_dir, name).display()
                )),
            Unanswered::Unreachable(_) => CallError::new(ErrorCode::ToolFailed, format!("tool server '{name}': {}", u.describe()))
                .with_remediation(format!("check servers.{name} in the config and run `maljan servers test {name}`")),
        }
    }
}

/// If the caller drops a call mid-flight, the breaker hears "abandoned" (so a trial slot is freed).
struct AbandonGuard<'a> {
    breaker: &'a Breaker,
    ticket: Option<Ticket>,
}

impl Drop for AbandonGuard<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.breaker.record(t, Verdict::Abandoned);
        }
    }
}

/// Reads tools/list and the manifest over `conn`.
pub(crate) async fn read_view(
    slot: &ServerSlot,
    conn: &Connection,
) -> Result<ServerView, Unanswered> {
    let budget = slot.breaker_cfg.call_timeout().min(Duration::from_secs(60));
    let tools = conn.list_tools(budget).await?;
    let manifest = if tools.iter().any(|t| t.name == manifest::CAPABILITIES_TOOL) {
        match conn
            .call_tool(manifest::CAPABILITIES_TOOL, None, budget)
            .await
            .0?
        {
            Reply::Result(v) => manifest::parse_manifest(&v).map_err(Some),
            Reply::RpcError { code, message } => Err(Some(format!(
                "capabilities failed: JSON-RPC error {code}: {message}"
            ))),
            Reply::Unusable(why) | Reply::Declined(why) => {
                Err(Some(format!("capabilities failed: {why}")))
            }
            Reply::ScopeRequired(scope) => Err(Some(format!(
                "capabilities failed: the token lacks the OAuth scope '{scope}'"
            ))),
            Reply::SignInRequired => Err(Some(
                "capabilities failed: the server no longer accepts the stored sign-in".into(),
            )),
        }
    } else {
        Err(None)
    };
    Ok(manifest::build_view(
        &slot.name,
        &conn.info,
        conn.via.as_str(),
        &tools,
        manifest,
        slot.cfg.tools.as_deref(),
    ))
}

/// Converts a raw reply into the tool's success or error.
/// Takes the reply by value: a result can be large, and cloning it cost every call a copy.
pub(crate) fn read_reply(reply: Reply) -> (Option<Value>, Option<CallError>) {
    match reply {
        Reply::Result(v) => {
            let error = crate::outcome::read_result(&v).err();
            (Some(v), error)
        }
        Reply::RpcError { code, message } => {
            let code_name = if code == -32602 {
                ErrorCode::BadArgument
            } else {
                ErrorCode::ToolFailed
            };
            (
                None,
                Some(CallError::new(
                    code_name,
                    format!("the server answered with JSON-RPC error {code}: {message}"),
                )),
            )
        }
        Reply::Declined(why) => (
            None,
            Some(CallError::new(ErrorCode::ToolFailed, why).with_remediation(
                "the tool asks a person (or the client's model) for input while it runs; call it with arguments that need no question, or from a client that can answer",
            )),
        ),
        Reply::Unusable(why) => (
            None,
            Some(CallError::new(ErrorCode::ToolFailed, why).with_remediation(
                "an answer too large: ask for less (a page, a filter) or raise core.mcp.max_answer_bytes; a malformed one: check the server's log",
            )),
        ),
        Reply::ScopeRequired(scope) => (
            None,
            Some(
                CallError::new(
                    ErrorCode::NotConfigured,
                    format!(
                        "the server refused the token for this call: it needs the OAuth scope '{scope}' (HTTP 403, insufficient_scope)"
                    ),
                )
                .with_remediation(
                    "add the scope to the server's oauth.scopes in the config and sign in again (`maljan servers login NAME`)",
                ),
            ),
        ),
        Reply::SignInRequired => (
            None,
            Some(
                CallError::new(
                    ErrorCode::NotConfigured,
                    "the server no longer accepts the stored sign-in (HTTP 401 with the token sent; it could not be refreshed)",
                )
                .with_remediation("sign in again: `maljan servers login NAME`"),
            ),
        ),
    }
}
