//! Streamable HTTP serving (rmcp's `StreamableHttpService` nested in axum), with the checks a
//! server reachable over a network needs: Host and Origin allow-lists against DNS rebinding, a
//! request size bound, and an optional bearer token compared in constant time. An initialize
//! that left out fields is completed before rmcp reads it, as on stdio
//! ([`crate::protocol::complete_initialize`]).

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    serve::ListenerExt as _,
};
use rmcp::ServerHandler;
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};
use serde_json::Value;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::{
    protocol::{McpHandler, complete_initialize},
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
    let mut router = Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn(complete_initialize_body));
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

/// An initialize body is at most this long to be looked at: one is a few hundred bytes.
const INITIALIZE_MAX_BYTES: usize = 64 * 1024;

/// Completes an initialize that left out fields ([`complete_initialize`]), which rmcp would
/// not start a session for. Only a small POST that could open a session is read: one without
/// Mcp-Session-Id and MCP-Protocol-Version, which every later request carries. Every other
/// request passes untouched, and so does a body that needs nothing.
async fn complete_initialize_body(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let could_open_a_session = request.method() == Method::POST
        && !headers.contains_key("mcp-session-id")
        && !headers.contains_key("mcp-protocol-version")
        && content_length(headers).is_some_and(|n| n <= INITIALIZE_MAX_BYTES);
    if !could_open_a_session {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, INITIALIZE_MAX_BYTES).await else {
        return (
            StatusCode::BAD_REQUEST,
            "the request body could not be read\n",
        )
            .into_response();
    };
    let completed = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|mut message| complete_initialize(&mut message).then(|| message.to_string()));
    let body = match completed {
        Some(completed) => {
            parts
                .headers
                .insert(header::CONTENT_LENGTH, completed.len().into());
            Body::from(completed)
        }
        None => Body::from(bytes),
    };
    next.run(Request::from_parts(parts, body)).await
}

fn content_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
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
