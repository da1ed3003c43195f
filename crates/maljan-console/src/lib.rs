//! maljan-console: the web console over the client runtime and the agent — `maljan console`.
//!
//! It owns the console's HTTP surface: server-rendered pages (`pages`, with the servers' pages in
//! `server_pages` and the jobs' and the ledger's in `job_pages`; minijinja templates and one
//! small script and style sheet compiled into the binary by `views`), the JSON API under
//! `/api/v1` that the pages and scripts use (`api`, its bodies in `api_types`, described as
//! OpenAPI 3.1 at `/api/v1/openapi.json` by `openapi`), who may use them (`auth`: the owner's
//! login URL, an argon2 admin password, API tokens with scopes, sessions; `security`: the guard
//! every request passes — authentication on loopback too, scopes, one CSRF check, Host/Origin
//! checks, body caps, security headers; `throttle`: failed logins back off per client), the
//! servers it edits (`servers`: the same validation as `maljan servers add`, tokens sealed by
//! maljan-client's secrets), the jobs (`jobs`: submissions queued on the console's database and
//! run by its embedded workers through the one pipeline `maljan analyze` runs, progress kept in
//! the ledger for resumable event streams, the report kept beside it) and the searches the
//! ledger's own API has no query for (`browse`: jobs by name, SHA-256 and verdict; every job's
//! calls).
//!
//! It depends on maljan-client (config, runtime, ledger, secrets), maljan-triage (plan, report
//! renderers) and maljan-agent (the stages). It must not depend on a concrete server crate, on
//! rmcp or on a transport, and nothing else in the workspace depends on it but the binary.

pub mod api;
pub mod api_types;
pub mod auth;
pub mod browse;
pub mod job_pages;
pub mod jobs;
pub mod openapi;
pub mod pages;
pub mod security;
pub mod server_pages;
pub mod servers;
pub mod state;
pub mod throttle;
pub mod views;

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use axum::{Router, extract::DefaultBodyLimit, middleware};

pub use auth::{AuthStore, Scope};
pub use state::AppState;

/// What `maljan console` is started with.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    pub listen: SocketAddr,
    /// The runtime config file (None: MALJAN_CONFIG, else `<data dir>/config.toml`).
    pub config: Option<PathBuf>,
    /// The largest sample a job accepts, in bytes.
    pub max_sample_bytes: u64,
    /// Serve the runtime's Prometheus `/metrics` (maljan-client's metrics) on the same listener.
    pub metrics: bool,
    /// The embedded workers and the sample store (see `jobs`).
    pub jobs: jobs::JobOptions,
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8700)),
            config: None,
            max_sample_bytes: 64 * 1024 * 1024,
            metrics: false,
            jobs: jobs::JobOptions::default(),
        }
    }
}

/// The whole console: pages, API and assets behind the security layer.
pub fn router(state: Arc<AppState>) -> Router {
    // Bodies: a sample plus its form fields at most; the handlers give the clear error first.
    let limit = usize::try_from(state.opts.max_sample_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(1 << 20);
    let mut routes = Router::new();
    if state.opts.metrics {
        // Behind the same guard as every page: a login where the console asks for one.
        routes = routes.route(
            "/metrics",
            axum::routing::get(|s: axum::extract::State<Arc<AppState>>| async move {
                let text = s.runtime().render_metrics();
                (
                    [(
                        http::header::CONTENT_TYPE,
                        maljan_client::metrics::CONTENT_TYPE,
                    )],
                    text,
                )
            }),
        );
    }
    routes
        .merge(pages::routes())
        .nest("/api/v1", api::routes())
        .merge(views::asset_routes())
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            security::guard,
        ))
        .with_state(state)
}

/// A console bound to its address, ready to be served. The binary serves `app` on `listener`
/// with the same connection limits as `maljan serve --http` (a connection cap and a deadline
/// for each request's head).
pub struct Bound {
    pub state: Arc<AppState>,
    pub listener: tokio::net::TcpListener,
    pub app: Router,
    pub addr: SocketAddr,
    /// The owner's login URL. It holds a secret: print it once, never log it.
    pub login_url: String,
    /// The 0600 file it is also kept in.
    pub login_file: PathBuf,
}

/// Opens the console's state, binds its address and writes the owner's login URL into a 0600
/// file in the data directory (see `auth`).
pub async fn bind(opts: ConsoleOptions) -> anyhow::Result<Bound> {
    let state = AppState::open(opts.clone())?;
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", opts.listen))?;
    let addr = listener.local_addr()?;
    let login_url = login_url(addr, state.auth.owner_token());
    let login_file = AuthStore::login_file_in(&state.data_dir);
    auth::write_private(&login_file, &format!("{login_url}\n"))
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", login_file.display()))?;
    // The address only: the URL's token is never logged.
    tracing::info!(
        "maljan console on http://{addr}/ (every request authenticated: the login URL is in {})",
        login_file.display()
    );
    state.test_all_servers_in_background();
    Ok(Bound {
        app: router(state.clone()),
        state,
        listener,
        addr,
        login_url,
        login_file,
    })
}

/// `http://HOST:PORT/login?token=…` on the address a browser on this machine reaches.
pub fn login_url(addr: SocketAddr, token: &str) -> String {
    use std::net::IpAddr;
    let host = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() || v4.is_loopback() => "127.0.0.1".to_string(),
        IpAddr::V6(v6) if v6.is_unspecified() || v6.is_loopback() => "[::1]".to_string(),
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    format!("http://{host}:{}/login?token={token}", addr.port())
}
