//! The runtime's configuration: a TOML file with `[servers.NAME]` entries and
//! `[core.mcp.breaker]`.
//!
//! ```toml
//! [core.mcp.breaker]
//! failures_to_open = 3          # unanswered calls in a row before a server rests
//! cooldown_seconds = 60         # how long it rests
//! max_concurrent_calls = 4      # per server; 0 = uncapped
//! call_timeout_seconds = 120    # when the manifest gives the tool no timeout_s
//! timeout_margin_seconds = 10   # added to a manifest timeout_s
//! connect_timeout_seconds = 30  # spawn/connect + handshake
//!
//! [servers.files]
//! transport = "stdio"           # stdio | http | streamable-http | sse
//! command = "/usr/local/bin/maljan"
//! args = ["serve", "files", "--root", "/srv/samples"]
//! env = { RUST_LOG = "info" }
//! env_allow = ["MALJAN_STAGING_DIR"]
//!
//! [servers.remote]
//! transport = "http"
//! url = "https://tools.example/mcp"
//! auth_token = "enc:v1:…"       # written by `maljan servers set-token remote`
//!
//! [servers.saas]                # a server behind OAuth 2.1 (see `transport::oauth`)
//! transport = "http"
//! url = "https://mcp.saas.example/mcp"
//! oauth = { scopes = ["mcp:tools"] }   # then, once: maljan servers login saas
//!
//! [servers.pipeline]            # machine to machine: the client-credentials grant
//! transport = "http"
//! url = "https://mcp.internal.example/mcp"
//! oauth = { grant = "client_credentials", client_id = "maljan-worker", client_secret = "enc:v1:…" }
//! ```
//!
//! With no config file at all, the built-in servers (`files`, `analysis`: this binary's `serve`
//! subcommands over stdio) are configured, so everything works on first run. A file `maljan servers
//! add` starts says `[core] builtin_servers = true`: the built-ins stay configured beside its own
//! entries without being written into it (a user's entry of the same name replaces one; removing
//! one writes it `enabled = false`). A file without that line is the whole truth.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};

/// Parent environment variables every stdio server gets when they are set (the same base set as
/// Maljan's Python runtime). Everything else must be named in `env_allow`.
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "JAVA_HOME",
    "PYTHONIOENCODING",
    "VIRTUAL_ENV",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
];

/// A config error that names the file, the key and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub key: String,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "config file {}: {}", self.file.display(), self.problem)
        } else {
            write!(
                f,
                "config file {}: {}: {}",
                self.file.display(),
                self.key,
                self.problem
            )
        }
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum TransportKind {
    #[default]
    #[serde(rename = "stdio")]
    Stdio,
    /// Streamable HTTP, falling back to legacy HTTP+SSE when the server refuses the POST.
    #[serde(rename = "http")]
    Http,
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    /// Legacy HTTP+SSE (GET the event stream, POST to the endpoint it names).
    #[serde(rename = "sse")]
    Sse,
}

impl TransportKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
            Self::StreamableHttp => "streamable-http",
            Self::Sse => "sse",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "stdio" => Self::Stdio,
            "http" => Self::Http,
            "streamable-http" | "streamable_http" | "streamableHttp" => Self::StreamableHttp,
            "sse" => Self::Sse,
            _ => return None,
        })
    }
    pub fn is_http(self) -> bool {
        !matches!(self, Self::Stdio)
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[servers.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    #[serde(default)]
    pub transport: TransportKind,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Parent environment variables passed through, beyond [`BASE_ENV`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_allow: Vec<String>,
    /// Working directory; relative paths resolve against the config file's directory.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cwd: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// `enc:v1:…` (see `secrets`); never plain text if written by maljan.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub auth_token: String,
    /// OAuth 2.1 instead of a fixed `auth_token` (HTTP servers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthConfig>,
    /// A shared volume the sample is copied to for this server (issue 5).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mirror_dir: String,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
    /// Tools this server may be asked to run; absent = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// The agent fills this server's sample argument itself (the model never sees it): `true`,
    /// or the argument's name when this server's tools do not call it one of
    /// `maljan_protocol::SAMPLE_PARAMS` (`pin_sample = "target_file"`; the sample's path is then
    /// handed over in that argument too). Absent: yes for the built-in analysis server, no
    /// elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_sample: Option<PinSample>,
    /// Offer this server's destructive tools (destructiveHint, the files server's writing
    /// actions) to a model. Off unless set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offer_destructive: bool,
    /// Offer this server's open-world tools (openWorldHint: they connect beyond the host, or run
    /// what may) and its configuration tools (`*_later_init`, `*_login`, `*_configure`, ...,
    /// which choose endpoints and credentials) to a model. Off unless set: a model must not
    /// choose where the sample's data goes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offer_network: bool,
    /// Send calls whose arguments this server's inputSchema refuses, instead of refusing them
    /// as `bad_argument` before they are sent: for a server whose schema is stricter than what it
    /// accepts, and for a test driver that sends a scenario's arguments as given. An unlisted
    /// tool is still `no_such_tool`. Off unless set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub send_unchecked_arguments: bool,
    /// A call whose timeout (the tool's `timeout_s` plus the margin, else the default) is at least
    /// this many seconds is offered as a task (MCP tasks extension) to a server that declares
    /// `io.modelcontextprotocol/tasks`, and polled to its end; see `transport::task`. Absent: 60.
    /// A negative value: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_threshold_s: Option<f64>,
}

impl ServerConfig {
    /// The shortest call offered as a task (`task_threshold_s`); None: never.
    pub fn task_threshold(&self) -> Option<Duration> {
        match self.task_threshold_s {
            None => Some(Duration::from_secs(60)),
            Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
            Some(_) => None,
        }
    }
}

/// `pin_sample`: on or off, or on with the argument's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PinSample {
    On(bool),
    Param(String),
}

impl PinSample {
    pub fn is_on(&self) -> bool {
        !matches!(self, Self::On(false))
    }

    /// The argument's name, when the config gives one.
    pub fn param(&self) -> Option<&str> {
        match self {
            Self::Param(p) => Some(p),
            Self::On(_) => None,
        }
    }
}

/// How maljan obtains a server's OAuth access token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// A person signs in once in a browser (`maljan servers login NAME`); refresh tokens keep it
    /// going without them.
    #[default]
    AuthorizationCode,
    /// Machine to machine: the client's own id and secret, no person at all.
    ClientCredentials,
}

impl OAuthGrant {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthorizationCode => "authorization_code",
            Self::ClientCredentials => "client_credentials",
        }
    }
}

/// `[servers.NAME.oauth]`. Tokens are not kept here: they change on every refresh, so they live
/// sealed (enc:v1) in `<data dir>/oauth/NAME.sealed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    #[serde(default)]
    pub grant: OAuthGrant,
    /// A client registered beforehand; empty = dynamic client registration (RFC 7591) at login.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    /// `enc:v1:…` (see `secrets`): a confidential client's secret. The client-credentials grant
    /// needs one; `maljan servers login NAME` asks for it and seals it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_secret: String,
    /// The https URL of a client ID metadata document the operator publishes for maljan (SEP-991):
    /// the client id where the authorization server supports such documents
    /// (`client_id_metadata_document_supported`); elsewhere dynamic registration is used.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_metadata_url: String,
    /// Scopes to ask for; empty = what the server's challenge and metadata name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The loopback port `servers login` takes the browser's redirect on; 0 = any free port
    /// (fine with dynamic registration; a pre-registered client usually needs a fixed one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redirect_port: u16,
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

/// `[core.mcp.breaker]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    pub failures_to_open: u32,
    pub cooldown_seconds: f64,
    /// 0 = uncapped.
    pub max_concurrent_calls: usize,
    pub call_timeout_seconds: f64,
    pub timeout_margin_seconds: f64,
    pub connect_timeout_seconds: f64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failures_to_open: 3,
            cooldown_seconds: 60.0,
            max_concurrent_calls: 4,
            call_timeout_seconds: 120.0,
            timeout_margin_seconds: 10.0,
            connect_timeout_seconds: 30.0,
        }
    }
}

impl BreakerConfig {
    pub fn cooldown(&self) -> Duration {
        Duration::from_secs_f64(self.cooldown_seconds.max(0.0))
    }
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.call_timeout_seconds.max(0.001))
    }
    pub fn margin(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_margin_seconds.max(0.0))
    }
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.connect_timeout_seconds.max(0.001))
    }
}

/// The model APIs the agent speaks.
pub const LLM_PROVIDERS: &[&str] = &["openai", "anthropic"];

/// `[llm]`: the model the agent stages use, and its fallbacks.
///
/// ```toml
/// [llm]
/// provider = "openai"                 # or "anthropic"
/// base_url = "http://127.0.0.1:8000/v1"
/// model = "qwen2.5-14b-instruct"
/// context_window = 32768              # tokens; sizes what a tool answer may take
/// api_key = "enc:v1:…"                # written by `maljan llm set-key`
/// fallbacks = [{ provider = "anthropic", model = "claude-sonnet-4-5" }]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    pub provider: String,
    /// Empty: the provider's public API.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_url: String,
    pub model: String,
    #[serde(default = "default_context_window")]
    pub context_window: u32,
    /// `enc:v1:…` (see `secrets`); never plain text if written by maljan.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_key: String,
    /// One request's deadline.
    #[serde(default = "default_llm_timeout")]
    pub timeout_seconds: f64,
    /// The most tokens one answer may take.
    #[serde(default = "default_max_output")]
    pub max_output_tokens: u32,
    /// Tried in order, only when the one before fails as a provider (unreachable, timeout, 429 or
    /// 5xx after its Retry-After, unknown model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<LlmFallback>,
}

/// One `[llm].fallbacks` entry: what it does not say is taken from `[llm]` when the provider is
/// the same (base_url, key), else the provider's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmFallback {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
}

fn default_context_window() -> u32 {
    32768
}
fn default_llm_timeout() -> f64 {
    120.0
}
fn default_max_output() -> u32 {
    2048
}

impl LlmConfig {
    /// `[llm]` with only what must be said.
    pub fn new(provider: &str, base_url: &str, model: &str) -> Self {
        Self {
            provider: provider.into(),
            base_url: base_url.into(),
            model: model.into(),
            context_window: default_context_window(),
            api_key: String::new(),
            timeout_seconds: default_llm_timeout(),
            max_output_tokens: default_max_output(),
            fallbacks: Vec::new(),
        }
    }

    /// (key, problem) of the first thing wrong.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let check = |key: String, provider: &str, model: &str, base_url: &str| {
            if !LLM_PROVIDERS.contains(&provider) {
                return Err((
                    format!("{key}.provider"),
                    format!("{provider:?} is not one of {}", LLM_PROVIDERS.join(", ")),
                ));
            }
            if model.trim().is_empty() {
                return Err((format!("{key}.model"), "must name a model".into()));
            }
            if !base_url.is_empty() {
                match reqwest::Url::parse(base_url) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") && u.query().is_none() => {}
                    Ok(_) => {
                        return Err((
                            format!("{key}.base_url"),
                            "must be an http or https URL without a query string".into(),
                        ));
                    }
                    Err(e) => return Err((format!("{key}.base_url"), format!("not a URL: {e}"))),
                }
            }
            Ok(())
        };
        check("llm".into(), &self.provider, &self.model, &self.base_url)?;
        if self.context_window < 1024 {
            return Err((
                "llm.context_window".into(),
                "must be at least 1024 tokens".into(),
            ));
        }
        if !self.timeout_seconds.is_finite() || self.timeout_seconds <= 0.0 {
            return Err((
                "llm.timeout_seconds".into(),
                "must be a number of seconds > 0".into(),
            ));
        }
        if self.max_output_tokens == 0 {
            return Err(("llm.max_output_tokens".into(), "must be at least 1".into()));
        }
        for (i, f) in self.fallbacks.iter().enumerate() {
            check(
                format!("llm.fallbacks[{i}]"),
                &f.provider,
                &f.model,
                &f.base_url,
            )?;
        }
        Ok(())
    }
}

/// `[core.ledger]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerConfig {
    /// The SQLite file; empty = `<data dir>/ledger.sqlite3`.
    pub path: String,
    /// `postgres://…` (or `sqlite:PATH`) instead of `path`; MALJAN_DATABASE_URL overrides it.
    pub database_url: String,
    /// Results longer than this (bytes of JSON) are cut and marked truncated.
    pub result_cap_bytes: usize,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            path: String::new(),
            database_url: String::new(),
            result_cap_bytes: 256 * 1024,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    pub breaker: BreakerConfig,
    /// The longest answer read from a stdio server, in bytes. A longer one is skipped as it
    /// arrives (never held whole) and its call fails saying so.
    pub max_answer_bytes: usize,
    /// What the runtime answers when a server asks the client something mid-call (an
    /// elicitation form, its roots, a completion from its model).
    pub input_policy: InputPolicy,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            breaker: BreakerConfig::default(),
            max_answer_bytes: 16 * 1024 * 1024,
            input_policy: InputPolicy::default(),
        }
    }
}

/// `core.mcp.input_policy`: maljan runs jobs without a person at the keyboard, so nothing it
/// answers a server may wait for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum InputPolicy {
    /// Decline every elicitation, with the reason; no roots; a request for a completion from
    /// the client's model ends the call.
    #[default]
    Decline,
    /// As `decline`, but a form elicitation whose schema gives a default for every field it
    /// asks for is accepted with those defaults (SEP-1034): the answer is the server's own.
    Defaults,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CoreConfig {
    pub mcp: McpConfig,
    pub ledger: LedgerConfig,
    /// The built-in servers (`files`, `analysis`) are configured beside the file's own entries
    /// without being written in it: an entry of the same name replaces one, `enabled = false`
    /// turns one off. Written by `maljan servers add` when it starts a file; a file without it
    /// is the whole truth.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub builtin_servers: bool,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub core: CoreConfig,
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
    /// The model the agent stages talk to; absent = triage only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmConfig>,
    /// Where it was read from (not serialised).
    #[serde(skip)]
    pub path: PathBuf,
    /// False when no file existed and the built-ins were configured instead.
    #[serde(skip)]
    pub from_file: bool,
    /// The data directory (ledger, key file, logs).
    #[serde(skip)]
    pub data_dir: PathBuf,
}

impl Config {
    /// Reads the config: `explicit` (--config), else MALJAN_CONFIG, else `<data dir>/config.toml`;
    /// when that file does not exist, the built-in servers.
    pub fn load(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let path = crate::paths::config_path(explicit);
        let data_dir = crate::paths::data_dir();
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let mut config = Self::parse(&text, &path)?;
                config.data_dir = data_dir;
                if config.core.builtin_servers {
                    for (name, server) in Self::builtin().servers {
                        config.servers.entry(name).or_insert(server);
                    }
                }
                Ok(config)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => {
                let mut config = Self::builtin();
                config.path = path;
                config.data_dir = data_dir;
                Ok(config)
            }
            Err(e) => Err(ConfigError {
                file: path,
                key: String::new(),
                problem: format!("cannot read it: {e}"),
            }),
        }
    }

    /// Reads the config to change it: like [`Config::load`], but a missing file (even one named
    /// with --config) starts from the built-in servers, to be written at that path.
    pub fn load_for_edit(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let path = crate::paths::config_path(explicit);
        if path.exists() {
            return Self::load(Some(&path));
        }
        let mut config = Self::builtin();
        config.path = path;
        config.data_dir = crate::paths::data_dir();
        // The new file names only what the user adds; the built-ins stay implicit.
        config.core.builtin_servers = true;
        Ok(config)
    }

    /// Whether `name` is a built-in server of this config that is still as built (so it is not
    /// written into the file).
    pub fn is_implicit_builtin(&self, name: &str) -> bool {
        self.core.builtin_servers
            && Self::builtin()
                .servers
                .get(name)
                .is_some_and(|b| self.servers.get(name) == Some(b))
    }

    /// Parses and validates a file's text; `path` is only used in errors and for relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| toml_error(path, text, &e))?;
        config.path = path.to_path_buf();
        config.from_file = true;
        config.data_dir = crate::paths::data_dir();
        config.validate()?;
        Ok(config)
    }

    /// The built-in servers: this binary's `serve files --root <data dir>/work` (see
    /// [`crate::paths::work_dir`]) and `serve analysis`.
    pub fn builtin() -> Self {
        let exe = std::env::current_exe()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "maljan".into());
        let work = crate::paths::work_dir(&crate::paths::data_dir());
        if let Err(e) = crate::paths::create_private_dir(&work) {
            // The files server then says at start-up that its root is missing.
            tracing::debug!("cannot create {}: {e}", work.display());
        }
        let work = work.to_string_lossy().into_owned();
        let mut servers = BTreeMap::new();
        servers.insert(
            "files".to_string(),
            ServerConfig {
                command: exe.clone(),
                args: vec!["serve".into(), "files".into(), "--root".into(), work],
                enabled: true,
                label: "maljan files (built-in)".into(),
                ..Default::default()
            },
        );
        servers.insert(
            "analysis".to_string(),
            ServerConfig {
                command: exe,
                args: vec!["serve".into(), "analysis".into()],
                enabled: true,
                label: "maljan analysis (built-in)".into(),
                ..Default::default()
            },
        );
        Self {
            servers,
            ..Default::default()
        }
    }

    fn err(&self, key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.path.clone(),
            key: key.into(),
            problem: problem.into(),
        }
    }

    /// Checks what serde cannot: names, required fields per transport, timings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.core.mcp.max_answer_bytes < 1024 {
            return Err(self.err(
                "core.mcp.max_answer_bytes".to_string(),
                "must be at least 1024 (a handshake's answer alone is a few hundred bytes)",
            ));
        }
        let b = &self.core.mcp.breaker;
        let key = "core.mcp.breaker";
        if b.failures_to_open == 0 {
            return Err(self.err(format!("{key}.failures_to_open"), "must be at least 1"));
        }
        for (name, v) in [
            ("cooldown_seconds", b.cooldown_seconds),
            ("call_timeout_seconds", b.call_timeout_seconds),
            ("timeout_margin_seconds", b.timeout_margin_seconds),
            ("connect_timeout_seconds", b.connect_timeout_seconds),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(self.err(
                    format!("{key}.{name}"),
                    format!("must be a number of seconds ≥ 0, not {v}"),
                ));
            }
        }
        if b.call_timeout_seconds == 0.0 {
            return Err(self.err(format!("{key}.call_timeout_seconds"), "must be more than 0"));
        }
        for (name, s) in &self.servers {
            validate_server(&self.path, name, s)?;
        }
        if let Some(llm) = &self.llm {
            llm.validate()
                .map_err(|(key, problem)| self.err(key, problem))?;
        }
        Ok(())
    }

    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.get(name)
    }

    /// Where the ledger and the jobs live: MALJAN_DATABASE_URL (what `--database` sets), else
    /// `core.ledger.database_url`, else SQLite at [`Self::ledger_path`].
    pub fn database_url(&self) -> String {
        match std::env::var("MALJAN_DATABASE_URL") {
            Ok(url) if !url.is_empty() => url,
            _ if !self.core.ledger.database_url.is_empty() => self.core.ledger.database_url.clone(),
            _ => format!("sqlite:{}", self.ledger_path().display()),
        }
    }

    pub fn ledger_path(&self) -> PathBuf {
        if self.core.ledger.path.is_empty() {
            self.data_dir.join("ledger.sqlite3")
        } else {
            PathBuf::from(&self.core.ledger.path)
        }
    }

    /// The directory relative `cwd`s resolve against.
    pub fn base_dir(&self) -> PathBuf {
        if self.from_file {
            self.path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        } else {
            std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
        }
    }

    /// Writes the file (0o600, atomically), creating its directory.
    pub fn save(&self) -> Result<(), ConfigError> {
        use std::{io::Write, os::unix::fs::OpenOptionsExt};
        self.validate()?;
        // The built-ins as built stay out of the file (`core.builtin_servers`).
        let mut written = self.clone();
        written
            .servers
            .retain(|name, _| !self.is_implicit_builtin(name));
        let text = toml::to_string_pretty(&written)
            .map_err(|e| self.err("", format!("cannot serialise: {e}")))?;
        let io = |e: std::io::Error| self.err("", format!("cannot write it: {e}"));
        if let Some(dir) = self.path.parent()
            && !dir.as_os_str().is_empty()
        {
            crate::paths::ensure_private_dir(dir).map_err(io)?;
        }
        let tmp = self
            .path
            .with_extension(format!("toml.tmp{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(b"# maljan configuration (see `maljan servers --help`). Tokens are sealed: enc:v1:...\n")
            .map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

/// A server name: lower-case letter first, then letters, digits, `-` or `_`, at most 32.
pub fn valid_server_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= 32
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-' | '_'))
}

fn validate_server(file: &Path, name: &str, s: &ServerConfig) -> Result<(), ConfigError> {
    let err = |field: &str, problem: String| ConfigError {
        file: file.to_path_buf(),
        key: if field.is_empty() {
            format!("servers.{name}")
        } else {
            format!("servers.{name}.{field}")
        },
        problem,
    };
    if !valid_server_name(name) {
        return Err(err(
            "",
            "a server name starts with a lower-case letter and has at most 32 lower-case letters, digits, '-' or '_'"
                .into(),
        ));
    }
    match s.transport {
        TransportKind::Stdio => {
            if s.command.trim().is_empty() {
                return Err(err(
                    "command",
                    "a stdio server needs the command that starts it".into(),
                ));
            }
            if !s.url.is_empty() {
                return Err(err(
                    "url",
                    "a stdio server has no url (did you mean transport = \"http\"?)".into(),
                ));
            }
        }
        _ => {
            if s.url.is_empty() {
                return Err(err(
                    "url",
                    format!("a {} server needs its url", s.transport),
                ));
            }
            match reqwest::Url::parse(&s.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                Ok(u) => {
                    return Err(err(
                        "url",
                        format!("scheme {} is not http or https", u.scheme()),
                    ));
                }
                Err(e) => return Err(err("url", format!("not a URL: {e}"))),
            }
        }
    }
    if let Some(o) = &s.oauth {
        if !s.transport.is_http() {
            return Err(err(
                "oauth",
                "OAuth is for HTTP servers (a stdio server gets its secrets through env)".into(),
            ));
        }
        if !s.auth_token.is_empty() {
            return Err(err(
                "oauth",
                "set either auth_token (a fixed bearer token) or oauth, not both".into(),
            ));
        }
        if o.grant == OAuthGrant::ClientCredentials && o.client_id.trim().is_empty() {
            return Err(err(
                "oauth.client_id",
                "the client_credentials grant needs the client's registered id".into(),
            ));
        }
        if let Some(bad) = o
            .scopes
            .iter()
            .find(|sc| sc.is_empty() || sc.chars().any(|c| c.is_whitespace() || c == '"'))
        {
            return Err(err(
                "oauth.scopes",
                format!("{bad:?} is not one scope (one word each, no spaces or quotes)"),
            ));
        }
    }
    for var in s.env_allow.iter().chain(s.env.keys()) {
        if var.is_empty() || var.contains('=') || var.contains('\0') {
            return Err(err(
                "env",
                format!("{var:?} is not an environment variable name"),
            ));
        }
    }
    if s.env_allow.iter().any(|v| v == "MALJAN_STAGING_JOB")
        || s.env.contains_key("MALJAN_STAGING_JOB")
    {
        return Err(err(
            "env",
            "MALJAN_STAGING_JOB is set by the runtime, not by configuration".into(),
        ));
    }
    Ok(())
}

fn toml_error(path: &Path, _text: &str, e: &toml::de::Error) -> ConfigError {
    // toml's message names the line, the column and (for unknown or mistyped fields) the key.
    let msg = e.message().to_string();
    let key = e
        .span()
        .and_then(|span| line_of(_text, span.start))
        .map(|(line, col)| format!("line {line}, column {col}"))
        .unwrap_or_default();
    ConfigError {
        file: path.to_path_buf(),
        key,
        problem: msg,
    }
}

fn line_of(text: &str, offset: usize) -> Option<(usize, usize)> {
    let before = text.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    Some((line, col))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_sample_is_on_off_or_the_argument_s_name() {
        let c = Config::parse(
            "[servers.a]\ncommand = \"x\"\npin_sample = true\n\n[servers.b]\ncommand = \"x\"\npin_sample = \"target_file\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let a = c.servers["a"].pin_sample.as_ref().unwrap();
        assert!(a.is_on() && a.param().is_none());
        let b = c.servers["b"].pin_sample.as_ref().unwrap();
        assert_eq!((b.is_on(), b.param()), (true, Some("target_file")));
        assert!(!PinSample::On(false).is_on());
    }

    #[test]
    fn a_file_started_by_an_edit_keeps_the_builtins_out_and_still_has_them() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config.toml");
        let mut c = Config::load_for_edit(Some(&path)).unwrap();
        c.servers.insert(
            "echo".into(),
            ServerConfig {
                command: "/bin/echo-server".into(),
                ..Default::default()
            },
        );
        c.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("builtin_servers = true"), "{text}");
        assert!(!text.contains("[servers.analysis]"), "{text}");
        assert!(!text.contains("[servers.files]"), "{text}");
        let back = Config::load(Some(&path)).unwrap();
        assert_eq!(
            back.servers["analysis"],
            Config::builtin().servers["analysis"]
        );
        assert!(back.servers.contains_key("files") && back.servers.contains_key("echo"));
        // A user's change to a built-in is written, and kept.
        let mut c = Config::load_for_edit(Some(&path)).unwrap();
        c.servers.get_mut("analysis").unwrap().enabled = false;
        c.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("[servers.analysis]"), "{text}");
        assert!(!Config::load(Some(&path)).unwrap().servers["analysis"].enabled);
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let c = Config::parse("", Path::new("/x/config.toml")).unwrap();
        let b = &c.core.mcp.breaker;
        assert_eq!(
            (
                b.failures_to_open,
                b.cooldown_seconds,
                b.max_concurrent_calls
            ),
            (3, 60.0, 4)
        );
    }

    #[test]
    fn errors_name_file_key_and_problem() {
        let e =
            Config::parse("[servers.x]\ntransport = \"http\"\n", Path::new("/c.toml")).unwrap_err();
        assert_eq!(e.key, "servers.x.url");
        assert!(
            e.to_string()
                .starts_with("config file /c.toml: servers.x.url:"),
            "{e}"
        );

        let e = Config::parse("[servers.x]\ncomand = \"a\"\n", Path::new("/c.toml")).unwrap_err();
        assert!(e.to_string().contains("comand"), "{e}");
        assert!(e.to_string().contains("line 2"), "{e}");

        let e =
            Config::parse("[servers.Bad]\ncommand = \"a\"\n", Path::new("/c.toml")).unwrap_err();
        assert_eq!(e.key, "servers.Bad");

        let e = Config::parse(
            "[core.mcp.breaker]\nfailures_to_open = 0\n",
            Path::new("/c.toml"),
        )
        .unwrap_err();
        assert_eq!(e.key, "core.mcp.breaker.failures_to_open");

        let e = Config::parse(
            "[servers.x]\ntransport = \"carrier-pigeon\"\ncommand=\"a\"\n",
            Path::new("/c.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("carrier-pigeon"), "{e}");
    }

    #[test]
    fn the_llm_section_is_read_and_checked() {
        let c = Config::parse(
            "[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodel = \"m\"\nfallbacks = [{ provider = \"anthropic\", model = \"c\" }]\n",
            Path::new("/c.toml"),
        )
        .unwrap();
        let llm = c.llm.unwrap();
        assert_eq!((llm.context_window, llm.fallbacks.len()), (32768, 1));
        let e = Config::parse(
            "[llm]\nprovider = \"gopher\"\nmodel = \"m\"\n",
            Path::new("/c.toml"),
        )
        .unwrap_err();
        assert_eq!(e.key, "llm.provider");
        let e = Config::parse(
            "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nfallbacks = [{ provider = \"openai\", model = \"\" }]\n",
            Path::new("/c.toml"),
        )
        .unwrap_err();
        assert_eq!(e.key, "llm.fallbacks[0].model");
        let e = Config::parse(
            "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://h/v1?key=x\"\n",
            Path::new("/c.toml"),
        )
        .unwrap_err();
        assert_eq!(e.key, "llm.base_url");
    }

    #[test]
    fn the_oauth_table_is_read_and_checked() {
        let c = Config::parse(
            "[servers.saas]\ntransport = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\noauth = { scopes = [\"mcp:tools\"] }\n",
            Path::new("/c.toml"),
        )
        .unwrap();
        let o = c.servers["saas"].oauth.as_ref().unwrap();
        assert_eq!(
            (o.grant, o.scopes.as_slice()),
            (
                OAuthGrant::AuthorizationCode,
                &["mcp:tools".to_string()][..]
            )
        );
        for (text, key) in [
            ("command = \"x\"\noauth = {}", "servers.x.oauth"),
            (
                "transport = \"http\"\nurl = \"http://h/\"\nauth_token = \"t\"\noauth = {}",
                "servers.x.oauth",
            ),
            (
                "transport = \"http\"\nurl = \"http://h/\"\noauth = { grant = \"client_credentials\" }",
                "servers.x.oauth.client_id",
            ),
            (
                "transport = \"http\"\nurl = \"http://h/\"\noauth = { scopes = [\"a b\"] }",
                "servers.x.oauth.scopes",
            ),
        ] {
            let e =
                Config::parse(&format!("[servers.x]\n{text}\n"), Path::new("/c.toml")).unwrap_err();
            assert_eq!(e.key, key, "{text}: {e}");
        }
        let e = Config::parse(
            "[servers.x]\ntransport = \"http\"\nurl = \"http://h/\"\noauth = { grant = \"password\" }\n",
            Path::new("/c.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("password"), "{e}");
    }

    #[test]
    fn round_trips_through_toml() {
        let text = r#"
[servers.remote]
transport = "sse"
url = "http://127.0.0.1:9/sse"
auth_token = "enc:v1:abc"
tools = ["a"]
"#;
        let c = Config::parse(text, Path::new("/c.toml")).unwrap();
        let again = Config::parse(&toml::to_string(&c).unwrap(), Path::new("/c.toml")).unwrap();
        assert_eq!(c.servers, again.servers);
        assert_eq!(c.servers["remote"].transport, TransportKind::Sse);
        assert!(c.servers["remote"].enabled);
    }
}
