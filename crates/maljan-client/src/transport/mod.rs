//! How bytes reach a server. This module is the only place the runtime touches rmcp (pinned
//! exactly; its majors move fast): everything above it sees a [`Connection`] that can list tools
//! ([`ListedTool`]) and call one with a deadline ([`Reply`]), and no rmcp type leaves it.
//!
//! - `stdio`: a child process (see [`stdio`]), read through bounded framing (see `lines`).
//! - `streamable-http`: rmcp's own client over reqwest (TCP_NODELAY), `Authorization: Bearer`
//!   from the token, a new session when the server answers 404 for an expired one (rmcp
//!   re-initialises transparently). Every message, a put_sample chunk too, is rmcp's to send.
//! - `sse`: the legacy HTTP+SSE transport (see `sse`).
//! - `http`: streamable HTTP, falling back to legacy SSE on the same URL when the server refuses
//!   the streamable POST (the spec's backwards-compatibility section).
//! - [`oauth`]: OAuth 2.1 tokens, for an entry with an `oauth` table, in place of `auth_token`.
//!
//! On every transport the client tries 2026-07-28 first (`server/discover`), and falls back to the
//! `initialize` handshake for an older server. rmcp's per-connection response cache honours a list
//! result's `ttlMs`/`cacheScope` (the connection is the server's, kept across jobs), so a job
//! reads the tool list from the server only once it has expired. `call` sends `tools/call` with
//! `traceparent` in `_meta` and answers `input_required` by the policy in `input`; a long call to
//! a server that offers tasks is offered as one and polled to its end (see `task`).

mod call;
mod discover;
mod input;
mod lines;
pub mod oauth;
mod sse;
pub mod stdio;
mod task;

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, Once,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError,
    model::{
        CancelledNotification, CancelledNotificationParam, ClientCapabilities, ClientConfig,
        ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
        RequestId, ServerResult,
    },
    service::{Peer, PeerRequestOptions, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;

use crate::{
    config::{InputPolicy, ServerConfig, TransportKind},
    redact::scrub_urls,
    secrets::Secret,
};

/// Why a server gave no answer. These are what the breaker counts.
#[derive(Debug, Clone, PartialEq)]
pub enum Unanswered {
    /// No answer within the deadline (the call was cancelled on the server).
    Timeout(Duration),
    /// The process or connection went away ("the server's process or connection is gone").
    Gone(String),
    /// It could not be reached or started at all.
    Unreachable(String),
    /// No answer within the deadline, but the server sent what no call could take meanwhile
    /// (an answer to no call in flight, a line that is not JSON-RPC): this says what.
    Unreadable { waited: Duration, seen: String },
}

impl Unanswered {
    /// A sentence for a person (and the ledger's message).
    pub fn describe(&self) -> String {
        match self {
            Self::Timeout(d) => format!(
                "the server did not answer in time (waited {})",
                human_secs(*d)
            ),
            Self::Gone(why) => format!("the server's process or connection is gone: {why}"),
            Self::Unreachable(why) => format!("the server could not be reached: {why}"),
            Self::Unreadable { waited, seen } => format!(
                "no answer the client could read within {}: {seen}",
                human_secs(*waited)
            ),
        }
    }
}

pub(crate) fn human_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 && (s - s.round()).abs() < 0.05 {
        format!("{} s", s.round())
    } else {
        format!("{s:.3} s")
    }
}

/// What came back from a `tools/call`: the result (as JSON, exactly as sent) or a JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Result(Value),
    RpcError {
        code: i32,
        message: String,
    },
    /// What came for the call could not be used (too large, malformed): the client says why.
    Unusable(String),
    /// The server asked for input (2026-07-28 `input_required`) the runtime's policy does not give
    /// (see `input`): why the call ended.
    Declined(String),
    /// The server refused the token for this call (HTTP 403 `insufficient_scope`): the scope its
    /// challenge names, when it names one. A person must sign in again with it.
    ScopeRequired(String),
    /// The server no longer takes the stored sign-in (HTTP 401 once the token was sent and could
    /// not be refreshed: revoked, expired for good, or the server moved to another authorization
    /// server). A person must sign in again.
    SignInRequired,
}

/// One tool as the server's tools/list described it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: Option<String>,
    /// The tool's inputSchema (a JSON Schema object).
    pub input_schema: serde_json::Map<String, Value>,
    /// The readOnlyHint annotation, where the server gave one.
    pub read_only: Option<bool>,
    /// The destructiveHint annotation, where the server gave one.
    pub destructive: Option<bool>,
    /// The openWorldHint annotation (the tool reaches beyond the host), where the server gave one.
    pub open_world: Option<bool>,
}

impl ListedTool {
    /// A plain function, not a `From` impl: that would put rmcp's type in the public API.
    fn from_rmcp(t: rmcp::model::Tool) -> Self {
        let annotations = t.annotations.as_ref();
        Self {
            read_only: annotations.and_then(|a| a.read_only_hint),
            destructive: annotations.and_then(|a| a.destructive_hint),
            open_world: annotations.and_then(|a| a.open_world_hint),
            name: t.name.into_owned(),
            description: t.description.map(|d| d.into_owned()),
            input_schema: std::sync::Arc::unwrap_or_clone(t.input_schema),
        }
    }
}

/// How the connection was made (for `servers test` and the ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Stdio,
    StreamableHttp,
    LegacySse,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::StreamableHttp => "streamable-http",
            Self::LegacySse => "sse",
        }
    }
}

/// The server's side of the handshake.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub protocol_version: String,
    pub name: Option<String>,
    pub version: Option<String>,
    pub instructions: Option<String>,
}

/// One live connection to one server.
pub struct Connection {
    service: RunningService<RoleClient, input::Unattended>,
    peer: Peer<RoleClient>,
    /// How this connection answers a server that asks the client something.
    input_policy: InputPolicy,
    pub via: Via,
    pub info: PeerInfo,
    child: Mutex<Option<stdio::ChildGuard>>,
    stderr: Option<stdio::StderrLog>,
    /// What a stdio server sent that no call could take (see `lines`).
    faults: Option<Arc<lines::Faults>>,
    dead: AtomicBool,
    /// The shortest call offered as a task (the entry's `task_threshold_s`); None: never.
    task_threshold: Option<Duration>,
    /// Calls the server ran as tasks (see `task`).
    tasks_followed: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("via", &self.via)
            .field("info", &self.info)
            .finish()
    }
}

/// What [`connect`] needs besides the server's entry.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub name: String,
    pub timeout: Duration,
    /// The longest answer read from a stdio server (`core.mcp.max_answer_bytes`).
    pub max_answer_bytes: usize,
    /// The opened `auth_token` (see `secrets`).
    pub auth: Option<Secret>,
    /// OAuth 2.1 in place of `auth`, when the server's entry has an `oauth` table.
    pub oauth: Option<oauth::OAuthContext>,
    /// Relative stdio `cwd`s resolve against this.
    pub base_dir: PathBuf,
    /// Where a stdio server's stderr is mirrored.
    pub stderr_file: Option<PathBuf>,
    /// `core.mcp.input_policy`.
    pub input_policy: InputPolicy,
}

/// Form elicitation is declared so that a server asks (an `input_required` result, or an older
/// server's `elicitation/create`), which the policy in `input` answers, instead of failing the
/// call for a missing capability.
fn client_config() -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    let mut elicitation = ElicitationCapability::new();
    elicitation.form = Some(FormElicitationCapability::default());
    capabilities.elicitation = Some(elicitation);
    ClientConfig::new(
        capabilities,
        Implementation::new("maljan", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// `server/discover` first (2026-07-28: no session, the version in every request's `_meta`);
/// a server that answers it as an older one would (an error, or a success that is no discover
/// result: see `discover`), or not within 10 s, gets the `initialize` handshake at the newest
/// version that has one.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// reqwest is built without a default TLS provider; install ring once, before the first client.
/// TCP_NODELAY: without it a small answer written just after a stream's head waited for the
/// peer's delayed ACK (40 ms a call).
pub fn http_client() -> reqwest::Client {
    install_tls_provider();
    reqwest::Client::builder()
        .user_agent(concat!("maljan/", env!("CARGO_PKG_VERSION")))
        .tcp_nodelay(true)
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Before any reqwest client is built, ours or rmcp's own (its OAuth client).
fn install_tls_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Connects and performs the handshake, within `opts.timeout`.
pub async fn connect(cfg: &ServerConfig, opts: &ConnectOptions) -> Result<Connection, Unanswered> {
    let mut conn = connect_by_transport(cfg, opts).await?;
    conn.task_threshold = cfg.task_threshold();
    Ok(conn)
}

async fn connect_by_transport(
    cfg: &ServerConfig,
    opts: &ConnectOptions,
) -> Result<Connection, Unanswered> {
    match cfg.transport {
        TransportKind::Stdio => connect_stdio(cfg, opts).await,
        TransportKind::StreamableHttp => connect_streamable(cfg, opts).await,
        TransportKind::Sse => connect_sse(cfg, opts).await,
        TransportKind::Http => match connect_streamable(cfg, opts).await {
            Ok(c) => Ok(c),
            Err(streamable) => {
                tracing::debug!(server = %opts.name, "streamable HTTP refused ({}); trying legacy SSE", streamable.describe());
                connect_sse(cfg, opts).await.map_err(|sse| {
                    Unanswered::Unreachable(format!(
                        "streamable HTTP: {}; legacy SSE: {}",
                        inner_reason(&streamable),
                        inner_reason(&sse)
                    ))
                })
            }
        },
    }
}

fn inner_reason(u: &Unanswered) -> String {
    match u {
        Unanswered::Timeout(d) => format!("no MCP handshake within {}", human_secs(*d)),
        Unanswered::Gone(s) | Unanswered::Unreachable(s) => s.clone(),
        Unanswered::Unreadable { .. } => u.describe(),
    }
}

async fn handshake<T, E, A>(
    transport: T,
    timeout: Duration,
    policy: InputPolicy,
) -> Result<RunningService<RoleClient, input::Unattended>, Unanswered>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(
        timeout,
        input::Unattended {
            config: client_config(),
            policy,
        }
        .serve_with_lifecycle(
            discover::LegacyDiscoverReply::new(transport.into_transport()),
            lifecycle(),
        ),
    )
    .await
    {
        Err(_) => Err(Unanswered::Unreachable(format!(
            "no MCP handshake within {}",
            human_secs(timeout)
        ))),
        Ok(Err(e)) => Err(Unanswered::Unreachable(scrub_urls(&plain_transport_error(
            &e.to_string(),
        )))),
        Ok(Ok(s)) => Ok(s),
    }
}

fn finish(service: RunningService<RoleClient, input::Unattended>, via: Via) -> Connection {
    let peer = service.peer().clone();
    let input_policy = service.service().policy;
    let info = match peer.peer_info() {
        Some(i) => PeerInfo {
            protocol_version: i.protocol_version.to_string(),
            name: i.server_info.as_ref().map(|s| s.name.clone()),
            version: i.server_info.as_ref().map(|s| s.version.clone()),
            instructions: i.instructions.clone(),
        },
        None => PeerInfo {
            protocol_version: "unknown".into(),
            name: None,
            version: None,
            instructions: None,
        },
    };
    Connection {
        service,
        peer,
        input_policy,
        via,
        info,
        child: Mutex::new(None),
        stderr: None,
        faults: None,
        dead: AtomicBool::new(false),
        task_threshold: None,
        tasks_followed: Default::default(),
    }
}

async fn connect_stdio(
    cfg: &ServerConfig,
    opts: &ConnectOptions,
) -> Result<Connection, Unanswered> {
    let (mut child, stdout, stdin) = stdio::spawn(cfg, &opts.base_dir, opts.stderr_file.clone())
        .map_err(Unanswered::Unreachable)?;
    let faults = Arc::new(lines::Faults::default());
    let transport = lines::LineTransport::new(stdout, stdin, opts.max_answer_bytes, faults.clone());
    match handshake(transport, opts.timeout, opts.input_policy).await {
        Ok(service) => {
            let mut conn = finish(service, Via::Stdio);
            conn.stderr = Some(child.stderr.clone());
            conn.faults = Some(faults);
            *conn.child.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(child);
            Ok(conn)
        }
        Err(err) => {
            // Say why: the exit status and the last lines it wrote to stderr.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let status = child.try_exit_status();
            let tail = child.stderr.tail(600);
            let mut why = inner_reason(&err);
            if let Some(st) = status {
                why = format!("the process exited ({st}) during the handshake");
            }
            if !tail.is_empty() {
                why.push_str(&format!("; its stderr ends: {tail}"));
            }
            Err(Unanswered::Unreachable(why))
        }
    }
}

fn parse_url(cfg: &ServerConfig) -> Result<reqwest::Url, Unanswered> {
    reqwest::Url::parse(&cfg.url).map_err(|e| Unanswered::Unreachable(format!("bad url: {e}")))
}

async fn connect_streamable(
    cfg: &ServerConfig,
    opts: &ConnectOptions,
) -> Result<Connection, Unanswered> {
    let url = parse_url(cfg)?;
    let mut tc = StreamableHttpClientTransportConfig::with_uri(url.as_str().to_string())
        .max_concurrent_requests(64)
        .reinit_on_expired_session(true)
        .max_json_response_size(64 * 1024 * 1024)
        .max_sse_event_size(64 * 1024 * 1024);
    let service = if let Some(ctx) = &opts.oauth {
        oauth::handshake(url.as_str(), tc, ctx, opts.timeout, opts.input_policy).await?
    } else {
        if let Some(token) = opts.auth.as_ref().filter(|t| !t.is_empty()) {
            tc = tc.auth_header(token.expose().to_string());
        }
        let transport = StreamableHttpClientTransport::with_client(http_client(), tc);
        handshake(transport, opts.timeout, opts.input_policy).await?
    };
    Ok(finish(service, Via::StreamableHttp))
}

async fn connect_sse(cfg: &ServerConfig, opts: &ConnectOptions) -> Result<Connection, Unanswered> {
    let url = parse_url(cfg)?;
    let auth = match &opts.oauth {
        Some(ctx) => Some(oauth::bearer_now(url.as_str(), ctx).await?),
        None => opts.auth.clone().filter(|t| !t.is_empty()),
    };
    let transport = sse::SseTransport::connect(http_client(), url, auth, opts.timeout)
        .await
        .map_err(|e| Unanswered::Unreachable(e.to_string()))?;
    let service = handshake(transport, opts.timeout, opts.input_policy).await?;
    Ok(finish(service, Via::LegacySse))
}

/// Sends `notifications/cancelled` for a request whose caller went away before its answer.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let id = self.id.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = peer
                        .send_notification(cancelled(id, "request abandoned by the caller").into())
                        .await;
                });
            }
        }
    }
}

fn cancelled(id: RequestId, reason: &str) -> CancelledNotification {
    CancelledNotification::new(CancelledNotificationParam::new(
        Some(id),
        Some(reason.into()),
    ))
}

impl Connection {
    /// True once the transport is gone (a crashed process, a closed stream).
    pub fn is_closed(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
            || self.service.is_closed()
            || self.peer.is_transport_closed()
    }

    /// The stderr log of a stdio server.
    pub fn stderr(&self) -> Option<&stdio::StderrLog> {
        self.stderr.as_ref()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|c| c.pid())
    }

    fn classify(&self, e: ServiceError) -> Classified {
        match e {
            ServiceError::Timeout { timeout } => {
                Classified::Unanswered(Unanswered::Timeout(timeout))
            }
            ServiceError::McpError(data) => {
                let code = data.code.0;
                if code == -32000 && data.message.to_lowercase().contains("closed") {
                    self.dead.store(true, Ordering::Relaxed);
                    return Classified::Unanswered(Unanswered::Gone(
                        "the connection to the server closed".into(),
                    ));
                }
                if code == 408 {
                    return Classified::Unanswered(Unanswered::Gone(
                        "the server did not answer in time".into(),
                    ));
                }
                if code == lines::UNUSABLE_ANSWER {
                    return Classified::Answer(Reply::Unusable(data.message.to_string()));
                }
                Classified::Answer(Reply::RpcError {
                    code,
                    message: scrub_urls(&data.message),
                })
            }
            ServiceError::TransportClosed | ServiceError::Cancelled { .. } => {
                self.dead.store(true, Ordering::Relaxed);
                let mut why = "transport closed".to_string();
                if let Some(child) = self
                    .child
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_mut()
                    && let Some(st) = child.try_exit_status()
                {
                    why = format!("the process exited ({st})");
                }
                Classified::Unanswered(Unanswered::Gone(why))
            }
            ServiceError::TransportSend(err) => {
                if let Some(scope) = insufficient_scope(&err) {
                    return Classified::Answer(Reply::ScopeRequired(scope));
                }
                if refused_sign_in(&err) {
                    return Classified::Answer(Reply::SignInRequired);
                }
                if self.peer.is_transport_closed() {
                    self.dead.store(true, Ordering::Relaxed);
                }
                Classified::Unanswered(Unanswered::Gone(scrub_urls(&plain_transport_error(
                    &err.to_string(),
                ))))
            }
            other => Classified::Answer(Reply::RpcError {
                code: -32603,
                message: scrub_urls(&other.to_string()),
            }),
        }
    }

    /// Closes the connection; a stdio server's process group is killed.
    pub async fn close(self) {
        let Connection {
            mut service, child, ..
        } = self;
        let _ = tokio::time::timeout(Duration::from_secs(2), service.close()).await;
        drop(child);
    }

    /// Kills a stdio server's process group now (tests and shutdown).
    pub fn kill(&self) {
        self.dead.store(true, Ordering::Relaxed);
        self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// The scope a 403 `insufficient_scope` challenge names ("" when it names none), if that is why
/// a request could not be sent.
fn insufficient_scope(err: &rmcp::transport::DynamicTransportError) -> Option<String> {
    use rmcp::transport::streamable_http_client::InsufficientScopeError;
    caused_by::<InsufficientScopeError>(err).map(|e| e.required_scope.clone().unwrap_or_default())
}

/// Whether a request could not be sent because the server answered 401 to the client's token.
fn refused_sign_in(err: &rmcp::transport::DynamicTransportError) -> bool {
    use rmcp::transport::streamable_http_client::AuthRequiredError;
    caused_by::<AuthRequiredError>(err).is_some()
}

/// The first error of type `E` along `err`'s chain of sources, `err` itself included.
fn caused_by<'a, E: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut source = Some(err);
    while let Some(current) = source {
        if let Some(e) = current.downcast_ref::<E>() {
            return Some(e);
        }
        source = current.source();
    }
    None
}

/// rmcp names the transport's Rust type inside its errors ("Transport [rmcp::…] error: "); people
/// need the cause, so that part is cut wherever it appears.
fn plain_transport_error(msg: &str) -> String {
    let mut out = msg.to_string();
    while let Some(start) = out.find("Transport [") {
        match out[start..].find("] error: ") {
            Some(end) => out.replace_range(start..start + end + "] error: ".len(), ""),
            None => break,
        }
    }
    out
}

enum Classified {
    Answer(Reply),
    Unanswered(Unanswered),
}

fn result_kind(r: &ServerResult) -> &'static str {
    match r {
        ServerResult::InputRequiredResult(_) => "input_required",
        ServerResult::CreateTaskResult(_) => "task",
        _ => "unexpected",
    }
}

/// Reads the stderr file path for a server in `data_dir`.
pub fn stderr_file(data_dir: &Path, server: &str) -> PathBuf {
    data_dir.join("logs").join(format!("{server}.stderr.log"))
}

/// Type-erased handle used by the runtime.
pub type SharedConnection = Arc<Connection>;
