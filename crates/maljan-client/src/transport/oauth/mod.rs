//! OAuth 2.1 for remote servers: the client side of MCP authorization, through rmcp's `auth`
//! module, which does the protocol: protected resource metadata found from the 401's
//! `WWW-Authenticate` (RFC 9728), authorization server metadata (RFC 8414 / OIDC discovery),
//! PKCE S256, resource indicators (RFC 8707) on every token request, dynamic client registration
//! (RFC 7591) or a configured client id, refresh before expiry and once after a rejected token,
//! and the client-credentials grant.
//!
//! This module adds only what rmcp leaves to its user:
//! - where tokens live: sealed with [`crate::secrets`] (enc:v1), one file per server,
//!   `<data dir>/oauth/NAME.sealed` (0o600), rewritten on every refresh;
//! - the loopback listener `maljan servers login` takes the browser's redirect on, once;
//! - a new client-credentials token when the held one is about to expire (rmcp refreshes only
//!   with a refresh token, which that grant does not get).
//!
//! Nothing here logs or prints a token, a code or a client secret.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, ClientCredentialsConfig, CredentialStore,
    OAuthClientConfig, StoredCredentials,
};

mod login;

pub use login::{LoginDone, login};

use crate::{
    config::{OAuthConfig, OAuthGrant},
    redact::scrub_urls,
    secrets::{KeySource, Secret},
};

/// Where a server's tokens are kept, sealed.
pub fn credentials_file(data_dir: &Path, server: &str) -> PathBuf {
    data_dir.join("oauth").join(format!("{server}.sealed"))
}

/// A server's OAuth settings with what opens them: the transport's view of `[servers.NAME.oauth]`.
#[derive(Debug, Clone)]
pub struct OAuthContext {
    pub server: String,
    pub config: OAuthConfig,
    pub keys: KeySource,
    /// See [`credentials_file`].
    pub file: PathBuf,
}

impl OAuthContext {
    /// The server's sealed token file, read and written as it is (no minting).
    fn store(&self) -> SealedStore {
        SealedStore {
            file: self.file.clone(),
            keys: self.keys.clone(),
            mint: None,
        }
    }

    pub fn new(server: &str, config: OAuthConfig, keys: KeySource, data_dir: &Path) -> Self {
        Self {
            server: server.to_string(),
            config,
            file: credentials_file(data_dir, server),
            keys,
        }
    }

    fn client_secret(&self) -> Result<Option<Secret>, String> {
        let stored = self.config.client_secret.trim();
        if stored.is_empty() {
            return Ok(None);
        }
        if !crate::secrets::is_sealed(stored) {
            tracing::warn!(server = %self.server, "oauth.client_secret is stored in plain text; seal it with `maljan servers login {}`", self.server);
            return Ok(Some(Secret::new(stored)));
        }
        self.keys
            .open(stored)
            .map(Some)
            .map_err(|e| format!("servers.{}.oauth.client_secret: {e}", self.server))
    }

    fn login_hint(&self) -> String {
        format!("run `maljan servers login {}`", self.server)
    }
}

/// How a failure reads for a person: rmcp's words, without a URL's query string.
fn plain(e: AuthError) -> String {
    scrub_urls(&e.to_string())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// True when the held access token is missing or has less left than rmcp's own refresh margin
/// (the smaller of 30 s and half its lifetime).
fn needs_new(c: &StoredCredentials) -> bool {
    let Some(token) = &c.token_response else {
        return true;
    };
    let expires_in = serde_json::to_value(token)
        .ok()
        .and_then(|v| v.get("expires_in").and_then(|e| e.as_u64()));
    match (expires_in, c.token_received_at) {
        (Some(life), Some(at)) => {
            let left = life.saturating_sub(now_secs().saturating_sub(at));
            left < 30u64.min(life / 2).max(1)
        }
        _ => false,
    }
}

/// Mints client-credentials tokens: a manager configured for that grant alone.
struct Minter {
    manager: AuthorizationManager,
    grant: ClientCredentialsConfig,
    client_id: String,
}

impl Minter {
    async fn mint(&self) -> Result<StoredCredentials, AuthError> {
        let token = self
            .manager
            .exchange_client_credentials(&self.grant)
            .await?;
        let scopes = serde_json::to_value(&token)
            .ok()
            .and_then(|v| v.get("scope").and_then(|s| s.as_str().map(str::to_string)))
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        Ok(StoredCredentials::new(
            self.client_id.clone(),
            Some(token),
            scopes,
            Some(now_secs()),
        ))
    }
}

/// rmcp's credential store, sealed at rest (see the module doc).
struct SealedStore {
    file: PathBuf,
    keys: KeySource,
    mint: Option<Arc<Minter>>,
}

impl SealedStore {
    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(AuthError::CredentialStoreError(format!(
                    "cannot read {}: {e}",
                    self.file.display()
                )));
            }
        };
        let opened = self.keys.open(text.trim()).map_err(|e| {
            AuthError::CredentialStoreError(format!("{}: {e}", self.file.display()))
        })?;
        serde_json::from_str(opened.expose())
            .map(Some)
            .map_err(|_| {
                AuthError::CredentialStoreError(format!(
                    "{} does not hold maljan's OAuth credentials",
                    self.file.display()
                ))
            })
    }

    fn write(&self, c: &StoredCredentials) -> Result<(), AuthError> {
        use std::os::unix::fs::OpenOptionsExt;
        let fail = |e: String| AuthError::CredentialStoreError(e);
        let json = serde_json::to_string(c).map_err(|e| fail(e.to_string()))?;
        let sealed = self
            .keys
            .seal(&Secret::new(json))
            .map_err(|e| fail(e.to_string()))?;
        let io = |e: std::io::Error| fail(format!("cannot write {}: {e}", self.file.display()));
        if let Some(dir) = self.file.parent() {
            crate::paths::ensure_private_dir(dir).map_err(io)?;
        }
        let tmp = self
            .file
            .with_extension(format!("sealed.tmp{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        std::io::Write::write_all(&mut f, format!("{sealed}\n").as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.file).map_err(io)
    }
}

#[async_trait::async_trait]
impl CredentialStore for SealedStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let held = self.read()?;
        if let Some(minter) = &self.mint
            && held.as_ref().is_none_or(needs_new)
        {
            let fresh = minter.mint().await?;
            self.write(&fresh)?;
            tracing::debug!("minted a new client-credentials token");
            return Ok(Some(fresh));
        }
        Ok(held)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(&credentials)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.file) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(AuthError::CredentialStoreError(e.to_string())),
        }
    }
}

/// An HTTP client for rmcp's streamable transport that adds the server's access token to every
/// request, refreshing (or, for client credentials, minting) it as it nears expiry.
pub(crate) async fn authorized_client(
    url: &str,
    ctx: &OAuthContext,
) -> Result<AuthClient<reqwest::Client>, String> {
    // Also installs the TLS provider rmcp's own OAuth HTTP client needs.
    let http = super::http_client();
    let mut manager = AuthorizationManager::new(url).await.map_err(plain)?;
    match ctx.config.grant {
        OAuthGrant::AuthorizationCode => {
            manager.set_credential_store(ctx.store());
            if !manager.initialize_from_store().await.map_err(plain)? {
                return Err(format!(
                    "no OAuth sign-in is stored for this server: {}",
                    ctx.login_hint()
                ));
            }
            // initialize_from_store configures a public client; a confidential one refreshes
            // with its secret.
            if let Some(secret) = ctx.client_secret()? {
                let (client_id, _) = manager.get_credentials().await.map_err(plain)?;
                manager
                    .configure_client(
                        OAuthClientConfig::new(client_id, "http://127.0.0.1/callback")
                            .with_client_secret(secret.expose()),
                    )
                    .map_err(plain)?;
            }
        }
        OAuthGrant::ClientCredentials => {
            let secret = ctx.client_secret()?.ok_or_else(|| {
                format!(
                    "the client_credentials grant needs servers.{}.oauth.client_secret: {}",
                    ctx.server,
                    ctx.login_hint()
                )
            })?;
            // Discovery starts from the server's own challenge, which also names the scopes it
            // wants when the configuration names none (then the resource metadata's).
            let challenge = challenge_of(url).await;
            let metadata = manager
                .resolve_metadata_from_challenge(challenge.as_deref())
                .await
                .map_err(plain)?
                .metadata;
            let scopes = if ctx.config.scopes.is_empty() {
                let mut s = manager.select_initial_scopes(&[]).await;
                s.retain(|s| s != "offline_access");
                s
            } else {
                ctx.config.scopes.clone()
            };
            let grant = ClientCredentialsConfig::ClientSecret {
                client_id: ctx.config.client_id.clone(),
                client_secret: secret.expose().to_string(),
                scopes,
                // RFC 8707: the token is for this server (its URL is the MCP resource's name).
                resource: Some(url.to_string()),
            };
            let mut minting = AuthorizationManager::new(url).await.map_err(plain)?;
            minting.set_metadata(metadata.clone());
            minting
                .validate_client_credentials_metadata(&grant)
                .map_err(plain)?;
            minting
                .configure_client_credentials(&grant)
                .map_err(plain)?;
            manager.set_metadata(metadata);
            manager
                .configure_client_credentials(&grant)
                .map_err(plain)?;
            manager.set_credential_store(SealedStore {
                mint: Some(Arc::new(Minter {
                    manager: minting,
                    client_id: ctx.config.client_id.clone(),
                    grant,
                })),
                ..ctx.store()
            });
        }
    }
    Ok(AuthClient::new(http, manager))
}

/// A current access token (for the legacy SSE transport, which takes a fixed one).
pub(crate) async fn bearer_now(url: &str, ctx: &OAuthContext) -> Result<Secret, super::Unanswered> {
    fresh_token(url, ctx)
        .await
        .map_err(super::Unanswered::Unreachable)
}

async fn fresh_token(url: &str, ctx: &OAuthContext) -> Result<Secret, String> {
    let client = authorized_client(url, ctx).await?;
    let token = client.get_access_token().await.map_err(|e| match e {
        AuthError::AuthorizationRequired => format!(
            "the stored OAuth sign-in has expired and cannot be refreshed: {}",
            ctx.login_hint()
        ),
        e => plain(e),
    })?;
    Ok(Secret::new(token))
}

/// The `WWW-Authenticate` challenge of the server's 401 to an unauthenticated request: rmcp starts
/// discovery from its `resource_metadata` (RFC 9728) and `scope`.
async fn challenge_of(url: &str) -> Option<String> {
    // The client's first request: `server/discover` (2026-07-28) and, for an older server that
    // lets it through, `initialize`. A server may leave either unprotected and challenge only
    // the other, so each is asked until one answers 401.
    let discover = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}}
    });
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "maljan", "version": env!("CARGO_PKG_VERSION")}}
    });
    for (body, version) in [(discover, "2026-07-28"), (initialize, "2025-11-25")] {
        let Ok(answer) = super::http_client()
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .json(&body)
            .timeout(Duration::from_secs(15))
            .send()
            .await
        else {
            return None;
        };
        if answer.status() == reqwest::StatusCode::UNAUTHORIZED {
            return answer
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
        }
    }
    None
}

/// The streamable-HTTP handshake with the server's token on every request.
pub(crate) async fn handshake(
    url: &str,
    config: rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
    ctx: &OAuthContext,
    timeout: Duration,
    policy: crate::config::InputPolicy,
) -> Result<
    rmcp::service::RunningService<rmcp::RoleClient, super::input::Unattended>,
    super::Unanswered,
> {
    use super::Unanswered;
    let client = tokio::time::timeout(timeout, authorized_client(url, ctx))
        .await
        .map_err(|_| {
            Unanswered::Unreachable(format!(
                "no OAuth metadata within {}",
                super::human_secs(timeout)
            ))
        })?
        .map_err(Unanswered::Unreachable)?;
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
    // A server that still asks for authorization after the client did its part (no stored
    // sign-in, a refresh token it no longer takes) needs a person: say which command.
    super::handshake(transport, timeout, policy)
        .await
        .map_err(|u| match u {
            Unanswered::Unreachable(why) if why.to_lowercase().contains("auth") => {
                Unanswered::Unreachable(format!("{why} (sign in again: {})", ctx.login_hint()))
            }
            other => other,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(expires_in: u64, received_ago: u64) -> StoredCredentials {
        let token: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
            serde_json::json!({"access_token": "a", "token_type": "bearer", "expires_in": expires_in}),
        )
        .unwrap();
        StoredCredentials::new(
            "c".into(),
            Some(token),
            vec![],
            Some(now_secs() - received_ago),
        )
    }

    #[test]
    fn a_token_is_renewed_inside_rmcps_margin_only() {
        assert!(!needs_new(&creds(3600, 10)));
        assert!(needs_new(&creds(3600, 3580)));
        assert!(needs_new(&creds(4, 3)));
        assert!(!needs_new(&creds(4, 0)));
        assert!(needs_new(&StoredCredentials::new(
            "c".into(),
            None,
            vec![],
            None
        )));
    }

    #[test]
    fn the_store_seals_what_it_keeps() {
        if std::env::var_os("MALJAN_SECRET_KEY").is_some() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let store = SealedStore {
            file: credentials_file(dir.path(), "saas"),
            keys: KeySource::in_dir(dir.path()),
            mint: None,
        };
        assert!(store.read().unwrap().is_none());
        store.write(&creds(60, 0)).unwrap();
        let text = std::fs::read_to_string(&store.file).unwrap();
        assert!(text.starts_with("enc:v1:") && !text.contains("access_token"));
        assert_eq!(store.read().unwrap().unwrap().client_id, "c");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store.file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
