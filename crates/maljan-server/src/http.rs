//! Streamable HTTP serving (rmcp's `StreamableHttpService` nested in axum), with the checks a
//! server reachable over a network needs: Host and Origin allow-lists against DNS rebinding, a
//! request size bound, and an optional bearer token compared in constant time.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    serve::ListenerExt as _,
};
use rmcp::ServerHandler;
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

use crate::{
    protocol::McpHandler,
    server::ToolServer,
    staging::{Intake, StagingStore, intake},
};

/// How to serve over HTTP. The defaults suit a server on loopback.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// Host header values accepted (host or host:port). Empty: loopback names when bound to
    /// loopback; any host when bound elsewhere (a public deployment should list its names).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted (scheme://host[:port|:*]). Empty: loopback origins only.
    /// Requests without an Origin header (non-browser clients) always pass.
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub auth_token: Option<String>,
    /// Answer POSTs with application/json where possible instead of an SSE stream.
    pub json_response: bool,
    /// The store behind this server's put_sample tools, when it offers them: their content then
    /// skips rmcp's JSON parser (see [`crate::staging::intake`]).
    pub staging: Option<Arc<StagingStore>>,
}

impl HttpOptions {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: 64 * 1024 * 1024,
            auth_token: None,
            json_response: false,
            staging: None,
        }
    }
}

/// The axum router serving `server` at `/mcp` (for embedding in a larger app).
pub fn router(
    server: Arc<ToolServer>,
    options: &HttpOptions,
    shutdown: CancellationToken,
) -> Router {
    router_with(McpHandler::new(server), options, shutdown)
}

/// The same for any rmcp handler: a server that adds resources or prompts wraps [`McpHandler`].
pub fn router_with<H>(handler: H, options: &HttpOptions, shutdown: CancellationToken) -> Router
where
    H: ServerHandler + Clone,
{
    let mut config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_json_response(options.json_response)
        .with_cancellation_token(shutdown);
    let loopback = options.addr.ip().is_loopback();
    config = if !options.allowed_hosts.is_empty() {
        config.with_allowed_hosts(options.allowed_hosts.clone())
    } else if loopback {
        config.with_allowed_hosts(["localhost", "127.0.0.1", "::1"])
    } else {
        config.disable_allowed_hosts()
    };
    let origins = if options.allowed_origins.is_empty() {
        vec![
            "http://localhost:*".to_string(),
            "http://127.0.0.1:*".into(),
            "http://[::1]:*".into(),
        ]
    } else {
        options.allowed_origins.clone()
    };
    config = config
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = Router::new().nest_service("/mcp", service);
    if let Some(store) = &options.staging {
        let state = Intake {
            store: store.clone(),
            max_body_bytes: options.max_body_bytes,
        };
        router = router.layer(middleware::from_fn_with_state(state, intake));
    }
    match &options.auth_token {
        Some(token) => router.layer(middleware::from_fn_with_state(
            Arc::new(token.clone().into_bytes()),
            require_bearer,
        )),
        None => router,
    }
}

/// Serves `server` over streamable HTTP at `http://ADDR/mcp` until ctrl-c or `shutdown`.
pub async fn serve_http(
    server: Arc<ToolServer>,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    tracing::info!(
        server = server.name(),
        tools = server.listed_tools().count(),
        "starting"
    );
    serve_http_with(McpHandler::new(server), options, shutdown).await
}

/// Serves any rmcp handler at `http://ADDR/mcp` until ctrl-c or `shutdown`.
pub async fn serve_http_with<H>(
    handler: H,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()>
where
    H: ServerHandler + Clone,
{
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", options.addr))?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() && options.auth_token.is_none() {
        tracing::warn!("listening on a non-loopback address without a bearer token");
    }
    tracing::info!("serving streamable HTTP on http://{local}/mcp");
    let app = router_with(handler, &options, shutdown.clone());
    // Without TCP_NODELAY an SSE answer's event, written just after the stream's head, waits
    // for the client's delayed ACK: ~40 ms added to every call, measured on loopback.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set on a connection: {e}");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = shutdown.cancelled() => {}
            }
        })
        .await?;
    Ok(())
}

async fn require_bearer(
    State(token): State<Arc<Vec<u8>>>,
    request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::as_bytes);
    match presented {
        Some(p) if constant_time_eq(p, &token) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a valid bearer token is required\n",
        )
            .into_response(),
    }
}

/// Compares without an early exit, so the time taken does not tell how much of a guess matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | ((a.len() ^ b.len()) >> 8) as u8;
    for (i, byte) in b.iter().enumerate() {
        diff |= a.get(i).copied().unwrap_or(0xff) ^ byte;
    }
    diff == 0 && a.len() == b.len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn constant_time_eq_compares_whole_values() {
        use super::constant_time_eq as eq;
        assert!(eq(b"secret", b"secret"));
        assert!(!eq(b"secreT", b"secret"));
        assert!(!eq(b"secret-longer", b"secret"));
        assert!(!eq(b"", b"secret"));
    }
}
