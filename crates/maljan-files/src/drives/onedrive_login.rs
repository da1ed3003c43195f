//! `FA_onedrive_device_code_login`: the OAuth 2.0 device authorization grant (RFC 8628) against
//! the Microsoft identity platform, as MSAL's device flow runs it — `POST
//! {login}/{tenant}/oauth2/v2.0/devicecode`, show the sign-in message to the human, then poll
//! `…/oauth2/v2.0/token` every `interval` seconds until they sign in, decline, or the code
//! expires. The token it gets is installed in the profile for this server's lifetime, like
//! `FA_onedrive_later_init`; the answer never holds it.
//!
//! The sign-in message (a URL and a short code, not a credential of this server) goes to the
//! caller as a progress notification; a caller that asked for none gets it on the server's log,
//! where automation-file puts it.

use std::{sync::Arc, time::Duration};

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use reqwest::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Api, Drives, Service, str_of};
use crate::storage::default_profile;

/// automation-file's default scopes.
const DEFAULT_SCOPES: [&str; 2] = ["Files.ReadWrite", "Files.ReadWrite.All"];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Login {
    /// The application (client) id of a public client app registration.
    client_id: String,
    /// The directory: `common`, `organizations`, `consumers` or a tenant id (default: the
    /// profile's tenant_id, else `common`).
    #[serde(default)]
    tenant_id: Option<String>,
    /// The scopes asked for (default Files.ReadWrite, Files.ReadWrite.All).
    #[serde(default)]
    scopes: Option<Vec<String>>,
    /// Seconds to wait for the human to sign in (the code's own expiry comes first).
    #[serde(default = "default_timeout")]
    #[schemars(default = "default_timeout", range(min = 1, max = 3600))]
    timeout: u64,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

fn default_timeout() -> u64 {
    300
}

#[derive(Serialize, JsonSchema)]
struct LoggedIn {
    backend: &'static str,
    profile: String,
    token_type: Option<String>,
    /// The scopes granted.
    scope: Option<String>,
    /// Seconds the access token is valid for.
    expires_in: Option<u64>,
    /// Whether the identity platform also gave a refresh token (kept by no one: this server
    /// holds the access token only, in memory).
    refresh_token_issued: bool,
}

fn directory(tenant: &str) -> Result<&str, ToolError> {
    let ok = !tenant.is_empty()
        && tenant.len() <= 128
        && tenant
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if ok {
        Ok(tenant)
    } else {
        Err(ToolError::bad_argument(
            "tenant_id must be common, organizations, consumers, a tenant id or a domain",
        ))
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    let mut f = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        f.append_pair(k, v);
    }
    f.finish()
}

async fn post_form(
    api: &Api,
    url: &str,
    pairs: &[(&str, &str)],
) -> Result<(reqwest::StatusCode, Value), ToolError> {
    let req = api
        .request(Method::POST, url)?
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs));
    api.exchange(req).await
}

async fn login(d: &Drives, ctx: &ToolContext, a: Login) -> Result<LoggedIn, ToolError> {
    if a.client_id.trim().is_empty() {
        return Err(ToolError::bad_argument("client_id is empty"));
    }
    let api = d.anonymous_api(Service::OneDrive, &a.profile)?;
    let tenant = a
        .tenant_id
        .clone()
        .or_else(|| api.settings.tenant_id.clone())
        .unwrap_or_else(|| "common".into());
    let base = format!("{}/{}/oauth2/v2.0", api.auth_url, directory(&tenant)?);
    let scopes = match &a.scopes {
        Some(s) if !s.is_empty() => s.join(" "),
        _ => DEFAULT_SCOPES.join(" "),
    };
    let client_id = a.client_id.trim();
    let (status, flow) = post_form(
        &api,
        &format!("{base}/devicecode"),
        &[("client_id", client_id), ("scope", &scopes)],
    )
    .await?;
    let (Some(device_code), Some(message)) =
        (str_of(&flow, "device_code"), str_of(&flow, "message"))
    else {
        return Err(ToolError::tool_failed(format!(
            "the device-code login could not start ({}): {}",
            status.as_u16(),
            str_of(&flow, "error_description")
                .or_else(|| str_of(&flow, "error"))
                .unwrap_or_else(|| "no device code".into())
        )));
    };
    if ctx.wants_progress() {
        ctx.progress(0.0, None, Some(message));
    } else {
        tracing::warn!(target: "maljan_files::onedrive", "{message}");
    }
    let expires = flow
        .get("expires_in")
        .and_then(Value::as_u64)
        .unwrap_or(900);
    let mut interval = flow
        .get("interval")
        .and_then(Value::as_u64)
        .unwrap_or(5)
        .max(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(expires.min(a.timeout));
    loop {
        tokio::select! {
            _ = ctx.cancellation().cancelled() => return Err(crate::paths::cancelled()),
            _ = tokio::time::sleep(Duration::from_secs(interval)) => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ToolError::timeout(
                "nobody completed the device-code sign-in in time",
            ));
        }
        let (status, answer) = post_form(
            &api,
            &format!("{base}/token"),
            &[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("client_id", client_id),
                ("device_code", &device_code),
            ],
        )
        .await?;
        if let Some(token) = str_of(&answer, "access_token").filter(|_| status.is_success()) {
            d.install_token(Service::OneDrive, &a.profile, token, "access_token")?;
            return Ok(LoggedIn {
                backend: "onedrive",
                profile: a.profile,
                token_type: str_of(&answer, "token_type"),
                scope: str_of(&answer, "scope"),
                expires_in: answer.get("expires_in").and_then(Value::as_u64),
                refresh_token_issued: answer.get("refresh_token").is_some(),
            });
        }
        match str_of(&answer, "error").as_deref() {
            Some("authorization_pending") => {}
            Some("slow_down") => interval += 5,
            Some(code) => {
                return Err(ToolError::not_configured(format!(
                    "the device-code login failed: {code}: {}",
                    str_of(&answer, "error_description")
                        .unwrap_or_default()
                        .chars()
                        .take(300)
                        .collect::<String>()
                )));
            }
            None => {
                return Err(ToolError::tool_failed(format!(
                    "the token endpoint answered {} without a token or an error",
                    status.as_u16()
                )));
            }
        }
    }
}

pub(super) fn register(reg: &mut Registry, drives: &Arc<Drives>) {
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_device_code_login",
            "Sign in to OneDrive with the device-code flow: the sign-in message (a URL and a code \
             for a human) comes as a progress notification; once they sign in, the access token is \
             set for the profile for this server's lifetime (never echoed).",
        )
        .not_idempotent()
        .open_world()
        .timeout_s(3700),
        move |ctx: ToolContext, a: Login| {
            let d = d.clone();
            async move { login(&d, &ctx, a).await }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_cannot_leave_their_path_segment() {
        assert!(directory("organizations").is_ok());
        assert!(directory("contoso.onmicrosoft.com").is_ok());
        for bad in ["", "a/b", "x?y", "../common"] {
            assert!(directory(bad).is_err(), "{bad}");
        }
        assert_eq!(form(&[("scope", "a b")]), "scope=a+b");
    }
}
