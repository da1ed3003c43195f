//! Streamable HTTP serving (rmcp's `StreamableHttpService` nested in axum), with the checks a
//! server reachable over a network needs: Host and Origin allow-lists against DNS rebinding, a
//! request size bound (see [`crate::http_guard`]), an optional bearer token compared in
//! constant time, and bounds on what a client can hold before it authenticates: a connection
//! cap, a deadline for a request's head (which also closes an idle kept-alive connection), a
//! session cap, and idle sessions expired.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use rmcp::ServerHandler;
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::{LocalSessionManager, SessionConfig},
};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::{
    http_guard::{MessageLimits, read_message, refuse_malformed},
    metrics::Metrics,
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
    /// The most connections served at once; more wait in the listen queue until one closes.
    pub max_connections: usize,
    /// How long a client has to send a request's head, counted from the connection's start or
    /// from the end of its previous exchange: so it also closes an idle kept-alive connection.
    pub header_timeout: Duration,
    /// A session that has seen no request for this long is closed and forgotten.
    pub session_idle: Duration,
    /// The most sessions open at once; an initialize beyond them gets 503 with Retry-After.
    pub max_sessions: usize,
    /// Serve `GET /metrics` (OpenMetrics text, see [`crate::metrics`]) beside `/mcp`, behind the
    /// same bearer token. It holds names and counts only, nothing a caller sent.
    pub metrics: Option<Arc<Metrics>>,
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
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            session_idle: SessionConfig::DEFAULT_KEEP_ALIVE,
            max_sessions: 1000,
            metrics: None,
        }
    }
}

/// The axum router serving `server` at `/mcp` (for embedding in a larger app).
pub fn router(
    server: Arc<ToolServer>,
    options: &HttpOptions,
    shutdown: CancellationToken,
) -> Router {
    router_with(
        McpHandler::new(server).with_metrics(options.metrics.clone()),
        options,
        shutdown,
    )
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
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(options.session_idle);
    let sessions = Arc::new(sessions);
    let limits = MessageLimits {
        max_body_bytes: options.max_body_bytes,
        sessions: sessions.clone(),
        max_sessions: options.max_sessions,
    };
    let service = StreamableHttpService::new(move || Ok(handler.clone()), sessions, config);
    let mut router = Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(limits, read_message));
    if let Some(metrics) = &options.metrics {
        let metrics = metrics.clone();
        router = router.route(
            "/metrics",
            axum::routing::get(move || {
                let text = metrics.render();
                async move { ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text) }
            }),
        );
    }
    if let Some(store) = &options.staging {
        let state = Intake {
            store: store.clone(),
            max_body_bytes: options.max_body_bytes,
        };
        router = router.layer(middleware::from_fn_with_state(state, intake));
    }
    if let Some(token) = &options.auth_token {
        router = router.layer(middleware::from_fn_with_state(
            Arc::new(token.clone().into_bytes()),
            require_bearer,
        ));
    }
    router.layer(middleware::from_fn_with_state(
        options.max_body_bytes,
        refuse_malformed,
    ))
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
    server.start();
    let handler = McpHandler::new(server).with_metrics(options.metrics.clone());
    serve_http_with(handler, options, shutdown).await
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
    accept_loop(listener, app, &options, shutdown).await;
    Ok(())
}

/// Serves connections until ctrl-c or `shutdown`, at most `max_connections` at once, each with
/// hyper's head deadline (axum's own `serve` sets none). Then lets open exchanges finish.
/// Each request carries its peer's address (`axum::extract::ConnectInfo<SocketAddr>`). Public
/// so that another axum app (the web console) gets the same limits from the same code.
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    options: &HttpOptions,
    shutdown: CancellationToken,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let slots = Arc::new(tokio::sync::Semaphore::new(options.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    let stop = async {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = shutdown.cancelled() => {}
        }
    };
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = async {
                let slot = slots.clone().acquire_owned().await;
                (slot, listener.accept().await)
            } => accepted,
        };
        let (Ok(slot), accepted) = accepted else {
            break;
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, or a connection reset while queued: not the server's end.
                tracing::debug!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // Without TCP_NODELAY an SSE answer's event, written just after the stream's head, waits
        // for the client's delayed ACK: ~40 ms added to every call, measured on loopback.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set on a connection: {e}");
        }
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
            let mut request = request.map(axum::body::Body::new);
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            tower::ServiceExt::oneshot(app.clone(), request)
        });
        let connection = graceful.watch(http1.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("connections still open at shutdown were dropped");
    }
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
        .and_then(bearer_token);
    // Compared without an early exit, so the time taken does not tell how much of a guess
    // matched.
    match presented {
        Some(p) if bool::from(p.as_bytes().ct_eq(&token)) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a valid bearer token is required\n",
        )
            .into_response(),
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is matched without
/// regard to case, as HTTP auth schemes are (RFC 9110 §11.1): `bearer` and `BEARER` too.
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use tower::ServiceExt;

    #[test]
    fn the_bearer_scheme_is_matched_without_regard_to_case() {
        for value in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "BeArEr  s3cret",
        ] {
            assert_eq!(bearer_token(value), Some("s3cret"), "{value}");
        }
        for value in [
            "Basic s3cret",
            "Bearers3cret",
            "Bearer",
            "Token Bearer s3cret",
        ] {
            assert_eq!(bearer_token(value), None, "{value}");
        }
    }

    async fn status_with(authorization: Option<&str>) -> u16 {
        let router = Router::new()
            .route("/mcp", axum::routing::get(|| async { "in" }))
            .layer(middleware::from_fn_with_state(
                Arc::new(b"s3cret".to_vec()),
                require_bearer,
            ));
        let mut request = Request::get("/mcp");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let response = router
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        response.status().as_u16()
    }

    #[tokio::test]
    async fn only_the_whole_token_in_any_case_of_the_scheme_is_let_in() {
        for good in ["Bearer s3cret", "bearer s3cret", "BEARER s3cret"] {
            assert_eq!(status_with(Some(good)).await, 200, "{good}");
        }
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret-and-more"),
            Some("Bearer S3CRET"),
            Some("Bearer "),
            Some("Basic s3cret"),
        ] {
            assert_eq!(status_with(bad).await, 401, "{bad:?}");
        }
    }
}
