//! `maljan servers login`: the browser sign-in, once, with the redirect taken on 127.0.0.1;
//! or, for the client-credentials grant, the first token minted.

use std::{path::PathBuf, time::Duration};

use rmcp::transport::auth::{AuthorizationManager, AuthorizationRequest, OAuthState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{OAuthContext, challenge_of, fresh_token, plain};
use crate::config::OAuthGrant;

/// What a finished login says (nothing secret).
#[derive(Debug, Clone)]
pub struct LoginDone {
    pub grant: OAuthGrant,
    pub client_id: String,
    pub scopes: Vec<String>,
    /// Where the sealed tokens are.
    pub file: PathBuf,
    /// Seconds the access token lives, when the server said.
    pub expires_in: Option<u64>,
    pub refreshable: bool,
}

/// Signs in to a server once: for the authorization-code grant, `show_url` gets the address to
/// open in a browser, and the redirect is taken on 127.0.0.1 (one request, within `wait`); for
/// client credentials a first token is minted. Either way the tokens are stored sealed.
pub async fn login(
    url: &str,
    ctx: &OAuthContext,
    wait: Duration,
    show_url: impl FnOnce(&str),
) -> Result<LoginDone, String> {
    match ctx.config.grant {
        OAuthGrant::ClientCredentials => {
            // Start from nothing, so a bad secret shows now and not on the first call.
            let _ = std::fs::remove_file(&ctx.file);
            fresh_token(url, ctx).await?;
        }
        OAuthGrant::AuthorizationCode => browser_login(url, ctx, wait, show_url).await?,
    }
    let held = ctx
        .store()
        .read()
        .map_err(plain)?
        .ok_or("the authorization server gave no token")?;
    let token = held
        .token_response
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_default();
    Ok(LoginDone {
        grant: ctx.config.grant,
        client_id: held.client_id,
        scopes: held.granted_scopes,
        file: ctx.file.clone(),
        expires_in: token.get("expires_in").and_then(|v| v.as_u64()),
        refreshable: token.get("refresh_token").is_some_and(|v| v.is_string()),
    })
}

async fn browser_login(
    url: &str,
    ctx: &OAuthContext,
    wait: Duration,
    show_url: impl FnOnce(&str),
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", ctx.config.redirect_port))
        .await
        .map_err(|e| {
            format!(
                "cannot listen on 127.0.0.1:{} for the redirect: {e}",
                ctx.config.redirect_port
            )
        })?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");

    crate::transport::install_tls_provider();
    let mut manager = AuthorizationManager::new(url).await.map_err(plain)?;
    manager.set_credential_store(ctx.store());
    let mut request = AuthorizationRequest::new(&redirect).with_client_name("maljan");
    if let Some(challenge) = challenge_of(url).await {
        request = request.with_challenge(challenge);
    }
    if !ctx.config.scopes.is_empty() {
        // Signing in again for a scope (a step-up) asks for what the last sign-in was granted as
        // well, so the new token does not lose it (SEP-2350).
        let granted = ctx
            .store()
            .read()
            .ok()
            .flatten()
            .map(|held| held.granted_scopes)
            .unwrap_or_default();
        let mut scopes = granted;
        for s in &ctx.config.scopes {
            if !scopes.contains(s) {
                scopes.push(s.clone());
            }
        }
        request = request.with_scopes(scopes);
    }
    if !ctx.config.client_metadata_url.is_empty() {
        request = request.with_client_metadata_url(ctx.config.client_metadata_url.clone());
    }
    if !ctx.config.client_id.is_empty() {
        request = request.with_preregistered_client(ctx.config.client_id.clone());
        if let Some(secret) = ctx.client_secret()? {
            request = request.with_client_secret(secret.expose());
        }
    }
    let mut state = OAuthState::Unauthorized(manager);
    state.start_authorization(request).await.map_err(plain)?;
    let address = state.get_authorization_url().await.map_err(plain)?;
    let expected_state = query_pairs(address.split_once('?').map_or("", |(_, q)| q))
        .into_iter()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v)
        .ok_or("the authorization URL has no state")?;
    show_url(&address);
    let callback = tokio::time::timeout(wait, take_redirect(&listener, port, &expected_state))
        .await
        .map_err(|_| {
            format!(
                "no sign-in came back within {}",
                crate::transport::human_secs(wait)
            )
        })??;
    state.handle_callback_url(&callback).await.map_err(plain)
}

const SIGNED_IN: &str = "<!doctype html><meta charset=utf-8><title>maljan</title><p>Signed in. You can close this tab and go back to maljan.</p>";

/// Takes the browser's redirect: the first request for /callback that carries this sign-in's
/// `state` (anything else, a favicon or a request another local program forged, is refused and
/// the listener waits on). Answers it, and returns the full redirect URL.
async fn take_redirect(
    listener: &tokio::net::TcpListener,
    port: u16,
    expected_state: &str,
) -> Result<String, String> {
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let pairs = query_pairs(query);
        let state_matches = pairs
            .iter()
            .any(|(k, v)| k == "state" && v == expected_state);
        if path != "/callback" || !state_matches {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let refused = pairs
            .into_iter()
            .find(|(k, _)| k == "error")
            .map(|(_, v)| v);
        let page = match &refused {
            None => SIGNED_IN.to_string(),
            Some(why) => format!(
                "<!doctype html><meta charset=utf-8><title>maljan</title><p>Sign-in failed: {}.</p>",
                why.replace(['<', '>', '&', '"'], "")
            ),
        };
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                )
                .as_bytes(),
            )
            .await;
        let _ = stream.shutdown().await;
        return match refused {
            Some(why) => Err(format!(
                "the authorization server refused the sign-in: {why}"
            )),
            None => Ok(format!("http://127.0.0.1:{port}{target}")),
        };
    }
}

fn query_pairs(query: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://x/?{query}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}
